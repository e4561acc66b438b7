"""Time the analysis of a fixture against its floor, onnx.load + onnx.shape_inference.infer_shapes,
and report the ratio and peak memory. Figures, not assertions: run it and read the output.

    python benchmarks/bench_analysis.py [fixtures/gpt2_prefill_fp16.onnx] [--dim batch=1 --dim sequence=1024]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
import tracemalloc
from collections.abc import Callable

import onnx

from onnx_roofline import analyze
from onnx_roofline.dims import parse_dim


def alternating(functions: dict[str, Callable[[], object]], repeats: int, rounds: int = 3) -> dict[str, list[float]]:
    """Seconds per call of each function: `rounds` rounds, each timing every function `repeats`
    times in a row (warm, as a loop of its own would be). A drift in the machine's speed (a shared
    VM's is large) then reaches all of them alike, and their ratio holds."""
    for fn in functions.values():
        fn()  # warm-up: imports, schema caches
    times: dict[str, list[float]] = {label: [] for label in functions}
    for _ in range(rounds):
        for label, fn in functions.items():
            for _ in range(repeats):
                gc.collect()
                start = time.perf_counter()
                fn()
                times[label].append(time.perf_counter() - start)
    return times


def peak_memory(fn) -> int:
    gc.collect()
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", nargs="?", default="fixtures/gpt2_prefill_fp16.onnx")
    parser.add_argument("--dim", action="append", default=None)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    dims = dict(parse_dim(d) for d in (args.dim or ["batch=1", "sequence=1024"]))

    def floor():
        onnx.shape_inference.infer_shapes(onnx.load(args.model, load_external_data=False))

    def analysis():
        return analyze(args.model, hw="h100", dims=dims)

    def analysis_and_json():
        return analysis().to_dict()

    times = alternating({"floor": floor, "analysis": analysis, "json": analysis_and_json}, args.repeats)
    medians = {label: statistics.median(values) for label, values in times.items()}
    minimums = {label: min(values) for label, values in times.items()}
    report = analysis()
    print(f"model                {args.model}  ({report.model.node_count} nodes, shapes: {report.model.shape_inference})")
    rows = (("floor (load+infer)", "floor"), ("analysis", "analysis"), ("analysis + to_dict", "json"))
    for title, label in rows:
        ratio = "" if label == "floor" else f"   ratio: median {medians[label] / medians['floor']:5.2f}x, min {minimums[label] / minimums['floor']:5.2f}x"
        print(f"{title:20s} median {medians[label] * 1e3:7.1f} ms, min {minimums[label] * 1e3:7.1f} ms{ratio}")
    print(f"                     3 rounds of {args.repeats} runs each; target: analysis within 3x of the floor")
    print(f"peak Python memory   floor {peak_memory(floor) / 2**20:6.1f} MiB, onnx-roofline {peak_memory(analysis_and_json) / 2**20:6.1f} MiB (tracemalloc)")


if __name__ == "__main__":
    main()
