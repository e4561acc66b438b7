"""One memory model (issue 39): serve, critical and sweep give the same largest batch, analyze and check
the same verdict at it, with the KV cache updated in place by default and 90 % of the capacity usable
(vLLM's gpu_memory_utilization). The expected batch is worked out by hand from each model's config:
weights + (KV cache + activations) per sequence × B ≤ 80e9 × 0.9 (the H100 SXM's 80 GB)."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest

from onnx_roofline.commands.cli import main
from onnx_roofline.costs.capacity import MemoryBudget, largest_fitting

ROOT = Path(__file__).resolve().parent.parent
GPT2 = str(ROOT / "fixtures" / "gpt2_decode_fp16.onnx")
CORPUS = ROOT / "tests" / "corpus" / "models"
GQA = str(CORPUS / "genai_llama_fp32.onnx")  # GroupQueryAttention: the cache and the mask as runtimes keep them
DYNAMO_LLAMA = str(CORPUS / "dynamo_llama_past.onnx")  # repeat_kv and the mask written out as ops
CONTEXT = 1024
USABLE = Fraction(80 * 10**9) * Fraction(9, 10)  # H100 SXM 80 GB × vLLM's default gpu_memory_utilization
SCALARS = 64
"""Bytes the hand count leaves out: an export's scalar float constants (GPT-2's eight fp16 ones: GELU's
coefficients, the attention scale, the mask's fill), weights all the same."""


def gpt2_footprint(batch: int) -> int:
    """GPT-2 small (the `gpt2` config: 12 layers, 12 heads of 64, hidden 768, vocabulary 50257, 1024
    positions; fixtures/README.md gives its inputs and outputs) in fp16."""
    layers, heads, head, hidden, vocab, positions, fp16 = 12, 12, 64, 768, 50257, 1024, 2
    attention = 2 * hidden + (hidden * 3 * hidden + 3 * hidden) + (hidden * hidden + hidden)  # ln_1, c_attn, c_proj
    mlp = 2 * hidden + (hidden * 4 * hidden + 4 * hidden) + (4 * hidden * hidden + hidden)  # ln_2, c_fc, c_proj
    parameters = (
        vocab * hidden + positions * hidden + layers * (attention + mlp) + 2 * hidden
    )  # wte, wpe, ln_f: 124,439,808
    weights = (
        parameters * fp16 + vocab * hidden * fp16
    )  # + the tied embedding transposed for the lm_head: folded, stored
    kv = layers * 2 * heads * head * CONTEXT * fp16  # K and V of every layer at the context, one buffer (in place)
    activations = (hidden + vocab) * fp16  # the peak: the lm_head reads the last hidden state and writes the logits
    return weights + batch * (kv + activations)


def llama_weights_and_cache(batch: int, rotary: int) -> int:
    """tests/corpus/sources.py's Llama: 2 layers, hidden 128, 4 query heads and 2 KV heads of 32, MLP 256,
    vocabulary 1000, untied lm_head, fp32; `rotary`: the bytes of the rotary tables the export stores."""
    layers, hidden, heads, kv_heads, head, mlp, vocab, fp32 = 2, 128, 4, 2, 32, 256, 1000, 4
    attention = hidden * heads * head + 2 * hidden * kv_heads * head + heads * head * hidden  # q, k and v, o
    per_layer = attention + 3 * hidden * mlp + 2 * hidden  # gate, up and down; two norms
    weights = (
        vocab * hidden + layers * per_layer + hidden + hidden * vocab
    ) * fp32 + rotary  # embedding, final norm, lm_head
    kv = layers * 2 * kv_heads * head * CONTEXT * fp32  # each KV head once (2 for 4 query heads), one buffer
    return weights + batch * kv


