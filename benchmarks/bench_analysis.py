"""Time the analysis of a fixture against its floor, onnx.load + onnx.shape_inference.infer_shapes,
and report the ratio and peak memory. Figures, not assertions: run it and read the output.

    python benchmarks/bench_analysis.py [fixtures/gpt2_prefill_fp16.onnx] [--dim batch=1 --dim sequence=1024]

Each measurement runs in a process of its own, and the three (floor, analysis, analysis +
to_dict) take turns for a few rounds: one run leaves the allocator in a state that slows or
speeds the next (the floor measured after an analysis in the same process reads up to 30 %
slower), and a shared machine's speed drifts; the minimum over rounds holds against both."""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import time
import tracemalloc

import onnx

from onnx_roofline import Sizing, analyze
from onnx_roofline.shapes.dims import parse_dim

MEASURES = {"floor": "floor (load+infer)", "analysis": "analysis", "json": "analysis + to_dict"}


def timed(fn, repeats: int) -> list[float]:
    """Seconds per call of `fn`, `repeats` calls in a row after a warm-up (imports, schema caches)."""
    fn()
    times = []
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def measure(name: str, model: str, dims: dict[str, int], repeats: int) -> dict:
    """Seconds per call of one measure, run `repeats` times in a row after a warm-up (imports,
    schema caches), and its peak traced memory."""
    fn = {
        "floor": lambda: onnx.shape_inference.infer_shapes(onnx.load(model, load_external_data=False)),
        "analysis": lambda: analyze(model, hw="h100", sizing=Sizing(dims=dims)),
        "json": lambda: analyze(model, hw="h100", sizing=Sizing(dims=dims)).to_dict(),
    }[name]
    times = timed(fn, repeats)
    gc.collect()
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {"times": times, "peak": peak}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", nargs="?", default="fixtures/gpt2_prefill_fp16.onnx")
    parser.add_argument("--dim", action="append", default=None)
    parser.add_argument("--repeats", type=int, default=10, help="runs per measure and round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--measure", choices=MEASURES, help=argparse.SUPPRESS)  # one measure, in this process
    args = parser.parse_args()
    dim_args = args.dim or ["batch=1", "sequence=1024"]
    dims = dict(parse_dim(d) for d in dim_args)
    if args.measure:
        print(json.dumps(measure(args.measure, args.model, dims, args.repeats)))
        return

    times: dict[str, list[float]] = {name: [] for name in MEASURES}
    peaks: dict[str, int] = {}
    for _ in range(args.rounds):
        for name in MEASURES:
            command = [sys.executable, __file__, args.model, "--measure", name, "--repeats", str(args.repeats)]
            command += [f"--dim={d}" for d in dim_args]
            result = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)
            times[name] += result["times"]
            peaks[name] = result["peak"]
    medians = {name: statistics.median(values) for name, values in times.items()}
    minimums = {name: min(values) for name, values in times.items()}
    report = analyze(args.model, hw="h100", sizing=Sizing(dims=dims))
    print(
        f"model                {args.model}  ({report.model.node_count} nodes, shapes: {report.model.shape_inference})"
    )
    for name, title in MEASURES.items():
        ratio = (
            ""
            if name == "floor"
            else f"   ratio: median {medians[name] / medians['floor']:5.2f}x, min {minimums[name] / minimums['floor']:5.2f}x"
        )
        print(f"{title:20s} median {medians[name] * 1e3:7.1f} ms, min {minimums[name] * 1e3:7.1f} ms{ratio}")
    print(
        f"                     {args.rounds} rounds of {args.repeats} runs each; target: analysis within 3x of the floor"
    )
    print(
        f"peak Python memory   floor {peaks['floor'] / 2**20:6.1f} MiB, onnx-roofline {peaks['json'] / 2**20:6.1f} MiB (tracemalloc)"
    )


if __name__ == "__main__":
    main()
