"""The shape engine (onnx_roofline/shapes/engine.py): ONNX's pass, then the sweep that types what it left,
with folding on demand and shape rules; what stays unknown is named, loudly. Each graph is built so
that ONNX's own inference alone leaves values unknown (checked first), and the expected shapes
come from the graph's arithmetic or from an onnxruntime run."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnx_roofline import Sizing, analyze
from onnx_roofline.commands.cli import main
from onnx_roofline.costs.cost import Cost
from onnx_roofline.shapes.engine import collect, infer
from tests.conftest import FIXTURES

MS = "com.microsoft"


def _model(nodes, inputs, outputs, initializers=(), opset=17, extra=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    opsets = [helper.make_opsetid("", opset), *(helper.make_opsetid(d, 1) for d in extra)]
    return helper.make_model(graph, opset_imports=opsets)


def _const(name, values):
    return helper.make_node(
        "Constant", [], [name], value=numpy_helper.from_array(np.asarray(values, dtype=np.int64), name)
    )


def _onnx_alone(model):
    """What ONNX's inference types by itself, to show the sweep has work to do."""
    return collect(onnx.shape_inference.infer_shapes(model, data_prop=True).graph)


def _position_ids_model():
    """The position_ids chain of a TorchScript transformers export: Range(0, Shape(x)[1]) feeds a
    Gather, whose output is reshaped with a target computed from Shape of a value ONNX types only
    symbolically: [2, 5] ids → 5 positions → [5, 8] embeddings → [count / 8, 8]."""
    nodes = [
        helper.make_node("Shape", ["ids"], ["ids_shape"]),
        _const("one", 1),
        _const("zero", 0),
        helper.make_node("Gather", ["ids_shape", "one"], ["seq"]),
        helper.make_node("Range", ["zero", "seq", "one"], ["positions"]),  # ONNX: [unk__0]
        helper.make_node("Gather", ["table", "positions"], ["embedded"]),  # [unk__0, 8]
        helper.make_node("Shape", ["embedded"], ["embedded_shape"]),
        helper.make_node("ReduceProd", ["embedded_shape"], ["count"], keepdims=1),
        _const("width", [8]),
        helper.make_node("Div", ["count", "width"], ["rows"]),  # 5·8 elements / 8 wide
        helper.make_node("Concat", ["rows", "width"], ["target"], axis=0),
        helper.make_node("Reshape", ["embedded", "target"], ["flat"]),
        helper.make_node("Relu", ["flat"], ["y"]),
    ]
    table = numpy_helper.from_array(np.zeros((64, 8), np.float32), "table")
    inputs = [helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 5])]
    return _model(nodes, inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [table])


def test_the_sweep_types_what_onnx_leaves_symbolic_and_folds_on_demand():
    model = _position_ids_model()
    alone = _onnx_alone(model)
    assert not alone["flat"].is_known  # ONNX alone: the Range is data-dependent for it
    result = infer(model)
    assert result.method == "onnx+sweep" and result.unresolved == () and result.root_cause is None
    assert result.values["positions"].shape == (5,)
    assert result.values["flat"].shape == (5, 8)  # 5 positions × 8 wide, flattened to rows of 8
    assert result.values["y"].shape == (5, 8)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (y,) = session.run(None, {"ids": np.zeros((2, 5), np.int64)})
    assert y.shape == result.values["y"].shape


def test_a_symbol_onnx_made_is_learned_once_and_resolves_every_value_that_carries_it():
    """Downstream of the Range, ONNX gives every value the same symbol for its length: once the
    Range is folded, the symbol is known, and the 20 Relus after it need no inference of their own."""
    model = _position_ids_model()
    relus = [helper.make_node("Relu", [f"r{i}" if i else "embedded"], [f"r{i + 1}"]) for i in range(20)]
    model.graph.node.extend(relus)
    model.graph.output.append(helper.make_tensor_value_info("r20", TensorProto.FLOAT, None))
    assert isinstance(_onnx_alone(model)["r20"].shape[0], str)  # symbolic, not unknown
    result = infer(model)
    assert result.values["r20"].shape == (5, 8)


