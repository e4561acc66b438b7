"""The deployed view (onnx_roofline/views/deployed.py): constant folding, fusion, FlashAttention
with the KV-cache update taken in, --kv-cache copy|inplace, causal attention timed on its useful
FLOPs. Every expected figure is written as arithmetic (fp16: 2 bytes per element)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnx_roofline import Sizing, analyze
from onnx_roofline.commands.cli import main
from onnx_roofline.commands.whatif import Session, sweep
from onnx_roofline.views.deployed import COPY, INPLACE, deploy, kernel_count
from onnx_roofline.views.fusion import fuse, plan_fusion
from tests.conftest import FIXTURES
from tests.conftest import fp16_graph as graph_model

F16 = TensorProto.FLOAT16
MS = "com.microsoft"
BANDWIDTH = 3.35e12  # H100 SXM HBM3, B/s
DECODE = FIXTURES / "gpt2_decode_fp16.onnx"
LAYERS, HEADS, DH, D, VOCAB = 12, 12, 64, 768, 50257  # GPT-2 small


def kernel(report, name):
    return next(k for k in report.nodes if k.name == name)


# --- constant folding -----------------------------------------------------------------------------


def test_a_folded_transpose_costs_nothing_deployed():
    m = graph_model(
        [
            helper.make_node("Transpose", ["w"], ["wt"], name="t", perm=[1, 0]),
            helper.make_node("MatMul", ["x", "wt"], ["y"], name="mm"),
        ],
        [("x", [8, 512])],
        [("y", [8, 1024])],
        {"w": [1024, 512]},
    )
    written = analyze(m)
    deployed = deploy(written)
    folded = kernel(deployed, "t")
    assert folded.constant_foldable and folded.cost.bytes == 0 and folded.time_s == 0 and folded.launches == 0
    matmul = (8 * 512 + 512 * 1024 + 8 * 1024) * 2  # x, the folded weight, y
    assert deployed.totals.bytes == matmul
    assert written.totals.bytes == matmul + 2 * 1024 * 512 * 2  # as written the transpose reads and writes the weight
    assert (
        deployed.memory.weight_bytes == 512 * 1024 * 2
    )  # the folded copy is the weight now; w itself is not read per run
    assert kernel_count(deployed) == 1 and kernel_count(written) == 2


# --- the acceptance case: GPT-2 decode -----------------------------------------------------------


def gpt2_decode_step_bytes(batch: int, past: int) -> int:
    """Weights read + KV read + new KV rows + logits, per decode step of GPT-2 small in fp16."""
    per_layer = (
        (D * 3 * D + 3 * D) + (D * D + D) + (D * 4 * D + 4 * D) + (4 * D * D + D) + 2 * 2 * D
    )  # qkv, proj, fc, proj, 2 LNs
    weights = (
        LAYERS * per_layer + 2 * D + VOCAB * D
    )  # + the final LN, + lm_head (the tied embedding, transposed once at load)
    weights += 2 * batch * D  # the token and position embedding rows gathered
    kv_read = LAYERS * 2 * batch * HEADS * past * DH  # K and V of every layer, the past rows
    new_rows = LAYERS * 2 * batch * HEADS * 1 * DH  # K and V of the new token
    logits = batch * VOCAB
    return 2 * (weights + kv_read + new_rows + logits)


def test_gpt2_decode_deployed_in_place_is_weights_kv_and_logits():
    written = analyze(DECODE, sizing=Sizing(dims={"batch": 1, "past_sequence": 1023}))
    deployed = deploy(written, INPLACE)
    expected = gpt2_decode_step_bytes(1, 1023)
    assert expected == pytest.approx(285.6e6, rel=0.002)  # the figure
    assert deployed.totals.bytes == pytest.approx(expected, rel=0.02)
    assert deployed.totals.time_s == pytest.approx(expected / BANDWIDTH, rel=0.02)  # ≈ 85 µs, all memory-bound
    assert deployed.totals.time_s < 86e-6
    transpose = kernel(deployed, "/model/lm_head/Transpose")
    assert transpose.constant_foldable and transpose.time_s == 0  # the tied-embedding transpose, folded
    assert deployed.view == "deployed" and deployed.kv_cache == INPLACE


def test_gpt2_decode_copy_writes_the_whole_cache_again():
    written = analyze(DECODE, sizing=Sizing(dims={"batch": 1, "past_sequence": 1023}))
    inplace, copy = deploy(written, INPLACE), deploy(written, COPY)
    # copying, each layer writes its present K and V (past + 1 rows) instead of the new row alone
    assert copy.totals.bytes - inplace.totals.bytes == LAYERS * 2 * HEADS * 1023 * DH * 2
    assert copy.memory.kv_cache_resident_bytes == LAYERS * 2 * HEADS * (1023 + 1024) * DH * 2  # past and present
    assert inplace.memory.kv_cache_resident_bytes == LAYERS * 2 * HEADS * 1024 * DH * 2  # one buffer


def test_gpt2_decode_attention_kernel_takes_in_split_and_cache():
    written = analyze(DECODE, sizing=Sizing(dims={"batch": 1, "past_sequence": 1023}))
    deployed = deploy(written, INPLACE)
    attention = [k for k in deployed.nodes if k.op_type == "FlashAttention"]
    assert len(attention) == LAYERS
    first = attention[0]
    ops = {written.nodes[i].op_type for i in first.members}
    assert {"Split", "Concat", "Transpose", "Softmax", "MatMul"} <= ops
    # reads the QKV projection's output once and the past K and V; writes O and the new K, V rows
    assert first.cost.bytes_read == 3 * D * 2 + 2 * HEADS * 1023 * DH * 2
    assert first.cost.bytes_written == D * 2 + 2 * HEADS * DH * 2


# --- GQA and a Concat cache agree ------------------------------------------------------------------


B, H, P, S = 2, 8, 100, 1  # batch, heads (= KV heads), past, new tokens


def concat_cache_attention():
    nodes = [
        helper.make_node("Concat", ["past_k", "k"], ["present_k"], axis=2, name="cat_k"),
        helper.make_node("Concat", ["past_v", "v"], ["present_v"], axis=2, name="cat_v"),
        helper.make_node("Transpose", ["present_k"], ["kt"], perm=[0, 1, 3, 2], name="kt"),
        helper.make_node("MatMul", ["q", "kt"], ["scores"], name="qk"),
        helper.make_node("Softmax", ["scores"], ["p"], axis=-1, name="softmax"),
        helper.make_node("MatMul", ["p", "present_v"], ["o"], name="pv"),
    ]
    inputs = [
        ("q", [B, H, S, DH]),
        ("k", [B, H, S, DH]),
        ("v", [B, H, S, DH]),
        ("past_k", [B, H, P, DH]),
        ("past_v", [B, H, P, DH]),
    ]
    outputs = [("o", [B, H, S, DH]), ("present_k", [B, H, P + S, DH]), ("present_v", [B, H, P + S, DH])]
    return graph_model(nodes, inputs, outputs)


def gqa_attention():
    node = helper.make_node("GroupQueryAttention", ["q", "k", "v", "past_k", "past_v", "seqlens", "total"], ["o", "present_k", "present_v"],
                            domain=MS, num_heads=H, kv_num_heads=H, name="gqa")  # fmt: skip
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info(n, F16, s) for n, s in
         [("q", [B, S, H * DH]), ("k", [B, S, H * DH]), ("v", [B, S, H * DH]), ("past_k", [B, H, P, DH]), ("past_v", [B, H, P, DH])]]
        + [helper.make_tensor_value_info("seqlens", TensorProto.INT32, [B])],
        [helper.make_tensor_value_info(n, F16, None) for n in ("o", "present_k", "present_v")],
        initializer=[numpy_helper.from_array(np.array([P + S], np.int32), "total")],
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(MS, 1)])


@pytest.mark.parametrize("mode", [COPY, INPLACE])
def test_gqa_and_a_concat_cache_agree(mode):
    concat = deploy(analyze(concat_cache_attention()), mode)
    gqa = deploy(analyze(gqa_attention()), mode)
    (flash,) = [k for k in concat.nodes if k.op_type == "FlashAttention"]
    assert {concat.written.nodes[i].name for i in flash.members} == {"cat_k", "cat_v", "kt", "qk", "softmax", "pv"}
    rows = B * H * DH * 2  # one row of K (or V) for every batch and head, fp16
    reads = 3 * S * rows + 2 * P * rows  # Q, the new K and V, the past K and V
    writes = S * rows + 2 * (S if mode == INPLACE else P + S) * rows  # O and the cache (new rows, or all of it)
    assert concat.totals.bytes == reads + writes
    assert gqa.totals.bytes == reads + writes + B * 4 + 4  # GQA also reads seqlens_k and total_sequence_length (int32)


# --- causal attention on useful FLOPs --------------------------------------------------------------


def causal_attention(seq: int):
    nodes = [
        helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2], name="kt"),
        helper.make_node("MatMul", ["q", "kt"], ["scores"], name="qk"),
        helper.make_node("Where", ["causal", "scores", "neg"], ["masked"], name="mask"),
        helper.make_node("Softmax", ["masked"], ["p"], axis=-1, name="softmax"),
        helper.make_node("MatMul", ["p", "v"], ["o"], name="pv"),
        helper.make_node("Trilu", ["ones"], ["causal"], upper=0, name="tril"),  # the lower triangle
    ]
    m = graph_model(
        nodes, [("q", [1, 4, seq, DH]), ("k", [1, 4, seq, DH]), ("v", [1, 4, seq, DH])], [("o", [1, 4, seq, DH])]
    )
    m.graph.initializer.extend([numpy_helper.from_array(np.ones([seq, seq], bool), "ones"),
                                numpy_helper.from_array(np.array(-np.inf, np.float16), "neg")])  # fmt: skip
    return m


def test_a_causal_kernel_is_timed_on_its_useful_flops():
    seq = 512
    written = analyze(causal_attention(seq))
    assert next(n for n in written.nodes if n.name == "tril").constant_foldable  # a constant mask
    deployed = deploy(written)
    fused = fuse(written, plan_fusion(written, frozenset({"o"})))
    (flash,) = [k for k in deployed.nodes if k.op_type == "FlashAttention"]
    (plain,) = [g for g in fused.nodes if g.op_type == "FlashAttention"]
    assert flash.cost.flops == plain.cost.flops  # the FLOPs the graph executes are kept
    useful = seq * (seq + 1) // 2  # of the seq·seq scores, those on or below the diagonal
    assert flash.cost.useful_flops == flash.cost.flops * useful // (seq * seq)
    assert flash.placement.compute_time_s == pytest.approx(plain.placement.compute_time_s * useful / (seq * seq))
    assert "causal" in " ".join(deployed.notes)


# --- outputs ---------------------------------------------------------------------------------------


def test_json_says_the_view_and_lists_kernel_members(capsys):
    code = main(
        [
            str(DECODE),
            "--dim",
            "batch=1",
            "--dim",
            "past_sequence=1023",
            "--view",
            "deployed",
            "--kv-cache",
            "inplace",
            "--format",
            "json",
        ]
    )
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert data["view"] == "deployed" and data["kv_cache"] == "inplace"
    assert data["totals"]["bytes"] == pytest.approx(gpt2_decode_step_bytes(1, 1023), rel=0.02)
    assert data["written_totals"]["bytes"] > 2 * data["totals"]["bytes"]
    flash = next(n for n in data["nodes"] if n["op_type"] == "FlashAttention")
    assert len(flash["members"]) > 10
    written = json.loads(
        _run_json(capsys, [str(DECODE), "--dim", "batch=1", "--dim", "past_sequence=1023", "--format", "json"])
    )
    assert written["view"] == "written" and "members" not in written["nodes"][0]


def _run_json(capsys, argv) -> str:
    assert main(argv) == 0
    return capsys.readouterr().out


def test_the_default_table_shows_both_totals(capsys):
    out = _run_json(
        capsys, [str(DECODE), "--dim", "batch=1", "--dim", "past_sequence=1023", "--kv-cache", "inplace", "--top", "2"]
    )
    lines = out.splitlines()
    assert (
        lines[3].startswith("latency ") and "floor: the deployed bound" in lines[3]
    )  # the headline: a floor no runtime beats (issue 40)
    assert (
        "every node its own kernel (sum of per-node bounds, as written)" in lines[4]
    )  # the as-written sum on the next line
    deployed = _run_json(
        capsys, [str(DECODE), "--dim", "batch=1", "--dim", "past_sequence=1023", "--view", "deployed", "--top", "2"]
    )
    assert "floor: the deployed bound" in deployed and "top 2 kernels by time (deployed bound)" in deployed
    assert "every node its own kernel" in deployed  # the other view's total


def test_sweep_and_compare_take_the_deployed_view(capsys):
    session = Session(DECODE, dims={"past_sequence": 1023}, kv_cache=INPLACE)
    result = sweep(session, {"batch": [1, 4]}, "deployed")
    for point in result.points:
        written = analyze(DECODE, sizing=Sizing(dims={"batch": point.dims["batch"], "past_sequence": 1023}))
        assert point.bytes == deploy(written, INPLACE).totals.bytes
    assert result.points[0].bytes == pytest.approx(gpt2_decode_step_bytes(1, 1023), rel=0.02)
    assert result.points[1].bytes == pytest.approx(gpt2_decode_step_bytes(4, 1023), rel=0.02)
    for command in (["sweep", "--dim", "batch=1,2"], ["compare", "--dim", "batch=1"], ["context", "--dim", "batch=1", "--context", "64,128"],
                    ["critical"], ["check", "--dim", "batch=1", "--max-latency", "1s"]):  # fmt: skip
        past = [] if command[0] == "context" else ["--dim", "past_sequence=1023"]
        argv = [command[0], str(DECODE), *command[1:], *past, "--view", "deployed", "--kv-cache", "inplace"]
        assert main(argv) == 0, argv
        out = capsys.readouterr().out
        assert "deployed" in out, argv
