"""Regenerate the corpus: ``python -m tests.corpus.generate --out tests/corpus/models``.

Options: ``--only PATTERN`` (fnmatch on model names, repeatable), ``--list`` (names only),
``--keep-data`` (keep each ``<name>.onnx.data`` weights file; by default it is deleted, so the
folder holds what git holds and ``verify`` synthesizes weights as it will in CI).

Needs the ``dev`` extra (torch, transformers, onnxruntime-genai). Everything is seeded and built
from configs written in ``sources``: nothing is downloaded. About 2 minutes on 2 cores; the output is byte-identical run to run.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import onnx

from tests.corpus import SCHEMA
from tests.corpus import sources as S

MAX_BYTES = 1 << 20  # a committed graph file should stay under ~1 MB


@dataclass
class Built:
    model: onnx.ModelProto  # with its weights
    dims: dict[str, int]
    flops: int
    flop_method: str
    generator: str
    tool: str
    source: str | None = None
    notes: str = ""
    variants: list[dict] = field(default_factory=list)  # more bindings: {"label", "dims", "flops"}


class Context:
    """The work folder and the torch exports the generators share (each made once)."""

    def __init__(self, work: Path):
        self.work = work
        self._sources: dict[tuple, S.Source] = {}
        self.recipes = S.recipes()

    def source(self, arch: str, exporter: str = "torchscript", eager: bool = False) -> S.Source:
        key = (arch, exporter, eager)
        if key not in self._sources:
            self._sources[key] = S.source(self.recipes[arch], exporter, self.work, eager=eager)
        return self._sources[key]

    def path(self, name: str) -> Path:
        return self.work / name


# --- the generators: one function per corpus model, registered in order -------------------------------

JOBS: dict[str, Callable[[Context], Built]] = {}


def job(name: str):
    def register(fn):
        if name in JOBS:
            raise ValueError(f"duplicate corpus model {name!r}")
        JOBS[name] = fn
        return fn

    return register


# e) transformers models (and the reduced ResNet) called with their masks, through both exporters
EXPORTED = (
    "bert",
    "gpt2",
    "gpt2_past",
    "llama_past",
    "mistral_past",
    "bart_decoder_past",
    "t5_encoder",
    "vit",
    "whisper_encoder",
    "resnet",
)


def _export_job(arch: str, exporter: str):
    def run(ctx: Context) -> Built:
        src = ctx.source(arch, exporter)
        return Built(
            onnx.load(src.path),
            src.dims,
            src.flops,
            src.flop_method,
            "torch-export",
            src.tool,
            notes=src.notes,
            variants=src.variants,
        )

    return run


for _arch in EXPORTED:
    job(f"ts_{_arch}")(_export_job(_arch, "torchscript"))
    job(f"dynamo_{_arch}")(_export_job(_arch, "dynamo"))


# a) onnxruntime session optimization, CPU provider, three levels
def _session_job(arch: str, level: str):
    def run(ctx: Context) -> Built:
        from tests.corpus import tools

        src = ctx.source(arch)
        model = tools.session_optimized(src.path, level, ctx.path(f"ort_{level}_{arch}.onnx"))
        tool = f"onnxruntime {ort_version()} InferenceSession, CPUExecutionProvider, ORT_ENABLE_{level.upper()}, optimized_model_filepath"
        return Built(model, src.dims, src.flops, src.flop_method, "ort-session", tool, src.name, variants=src.variants)

    return run


for _arch in ("resnet", "bert", "gpt2"):
    for _level in ("basic", "extended", "all"):
        job(f"ort_{_level}_{_arch}")(_session_job(_arch, _level))


# b) onnxruntime.transformers.optimizer. BERT exported with eager attention is the graph its fusions
# match (EmbedLayerNormalization, Attention); from the default SDPA export they leave attention unfused,
# and so they do for transformers 5's GPT-2 either way (SkipLayerNormalization and FastGelu only).
def _transformers_job(name: str, arch: str, model_type: str, fp16: bool, eager: bool, gpu: bool = False):
    def run(ctx: Context) -> Built:
        from tests.corpus import tools

        src = ctx.source(arch, eager=eager)
        model = tools.transformers_optimized(
            src.path,
            model_type,
            ctx.path(f"{name}.onnx"),
            fp16=fp16,
            num_heads=S.HEADS,
            hidden_size=S.HIDDEN,
            use_gpu=gpu,
        )
        tool = f"onnxruntime.transformers.optimizer.optimize_model(model_type={model_type!r}, num_heads={S.HEADS}, hidden_size={S.HIDDEN}, use_gpu={gpu})"
        if fp16:
            tool += " + convert_float_to_float16(keep_io_types=True)"
        return Built(
            model,
            src.dims,
            src.flops,
            src.flop_method,
            "ort-transformers-optimizer",
            tool,
            src.name,
            src.notes,
            src.variants,
        )

    return run


for _name, _arch, _type, _fp16, _eager, _gpu in (
    ("ortopt_bert", "bert", "bert", False, True, False),
    ("ortopt_bert_fp16", "bert", "bert", True, True, False),
    ("ortopt_bert_sdpa", "bert", "bert", False, False, False),
    ("ortopt_bert_gpu_fp16", "bert", "bert", True, True, True),  # the GPU fusions (use_gpu=True)
    ("ortopt_gpt2_past", "gpt2_past", "gpt2", False, False, False),
    ("ortopt_gpt2_past_fp16", "gpt2_past", "gpt2", True, False, False),
    ("ortopt_vit_gpu", "vit", "vit", False, True, True),
    ("ortopt_t5_encoder", "t5_encoder", "t5", False, False, False),
    ("ortopt_bart_decoder_past_gpu", "bart_decoder_past", "bart", False, False, True),
):
    job(_name)(_transformers_job(_name, _arch, _type, _fp16, _eager, _gpu))


# c) the onnxruntime-genai model builder
def _genai_job(arch: str, precision: str):
    def run(ctx: Context) -> Built:
        from tests.corpus import genai

        folder = ctx.path(f"hf_{arch}")
        model = genai.checkpoint(arch, folder)
        flops = genai.flops(model)
        decode = {"label": "decode", "dims": dict(genai.DECODE_DIMS), "flops": genai.flops(model, decode=True)}
        built = genai.build(folder, ctx.path(f"genai_{arch}_{precision}"), precision, ctx.path("genai_cache"))
        tool = f"python -m onnxruntime_genai.models.builder -p {precision} -e cpu (onnxruntime-genai {version('onnxruntime-genai')})"
        notes = f"{arch} config: {S.LAYERS} layers, hidden {S.HIDDEN}, {S.HEADS} heads / {S.KV_HEADS} KV heads, vocab {S.VOCAB}"
        return Built(
            built,
            dict(genai.DIMS),
            flops,
            S.FLOP_METHOD + " (HF model with DynamicCache)",
            "genai-builder",
            tool,
            notes=notes,
            variants=[decode],
        )

    return run


for _arch in ("llama", "qwen2", "lfm2"):  # lfm2: a short-conv layer (CausalConvWithState), then attention
    for _precision in ("int4", "fp32"):
        job(f"genai_{_arch}_{_precision}")(_genai_job(_arch, _precision))


# d) quantization
def _bert_reader():
    from tests.corpus import tools

    shape = (S.BATCH, S.SEQUENCE)
    return tools.RandomReader({"input_ids": ("int64", shape), "attention_mask": ("int64", shape)})


def _resnet_reader():
    from tests.corpus import tools

    return tools.RandomReader({"pixel_values": ("float32", (S.BATCH, 3, S.RESNET_IMAGE, S.RESNET_IMAGE))})


def _quant_job(arch: str, kind: str):
    def run(ctx: Context) -> Built:
        from tests.corpus import tools

        src = ctx.source(arch)
        out = ctx.path(f"q{kind}_{arch}.onnx")
        if kind == "dyn":
            model = tools.quantized_dynamic(src.path, out)
            tool = "onnxruntime.quantization.quantize_dynamic(weight_type=QInt8)"
        else:
            reader = _bert_reader() if arch == "bert" else _resnet_reader()
            model = tools.quantized_static_qdq(src.path, out, reader)
            tool = "onnxruntime.quantization.quantize_static(quant_format=QDQ, QInt8 activations and weights, 4 random calibration feeds)"
        return Built(
            model, src.dims, src.flops, src.flop_method, "ort-quantization", tool, src.name, variants=src.variants
        )

    return run


def _weight_only_job(arch: str, kind: str):
    def run(ctx: Context) -> Built:
        from tests.corpus import tools

        src = ctx.source(arch)
        model = tools.quantized_weight_only(src.path, ctx.path(f"{kind}_{arch}.onnx"), kind)
        config, options = tools.WEIGHT_ONLY[kind]
        tool = f"onnxruntime.quantization.matmul_nbits_quantizer.MatMulNBitsQuantizer({config}({', '.join(f'{k}={v}' for k, v in options.items())}))"
        return Built(
            model, src.dims, src.flops, src.flop_method, "ort-quantization", tool, src.name, variants=src.variants
        )

    return run


for _arch, _kind in (("llama_past", "nb4"), ("gpt2_past", "nb8"), ("llama_past", "hqq")):
    job(f"{_kind}_{_arch}")(_weight_only_job(_arch, _kind))


for _arch in ("bert", "resnet"):
    for _kind in ("dyn", "dq"):
        job(f"q{_kind}_{_arch}")(_quant_job(_arch, _kind))


# g) old opsets
def _old_job(arch: str, opset: int):
    def run(ctx: Context) -> Built:
        from tests.corpus import old_opsets

        if arch == "dropout_convnet":
            recipe, training = old_opsets.dropout_recipe(), True
        elif arch == "loop_rnn":
            recipe, training = old_opsets.loop_recipe(), False
        else:
            recipe, training = ctx.recipes[arch], False
        module = recipe.build()
        variants = []
        if arch == "loop_rnn":
            flops, method = old_opsets.loop_flops(), "formula: steps x 2·batch·64·64 (the Linear in the loop body)"
        else:
            flops, method = S.count_flops(module, recipe.args()), S.FLOP_METHOD
            if recipe.decode is not None:
                variants.append(
                    {
                        "label": "decode",
                        "dims": S.decode_dims(recipe.dims),
                        "flops": S.count_flops(module, recipe.decode()),
                    }
                )
            S.eager_attention(module)
        path = ctx.path(f"opset{opset}_{arch}.onnx")
        model = S.export(recipe, "torchscript", path, opset=opset, training=training, module=module)
        tool = f"torch.onnx.export(dynamo=False, opset_version={opset}" + (
            ", training=TrainingMode.TRAINING)" if training else ")"
        )
        notes = recipe.notes or "eager attention (no SDPA export before opset 14)"
        return Built(model, dict(recipe.dims), flops, method, "old-opset", tool, notes=notes, variants=variants)

    return run


OLD = (
    ("dropout_convnet", 9),
    ("loop_rnn", 11),
    ("gpt2", 9),
    ("bert", 10),
    ("gpt2_past", 11),
    ("llama_past", 11),
    ("resnet", 7),
)
for _arch, _opset in OLD:
    job(f"opset{_opset}_{_arch}")(_old_job(_arch, _opset))


# f) onnx.version_converter to a newer opset (after g: two of these start from the old-opset files)
def _convert_job(start: str, target: int):
    def run(ctx: Context) -> Built:
        from tests.corpus import tools

        if start.startswith("opset"):
            base = JOBS[start](ctx)
            path = ctx.path(f"{start}.onnx")
            flops, method, dims, variants = base.flops, base.flop_method, base.dims, base.variants
        else:
            src = ctx.source(start)
            path, flops, method, dims, variants = src.path, src.flops, src.flop_method, src.dims, src.variants
        model = tools.version_converted(path, target)
        source_opset = next(
            o.version for o in onnx.load(path, load_external_data=False).opset_import if o.domain in ("", "ai.onnx")
        )
        tool = f"onnx.version_converter.convert_version(model, {target}) from opset {source_opset}"
        return Built(
            model,
            dims,
            flops,
            method,
            "version-converter",
            tool,
            start if start.startswith("opset") else f"ts_{start}",
            variants=variants,
        )

    return run


CONVERTED = (("bert", 22), ("gpt2_past", 22), ("opset9_gpt2", 17), ("opset7_resnet", 13))
for _start, _target in CONVERTED:
    job(f"vconv{_target}_{_start.replace('opset', 'from')}")(_convert_job(_start, _target))


# --- writing ---------------------------------------------------------------------------------------


def version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def ort_version() -> str:
    return version("onnxruntime") or "?"


def emit(name: str, built: Built, out: Path, keep_data: bool) -> dict:
    """Write ``<name>.onnx`` (weight-stripped) and ``<name>.json``; return the manifest entry."""
    from exporters.strip import save_stripped

    _check_dims(name, built.dims, built)
    for variant in built.variants:
        _check_dims(f"{name}@{variant['label']}", variant["dims"], built)
    model = built.model
    path = save_stripped(model, out / f"{name}.onnx")
    data = path.with_name(path.name + ".data")
    if not keep_data:
        data.unlink(missing_ok=True)
    ops = Counter(f"{n.domain or 'ai.onnx'}::{n.op_type}" for n in model.graph.node)
    entry = {
        "schema": SCHEMA,
        "name": name,
        "generator": built.generator,
        "tool": built.tool,
        "source": built.source,
        "dims": built.dims,
        "flops": {"matrix": built.flops, "method": built.flop_method},
        "variants": [
            {"label": v["label"], "dims": v["dims"], "flops": {"matrix": v["flops"], "method": built.flop_method}}
            for v in built.variants
        ],
        "nodes": len(model.graph.node),
        "opsets": {o.domain or "ai.onnx": o.version for o in model.opset_import},
        "ops": dict(sorted(ops.items())),
        "bytes": path.stat().st_size,
        "versions": {
            d: version(d) for d in ("torch", "transformers", "onnx", "onnxruntime", "onnxscript", "onnxruntime-genai")
        },
        "notes": built.notes,
    }
    (out / f"{name}.json").write_text(json.dumps(entry, indent=1) + "\n")
    return entry


def _check_dims(name: str, dims: dict[str, int], built: Built) -> None:
    """Every symbolic dim of the graph inputs must be bound by ``dims``."""
    inits = {t.name for t in built.model.graph.initializer}
    unbound = {
        d.dim_param
        for i in built.model.graph.input
        if i.name not in inits
        for d in i.type.tensor_type.shape.dim
        if d.HasField("dim_param") and d.dim_param not in dims
    }
    if unbound:
        raise ValueError(f"{name}: input dims {sorted(unbound)} are not bound by {dims}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.corpus.generate", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="output folder (tests/corpus/models)")
    parser.add_argument("--only", action="append", default=[], help="fnmatch pattern on model names (repeatable)")
    parser.add_argument("--list", action="store_true", help="list the model names and exit")
    parser.add_argument("--keep-data", action="store_true", help="keep the weights files (<name>.onnx.data)")
    parser.add_argument("--work", type=Path, help="work folder (default: a temporary one, removed)")
    args = parser.parse_args(argv)
    names = [n for n in JOBS if not args.only or any(fnmatch.fnmatch(n, p) for p in args.only)]
    if args.list:
        print("\n".join(names))
        return 0
    if args.out is None:
        parser.error("--out is required")
    if not names:
        parser.error("no model matches --only")
    args.out.mkdir(parents=True, exist_ok=True)
    work = args.work or Path(tempfile.mkdtemp(prefix="corpus-"))
    work.mkdir(parents=True, exist_ok=True)
    ctx, failed = Context(work), []
    start = time.perf_counter()
    try:
        for name in names:
            began = time.perf_counter()
            try:
                entry = emit(name, JOBS[name](ctx), args.out, args.keep_data)
            except Exception as exc:  # report and go on: one tool failing must not hide the others
                failed.append(name)
                print(f"FAILED {name}: {type(exc).__name__}: {str(exc)[:500]}", file=sys.stderr, flush=True)
                continue
            size = entry["bytes"]
            warn = "  (over 1 MB)" if size > MAX_BYTES else ""
            print(
                f"{name:32s} {entry['nodes']:5d} nodes {size:>9,} B {time.perf_counter() - began:6.1f} s{warn}",
                flush=True,
            )
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    print(f"{len(names) - len(failed)} of {len(names)} written in {time.perf_counter() - start:.0f} s", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
