"""GPT-2 prefill deployed reaches the fused minimum (issue 29): the QKV Split and the K/V head
Transposes that produce `present` are stored by the projection's epilogue, the causal mask is
generated in the attention kernel, so each kernel reads its inputs and weights once and writes
its outputs once. The minimum is computed here from the model's dims alone."""

from __future__ import annotations

import pytest

from onnx_roofline import Sizing, analyze
from onnx_roofline.views.deployed import deploy
from tests.conftest import FIXTURES

PREFILL = FIXTURES / "gpt2_prefill_fp16.onnx"
LAYERS, D, FF, VOCAB, HEADS = 12, 768, 3072, 50257, 12  # GPT-2 small
E = 2  # fp16 bytes per element
BANDWIDTH, PEAK = 3.35e12, 989.4e12  # H100 SXM: HBM3 B/s, dense fp16 tensor-core FLOP/s


def fused_minimum(s: int) -> tuple[float, int]:
    """(seconds, bytes) of GPT-2 prefill at `s` tokens, batch 1, as kernels that each read their
    inputs and weights once and write their outputs once, each timed max(FLOPs/peak, bytes/BW)."""
    kernels: list[tuple[float, int]] = []  # (FLOPs, bytes)
    act = s * D * E  # one [s, 768] activation
    norm = (0, 2 * act + 2 * D * E)  # x in, y out, gamma and beta
    kernels.append(
        (0, s * 8 + 2 * act + act)
    )  # embedding: the ids (int64), a token row and a position row per token, the sum out
    for _ in range(LAYERS):
        kernels.append(norm)
        kernels.append(
            (2 * s * D * 3 * D, act + (D * 3 * D + 3 * D) * E + 3 * act)
        )  # QKV: x, W, b in; Q, K, V out (K, V in cache layout)
        causal = 4 * s * s * D * (s + 1) // (2 * s)  # Q·Kᵀ and P·V, 2·s·s·D each, on the lower triangle
        kernels.append((causal, 4 * act))  # flash attention: Q, K, V in, O out
        kernels.append(
            (2 * s * D * D, act + (D * D + D) * E + act + act)
        )  # o_proj + residual: O, W, b, the residual in; out
        kernels.append(norm)
        kernels.append((2 * s * D * FF, act + (D * FF + FF) * E + s * FF * E))  # MLP up + GELU
        kernels.append((2 * s * FF * D, s * FF * E + (FF * D + D) * E + act + act))  # down + residual
    kernels.append(norm)  # final norm
    kernels.append(
        (2 * s * D * VOCAB, act + VOCAB * D * E + s * VOCAB * E)
    )  # lm_head: x, the tied embedding, the logits
    seconds = sum(max(flops / PEAK, moved / BANDWIDTH) for flops, moved in kernels)
    return seconds, sum(moved for _, moved in kernels)


def test_the_fused_minimum_is_the_issues_figure():
    seconds, moved = fused_minimum(1024)
    assert seconds == pytest.approx(311.9e-6, rel=0.01) and moved == pytest.approx(856.7e6, rel=0.01)


def test_gpt2_prefill_deployed_is_within_3_percent_of_the_fused_minimum():
    written = analyze(PREFILL, sizing=Sizing(dims={"batch": 1, "sequence": 1024}))
    deployed = deploy(written)
    seconds, moved = fused_minimum(1024)
    assert deployed.totals.bytes == pytest.approx(moved, rel=0.03)
    assert deployed.totals.time_s == pytest.approx(seconds, rel=0.03)


def test_split_and_head_transposes_are_stored_by_the_projection():
    written = analyze(PREFILL, sizing=Sizing(dims={"batch": 1, "sequence": 1024}))
    deployed = deploy(written)
    owner = {i: k for k in deployed.nodes for i in k.members}
    splits = [n for n in written.nodes if n.op_type == "Split"]
    assert len(splits) == LAYERS
    for split in splits:
        kernel = owner[split.index]
        lead = written.nodes[kernel.lead]
        assert lead.op_type in ("Gemm", "MatMul")  # the QKV projection's epilogue
        presents = {t.name for t in kernel.outputs if t.name.startswith("present")}
        assert len(presents) == 2  # K and V written once, in cache layout, as the graph's present outputs
        assert kernel.cost.bytes_written == 3 * 1024 * D * E  # Q, K, V: no copy of the 2304-wide output
    transposes = [k for k in deployed.nodes if k.op_type == "Transpose" and k.cost.bytes]
    assert not transposes  # no head Transpose is a copy kernel any more
