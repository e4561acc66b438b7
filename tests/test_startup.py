"""Start-up (issue 44): `--version` and `--help` import what they print and nothing more. Each check is
a fresh interpreter whose sys.modules tells what loaded: neither onnx nor numpy nor the analysis,
and for `--version` only the modules listed here, so a new top-level import in the command line
shows as a failure to read, not as milliseconds nobody measured."""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys

import pytest

from onnx_roofline.commands.cli import COMMAND_MODULES
from onnx_roofline.commands.listing import COMMAND_HELP

HEAVY = ("onnx", "numpy", "onnxruntime", "matplotlib", "networkx", "pandas")
SCRIPT = r"""
import contextlib, io, json, sys
from onnx_roofline.commands.cli import main
with contextlib.redirect_stdout(io.StringIO()) as out:
    try:
        main([sys.argv[1]])
    except SystemExit as exc:
        code = exc.code
print(json.dumps({"code": code, "out": out.getvalue(), "modules": sorted(sys.modules)}))
"""
VERSION_MODULES = {  # what `--version` needs: the package, its version, the command line, its errors, its stdout
    "onnx_roofline", "onnx_roofline.version", "onnx_roofline.errors", "onnx_roofline.commands", "onnx_roofline.commands.cli",
    "onnx_roofline.commands.listing", "onnx_roofline.report", "onnx_roofline.report.stdout",
}  # fmt: skip


def started(flag: str) -> dict:
    done = subprocess.run([sys.executable, "-c", SCRIPT, flag], capture_output=True, text=True, timeout=300, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def heavy(modules) -> set[str]:
    return {m for m in modules if m.split(".")[0] in HEAVY}


def test_version_prints_the_version_and_imports_only_what_it_needs():
    from onnx_roofline import __version__

    run = started("--version")
    assert run["code"] == 0 and run["out"] == f"onnx-roofline {__version__}\n"
    assert heavy(run["modules"]) == set()
    assert {m for m in run["modules"] if m.startswith("onnx_roofline")} == VERSION_MODULES


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_lists_the_commands_without_onnx_numpy_or_the_analysis(flag):
    run = started(flag)
    assert run["code"] == 0 and "analyze" in run["out"] and "check" in run["out"]
    assert heavy(run["modules"]) == set()
    assert not {"onnx_roofline.analysis", "onnx_roofline.shapes.engine", "onnx_roofline.views.deployed"} & set(
        run["modules"]
    )
    assert not set(COMMAND_MODULES) & set(run["modules"])  # each command's line comes from COMMAND_HELP


def test_the_listing_says_what_each_module_registers():
    """COMMAND_HELP gives --help its lines without importing the modules: each command a module
    registers with a help line has that line in the table, and the table names no other."""
    listed = {}
    for module in COMMAND_MODULES:
        sub = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(module).add_command(sub)
        listed.update({action.dest: action.help for action in sub._choices_actions})
    assert listed == COMMAND_HELP


USED_SCRIPT = r"""
import json, sys
from onnx_roofline.commands.cli import main
called = set()
def profile(frame, event, arg):
    if event == "call" and frame.f_code.co_name != "<module>":  # a function's code, not the module's own
        called.add(frame.f_code.co_filename)
sys.setprofile(profile)
code = main([sys.argv[1], "-o", sys.argv[2], "-q"])
sys.setprofile(None)
modules = {name: getattr(module, "__file__", None) for name, module in sys.modules.items()}
print(json.dumps({"code": code, "modules": modules, "called": sorted(called)}))
"""
RULE_REGISTRIES = ("onnx_roofline.costs.rules.", "onnx_roofline.shapes.rules.")  # a rule registers as its module loads
NOT_RUN_ON_RESNET = {  # imported for names alone (errors, the version, help lines, constants), or for graphs ResNet is not
    "onnx_roofline.errors", "onnx_roofline.version", "onnx_roofline.commands.listing", "onnx_roofline.commands.terminal",
    "onnx_roofline.views.public", "onnx_roofline.model.inlining", "onnx_roofline.model.precisions",
    "onnx_roofline.model.scopes", "onnx_roofline.shapes.completion", "onnx_roofline.shapes.selection",
}  # fmt: skip


def test_the_plain_command_on_resnet50_imports_only_modules_it_uses(tmp_path):
    """The modules of ours `onnx-roofline resnet50.onnx` imports and runs no function of: the rule
    modules (registered as they load), and the ten listed, each a few hundred microseconds (the
    rest, 95 of 128, all run); and none of the heavy optional packages. A module imported for a
    feature the plain path lacks shows here, not as milliseconds of start-up nobody measured
    (issue 44)."""
    from tests.conftest import FIXTURES

    done = subprocess.run(
        [sys.executable, "-c", USED_SCRIPT, str(FIXTURES / "resnet50_fp32.onnx"), str(tmp_path / "table.txt")],
        capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    run = json.loads(done.stdout.strip().splitlines()[-1])
    assert run["code"] == 0
    ours = {name: path for name, path in run["modules"].items() if name.split(".")[0] == "onnx_roofline"}
    unused = {
        name for name, path in ours.items() if path and path not in run["called"] and not path.endswith("__init__.py")
    }
    assert {name for name in unused if not name.startswith(RULE_REGISTRIES)} == NOT_RUN_ON_RESNET
    assert {m.split(".")[0] for m in heavy(run["modules"])} == {"onnx", "numpy"}  # no onnxruntime, pandas, ...