def test_dims_onnx_left_to_a_symbol_of_its_own_are_completed_without_inferring_the_node(monkeypatch):
    """A Reshape to [-1, 2, 4], the Concat of a cache with the new rows, the broadcast of two
    equal-length Ranges: downstream of the Range, ONNX gives each result a fresh symbol. The sweep
    completes them from what each op keeps (element count, the sum along the axis, the broadcast)
    once the inputs are known, with no per-node inference; onnxruntime runs the same shapes."""
    model = _position_ids_model()
    model.graph.node.extend([
        _const("heads", [-1, 2, 4]),
        helper.make_node("Reshape", ["embedded", "heads"], ["split"]),  # 5·8 elements / (2·4) = 5 rows
        helper.make_node("Concat", ["cache", "embedded"], ["grown"], axis=0),  # 3 cached + 5 new rows
        helper.make_node("Range", ["zero", "seq", "one"], ["positions_again"]),  # a second symbol
        helper.make_node("Add", ["positions", "positions_again"], ["summed"]),  # [5] + [5]
    ])  # fmt: skip
    model.graph.input.append(helper.make_tensor_value_info("cache", TensorProto.FLOAT, [3, 8]))
    model.graph.output.extend(helper.make_tensor_value_info(name, kind, None) for name, kind in
                              (("split", TensorProto.FLOAT), ("grown", TensorProto.FLOAT), ("summed", TensorProto.INT64)))  # fmt: skip
    alone = _onnx_alone(model)
    assert all(not alone[name].is_known for name in ("split", "grown", "summed"))
    monkeypatch.setattr(
        onnx.shape_inference, "infer_node_outputs", lambda *a, **k: pytest.fail("a node was inferred again")
    )
    result = infer(model)
    expected = {"split": (5, 2, 4), "grown": (8, 8), "summed": (5,)}
    assert {name: result.values[name].shape for name in expected} == expected
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    outputs = dict(
        zip(
            [o.name for o in session.get_outputs()],
            session.run(None, {"ids": np.zeros((2, 5), np.int64), "cache": np.zeros((3, 8), np.float32)}),
            strict=False,
        )
    )
    assert {name: outputs[name].shape for name in expected} == expected


def test_an_op_that_keeps_nothing_that_tells_is_not_completed():
    """completion.complete: a Reshape with two unknown dims, a remainder, a Concat whose other dims
    disagree, inputs that do not broadcast: None, and the node's inference decides."""
    from onnx_roofline.model.nodes import read_nodes
    from onnx_roofline.model.tensors import TensorInfo
    from onnx_roofline.shapes.completion import complete

    def node(op, **attrs):
        return read_nodes(helper.make_graph([helper.make_node(op, ["a", "b"], ["c"], **attrs)], "g", [], []))[0]

    a, b = TensorInfo("a", (2, 3, 4), "float32"), TensorInfo("b", (3,), "int64")
    assert complete(node("Reshape"), (a, b), (6, "unk__1", 2)) == (6, 2, 2)  # 24 / 12
    assert complete(node("Reshape"), (a, b), ("unk__1", "unk__2", 4)) is None
    assert complete(node("Reshape"), (a, b), (5, "unk__1")) is None  # 24 is not a multiple of 5
    other = TensorInfo("b", (2, 5, 4), "float32")
    assert complete(node("Concat", axis=1), (a, other), (2, "unk__3", 4)) == (2, 8, 4)
    assert complete(node("Concat", axis=1), (a, TensorInfo("b", (3, 5, 4), "float32")), (2, "unk__3", 4)) is None
    assert complete(node("Add"), (a, TensorInfo("b", (3, 1), "float32")), ("unk__4", 3, 4)) == (2, 3, 4)
    assert complete(node("Add"), (a, TensorInfo("b", (5,), "float32")), ("unk__4", 3, 5)) is None


