"""Nodes whose tensors look alike share one costing — unless their rule read more than tensors.

The walk costs a node once per (op, tensor signature) when its rule read only the tensors'
shapes, dtypes and names; anything else a rule reads (attributes, constants, the proto, a
subgraph) makes each node costed on its own. These tests build pairs of nodes that look alike
to a tensors-only reader but differ where it cannot see, and check that neither borrows the
other's figures."""

from __future__ import annotations

import dataclasses

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from onnx_roofline import analysis, analyze
from onnx_roofline.model.op_node import ANYTHING, ATTRIBUTES, TENSORS, OpNode
from onnx_roofline.model.tensors import TensorInfo


def _model(nodes, inputs, outputs, initializers=(), opset=21):
    graph = helper.make_graph(nodes, "pair", inputs, outputs, initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _float(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def test_attributes_keep_nodes_apart():
    # Same shapes, alpha differs: the second Gemm scales A·B, M·N more FLOPs.
    model = _model(
        [
            helper.make_node("Gemm", ["a", "w"], ["y1"], alpha=1.0),
            helper.make_node("Gemm", ["a", "w"], ["y2"], alpha=0.5),
        ],
        [_float("a", [8, 16]), _float("w", [16, 32])],
        [_float("y1", [8, 32]), _float("y2", [8, 32])],
    )
    first, second = analyze(model).nodes
    assert first.cost.flops == 2 * 8 * 16 * 32  # 8192
    assert second.cost.flops == 2 * 8 * 16 * 32 + 8 * 32  # + one multiply per output for alpha


def test_the_same_tensor_twice_is_not_two_tensors():
    # Add(x, x) reads x once; Add(x, y), with y shaped like x, reads both.
    model = _model(
        [helper.make_node("Add", ["x", "x"], ["s"]), helper.make_node("Add", ["x", "y"], ["t"])],
        [_float("x", [1024]), _float("y", [1024])],
        [_float("s", [1024]), _float("t", [1024])],
    )
    same, distinct = analyze(model).nodes
    assert (same.cost.bytes_read, same.cost.bytes_written) == (1024 * 4, 1024 * 4)
    assert (distinct.cost.bytes_read, distinct.cost.bytes_written) == (2 * 1024 * 4, 1024 * 4)


def test_constants_keep_nodes_apart():
    # Two Loops over the same body and state shapes; trip counts 3 and 5 are constants.
    body = helper.make_graph(
        [helper.make_node("Add", ["v_in", "v_in"], ["v_out"]), helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            _float("v_in", [64]),
        ],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []), _float("v_out", [64])],
    )
    trips = [numpy_helper.from_array(np.array(n, dtype=np.int64), f"m{n}") for n in (3, 5)]
    cond = numpy_helper.from_array(np.array(True), "cond")
    model = _model(
        [helper.make_node("Loop", [f"m{n}", "cond", "v"], [f"out{n}"], body=body) for n in (3, 5)],
        [_float("v", [64])],
        [_float("out3", [64]), _float("out5", [64])],
        initializers=[*trips, cond],
    )
    report = analyze(model)

    def body_flops(scope):
        return sum(n.cost.flops for n in report.nodes if n.scope == scope)

    assert body_flops("Loop_0/body") == 3 * 64 and body_flops("Loop_1/body") == 5 * 64  # one add per element per trip


def _counting(monkeypatch) -> list[str]:
    """The op types whose rule ran, in order."""
    calls = []
    lookup = analysis.rules.lookup

    def counting_lookup(domain, op_type, opset):
        rule = lookup(domain, op_type, opset)
        if rule is None:
            return None
        return dataclasses.replace(rule, formula=lambda node: calls.append(node.op_type) or rule.formula(node))

    monkeypatch.setattr(analysis.rules, "lookup", counting_lookup)
    return calls


def test_alike_nodes_are_costed_once(monkeypatch):
    calls = _counting(monkeypatch)
    relus = [helper.make_node("Relu", [f"x{i}"], [f"x{i + 1}"]) for i in range(4)]
    model = _model(relus, [_float("x0", [2, 8])], [_float("x4", [2, 8])])
    report = analyze(model)
    assert calls == ["Relu"]  # four alike nodes: one costing
    assert [n.cost.flops for n in report.nodes] == [2 * 8] * 4  # one compare-and-select per element
    assert [n.name for n in report.nodes] == [f"Relu_{i}" for i in range(4)]  # each node its own result


def test_alike_nodes_with_equal_attributes_are_costed_once(monkeypatch):
    # Gemm's rule reads alpha, beta and the transposes: three Gemms alike in tensors and
    # attributes share one costing; a fourth with another alpha gets its own.
    calls = _counting(monkeypatch)
    gemms = [helper.make_node("Gemm", ["a", "w"], [f"y{i}"], alpha=1.0, transB=1) for i in range(3)]
    gemms.append(helper.make_node("Gemm", ["a", "w"], ["y3"], alpha=0.5, transB=1))
    model = _model(gemms, [_float("a", [8, 16]), _float("w", [32, 16])], [_float(f"y{i}", [8, 32]) for i in range(4)])
    report = analyze(model)
    assert calls == ["Gemm", "Gemm"]  # the first (alpha 1) and the fourth (alpha 0.5)
    # A·Bᵀ: 2·M·K·N = 2·8·16·32 = 8192; alpha ≠ 1 adds one multiply per output (8·32)
    assert [n.cost.flops for n in report.nodes] == [8192, 8192, 8192, 8192 + 8 * 32]


def test_opnode_tracks_what_a_rule_reads():
    node = helper.make_node("Gemm", ["a", "b"], ["y"], transA=1)
    tensors = (TensorInfo("a", (4, 8), "float32"), TensorInfo("b", (4, 8), "float32"))

    def view() -> OpNode:
        return OpNode(node, 21, tensors, (TensorInfo("y", (8, 8), "float32"),), lambda name: None, lambda *a: None)

    op = view()
    _ = (op.inputs, op.outputs, op.input(0), op.output(0), op.op_type, op.domain, op.opset, op.present_inputs)
    _ = (op.distinct_input_bytes(), op.output_bytes())
    assert op.reads == TENSORS
    _ = op.attrs
    assert op.reads == ATTRIBUTES
    for read in (
        lambda o: o.proto,
        lambda o: o.input_value(0),
        lambda o: o.constant("a"),
        lambda o: o.subgraph,
        lambda o: (o.proto, o.attrs),  # attributes read after the proto leave it at ANYTHING
    ):
        op = view()
        read(op)
        assert op.reads == ANYTHING
