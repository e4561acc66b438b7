"""Mixture-of-experts decoders written by optimum itself (issue 34).

optimum-onnx pins an older transformers than the project's exporters use, so this runs in an
environment of its own, as tests/corpus/optimum_merged.py does (nothing downloaded):

    /tmp/optvenv/bin/python -m tests.corpus.optimum_moe --out tests/corpus/moe

Each model is a tiny random decoder (2 layers, hidden 64, 4 experts, top-2) exported the way
optimum's `text-generation-with-past` task exports it: the architecture's `OnnxConfig` with the
past in the inputs, its own model patcher applied (TorchScript, opset 14). Two forms of experts:

- `optimum_qwen3_moe_decoder_with_past_model`: optimum patches Qwen3-MoE's sparse block to loop
  over *every* expert, each taking its tokens with `torch.where` of its one-hot `[top_k, tokens]`
  mask — a NonZero per expert, whose size is the routing's.
- `optimum_gpt_oss_decoder_with_past_model`: optimum patches GPT-OSS's experts to run every token
  through every expert (two batched MatMuls over `[E, tokens, hidden]`) and weight them by the
  router's scattered top-k scores: the dense all-experts form.
- `optimum_deepseek_v3_decoder_with_past_model`: DeepSeek-V3 (multi-head latent attention, one
  shared expert beside the routed ones); transformers loops over every expert with `torch.where`,
  skipping an expert no token chose (`if token_indices.numel() > 0`), which a trace bakes in: the
  generator refuses a trace without one NonZero per expert.

Each is run in onnxruntime with its weights (at a decode binding: 8 new tokens on a 24-token
cache, and the manifest's config: what the tests count parameters from) before they are stripped.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx

from tests.corpus.shipped_control_flow import SEED, Built, build_entries

GENERATOR = "tests/corpus/optimum_moe.py"
BATCH, NEW, PAST = 1, 8, 24  # the decode step: 8 new tokens on a 24-token cache
HIDDEN, HEADS, KV_HEADS, HEAD, LAYERS, VOCAB = 64, 4, 2, 16, 2, 256
EXPERTS, TOP_K, EXPERT_WIDTH = 4, 2, 32  # routed experts, experts per token, each expert's intermediate size

CONFIGS = {
    "qwen3_moe": {
        "vocab_size": VOCAB, "hidden_size": HIDDEN, "intermediate_size": 2 * HIDDEN, "moe_intermediate_size": EXPERT_WIDTH,
        "num_hidden_layers": LAYERS, "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS, "head_dim": HEAD,
        "num_experts": EXPERTS, "num_experts_per_tok": TOP_K, "decoder_sparse_step": 1, "mlp_only_layers": [],
        "norm_topk_prob": True, "max_position_embeddings": 128, "tie_word_embeddings": False,
    },
    "gpt_oss": {
        "vocab_size": VOCAB, "hidden_size": HIDDEN, "intermediate_size": EXPERT_WIDTH, "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS, "head_dim": HEAD, "num_local_experts": EXPERTS,
        "num_experts_per_tok": TOP_K, "layer_types": ["full_attention"] * LAYERS, "max_position_embeddings": 128,
        "tie_word_embeddings": False, "rope_scaling": None,
    },
    "deepseek_v3": {
        "vocab_size": VOCAB, "hidden_size": HIDDEN, "intermediate_size": 2 * HIDDEN, "moe_intermediate_size": EXPERT_WIDTH,
        "num_hidden_layers": LAYERS, "num_attention_heads": HEADS, "num_key_value_heads": HEADS, "n_routed_experts": EXPERTS,
        "n_shared_experts": 1, "num_experts_per_tok": TOP_K, "n_group": 1, "topk_group": 1, "first_k_dense_replace": 0,
        "q_lora_rank": None, "kv_lora_rank": 16, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": HEAD,
        "max_position_embeddings": 128, "tie_word_embeddings": False, "rope_scaling": None,
    },
}  # fmt: skip


def _export(arch: str, folder: Path) -> onnx.ModelProto:
    """optimum's decoder-with-past graph of a tiny random `arch` (text-generation-with-past)."""
    import torch
    import transformers
    from optimum.exporters.onnx import export
    from optimum.exporters.tasks import TasksManager

    torch.manual_seed(SEED)  # transformers' own initialization, as optimum_merged.py does
    config = transformers.AutoConfig.for_model(arch, **CONFIGS[arch])
    config._attn_implementation = "eager"
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    with (
        torch.no_grad()
    ):  # GPT-OSS's router and biases start at zero or empty: every tensor distinct, every expert a chance
        for weight in model.parameters():
            weight.normal_(0, 0.2)
        for (
            name,
            buffer,
        ) in model.named_buffers():  # DeepSeek-V3's zero score-correction biases, alike in every layer, would be stored once: made distinct, too small to move the routing
            if name.endswith("e_score_correction_bias"):
                buffer.uniform_(0, 1e-4)
    onnx_config = TasksManager.get_exporter_config_constructor("onnx", model, task="text-generation-with-past")(
        model.config, use_past_in_inputs=True
    )
    path = folder / f"{arch}.onnx"
    with contextlib.redirect_stderr(sys.stdout):
        export(model, onnx_config, path)
    return onnx.load(path)


def _feeds(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    """A decode step's feeds: NEW tokens, a mask over past + new, positions after the past, the cache."""
    rng = np.random.default_rng(SEED)
    feeds = {"input_ids": rng.integers(0, VOCAB, (BATCH, NEW), dtype=np.int64), "attention_mask": np.ones((BATCH, PAST + NEW), np.int64),
             "position_ids": np.arange(PAST, PAST + NEW, dtype=np.int64)[None]}  # fmt: skip
    for value in model.graph.input:
        if value.name.startswith("past_key_values"):
            dims = value.type.tensor_type.shape.dim
            feeds[value.name] = rng.standard_normal((BATCH, dims[1].dim_value, PAST, dims[3].dim_value)).astype(
                np.float32
            )
    return {name: feed for name, feed in feeds.items() if name in {v.name for v in model.graph.input}}


def family(arch: str) -> dict[str, Built]:
    with tempfile.TemporaryDirectory() as folder:
        model = _export(arch, Path(folder))
    tool = "optimum-onnx 0.1.0: optimum.exporters.onnx.export, task text-generation-with-past, with the architecture's OnnxConfig and patcher"
    dims = {"batch_size": BATCH, "sequence_length": NEW, "past_sequence_length": PAST}
    selections = sum(node.op_type == "NonZero" for node in model.graph.node)
    if (
        arch != "gpt_oss" and selections != EXPERTS * LAYERS
    ):  # DeepSeek-V3's trace keeps only the experts its dummy tokens hit
        raise SystemExit(f"{arch}: {selections} NonZero in the trace, not one per expert ({EXPERTS * LAYERS})")
    name = f"optimum_{arch}_decoder_with_past_model"
    built = Built(model, tool=tool, dims=dims, feeds=_feeds(model), notes=f"config: {CONFIGS[arch]}")
    return {name: built}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.corpus.optimum_moe", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).resolve().parent / "moe", help="output folder (tests/corpus/moe)"
    )
    parser.add_argument(
        "--only", action="append", default=[], help="an architecture (repeatable): " + ", ".join(CONFIGS)
    )
    args = parser.parse_args(argv)
    for arch in args.only or CONFIGS:
        build_entries(family(arch), args.out, GENERATOR, strip_constants=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
