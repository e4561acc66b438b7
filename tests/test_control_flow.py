"""Control flow (If, Loop, Scan) and model-local functions: bodies costed node by node."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnx_roofline import Sizing, analyze

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
    model = _model(
        [call], [_vi("x", [4, 8]), _vi("w", [8, 16]), _vi("b", [16])], [_vi("y", [4, 16])], functions=[dense]
    )
    (node,) = analyze(model).nodes
    assert node.status == "ok"
    assert node.cost.flops == 2 * 4 * 8 * 16 + 4 * 16 + 4 * 16  # MatMul, bias add, Relu (one compare each)
    assert node.cost.bytes_read == 4 * (4 * 8 + 8 * 16) + 4 * (4 * 16 + 16) + 4 * (4 * 16)  # each body node reads
    assert node.cost.bytes_written == 3 * 4 * (4 * 16)  # t, u, y each written once


def _with_a_default_eps(tmp_path):
    """onnxscript's `def add_eps(x, eps: float = 1e-5)` called as `add_eps(x)`: the default lives in
    the function's attribute_proto (IR 10), and a body Constant reads it (`value_float = @eps`)."""
    constant = helper.make_node("Constant", [], ["e"])
    constant.attribute.append(
        onnx.AttributeProto(name="value_float", type=onnx.AttributeProto.FLOAT, ref_attr_name="eps")
    )
    body = [constant, helper.make_node("Add", ["x", "e"], ["y"])]
    add_eps = helper.make_function("this", "AddEps", ["x"], ["y"], body, [helper.make_opsetid("", 18)])
    add_eps.attribute_proto.append(helper.make_attribute("eps", 1e-5))
    model = _model(
        [helper.make_node("AddEps", ["x"], ["y"], domain="this")],
        [_vi("x", [2, 4])],
        [_vi("y", [2, 4])],
        functions=[add_eps],
    )
    model.ir_version = 10
    path = tmp_path / "defaults.onnx"
    path.write_bytes(model.SerializeToString())
    return path


def test_a_function_attribute_left_at_its_default_is_costed_and_runs(tmp_path):
    from onnx_roofline.commands.verify import verify

    path = _with_a_default_eps(tmp_path)
    (node,) = analyze(path).nodes
    assert node.status == "ok" and node.cost.flops == 2 * 4  # the Add: one per element; the Constant is free
    assert (
        verify(path).comparison.disagreements == ()
    )  # onnxruntime runs the inlined copy (the default given to the call)


def _body(report):
    """The rows of the report that live in a body, and their summed FLOPs and bytes."""
    rows = [n for n in report.nodes if n.scope]
    return rows, sum(n.cost.flops for n in rows), sum(n.cost.bytes for n in rows)


def _branch(name, op, shape):
    return helper.make_graph([helper.make_node(op, ["x", "x"], [f"{name}_out"])], name, [], [_vi(f"{name}_out", shape)])


def test_if_takes_the_costlier_branch():
    """then: MatMul x·x on [32, 32] (2·32³ FLOPs); else: Add x+x (32² FLOPs): the MatMul branch counts."""
    node = helper.make_node(
        "If",
        ["cond"],
        ["y"],
        then_branch=_branch("then", "MatMul", [32, 32]),
        else_branch=_branch("else", "Add", [32, 32]),
    )
    model = _model([node], [_vi("cond", [], TensorProto.BOOL), _vi("x", [32, 32])], [_vi("y", [32, 32])])
    report = analyze(model)
    node, matmul = report.nodes  # the If's own row, then its branch's
    assert (
        node.op_type == "If" and node.status == "ok" and node.cost.flops == 0 and node.cost.bytes == 1
    )  # it reads its bool condition
    assert (
        matmul.name == "If_0/then_branch/MatMul_0"
        and matmul.scope == "If_0/then_branch"
        and matmul.own_name == "MatMul_0"
    )
    assert matmul.cost.flops == 2 * 32 * 32 * 32
    assert matmul.cost.bytes == 4 * 32 * 32 * 2  # the body MatMul reads x once (same tensor twice) and writes y
    assert report.totals.flops == 2 * 32 * 32 * 32  # the rows add up: the If itself computes nothing
    (branch,) = (
        report.model.branches
    )  # nothing says which branch runs: both analyzed, the heavier counted, the other said
    assert branch.taken == "then_branch" and branch.other.flops == 32 * 32 and branch.inputs == ("cond",)
    assert "--value cond=" in branch.why


