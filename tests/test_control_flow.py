"""Control flow (If, Loop, Scan) and model-local functions: bodies costed node by node."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from onnx_roofline import analyze

F32 = TensorProto.FLOAT


def _model(nodes, inputs, outputs, initializers=(), functions=(), opset=18):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    imports = [helper.make_opsetid("", opset)] + [helper.make_opsetid(f.domain, 1) for f in functions]
    return helper.make_model(graph, opset_imports=imports, functions=list(functions))


def _vi(name, shape, elem=F32):
    return helper.make_tensor_value_info(name, elem, shape)


def test_local_function_is_inlined_and_costed():
    """Dense(x, w, b) = Relu(MatMul(x, w) + b), x [4, 8], w [8, 16], b [16], fp32."""
    body = [
        helper.make_node("MatMul", ["x", "w"], ["t"]),
        helper.make_node("Add", ["t", "b"], ["u"]),
        helper.make_node("Relu", ["u"], ["y"]),
    ]
    dense = helper.make_function("custom", "Dense", ["x", "w", "b"], ["y"], body, [helper.make_opsetid("", 18)])
    call = helper.make_node("Dense", ["x", "w", "b"], ["y"], domain="custom", name="dense")
    model = _model([call], [_vi("x", [4, 8]), _vi("w", [8, 16]), _vi("b", [16])], [_vi("y", [4, 16])], functions=[dense])
    (node,) = analyze(model).nodes
    assert node.status == "ok"
    assert node.cost.flops == 2 * 4 * 8 * 16 + 4 * 16 + 4 * 16  # MatMul, bias add, Relu (one compare each)
    assert node.cost.bytes_read == 4 * (4 * 8 + 8 * 16) + 4 * (4 * 16 + 16) + 4 * (4 * 16)  # each body node reads
    assert node.cost.bytes_written == 3 * 4 * (4 * 16)  # t, u, y each written once


def _branch(name, op, shape):
    return helper.make_graph([helper.make_node(op, ["x", "x"], [f"{name}_out"])], name, [], [_vi(f"{name}_out", shape)])


def test_if_takes_the_costlier_branch():
    """then: MatMul x·x on [32, 32] (2·32³ FLOPs); else: Add x+x (32² FLOPs): the MatMul branch counts."""
    node = helper.make_node(
        "If", ["cond"], ["y"], then_branch=_branch("then", "MatMul", [32, 32]), else_branch=_branch("else", "Add", [32, 32])
    )
    model = _model([node], [_vi("cond", [], TensorProto.BOOL), _vi("x", [32, 32])], [_vi("y", [32, 32])])
    (result,) = analyze(model).nodes
    assert result.status == "ok"
    assert result.cost.flops == 2 * 32 * 32 * 32
    assert result.cost.bytes == 4 * 32 * 32 * 2  # the body MatMul reads x once (same tensor twice) and writes y


def _loop_body():
    """Loop body: (iteration, cond, acc) → (cond, acc + x)."""
    nodes = [
        helper.make_node("Identity", ["cond_in"], ["cond_out"]),
        helper.make_node("Add", ["acc_in", "x"], ["acc_out"]),
    ]
    inputs = [_vi("i", [], TensorProto.INT64), _vi("cond_in", [], TensorProto.BOOL), _vi("acc_in", [8])]
    return helper.make_graph(nodes, "body", inputs, [_vi("cond_out", [], TensorProto.BOOL), _vi("acc_out", [8])])


def test_loop_with_constant_trip_count_is_body_times_trips():
    trips = numpy_helper.from_array(np.array(5, dtype=np.int64), "M")
    cond = numpy_helper.from_array(np.array(True), "cond")
    node = helper.make_node("Loop", ["M", "cond", "acc0"], ["acc"], body=_loop_body())
    model = _model([node], [_vi("acc0", [8]), _vi("x", [8])], [_vi("acc", [8])], initializers=[trips, cond])
    (result,) = analyze(model).nodes
    assert result.status == "ok"
    assert result.cost.flops == 5 * 8  # one add per element per iteration; Identity is a view
    assert result.cost.bytes == 5 * (4 * 8 * 3)  # per trip the Add reads acc and x, writes acc


def test_loop_with_runtime_trip_count_is_unknown_not_zero():
    cond = numpy_helper.from_array(np.array(True), "cond")
    node = helper.make_node("Loop", ["M", "cond", "acc0"], ["acc"], body=_loop_body())
    model = _model(
        [node], [_vi("M", [], TensorProto.INT64), _vi("acc0", [8]), _vi("x", [8])], [_vi("acc", [8])], initializers=[cond]
    )
    report = analyze(model)
    (result,) = report.nodes
    assert result.status == "unknown-trip-count" and result.cost is None
    assert report.unsupported == {"Loop": 1}


def test_scan_is_body_times_scan_length():
    """Scan over x [6, 4] along axis 0, state s [4]: body s + x_t, 6 iterations."""
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x_t"], ["s_out"]), helper.make_node("Identity", ["s_out"], ["y_t"])],
        "body",
        [_vi("s_in", [4]), _vi("x_t", [4])],
        [_vi("s_out", [4]), _vi("y_t", [4])],
    )
    node = helper.make_node("Scan", ["s0", "x"], ["s", "ys"], body=body, num_scan_inputs=1)
    model = _model([node], [_vi("s0", [4]), _vi("x", [6, 4])], [_vi("s", [4]), _vi("ys", [6, 4])])
    (result,) = analyze(model).nodes
    assert result.status == "ok"
    assert result.cost.flops == 6 * 4
