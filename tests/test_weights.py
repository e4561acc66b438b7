"""Parameters are every weight (model/weights.py): initializers and the tensors of Constant nodes,
small integer shape constants aside, in the main graph and in every If/Loop/Scan body, each
counted once. The header (`N parameters`), inspect, the memory line's weights and the JSON agree,
and equal the sum over the weight tensors, counted here by hand."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnx_roofline
from onnx_roofline import Sizing
from onnx_roofline.commands.cli import main
from onnx_roofline.commands.inspect import inspect_model
from onnx_roofline.model.weights import SHAPE_CONSTANT_ELEMENTS, is_shape_constant, weights
from onnx_roofline.report.units import si


def _constant(name: str, array: np.ndarray) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(array, name), name=f"const_{name}")


def _constant_mlp() -> onnx.ModelProto:
    """x [batch, 8] → Gemm(w1 [8, 16], b1 [16]) → Relu → Reshape(shape: int64 [2], a shape constant)
    → MatMul(w2 [16, 4]) → Mul(scale: a float scalar) → Add(w2's sibling read twice: bias [4]),
    every weight a Constant node; an int64 [2] (a shape) too."""
    rng = np.random.default_rng(0)
    f32 = lambda *shape: rng.standard_normal(shape).astype(np.float32)  # noqa: E731
    nodes = [
        _constant("w1", f32(8, 16)), _constant("b1", f32(16)), _constant("shape", np.array([-1, 16], np.int64)),
        _constant("w2", f32(16, 4)), _constant("scale", np.array(0.5, np.float32)), _constant("bias", f32(4)),
        helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], name="fc1"),
        helper.make_node("Relu", ["h"], ["r"], name="relu"),
        helper.make_node("Reshape", ["r", "shape"], ["f"], name="flat"),
        helper.make_node("MatMul", ["f", "w2"], ["m"], name="fc2"),
        helper.make_node("Mul", ["m", "scale"], ["s"], name="scaled"),
        helper.make_node("Add", ["s", "bias"], ["a"], name="biased"),
        helper.make_node("Add", ["a", "bias"], ["y"], name="biased_again"),  # the same weight read twice: counted once
    ]  # fmt: skip
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


# w1 8·16 + b1 16 + w2 16·4 + scale 1 (a float scalar is a weight) + bias 4; not the int64 shape [2]
MLP_PARAMETERS = 8 * 16 + 16 + 16 * 4 + 1 + 4
MLP_BYTES = MLP_PARAMETERS * 4  # all float32


def test_constant_node_weights_are_parameters(tmp_path, capsys):
    path = tmp_path / "mlp.onnx"
    onnx.save(_constant_mlp(), path)
    report = onnx_roofline.analyze(path, sizing=Sizing(dims={"batch": 1}))
    assert report.model.parameters == MLP_PARAMETERS == 213
    assert report.memory.weight_bytes == MLP_BYTES
    assert main([str(path), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["model"]["parameters"] == MLP_PARAMETERS and data["memory"]["weight_bytes"] == MLP_BYTES
    assert main([str(path), "--top", "1"]) == 0
    out = capsys.readouterr().out
    assert f"{si(MLP_PARAMETERS, '')} parameters" in out and f"weights {si(MLP_BYTES, 'B')}" in out
    info = inspect_model(path)
    assert (info.parameters, info.weight_bytes, info.weight_tensors, info.constant_weights) == (
        MLP_PARAMETERS,
        MLP_BYTES,
        5,
        5,
    )
    assert main(["inspect", str(path)]) == 0
    assert (
        f"parameters  {si(MLP_PARAMETERS, '').strip()} in 5 weights (5 Constant nodes), {si(MLP_BYTES, 'B')}"
        in capsys.readouterr().out
    )


def test_constant_weights_are_no_activations():
    """A Constant's tensor is held as a weight, not counted again among the live activations."""
    report = onnx_roofline.analyze(_constant_mlp(), sizing=Sizing(dims={"batch": 1}))
    as_initializers = onnx_roofline.analyze(_as_initializers(_constant_mlp()), sizing=Sizing(dims={"batch": 1}))
    assert report.memory.peak_activation_bytes == as_initializers.memory.peak_activation_bytes
    assert report.model.parameters == as_initializers.model.parameters == MLP_PARAMETERS
    assert report.memory.weight_bytes == as_initializers.memory.weight_bytes == MLP_BYTES


def _as_initializers(model: onnx.ModelProto) -> onnx.ModelProto:
    """The same model with every Constant node an initializer."""
    graph = model.graph
    constants = [node for node in graph.node if node.op_type == "Constant"]
    for node in constants:
        tensor = onnx.TensorProto()
        tensor.CopyFrom(node.attribute[0].t)
        tensor.name = node.output[0]
        graph.initializer.append(tensor)
        graph.node.remove(node)
    return model


def test_dtype_applies_to_constant_weights():
    report = onnx_roofline.analyze(_constant_mlp(), precision="fp16", sizing=Sizing(dims={"batch": 1}))
    assert report.memory.weight_bytes == MLP_PARAMETERS * 2


def _if_model() -> onnx.ModelProto:
    """If(cond): then: x @ wt (a Constant [8, 8] in the branch) + bt (an initializer [8] of the
    branch); else: x * ws (a Constant [8] in the branch). Main graph: Add(y, b) with b an initializer [8]."""

    def branch(name, nodes, initializers=()):
        return helper.make_graph(
            nodes,
            name,
            [],
            [helper.make_tensor_value_info(f"{name}_out", TensorProto.FLOAT, [2, 8])],
            initializer=list(initializers),
        )

    then = branch("then", [_constant("wt", np.ones((8, 8), np.float32)), helper.make_node("MatMul", ["x", "wt"], ["tm"]),
                           helper.make_node("Add", ["tm", "bt"], ["then_out"])],
                  [numpy_helper.from_array(np.ones(8, np.float32), "bt")])  # fmt: skip
    other = branch("else", [_constant("ws", np.ones(8, np.float16)), helper.make_node("Cast", ["ws"], ["wsf"], to=TensorProto.FLOAT),
                            helper.make_node("Mul", ["x", "wsf"], ["else_out"])])  # fmt: skip
    nodes = [helper.make_node("If", ["cond"], ["y"], then_branch=then, else_branch=other, name="choose"),
             helper.make_node("Add", ["y", "b"], ["z"], name="add")]  # fmt: skip
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("cond", TensorProto.BOOL, []), helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)], initializer=[numpy_helper.from_array(np.ones(8, np.float32), "b")])  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