def test_an_if_whose_condition_is_given_costs_the_branch_it_takes():
    """optimum's merged decoder: an If on a graph input (use_cache_branch) between the cached and
    the uncached path. Given the input a value, the branch it chooses is the cost — not the
    costlier one — and the other need not even be typeable (here it is not: Reshape to a target
    that does not exist, the uncached path at the dims of the cached one)."""
    broken = helper.make_graph(
        [helper.make_node("Reshape", ["x", "nowhere"], ["else_out"])], "else", [], [_vi("else_out", None)]
    )
    node = helper.make_node(
        "If", ["use_cache"], ["y"], then_branch=_branch("then", "Add", [32, 32]), else_branch=broken
    )
    model = _model(
        [node],
        [_vi("use_cache", [], TensorProto.BOOL), _vi("x", [32, 32]), _vi("nowhere", None, TensorProto.INT64)],
        [_vi("y", None)],
    )
    report = analyze(model, sizing=Sizing(values={"use_cache": 1}))
    _, taken = report.nodes
    assert taken.status == "ok" and taken.cost.flops == 32 * 32  # the Add: one FLOP per element
    assert report.model.branches[0].why == "--value use_cache"
    costlier = helper.make_node(
        "If",
        ["use_cache"],
        ["y"],
        then_branch=_branch("then", "MatMul", [32, 32]),
        else_branch=_branch("else", "Add", [32, 32]),
    )
    model = _model([costlier], [_vi("use_cache", [], TensorProto.BOOL), _vi("x", [32, 32])], [_vi("y", [32, 32])])
    assert (
        analyze(model, sizing=Sizing(values={"use_cache": 0})).totals.flops == 32 * 32
    )  # else: the Add, though the MatMul costs more
    assert analyze(model, sizing=Sizing(values={"use_cache": 1})).totals.flops == 2 * 32 * 32 * 32
    assert analyze(model).totals.flops == 2 * 32 * 32 * 32  # not given: the worse case


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
    report = analyze(model)
    loop = report.nodes[0]
    rows, flops, moved = _body(report)
    assert loop.status == "ok" and loop.cost.flops == 0 and loop.cost.bytes == 8 + 1  # it reads M (int64) and cond
    assert [(r.own_name, r.trips) for r in rows] == [("Identity_0", 5), ("Add_1", 5)]
    assert flops == 5 * 8  # one add per element per iteration; Identity is a view
    assert moved == 5 * (4 * 8 * 3)  # per trip the Add reads acc and x, writes acc
    assert report.totals.flops == 5 * 8 and report.totals.bytes == moved + 9


def test_loop_with_runtime_trip_count_is_unknown_not_zero():
    cond = numpy_helper.from_array(np.array(True), "cond")
    node = helper.make_node("Loop", ["M", "cond", "acc0"], ["acc"], body=_loop_body())
    model = _model(
        [node],
        [_vi("M", [], TensorProto.INT64), _vi("acc0", [8]), _vi("x", [8])],
        [_vi("acc", [8])],
        initializers=[cond],
    )
    report = analyze(model)
    (result,) = report.nodes
    assert result.status == "unknown-trip-count" and result.cost is None
    assert report.unsupported == {"Loop": 1}


def test_a_loop_without_a_trip_count_says_it_stops_on_its_condition():
    """A while-style Loop (M absent, as torch's while_loop and tf2onnx's tf.while_loop write it): no
    --value can bound it, and the reason does not offer one."""
    cond = numpy_helper.from_array(np.array(True), "cond")
    node = helper.make_node("Loop", ["", "cond", "acc0"], ["acc"], body=_loop_body())
    model = _model([node], [_vi("acc0", [8]), _vi("x", [8])], [_vi("acc", [8])], initializers=[cond])
    (result,) = analyze(model).nodes
    assert result.status == "unknown-trip-count"
    assert (
        result.reason
        == "Loop has no trip count M: it runs until its body's condition turns false, which is not a constant"
    )


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
    report = analyze(model)
    scan = report.nodes[0]
    assert (
        scan.status == "ok" and scan.cost.bytes == 2 * 4 * 6 * 4
    )  # it copies each trip's y_t into ys: [6, 4] read and written
    assert _body(report)[1] == 6 * 4


# --- bodies whose inputs carry no shapes: typed from the call site ----------------------------------


