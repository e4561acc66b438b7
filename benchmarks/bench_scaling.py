"""Time and peak memory of the whole command line against graph size: generated chains of 1,000 to
1,000,000 nodes, and Llama-shaped decoders (7B, 70B) whose weights are declared but absent, each
analyzed with `--format json` to a file. Figures, not assertions: run it and read them.

    python benchmarks/bench_scaling.py [--sizes 1000,10000,100000,300000,1000000] [--rounds 2]
    python benchmarks/bench_scaling.py --decoders-only

Each run is a process of its own (`onnx-roofline MODEL --dim batch=1 --format json -o out.json`),
measured by os.wait4: wall time, CPU time, peak RSS. Sizes take turns for `--rounds` rounds; the
minimum time is kept. The log-log slope between successive sizes says how time and memory grow
(1.0: linear); memory's slope is of the peak RSS above the smallest run's (the interpreter and its
imports), which is what the graph costs."""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import mib, prepare, run, summary  # noqa: E402

SCRIPT = Path(sys.executable).parent / "onnx-roofline"
CLI = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "onnx_roofline"]
MODELS = Path(__file__).resolve().parent / "models.py"
DECODER_DIMS = {"batch": 1, "past_sequence": 4095}


def generate(kind: str, size: str, folder: Path) -> Path:
    path = folder / f"{kind}-{size}.onnx"
    if not path.exists():
        subprocess.run([sys.executable, str(MODELS), kind, size, str(path)], check=True)
    return path


def slope(x0: float, y0: float, x1: float, y1: float) -> float | None:
    return math.log(y1 / y0) / math.log(x1 / x0) if min(x0, y0, x1, y1) > 0 and x1 != x0 else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000,100000,300000,1000000", help="chain lengths, comma-separated")
    parser.add_argument("--decoders", default="7b,70b", help="decoder shapes (benchmarks/models.py DECODERS), or ''")
    parser.add_argument("--decoders-only", action="store_true")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--work", help="folder for the generated graphs and reports (default: a temporary one)")
    parser.add_argument(
        "--before",
        metavar="DIR",
        help="also run, interleaved, the onnx_roofline package in DIR (a copy of an older tree)",
    )
    parser.add_argument(
        "--before-max", type=int, default=10**9, metavar="N", help="largest chain the --before tree runs (default: all)"
    )
    args = parser.parse_args()
    sizes = [] if args.decoders_only else [int(s) for s in args.sizes.split(",") if s]
    decoders = [d for d in args.decoders.split(",") if d]
    prepare(args.before)
    with tempfile.TemporaryDirectory(prefix="bench-scaling-") as temporary:
        folder = Path(args.work or temporary)
        folder.mkdir(parents=True, exist_ok=True)
        jobs = {}
        for size in sizes:
            model = generate("chain", str(size), folder)
            jobs[f"chain {size:,}"] = (
                size,
                [*CLI, str(model), "--dim=batch=1", "--format=json", "-o", str(folder / f"chain-{size}.json")],
            )
        for name in decoders:
            model = generate("decoder", name, folder)
            dims = [f"--dim={k}={v}" for k, v in DECODER_DIMS.items()]
            jobs[f"decoder {name}"] = (
                None,
                [*CLI, str(model), *dims, "--format=json", "-o", str(folder / f"decoder-{name}.json")],
            )
        trees = {"": None}
        if args.before:
            trees["before: "] = {**os.environ, "PYTHONPATH": str(Path(args.before).resolve())}
        runs: dict[str, list] = {tree + name: [] for tree in trees for name in jobs}
        for round_index in range(args.rounds):
            for name, (nodes, command) in jobs.items():
                for tree, env in trees.items():
                    if env is None or (nodes or 0) <= args.before_max:
                        runs[tree + name].append(run(command, env=env))
            print(f"round {round_index + 1} of {args.rounds} done", flush=True)
        for tree in trees:
            if tree:
                report(
                    tree, jobs, {name: summary(runs[tree + name]) for name in jobs if runs[tree + name]}, args.rounds
                )
        report("", jobs, {name: summary(runs[name]) for name in jobs}, args.rounds)


def report(tree: str, jobs: dict, figures: dict, rounds: int) -> None:
    """The table of one tree's figures: time, memory and their slopes between successive sizes."""
    base = min((f["rss_max"] for n, f in figures.items() if n.startswith("chain")), default=0)
    print(
        f"\n{tree + 'graph':<18} {'nodes':>10} {'wall min':>10} {'CPU min':>10} {'peak RSS':>10} {'JSON':>10} {'slope t':>8} {'slope RSS':>9}"
    )
    previous = None
    for name, (nodes, _) in jobs.items():
        if name not in figures:
            continue
        f = figures[name]
        output = Path(jobs[name][1][-1])
        json_size = mib(output.stat().st_size) if output.exists() else "-"
        if nodes is None:
            from_model = _node_count(jobs[name][1][len(CLI)])
            print(
                f"{name:<18} {from_model:>10,} {f['wall_min']:>8.2f} s {f['cpu_min']:>8.2f} s {mib(f['rss_max']):>10} {json_size:>10}"
            )
            continue
        time_slope = rss_slope = None
        if previous is not None:
            time_slope = slope(previous[0], previous[1], nodes, f["cpu_min"])
            rss_slope = (
                slope(previous[0], previous[2] - base, nodes, f["rss_max"] - base) if previous[2] > base else None
            )
        print(
            f"{name:<18} {nodes:>10,} {f['wall_min']:>8.2f} s {f['cpu_min']:>8.2f} s {mib(f['rss_max']):>10} {json_size:>10}"
            f" {'' if time_slope is None else f'{time_slope:.2f}':>8} {'' if rss_slope is None else f'{rss_slope:.2f}':>9}"
            + ("" if f["ok"] else "  (failed)")
        )
        previous = (nodes, f["cpu_min"], f["rss_max"])
    print(
        f"{tree}{rounds} interleaved rounds; slopes of log(CPU time) and log(RSS above the smallest chain's) between successive sizes"
    )


def _node_count(path: str) -> int:
    import onnx

    return len(onnx.load(path, load_external_data=False).graph.node)


if __name__ == "__main__":
    main()
