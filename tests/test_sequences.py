"""Sequences of tensors, element by element (shape_rules/sequences.py): every sequence op typed and
costed, its shapes checked against onnxruntime's run, and a torch export that emits them."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnx_roofline import Sizing
from onnx_roofline.analysis import analyze
from onnx_roofline.commands.verify import verify
from tests import hostile

F = TensorProto.FLOAT


def _graph(tmp_path, nodes, inputs, outputs, constants=()):
    initializers = [numpy_helper.from_array(np.array(value, np.int64), name) for name, value in constants]
    model = hostile.model(nodes, inputs, outputs, initializers=initializers, opset=17)
    return hostile.save(model, tmp_path / "sequences.onnx")


def _check(path):
    """The analysis costs every node, and onnxruntime's run agrees with every shape and byte."""
    report = analyze(path)
    assert [n.name for n in report.nodes if n.status != "ok"] == []
    result = verify(path)
    assert result.comparison.disagreements == ()
    assert result.comparison.values_unobserved == () and result.comparison.values_partly_inferred == ()
    return {t.name: t for n in report.nodes for t in n.outputs if t is not None}


def test_split_then_concat_and_stack(tmp_path):
    nodes = [
        helper.make_node("SplitToSequence", ["x", "two"], ["pieces"], axis=0),  # 5 rows in 2 + 2 + 1
        helper.make_node("ConcatFromSequence", ["pieces"], ["joined"], axis=0),
        helper.make_node("SplitToSequence", ["x", "sizes"], ["uneven"], axis=1),  # 8 columns in 3 + 5
        helper.make_node("SequenceAt", ["uneven", "last"], ["tail"]),
        helper.make_node("SplitToSequence", ["x"], ["rows"], axis=0, keepdims=0),  # 5 rows of [8]
        helper.make_node("ConcatFromSequence", ["rows"], ["stacked"], axis=-1, new_axis=1),
        helper.make_node("SequenceLength", ["rows"], ["count"]),
        helper.make_node("Relu", ["joined"], ["y"]),
    ]
    values = _check(
        _graph(
            tmp_path,
            nodes,
            [("x", F, [5, 8])],
            [("y", F, None), ("tail", F, None), ("stacked", F, None), ("count", TensorProto.INT64, None)],
            [("two", 2), ("sizes", [3, 5]), ("last", -1)],
        )
    )
    assert values["pieces"].elements == ((2, 8), (2, 8), (1, 8)) and values["pieces"].shape == (None, 8)
    assert values["pieces"].nbytes == 5 * 8 * 4  # what the pieces hold together: the input again
    assert values["joined"].shape == (2 + 2 + 1, 8)
    assert values["tail"].shape == (5, 5)
    assert values["stacked"].shape == (8, 5)  # five [8] rows stacked on a new last axis
    assert values["rows"].elements == ((8,),) * 5


def test_construct_insert_erase(tmp_path):
    nodes = [
        helper.make_node("SequenceEmpty", [], ["empty"], dtype=F),
        helper.make_node("SequenceInsert", ["empty", "a"], ["one"]),
        helper.make_node("SequenceInsert", ["one", "b", "zero"], ["two"]),  # b first
        helper.make_node("SequenceConstruct", ["a", "a", "b"], ["three"]),
        helper.make_node("SequenceErase", ["three", "zero"], ["erased"]),  # a, b left
        helper.make_node("ConcatFromSequence", ["two"], ["ba"], axis=0),
        helper.make_node("ConcatFromSequence", ["erased"], ["ab"], axis=0),
    ]
    values = _check(
        _graph(tmp_path, nodes, [("a", F, [2, 3]), ("b", F, [4, 3])], [("ba", F, None), ("ab", F, None)], [("zero", 0)])
    )
    assert values["two"].elements == ((4, 3), (2, 3)) and values["erased"].elements == ((2, 3), (4, 3))
    assert values["ba"].shape == values["ab"].shape == (6, 3)
    costs = {n.op_type: n.cost for n in analyze(tmp_path / "sequences.onnx").nodes}
    assert costs["SequenceConstruct"].bytes_written == (2 * 3 + 2 * 3 + 4 * 3) * 4  # each input copied in
    assert costs["SequenceConstruct"].bytes_read == (2 * 3 + 4 * 3) * 4  # a read once


def test_a_position_that_is_not_a_constant_leaves_the_element_unknown_and_says_so(tmp_path):
    nodes = [
        helper.make_node("SequenceConstruct", ["a", "b"], ["s"]),
        helper.make_node("SequenceAt", ["s", "i"], ["y"]),
    ]
    path = _graph(tmp_path, nodes, [("a", F, [2, 3]), ("b", F, [4, 3]), ("i", TensorProto.INT64, [])], [("y", F, None)])
    report = analyze(path)
    assert report.model.shape_root_cause.op_type == "SequenceAt"
    assert [n.op_type for n in report.nodes if n.status != "ok"] == ["SequenceAt"]