def _contrib_then_shape_chain():
    """A contrib op ONNX has no schema for (BiasSoftmax), then a Reshape whose target is computed
    from its output's shape: typed only when the shape rule's result feeds folding."""
    nodes = [
        helper.make_node("BiasSoftmax", ["x", "bias"], ["s"], domain=MS, axis=-1),
        helper.make_node("Shape", ["s"], ["s_shape"]),
        _const("zero", [0]),
        _const("one", [1]),
        helper.make_node("Slice", ["s_shape", "zero", "one"], ["lead"]),
        _const("tail", [-1]),
        helper.make_node("Concat", ["lead", "tail"], ["target"], axis=0),
        helper.make_node("Reshape", ["s", "target"], ["flat"]),
        helper.make_node("MatMul", ["flat", "w"], ["y"]),
    ]
    inputs = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4, 6]),
        helper.make_tensor_value_info("bias", TensorProto.FLOAT, [3, 4, 6]),
        helper.make_tensor_value_info("w", TensorProto.FLOAT, [24, 2]),
    ]
    return _model(nodes, inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], extra=(MS,))


def test_a_shape_rule_result_feeds_folding_and_inference_downstream():
    report = analyze(_contrib_then_shape_chain())
    assert report.uncosted.count == 0
    matmul = report.nodes[-1]
    assert matmul.outputs[0].shape == (3, 2)
    assert matmul.cost.flops == 2 * 3 * 24 * 2  # [3, 24] × [24, 2]: 2·M·K·N


@pytest.mark.parametrize(("indices", "axis"), [([1, -1, 5], -1), ([[0, 2], [1, 1]], 0), ([[3], [-4]], 1)])
def test_one_hot_folds_as_onnx_reference_evaluates_it(indices, axis):
    """OneHot of depth 4 with off/on 2/7: a negative index counts from the depth, one out of range
    sets nothing, `axis` places the new axis. Checked against onnx's reference evaluator."""
    from onnx.reference import ReferenceEvaluator

    from onnx_roofline.shapes.folding import _EVALUATORS

    arrays = [np.array(indices, np.int64), np.array(4, np.int64), np.array([2, 7], np.int64)]
    node = helper.make_node("OneHot", ["i", "d", "v"], ["y"], axis=axis)
    graph = helper.make_graph(
        [node],
        "one_hot",
        [helper.make_tensor_value_info(n, TensorProto.INT64, None) for n in "idv"],
        [helper.make_tensor_value_info("y", TensorProto.INT64, None)],
    )
    (expected,) = ReferenceEvaluator(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])).run(
        None, dict(zip("idv", arrays, strict=False))
    )
    folded = _EVALUATORS["OneHot"](arrays, {"axis": axis})
    assert folded.dtype == expected.dtype and np.array_equal(folded, expected)


def test_a_tile_by_a_one_hot_of_a_shape_is_typed():
    # Tile's repeats [1, 3] = OneHot([1], depth 2, off 1, on 3) flattened, the depth x's rank: what
    # Mixtral's batched experts export does with the shapes of its routing.
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Size", ["shape"], ["rank"]),
        helper.make_node("OneHot", ["one", "rank", "off_on"], ["hot"], axis=-1),  # [[1, 3]]
        helper.make_node("Reshape", ["hot", "flat"], ["repeats"]),
        helper.make_node("Tile", ["x", "repeats"], ["y"]),
    ]
    constants = [
        numpy_helper.from_array(np.array([1], np.int64), "one"),
        numpy_helper.from_array(np.array([1, 3], np.int64), "off_on"),
        numpy_helper.from_array(np.array([-1], np.int64), "flat"),
    ]
    model = _model(
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        constants,
    )
    (y,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": np.ones((3, 2), np.float32)}
    )
    report = analyze(model)
    assert report.uncosted.count == 0 and report.nodes[-1].outputs[0].shape == y.shape == (3, 6)