def _untyped(name, elem=F32):
    """A body input declared with its element type only, as expanded functions write them."""
    return helper.make_tensor_value_info(name, elem, None)


def test_scan_body_typed_from_the_call_site():
    """Scan over q [T=5, B=2, 8] and k [5, 2, 8], state s [2, 8, 8]; the body's inputs have no shapes:
    outer = Unsqueeze(k_t, -1) · Unsqueeze(q_t, -2)  [2, 8, 1]·[2, 1, 8] → [2, 8, 8]: 2·1 per output
    s' = s + outer: 1 per element; the scan output y_t = ReduceSum(s', axis -1) [2, 8]: 7 adds per row.
    The Unsqueeze axes are outer-scope constants, as in the expanded LinearAttention."""
    body = helper.make_graph(
        [
            helper.make_node("Unsqueeze", ["k_t", "minus_one"], ["column"]),
            helper.make_node("Unsqueeze", ["q_t", "minus_two"], ["row"]),
            helper.make_node("MatMul", ["column", "row"], ["outer"]),
            helper.make_node("Add", ["s_in", "outer"], ["s_out"]),
            helper.make_node("ReduceSum", ["s_out", "minus_one"], ["y_t"], keepdims=0),
        ],
        "step",
        [_untyped("s_in"), _untyped("q_t"), _untyped("k_t")],
        [helper.make_empty_tensor_value_info("s_out"), helper.make_empty_tensor_value_info("y_t")],
    )
    node = helper.make_node("Scan", ["s0", "q", "k"], ["s", "ys"], body=body, num_scan_inputs=2)
    axes = [
        numpy_helper.from_array(np.array([v], dtype=np.int64), n) for n, v in (("minus_one", -1), ("minus_two", -2))
    ]
    model = _model([node], [_vi("s0", [2, 8, 8]), _vi("q", [5, 2, 8]), _vi("k", [5, 2, 8])], [_vi("s", [2, 8, 8]), _vi("ys", [5, 2, 8])],
                   initializers=axes)  # fmt: skip
    report = analyze(model)
    assert all(n.status == "ok" for n in report.nodes), report.nodes
    rows, flops, moved = _body(report)
    outer, add, reduce = 2 * 1 * (2 * 8 * 8), 2 * 8 * 8, 2 * 8 * 7
    assert flops == 5 * (outer + add + reduce)
    step_bytes = (
        2 * 8  # each Unsqueeze reads its int64 axes; the data is a view
        + 4 * (2 * 8 + 2 * 8 + 2 * 8 * 8)  # MatMul reads column, row; writes outer
        + 4 * (3 * 2 * 8 * 8)  # Add reads s and outer, writes s'
        + 4 * (2 * 8 * 8)
        + 8
        + 4 * (2 * 8)  # ReduceSum reads s' and its axes, writes y_t
    )
    assert moved == 5 * step_bytes


def test_scan_input_axes_are_removed_from_the_body_input():
    """x [3, 6] scanned along axis 1: each step sees x_t [3]; the body's Mul by 2 is 3 FLOPs, 6 steps."""
    two = numpy_helper.from_array(np.array(2.0, dtype=np.float32), "two")
    body = helper.make_graph(
        [helper.make_node("Mul", ["x_t", "two"], ["y_t"])],
        "step",
        [_untyped("x_t")],
        [helper.make_empty_tensor_value_info("y_t")],
    )
    node = helper.make_node("Scan", ["x"], ["ys"], body=body, num_scan_inputs=1, scan_input_axes=[1])
    model = _model([node], [_vi("x", [3, 6])], [_vi("ys", [6, 3])], initializers=[two])
    report = analyze(model)
    assert report.nodes[0].status == "ok", report.nodes[0].reason
    assert _body(report)[1] == 6 * 3


