"""GPT-2 small (124 M) from transformers with seeded random weights, as prefill and decode graphs.

transformers 5.x passes the KV cache as a ``DynamicCache`` object, which no exporter can take as
a graph input.  The wrappers below take and return plain tensors (``past.{i}.key`` ... in,
``logits`` and ``present.{i}.key`` ... out) and build the cache inside ``forward``, so the exported
signature is stable across transformers versions.  There is no attention-mask input: sequences
are unpadded (a padding mask would change no FLOP or byte count that matters here); the causal
mask and the decode position ids (past length + 0) are computed inside the graph.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn
from transformers import DynamicCache, GPT2Config, GPT2LMHeadModel

from exporters.randomize import randomize_
from exporters.torch_export import export_module

GPT2_PARAMS = 124_439_808  # GPT-2 small, lm_head tied to wte and counted once
LAYERS, HEADS, HEAD_DIM, VOCAB = 12, 12, 64, 50257


def build_gpt2(seed: int = 0) -> GPT2LMHeadModel:
    """``GPT2LMHeadModel(GPT2Config())`` in eval mode, every parameter drawn from ``seed``."""
    model = GPT2LMHeadModel(GPT2Config())
    return randomize_(model, seed).eval()


def _presents(cache: DynamicCache) -> list[torch.Tensor]:
    """The cache flattened as [layer0.key, layer0.value, layer1.key, ...]."""
    return [t for layer in cache.layers for t in (layer.keys, layer.values)]


class GPT2Prefill(nn.Module):
    """``input_ids [batch, sequence]`` -> ``logits``, then ``present.{i}.key/value`` per layer."""

    def __init__(self, model: GPT2LMHeadModel):
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
        cache = DynamicCache(config=self.model.config)
        out = self.model(input_ids, cache=cache, use_cache=True)
        return (out.logits, *_presents(out.cache))


class GPT2Decode(nn.Module):
    """``input_ids [batch, 1]``, ``past.{i}.key/value [batch, 12, past_sequence, 64]`` -> ``logits``,
    then presents of length ``past_sequence + 1``.  Position ids come from the past length."""

    def __init__(self, model: GPT2LMHeadModel):
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, *past: torch.Tensor) -> tuple[torch.Tensor, ...]:
        pairs = [(past[2 * i], past[2 * i + 1]) for i in range(len(past) // 2)]
        cache = DynamicCache(pairs, config=self.model.config)
        out = self.model(input_ids, cache=cache, use_cache=True)
        return (out.logits, *_presents(out.cache))


def present_names(layers: int = LAYERS) -> list[str]:
    """Output names after ``logits``: present.0.key, present.0.value, present.1.key, ..."""
    return [f"present.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]


def past_names(layers: int = LAYERS) -> list[str]:
    """Decode input names after ``input_ids``: past.0.key, past.0.value, past.1.key, ..."""
    return [f"past.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]


def export_gpt2(
    out_dir: str | Path,
    phase: str = "prefill",
    dtype: str = "fp32",
    exporter: str = "dynamo",
    seed: int = 0,
) -> Path:
    """Export GPT-2 ``phase`` ("prefill" or "decode") to ``out_dir/gpt2_<phase>_<dtype>[_torchscript].onnx``.

    Prefill: ``input_ids [batch, sequence]`` -> ``logits [batch, sequence, 50257]``,
    ``present.{i}.key/value [batch, 12, sequence, 64]``.
    Decode: ``input_ids [batch, 1]``, ``past.{i}.key/value [batch, 12, past_sequence, 64]`` ->
    ``logits [batch, 1, 50257]``, ``present.{i}.key/value [batch, 12, past_sequence + 1, 64]``.
    The example inputs use batch 2, sequence 8, past 5: no dim is 0 or 1, so torch.export does
    not specialize any symbolic dim.
    """
    if phase not in ("prefill", "decode"):
        raise ValueError(f"phase must be 'prefill' or 'decode', not {phase!r}")
    model = build_gpt2(seed)
    gen = torch.Generator().manual_seed(seed)
    kv = lambda length: ["batch", HEADS, length, HEAD_DIM]  # noqa: E731
    if phase == "prefill":
        module = GPT2Prefill(model)
        args = (torch.randint(0, VOCAB, (2, 8), generator=gen),)
        inputs = {"input_ids": ["batch", "sequence"]}
        outputs = {"logits": ["batch", "sequence", VOCAB]} | {n: kv("sequence") for n in present_names()}
    else:
        module = GPT2Decode(model)
        past = [torch.randn(2, HEADS, 5, HEAD_DIM, generator=gen) for _ in range(2 * LAYERS)]
        args = (torch.randint(0, VOCAB, (2, 1), generator=gen), *past)
        inputs = {"input_ids": ["batch", 1]} | {n: kv("past_sequence") for n in past_names()}
        outputs = {"logits": ["batch", 1, VOCAB]} | {n: kv("past_sequence + 1") for n in present_names()}
    suffix = "" if exporter == "dynamo" else f"_{exporter}"
    return export_module(
        module,
        args,
        Path(out_dir) / f"gpt2_{phase}_{dtype}{suffix}.onnx",
        input_shapes=inputs,
        output_shapes=outputs,
        dtype=dtype,
        exporter=exporter,
    )