def test_an_op_nobody_types_is_named_as_the_root_cause_everywhere(capsys):
    """An op of an unknown domain, then a chain: the JSON, the table and stderr say how many nodes
    are uncosted and name the first node whose inputs are known but whose outputs are not."""
    nodes = [
        helper.make_node("Relu", ["x"], ["a"]),
        helper.make_node("Mystery", ["a"], ["b"], domain="acme"),
        helper.make_node("Relu", ["b"], ["c"]),
        helper.make_node("Relu", ["c"], ["y"]),
    ]
    model = _model(
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        extra=("acme",),
    )
    report = analyze(model)
    uncosted = report.to_dict()["uncosted"]
    assert uncosted["count"] == 3  # Mystery and the two Relus after it
    assert uncosted["root_cause"] == {"index": 1, "name": "Mystery_1", "op_type": "Mystery", "domain": "acme",
                                      "reason": "no shape rule for acme::Mystery"}  # fmt: skip
    assert (
        uncosted["message"]
        == "3 of 4 nodes uncosted, downstream of Mystery_1 (Mystery): no shape rule for acme::Mystery"
    )


def _masked(expand: bool) -> onnx.ModelProto:
    """A mask's sum sizing an Expand of `x` (beside a dim from `x`'s Shape), and the mask's NonZero."""
    nodes = [
        helper.make_node("ReduceSum", ["mask"], ["count"], keepdims=1),  # [1]: how many positions are set
        helper.make_node("Shape", ["x"], ["x_shape"]),
        helper.make_node("Concat", ["x_shape", "count"], ["target"], axis=0),
        *([helper.make_node("Expand", ["x", "target"], ["wide"])] if expand else []),  # [4, 1, count]: count is data
        helper.make_node("NonZero", ["mask"], ["where"]),
    ]
    outputs = [
        helper.make_tensor_value_info(name, TensorProto.FLOAT if name == "wide" else TensorProto.INT64, None)
        for name in (["wide"] if expand else []) + ["where", "target"]
    ]
    return _model(
        nodes,
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 1]),
            helper.make_tensor_value_info("mask", TensorProto.INT64, [6]),
        ],
        outputs,
    )


def test_a_value_computed_from_a_graph_input_names_that_input():
    """The root cause names the mask, whose values make the Expand's size data, and not `x`,
    whose Shape reads no value. A NonZero of the mask, the same."""
    cause = analyze(_masked(expand=True)).uncosted.root_cause
    assert cause.op_type == "Expand"
    # the value in the form the input takes: 1-D of 6 (a rank-0 N would be refused)
    assert cause.reason.endswith(
        "not a constant the analysis could fold (computed from the values of graph input 'mask': give it with --value mask=N,N,N,N,N,N)"
    )
    report = analyze(_masked(expand=False))  # a NonZero of it: at most its 6 elements, costed there
    assert report.uncosted.count == 0 and [(bound.op_type, bound.rows) for bound in report.model.bounds] == [
        ("NonZero", 6)
    ]


def test_the_cli_says_so_on_stderr_and_in_the_table_and_check_fails(tmp_path, capsys):
    path = tmp_path / "m.onnx"
    nodes = [
        helper.make_node("Mystery", ["x"], ["b"], domain="acme"),
        helper.make_node("Relu", ["b"], ["y"]),
        helper.make_node("Neg", ["x"], ["z"]),
    ]
    onnx.save(_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                     [helper.make_tensor_value_info("y", TensorProto.FLOAT, None), helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
                     extra=("acme",)), path)  # fmt: skip
    assert (
        main([str(path)]) == 0
    )  # a partial answer (Neg is costed); with nothing costed, exit 2 (test_nothing_costed.py)
    out, err = capsys.readouterr()
    assert "UNCOSTED  2 of 3 nodes uncosted, downstream of Mystery_0 (Mystery)" in out
    assert "warning: 2 of 3 nodes uncosted, downstream of Mystery_0 (Mystery): no shape rule for acme::Mystery" in err
    assert main(["check", str(path), "--max-latency", "1s"]) == 1  # a gate cannot vouch for a partial answer
    capsys.readouterr()
    assert main(["check", str(path), "--max-latency", "1s", "--max-unsupported", "2", "--max-unknown-shape", "2"]) == 0


