"""`dim_value: -1` (any negative size a converter writes, as paddle2onnx does) on a graph input or
output is a dynamic dim, named like an anonymous one (`x_dim2`); anywhere else a negative dim
stays invalid. A model with a -1 input dim analyzes exactly as the model with that dim named."""

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
from onnx_roofline.errors import ModelLoadError

os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")


def _image_model(dims: list, output_dims: list | None = None) -> onnx.ModelProto:
    """x [N, 3, H, W] → Conv 3→8 k3 s1 p1 (bias) → Relu → y, its input's dims as given: an int
    (a negative one written raw, as helper writes it), a name, or None (no name)."""
    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "w")
    bias = numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "b")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], name="conv"), helper.make_node("Relu", ["c"], ["y"], name="relu")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, "h", "w"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 8, "h", "w"])],
        initializer=[weight, bias],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    _write_dims(model.graph.input[0], dims)
    if output_dims is not None:
        _write_dims(model.graph.output[0], output_dims)
    return model


def _write_dims(value: onnx.ValueInfoProto, dims: list) -> None:
    for dim, want in zip(value.type.tensor_type.shape.dim, dims, strict=False):
        dim.Clear()
        if isinstance(want, int):
            dim.dim_value = want  # -1 written literally: protobuf takes it, as paddle2onnx writes it
        elif want is not None:
            dim.dim_param = want


def test_onnx_and_onnxruntime_accept_what_the_analysis_must_accept():
    """The premise: ONNX's full checker accepts -1 dims on inputs and outputs, and onnxruntime runs
    the model at any size there."""
    import onnxruntime

    model = _image_model([-1, 3, -1, -1], [-1, 8, -1, -1])
    onnx.checker.check_model(model, full_check=True)
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (out,) = session.run(None, {"x": np.zeros((2, 3, 5, 7), np.float32)})
    assert out.shape == (2, 8, 5, 7)


def test_a_minus_one_input_dim_analyzes_as_the_same_dim_named():
    """x [-1, 3, -1, -1] is x [x_dim0, 3, x_dim2, x_dim3]: the same dims, defaults, shapes and figures."""
    negative = onnx_roofline.analyze(_image_model([-1, 3, -1, -1], [-1, 8, -1, -1]), sizing=Sizing(default_dims=True))
    named = onnx_roofline.analyze(
        _image_model(["x_dim0", 3, "x_dim2", "x_dim3"], ["x_dim0", 8, "x_dim2", "x_dim3"]),
        sizing=Sizing(default_dims=True),
    )
    assert negative.model.dims == named.model.dims == {"x_dim0": 1, "x_dim2": 224, "x_dim3": 224}
    assert negative.to_dict()["nodes"] == named.to_dict()["nodes"]
    assert negative.totals == named.totals
    # Conv at 224×224, batch 1: 2·N·Cout·H·W·Cin·kH·kW, plus a bias per output; Relu: one per output.
    assert negative.totals.flops == 2 * 1 * 8 * 224 * 224 * 3 * 3 * 3 + 8 * 224 * 224 + 8 * 224 * 224


def test_a_minus_one_dim_binds_by_its_anonymous_name(tmp_path, capsys):
    path = tmp_path / "neg.onnx"
    onnx.save(_image_model([-1, 3, -1, 16]), path)
    assert main([str(path), "--dim", "x_dim0=2", "--dim", "x_dim2=10", "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["model"]["dims"] == {"x_dim0": 2, "x_dim2": 10}
    assert report["nodes"][0]["outputs"][0]["shape"] == [2, 8, 10, 16]
    assert main(["inspect", str(path)]) == 0
    assert "[x_dim0, 3, x_dim2, 16]" in capsys.readouterr().out


def test_any_negative_value_a_converter_writes_is_dynamic():
    report = onnx_roofline.analyze(_image_model([-7, 3, 32, -2]), sizing=Sizing(dims={"x_dim0": 1, "x_dim3": 32}))
    assert report.nodes[0].outputs[0].shape == (1, 8, 32, 32)


def test_a_minus_one_output_dim_is_dynamic_too():
    report = onnx_roofline.analyze(_image_model([1, 3, 8, 8], [-1, 8, -1, 8]))
    assert report.nodes[-1].outputs[0].shape == (1, 8, 8, 8)


def test_a_minus_one_in_a_body_input_or_output_is_dynamic():
    """An If branch declaring its output [-1, 4] (paddle2onnx writes bodies' dims so too)."""

    def branch(name: str, op: str) -> onnx.GraphProto:
        return helper.make_graph([helper.make_node(op, ["x"], [f"{name}_y"])], name, [],
                                 [helper.make_tensor_value_info(f"{name}_y", TensorProto.FLOAT, [-1, 4])])  # fmt: skip

    node = helper.make_node(
        "If", ["cond"], ["y"], then_branch=branch("then", "Relu"), else_branch=branch("else", "Sigmoid"), name="if"
    )
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("cond", TensorProto.BOOL, []), helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [-1, 4])])  # fmt: skip
    report = onnx_roofline.analyze(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    assert report.totals.uncosted_nodes == 0


def test_a_negative_dim_elsewhere_stays_invalid():
    """An initializer's dims are its stored size: -1 there is a corrupt file, refused."""
    model = _image_model(["n", 3, "h", "w"])
    model.graph.initializer[1].dims[0] = -1
    with pytest.raises(ModelLoadError, match="tensor 'b' has a dim of -1"):
        onnx_roofline.analyze(model, sizing=Sizing(dims={"n": 1, "h": 8, "w": 8}))


def test_the_file_is_never_changed(tmp_path):
    path = tmp_path / "neg.onnx"
    onnx.save(_image_model([-1, 3, -1, -1]), path)
    before = path.read_bytes()
    onnx_roofline.analyze(path, sizing=Sizing(default_dims=True))
    assert path.read_bytes() == before
