"""What a record costs to build, and what that weighs in a million-node analysis: the numbers behind
`onnx_roofline/records.py` (README, "Dependencies"). Figures, not assertions: run it and read them.

    python benchmarks/bench_records.py [--count 1000000] [--rounds 5]
    python benchmarks/bench_records.py --chain 1000000 --before /tmp/before   # also the CLI, two trees

Constructions, in this process, a million of each as the walk builds them (a TensorInfo per output,
a NodeResult per node), the median of `--rounds` runs in CPU time (a shared machine steals wall time):
- `dataclass`: the package's `@record`, `dataclasses.dataclass(frozen=True, slots=True)`;
- `from source`: the former `@record`, the same dataclass with an `__init__` compiled from a source
  string that stores each field through its slot's descriptor (no `object.__setattr__`);
- `msgspec`: a frozen `msgspec.Struct` of the same fields (where msgspec is installed), construction
  alone. Not a drop-in: no per-field `compare=False` or `init=False` (a TensorInfo's derived fields,
  a NodeResult's graph node left out of equality), and `dataclasses.replace` and `fields` do not apply.
With `--json MODEL`, `render_json` of the model's two views, in a process per tree; with `--chain N`,
the command line on a generated chain of N nodes (`--format json -o`), each run a process of its own
(benchmarks/measure.py); this tree (or `--after DIR`) and the `--before DIR` one taking turns, the
median CPU time of each.

    python benchmarks/bench_records.py --no-constructions --json fixtures/gpt2_prefill_fp32.onnx --before /tmp/before"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import compile_package, prepare, run  # noqa: E402

from onnx_roofline.costs.cost import Cost
from onnx_roofline.costs.roofline import Placement
from onnx_roofline.model.tensors import TensorInfo
from onnx_roofline.report.model import OK, NodeResult

MODELS = Path(__file__).resolve().parent / "models.py"
SCRIPT = Path(sys.executable).parent / "onnx-roofline"
CLI = (
    [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "onnx_roofline"]
)  # not -m: it puts the working folder first


def from_source(cls: type) -> type:
    """The former `@record`: a copy of the dataclass `cls` with an `__init__` built from source
    that stores through the slot descriptors, then runs `__post_init__`."""
    copy = dataclasses.make_dataclass(
        cls.__name__,
        [
            (f.name, f.type, dataclasses.field(default=f.default, init=f.init, repr=f.repr, compare=f.compare))
            for f in dataclasses.fields(cls)
        ],
        frozen=True,
        slots=True,
        namespace={"__post_init__": cls.__post_init__} if hasattr(cls, "__post_init__") else {},
    )
    namespace: dict[str, object] = {}
    parameters, stores = [], []
    for field in dataclasses.fields(copy):
        if not field.init:
            continue
        namespace[f"_set_{field.name}"] = getattr(copy, field.name).__set__
        if field.default is dataclasses.MISSING:
            parameters.append(field.name)
        else:
            namespace[f"_default_{field.name}"] = field.default
            parameters.append(f"{field.name}=_default_{field.name}")
        stores.append(f"    _set_{field.name}(self, {field.name})")
    post_init = ["    self.__post_init__()"] if hasattr(copy, "__post_init__") else []
    exec("\n".join([f"def __init__(self, {', '.join(parameters)}):", *stores, *post_init]), namespace)
    copy.__init__ = namespace["__init__"]  # type: ignore[misc]
    return copy


def msgspec_struct(cls: type) -> type | None:
    """A frozen msgspec Struct of `cls`'s constructor fields (None without msgspec). Construction
    alone: a TensorInfo's derived `is_known` and `numel` are not computed."""
    try:
        import msgspec
    except ImportError:
        return None
    specs = [
        (f.name, object) if f.default is dataclasses.MISSING else (f.name, object, f.default)
        for f in dataclasses.fields(cls)
        if f.init
    ]
    return msgspec.defstruct(cls.__name__, specs, frozen=True)


def constructions(count: int) -> dict[str, Callable[[type], float]]:
    """Seconds to build `count` records of each kind, as the walk calls the constructor."""
    shape = (1, 64)
    cost, placement = Cost(2 * 64 * 64, 0, 64 * 4, 64 * 4), Placement(8.0, 295.0, "memory", 1e-9, 1e-10, 1e-9)
    inputs, outputs = (
        (TensorInfo("x", shape, "float32"), TensorInfo("w", (64, 64), "float32")),
        (TensorInfo("y", shape, "float32"),),
    )

    def tensors(cls: type) -> float:
        start = time.process_time()
        for _ in range(count):
            cls("t", shape, "float32")
        return time.process_time() - start

    def nodes(cls: type) -> float:
        start = time.process_time()
        for index in range(count):
            cls(
                index,
                "/layers.0/MatMul",
                "MatMul",
                "",
                inputs,
                outputs,
                OK,
                None,
                cost,
                4096,
                "matrix",
                "fp32",
                1e12,
                placement,
                None,
                False,
            )
        return time.process_time() - start

    return {"TensorInfo": tensors, "NodeResult": nodes}


