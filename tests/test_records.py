"""`@record`: frozen-dataclass semantics with the faster constructor."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from onnx_roofline.costs.cost import CompositeCost, Cost
from onnx_roofline.records import record
from onnx_roofline.model.tensors import TensorInfo


@record
class Point:
    x: int
    y: int = 2
    label: str | None = None


def test_fields_defaults_and_keywords():
    assert Point(1) == Point(x=1, y=2, label=None)
    assert Point(1, label="a").label == "a"
    assert Point(3, 4).y == 4


def test_frozen():
    point = Point(1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        point.x = 5
    with pytest.raises(dataclasses.FrozenInstanceError):
        del point.y
    # Slotted, so no new attribute either (CPython 3.11's frozen-slots __setattr__ says so with a
    # TypeError, a known dataclasses bug; later versions raise AttributeError).
    with pytest.raises((AttributeError, TypeError)):
        point.z = 1


def test_value_semantics():
    assert hash(Point(1, 2)) == hash(Point(1, 2))
    assert Point(1) != Point(1, 3)
    assert dataclasses.replace(Point(1), y=7) == Point(1, 7)
    assert pickle.loads(pickle.dumps(Point(1, 3, "p"))) == Point(1, 3, "p")
    assert repr(Point(1)) == "Point(x=1, y=2, label=None)"


def test_signature_errors_as_a_dataclass():
    with pytest.raises(TypeError):
        Point()  # x is required
    with pytest.raises(TypeError):
        Point(1, 2, "a", 4)


def test_post_init_runs():
    tensor = TensorInfo("t", (2, 3), "float16")
    assert tensor.is_known and tensor.numel == 6 and tensor.nbytes == 12  # 2·3 elements × 2 bytes
    assert not TensorInfo("u", (2, "n"), "float16").is_known


def test_inherited_fields():
    composite = CompositeCost(flops=4, bytes_read=8, bytes_written=2, time_s=1.0)
    assert (composite.flops, composite.bytes, composite.time_s, composite.memory_bound_time_s) == (4, 10, 1.0, 0.0)
    assert Cost(1, 2, 3, 4) + Cost(1, 0, 1, 0) == Cost(2, 2, 4, 4, useful_flops=2)


def test_default_factory_refused():
    with pytest.raises(TypeError, match="default_factory"):

        @record
        class Listed:
            items: list = dataclasses.field(default_factory=list)
