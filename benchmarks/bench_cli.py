"""The whole command line, end to end, against onnx-tool 1.0.1 on the same files and shapes, and
the start-up of `onnx-roofline` against its floor. Figures, not assertions: run it and read them.

    python benchmarks/bench_cli.py --install-onnx-tool          # once: onnx-tool in its own venv
    python benchmarks/bench_cli.py [--rounds 3] [--models resnet50,gpt2_prefill_ts,...]
    python benchmarks/bench_cli.py --startup-only

onnx-tool needs the weights (it folds and evaluates with them), the fixtures have none: each model
is copied into a temporary folder with synthesized weights in an external data file beside it, as
`verify` synthesizes them (onnx_roofline.commands.verify.weights). Both tools read that copy: onnx-roofline
never opens the data file, onnx-tool loads it. onnx-tool runs as its command line does
(`onnx_tool.model_profile`, the per-node table written to a file), with the same input shapes
(given as arrays of the graph's input dtypes; its `-d` flag knows only f32 and int32).
onnx-roofline runs as `onnx-roofline MODEL --dim ... -o table.txt`.

Each run is a process of its own, measured by os.wait4 (wall, CPU, peak RSS of that process);
the tools and models take turns for `--rounds` rounds and the minimum is kept: the ratio of
minimums holds against a shared machine's drift. Start-up: `onnx-roofline --version`; the floor,
a process that only imports onnx, loads the graph (no weights) and runs ONNX's shape inference;
and the CLI on ResNet-50. `python -X importtime` shows what the CLI imports for a table.

The CLI measured is the one beside the python that runs this script: run it with the python of a
venv where `pip install .` put the package to measure what a user gets (the editable install of
a checkout adds its import finder and, where bytecode is not written, compiles every module)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import mib, prepare, run, summary  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
ONNX_TOOL_VENV = Path(tempfile.gettempdir()) / "onnx-roofline-bench" / "venv-onnx-tool"
ONNX_TOOL = "onnx-tool==1.0.1"
SEQUENCE, PAST = 128, 127

# name: (fixture, dims for onnx-roofline); the shapes onnx-tool gets follow from the same dims
MODELS = {
    "resnet50": ("resnet50_fp32.onnx", {"batch": 1}),
    "gpt2_prefill_ts": ("gpt2_prefill_fp32_torchscript.onnx", {"batch": 1, "sequence": SEQUENCE}),
    "gpt2_decode_ts": ("gpt2_decode_fp32_torchscript.onnx", {"batch": 1, "past_sequence": PAST}),
    "gpt2_prefill_dynamo": ("gpt2_prefill_fp32.onnx", {"batch": 1, "sequence": SEQUENCE}),
    "gpt2_decode_dynamo": ("gpt2_decode_fp32.onnx", {"batch": 1, "past_sequence": PAST}),
}

ONNX_TOOL_DRIVER = """
import sys, numpy as np, onnx, onnx_tool
model, out, shapes = sys.argv[1], sys.argv[2], eval(sys.argv[3])
inputs = {name: np.zeros(shape, dtype=np.dtype(dtype)) for name, (shape, dtype) in shapes.items()}
onnx_tool.model_profile(model, inputs, save_profile=out)
"""

FLOOR = """
import sys, onnx
model = onnx.load(sys.argv[1], load_external_data=False)
onnx.shape_inference.infer_shapes(model, data_prop=True)
"""


def install_onnx_tool(where: Path) -> None:
    if not (where / "bin" / "python").exists():
        print(f"creating {where}")
        venv.create(where, with_pip=True)
    subprocess.run([str(where / "bin" / "python"), "-m", "pip", "install", "-q", ONNX_TOOL], check=True)
    print(f"{ONNX_TOOL} installed in {where}")


WITH_WEIGHTS = r"""
import sys, onnx
from onnx_roofline.commands.verify.weights import materialize
fixture, target, location = sys.argv[1:]
full = materialize(onnx.load(fixture, load_external_data=False), None).model
onnx.save_model(full, target, save_as_external_data=True, all_tensors_to_one_file=True, location=location, size_threshold=1024)
"""


def with_weights(fixture: Path, folder: Path) -> Path:
    """A copy of the fixture with synthesized weights in `<name>.data` beside it, made in a process
    of its own: a child's peak RSS (os.wait4) counts what its parent held when it forked, so the
    benchmark itself must never hold the weights."""
    target = folder / fixture.name
    if not target.exists():
        subprocess.run(
            [sys.executable, "-c", WITH_WEIGHTS, str(fixture), str(target), f"{fixture.stem}.data"], check=True
        )
    return target


def input_shapes(model_path: Path, dims: dict[str, int]) -> dict[str, tuple[list[int], str]]:
    """Each graph input's shape at `dims` and numpy dtype, for onnx-tool."""
    import onnx
    from onnx import helper

    model = onnx.load(model_path, load_external_data=False)
    weights = {t.name for t in model.graph.initializer}
    shapes = {}
    for value in model.graph.input:
        if value.name in weights:
            continue
        tensor = value.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else dims[d.dim_param] for d in tensor.shape.dim]
        shapes[value.name] = (shape, helper.tensor_dtype_to_np_dtype(tensor.elem_type).name)
    return shapes


