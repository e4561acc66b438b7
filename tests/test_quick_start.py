"""Every command of the README's Quick start, `model.onnx` replaced by each fixture, runs and
writes what it says (in-process, through `onnx_roofline.commands.cli.main`, in a scratch folder); the
README's Python API block runs on each fixture too."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import re
import shlex

import onnx
import pytest

from onnx_roofline.commands.cli import main
from tests.conftest import FIXTURES, REPO

ALL_FIXTURES = sorted(p.name for p in FIXTURES.glob("*.onnx"))


def readme_block(section: str, language: str) -> str:
    text = (REPO / "README.md").read_text()
    body = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return re.search(rf"```{language}\n(.*?)```", body, re.S).group(1)


def quick_start_commands() -> list[list[str]]:
    commands = []
    for line in readme_block("Quick start", "bash").splitlines():
        words = shlex.split(line, comments=True)
        if words:
            assert words[0] == "onnx-roofline", line
            commands.append(words[1:])
    return commands


def test_the_quick_start_is_there():
    commands = quick_start_commands()
    assert len(commands) >= 5
    assert commands[1] == ["model.onnx", "--hw", "h100"]  # the first command, with no --dim
    assert ["inspect", "model.onnx"] in commands


@pytest.mark.parametrize("fixture", ALL_FIXTURES)
def test_every_quick_start_command_runs_on_every_fixture(fixture, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = str(FIXTURES / fixture)
    for words in quick_start_commands():
        args, redirect = [model if w == "model.onnx" else w for w in words], None
        if ">" in args:
            at = args.index(">")
            args, redirect = args[:at], args[at + 1]
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(args)
        assert code == 0, f"{shlex.join(args)}: {err.getvalue()}"
        assert "warning" not in err.getvalue(), err.getvalue()  # complete: every node costed
        if redirect:
            (tmp_path / redirect).write_text(out.getvalue())
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["model"]["dims"]["batch"] == 8 and report["uncosted"]["count"] == 0
    with open(tmp_path / "nodes.csv", newline="") as stream:
        rows = list(csv.DictReader(stream))
    assert len(rows) == report["model"]["node_count"] and {"module", "time_share", "attainable_flops"} <= rows[0].keys()
    assert (tmp_path / "report.html").read_text().lstrip().lower().startswith("<!doctype html")
    assert (tmp_path / "roofline.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    annotated = onnx.load(tmp_path / "annotated.onnx", load_external_data=False)
    assert len(annotated.graph.node) == report["model"]["node_count"]


@pytest.mark.parametrize("fixture", ALL_FIXTURES)
def test_the_python_api_block_runs_on_every_fixture(fixture):
    code = readme_block("Python API", "python").replace('"model.onnx"', repr(str(FIXTURES / fixture)))
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102 (the README's own example)
    report = namespace["report"]
    assert report.uncosted.count == 0 and report.model.dims["batch"] == 1