def test_a_torch_export_that_splits_into_sequences(tmp_path):
    """torch.onnx's dynamo exporter, unoptimized, emits SplitToSequence and SequenceAt for split
    and chunk (transformers' GPT-2 attention splits its fused QKV so)."""
    torch = pytest.importorskip("torch")

    class Split(torch.nn.Module):
        def forward(self, x):
            q, k, v = x.split(4, dim=2)
            return torch.cat([q * k, v], dim=-1), torch.stack(torch.chunk(x, 3, dim=1), 0).sum(0)

    path = tmp_path / "split.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            Split(),
            (torch.randn(2, 6, 12),),
            str(path),
            dynamo=True,
            optimize=False,
            dynamic_shapes=({0: torch.export.Dim("batch")},),
        )
    report = analyze(path, sizing=Sizing(dims={"batch": 3}))
    assert {n.op_type for n in report.nodes} >= {"SplitToSequence", "SequenceAt"}
    assert [n.name for n in report.nodes if n.status != "ok"] == []
    result = verify(path, dims={"batch": 3})
    assert result.comparison.disagreements == ()
    outputs = {t.name: t.shape for n in report.nodes for t in n.outputs if t is not None}
    assert outputs[report.model.graph_outputs[0]] == (3, 6, 8)  # q·k (4 wide) beside v (4 wide)
    assert outputs[report.model.graph_outputs[1]] == (3, 2, 12)  # three chunks of 2 rows, summed


def test_sequence_map_runs_its_body_on_every_element(tmp_path):
    """SequenceMap(pieces, bias): its body's i-th run sees the i-th piece and the bias as it is;
    the outputs are sequences of what each run gives. Checked against onnxruntime's run; FLOPs,
    the body's per run: a multiply and an add per element of that piece."""
    body = helper.make_graph(
        [helper.make_node("Mul", ["e", "e"], ["square"]), helper.make_node("Add", ["square", "b"], ["out"]),
         helper.make_node("ReduceSum", ["out"], ["total"], keepdims=0)],
        "body", [helper.make_tensor_value_info("e", F, None), helper.make_tensor_value_info("b", F, None)],
        [helper.make_tensor_value_info("out", F, None), helper.make_tensor_value_info("total", F, None)],
    )  # fmt: skip
    nodes = [
        helper.make_node("SplitToSequence", ["x", "sizes"], ["pieces"], axis=0),  # 6 rows in 1 + 2 + 3
        helper.make_node("SequenceMap", ["pieces", "bias"], ["mapped", "totals"], body=body),
        helper.make_node("ConcatFromSequence", ["mapped"], ["y"], axis=0),
        helper.make_node("ConcatFromSequence", ["totals"], ["t"], axis=0, new_axis=1),
    ]
    values = _check(
        _graph(
            tmp_path,
            nodes,
            [("x", F, [6, 4]), ("bias", F, [4])],
            [("y", F, None), ("t", F, None)],
            [("sizes", [1, 2, 3])],
        )
    )
    assert values["mapped"].elements == ((1, 4), (2, 4), (3, 4)) and values["totals"].elements == ((), (), ())
    assert values["y"].shape == (6, 4) and values["t"].shape == (3,)
    report = analyze(tmp_path / "sequences.onnx")
    mapped = next(n for n in report.nodes if n.op_type == "SequenceMap")
    elements = 6 * 4
    assert mapped.cost.flops == elements * 2 + (
        elements - 3
    )  # multiply and add per element; each run's sum: n − 1 adds


def test_uneven_pieces_read_back_each_at_its_own_size(tmp_path):
    """ONNX types a sequence's elements as one ([?]), with one symbol: the SequenceAt of each piece
    of a [32, 64] split, and what follows, must not share the size learned for the first read."""
    nodes = [
        helper.make_node("SplitToSequence", ["x", "sizes"], ["pieces"], axis=0),
        helper.make_node("SequenceAt", ["pieces", "one"], ["b1"]),
        helper.make_node("SequenceAt", ["pieces", "zero"], ["b0"]),
        helper.make_node("Relu", ["b1"], ["r1"]),
        helper.make_node("Relu", ["b0"], ["r0"]),
    ]
    values = _check(
        _graph(
            tmp_path,
            nodes,
            [("x", F, [96])],
            [("r1", F, None), ("r0", F, None)],
            [("sizes", [32, 64]), ("one", 1), ("zero", 0)],
        )
    )
    assert values["b1"].shape == values["r1"].shape == (64,) and values["b0"].shape == values["r0"].shape == (32,)


def test_torch_dynamo_multihead_attention_unoptimized_splits_its_projection_unevenly(tmp_path):
    """nn.MultiheadAttention(q, k, k) — k is v, q is not: dynamo without its optimizer splits the
    in-projection [32 | 64] through a sequence; every shape as onnxruntime's run has it."""
    torch = pytest.importorskip("torch")
    attention = torch.nn.MultiheadAttention(32, 4).eval()
    q, k = torch.rand(9, 2, 32), torch.rand(7, 2, 32)
    path = tmp_path / "mha.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(attention, (q, k, k), str(path), dynamo=True, optimize=False)
    _check(path)
