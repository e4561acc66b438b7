"""Constant folding: a node whose inputs are all weights or constants is computed once at load
(onnxruntime's ConstantFolding, ORT_ENABLE_BASIC). The as-written view marks it
`constant-foldable`; the deployed view costs it 0 (tests/test_deployed.py)."""

from __future__ import annotations

import json

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from onnx_roofline import Sizing, analyze
from onnx_roofline.commands.cli import main
from onnx_roofline.report.serialize import render_json
from onnx_roofline.report.table import render_table
from tests.conftest import FIXTURES

F16 = TensorProto.FLOAT16
DECODE = {"batch": 1, "past_sequence": 1023}
VOCAB, HIDDEN = 50257, 768


def model(nodes, inputs, outputs, weights, graph_inputs_too=()):
    tensors = [numpy_helper.from_array(np.zeros(shape, np.float16), name) for name, shape in weights.items()]
    declared = [helper.make_tensor_value_info(n, F16, s) for n, s in inputs]
    declared += [helper.make_tensor_value_info(n, F16, weights[n]) for n in graph_inputs_too]  # overridable
    graph = helper.make_graph(
        nodes, "g", declared, [helper.make_tensor_value_info(n, F16, s) for n, s in outputs], initializer=tensors
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def by_name(report):
    return {n.name: n for n in report.nodes}


def test_a_chain_on_weights_is_foldable_and_the_node_using_it_is_not():
    m = model(
        [
            helper.make_node("Transpose", ["w"], ["wt"], name="transpose", perm=[1, 0]),
            helper.make_node("Mul", ["wt", "scale"], ["ws"], name="scale"),  # reads a folded output and a weight
            helper.make_node("MatMul", ["x", "ws"], ["y"], name="matmul"),  # reads the input: runs every time
        ],
        [("x", [4, 64])],
        [("y", [4, 32])],
        {"w": [32, 64], "scale": [1]},
    )
    nodes = by_name(analyze(m))
    assert nodes["transpose"].constant_foldable and nodes["scale"].constant_foldable
    assert not nodes["matmul"].constant_foldable
    assert nodes["transpose"].cost.bytes == 2 * 32 * 64 * 2  # as written it still costs its read and write


def test_an_initializer_a_graph_input_can_override_is_not_a_constant():
    m = model(
        [helper.make_node("Transpose", ["w"], ["y"], name="t", perm=[1, 0])],
        [],
        [("y", [64, 32])],
        {"w": [32, 64]},
        graph_inputs_too=["w"],
    )
    assert not by_name(analyze(m))["t"].constant_foldable


def test_constant_nodes_fold_but_random_and_dequantize_do_not():
    nodes = [
        helper.make_node("Constant", [], ["c"], name="const", value=numpy_helper.from_array(np.ones([8], np.float16))),
        helper.make_node("Add", ["c", "c"], ["c2"], name="add"),
        helper.make_node("RandomNormal", [], ["r"], name="random", shape=[8], dtype=F16),
        helper.make_node("Add", ["r", "c2"], ["y"], name="add_random"),
        helper.make_node("DequantizeLinear", ["q", "s"], ["dq"], name="dq"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [],
        [helper.make_tensor_value_info("y", F16, [8]), helper.make_tensor_value_info("dq", F16, [8])],
        initializer=[
            numpy_helper.from_array(np.zeros([8], np.int8), "q"),
            numpy_helper.from_array(np.array(0.5, np.float16), "s"),
        ],
    )
    report = analyze(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]))
    marked = {n.name: n.constant_foldable for n in report.nodes}
    assert marked == {"const": True, "add": True, "random": False, "add_random": False, "dq": False}


def test_gpt2_decode_tied_embedding_transpose_is_the_foldable_node():
    report = analyze(FIXTURES / "gpt2_decode_fp16.onnx", sizing=Sizing(dims=DECODE))
    (folded,) = [n for n in report.nodes if n.constant_foldable]
    assert folded.name == "/model/lm_head/Transpose"
    assert folded.cost.bytes == 2 * VOCAB * HIDDEN * 2  # the tied embedding read and its transpose written, fp16
    assert folded.cost.bytes == 154_389_504
    share = folded.time_s / report.totals.time_s
    assert 0.25 < share < 0.27  # the "26 % of the as-written time"


def test_json_and_table_say_constant_foldable():
    report = analyze(FIXTURES / "gpt2_decode_fp16.onnx", sizing=Sizing(dims=DECODE))
    nodes = json.loads(render_json(report))["nodes"]
    assert sum(n["constant_foldable"] for n in nodes) == 1
    assert next(n for n in nodes if n["constant_foldable"])["name"] == "/model/lm_head/Transpose"
    table = render_table(report, top=3)
    assert "Transpose (foldable)" in table
    assert "foldable  1 constant-foldable node" in table


def test_cli_marks_it_in_the_default_table(capsys):
    code = main(
        [str(FIXTURES / "gpt2_decode_fp16.onnx"), "--dim", "batch=1", "--dim", "past_sequence=1023", "--top", "2"]
    )
    assert code == 0
    assert "Transpose (foldable)" in capsys.readouterr().out
