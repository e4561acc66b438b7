"""Every command of the README's Quick start, `model.onnx` replaced by each fixture, runs and
writes what it says (in-process, through `onnx_roofline.commands.cli.main`, in a scratch folder); the
README's Python API block runs on each fixture too. Every other example of the README (`$ onnx-roofline ...`)
runs as written from the checkout, on files git tracks, and prints the lines the README shows; the
process-pool example runs; `--top 0` prints no empty header (issue 41)."""

from __future__ import annotations

import contextlib
import csv
import importlib.util
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


# --- every example of the README, as written, from the checkout (issue 41) ------------------------


def readme_examples() -> list[tuple[list[str], list[str]]]:
    """Each `$ onnx-roofline …` of the README's code blocks (a trailing `\\` continues it), with the
    output lines the README shows under it."""
    text = (REPO / "README.md").read_text()
    examples: list[tuple[list[str], list[str]]] = []
    for block in re.findall(r"```[a-z]*\n(.*?)```", text, re.S):
        lines, command = block.splitlines(), None
        while lines:
            line = lines.pop(0)
            if line.startswith("$ "):
                while line.endswith("\\"):
                    line = line[:-1] + lines.pop(0)
                command = shlex.split(line[2:], comments=True)
                assert command[0] == "onnx-roofline", line
                examples.append((command[1:], []))
            elif command is not None and line.strip():
                examples[-1][1].append(line)
    return examples


def run_in_checkout(args: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = main(args)
    return code, out.getvalue()


def _words(text: str) -> str:
    return " ".join(text.split())


def test_the_readme_has_its_examples():
    commands = [args for args, _ in readme_examples()]
    assert any(args[0].startswith("fixtures/") for args in commands)  # the first command, on a shipped fixture
    assert any("qdq" in word for args in commands for word in args)  # the QDQ example, on a file the checkout holds
    assert any(args[0] == "sweep" for args in commands)


@pytest.mark.parametrize("example", range(len(readme_examples())))
def test_every_readme_example_runs_as_written_from_the_checkout(example, monkeypatch):
    monkeypatch.chdir(REPO)
    args, shown = readme_examples()[example]
    for word in args:
        if word.endswith(".onnx"):
            assert (REPO / word).is_file() and word in tracked_files(), f"{word}: not in the checkout"
    code, out = run_in_checkout(args)
    assert code == 0, out
    for line in shown:  # what the README shows is what it prints
        assert _words(line) in _words(out), f"{shlex.join(args)} does not print: {line}"


def tracked_files() -> set[str]:
    """The paths git tracks: what a fresh checkout holds (every .onnx under the repository where
    git is not there to ask)."""
    import subprocess

    listed = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=False)
    return (
        set(listed.stdout.split())
        if listed.returncode == 0
        else {str(p.relative_to(REPO)) for p in REPO.rglob("*.onnx")}
    )


def test_the_set_up_command_and_its_shown_output(monkeypatch):
    """The main job of "Set up and run" (the command after the install), and the lines "What it
    prints for GPT-2 decode" shows of it."""
    monkeypatch.chdir(REPO)
    setup = readme_block("Set up and run (two commands)", "bash")
    words = shlex.split(setup.splitlines()[1], comments=True)
    args = words[len(words) - words[::-1].index("onnx-roofline") :]  # after the last `&& onnx-roofline`
    assert args[0] == "fixtures/gpt2_decode_fp16.onnx"
    code, out = run_in_checkout(args)
    assert code == 0, out
    text = (REPO / "README.md").read_text()
    shown = re.search(r"What it prints for GPT-2 decode.*?```\n(.*?)```", text, re.S).group(1)
    for line in shown.splitlines():
        assert _words(line) in _words(out), f"the README shows a line the command does not print: {line}"


def test_the_process_pool_example_runs(tmp_path, monkeypatch):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "resnet50_fp16.onnx").symlink_to(FIXTURES / "resnet50_fp16.onnx")
    monkeypatch.chdir(tmp_path)
    text = (REPO / "README.md").read_text()
    pool = re.findall(r"```python\n(.*?)```", text.split("\n## Python API\n", 1)[1], re.S)[1]
    namespace: dict = {}
    exec(compile("import onnx_roofline as r\n" + pool, "README.md", "exec"), namespace)  # noqa: S102 (the README's own example)
    (report,) = namespace["reports"].values()  # a whole report came back from the process
    assert report.model.node_count == len(
        onnx.load(FIXTURES / "resnet50_fp16.onnx", load_external_data=False).graph.node
    )
    if (
        importlib.util.find_spec("dask") is not None
    ):  # the Dask example after it, on the same paths (the distributed extra)
        dask_block = re.findall(r"```python\n(.*?)```", text.split("\n## Python API\n", 1)[1], re.S)[2]
        exec(compile(dask_block, "README.md", "exec"), namespace)  # noqa: S102 (the README's own example)
        (back,) = namespace["reports"]
        assert back.to_dict() == report.to_dict()


@pytest.mark.parametrize("fmt", ["table", "markdown"])
def test_top_0_prints_no_empty_header(fmt):
    code, out = run_in_checkout([str(FIXTURES / "resnet50_fp16.onnx"), "--top", "0", "--format", fmt, "-q"])
    assert code == 0
    assert "top 0" not in out.lower() and not re.search(
        r"^\|? *node *\|? *op\b", out, re.M
    )  # no title, no column header
    assert "by op type" in out.lower()  # the rest of the report is there
