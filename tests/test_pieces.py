"""ONNX's inference of a very large graph in pieces (onnx_roofline/model/pieces.py), which bounds the
memory of its C++ pass: every graph comes out as the whole-graph pass gives it — itself checked
against onnxruntime by the corpus and fixture tests — with the pieces made small enough here to
cut every chain the exporters emit."""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnx_roofline import Sizing, analyze
from onnx_roofline.model import pieces
from onnx_roofline.model.conformance import CHECKER, conformance
from onnx_roofline.model.inferred import CHECKED, CHECKED_PROPAGATED, LENIENT
from onnx_roofline.model.loader import load_with_nodes
from onnx_roofline.model.nodes import read_nodes
from onnx_roofline.shapes import engine
from onnx_roofline.shapes.engine import _onnx_inference, collect
from tests.conftest import FIXTURES
from tests.corpus import cases

CORPUS = {case["id"]: case for case in cases()}
GRAPHS = {
    "gpt2_decode_fp32_torchscript": (FIXTURES / "gpt2_decode_fp32_torchscript.onnx", {"batch": 1, "past_sequence": 1023}),
    "gpt2_decode_fp16": (FIXTURES / "gpt2_decode_fp16.onnx", {"batch": 1, "past_sequence": 1023}),
    **{name: (CORPUS[name]["path"], CORPUS[name]["dims"])
       for name in ("ts_bart_decoder_past@decode", "ortopt_gpt2_past", "genai_qwen2_int4", "opset11_loop_rnn", "qdq_bert", "vconv17_from9_gpt2")},
}  # fmt: skip


def _results(report):
    """Each node's status, output types and cost."""
    return [
        (n.name, n.status, [None if t is None else (t.shape, t.dtype) for t in n.outputs], n.cost) for n in report.nodes
    ]


def _in_pieces(monkeypatch, size: int) -> list[int]:
    """Pieces of `size` nodes from here on, the shape engine's usual (lenient) pass alone (its
    checked first try, which types a valid graph the same: test at the end, turned off); returns
    the node count of each piece ONNX is given in that pass."""
    given: list[int] = []
    infer = pieces.inferred_types

    def counting(model, mode=LENIENT):
        if mode == LENIENT:  # not conformance's own pieces (tests below)
            given.append(len(model.graph.node))
        return infer(model, mode)

    monkeypatch.setattr(pieces, "PIECE_NODES", size)
    monkeypatch.setattr(pieces, "inferred_types", counting)
    monkeypatch.setattr(engine, "_checked_inference", lambda model, nodes: (None, CHECKED_PROPAGATED))
    return given


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_pieces_give_the_whole_graphs_results(monkeypatch, name):
    path, dims = GRAPHS[name]
    whole = analyze(path, partial=True, sizing=Sizing(dims=dims))
    given = _in_pieces(monkeypatch, 13)  # odd and small: cuts fall inside every Shape → Reshape chain
    pieced = analyze(path, partial=True, sizing=Sizing(dims=dims))
    nodes = whole.model.node_count  # the main graph's: bodies are inferred with their node
    assert given == [min(13, nodes - start) for start in range(0, nodes, 13)]  # ceil(nodes / 13) pieces, in order
    assert len(given) == math.ceil(nodes / 13) > 1
    assert _results(pieced) == _results(whole)


def test_a_piece_sees_the_bodies_reads_and_the_small_initializers_before_it(monkeypatch):
    """An If whose branches read a value two pieces back, and a Reshape whose target is a small
    initializer: ONNX's pass types both by itself, as it does the whole graph (no sweep)."""
    branch = {
        name: helper.make_graph([helper.make_node(op, ["r", "r"], [f"{name}_out"])], name, [],
                                [helper.make_tensor_value_info(f"{name}_out", TensorProto.FLOAT, None)])
        for name, op in (("then", "Add"), ("else", "Sub"))
    }  # fmt: skip
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Neg", ["x"], ["n"]),
        helper.make_node("If", ["cond"], ["chosen"], then_branch=branch["then"], else_branch=branch["else"]),
        helper.make_node("Reshape", ["chosen", "target"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6]), helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(np.array([3, 4], np.int64), "target")],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    given = _in_pieces(monkeypatch, 1)
    report = analyze(model)
    assert given == [1, 1, 1, 1]
    assert report.model.shape_inference == "onnx"  # nothing left for the sweep
    assert [n.outputs[0].shape for n in report.nodes if not n.scope] == [(2, 6), (2, 6), (2, 6), (3, 4)]


