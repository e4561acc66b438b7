"""The bound and the predicted time against published H100 SXM measurements (issue 40).

Regenerates docs/validation.md and benchmarks/validation.json (the table's data, which
tests/test_validation.py checks): one row per published run, its source and configuration, the
measured time, the deployed bound (a floor: no run may beat it) and the predicted time, and the
prediction's error. Nothing is downloaded: the graphs are built from the public configs.

- Llama-2-7B (meta-llama/Llama-2-7b-hf's config.json: hidden 4096, 32 layers, 32 heads, FFN 11008,
  vocabulary 32000) is exported by torch.onnx from transformers on torch's meta device: no weight
  is ever materialized, each initializer points at an absent external-data file (the analysis
  never reads weights). Exported with 1 and 2 layers; a figure for 32 layers is T(1) + 31·(T(2) −
  T(1)), exact for sums over kernels whose layers repeat (the embedding, final norm and lm_head
  are in T(1) once). Costed in FP8 (`--dtype fp8`: weights, activations and the KV cache, as
  TensorRT-LLM's FP8 engines with an FP8 KV cache run).
- ResNet-50 is the fixture (fixtures/resnet50_fp16.onnx) costed in int8, as MLPerf's TensorRT
  submission runs it.

A throughput row of TensorRT-LLM's static-batching benchmark (gptSessionBenchmark) is one batch's
prefill, which gives the first output token, then OSL − 1 decode steps with the cache growing
from ISL; the decode steps are integrated over the cache length (Simpson's rule on three points).

    python -m benchmarks.validate_published      # a few minutes on two cores
"""

from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "validation.md"
DATA = REPO / "benchmarks" / "validation.json"
TOLERANCE = 0.25  # the predicted time's claimed accuracy, relative to the measured time

LLAMA2_7B = {"hidden_size": 4096, "intermediate_size": 11008, "num_attention_heads": 32, "num_key_value_heads": 32,
             "vocab_size": 32000, "max_position_embeddings": 4096, "rms_norm_eps": 1e-5}  # fmt: skip
LLAMA2_7B_LAYERS = 32
LLAMA2_7B_CONFIG = "https://huggingface.co/meta-llama/Llama-2-7b-hf/blob/main/config.json"
TRTLLM = ("https://github.com/NVIDIA/TensorRT-LLM/blob/138f96d45f90b9667426f7c47297d8c06bafac73/docs/source/performance.md"
          " (TensorRT-LLM performance.md, v0.6.1 throughput tables, v0.5 first-token latency table; H100 SXM FP8, TP 1)")  # fmt: skip
MLPERF = ("https://github.com/mlcommons/inference_results_v4.0/blob/main/closed/NVIDIA/results/DGX-H100_H100-SXM-80GBx1_TRT/"
          "resnet50/Offline/performance/run_1/mlperf_log_summary.txt (MLPerf Inference v4.0 closed, NVIDIA DGX-H100, 1x H100-SXM-80GB, TensorRT)")  # fmt: skip


@dataclass(frozen=True)
class Run:
    """One published measurement: what it ran and what it measured, in seconds for the work
    `configuration` names (a whole batch's generation, one image, one first token)."""

    name: str
    source: str
    configuration: str
    published: str  # the figure as published, with its unit
    measured_s: float
    reason: str = ""  # why the prediction misses, where it does


@dataclass(frozen=True)
class Row:
    run: Run
    bound_s: float
    predicted_s: float

    @property
    def error(self) -> float:
        return self.predicted_s / self.run.measured_s - 1.0

    @property
    def within(self) -> bool:
        return abs(self.error) <= TOLERANCE

    def to_dict(self) -> dict:
        return {**asdict(self.run), "bound_s": self.bound_s, "predicted_s": self.predicted_s, "error": self.error, "within_tolerance": self.within}


def throughput_run(batch: int, isl: int, osl: int, tokens_per_s: float, reason: str = "") -> Run:
    return Run(f"Llama-2-7B FP8, {isl}/{osl} at batch {batch}", TRTLLM,
               f"TP 1, batch {batch}, input {isl}, output {osl} tokens; the time for the batch's {batch * osl:,} output tokens",
               f"{tokens_per_s:,.0f} output tok/s", batch * osl / tokens_per_s, reason)  # fmt: skip


RUNS = (
    Run("ResNet-50 int8, offline", MLPERF, "one H100 SXM, int8 (TensorRT), batch 2048 in the graph; the time per image",
        "88,714.3 samples/s", 1 / 88714.3),
    throughput_run(768, 128, 128, 19694),
    throughput_run(112, 128, 2048, 6818),
    throughput_run(48, 2048, 2048, 2740),
    throughput_run(80, 2048, 128, 2244),
    Run("Llama-2-7B FP8, first token at 128 input tokens", TRTLLM, "TP 1, batch 1, input 128 tokens; the first-token latency",
        "7 ms (TensorRT-LLM v0.5)", 7e-3,
        "a fixed cost per request outside the kernels: TensorRT-LLM v0.5's 128-token first token is 7 ms for GPT-J 6B and "
        "Llama-2-7B alike, 3.5 times the 2.0 ms it takes to read the 6.7 GB of FP8 weights once at 3.35 TB/s; the "
        "measurement exceeds its prediction by 4 ms, the 2,048-token first token by 8 ms: a per-request cost of the v0.5 "
        "session benchmark's host work, in no kernel, which the model leaves out"),
    Run("Llama-2-7B FP8, first token at 2048 input tokens", TRTLLM, "TP 1, batch 1, input 2048 tokens; the first-token latency",
        "36 ms (TensorRT-LLM v0.5)", 36e-3),
)


