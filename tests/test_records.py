"""`@record`: a frozen, slotted dataclass, seen as one by type checkers (PEP 681)."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from onnx_roofline.costs.cost import CompositeCost, Cost
from onnx_roofline.model.tensors import TensorInfo
from onnx_roofline.records import record


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


def test_a_record_is_the_standard_librarys_dataclass():
    """No constructor of its own: defaults, factories and fields as dataclasses make them."""

    @record
    class Listed:
        items: tuple = dataclasses.field(default_factory=tuple)

    assert dataclasses.is_dataclass(Listed) and Listed().items == () and Listed.__slots__ == ("items",)


def test_records_pickle_with_their_derived_fields():
    tensor = TensorInfo("s", (2, None), "float32", None, True, ((2, 3), (2, 5)))  # a sequence of two tensors
    back = pickle.loads(pickle.dumps(tensor))
    assert back == tensor and back.is_known and back.numel == 2 * 3 + 2 * 5
    assert pickle.loads(pickle.dumps(CompositeCost(flops=4, bytes_read=8, bytes_written=2, time_s=1.0))).time_s == 1.0


USER_SCRIPT = """
import onnx_roofline as r
from onnx_roofline.costs.cost import Cost
from onnx_roofline.model.tensors import TensorInfo

report = r.analyze("model.onnx", hw="h100", dims={"batch": 1})
node = report.nodes[0]
flops: int | None = node.cost.flops if node.cost is not None else None
shape = node.outputs[0].shape if node.outputs[0] is not None else None
rows: list[dict] = report.rows()
document: dict = report.to_dict()
tensor = TensorInfo("x", (1, 64), "float32")
cost = Cost(flops=2, bytes_read=4, bytes_written=4) + Cost(1, 0, 1, 1)
elements: int = tensor.numel + cost.bytes
"""
USER_ERRORS = """
from onnx_roofline.model.tensors import TensorInfo
from onnx_roofline.report.model import NodeResult

TensorInfo("x", (1, 64))
TensorInfo("x", (1, 64), "float32").name = "y"
NodeResult(0, "n", "Relu", "", (), (), "ok", colour="red")
"""


@pytest.mark.parametrize("script, errors", [(USER_SCRIPT, 0), (USER_ERRORS, 3)])
def test_a_user_script_type_checks_against_the_records(tmp_path, script, errors):
    """mypy, with the project's configuration, sees each record as the frozen dataclass it is: a
    script using the public API checks clean, and a record built or changed wrongly is an error
    (a missing field, a frozen field assigned, a field that does not exist)."""
    api = pytest.importorskip("mypy.api")
    from tests.conftest import REPO

    (tmp_path / "script.py").write_text(script)
    out, err, status = api.run(["--config-file", str(REPO / "pyproject.toml"), "--follow-imports", "silent",
                                "--cache-dir", str(tmp_path / "cache"), str(tmp_path / "script.py")])  # fmt: skip
    found = [line for line in out.splitlines() if ": error:" in line]
    assert len(found) == errors, out + err
