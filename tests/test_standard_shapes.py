"""ai.onnx ops whose ONNX inference gives a type but no shape (shape_rules/standard.py), each on a
one-node model whose output is declared without a shape, typed as onnxruntime's run returns it."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnx_roofline import Sizing, analyze
from onnx_roofline.model.tensors import elem_type

F = TensorProto.FLOAT


def _model(node, inputs, constants=(), opset=17):
    graph = helper.make_graph([node], node.op_type, [helper.make_tensor_value_info(name, dtype, shape) for name, dtype, shape in inputs],
                              [helper.make_tensor_value_info(name, F, None) for name in node.output],
                              initializer=[numpy_helper.from_array(np.asarray(value), name) for name, value in constants])  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _check(model, feeds):
    """Every node costed, each output's shape and dtype what onnxruntime's run returns."""
    report = analyze(model)
    assert report.uncosted.count == 0, report.uncosted.message
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    results = session.run(None, feeds)
    node = report.nodes[0]
    for tensor, value in zip(node.outputs, results, strict=False):
        assert tensor.shape == value.shape, tensor.name
        assert helper.tensor_dtype_to_np_dtype(elem_type(tensor.dtype)) == value.dtype, tensor.name
    return node


def test_group_normalization_keeps_its_input_shape():
    x = np.random.default_rng(0).standard_normal((2, 8, 5, 4)).astype(np.float32)
    node = helper.make_node("GroupNormalization", ["x", "scale", "bias"], ["y"], num_groups=4)
    model = _model(
        node, [("x", F, [2, 8, 5, 4])], [("scale", np.ones(8, np.float32)), ("bias", np.zeros(8, np.float32))], opset=21
    )
    assert _check(model, {"x": x}).outputs[0].shape == (2, 8, 5, 4)


def test_mean_variance_normalization_keeps_its_input_shape():
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 5)).astype(np.float32)
    node = helper.make_node("MeanVarianceNormalization", ["x"], ["y"])
    assert _check(_model(node, [("x", F, [2, 3, 4, 5])], opset=13), {"x": x}).outputs[0].shape == (2, 3, 4, 5)


@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("periodic", [0, 1])
def test_a_window_is_its_constant_size_long(op, periodic):
    node = helper.make_node(op, ["size"], ["y"], periodic=periodic)
    assert _check(_model(node, [], [("size", np.array(10, np.int64))]), {}).outputs[0].shape == (10,)


def test_a_window_in_double_says_so():
    node = helper.make_node("HannWindow", ["size"], ["y"], output_datatype=TensorProto.DOUBLE)
    report = analyze(_model(node, [], [("size", np.array(7, np.int32))]))
    assert report.nodes[0].outputs[0].shape == (7,) and report.nodes[0].outputs[0].dtype == "float64"


def test_mel_weight_matrix_is_half_the_dft_plus_one_by_the_bins():
    node = helper.make_node("MelWeightMatrix", ["bins", "dft", "rate", "low", "high"], ["y"])
    constants = [("bins", np.array(8, np.int64)), ("dft", np.array(64, np.int64)), ("rate", np.array(16000, np.int64)),
                 ("low", np.array(0.0, np.float32)), ("high", np.array(8000.0, np.float32))]  # fmt: skip
    assert _check(_model(node, [], constants), {}).outputs[0].shape == (64 // 2 + 1, 8)


def test_max_unpool_takes_its_constant_output_shape():
    x = np.arange(4, dtype=np.float32).reshape(1, 1, 2, 2)
    indices = np.array([[[[5, 7], [13, 15]]]], np.int64)
    node = helper.make_node("MaxUnpool", ["x", "i", "shape"], ["y"], kernel_shape=[2, 2], strides=[2, 2])
    model = _model(
        node, [("x", F, [1, 1, 2, 2])], [("i", indices), ("shape", np.array([1, 1, 5, 5], np.int64))], opset=11
    )
    assert _check(model, {"x": x}).outputs[0].shape == (1, 1, 5, 5)  # not (2 − 1)·2 + 2 = 4: the given shape


def test_compress_by_a_constant_condition_keeps_its_trues():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    node = helper.make_node("Compress", ["x", "keep"], ["y"], axis=1)
    model = _model(node, [("x", F, [3, 4])], [("keep", np.array([True, False, True], bool))])
    assert _check(model, {"x": x}).outputs[0].shape == (3, 2)  # the 2 trues of a condition shorter than the axis


def test_torch_dynamo_group_norm_at_opset_21_is_fully_costed(tmp_path):
    torch = pytest.importorskip("torch")
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.GroupNorm(4, 8), torch.nn.ReLU()).eval()
    x = torch.rand(2, 3, 10, 10)
    path = tmp_path / "group_norm.onnx"
    torch.onnx.export(model, (x,), str(path), dynamo=True, opset_version=21, input_names=["x"],
                      dynamic_shapes=({0: torch.export.Dim("batch")},))  # fmt: skip
    report = analyze(path, sizing=Sizing(dims={"batch": 2}))
    assert report.uncosted.count == 0, report.uncosted.message
    (y,) = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x.numpy()})
    assert report.nodes[-1].outputs[0].shape == y.shape == (2, 8, 8, 8)


def test_stft_without_onesided_is_one_sided_as_the_spec_and_onnxruntime_say():
    """onnx's inference reads an absent `onesided` as 0 (frame_length bins); the spec's default is
    1, frame_length // 2 + 1 bins, which onnxruntime returns: inference is given it spelled out,
    on a copy (the model analyzed keeps its attributes)."""
    x = np.ones((1, 128, 1), np.float32)
    node = helper.make_node("STFT", ["x", "step", "", "length"], ["y"])
    model = _model(node, [("x", F, [1, 128, 1])], [("step", np.array(8, np.int64)), ("length", np.array(16, np.int64))])
    assert _check(model, {"x": x}).outputs[0].shape == (1, (128 - 16) // 8 + 1, 16 // 2 + 1, 2)
    assert len(model.graph.node[0].attribute) == 0


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("size", [5, 8])
def test_a_pool_under_ceil_mode_drops_a_last_window_in_the_padding(op, size):
    """kernel 3, stride 3, pads 1, ceil_mode on 5 (8): ⌈(5 + 2 − 3)/3⌉ + 1 = 3 (4) windows, the last
    starting at 2·3 = 6 ≥ 5 + 1, in the end padding: dropped, 2 (3), as onnxruntime runs it. ONNX's
    inference keeps it; the pool and what follows (a Flatten, a MatMul sized by it) are re-typed."""
    x = np.random.default_rng(0).standard_normal((1, 2, size, size)).astype(np.float32)
    out = (size + 2 - 3 + 2) // 3  # ⌈(size + 2 − 3)/3⌉ + 1 windows, minus the one in the padding
    nodes = [helper.make_node(op, ["x"], ["p"], kernel_shape=[3, 3], strides=[3, 3], pads=[1, 1, 1, 1], ceil_mode=1),
             helper.make_node("Flatten", ["p"], ["f"]), helper.make_node("MatMul", ["f", "w"], ["y"])]  # fmt: skip
    weight = numpy_helper.from_array(np.ones((2 * out * out, 4), np.float32), "w")
    graph = helper.make_graph(nodes, "pool", [helper.make_tensor_value_info("x", F, [1, 2, size, size])],
                              [helper.make_tensor_value_info("y", F, None)], initializer=[weight])  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    report = analyze(model)
    assert report.uncosted.count == 0
    assert report.nodes[0].outputs[0].shape == (1, 2, out, out) and report.nodes[-1].outputs[0].shape == (1, 4)
    assert report.nodes[-1].cost.flops == 2 * 1 * (2 * out * out) * 4
    del model.graph.node[
        2:
    ]  # onnxruntime refuses the MatMul at load, by ONNX's inference of the pool: run the pool and Flatten
    model.graph.output[0].name = "f"
    (f,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    assert f.shape == (1, 2 * out * out)


def test_torchscript_max_pool_with_ceil_mode_is_typed_as_torch_runs_it(tmp_path):
    torch = pytest.importorskip("torch")
    model = torch.nn.Sequential(torch.nn.MaxPool2d(3, 3, 1, ceil_mode=True), torch.nn.ReLU()).eval()
    x = torch.rand(1, 2, 8, 8)
    path = tmp_path / "pool.onnx"
    torch.onnx.export(model, (x,), str(path), dynamo=False, opset_version=17, input_names=["x"])
    report = analyze(path)
    assert report.uncosted.count == 0
    assert report.nodes[-1].outputs[0].shape == tuple(model(x).shape) == (1, 2, 3, 3)