SCRIPT = Path(sys.executable).parent / "onnx-roofline"  # the installed command; `python -m onnx_roofline` elsewhere
CLI = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "onnx_roofline"]


def roofline_command(model: Path, dims: dict[str, int], out: Path, *options: str) -> list[str]:
    return [*CLI, str(model), *[f"--dim={k}={v}" for k, v in dims.items()], *options, "-o", str(out)]


def compare(args: argparse.Namespace, folder: Path) -> list[dict]:
    python = ONNX_TOOL_VENV if args.onnx_tool_venv is None else Path(args.onnx_tool_venv)
    tool_python = python / "bin" / "python"
    if not tool_python.exists():
        sys.exit(f"onnx-tool is not installed in {python}: run with --install-onnx-tool first")
    jobs = {}
    for name in args.models.split(","):
        fixture, dims = MODELS[name]
        model = with_weights(FIXTURES / fixture, folder)
        shapes = input_shapes(model, dims)
        jobs[name] = {
            "onnx-roofline": roofline_command(model, dims, folder / f"{name}.roofline.txt"),
            "onnx-tool": [
                str(tool_python),
                "-c",
                ONNX_TOOL_DRIVER,
                str(model),
                str(folder / f"{name}.onnx-tool.txt"),
                repr(shapes),
            ],
        }
    tools = ["onnx-roofline", "onnx-tool", *(["before"] if args.before else [])]
    runs: dict[tuple[str, str], list] = {(name, tool): [] for name in jobs for tool in tools}
    for round_index in range(args.rounds):
        for name, commands in jobs.items():
            for tool in tools if round_index % 2 == 0 else tools[::-1]:
                command = commands["onnx-roofline" if tool == "before" else tool]
                runs[name, tool].append(run(command, env=_before_env(args) if tool == "before" else None))
        print(f"round {round_index + 1} of {args.rounds} done", flush=True)
    rows = []
    print(
        f"\n{'model':<22} {'onnx-roofline':>15} {'onnx-tool':>15} {'speed-up':>9}   {'RSS roofline':>13} {'RSS onnx-tool':>14} {'RSS ratio':>9}"
    )
    for name in jobs:
        ours, theirs = summary(runs[name, "onnx-roofline"]), summary(runs[name, "onnx-tool"])
        speedup = theirs["wall_min"] / ours["wall_min"] if theirs["ok"] else None
        rss = theirs["rss_max"] / ours["rss_max"] if theirs["ok"] else None
        print(
            f"{name:<22} {ours['wall_min']:>13.2f} s {theirs['wall_min']:>13.2f} s"
            f" {f'{speedup:.1f}x' if speedup else 'failed':>9}   {mib(ours['rss_max']):>13} {mib(theirs['rss_max']):>14}"
            f" {f'1/{rss:.1f}' if rss else '-':>9}"
        )
        row = {"model": name, "onnx_roofline": ours, "onnx_tool": theirs, "speedup": speedup, "rss_ratio": rss}
        if args.before:
            before = row["before"] = summary(runs[name, "before"])
            print(
                f"{'  before this change':<22} {before['wall_min']:>13.2f} s {'':>15} {'':>9}   {mib(before['rss_max']):>13}"
            )
        rows.append(row)
    print(f"{args.rounds} interleaved rounds; minimum wall time, maximum peak RSS per tool and model")
    return rows