def test_loop_body_typed_from_the_call_site():
    """Loop, 4 trips; body inputs untyped: (i, cond, acc [16, 32]) → acc·w + Cast(i), w [32, 32]
    an outer value: the MatMul 2·16·32·32, the add of the cast iteration number 16·32 (Cast of a
    scalar int64 to float: 0 FLOPs)."""
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("MatMul", ["acc_in", "w"], ["product"]),
            helper.make_node("Cast", ["i"], ["i_float"], to=TensorProto.FLOAT),
            helper.make_node("Add", ["product", "i_float"], ["acc_out"]),
        ],
        "body",
        [_untyped("i", TensorProto.INT64), _untyped("cond_in", TensorProto.BOOL), _untyped("acc_in")],
        [helper.make_empty_tensor_value_info("cond_out"), helper.make_empty_tensor_value_info("acc_out")],
    )
    trips = numpy_helper.from_array(np.array(4, dtype=np.int64), "M")
    cond = numpy_helper.from_array(np.array(True), "cond")
    node = helper.make_node("Loop", ["M", "cond", "acc0"], ["acc"], body=body)
    model = _model(
        [node], [_vi("acc0", [16, 32]), _vi("w", [32, 32])], [_vi("acc", [16, 32])], initializers=[trips, cond]
    )
    report = analyze(model)
    rows, flops, _ = _body(report)
    assert all(n.status == "ok" for n in report.nodes)
    assert flops == 4 * (2 * 16 * 32 * 32 + 16 * 32)
    assert sum(r.cost.bytes_written for r in rows) == 4 * (
        4 * 16 * 32 + 4 * 1 + 4 * 16 * 32
    )  # product, i_float, acc' per trip


def test_if_inside_a_loop_body_is_typed_too():
    """Loop, 3 trips, carried acc [8]: an If whose then-branch computes Relu(acc · x) through an
    undeclared intermediate; the costlier branch counts: 8 multiplies + 8 compares per trip."""
    then = helper.make_graph(
        [helper.make_node("Mul", ["acc_in", "x"], ["scaled"]), helper.make_node("Relu", ["scaled"], ["then_out"])],
        "then", [], [helper.make_empty_tensor_value_info("then_out")],
    )  # fmt: skip
    orelse = helper.make_graph(
        [helper.make_node("Identity", ["acc_in"], ["else_out"])],
        "else",
        [],
        [helper.make_empty_tensor_value_info("else_out")],
    )
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("If", ["cond_in"], ["acc_out"], then_branch=then, else_branch=orelse),
        ],
        "body",
        [_untyped("i", TensorProto.INT64), _untyped("cond_in", TensorProto.BOOL), _untyped("acc_in")],
        [helper.make_empty_tensor_value_info("cond_out"), helper.make_empty_tensor_value_info("acc_out")],
    )
    trips = numpy_helper.from_array(np.array(3, dtype=np.int64), "M")
    cond = numpy_helper.from_array(np.array(True), "cond")
    node = helper.make_node("Loop", ["M", "cond", "acc0"], ["acc"], body=body)
    model = _model([node], [_vi("acc0", [8]), _vi("x", [8])], [_vi("acc", [8])], initializers=[trips, cond])
    report = analyze(model)
    assert all(n.status == "ok" for n in report.nodes)
    assert report.totals.flops == 3 * (8 + 8)
    relu = next(n for n in report.nodes if n.op_type == "Relu")  # nested: the Loop's body, then the If's branch
    assert relu.scope == "Loop_0/body/If_1/then_branch" and relu.trips == 3


def test_loop_carried_value_that_grows_ends_its_growth_times_the_trips_longer():
    """acc grows by one element per trip (Concat): typed again from its first trip's end, the body
    grows it by one again, so it ends 3 trips × 1 longer; the body's rows are costed at the last
    trip's sizes, the most any trip moves."""
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("Concat", ["acc_in", "one"], ["acc_out"], axis=0),
        ],
        "body",
        [_untyped("i", TensorProto.INT64), _untyped("cond_in", TensorProto.BOOL), _untyped("acc_in")],
        [helper.make_empty_tensor_value_info("cond_out"), helper.make_empty_tensor_value_info("acc_out")],
    )
    initializers = [
        numpy_helper.from_array(np.array(3, dtype=np.int64), "M"),
        numpy_helper.from_array(np.array(True), "cond"),
        numpy_helper.from_array(np.ones(1, dtype=np.float32), "one"),
    ]
    node = helper.make_node("Loop", ["M", "cond", "acc0"], ["acc"], body=body)
    model = _model([node], [_vi("acc0", [2])], [helper.make_empty_tensor_value_info("acc")], initializers=initializers)
    report = analyze(model)
    loop, concat = report.nodes[0], report.nodes[-1]
    assert loop.outputs[0].shape == (2 + 3 * 1,) and loop.status == "ok"  # [2], then one element a trip
    assert concat.op_type == "Concat" and concat.trips == 3
    assert concat.cost.bytes == 3 * (4 + 1 + 5) * 4  # each trip at most the last: [4] and [1] read, [5] written