def test_an_output_nobody_reads_does_not_block_its_node():
    """An opset-9 Dropout's mask output: ONNX types it without a shape; nothing reads it. The node
    is costed from what it does write (y), and the mask is an absent slot."""
    nodes = [helper.make_node("Dropout", ["x"], ["d", "mask"], ratio=0.1), helper.make_node("Relu", ["d"], ["y"])]
    model = _model(
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        opset=9,
    )
    report = analyze(model)
    dropout = report.nodes[0]
    assert dropout.status == "ok", dropout.reason
    assert dropout.outputs[1] is None
    assert dropout.cost.bytes == 2 * 3 * 4 * 2  # reads x, writes d: 6 float32 each


def test_a_node_nothing_reads_is_typed_and_costed_as_any_other():
    """A dead Cast (an onnxruntime-optimized BERT, dynamically quantized, leaves one): its Slice's
    end is Shape-derived, so only the sweep types it; the Cast must be swept too, not left an
    absent slot its rule cannot cost (that was a traceback). onnxruntime writes [1, 8] int32."""
    ints = lambda name, values: numpy_helper.from_array(np.array(values, np.int64), name)  # noqa: E731
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "one"], ["seq"], axis=0),
        helper.make_node("Unsqueeze", ["seq", "zero"], ["end"]),
        helper.make_node("Slice", ["table", "zero", "end", "one_1d"], ["pos"]),
        helper.make_node("Cast", ["pos"], ["pos_int32"], to=TensorProto.INT32),
        helper.make_node("Identity", ["x"], ["y"]),
    ]
    model = _model(
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.INT64, [1, "seq"])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, [1, "seq"])],
        [ints("one", 1), ints("zero", [0]), ints("one_1d", [1]), ints("table", np.arange(512).reshape(1, 512))],
    )
    exposed = onnx.ModelProto()
    exposed.CopyFrom(model)
    exposed.graph.output.append(onnx.ValueInfoProto(name="pos_int32"))
    session = ort.InferenceSession(exposed.SerializeToString(), providers=["CPUExecutionProvider"])
    observed = session.run(["pos_int32"], {"x": np.zeros((1, 8), np.int64)})[0]
    cast = analyze(model, sizing=Sizing(dims={"seq": 8})).nodes[4]
    assert cast.status == "ok" and cast.outputs[0].shape == observed.shape == (1, 8)
    assert cast.cost.bytes == 8 * 8 + 8 * 4  # reads 8 int64, writes 8 int32


def test_a_rule_that_needs_an_output_nobody_reads_is_unknown_shape_not_a_traceback(monkeypatch):
    """A rule reading an absent slot (an unread output no pass typed) reports the node unknown-shape."""
    from tests.test_verify import replace_rule

    replace_rule(monkeypatch, "Dropout", lambda node: Cost(flops=node.outputs[1].numel))
    nodes = [helper.make_node("Dropout", ["x"], ["d", "mask"], ratio=0.1), helper.make_node("Relu", ["d"], ["y"])]
    model = _model(
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        opset=9,
    )
    dropout = analyze(model).nodes[0]
    assert dropout.status == "unknown-shape" and "'mask', which nothing reads" in dropout.reason


