"""Where a plain `onnx-roofline MODEL` spends its time, stage by stage, in one process: load (read
and validate the protobuf), conformance (would a runtime load it: model/conformance.py; from
analysis.BESIDE_NODES nodes on, the wait for the child that checks it beside the rest), shapes
(the shape engine), costs (the walk that costs each node), the rest of the analysis (binding the
dims, the runnable checks, the report's assembly), views (the deployed view and its prediction,
which every format shows beside the written one) and report (the table, or with `--format json`
the JSON text as `--format json -o FILE` streams it). Figures, not assertions: a change that slows
one stage shows in its share. The peak RSS of the process is printed last.

    python benchmarks/bench_stages.py [fixtures/gpt2_prefill_fp32_torchscript.onnx] [--dim sequence=128] [--repeats 10]
    python benchmarks/bench_stages.py /tmp/chain-1000000.onnx --dim batch=1 --format json --repeats 1   # bench_scaling's graph

Each stage is timed by wrapping the function the analysis calls for it (its name in
onnx_roofline.analysis), summed over its calls in one run; a run is analyze + deploy +
render_table (or iter_json), after one warm-up (imports, schema caches); the minimum over the
repeats is printed per stage, with its share of the minimum total. As the command line, the views
stage plans the deployed view only up to OTHER_VIEW_NODES nodes. Start-up (imports) is bench_cli.py's."""

from __future__ import annotations

import argparse
import contextlib
import resource
import time
from collections import defaultdict

from onnx_roofline import Sizing, analysis
from onnx_roofline.report.serialize import iter_json
from onnx_roofline.report.table import render_table
from onnx_roofline.shapes.dims import parse_dim
from onnx_roofline.views.deployed import deploy
from onnx_roofline.views.public import OTHER_VIEW_NODES

STAGES = {
    "load": ("parsed", "validated"),
    "conformance": ("conformance",),
    "shapes": ("infer",),
}  # their functions in analysis


def timed(spent: dict[str, float], stage: str, fn):
    """`fn`, its seconds added to spent[stage] on each call."""

    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[stage] += time.perf_counter() - start

    return wrapper


def waited(spent: dict[str, float], stage: str, beside):
    """`beside`, the wait for its child's result added to spent[stage]: a large graph's conformance
    check runs in a child (analysis.BESIDE_NODES), and what it costs this process is that wait."""

    @contextlib.contextmanager
    def wrapper(*args):
        with beside(*args) as result:
            yield timed(spent, stage, result)

    return wrapper


def one_run(model: str, dims: dict[str, int], spent: dict[str, float], json: bool = False) -> None:
    start = time.perf_counter()
    report = analysis.analyze(model, hw="h100", sizing=Sizing(dims=dims))
    spent["analysis"] += time.perf_counter() - start
    start = time.perf_counter()
    deployed = deploy(report) if len(report.nodes) <= OTHER_VIEW_NODES else None
    spent["views"] += time.perf_counter() - start
    start = time.perf_counter()
    if json:
        for _ in iter_json(report, other=deployed):  # written nowhere: the text is the stage's work
            pass
    else:
        render_table(report, other=deployed)
    spent["report"] += time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", nargs="?", default="fixtures/gpt2_prefill_fp32_torchscript.onnx")
    parser.add_argument("--dim", action="append", default=None)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument(
        "--format", choices=("table", "json"), default="table", help="the report stage: the table, or the JSON text"
    )
    args = parser.parse_args()
    dims = dict(parse_dim(d) for d in args.dim or ["batch=1", "sequence=128"])
    spent: dict[str, float] = defaultdict(float)
    for stage, names in STAGES.items():
        for name in names:
            setattr(analysis, name, timed(spent, stage, getattr(analysis, name)))
    analysis.beside = waited(spent, "conformance", analysis.beside)
    analysis._Walk.rows = timed(spent, "costs", analysis._Walk.rows)
    one_run(args.model, dims, spent, args.format == "json")  # warm-up
    runs = []
    for _ in range(args.repeats):
        spent.clear()
        one_run(args.model, dims, spent, args.format == "json")
        inner = sum(spent[stage] for stage in (*STAGES, "costs"))
        runs.append(
            {
                **{stage: spent[stage] for stage in (*STAGES, "costs")},
                "rest of the analysis": spent["analysis"] - inner,
                "views": spent["views"],
                "report": spent["report"],
            }
        )
    best = {stage: min(run[stage] for run in runs) for stage in runs[0]}
    total = min(sum(run.values()) for run in runs)
    bound = ", ".join(f"{k}={v}" for k, v in dims.items())
    print(f"{args.model} ({bound}): {total * 1e3:.1f} ms a run, min of {args.repeats}")
    for stage, seconds in best.items():
        print(f"  {stage:22s} {seconds * 1e3:7.1f} ms  {seconds / total:6.1%}")
    print(f"  peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MiB")  # Linux: ru_maxrss in KiB


if __name__ == "__main__":
    main()
