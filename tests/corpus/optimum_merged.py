"""Merged decoders written by optimum itself (issue 27), beside the port in shipped_control_flow.py.

optimum-onnx pins an older transformers than the project's exporters use, so this runs in an
environment of its own (nothing downloaded; the tiny configs of tests/corpus/sources.py):

    python3 -m venv /tmp/optimum && /tmp/optimum/bin/pip install torch==2.13.0 optimum-onnx==0.1.0 onnxruntime==1.32.0
    /tmp/optimum/bin/python -m tests.corpus.optimum_merged --out tests/corpus/shipped

For GPT-2 and Llama (GQA) it exports, with optimum's own ONNX configs and exporter, the decoder
without past (`use_past_in_inputs=False`: it outputs the present) and the decoder with past, the
two graphs optimum's legacy `text-generation-with-past` export wrote, and merges them with
`optimum.onnx.merge_decoders`: `optimum_<arch>_decoder_model_merged` and its two counterparts.
Each is run in onnxruntime with its weights at each binding before they are stripped (every tensor
over 1 KiB, initializers and Constant-node tensors alike, goes to the git-ignored `.onnx.data`).

optimum-onnx's merge keeps the no-past graph's input declarations, so the merged graph's
`attention_mask` is `[batch_size, sequence_length]` although the cache branch reads
past + new tokens of it: a binding gives it its whole shape (manifest `inputs`)."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx

from tests.corpus.shipped_control_flow import BATCH, PAST, PROMPT, SEED, Built, build_entries

GENERATOR = "tests/corpus/optimum_merged.py"
ARCHES = ("gpt2", "llama")


def _export(arch: str, folder: Path) -> dict[str, onnx.ModelProto]:
    """optimum's decoder, decoder-with-past and merged graphs of a tiny random `arch`."""
    import torch
    import transformers
    from optimum.exporters.onnx import export
    from optimum.exporters.onnx.model_configs import GPT2OnnxConfig, LlamaOnnxConfig
    from optimum.onnx import merge_decoders

    from tests.corpus import sources as S

    torch.manual_seed(SEED)  # transformers' own initialization: exporters.randomize expects the project's transformers
    if arch == "gpt2":
        model, config = transformers.GPT2LMHeadModel(S.gpt2_config()).eval(), GPT2OnnxConfig
    else:
        model, config = transformers.LlamaForCausalLM(S.llama_config()).eval(), LlamaOnnxConfig
    paths = {
        key: folder / f"{arch}_{key}.onnx"
        for key in ("decoder_model", "decoder_with_past_model", "decoder_model_merged")
    }
    export(
        model,
        config(model.config, task="text-generation", use_past=True, use_past_in_inputs=False),
        paths["decoder_model"],
    )
    export(
        model,
        config(model.config, task="text-generation", use_past=True, use_past_in_inputs=True),
        paths["decoder_with_past_model"],
    )
    merge_decoders(
        paths["decoder_model"],
        paths["decoder_with_past_model"],
        save_path=str(paths["decoder_model_merged"]),
        strict=False,
    )
    return {key: onnx.load(path) for key, path in paths.items()}


def _feeds(model: onnx.ModelProto, sequence: int, past: int, use_cache: bool | None) -> dict[str, np.ndarray]:
    """What an application feeds: tokens, a mask over past + new, positions after the past, the
    cache (empty on the prompt pass, as optimum's ORTModel feeds the merged graph)."""
    rng = np.random.default_rng(SEED)
    feeds = {}
    for value in model.graph.input:
        name, dims = value.name, value.type.tensor_type.shape.dim
        if name == "input_ids":
            feeds[name] = rng.integers(0, 1000, (BATCH, sequence), dtype=np.int64)
        elif name == "attention_mask":
            feeds[name] = np.ones((BATCH, past + sequence), np.int64)
        elif name == "position_ids":
            feeds[name] = np.tile(np.arange(past, past + sequence, dtype=np.int64), (BATCH, 1))
        elif name.startswith("past_key_values"):
            feeds[name] = rng.standard_normal((BATCH, dims[1].dim_value, past, dims[3].dim_value)).astype(np.float32)
        elif name == "use_cache_branch":
            feeds[name] = np.array([bool(use_cache)])
    return feeds


def family(arch: str) -> dict[str, Built]:
    """The merged graph (two bindings: a decode step after PAST cached tokens, the PROMPT pass) and
    its two un-merged counterparts, each at the binding its branch runs."""
    with tempfile.TemporaryDirectory() as folder:
        models = _export(arch, Path(folder))
    tool = "optimum-onnx 0.1.0: optimum.exporters.onnx.export with the architecture's OnnxConfig, then optimum.onnx.merge_decoders"
    step = {"batch_size": BATCH, "sequence_length": 1, "past_sequence_length": PAST}
    prompt = {"batch_size": BATCH, "sequence_length": PROMPT, "past_sequence_length": 0}
    merged = models["decoder_model_merged"]
    return {
        f"optimum_{arch}_decoder_model_merged": Built(
            merged,
            tool=tool,
            dims=step,
            values={"use_cache_branch": 1},
            counterpart=f"optimum_{arch}_decoder_with_past_model",
            feeds=_feeds(merged, 1, PAST, True),
            inputs={"attention_mask": [BATCH, PAST + 1]},
            notes="optimum-onnx keeps the no-past graph's attention_mask declaration [batch_size, sequence_length]: bind its whole shape",
            variants=[
                {
                    "label": "no_cache",
                    "dims": prompt,
                    "values": {"use_cache_branch": 0},
                    "counterpart": f"optimum_{arch}_decoder_model",
                    "inputs": {"attention_mask": [BATCH, PROMPT]},
                    "feeds": _feeds(merged, PROMPT, 0, False),
                }
            ],
        ),  # fmt: skip
        f"optimum_{arch}_decoder_with_past_model": Built(
            models["decoder_with_past_model"],
            tool=tool,
            dims=step,
            feeds=_feeds(models["decoder_with_past_model"], 1, PAST, None),
        ),
        f"optimum_{arch}_decoder_model": Built(
            models["decoder_model"],
            tool=tool,
            dims={"batch_size": BATCH, "sequence_length": PROMPT},
            feeds=_feeds(models["decoder_model"], PROMPT, 0, None),
        ),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.corpus.optimum_merged", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).resolve().parent / "shipped",
        help="output folder (tests/corpus/shipped)",
    )
    args = parser.parse_args(argv)
    for arch in ARCHES:
        build_entries(family(arch), args.out, GENERATOR, strip_constants=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
