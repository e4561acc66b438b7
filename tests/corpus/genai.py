"""The onnxruntime-genai model builder on a tiny random Hugging Face checkpoint saved locally.

``python -m onnxruntime_genai.models.builder -i <dir> -o <out> -p int4|fp32 -e cpu`` reads the
folder's config, weights and tokenizer with ``from_pretrained``, so nothing is downloaded: the
folder gets ``save_pretrained`` of a seeded random model and of a 1,000-word word-level tokenizer
built with the ``tokenizers`` library (the builder loads a tokenizer; no hub file is needed).
The graphs use GroupQueryAttention, (Skip)SimplifiedLayerNormalization and, at int4, MatMulNBits.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import onnx
import torch
import transformers

from tests.corpus import sources

# genai's input dims. Batch 1: onnxruntime's GroupQueryAttention refuses a batch > 1 when several new
# tokens follow a past ("batch_size must be 1 when sequence_length > 1 and past context is given").
BATCH = 1
DIMS = {
    "batch_size": BATCH,
    "sequence_length": sources.SEQUENCE,
    "past_sequence_length": sources.PAST,
    "total_sequence_length": sources.TOTAL,
    "kv_cache_dim": sources.HEAD,
}
# one new token per sequence after the past: a batch of 2 is allowed
DECODE_DIMS = {**DIMS, "batch_size": 2, "sequence_length": 1, "total_sequence_length": sources.PAST + 1}


def lfm2_config() -> transformers.Lfm2Config:
    """LFM2-like: a short-convolution layer (CausalConvWithState, a 3-tap carry) then an attention one."""
    return transformers.Lfm2Config(
        vocab_size=sources.VOCAB, hidden_size=sources.HIDDEN, intermediate_size=2 * sources.HIDDEN, num_hidden_layers=sources.LAYERS,
        num_attention_heads=sources.HEADS, num_key_value_heads=sources.KV_HEADS, max_position_embeddings=sources.POSITIONS,
        layer_types=["conv", "full_attention"], block_auto_adjust_ff_dim=False, tie_word_embeddings=False,
    )  # fmt: skip


ARCHITECTURES = {  # config, model class
    "llama": (lambda: sources.llama_config(transformers.LlamaConfig), transformers.LlamaForCausalLM),
    "qwen2": (lambda: sources.llama_config(transformers.Qwen2Config), transformers.Qwen2ForCausalLM),  # q/k/v biases
    "lfm2": (lfm2_config, transformers.Lfm2ForCausalLM),
}


def checkpoint(arch: str, folder: Path, config=None) -> torch.nn.Module:
    """Save a seeded random ``arch`` model (its corpus config, or ``config``) and a tokenizer to
    ``folder``; return the model."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    make_config, model_cls = ARCHITECTURES[arch]
    model = sources.hf_model(model_cls, config or make_config())
    model.save_pretrained(folder)
    vocab = {f"t{i}": i for i in range(sources.VOCAB)}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="t0"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, unk_token="t0", bos_token="t0", eos_token="t0", pad_token="t0"
    )
    fast.save_pretrained(folder)
    return model


def build(folder: Path, out: Path, precision: str, cache: Path) -> onnx.ModelProto:
    """Run the builder as a user does (a subprocess: the module is a script); return its model.onnx
    with weights."""
    command = [
        sys.executable,
        "-m",
        "onnxruntime_genai.models.builder",
        "-i",
        str(folder),
        "-o",
        str(out),
        "-p",
        precision,
        "-e",
        "cpu",
        "-c",
        str(cache),
    ]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"genai builder failed ({done.returncode}): {done.stderr[-2000:]}")
    return onnx.load(out / "model.onnx")


class _Step(torch.nn.Module):
    """One step of the model after a cache it built itself (a KV cache, and LFM2's conv states)."""

    def __init__(self, model: torch.nn.Module, cache):
        super().__init__()
        self.model, self.cache = model, cache

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask, cache=self.cache, use_cache=True).logits


def flops(model: torch.nn.Module, decode: bool = False) -> int:
    """FlopCounterMode on the checkpoint's eager model, one step at DIMS (SEQUENCE new tokens after
    PAST cached) or, with ``decode``, at DECODE_DIMS; the cache is the model's own after a PAST-token
    prefill (not counted), so a hybrid model's conv states are there too."""
    dims = DECODE_DIMS if decode else DIMS
    batch, sequence = dims["batch_size"], dims["sequence_length"]
    generator = torch.Generator().manual_seed(sources.SEED)
    with torch.no_grad():
        prefill = torch.randint(0, sources.VOCAB, (batch, sources.PAST), generator=generator)
        cache = model(input_ids=prefill, use_cache=True).past_key_values  # the output's name for the cache
    ids = torch.randint(0, sources.VOCAB, (batch, sequence), generator=generator)
    mask = torch.ones(batch, dims["total_sequence_length"], dtype=torch.long)
    return sources.count_flops(_Step(model, cache), (ids, mask))
