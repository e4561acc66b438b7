"""Every fixture's analysis against its floor (onnx.load + infer_shapes), counted in CPU
instructions under valgrind rather than timed: a count does not move with the load of a shared
machine, where times of the same run differ by 30 % from one minute to the next, so a change of a
few percent shows, and the ratio to the floor is the same on any x86 machine.

    python benchmarks/bench_instructions.py                      # every fixture
    python benchmarks/bench_instructions.py --before /tmp/old    # also an older tree's package, side by side
    python benchmarks/bench_instructions.py fixtures/resnet50_fp32.onnx

Each figure is (instructions of 1 + N calls) − (instructions of 1 call), over N: imports and the
first call's warm-up cancel; N grows for a small model until the calls counted outweigh the few
million instructions by which one process's start-up differs from the next. valgrind runs a program ~50× slower: the whole table takes a few
minutes (two processes at a time)."""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.measure import prepare  # noqa: E402

CHILD = r"""
import sys
model, measure, calls, dims = sys.argv[1], sys.argv[2], int(sys.argv[3]), dict(d.split("=") for d in sys.argv[4:])
if measure == "floor":
    import onnx
    for _ in range(calls):
        onnx.shape_inference.infer_shapes(onnx.load(model, load_external_data=False))
else:
    from onnx_roofline import analyze
    for _ in range(calls):
        analyze(model, hw="h100", dims={k: int(v) for k, v in dims.items()})
"""


def fixture_dims(path: Path) -> list[str]:
    """The dims every figure of docs/performance.md binds: GPT-2 at 1,024 tokens (decode: one new
    token after 1,023), ResNet-50 at batch 1."""
    if "decode" in path.name:
        return ["batch=1", "past_sequence=1023"]
    if "prefill" in path.name:
        return ["batch=1", "sequence=1024"]
    return ["batch=1"]


def instructions(tree: Path, model: Path, measure: str, calls: int) -> int:
    """Instructions of a process that makes `calls` calls of the measure, with `tree`'s package."""
    command = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null", sys.executable, "-c", CHILD,
               str(model), measure, str(calls), *fixture_dims(model)]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0"}
    result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tree, check=True)
    return int(re.search(r"I\s+refs:\s+([\d,]+)", result.stderr).group(1).replace(",", ""))


def per_call(tree: Path, model: Path, measure: str, calls: int) -> float:
    """Instructions per call; counted again with more calls where `calls` of them are few beside
    the variation of a process's start-up (a few million instructions of its billion and more)."""
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        one, many = pool.map(lambda n: instructions(tree, model, measure, n), (1, 1 + calls))
    count = (many - one) / calls
    if count * calls < MIN_COUNTED and calls < MAX_CALLS:
        return per_call(tree, model, measure, min(MAX_CALLS, int(MIN_COUNTED / max(count, 1e6)) + 1))
    return count


MIN_COUNTED = 500e6  # instructions counted per figure, at least
MAX_CALLS = 60


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="*", type=Path, help="fixtures to count (default: every fixture)")
    parser.add_argument("--calls", type=int, default=2, help="calls counted per figure (default: 2)")
    parser.add_argument("--before", type=Path, help="an older tree, counted too")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("bench_instructions: valgrind is not installed")
    prepare(args.before)
    models = args.models or sorted((REPO / "fixtures").glob("*.onnx"))
    trees = [(args.before, "before"), (REPO, "analysis")] if args.before else [(REPO, "analysis")]
    print(
        f"{'fixture':36s} {'floor':>8s}"
        + "".join(f" {label:>9s} {'ratio':>6s}" for _, label in trees)
        + "   (million instructions per call)"
    )
    for model in models:
        floor = per_call(REPO, model, "floor", args.calls)
        row = f"{model.name:36s} {floor / 1e6:8.1f}"
        for tree, _ in trees:
            count = per_call(tree, model, "analysis", args.calls)
            row += f" {count / 1e6:9.1f} {count / floor:5.2f}x"
        print(row, flush=True)
    print("target (issue 12/16): every analysis within 3x of its floor")


if __name__ == "__main__":
    main()
