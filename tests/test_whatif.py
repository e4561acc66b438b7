"""What-if studies: sweeps, critical batch sizes, hardware comparison, decode over context length.
Every figure is checked against the lesson's formulas, written as arithmetic (fp16: 2 B/element)."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnx_roofline import Sizing, analyze
from onnx_roofline.commands.cli import main
from onnx_roofline.commands.whatif import compare, context_study, critical, sweep
from onnx_roofline.commands.whatif.affine import ZERO, Line, ridge_crossing
from onnx_roofline.commands.whatif.compare import parse_hardware_list
from onnx_roofline.commands.whatif.piecewise import KernelLines, share_at_infinity, share_crossing
from onnx_roofline.commands.whatif.render import render_compare
from onnx_roofline.commands.whatif.session import Session
from onnx_roofline.costs.hardware import load_hardware
from onnx_roofline.errors import DimensionError
from tests.conftest import FIXTURES, REPO

DECODE = FIXTURES / "gpt2_decode_fp16.onnx"
H100 = load_hardware("h100")
R = Fraction(H100.peak("matrix", "fp16")[0]) / Fraction(H100.memory_bandwidth)  # 989.4e12 / 3.35e12 = 295.34
D, F, V, LAYERS, HEADS, DH = 768, 3072, 50257, 12, 12, 64  # GPT-2 small


@pytest.fixture(scope="module")
def decode_1023():
    return Session(DECODE, hw=H100, dims={"past_sequence": 1023})


@pytest.fixture(scope="module")
def decode_critical(decode_1023):
    return critical(decode_1023, "batch")


def kind(result, signature: str):
    return next(k for k in result.kinds if k.signature == signature)


# --- affine solving ----------------------------------------------------------------------------


def test_a_line_is_fitted_at_two_points_and_checked_at_a_third():
    assert Line.fit((1, 2, 64), (7, 10, 7 + 3 * 63)) == Line(Fraction(4), Fraction(3))
    assert Line.fit((1, 2, 64), (1, 4, 64 * 64)) is None  # x² is not a line


def test_the_share_crossing_counts_every_kernel_of_a_repeated_kind():
    """One compute-bound kernel whose time is x and three alike memory-bound ones of 10 s each
    (bandwidth 1 B/s): compute takes half the time where x = 3 · 10 = 30. The alike kernels are
    summed once per kind, times their number (piecewise._alike): each repeat still counts."""
    compute = KernelLines("a", Line(Fraction(0), Fraction(1)), ZERO, (Line(Fraction(0), Fraction(1)),))
    memory = [KernelLines(f"m{i}", ZERO, Line(Fraction(10), Fraction(0)), ()) for i in range(3)]
    assert share_crossing([compute, *memory], 1.0) == 30
    assert share_crossing([compute, memory[0]], 1.0) == 10  # one of them: 1 · 10
    assert share_crossing([compute, compute, *memory], 1.0) == 15  # 2x ≥ 30
    assert share_at_infinity([compute, *memory], 1.0) == 1.0  # memory time does not grow: compute is all of it


def test_the_lessons_matmul_crosses_the_ridge_at_its_closed_form():
    """[B, D] × [D, F] in fp16 without bias: intensity B·D·F / (B·D + D·F + B·F) = R
    ⇔ B = R·D·F / (D·F − R·(D + F))."""
    flops = Line(Fraction(0), Fraction(2 * D * F))
    moved = Line(Fraction(2 * D * F), Fraction(2 * (D + F)))
    expected = R * D * F / (D * F - R * (D + F))
    assert ridge_crossing(flops, moved, R) == expected
    assert float(expected) == pytest.approx(568.74, abs=0.01)
    assert ridge_crossing(flops, moved.scaled(10), R) is None  # asymptote F·D/(F+D)/10 < R: never


# --- critical batch ----------------------------------------------------------------------------


def test_mlp_gemm_critical_batch_with_its_bias(decode_critical):
    """The fixture's Gemm adds a bias: FLOPs B·(2·D·F + F) (the add is one FLOP per output), bytes
    2·(B·D + D·F + F + B·F) (the [F] bias is read too). Solving FLOPs = R·bytes:
    B = 2·R·(D·F + F) / (2·D·F + F − 2·R·(D + F)) = 568.76, a hair above the bias-free 568.74: the
    bias's read and add nearly cancel. Both round up to 569 — the lesson's ≈ 295-FLOP/B knee crossed."""
    row = kind(decode_critical, f"[batch,{D}] [{D},{F}] [{F}]")
    assert len(row.kernels) == LAYERS
    line = row.kernels[0]
    assert line.flops == Line(Fraction(0), Fraction(2 * D * F + F))
    assert line.bytes == Line(Fraction(2 * (D * F + F)), Fraction(2 * (D + F)))
    expected = 2 * R * (D * F + F) / (2 * D * F + F - 2 * R * (D + F))
    assert row.crossing == expected
    assert float(expected) == pytest.approx(568.76, abs=0.01)
    assert row.critical == 569
    assert row.asymptote == pytest.approx((2 * D * F + F) / (2 * (D + F)))  # 614.8 FLOP/B as B → ∞


@pytest.mark.parametrize(
    ("signature", "d_in", "d_out", "bias", "critical_batch"),
    [
        (f"[batch,{D}] [{D},{3 * D}] [{3 * D}]", D, 3 * D, True, 607),  # attention c_attn (Q, K, V)
        (f"[batch,{D}] [{D},{D}] [{D}]", D, D, True, 1278),  # attention c_proj
        (f"[batch,{F}] [{F},{D}] [{D}]", F, D, True, 569),  # MLP c_proj
        (f"[batch,1,{D}] [{D},{V}]", D, V, False, 485),  # lm_head, no bias: the lesson's formula exactly
    ],
)
def test_every_matmul_kind_crosses_where_the_formula_says(
    decode_critical, signature, d_in, d_out, bias, critical_batch
):
    row = kind(decode_critical, signature)
    bias_flops, bias_bytes = (d_out, 2 * d_out) if bias else (0, 0)
    # B·(2·Din·Dout + bias) = R·(2·(B·Din + Din·Dout + B·Dout) + bias bytes)
    expected = R * (2 * d_in * d_out + bias_bytes) / (2 * d_in * d_out + bias_flops - 2 * R * (d_in + d_out))
    assert row.crossing == expected
    assert row.critical == math.ceil(expected) == critical_batch


def test_attention_matmuls_do_not_grow_with_batch(decode_critical):
    """Q·Kᵀ and P·V read per-sequence K/V caches: no reuse across the batch, intensity flat ≈ 1."""
    assert sum(decode_critical.flat.values()) == 2 * LAYERS
    assert all("batch,12" in name for name in decode_critical.flat)


def test_crossing_agrees_with_analyze_either_side(decode_1023, decode_critical):
    row = kind(decode_critical, f"[batch,{D}] [{D},{F}] [{F}]")
    name = row.kernels[0].name
    for batch, bound in ((row.critical - 1, "memory"), (row.critical, "compute")):
        node = next(n for n in decode_1023.report({"batch": batch}).nodes if n.name == name)
        assert node.bound == bound


def test_decode_at_long_context_never_turns_compute_bound_as_a_whole(decode_critical):
    """Past 1023: each sequence reads its own 12·2·1024·768·2-byte KV cache, so bytes grow with the
    batch as fast as FLOPs: total intensity tends to ~1.5 FLOP/B, far below 295."""
    assert decode_critical.share_crossing is None and decode_critical.intensity_crossing is None
    assert decode_critical.intensity_limit < 2
    assert decode_critical.share_limit < 0.01


def two_node_model() -> onnx.ModelProto:
    """y = x·W ([batch, K] × [K, K]) beside z = C1 + C2 (two constant [2048, 2048] tensors): a
    matmul that turns compute-bound, and a fixed 3·2048²·2 bytes of memory-bound work."""
    K = 1024
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT16, ["batch", K])
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT16, None) for n in ("y", "z")]
    shapes = {"w": [K, K], "c1": [2048, 2048], "c2": [2048, 2048]}
    weights = [numpy_helper.from_array(np.zeros(s, np.float16), n) for n, s in shapes.items()]
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["y"], name="mm"),
        helper.make_node("Add", ["c1", "c2"], ["z"], name="add"),
    ]
    graph = helper.make_graph(nodes, "g", [x], outputs, initializer=weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def test_critical_solves_for_the_dim_named_as_a_batch():
    """onnxruntime-genai names its batch `batch_size`: critical finds it (the same crossing
    R·K/(K − 2R) as `batch`), and with two batch-like dims asks which one."""
    K = 1024
    model = two_node_model()
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "batch_size"
    result = critical(Session(model, hw=H100))
    assert result.dim == "batch_size" and kind(result, f"[batch_size,{K}] [{K},{K}]").crossing == R * K / (K - 2 * R)
    model.graph.input.append(helper.make_tensor_value_info("u", TensorProto.FLOAT16, ["N", K]))
    with pytest.raises(
        DimensionError,
        match=r"cannot tell the batch dim \(candidates: batch_size, N\); name the dim to solve for with --over DIM",
    ):
        critical(Session(model, hw=H100))


def test_model_level_figures_are_solved_and_hold():
    """Time share: past the matmul's own crossing (R·K/(K − 2R) = 698.0) it is compute-bound and
    takes 2·B·K²/P against the Add's C/bw, C = 3·2048²·2 bytes; half the time when
    B = C·R / (2·K²) = 3544.1 → 3545. Intensity: (2·B·K² + 2048²) / (2·(2·B·K + K²) + C) = R."""
    K, C = 1024, 3 * 2048 * 2048 * 2
    session = Session(two_node_model(), hw=H100)
    result = critical(session, "batch")
    assert kind(result, f"[batch,{K}] [{K},{K}]").crossing == R * K / (K - 2 * R)
    assert result.share_crossing == C * R / (2 * K * K)
    flops, moved = Line(Fraction(2048 * 2048), Fraction(2 * K * K)), Line(Fraction(2 * K * K + C), Fraction(4 * K))
    assert result.intensity_crossing == (R * moved.intercept - flops.intercept) / (flops.slope - R * moved.slope)
    share = math.ceil(result.share_crossing)
    assert share == 3545
    for batch, above in ((share - 1, False), (share, True)):
        totals = session.report({"batch": batch}).totals
        assert (totals.memory_bound_time_share <= 0.5) == above


# --- sweep -------------------------------------------------------------------------------------


def test_sweep_matches_analyze_point_by_point(decode_1023):
    result = sweep(decode_1023, {"batch": (1, 8, 64)})
    for point in result.points:
        direct = analyze(DECODE, hw="h100", sizing=Sizing(dims=point.dims))
        assert point.latency_s == direct.totals.time_s
        assert point.bytes == direct.totals.bytes
        assert point.work.unit == "tokens" and point.work.amount == point.dims["batch"]  # batch·1 per step
        assert point.throughput == point.dims["batch"] / point.latency_s
        assert point.compute_share == 1 - direct.totals.memory_bound_time_share
    assert result.ridge == pytest.approx(float(R))


def test_a_sweep_parses_the_model_once(monkeypatch):
    import onnx_roofline.model.loader as loader

    calls = []
    original = loader.onnx.load_model_from_string
    monkeypatch.setattr(loader.onnx, "load_model_from_string", lambda *a, **k: calls.append(a) or original(*a, **k))
    session = Session(DECODE, dims={"past_sequence": 127})
    sweep(session, {"batch": (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)}, view="fused")
    assert len(calls) == 1


def test_prefill_counts_batch_times_sequence_tokens_and_vision_counts_images():
    prefill = sweep(Session(FIXTURES / "gpt2_prefill_fp16.onnx", dims={"sequence": 128}), {"batch": (2, 4)})
    assert [p.work.amount for p in prefill.points] == [2 * 128, 4 * 128]
    vision = sweep(Session(FIXTURES / "resnet50_fp16.onnx"), {"batch": (1, 8)})
    assert [(p.work.amount, p.work.unit) for p in vision.points] == [(1, "images"), (8, "images")]


def test_dtype_override_reaches_the_sweep():
    fp32 = FIXTURES / "gpt2_decode_fp32.onnx"
    result = sweep(Session(fp32, dims={"past_sequence": 127}, precision="fp16"), {"batch": (1, 4)})
    for point in result.points:
        assert point.bytes == analyze(fp32, precision="fp16", sizing=Sizing(dims=point.dims)).totals.bytes
        assert point.bytes < analyze(fp32, sizing=Sizing(dims=point.dims)).totals.bytes


# --- compare -----------------------------------------------------------------------------------


def test_compare_puts_each_accelerator_beside_the_others():
    hardware = parse_hardware_list("h100,h200,a100,l4")
    result = compare(Session(DECODE, dims={"batch": 1, "past_sequence": 1023}), hardware)
    assert [r.hardware.key for r in result.rows] == ["h100", "h200", "a100", "l4"]
    for row in result.rows:
        direct = analyze(DECODE, hw=row.hardware, sizing=Sizing(dims={"batch": 1, "past_sequence": 1023}))
        assert row.latency_s == direct.totals.time_s
        assert row.memory_share == direct.totals.memory_bound_time_share == 1.0
        assert row.top_name == max(direct.nodes, key=lambda n: n.time_s or 0).name
        # the top is lm_head's Transpose of a weight: foldable at load, and said so in text and JSON
        assert row.top_foldable and row.to_dict()["top"]["constant_foldable"]
    assert "Transpose /model/lm_head/Transpose (foldable)" in render_compare(result)
    # all memory-bound: latency is bytes / bandwidth, so the ratio of latencies is that of bandwidths
    h100, h200 = result.rows[0], result.rows[1]
    assert h100.latency_s / h200.latency_s == pytest.approx(
        h200.hardware.memory_bandwidth / h100.hardware.memory_bandwidth
    )


# --- decode over context -----------------------------------------------------------------------


def test_kv_cache_bytes_grow_by_the_cache_per_past_token():
    """Deployed view (`fused`, its former name, is taken for it), KV cache copied, batch 1, per
    past token and per layer: K and V each read from the past cache and written into present once
    by the attention kernel that takes the Concat in: 2·2·H·dh·2 bytes; over 12 layers 73,728. The
    causal mask is generated inside the kernel (dropped: no row of it is stored)."""
    result = context_study(Session(DECODE, dims={"batch": 1}, kv_cache="copy"), [64, 128, 256, 512, 1024], view="fused")
    assert result.dim == "past_sequence" and result.sweep.view == "deployed"
    assert result.bytes_line.slope == LAYERS * 2 * 2 * HEADS * DH * 2
    inplace = context_study(Session(DECODE, dims={"batch": 1}, kv_cache="inplace"), [64, 128], view="deployed")
    assert inplace.bytes_line.slope == LAYERS * 2 * HEADS * DH * 2  # the past read once, only the new row written
    shares = [result.kv_share(i) for i in range(len(result.sweep.points))]
    latencies = [p.latency_s for p in result.sweep.points]
    assert shares == sorted(shares) and latencies == sorted(latencies)
    last = result.sweep.points[-1]
    assert shares[-1] == pytest.approx((last.bytes - result.bytes_line.intercept) / last.bytes)


# --- command line ------------------------------------------------------------------------------


def run_json(tmp_path, *args: str) -> dict:
    out = tmp_path / "out.json"
    assert main([*args, "--format", "json", "-o", str(out)]) == 0
    return json.loads(out.read_text())


def test_sweep_command_writes_json_and_a_plot(tmp_path):
    plot = tmp_path / "sweep.png"
    data = run_json(
        tmp_path, "sweep", str(DECODE), "--dim", "batch=1,8", "--dim", "past_sequence=127", "--plot", str(plot)
    )
    assert [p["dims"]["batch"] for p in data["points"]] == [1, 8]
    assert data["elapsed_s"] > 0 and data["view"] == "written"
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_critical_command_reports_the_mlp_kind(tmp_path):
    data = run_json(tmp_path, "critical", str(DECODE), "--dim", "past_sequence=1023")
    mlp = next(k for k in data["kinds"] if k["signature"] == f"[batch,{D}] [{D},{F}] [{F}]")
    assert (mlp["count"], mlp["critical"]) == (LAYERS, 569)
    assert data["model"]["compute_share_50"]["critical"] is None


def test_fuse_command_reports_both_attention_views(tmp_path):
    data = run_json(
        tmp_path, "fuse", str(FIXTURES / "gpt2_prefill_fp16.onnx"), "--dim", "batch=1", "--dim", "sequence=1024"
    )
    first = data["attention"][0]
    assert first["written"]["qk_bound"] == "memory" and first["fused"]["bound"] == "compute"
    assert first["fused"]["matmul_intensity"] == 512
    assert data["fused"]["flops"] == data["written"]["flops"]


@pytest.mark.parametrize(
    "args",
    [
        ["sweep", str(DECODE), "--dim", "batch=1,x"],
        ["sweep", str(DECODE), "--dim", "batch=1,2", "--dim", "batch=4"],
        ["compare", str(DECODE), "--hw", "h100,nope", "--dim", "batch=1", "--dim", "past_sequence=3"],
        ["critical", str(DECODE), "--dim", "batch=4", "--dim", "past_sequence=3"],
        ["critical", str(DECODE), "--over", "nope", "--dim", "past_sequence=3"],
        ["context", str(FIXTURES / "resnet50_fp16.onnx"), "--dim", "batch=1"],
        ["fuse", str(DECODE), "--dim", "batch=1,2", "--dim", "past_sequence=3"],
        ["sweep", str(DECODE), "--dim", "batch=1,2", "--dim", "past_sequence=3", "--plot", "out.jpg"],
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("onnx-roofline: error:") and err.count("\n") == 1


def test_compare_help_states_one_default_for_hw(capsys):
    """`compare --help` used to say both "default h100,h200,a100,l4" and "--hw … (default: h100)"."""
    import pytest

    from onnx_roofline.commands.cli import main

    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "(default: h100,h200,a100,l4)" in text and "(default: h100)" not in text


def test_a_merged_decoder_swept_across_its_branches():
    """past 0 and past 12 walk the If's two branches: each gets its own deployed plan, so the
    figures at a point do not depend on the order the points are swept in (a plan made from one
    branch's rows failed on the other's)."""
    merged = REPO / "tests" / "corpus" / "shipped" / "gpt2_decoder_model_merged.onnx"
    dims = {"batch_size": 1, "sequence_length": 1, "attention_mask_sequence_length": 13}
    forward = sweep(Session(merged, dims=dims), {"past_sequence_length": (0, 12)}, view="deployed")
    backward = sweep(Session(merged, dims=dims), {"past_sequence_length": (12, 0)}, view="deployed")
    assert [p.bytes for p in forward.points] == [p.bytes for p in reversed(backward.points)]
    assert forward.points[0].bytes != forward.points[1].bytes
