"""What a CI pipeline does to a command (issue 43): its stdout on a full disk, closed, or read by a
reader that leaves; the command killed while its workers or its onnxruntime child run; its outputs
named twice; the disk filling between `--annotate`'s two files. Each ends in one line (or, for a
reader that left, nothing) and its own exit code, no process outlives the command, and no output
the user had is lost."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from onnx import TensorProto, helper

from onnx_roofline.commands import arguments
from onnx_roofline.commands.cli import main
from onnx_roofline.errors import EXIT_BROKEN_PIPE, EXIT_OUTPUT, EXIT_USAGE
from onnx_roofline.report import output
from onnx_roofline.report.output import STAGING_PREFIX
from tests import hostile

LINUX = sys.platform.startswith("linux")
COMMANDS = {"analyze": ["analyze"], "inspect": ["inspect"], "check": ["check", "--max-latency", "1s"]}
ENV = {**os.environ, "ORT_DISABLE_TELEMETRY": "1"}


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    """A small model of static dims (no note on stderr), whose JSON report is larger than a pipe's
    64 KiB buffer: a reader that leaves early is seen by the writer."""
    nodes = [helper.make_node("Relu", [f"v{i}"], [f"v{i + 1}"], name=f"relu{i}") for i in range(200)]
    proto = hostile.model(nodes, [("v0", TensorProto.FLOAT, [2, 4])], [("v200", TensorProto.FLOAT, [2, 4])])
    return hostile.save(proto, tmp_path_factory.mktemp("model") / "m.onnx")


def command_line(command: str, model: Path, *more: str) -> list[str]:
    return [sys.executable, "-m", "onnx_roofline", *COMMANDS[command], str(model), *more]


# --- stdout ---------------------------------------------------------------------------------------------------


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
@pytest.mark.parametrize("command", COMMANDS)
def test_stdout_on_a_full_disk_is_one_line_and_exit_74(model, command):
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            command_line(command, model), stdout=full, stderr=subprocess.PIPE, text=True, env=ENV, timeout=120
        )
    assert done.returncode == EXIT_OUTPUT
    assert done.stderr == "onnx-roofline: error: cannot write the output to stdout: No space left on device\n"


@pytest.mark.parametrize("command", COMMANDS)
def test_a_closed_stdout_is_one_line_and_exit_74(model, command):
    done = subprocess.run(
        command_line(command, model),
        preexec_fn=lambda: os.close(1),
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
        timeout=120,
    )  # `>&-`
    assert done.returncode == EXIT_OUTPUT
    assert (
        done.stderr
        == "onnx-roofline: error: cannot write the output: stdout is closed (give -o FILE to write it to a file)\n"
    )


@pytest.mark.parametrize("command", COMMANDS)
def test_a_reader_gone_is_silent_and_exit_141(model, command):
    """The reader's end closed before anything is written: every write is EPIPE (Python ignores
    SIGPIPE), deterministically."""
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run(
            command_line(command, model), stdout=write, stderr=subprocess.PIPE, text=True, env=ENV, timeout=120
        )
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (EXIT_BROKEN_PIPE, "")


@pytest.mark.parametrize("command", COMMANDS)
def test_head_of_a_pipe_is_silent(model, command):
    """`| head -1` as a shell runs it: the output may fit the pipe before head leaves (exit 0) or
    not (141); either way nothing on stderr."""
    writer = subprocess.Popen(
        command_line(command, model, *(["--format", "json"] if command != "inspect" else [])),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=ENV,
    )
    head = subprocess.run(["head", "-1"], stdin=writer.stdout, capture_output=True, timeout=120)
    writer.stdout.close()
    err = writer.stderr.read()
    assert writer.wait(timeout=120) in (0, EXIT_BROKEN_PIPE) and err == b""
    assert head.stdout.strip()


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_stderr_on_a_full_disk_keeps_stdout_and_exits_74(tmp_path):
    """A note that cannot be said (the unbound dim's default) is not a traceback: the report is
    written, and the exit code says something was lost."""
    proto = hostile.model(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        [("x", TensorProto.FLOAT, ["n", 4])],
        [("y", TensorProto.FLOAT, None)],
    )
    path = hostile.save(proto, tmp_path / "symbolic.onnx")
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            command_line("analyze", path), stdout=subprocess.PIPE, stderr=full, text=True, env=ENV, timeout=120
        )
    assert done.returncode == EXIT_OUTPUT and "relu" in done.stdout


# --- no process outlives the command ---------------------------------------------------------------------------

SLOW = """
import sys, time
import onnx_roofline.commands.summary as summary
import onnx_roofline.commands.verify.run as run

def slow(*args):  # a worker, or verify's onnxruntime child, still at work when the command is killed
    time.sleep(120)

summary._row = slow
run._observe = slow
from onnx_roofline.commands.cli import main
sys.exit(main(sys.argv[1:]))
"""


def descendants(pid: int) -> set[int]:
    """The live processes below `pid` (Linux: /proc/PID/task/*/children)."""
    found, stack = set(), [pid]
    while stack:
        for task in Path(f"/proc/{stack.pop()}/task").glob("*"):
            try:
                children = {int(child) for child in (task / "children").read_text().split()}
            except OSError:
                continue
            stack += children - found
            found |= children
    return {child for child in found if alive(child)}


def alive(pid: int) -> bool:
    """Running, not a zombie (an orphan that the container's init does not reap is a zombie)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


@pytest.mark.skipif(
    not LINUX or not Path(f"/proc/self/task/{os.getpid()}/children").exists(), reason="reads /proc/PID/task/*/children"
)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
@pytest.mark.parametrize("what", ["-j 2", "verify"])
def test_no_process_outlives_the_killed_command(tmp_path, model, sig, what):
    """The command is killed while its two -j workers (or verify's forked onnxruntime child) work:
    within 5 s, none of them is left."""
    script = tmp_path / "slow.py"
    script.write_text(SLOW)
    other = hostile.save(hostile.relu(), tmp_path / "relu.onnx")
    args = [str(model), str(other), "-j", "2"] if what == "-j 2" else ["verify", str(other)]
    expected = 2 if what == "-j 2" else 1
    parent = subprocess.Popen(
        [sys.executable, str(script), *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV
    )
    try:
        deadline = time.monotonic() + 60
        while (
            len(children := descendants(parent.pid)) < expected
            and time.monotonic() < deadline
            and parent.poll() is None
        ):
            time.sleep(0.05)
        assert len(children) >= expected, f"the workers never started ({children})"
        parent.send_signal(sig)
        parent.wait(timeout=30)
        deadline = time.monotonic() + 5
        while any(alive(child) for child in children) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = {child for child in children if alive(child)}
    finally:
        parent.kill()
        parent.wait()
    for child in left:  # leave nothing behind whatever the outcome
        os.kill(child, signal.SIGKILL)
    assert not left, f"{len(left)} of {len(children)} child processes outlived the command"


# --- outputs: one unit, never two names for one file --------------------------------------------------------


@pytest.fixture
def no_analysis(monkeypatch):
    """The analysis, made to fail loudly: a refusal must come before it."""

    def analysis(*args, **kwargs):
        raise AssertionError("the analysis ran")

    monkeypatch.setattr(arguments, "analyze_from_options", analysis)  # the command line imports it when it runs


@pytest.mark.parametrize(
    "outputs",
    [
        ["-o", "{d}/x.onnx", "--annotate", "{d}/x.onnx"],
        ["-o", "{d}/x.netron.json", "--annotate", "{d}/x.onnx"],
        ["-o", "{d}/r.json", "--annotate", "{d}/./r.json"],
        ["--annotate", "{model}"],
        ["-o", "{model}"],
    ],
    ids=["-o=--annotate", "-o=attachment", "same-file-two-spellings", "annotate-the-input", "-o-the-input"],
)
def test_outputs_named_to_one_file_or_the_input_are_refused_before_the_analysis(tmp_path, capsys, no_analysis, outputs):
    model = hostile.save(hostile.relu(), tmp_path / "m.onnx")
    before = model.read_bytes()
    code = main([str(model), *(arg.format(d=tmp_path, model=model) for arg in outputs)])
    out, err = capsys.readouterr()
    assert code == EXIT_USAGE and out == ""
    assert len(err.splitlines()) == 1 and err.startswith("onnx-roofline: error: ")
    assert "name the same file" in err or "refusing to overwrite the input" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"] and model.read_bytes() == before


def test_a_full_disk_between_annotates_two_files_leaves_the_old_pair(tmp_path, capsys, monkeypatch):
    """The attachment is written, then the disk fills under the model: neither is renamed into
    place, the old pair is as it was, and no temporary file is left."""
    model = hostile.save(hostile.relu(), tmp_path / "m.onnx")
    out = tmp_path / "out"
    out.mkdir()
    assert main([str(model), "--annotate", str(out / "a.onnx"), "-q"]) == 0
    old = {path.name: path.read_bytes() for path in out.iterdir()}
    assert sorted(old) == ["a.netron.json", "a.onnx"]
    real, calls = output._write_file, []

    def fills_on_the_second(path, data):
        calls.append(path)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(path, data)

    monkeypatch.setattr(output, "_write_file", fills_on_the_second)
    capsys.readouterr()
    code = main([str(model), "--hw", "a100", "--annotate", str(out / "a.onnx"), "-q"])  # another analysis: other bytes
    err = capsys.readouterr().err
    assert code == EXIT_OUTPUT and len(calls) == 2
    assert err == f"onnx-roofline: error: cannot write {out / 'a.onnx'}: No space left on device\n"
    assert {path.name: path.read_bytes() for path in out.iterdir()} == old


def test_a_model_renamed_without_its_attachment_is_told_from_a_pair(tmp_path, capsys, monkeypatch):
    """The two renames are not one: a run killed between them leaves the new attachment beside the
    old model. The model names its attachment's checksum (CRC-32 and length), so `inspect` tells a pair from a mix."""
    model = hostile.save(hostile.relu(), tmp_path / "m.onnx")
    out = tmp_path / "out"
    out.mkdir()
    assert main([str(model), "--annotate", str(out / "a.onnx"), "-q"]) == 0
    capsys.readouterr()
    assert main(["inspect", str(out / "a.onnx"), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["attachment"] == "paired"
    real = os.replace

    def dies_before_the_model(source, target):
        if str(target).endswith(".onnx"):
            raise KeyboardInterrupt  # the run ends between its two renames
        real(source, target)

    monkeypatch.setattr(output.os, "replace", dies_before_the_model)
    assert (
        main([str(model), "--hw", "a100", "--annotate", str(out / "a.onnx"), "-q"]) == 130
    )  # another analysis, interrupted
    monkeypatch.setattr(output.os, "replace", real)
    capsys.readouterr()
    assert main(["inspect", str(out / "a.onnx")]) == 0
    assert "a.netron.json: NOT the one written with this model" in capsys.readouterr().out


def test_a_killed_runs_hidden_folder_is_removed_by_the_next_and_a_live_ones_kept(tmp_path, capsys):
    """A SIGKILL leaves the run's hidden folder (its lock released with the process); the next
    run writing into that folder removes it. A folder whose lock is held (a run at work) is kept."""
    import fcntl

    model = hostile.save(hostile.relu(), tmp_path / "m.onnx")
    dead = tmp_path / f"{STAGING_PREFIX}dead"
    dead.mkdir()
    (dead / "lock").write_text("")
    (dead / "0.r.json").write_text("half a report")
    live = tmp_path / f"{STAGING_PREFIX}live"
    live.mkdir()
    held = os.open(live / "lock", os.O_WRONLY | os.O_CREAT)
    try:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert main([str(model), "--format", "json", "-o", str(tmp_path / "r.json")]) == 0
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, "m.onnx", "r.json"])
    finally:
        os.close(held)


@pytest.mark.skipif(not LINUX, reason="SIGKILL timing")
def test_a_sigkill_while_writing_leaves_nothing_beside_the_output(tmp_path):
    """Killed while its output is being written (a renderer that never finishes), the run leaves
    only its hidden folder, no `.report.json.XXXX` beside the destination, and the old report."""
    model = hostile.save(hostile.relu(), tmp_path / "m.onnx")
    report = tmp_path / "report.json"
    report.write_text("the old report\n")
    script = tmp_path / "stuck.py"
    script.write_text(
        "import sys, time\n"
        "import onnx_roofline.report.serialize as s\n"
        "def stuck(*a, **k):\n    yield '{'\n    time.sleep(120)\n"
        "s.iter_json = stuck\n"
        "from onnx_roofline.commands.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    )
    run = subprocess.Popen([sys.executable, str(script), str(model), "--format", "json", "-o", str(report)], env=ENV)
    deadline = time.monotonic() + 60
    while (
        not any(p.name.startswith(STAGING_PREFIX) and any(p.iterdir()) for p in tmp_path.iterdir())
        and time.monotonic() < deadline
    ):
        time.sleep(0.05)
    run.kill()
    run.wait()
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(STAGING_PREFIX)) == [
        "m.onnx",
        "report.json",
        "stuck.py",
    ]
    assert report.read_text() == "the old report\n"
    assert (
        main([str(model), "--format", "json", "-o", str(report), "-q"]) == 0
    )  # the next run sweeps the dead one's folder
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx", "report.json", "stuck.py"]


def test_check_refuses_one_file_for_its_report_and_junit(tmp_path, capsys):
    model = hostile.save(hostile.relu(), tmp_path / "m.onnx")
    code = main(
        ["check", str(model), "--max-latency", "1s", "-o", str(tmp_path / "r.txt"), "--junit", str(tmp_path / "r.txt")]
    )
    assert (
        code == EXIT_USAGE
        and capsys.readouterr().err
        == f"onnx-roofline: error: -o and --junit name the same file: {tmp_path / 'r.txt'}\n"
    )


def test_dash_o_dev_stdout_into_a_pipe_is_written_into(model):
    """`-o /dev/stdout` names a pipe through /proc: written into as a shell would, never resolved to
    a path that cannot be opened, nor replaced."""
    done = subprocess.run(
        command_line("analyze", model, "--format", "json", "-o", "/dev/stdout"),
        capture_output=True,
        text=True,
        env=ENV,
        timeout=120,
    )
    assert done.returncode == 0 and done.stdout.startswith("{") and done.stderr == ""