def startup(args: argparse.Namespace, folder: Path) -> dict:
    resnet = FIXTURES / "resnet50_fp32.onnx"
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "python -c 'import onnx'": [sys.executable, "-c", "import onnx"],
        "onnx-roofline --version": [*CLI, "--version"],
        "floor: import onnx, load, infer_shapes": [sys.executable, "-c", FLOOR, str(resnet)],
        "onnx-roofline resnet50 (table)": roofline_command(resnet, {"batch": 1}, folder / "startup.txt"),
    }
    if args.before:
        commands["before: onnx-roofline --version"] = commands["onnx-roofline --version"]
        commands["before: onnx-roofline resnet50 (table)"] = commands["onnx-roofline resnet50 (table)"]
    runs: dict[str, list] = {name: [] for name in commands}
    for _ in range(args.startup_rounds):
        for name, command in commands.items():
            runs[name].append(run(command, env=_before_env(args) if name.startswith("before:") else None))
    print(f"\n{'start-up':<40} {'wall min':>9} {'CPU min':>9} {'peak RSS':>9}")
    result = {}
    for name in commands:
        figures = summary(runs[name])
        result[name] = figures
        print(f"{name:<40} {figures['wall_min']:>7.3f} s {figures['cpu_min']:>7.3f} s {mib(figures['rss_max']):>9}")
    floor, cli = result["floor: import onnx, load, infer_shapes"], result["onnx-roofline resnet50 (table)"]
    print(
        f"CLI / floor on ResNet-50: {cli['wall_min'] / floor['wall_min']:.2f}x wall, {cli['cpu_min'] / floor['cpu_min']:.2f}x CPU"
        f" ({args.startup_rounds} interleaved rounds, minimums)"
    )
    result["imports"] = imports(resnet, folder)
    return result


HEAVY = ("networkx", "matplotlib", "onnxruntime", "scipy", "pandas", "torch", "onnxscript", "onnx_ir", "PIL")


def imports(model: Path, folder: Path) -> dict:
    """What `onnx-roofline MODEL` imports (python -X importtime): the heavy packages among them,
    and the slowest top-level imports (cumulative)."""
    command = [
        sys.executable,
        "-X",
        "importtime",
        "-m",
        "onnx_roofline",
        *roofline_command(model, {"batch": 1}, folder / "imports.txt")[len(CLI) :],
    ]
    lines = subprocess.run(command, capture_output=True, text=True).stderr.splitlines()
    modules, top = set(), []
    for line in lines:
        if not line.startswith("import time:") or "|" not in line or "self [us]" in line:
            continue
        _, cumulative, name = line.split("|")
        modules.add(name.strip())
        if not name.startswith("  "):  # imported from code, not by another import
            top.append((int(cumulative), name.strip()))
    heavy = sorted({m.split(".")[0] for m in modules if m.split(".")[0] in HEAVY})
    top.sort(reverse=True)
    print(f"\n`onnx-roofline resnet50` imports {len(modules)} modules; heavy ones: {', '.join(heavy) or 'none'}")
    for cumulative, name in top[:8]:
        print(f"  {cumulative / 1e3:8.1f} ms  {name}")
    return {"modules": len(modules), "heavy": heavy, "slowest": [(name, c / 1e6) for c, name in top[:8]]}


def _before_env(args: argparse.Namespace) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(Path(args.before).resolve())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--install-onnx-tool",
        action="store_true",
        help=f"install {ONNX_TOOL} into its own venv (--onnx-tool-venv) and stop",
    )
    parser.add_argument("--onnx-tool-venv", help=f"the venv with onnx-tool (default: {ONNX_TOOL_VENV})")
    parser.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, from {', '.join(MODELS)}")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--startup-rounds", type=int, default=7)
    parser.add_argument("--startup-only", action="store_true")
    parser.add_argument("--work", help="folder for the with-weights copies (default: a temporary one)")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument(
        "--before",
        metavar="DIR",
        help="also run, interleaved, the onnx_roofline package in DIR (a copy of an older tree)",
    )
    args = parser.parse_args()
    if args.install_onnx_tool:
        install_onnx_tool(ONNX_TOOL_VENV if args.onnx_tool_venv is None else Path(args.onnx_tool_venv))
        return
    prepare(args.before)
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as temporary:
        folder = Path(args.work or temporary)
        folder.mkdir(parents=True, exist_ok=True)
        figures = {"startup": startup(args, folder)}
        if not args.startup_only:
            figures["compare"] = compare(args, folder)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2, default=str) + "\n")


if __name__ == "__main__":
    main()
