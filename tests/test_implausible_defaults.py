"""A result resting on a default the model contradicts is flagged with the dims that fix it
(shapes/plausible.py), never reported as a clean result; the same sizes given with --dim are
refused (exit 2), as runnable.py refuses what cannot run. Each case is checked against
onnxruntime: it refuses the defaulted size and runs the size the flag names."""

from __future__ import annotations

import json
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnx_roofline
from onnx_roofline import Sizing
from onnx_roofline.commands.cli import main
from onnx_roofline.errors import DimensionError

os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")


def _ort_runs(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> bool:
    import onnxruntime

    try:
        session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        session.run(None, feeds)
    except Exception:  # noqa: BLE001 - onnxruntime raises its own Fail/InvalidArgument types
        return False
    return True


def _signal_model() -> onnx.ModelProto:
    """input [batch, <no name>] float → reflect Pad 32 each side → Relu: a 1-D front end with
    nothing downstream that says audio, so the samples dim has no role and defaults to 1."""
    pads = numpy_helper.from_array(np.array([0, 32, 0, 32], np.int64), "pads")
    nodes = [
        helper.make_node("Pad", ["input", "pads"], ["p"], mode="reflect", name="pad"),
        helper.make_node("Relu", ["p"], ["y"], name="relu"),
    ]
    graph = helper.make_graph(nodes, "front", [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", None])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=[pads])  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_pad_wider_than_a_defaulted_axis_is_flagged_with_the_size_that_runs(tmp_path, capsys):
    model = _signal_model()
    assert not _ort_runs(model, {"input": np.zeros((1, 1), np.float32)})  # "Pad reflect requires axis length >= 2"
    report = onnx_roofline.analyze(model, sizing=Sizing(default_dims=True))
    assert report.model.dims == {"batch": 1, "input_dim1": 1}
    (flag,) = report.model.implausible
    assert "'pad' (Pad)" in flag.problem and "reflect" in flag.problem
    assert flag.fix == {"input_dim1": 64}  # the first size of the ladder (16, 64, …) a reflect pad of 32 fits in
    assert _ort_runs(model, {"input": np.zeros((1, 64), np.float32)})

    path = tmp_path / "front.onnx"
    onnx.save(model, path)
    assert main([str(path), "--top", "1"]) == 0  # an answer, flagged: not a clean result
    captured = capsys.readouterr()
    assert "IMPLAUSIBLE" in captured.out and "--dim input_dim1=64" in captured.out
    assert "warning: IMPLAUSIBLE" in captured.err
    assert main([str(path), "--format", "json"]) == 0
    (flagged,) = json.loads(capsys.readouterr().out)["model"]["implausible"]
    assert flagged["fix"] == {"input_dim1": 64} and flagged["dims"] == ["input_dim1"]


def test_the_same_size_given_is_refused(tmp_path, capsys):
    path = tmp_path / "front.onnx"
    onnx.save(_signal_model(), path)
    assert main([str(path), "--dim", "batch=1", "--dim", "input_dim1=1"]) == 2
    assert "reflect pad must be smaller than its axis" in capsys.readouterr().err
    with pytest.raises(DimensionError, match="reflect"):
        onnx_roofline.analyze(path, sizing=Sizing(dims={"batch": 1, "input_dim1": 20}))
    assert (
        onnx_roofline.analyze(path, sizing=Sizing(dims={"batch": 1, "input_dim1": 33})).totals.uncosted_nodes == 0
    )  # 32 < 33: it runs


def test_a_pad_given_by_attribute_before_opset_11_is_checked_too():
    node = helper.make_node("Pad", ["x"], ["y"], mode="reflect", pads=[0, 0, 4, 0, 0, 4], name="old_pad")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 10)])
    with pytest.raises(DimensionError, match="reflect-pads 4 and 4 on axis 2"):
        onnx_roofline.analyze(model)


def _pool_model(side) -> onnx.ModelProto:
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], name="pool")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, side, side])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_pool_window_wider_than_its_input_is_refused_as_onnxruntime_refuses_it():
    """(1 − 3) / 1 + 1 = −1 outputs: onnxruntime fails ("Calculated output dimension is negative")."""
    assert not _ort_runs(_pool_model(1), {"x": np.zeros((1, 1, 1, 1), np.float32)})
    with pytest.raises(DimensionError, match=r"'pool' \(MaxPool\) .* smaller than its 3×3 window"):
        onnx_roofline.analyze(_pool_model(1))
    assert _ort_runs(
        _pool_model(2), {"x": np.zeros((1, 1, 2, 2), np.float32)}
    )  # (2 − 3) / 1 + 1 = 0: an empty output, which runs
    assert onnx_roofline.analyze(_pool_model(3)).nodes[0].outputs[0].shape == (1, 1, 1, 1)


def test_a_reshape_that_cannot_divide_is_flagged_at_the_defaults():
    """x [batch, <no name>] → Reshape [-1, 4]: at 1 element per row there is nothing to divide by 4
    (ONNX's inference: "incompatible shapes"); at 16 it runs."""
    target = numpy_helper.from_array(np.array([-1, 4], np.int64), "target")
    nodes = [
        helper.make_node("Reshape", ["x", "target"], ["r"], name="rows"),
        helper.make_node("Relu", ["r"], ["y"], name="relu"),
    ]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", None])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=[target])  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    assert not _ort_runs(model, {"x": np.zeros((1, 1), np.float32)})
    (flag,) = onnx_roofline.analyze(model, sizing=Sizing(default_dims=True)).model.implausible
    assert "cannot divide" in flag.problem and flag.fix == {"x_dim1": 16}
    assert _ort_runs(model, {"x": np.zeros((1, 16), np.float32)})
    with pytest.raises(DimensionError, match="cannot divide"):
        onnx_roofline.analyze(model, sizing=Sizing(dims={"batch": 1, "x_dim1": 6}))


def test_a_conv_on_a_one_sample_default_is_never_a_clean_result():
    """A 1-D conv (k64) on a samples dim nothing names: the audio role gives it 16,000 samples; bound
    by hand to 1, the conv cannot run."""
    weight = numpy_helper.from_array(np.ones((4, 1, 64), np.float32), "w")
    graph = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], strides=[32], name="conv")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 1, None])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=[weight])  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    report = onnx_roofline.analyze(model, sizing=Sizing(default_dims=True))
    assert report.model.dims["x_dim2"] == 16_000 and not report.model.implausible
    assert report.nodes[0].cost.flops == 2 * 1 * 4 * ((16_000 - 64) // 32 + 1) * 1 * 64
    with pytest.raises(DimensionError, match="smaller than its 64 window"):
        onnx_roofline.analyze(model, sizing=Sizing(dims={"batch": 1, "x_dim2": 1}))
