"""The shapes pass's readers: value infos into TensorInfo, constant tensors into arrays."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnx_roofline import analyze
from onnx_roofline.model.constants import tensor_array
from onnx_roofline.shapes.engine import collect
from tests.conftest import one_node_model


@pytest.mark.parametrize(
    "array",
    [
        np.arange(6, dtype=np.float32).reshape(2, 3),
        np.array([1.5, -2.0], dtype=np.float16),
        np.array([3.25], dtype=np.float64),
        np.array([0, -1, 1024], dtype=np.int64),
        np.array([[7]], dtype=np.int32),
        np.array([-3, 4], dtype=np.int16),
        np.array([-128, 127], dtype=np.int8),
        np.array([0, 255], dtype=np.uint8),
        np.array([True, False, True], dtype=np.bool_),
        np.array(5, dtype=np.int64),  # a scalar: dims []
        np.zeros((0, 4), dtype=np.float32),  # empty
    ],
    ids=lambda a: f"{a.dtype}{list(a.shape)}",
)
def test_tensor_array_matches_numpy_helper(array):
    tensor = numpy_helper.from_array(array, "t")
    assert tensor.raw_data or array.size == 0  # the fast path's input
    result = tensor_array(tensor)
    assert result.dtype == array.dtype and result.shape == array.shape
    np.testing.assert_array_equal(result, numpy_helper.to_array(tensor))


def test_tensor_array_without_raw_data():
    # Typed fields (float_data, int64_data) and types without a fast path (uint16) go to numpy_helper.
    floats = helper.make_tensor("f", TensorProto.FLOAT, [2], [1.0, 2.0])
    wide = numpy_helper.from_array(np.array([1, 60000], dtype=np.uint16), "w")
    np.testing.assert_array_equal(tensor_array(floats), np.array([1.0, 2.0], dtype=np.float32))
    np.testing.assert_array_equal(tensor_array(wide), np.array([1, 60000], dtype=np.uint16))


def test_collect_reads_each_value_with_its_own_name():
    # Three values share one type (read once, by its bytes); each keeps its own name.
    same = [helper.make_tensor_value_info(name, TensorProto.FLOAT16, [1, "s", 768]) for name in ("a", "b", "c")]
    other = helper.make_tensor_value_info("d", TensorProto.INT64, [3])
    unknown = helper.make_tensor_value_info("e", TensorProto.FLOAT, None)  # no shape: rank unknown
    sequence = helper.make_tensor_sequence_value_info("f", TensorProto.FLOAT, [2])
    graph = helper.make_graph([], "g", [same[0]], [other], value_info=[*same[1:], unknown, sequence])
    values = collect(graph)
    assert [(v.name, v.shape, v.dtype) for v in values.values()] == [
        ("a", (1, "s", 768), "float16"),
        ("b", (1, "s", 768), "float16"),
        ("c", (1, "s", 768), "float16"),
        ("e", None, "float32"),
        ("f", (2,), "float32"),
        ("d", (3,), "int64"),
    ]
    assert (
        values["f"].sequence and values["f"].elements is None and not values["f"].is_known
    )  # its length is not in its type


def test_analyze_restores_the_collector():
    model = one_node_model("Relu", [("x", "float32", [4])], [("y", "float32", [4])])
    assert gc.isenabled()
    analyze(model)
    assert gc.isenabled()
    gc.disable()
    try:
        analyze(model)
        assert not gc.isenabled()  # a caller's choice is kept
    finally:
        gc.enable()