def test_an_output_dim_the_exporter_traced_gives_way_to_the_bound_inputs():
    """onnxmltools declares a classifier's `label [1]` whatever the batch, as a trace declares its
    batch: at batch 4 onnxruntime writes 4 labels, and so must the analysis (4 int64 = 32 B)."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Cast", ["r"], ["label"], to=TensorProto.INT64)]
    model = _model(
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch"])],
        [helper.make_tensor_value_info("label", TensorProto.INT64, [1])],
    )
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (observed,) = session.run(None, {"x": np.ones(4, np.float32)})
    assert observed.shape == (4,)
    cast = analyze(model, sizing=Sizing(dims={"batch": 4})).nodes[1]
    assert cast.outputs[0].shape == observed.shape
    assert cast.cost.bytes == 4 * 4 + 4 * 8  # reads 4 float32, writes 4 int64
    static = analyze(
        _model(
            nodes,
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
            [helper.make_tensor_value_info("label", TensorProto.INT64, [1])],
        )
    )
    assert static.nodes[1].outputs[0].shape == (1,)  # nothing re-bound: the declaration stands


def _loop_model():
    """A Loop whose trip count is a graph input; its body adds x to the carried [4, 8] value."""
    body = helper.make_graph(
        [helper.make_node("Add", ["y_in", "x"], ["y_out"]), helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []), helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("y_in", TensorProto.FLOAT, [4, 8])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []), helper.make_tensor_value_info("y_out", TensorProto.FLOAT, [4, 8])],
    )  # fmt: skip
    loop = helper.make_node("Loop", ["trips", "", "y0"], ["y"], body=body)
    inputs = [helper.make_tensor_value_info("trips", TensorProto.INT64, []), helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8]),
              helper.make_tensor_value_info("y0", TensorProto.FLOAT, [4, 8])]  # fmt: skip
    return _model([loop], inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])])


def test_a_loop_trip_count_given_on_the_command_line(tmp_path, capsys):
    path = tmp_path / "loop.onnx"
    onnx.save(_loop_model(), path)
    (loop,) = analyze(path).nodes
    assert loop.status == "unknown-trip-count" and "--value trips=N" in loop.reason
    report = analyze(path, sizing=Sizing(values={"trips": 10}))
    loop, *body = report.nodes
    assert sum(n.cost.flops for n in body) == 10 * 4 * 8  # ten trips of a [4, 8] Add
    assert (
        sum(n.cost.bytes for n in body) == 10 * (2 + 1) * 4 * 8 * 4
    )  # each trip reads two [4, 8] float32 and writes one
    assert loop.cost.bytes == 8  # the Loop itself reads its int64 trip count
    assert loop.parameters == 0  # a value given is not a weight
    assert main([str(path), "--value", "trips=10", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["totals"]["flops"] == 320


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("trips=ten", "malformed --value"),
        ("nothere=3", "is not a model input"),
        ("trips=2.5", "holds integers"),
        ("trips=1,2", "rank-1 value for an input of rank 0"),
        ("trips=99999999999999999999", "does not fit"),
    ],
)
def test_a_bad_value_is_one_line_and_exit_2(tmp_path, capsys, text, message):
    path = tmp_path / "loop.onnx"
    onnx.save(_loop_model(), path)
    assert main([str(path), "--value", text]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("piece_nodes", [None, 1], ids=["whole", "in-pieces"])
def test_external_weights_are_never_opened_by_the_analysis(tmp_path, piece_nodes):
    """onnxruntime-genai's Qwen2 build adds q/k/v biases that are external initializers, upstream
    of a Reshape chain. The data file exists, and an audit hook fails the run if anything opens it;
    the analysis types and costs every node all the same, over the whole graph or in pieces."""
    bias = numpy_helper.from_array(np.ones(48, np.float32), "bias")
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["qkv"]),
        helper.make_node("Add", ["qkv", "bias"], ["biased"]),
        helper.make_node("Shape", ["biased"], ["shape"]),
        _const("lead", [0, 1]),
        helper.make_node("Gather", ["shape", "lead"], ["batch_seq"]),
        _const("heads", [3, 16]),
        helper.make_node("Concat", ["batch_seq", "heads"], ["target"], axis=0),
        helper.make_node("Reshape", ["biased", "target"], ["y"]),
    ]
    weight = numpy_helper.from_array(np.ones((16, 48), np.float32), "w")
    model = _model(
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 7, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [weight, bias],
    )
    path = tmp_path / "m.onnx"
    onnx.save(
        model, path, save_as_external_data=True, all_tensors_to_one_file=True, location="m.data", size_threshold=0
    )
    script = f"""