def test_symbols_made_up_in_pieces_stay_distinct(monkeypatch):
    """Two NonZero nodes in two pieces, after an input whose dim is already named unk__0: ONNX
    names each count a symbol of its own, and none the input's, as over the whole graph."""
    nodes = [
        helper.make_node("NonZero", ["a"], ["ia"]),
        helper.make_node("NonZero", ["b"], ["ib"]),
        helper.make_node("Add", ["c", "c"], ["d"]),
    ]
    inputs = [helper.make_tensor_value_info("a", TensorProto.FLOAT, [3, 4]), helper.make_tensor_value_info("b", TensorProto.FLOAT, [5]),
              helper.make_tensor_value_info("c", TensorProto.FLOAT, ["unk__0"])]  # fmt: skip
    outputs = [
        *(helper.make_tensor_value_info(name, TensorProto.INT64, None) for name in ("ia", "ib")),
        helper.make_tensor_value_info("d", TensorProto.FLOAT, None),
    ]
    model = helper.make_model(
        helper.make_graph(nodes, "g", inputs, outputs), opset_imports=[helper.make_opsetid("", 17)]
    )

    def onnx_pass() -> list:  # the shapes ONNX's pass gives, before the sweep bounds each NonZero (shapes/bounds.py)
        nodes = read_nodes(model.graph)
        values = collect(model.graph, nodes, _onnx_inference(model, nodes, [], []))
        return [values[name].shape for name in ("ia", "ib", "d")]

    whole = onnx_pass()
    _in_pieces(monkeypatch, 1)
    pieced = onnx_pass()
    counts = [shape[1] for shape in pieced[:2]]
    assert len({*counts, "unk__0"}) == 3 and all(isinstance(count, str) for count in counts)
    assert pieced == whole


def test_a_failing_piece_loses_only_its_own_nodes_to_the_sweep(monkeypatch):
    """ONNX's pass raising on one piece: the others keep their types, the sweep types that one's
    nodes, the report names which nodes, and every value comes out as the whole graph gives it."""
    path, dims = GRAPHS["gpt2_decode_fp32_torchscript"]
    whole = analyze(path, sizing=Sizing(dims=dims))
    given = _in_pieces(monkeypatch, 1000)
    infer = pieces.inferred_types

    def second_fails(model, mode=LENIENT):
        if len(given) == 1 and mode == LENIENT:
            given.append(len(model.graph.node))
            raise RuntimeError("inference failed here")
        return infer(model, mode)

    monkeypatch.setattr(pieces, "inferred_types", second_fails)
    report = analyze(path, sizing=Sizing(dims=dims))
    assert [w for w in report.model.shape_warnings if "inference failed here" in w] == [
        "ONNX shape inference of nodes 1000–1999 failed (inference failed here); typed node by node instead"
    ]
    assert report.uncosted.count == 0
    assert _results(report) == _results(whole)