def bench_constructions(count: int, rounds: int) -> None:
    kinds = {"TensorInfo": TensorInfo, "NodeResult": NodeResult}
    variants = {
        name: {"dataclass": cls, "from source": from_source(cls), "msgspec": msgspec_struct(cls)}
        for name, cls in kinds.items()
    }
    timers = constructions(count)
    print(f"{count:,} constructions, CPU time, median of {rounds} rounds (taking turns)")
    for name, by_variant in variants.items():
        times: dict[str, list[float]] = {variant: [] for variant, cls in by_variant.items() if cls is not None}
        for _ in range(rounds):
            for variant in times:
                times[variant].append(timers[name](by_variant[variant]))
        cells = "  ".join(
            f"{variant} {statistics.median(t):.2f} s ({statistics.median(t) / count * 1e9:.0f} ns)"
            for variant, t in times.items()
        )
        print(f"  {name:<11} {cells}")


def bench_chain(nodes: int, rounds: int, trees: dict[str, dict[str, str] | None]) -> None:
    """The command line on a chain of `nodes` nodes, `--format json` to a file, in each tree."""
    with tempfile.TemporaryDirectory(prefix="bench-records-") as folder:
        model = Path(folder) / f"chain-{nodes}.onnx"
        subprocess.run([sys.executable, str(MODELS), "chain", str(nodes), str(model)], check=True)
        command = [*CLI, str(model), "--dim=batch=1", "--format=json", "-o", str(Path(folder) / "out.json")]
        runs: dict[str, list] = {tree: [] for tree in trees}
        for _ in range(rounds):
            for tree, env in trees.items():
                runs[tree].append(run(command, env=env))
        print(f"chain of {nodes:,} nodes, the CLI with --format json, median of {rounds} rounds (taking turns)")
        for tree, measured in runs.items():
            wall, cpu = statistics.median(r.wall_s for r in measured), statistics.median(r.cpu_s for r in measured)
            each = ", ".join(f"{r.cpu_s:.1f}" for r in measured)
            print(f"  {tree:<10} CPU {cpu:.2f} s ({each})  wall {wall:.2f} s")


JSON_TIMER = """
import gc, statistics, sys, time
from onnx_roofline import analyze
from onnx_roofline.report.serialize import render_json
from onnx_roofline.views.deployed import deploy
written = analyze(sys.argv[1], dims={"batch": 1}, default_dims=True)
deployed = deploy(written, "copy")
for report, other in ((written, deployed), (deployed, written)):
    times = []
    for _ in range(int(sys.argv[2])):
        gc.collect()
        start = time.process_time()
        render_json(report, other)
        times.append(time.process_time() - start)
    print(statistics.median(times))
"""


def bench_json(model: str, rounds: int, trees: dict[str, dict[str, str] | None]) -> None:
    """render_json of `model`'s two views (batch 1, other dims their defaults), in each tree: a
    process per tree and round, each writing each view `rounds` times (the median kept)."""
    medians: dict[str, list[list[float]]] = {tree: [] for tree in trees}
    for _ in range(rounds):
        for tree, env in trees.items():
            command = [sys.executable, "-c", JSON_TIMER, str(Path(model).resolve()), str(rounds)]
            out = subprocess.run(
                command, env=env, cwd=tempfile.gettempdir(), capture_output=True, text=True, check=True
            )
            medians[tree].append([float(line) for line in out.stdout.split()])
    print(f"render_json of {Path(model).name}, CPU time, median of {rounds} × {rounds} (taking turns)")
    for tree, views in medians.items():
        written, deployed = (statistics.median(view) for view in zip(*views, strict=True))
        print(f"  {tree:<10} written {written * 1e3:.1f} ms  deployed {deployed * 1e3:.1f} ms")


def _tree(folder: str | None) -> dict[str, str] | None:
    """The environment that runs the onnx_roofline package in `folder` (None: this tree's)."""
    return None if folder is None else {**os.environ, "PYTHONPATH": str(Path(folder).resolve())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=1_000_000, help="records of each kind built per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--chain", type=int, default=0, metavar="N", help="also time the CLI on a chain of N nodes")
    parser.add_argument("--json", metavar="MODEL", help="also time render_json on MODEL's report")
    parser.add_argument("--before", metavar="DIR", help="also the onnx_roofline package in DIR (an older tree)")
    parser.add_argument("--after", metavar="DIR", help="the onnx_roofline package in DIR instead of this tree's")
    parser.add_argument("--no-constructions", action="store_true", help="only --chain and --json")
    args = parser.parse_args()
    if not args.no_constructions:
        bench_constructions(args.count, args.rounds)
    trees = {"after" if args.after else "this tree": _tree(args.after)}
    if args.before:
        trees["before"] = _tree(args.before)
    if args.chain or args.json:
        prepare(args.before)
        if args.after:
            compile_package(args.after)
    if args.json:
        bench_json(args.json, args.rounds, trees)
    if args.chain:
        bench_chain(args.chain, args.rounds, trees)


if __name__ == "__main__":
    main()