def gqa_footprint(batch: int) -> int:
    """The onnxruntime-genai builder's export (GroupQueryAttention) of that Llama, which stores cos and sin
    caches of 128 positions × 16 and reads the whole attention mask as int64 with the token id before anything
    else runs."""
    positions, head, fp32, int64, int32 = 128, 32, 4, 8, 4
    activations = CONTEXT * int64 + int64 + int32  # the peak, at the start: attention_mask, input_ids, seqlens_k
    return llama_weights_and_cache(batch, 2 * positions * head // 2 * fp32) + batch * activations


def dim_args(**dims: int) -> list[str]:
    return [arg for name, size in dims.items() for arg in ("--dim", f"{name}={size}")]


GENAI_DECODE = {"past_sequence_length": CONTEXT - 1, "sequence_length": 1, "total_sequence_length": CONTEXT}
MODELS = {  # the model, its batch dim, a decode step's dims at the context, those serve needs besides, the hand footprint
    "gpt2": (GPT2, "batch", dim_args(past_sequence=CONTEXT - 1), [], gpt2_footprint),
    "gqa": (GQA, "batch_size", dim_args(**GENAI_DECODE, kv_cache_dim=32), dim_args(kv_cache_dim=32), gqa_footprint),
}


def run_json(capsys, *args: str) -> dict:
    code = main([*args, "--format", "json", "-q"])
    out = capsys.readouterr().out
    assert code in (0, 1), out
    return json.loads(out)


def largest_batches(capsys, model: str, batch: str, dims: list[str], fixed: list[str], *more: str) -> dict[str, int]:
    """Each command's largest batch, from its JSON (serve binds the past to the context − 1 itself, `fixed` the rest)."""
    serve = run_json(capsys, "serve", model, *fixed, "--tp", "1", "--context", str(CONTEXT), "--batch", "1", *more)
    critical = run_json(capsys, "critical", model, *dims, *more)
    sweep = run_json(capsys, "sweep", model, *dims, "--dim", f"{batch}=1,2", *more)
    (swept,) = sweep["memory_fit"]
    return {
        "serve": serve["degrees"][0]["memory_fit"]["largest_that_fits"],
        "serve (legacy key)": serve["degrees"][0]["largest_batch_that_fits"],
        "critical": critical["memory_fit"]["largest_that_fits"],
        "critical (legacy key)": critical["model"]["memory"]["fits_up_to"],
        "sweep": swept["largest_that_fits"],
    }


@pytest.mark.parametrize("name", sorted(MODELS))
def test_serve_critical_and_sweep_give_the_batch_worked_out_by_hand(capsys, name):
    model, batch, dims, fixed, by_hand = MODELS[name]
    expected = largest_fitting(by_hand, MemoryBudget(80e9)).largest
    assert by_hand(expected) <= USABLE < by_hand(expected + 1)  # B fits and B + 1 does not, by hand
    found = largest_batches(capsys, model, batch, dims, fixed)
    assert set(found.values()) == {expected}, found
    if name == "gpt2":  # (72e9 − 326,074,368) // 37,850,786: 2104 before, on the whole 80 GB and nothing reserved
        assert expected == 1893


def test_a_decoder_that_writes_repeat_kv_out_holds_each_kv_head_once(capsys):
    """The dynamo export (repeat_kv as Expand + Reshape, the mask built by ops): the three commands agree, and the
    footprint less its activations is the weights and the KV cache by hand, each KV head once."""
    dims = dim_args(past_sequence=CONTEXT - 1, sequence=1, total_sequence=CONTEXT)
    found = largest_batches(capsys, DYNAMO_LLAMA, "batch", dims, [])
    assert len(set(found.values())) == 1, found
    (largest,) = set(found.values())
    for b, fits in ((largest, True), (largest + 1, False)):
        memory = run_json(capsys, DYNAMO_LLAMA, *dims, "--dim", f"batch={b}")["memory"]
        held = memory["total_bytes"] - memory["peak_activation_bytes"]
        assert (
            0 <= held - llama_weights_and_cache(b, 32 // 2 * 4) <= SCALARS and memory["fits"] is fits
        )  # inv_freq: 16 floats


@pytest.mark.parametrize("name", sorted(MODELS))
def test_analyze_and_check_judge_the_same_footprint(capsys, name):
    model, batch, dims, _, by_hand = MODELS[name]
    largest = largest_fitting(by_hand, MemoryBudget(80e9)).largest
    for b, fits in ((largest, True), (largest + 1, False)):
        memory = run_json(capsys, model, *dims, "--dim", f"{batch}={b}")["memory"]
        assert 0 <= memory["total_bytes"] - by_hand(b) <= SCALARS and (memory["fits"], memory["kv_cache"]) == (
            fits,
            "inplace",
        )
        assert (memory["view"], memory["memory_utilization"], memory["usable_memory_bytes"]) == (
            "deployed",
            0.9,
            float(USABLE),
        )
        gate = run_json(capsys, "check", model, *dims, "--dim", f"{batch}={b}")["memory"]
        assert gate == memory


def test_the_utilization_and_the_copy_mode_move_every_command_alike(capsys):
    model, batch, dims, fixed, by_hand = MODELS["gpt2"]
    half = largest_batches(capsys, model, batch, dims, fixed, "--memory-utilization", "0.5")
    weights, per_sequence = by_hand(0), by_hand(1) - by_hand(0)
    assert set(half.values()) == {(40 * 10**9 - weights) // per_sequence}  # 1048
    copied = largest_batches(capsys, model, batch, dims, fixed, "--kv-cache", "copy")
    assert len(set(copied.values())) == 1 and copied["serve"] < 1893  # past and present both held: about half
    assert run_json(capsys, "critical", model, *dims, "--kv-cache", "copy")["kv_cache"] == "copy"


@pytest.mark.parametrize("value", ["0", "1.5", "-0.1", "nan", "most"])
def test_a_utilization_outside_zero_to_one_is_refused_in_one_line(capsys, value):
    for command in (["analyze"], ["check"], ["serve"], ["critical"], ["sweep"]):
        with pytest.raises(SystemExit) as exited:  # argparse's refusal, before any work
            main([*command, GPT2, "--memory-utilization", value])
        assert exited.value.code == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "--memory-utilization" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "footprint",
    [
        lambda b: 10**9 + 37_850_786 * b,  # a line: solved at once
        lambda b: 10**9 + 37_000_000 * b + (b // 100) * 10**8,  # a step every 100 sequences: the line overshoots
        lambda b: 10**6 + 13 * b * b,  # convex: the line through 1 and 2 undershoots by far
    ],
)
def test_the_search_is_exact_where_the_footprint_is_not_a_line(footprint):
    budget = MemoryBudget(80e9)  # 72e9 usable
    fit = largest_fitting(footprint, budget)
    assert footprint(fit.largest) <= USABLE < footprint(fit.largest + 1)
    assert (fit.bytes_at_largest, fit.bytes_above_largest) == (footprint(fit.largest), footprint(fit.largest + 1))


def test_nothing_fits_or_nothing_is_judged():
    assert largest_fitting(lambda b: 73 * 10**9 * b, MemoryBudget(80e9)).largest is None  # batch 1 is over 72 GB
    assert largest_fitting(lambda b: 5 * 10**9, MemoryBudget(80e9)).largest is None  # it does not grow with the batch
    asked = []
    assert (
        largest_fitting(lambda b: asked.append(b) or 0, MemoryBudget(None)).largest is None and asked == []
    )  # no capacity: nothing analysed
    assert (
        MemoryBudget(80e9, 0.5).usable == 40 * 10**9
        and MemoryBudget(80e9).fits(72 * 10**9)
        and not MemoryBudget(80e9).fits(72 * 10**9 + 1)
    )