def test_every_cut_of_a_graph_onnx_types_alone_is_seamless(monkeypatch):
    """A chain ONNX types by itself, cut after every node: what each piece reads comes typed from
    the piece before (the weight, too large to be a shape, as a typed input), so ONNX still types
    every value and the sweep never runs."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h0"])]
    for i in range(6):
        nodes.append(helper.make_node("Relu" if i % 2 else "Tanh", [f"h{i}"], [f"h{i + 1}"]))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])],
                              [helper.make_tensor_value_info("h6", TensorProto.FLOAT, None)],
                              initializer=[numpy_helper.from_array(np.zeros((64, 128), np.float32), "w")])  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    given = _in_pieces(monkeypatch, 1)
    report = analyze(model, sizing=Sizing(dims={"batch": 8}))
    assert given == [1] * 7 and report.model.shape_inference == "onnx"
    assert all(n.outputs[0].shape == (8, 128) for n in report.nodes)
    assert report.nodes[0].cost.flops == 2 * 8 * 64 * 128  # [8, 64] @ [64, 128]: a multiply-add per (row, column, k)


def _contradicted_cast_chain(links: int) -> onnx.ModelProto:
    """Relu × links on x[2], then a Cast to float16 whose output a value_info declares float: ONNX's
    strict inference (onnx.checker's full check) refuses it, "Inferred elem type differs"."""
    nodes = [helper.make_node("Relu", [f"h{i}"], [f"h{i + 1}"]) for i in range(links)]
    nodes += [
        helper.make_node("Cast", [f"h{links}"], ["c"], to=TensorProto.FLOAT16),
        helper.make_node("Neg", ["c"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("h0", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [2])],
                              value_info=[helper.make_tensor_value_info("c", TensorProto.FLOAT, [2])])  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_conformance_checks_a_large_graph_in_pieces_and_finds_what_the_whole_check_finds(monkeypatch):
    """Past PIECE_NODES main-graph nodes, onnx's full check runs as the checker over the whole model
    and ONNX's strict inference a piece at a time (the whole pass's memory was a million-node
    analysis' peak, issue 44): the same finding as onnx.checker.check_model(full_check=True), from
    a piece that is not the first, and no finding on valid graphs cut after every node."""
    model = _contradicted_cast_chain(5)
    with pytest.raises(onnx.shape_inference.InferenceError) as whole:  # the oracle: onnx's own full check
        onnx.checker.check_model(model, full_check=True)
    assert "Inferred elem type differs" in str(whole.value)
    strict_pieces: list[int] = []
    infer = pieces.inferred_types

    def counting(piece, mode=LENIENT):
        if mode == CHECKED:
            strict_pieces.append(len(piece.graph.node))
        return infer(piece, mode)

    monkeypatch.setattr(pieces, "PIECE_NODES", 2)
    monkeypatch.setattr(pieces, "inferred_types", counting)
    (flag,) = conformance(*load_with_nodes(model), None)
    assert flag.source == CHECKER and "Inferred elem type differs" in flag.message
    assert strict_pieces == [2, 2, 2]  # 7 nodes: the Cast and its value_info in the third piece, where it stops
    strict_pieces.clear()
    for name in ("gpt2_decode_fp32_torchscript", "genai_qwen2_int4", "qdq_bert", "ortopt_gpt2_past"):  # valid: never
        # flagged in pieces, contrib ops included (a piece after one is not checked, as ONNX's whole pass drops errors past it)
        path = GRAPHS[name][0]
        proto, nodes = load_with_nodes(path)
        monkeypatch.setattr(pieces, "PIECE_NODES", 1)
        assert conformance(proto, nodes, path) == ()
    assert strict_pieces and set(strict_pieces) == {1}


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_the_engines_checked_first_pass_types_as_its_lenient_pass(monkeypatch, name):
    """The shape engine's first pass runs checked (types checked, the first error raised: onnx's
    full check, which conformance then need not run again, issue 44), in pieces here: where it
    passes, every node comes out as the lenient pass alone gives it."""
    path, dims = GRAPHS[name]
    monkeypatch.setattr(pieces, "PIECE_NODES", 13)
    checked = analyze(path, partial=True, sizing=Sizing(dims=dims))
    monkeypatch.setattr(engine, "_checked_inference", lambda model, nodes: (None, CHECKED_PROPAGATED))
    lenient = analyze(path, partial=True, sizing=Sizing(dims=dims))
    assert _results(checked) == _results(lenient)
    assert checked.model.invalid == lenient.model.invalid == ()


def test_the_types_come_in_each_pieces_order_then_the_declared_ones_no_piece_typed():
    """The result's order: the graph's inputs; then each piece's types in the order ONNX returns
    its piece model (the graph's value_info of what the piece produces, then what ONNX typed
    besides in node order, then the piece's graph outputs); then the declared types of values no
    piece produced. Never the value_info that tells a piece the symbols in use."""
    nodes = [
        helper.make_node("Relu", ["x"], ["a"]),
        helper.make_node("Neg", ["a"], ["b"]),
        helper.make_node("Abs", ["b"], ["c"]),
        helper.make_node("Relu", ["c"], ["d"]),
        helper.make_node("Neg", ["d"], ["e"]),
    ]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3])],
                              [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in ("e", "b")],
                              value_info=[helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in ("d", "c", "ghost")])  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    typed = pieces.inferred_types_in_pieces(model, read_nodes(model.graph), 2, None, LENIENT)
    # pieces [a, b] [c, d] [e]: a (typed by ONNX), b (an output); c, d (declared: in the order produced); e (an output)
    assert [value.name for value in typed] == ["x", "a", "b", "c", "d", "e", "ghost"]
    assert all(onnx.TypeProto.FromString(value.type).tensor_type.shape.dim[0].dim_param == "n" for value in typed[:6])


