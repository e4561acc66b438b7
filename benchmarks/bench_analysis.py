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

import onnx

from onnx_roofline import analyze
from onnx_roofline.dims import parse_dim


def timed(fn, repeats: int) -> list[float]:
    fn()  # warm-up: imports, schema caches
    times = []
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
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

    def ours():
        report = analyze(args.model, hw="h100", dims=dims)
        report.to_dict()

    floor_times, our_times = timed(floor, args.repeats), timed(ours, args.repeats)
    floor_median, our_median = statistics.median(floor_times), statistics.median(our_times)
    floor_min, our_min = min(floor_times), min(our_times)
    report = analyze(args.model, hw="h100", dims=dims)
    print(f"model                {args.model}  ({report.model.node_count} nodes, shapes: {report.model.shape_inference})")
    print(f"floor (load+infer)   median {floor_median * 1e3:8.1f} ms, min {floor_min * 1e3:8.1f} ms over {args.repeats} runs")
    print(f"onnx-roofline        median {our_median * 1e3:8.1f} ms, min {our_min * 1e3:8.1f} ms (analysis + to_dict)")
    print(f"ratio                median {our_median / floor_median:8.2f}x, min {our_min / floor_min:8.2f}x  (target: within 3x)")
    print(f"peak Python memory   floor {peak_memory(floor) / 2**20:6.1f} MiB, onnx-roofline {peak_memory(ours) / 2**20:6.1f} MiB (tracemalloc)")


if __name__ == "__main__":
    main()
