"""The install is lean: `exporters` is a repository tool, not a package installed into
site-packages; onnxsim is not a dependency; heavy packages load only for the commands that use
them (matplotlib: --plot and HTML; onnxruntime: verify); networkx, a dependency once, loads for
nothing (torch brings it into the dev environment). Each check is a fresh interpreter, whose
sys.modules tells what loaded."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from onnx_roofline.model.files import tomllib
from tests.conftest import FIXTURES, REPO
from tests.test_install import CORE, core_only

HEAVY = ("onnx", "numpy", "matplotlib", "networkx", "onnxruntime", "onnxsim", "pandas")
SCRIPT = r"""
import contextlib, io, json, sys
statement = sys.argv[1]
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    exec(statement)
print(json.dumps(sorted(name for name in json.loads(sys.argv[2]) if name in sys.modules)))
"""


def loaded_by(statement: str, cwd=None) -> set[str]:
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, statement, json.dumps(HEAVY)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
    )
    assert result.returncode == 0, result.stderr
    return set(json.loads(result.stdout.strip().splitlines()[-1]))


MODEL = str(FIXTURES / "resnet50_fp16.onnx")


def test_importing_the_package_loads_nothing_heavy():
    assert loaded_by("import onnx_roofline; onnx_roofline.__version__") == set()


def test_the_library_analysis_loads_no_plotting_graph_or_runtime_package():
    assert loaded_by(f"import onnx_roofline; onnx_roofline.analyze({MODEL!r}, dims={{'batch': 1}}).to_dict()") == {
        "onnx",
        "numpy",
    }


@pytest.mark.parametrize(
    ("args", "absent"),
    [
        (["inspect", MODEL], {"matplotlib", "networkx", "onnxruntime", "onnxsim"}),
        ([MODEL, "--format", "json"], {"matplotlib", "networkx", "onnxruntime", "onnxsim"}),
        ([MODEL, "--format", "csv"], {"matplotlib", "networkx", "onnxruntime", "onnxsim"}),
        ([MODEL], {"matplotlib", "networkx", "onnxruntime", "onnxsim"}),  # the table shows the deployed total
        (["hw", "list"], {"matplotlib", "networkx", "onnxruntime", "onnxsim"}),
    ],
)
def test_commands_load_only_what_they_use(args, absent):
    loaded = loaded_by(f"from onnx_roofline.commands.cli import main; assert main({args!r}) == 0")
    assert not loaded & absent, loaded & absent


def test_the_version_and_hw_list_load_no_subcommand_module():
    """Only the module of the command that runs is imported: --version none, and neither onnx nor numpy."""
    assert (
        loaded_by("from onnx_roofline.commands.cli import main\ntry: main(['--version'])\nexcept SystemExit: pass")
        == set()
    )
    statement = "import sys; from onnx_roofline.commands.cli import main, COMMAND_MODULES; main(['hw', 'list']); print(sorted(m for m in COMMAND_MODULES if m in sys.modules), file=sys.__stderr__)"
    result = subprocess.run([sys.executable, "-c", statement], capture_output=True, text=True, timeout=300)
    assert (
        result.returncode == 0 and result.stderr.strip().splitlines()[-1] == "['onnx_roofline.commands.verify.command']"
    ), result.stderr  # hw calibrate


def test_the_command_table_names_what_each_module_registers():
    """cli.COMMAND_MODULES is how a command line finds the one module to import: it must list
    exactly the commands each module's add_command registers."""
    import argparse
    import importlib

    from onnx_roofline.commands.cli import COMMAND_MODULES

    for module, commands in COMMAND_MODULES.items():
        sub = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(module).add_command(sub)
        assert tuple(sub.choices) == commands, module


def test_a_plot_does_load_matplotlib(tmp_path):
    loaded = loaded_by(
        f"from onnx_roofline.commands.cli import main; assert main([{MODEL!r}, '--format', 'json', '--plot', 'p.png']) == 0",
        cwd=tmp_path,
    )
    assert "matplotlib" in loaded


def test_exporters_is_not_packaged_and_onnxsim_is_not_a_dependency():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    include = project["tool"]["setuptools"]["packages"]["find"]["include"]
    assert include == ["onnx_roofline*"]
    assert not any(dep.startswith("onnxsim") for dep in project["project"]["dependencies"])
    assert (
        "onnxsim"
        not in (REPO / "README.md").read_text().split("## Quick start")[0].split("pip install .`")[1].split(";")[0]
    )


@core_only
def test_the_core_install_has_no_exporters_package():
    assert CORE and importlib.util.find_spec("exporters") is None
    assert importlib.util.find_spec("onnxsim") is None


def test_exporters_runs_from_a_checkout():
    """`python -m exporters --help` from the repository root (the tool's documented use)."""
    if not (REPO / "exporters").is_dir():
        pytest.skip("a copy without the repository tools (the core-install run)")
    result = subprocess.run([sys.executable, "-m", "exporters", "--help"], capture_output=True, text=True, cwd=REPO, timeout=300,
                            env={**os.environ, "PYTHONPATH": ""})  # fmt: skip
    if "No module named 'torch'" in result.stderr:
        pytest.skip("the export extra is not installed")
    assert result.returncode == 0, result.stderr


def test_every_module_imports_on_its_own():
    """Each module of the package imports first, in a fresh interpreter state (the CLI imports the
    report before the rules, pytest the other way round): an import cycle — a rule module taking a
    status from the report, which imports the rules — shows here, not only as a broken command."""
    script = r"""
import importlib, pkgutil, sys
import onnx_roofline
names = sorted(m.name for m in pkgutil.walk_packages(onnx_roofline.__path__, "onnx_roofline.") if not m.name.endswith("__main__"))
failed = []
for name in names:
    for loaded in [m for m in sys.modules if m.startswith("onnx_roofline")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception as exc:
        failed.append(f"{name}: {type(exc).__name__}: {exc}")
print(len(names)); print("\n".join(failed))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, check=True)
    count, *failed = done.stdout.strip().splitlines()
    assert int(count) > 50 and failed == []