import sys
data = {str(tmp_path / "m.data")!r}
def hook(event, args):
    if event == "open" and args and str(args[0]).endswith("m.data"):
        raise SystemExit("the analysis opened the weights file")
sys.addaudithook(hook)
from onnx_roofline import analyze
from onnx_roofline.model import pieces
pieces.PIECE_NODES = {piece_nodes or 10**9}
report = analyze({str(path)!r}, dims={{"batch": 2}})
assert report.uncosted.count == 0, report.uncosted.message
print(report.nodes[-1].outputs[0].shape)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "(2, 7, 3, 16)"  # [batch, 7, 48] split into 3 heads of 16


def test_the_analysis_imports_neither_onnxruntime_nor_sympy():
    """The core install has no sympy, and importing onnxruntime writes into the user's home:
    `analyze` needs neither, on the shipped TorchScript decode graph (the hardest fixture)."""
    script = f"""
import sys
from onnx_roofline import analyze
report = analyze({str(FIXTURES / "gpt2_decode_fp32_torchscript.onnx")!r}, dims={{"batch": 1, "past_sequence": 1023}})
assert report.uncosted.count == 0, report.uncosted.message
print(sorted(m for m in ("onnxruntime", "sympy", "torch") if m in sys.modules))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_when_onnx_whole_graph_pass_fails_the_graph_is_typed_node_by_node(monkeypatch):
    """ONNX's pass raising (an op its C++ inference chokes on) loses nothing but time: the graph's
    own declared types are read instead (inferred.declared_types), the sweep types the rest, the
    report says so, and every value comes out as the whole-graph pass gives it."""
    from onnx_roofline.shapes import engine as shapes
    from tests.conftest import FIXTURES

    model, dims = FIXTURES / "resnet50_fp32.onnx", {"batch": 1}
    expected = analyze(model, sizing=Sizing(dims=dims))

    def fails(_model):
        raise RuntimeError("inference failed here")

    monkeypatch.setattr(shapes, "inferred_types", fails)
    report = analyze(model, sizing=Sizing(dims=dims))
    assert any("inference failed here" in warning for warning in report.model.shape_warnings)
    assert report.uncosted.count == 0
    assert [(n.inputs, n.outputs) for n in report.nodes] == [(n.inputs, n.outputs) for n in expected.nodes]


def test_a_sequence_an_op_without_a_sequence_rule_writes_is_said_to_be_one_in_the_root_cause():
    """A Loop that returns a sequence (dynamo's EmbeddingBag builds one): its elements are not
    followed through the body, and the root cause says the value is a sequence."""
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("SequenceInsert", ["carried", "x"], ["grown"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_sequence_value_info("carried", TensorProto.FLOAT, [2, 3]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_sequence_value_info("grown", TensorProto.FLOAT, [2, 3]),
        ],
    )
    nodes = [
        helper.make_node("SequenceEmpty", [], ["empty"], dtype=TensorProto.FLOAT),
        helper.make_node("Loop", ["trips", "", "empty"], ["filled"], body=body),
        helper.make_node("ConcatFromSequence", ["filled"], ["y"], axis=0),
    ]
    model = _model(
        nodes,
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
            helper.make_tensor_value_info("trips", TensorProto.INT64, []),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    report = analyze(model)
    cause = report.model.shape_root_cause
    assert cause.op_type == "Loop" and "'filled': a sequence of tensors" in cause.reason, cause