def _cast_after(unknown_at: int) -> onnx.ModelProto:
    """Relu, a Cast to float16 whose value_info says float (an error for a checked pass), Neg; an
    op of a custom domain inserted at `unknown_at`."""
    nodes = [
        helper.make_node("Relu", ["x"], ["a"]),
        helper.make_node("Cast", ["a"], ["c"], to=TensorProto.FLOAT16),
        helper.make_node("Neg", ["c"], ["y"]),
    ]
    nodes.insert(unknown_at, helper.make_node("Mystery", ["x"], ["m"], domain="custom.x"))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT16, None)],
                              value_info=[helper.make_tensor_value_info("c", TensorProto.FLOAT, [2])])  # fmt: skip
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("custom.x", 1)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=8)


@pytest.mark.parametrize("size", [1, 2])
@pytest.mark.parametrize("unknown_at", [0, 1, 2, 3])
def test_a_checked_pass_in_pieces_stops_checking_past_an_op_onnx_does_not_know(size, unknown_at):
    """ONNX's checked pass over the whole graph drops the errors of the nodes after an op it has
    no schema for, and raises those before it: in pieces, the same, wherever the cuts fall."""
    model = _cast_after(unknown_at)
    try:  # the oracle: onnx's own checked pass over the whole graph
        onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
        raises = False
    except onnx.shape_inference.InferenceError:
        raises = True
    assert raises == (unknown_at >= 2)  # the Cast is the second node unless the op comes before it
    nodes = read_nodes(model.graph)
    if raises:
        with pytest.raises(onnx.shape_inference.InferenceError, match="Inferred elem type differs"):
            pieces.inferred_types_in_pieces(model, nodes, size, None, CHECKED)
    else:
        pieces.inferred_types_in_pieces(model, nodes, size, None, CHECKED)


@pytest.mark.parametrize("weights_limit", [pieces.SERIALIZED_WEIGHTS, 1000], ids=["serialized-whole", "node-by-node"])
@pytest.mark.parametrize("weight_in", ["initializer", "Constant"])
def test_each_piece_holds_its_run_of_the_graphs_nodes_as_stored(monkeypatch, weights_limit, weight_in):
    """A piece's nodes are the graph's, byte for byte and in order, whether copied from the graph
    serialized whole or, where its inline weights (an initializer's, a Constant node's: a 64×64
    float weight, 16 KiB) are larger than that allows, node by node; ONNX types every value."""
    weight = numpy_helper.from_array(np.ones((64, 64), np.float32), "w")
    nodes = [helper.make_node("Constant", [], ["w"], value=weight)] if weight_in == "Constant" else []
    nodes.append(helper.make_node("MatMul", ["x", "w"], ["h0"], name="first"))
    for i in range(6):
        nodes.append(helper.make_node("Relu" if i % 2 else "Tanh", [f"h{i}"], [f"h{i + 1}"], name=f"n{i}"))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])],
                              [helper.make_tensor_value_info("h6", TensorProto.FLOAT, None)],
                              initializer=[weight] if weight_in == "initializer" else [])  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    given: list[bytes] = []
    infer = pieces.inferred_types

    def recording(piece, mode=LENIENT):
        given.extend(node.SerializeToString() for node in piece.graph.node)
        return infer(piece, mode)

    monkeypatch.setattr(pieces, "SERIALIZED_WEIGHTS", weights_limit)
    monkeypatch.setattr(pieces, "inferred_types", recording)
    stored_nodes = read_nodes(model.graph)
    assert (pieces._Tables(model, stored_nodes, spell_out=True).stored is None) == (weights_limit < 64 * 64 * 4)
    typed = pieces.inferred_types_in_pieces(model, stored_nodes, 3, None, LENIENT)
    assert given == [node.SerializeToString() for node in model.graph.node]
    shapes = {value.name: onnx.TypeProto.FromString(value.type).tensor_type.shape for value in typed}
    assert all([d.dim_param or d.dim_value for d in shapes[f"h{i}"].dim] == ["batch", 64] for i in range(7))