def export_llama(layers: int, decode: bool, folder: Path, shape: dict = LLAMA2_7B) -> Path:
    """A Llama of `shape` (Llama-2-7B's by default) with `layers` layers, exported on the meta
    device: inputs input_ids [batch, sequence] (prefill) or [batch, 1] with past.{i}.key/value
    [batch, heads, past_sequence, head size] (decode); outputs logits and the presents. Every
    initializer points at an absent file."""
    import onnx
    import onnx_ir as ir
    import torch
    import transformers
    from transformers import DynamicCache

    config = transformers.LlamaConfig(num_hidden_layers=layers, **shape)
    with torch.device("meta"):
        model = transformers.LlamaForCausalLM(config).eval()

    class Step(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids, *past):
            pairs = [(past[2 * i], past[2 * i + 1]) for i in range(len(past) // 2)]
            cache = DynamicCache(pairs, config=config) if pairs else DynamicCache(config=config)
            out = self.model(input_ids, past_key_values=cache, use_cache=True)
            return (out.logits, *[t for layer in out.past_key_values.layers for t in (layer.keys, layer.values)])

    heads, head_dim = shape["num_key_value_heads"], shape["hidden_size"] // shape["num_attention_heads"]
    batch, sequence, past_sequence = torch.export.Dim("batch"), torch.export.Dim("sequence"), torch.export.Dim("past_sequence")
    names = [f"past.{i}.{kv}" for i in range(layers) for kv in ("key", "value")] if decode else []
    past = [torch.empty(2, heads, 5, head_dim, device="meta") for _ in names]
    ids = torch.ones(2, 1 if decode else 8, dtype=torch.long, device="meta")
    shapes = {"input_ids": {0: batch} if decode else {0: batch, 1: sequence}, "past": [{0: batch, 2: past_sequence} for _ in names]}
    program = torch.onnx.export(Step().eval(), (ids, *past), dynamo=True, input_names=["input_ids", *names], optimize=False,
                                dynamic_shapes=(shapes["input_ids"], tuple(shapes["past"])) if names else (shapes["input_ids"],), verbose=False)  # fmt: skip
    offset = 0
    for value in program.model.graph.initializers.values():
        sizes = ir.Shape([int(d) for d in value.shape])
        length = _elements(sizes) * value.dtype.itemsize
        value.const_value = ir.ExternalTensor("absent.bin", offset, length, value.dtype, shape=sizes, name=value.name, base_dir=str(folder))
        offset += length
    path = folder / f"llama_{shape['hidden_size']}_{layers}layer_{'decode' if decode else 'prefill'}.onnx"
    onnx.save(ir.serde.serialize_model(program.model), path)
    return path


def _elements(shape) -> int:
    count = 1
    for dim in shape:
        count *= int(dim)
    return count


def times(path: Path, dims: dict, precision: str) -> tuple[float, float]:
    """(deployed bound, predicted) seconds of one run of the graph at `dims`, on the H100 SXM."""
    from onnx_roofline import analyze
    from onnx_roofline.views.deployed import INPLACE, deploy

    written = analyze(path, hw="h100", dims=dims, precision=precision, default_dims=True)
    if written.uncosted.count:
        raise RuntimeError(f"{path.name} at {dims}: {written.uncosted.message}")
    deployed = deploy(written, INPLACE)
    return deployed.totals.time_s, deployed.prediction.time_s


class Llama:
    """Llama-2-7B's figures at 32 layers from the 1- and 2-layer graphs."""

    def __init__(self, folder: Path):
        self.graphs = {(layers, decode): export_llama(layers, decode, folder) for layers in (1, 2) for decode in (False, True)}

    def figures(self, decode: bool, dims: dict) -> tuple[float, ...]:
        one, two = (times(self.graphs[layers, decode], dims, "fp8") for layers in (1, 2))
        return scaled(one, two, LLAMA2_7B_LAYERS)

    def prefill(self, batch: int, tokens: int) -> tuple[float, float]:
        return self.figures(False, {"batch": batch, "sequence": tokens})

    def generation(self, batch: int, isl: int, osl: int) -> tuple[float, float]:
        """Prefill, then OSL − 1 decode steps over caches of ISL to ISL + OSL − 2 tokens."""
        steps = osl - 1
        points = [self.figures(True, {"batch": batch, "past_sequence": isl + p}) for p in (0, (steps - 1) // 2, steps - 1)]
        decode = tuple(steps * (a + 4 * m + b) / 6 for a, m, b in zip(*points, strict=True))
        return tuple(p + d for p, d in zip(self.prefill(batch, isl), decode, strict=True))  # type: ignore[return-value]


def scaled(one: tuple[float, ...], two: tuple[float, ...], layers: int) -> tuple[float, ...]:
    """A figure at `layers` layers from the same figure at 1 and 2: T(1) + (layers − 1)·(T(2) − T(1))."""
    return tuple(a + (layers - 1) * (b - a) for a, b in zip(one, two, strict=True))


def resnet50(batch: int = 2048) -> tuple[float, float]:
    bound, predicted = times(REPO / "fixtures" / "resnet50_fp16.onnx", {"batch": batch}, "int8")
    return bound / batch, predicted / batch


def rows() -> list[Row]:
    with tempfile.TemporaryDirectory() as folder:
        llama = Llama(Path(folder))
        figures = [resnet50(), llama.generation(768, 128, 128), llama.generation(112, 128, 2048), llama.generation(48, 2048, 2048),
                   llama.generation(80, 2048, 128), llama.prefill(1, 128), llama.prefill(1, 2048)]  # fmt: skip
    return [Row(run, bound, predicted) for run, (bound, predicted) in zip(RUNS, figures, strict=True)]


def _seconds(value: float) -> str:
    from onnx_roofline.report.units import duration

    return duration(value)


def render(table: list[Row]) -> str:
    lines = [
        "# Validation: the bound and the predicted time against published measurements",
        "",
        "Generated by `python -m benchmarks.validate_published` (issue 40); `tests/test_validation.py` checks",
        "`benchmarks/validation.json`, this table's data. The **bound** is the deployed view's sum of per-kernel",
        "bounds at 100 % of the datasheet peaks (a floor: a measurement below it is a bug). The **predicted** time",
        "adds the H100 entry's achievable fractions (90 % of the HBM bandwidth, 75 % of the dense tensor-core peak, 53 %",
        "of the FP8 peak for FP8 GEMMs: DeepGEMM's published M = 4096 rows),",
        "GEMM wave quantization over 132 SMs, a 2 µs kernel floor and CUDA-graph launches",
        "([cost-model.md](cost-model.md#predicted-time)). Error = predicted / measured − 1; the prediction claims",
        f"±{TOLERANCE:.0%}, and each row says whether it holds.",
        "",
        "Graphs: Llama-2-7B from its public config ([config.json](" + LLAMA2_7B_CONFIG + ")), exported on torch's",
        "meta device with 1 and 2 layers (no weights; 32 layers = T(1) + 31·(T(2) − T(1))), costed in FP8 with an",
        "in-place KV cache; ResNet-50 is `fixtures/resnet50_fp16.onnx` costed in int8. All on `--hw h100` (H100 SXM).",
        "",
        "| run | source | configuration | published | measured | bound | predicted | error | within ±25 % |",
        "|---|---|---|---|---:|---:|---:|---:|---|",
    ]
    for row in table:
        run = row.run
        url, _, note = run.source.partition(" ")
        lines.append(f"| {run.name} | [{note.strip('()') or url}]({url}) | {run.configuration} | {run.published} | {_seconds(run.measured_s)} | "
                     f"{_seconds(row.bound_s)} | {_seconds(row.predicted_s)} | {row.error:+.0%} | {'yes' if row.within else 'no'} |")  # fmt: skip
    misses = [row for row in table if not row.within]
    if misses:
        lines += ["", "## Rows the prediction misses, and why", ""]
        lines += [f"- **{row.run.name}** ({row.error:+.0%}): {row.run.reason or 'not explained'}" for row in misses]
    lines += ["", "What the graphs leave out, each making the prediction shorter than the run: TensorRT-LLM's engines run",
              "attention in FP16 (`--use_gpt_attention_plugin float16`, with an FP8 KV cache) where the graph costs it at",
              "the FP8 peak (under 0.5 ms of the 2,048-token first token: 1.1 TFLOP of causal attention), the host's work per generation step",
              "(sampling, the static-batching benchmark's loop) is in no kernel, and the first-token row is TensorRT-LLM",
              "v0.5's, the throughput rows v0.6.1's."]
    lines += ["", "Every bound is below its measurement: " + ("yes" if all(r.bound_s <= r.run.measured_s for r in table) else "NO") + "."]
    return "\n".join(lines) + "\n"


def main() -> int:
    table = rows()
    DOC.write_text(render(table), encoding="utf-8")
    DATA.write_text(json.dumps([row.to_dict() for row in table], indent=2) + "\n", encoding="utf-8")
    for row in table:
        print(f"{row.run.name:<52} measured {_seconds(row.run.measured_s):>10}  bound {_seconds(row.bound_s):>10}  "
              f"predicted {_seconds(row.predicted_s):>10}  {row.error:+.0%}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