# b 8 (main) + wt 8·8 + bt 8 (then) + ws 8 (else, float16)
IF_PARAMETERS = 8 + 8 * 8 + 8 + 8
IF_BYTES = (8 + 8 * 8 + 8) * 4 + 8 * 2


def test_weights_in_if_branches_are_parameters():
    found = weights(_if_model().graph)
    assert sorted((w.name, w.graph, w.kind) for w in found) == [
        ("b", "", "initializer"), ("bt", "choose/then_branch", "initializer"),
        ("ws", "choose/else_branch", "Constant"), ("wt", "choose/then_branch", "Constant"),
    ]  # fmt: skip
    report = onnx_roofline.analyze(_if_model())
    assert report.model.parameters == IF_PARAMETERS == 88
    # cond is data: both branches walked, the heavier (then: the MatMul) counted; the else branch's
    # ws is held all the same, said apart
    assert report.memory.weight_bytes + report.memory.untaken_branch_weight_bytes == IF_BYTES == 336
    assert report.memory.untaken_branch_weight_bytes == 8 * 2
    info = inspect_model(_if_model())
    assert (info.parameters, info.weight_bytes) == (IF_PARAMETERS, IF_BYTES)


def test_a_weight_in_a_loop_body_is_counted_once():
    body = helper.make_graph(
        [_constant("wl", np.ones((4, 4), np.float32)), helper.make_node("MatMul", ["v", "wl"], ["v_out"]), helper.make_node("Identity", ["c"], ["c_out"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []), helper.make_tensor_value_info("c", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []), helper.make_tensor_value_info("v_out", TensorProto.FLOAT, [1, 4])],
    )  # fmt: skip
    trips = numpy_helper.from_array(np.array(3, np.int64), "trips")
    node = helper.make_node("Loop", ["trips", "", "v0"], ["v"], body=body, name="loop")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("v0", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("v", TensorProto.FLOAT, None)], initializer=[trips])  # fmt: skip
    report = onnx_roofline.analyze(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    assert report.model.parameters == 16  # wl, once however many trips; `trips` is a scalar int: a shape constant
    assert report.memory.weight_bytes == 16 * 4


@pytest.mark.parametrize(("dtype", "shape", "constant"), [
    ("int64", (), True), ("int64", (2,), True), ("int32", (SHAPE_CONSTANT_ELEMENTS,), True), ("uint8", (4,), True),
    ("int64", (SHAPE_CONSTANT_ELEMENTS + 1,), False),  # an index table
    ("int8", (2, 2), False),  # rank 2: a quantized weight
    ("float32", (), False),  # a scale
    ("bool", (4,), False), ("float16", (3,), False),
])  # fmt: skip
def test_what_a_small_integer_shape_constant_is(dtype, shape, constant):
    assert is_shape_constant(dtype, shape) is constant


def test_a_value_given_is_no_weight():
    """`--value` makes a graph input a constant of the run, not a stored weight."""
    node = helper.make_node("Add", ["x", "offset"], ["y"], name="add")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4]), helper.make_tensor_value_info("offset", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])  # fmt: skip
    report = onnx_roofline.analyze(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
        sizing=Sizing(values={"offset": [1.0, 2.0, 3.0, 4.0]}),
    )
    assert report.model.parameters == 0


def test_a_nodes_parameters_are_its_weights_shape_constants_aside():
    """ResNet-50: torchvision's 25,557,032 parameters, less one per BatchNorm channel (the exporter
    folds each BN's scale and shift into its Conv's weight and bias: 2 per channel become 1), the
    BN channels being 64 (stem) + 3·(64+64+256)+256 + 4·(128+128+512)+512 + 6·(256+256+1024)+1024
    + 3·(512+512+2048)+2048 = 26,560. Each weight is read by one node, so the nodes' parameters add
    up to the model's; the Reshape's int64 target is a shape constant, no parameter."""
    report = onnx_roofline.analyze(
        Path(__file__).resolve().parents[1] / "fixtures" / "resnet50_fp32.onnx", sizing=Sizing(dims={"batch": 1})
    )
    assert report.model.parameters == 25_557_032 - 26_560
    assert sum(n.parameters for n in report.nodes) == report.model.parameters
    assert all(n.parameters == 0 for n in report.nodes if n.op_type == "Reshape")
