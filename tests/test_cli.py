"""The command line: bad input is one line on stderr and exit code 2; outputs are written atomically."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys

import onnx
import pytest

import onnx_roofline
from onnx_roofline import Sizing
from onnx_roofline.commands.cli import main
from tests.conftest import FIXTURES, one_node_model, symbolic_matmul


@pytest.fixture
def model_path(tmp_path):
    path = tmp_path / "mlp.onnx"
    onnx.save(symbolic_matmul(), path)
    return path


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "onnx_roofline", *args], capture_output=True, text=True)


@pytest.mark.parametrize(
    ("make_args", "message"),
    [
        (lambda d, m: [str(d / "missing.onnx")], "model file not found"),
        (lambda d, m: [str(d / "text.onnx")], "not a valid ONNX model"),
        (lambda d, m: [str(d / "truncated.onnx")], "not a valid ONNX model"),
        (lambda d, m: [str(m), "--hw", "no-such-gpu"], "unknown hardware"),
        (lambda d, m: [str(m), "--dim", "batch"], "malformed --dim"),
        (lambda d, m: [str(m), "--dim", "batch=zero"], "malformed --dim"),
        (lambda d, m: [str(m), "--dim", "bacth=1", "--dim", "sequence=4"], "not a dimension of any model input"),
        (lambda d, m: [str(m), "--input", "x=1x2"], "rank 2 given"),
        (lambda d, m: [str(m), "--input", "nope=1x2x768"], "not a model input"),
        (
            lambda d, m: ["check", str(m), "--dim", "batch=1", "--max-latency", "1s"],
            "dimension 'sequence' is unbound",
        ),  # check is strict
        (lambda d, m: [str(m), "--format", "yaml"], "invalid choice"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, model_path, make_args, message):
    (tmp_path / "text.onnx").write_text("this is not a model\n")
    (tmp_path / "truncated.onnx").write_bytes(model_path.read_bytes()[:40])
    result = run_cli(*make_args(tmp_path, model_path))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert message in result.stderr


def test_unbound_dim_message_names_the_inputs(model_path):
    """Strict `check`: the dim, the input using it, and a command that would work (the analyze
    command takes defaults instead: tests/test_first_command.py)."""
    result = run_cli("check", str(model_path), "--dim", "sequence=8", "--max-latency", "1s")
    assert "dimension 'batch' is unbound (used by input 'x')" in result.stderr
    assert f"`onnx-roofline check {model_path} --dim sequence=8 --max-latency 1s --dim batch=1`" in result.stderr


def test_partial_reports_blocked_nodes_as_unknown(model_path, capsys):
    # The one node blocked, nothing is costed: the command line says so and exits 2 (no JSON of
    # unknowns that reads as an answer); the report itself holds the blocked node as unknown.
    assert main([str(model_path), "--dim", "sequence=8", "--partial", "--format", "json"]) == 2
    assert "fix: bind the dims (--dim batch=N)" in capsys.readouterr().err
    report = onnx_roofline.analyze(model_path, partial=True, sizing=Sizing(dims={"sequence": 8})).to_dict()
    (node,) = report["nodes"]
    assert node["status"] == "unknown-shape"
    assert node["flops"] is None and node["bound"] == "unknown"  # unknown is never zero
    assert report["unsupported"] == {"MatMul": 1}
    assert report["totals"]["uncosted_nodes"] == 1


def test_dims_bind_every_input_and_shape_follows(model_path, capsys):
    assert main([str(model_path), "--dim", "batch=2", "--dim", "sequence=8", "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    (node,) = report["nodes"]
    assert node["outputs"][0]["shape"] == [2, 8, 3072]
    assert node["flops"] == 2 * (2 * 8) * 768 * 3072
    assert report["model"]["dims"] == {"batch": 2, "sequence": 8}


def test_input_flag_sets_a_whole_shape(model_path, capsys):
    assert main([str(model_path), "--input", "x=4x16x768", "--format", "json"]) == 0
    (node,) = json.loads(capsys.readouterr().out)["nodes"]
    assert node["flops"] == 2 * 4 * 16 * 768 * 3072


def test_json_contract_keys(model_path, capsys):
    assert main([str(model_path), "--dim", "batch=1", "--dim", "sequence=1", "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["schema_version"] == 1
    assert {"path", "node_count", "opsets", "dims"} <= report["model"].keys()
    assert {"name", "memory_bandwidth", "peaks"} <= report["hardware"].keys()
    node_keys = {
        "index",
        "name",
        "op_type",
        "domain",
        "inputs",
        "outputs",
        "flops",
        "transcendentals",
        "bytes_read",
        "bytes_written",
        "bytes",
        "intensity",
        "unit",
        "ridge",
        "bound",
        "time_s",
        "status",
    }
    assert node_keys <= report["nodes"][0].keys()
    assert {"flops", "bytes", "time_s", "memory_bound_time_share"} <= report["totals"].keys()
    assert report["nodes"][0]["inputs"][0] == {"name": "x", "shape": [1, 1, 768], "dtype": "float16"}


def test_output_file_is_written_and_input_never_overwritten(model_path, tmp_path):
    before = model_path.read_bytes()
    result = run_cli(str(model_path), "--dim", "batch=1", "--dim", "sequence=1", "-o", str(model_path))
    assert result.returncode == 2 and "refusing to overwrite the input" in result.stderr
    assert model_path.read_bytes() == before
    out = tmp_path / "nodes.csv"
    assert main([str(model_path), "--dim", "batch=1", "--dim", "sequence=1", "--format", "csv", "-o", str(out)]) == 0
    header, row = out.read_text().splitlines()
    assert header.startswith("index,name,op_type") and row.startswith("0,mlp,MatMul")


def test_table_names_the_heaviest_node(model_path, capsys):
    assert main([str(model_path), "--dim", "batch=1", "--dim", "sequence=1024"]) == 0
    out = capsys.readouterr().out
    assert "mlp" in out and "MatMul" in out and "compute" in out


def test_hw_list_names_every_entry_with_a_source(capsys):
    assert main(["hw", "list"]) == 0
    out = capsys.readouterr().out
    for key in ("h100", "h100-pcie", "h200", "a100", "l4"):
        assert f"\n{key} " in "\n" + out
    assert out.count("source:") >= 6
    entries = [line for line in out.splitlines() if not line.lstrip().startswith("source:")]
    assert len({line.index("B/s") for line in entries}) == 1  # the columns align
    assert len({line.index("ridge") for line in entries}) == 1


def test_model_without_its_external_data_still_analyzes(tmp_path, capsys):
    """Weights are never read: the .data file may be absent."""
    import numpy as np

    model = one_node_model(
        "MatMul",
        [("a", "float32", [4, 256]), ("b", "float32", [256, 512])],
        ["y"],
        initializers={"b": np.ones((256, 512), np.float32)},
    )
    path = tmp_path / "ext.onnx"
    onnx.save(model, path, save_as_external_data=True, location="ext.onnx.data", size_threshold=0)
    (tmp_path / "ext.onnx.data").unlink()
    assert main([str(path), "--format", "json"]) == 0
    (node,) = json.loads(capsys.readouterr().out)["nodes"]
    assert node["flops"] == 2 * 4 * 256 * 512
    assert node["parameters"] == 256 * 512


def test_dtype_costs_an_fp32_graph_in_another_precision(tmp_path, capsys):
    model = one_node_model("MatMul", [("a", "float32", [1024, 768]), ("b", "float32", [768, 3072])], ["y"])
    path = tmp_path / "fp32.onnx"
    onnx.save(model, path)
    assert main([str(path), "--dtype", "fp16", "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    (node,) = report["nodes"]
    assert node["bytes"] == 2 * (1024 * 768 + 768 * 3072 + 1024 * 3072)  # 2 bytes per element, not 4
    assert node["dtype"] == "fp16" and node["bound"] == "compute"
    assert node["inputs"][0]["dtype"] == "float16"
    assert report["model"]["precision"] == "fp16"


def test_outputs_get_ordinary_permissions(model_path, tmp_path):
    """Atomic writes go through a private temp file; the result has the umask's permissions."""
    import os

    out = tmp_path / "report.json"
    assert main([str(model_path), "--dim", "batch=1", "--dim", "sequence=1", "--format", "json", "-o", str(out)]) == 0
    umask = os.umask(0)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~umask


def test_a_failed_shape_pass_is_one_prefixed_warning_and_quiet_silences_it(model_path):
    """A pass that fails logs a warning; the package's logger has a NullHandler, so it is not
    printed a second time by Python's last-resort handler, unprefixed and deaf to -q."""
    script = ("import sys, onnx_roofline.shapes.engine as s\n"
              "def fail(model): raise RuntimeError('inference failed here')\n"
              "s.inferred_types = fail\n"
              "from onnx_roofline.commands.cli import main\n"
              "sys.exit(main(sys.argv[1:]))\n")  # fmt: skip
    loud = subprocess.run(
        [sys.executable, "-c", script, str(model_path), "--dim", "batch=1", "--dim", "sequence=4"],
        capture_output=True,
        text=True,
    )
    assert [line for line in loud.stderr.splitlines() if "inference failed here" in line] == [
        "onnx-roofline: warning: ONNX shape inference of the whole graph failed (inference failed here); typed node by node instead"
    ]
    quiet = subprocess.run(
        [sys.executable, "-c", script, str(model_path), "--dim", "batch=1", "--dim", "sequence=4", "-q"],
        capture_output=True,
        text=True,
    )
    assert quiet.returncode == 0 and quiet.stderr == ""


def test_calibrate_has_one_home_under_hw(tmp_path, capsys):
    """`hw calibrate` is listed; `calibrate`, its former name, is not, but still runs and says so."""
    with pytest.raises(SystemExit):
        main(["--help"])
    assert not re.search(r"^\s+calibrate\b", capsys.readouterr().out, flags=re.M)
    quick = ["-o", str(tmp_path / "cpu.toml"), "--runs", "1", "--warmup", "0", "--size", "256", "--stream-mib", "1"]
    assert main(["calibrate", *quick]) == 0
    assert "`calibrate` is now `hw calibrate`" in capsys.readouterr().err
    assert main(["hw", "calibrate", *quick]) == 0
    assert "now `hw calibrate`" not in capsys.readouterr().err


def test_colour_by_bound_only_on_a_terminal(monkeypatch):
    """The bound column in its colour where the output is a terminal, never under NO_COLOR or a dumb
    TERM; the text a reader sees is the same either way."""
    from onnx_roofline.commands.terminal import terminal_colours
    from onnx_roofline.report.table import BOUND_COLOURS, render_table

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert terminal_colours(Terminal()) and not terminal_colours(io.StringIO())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not terminal_colours(Terminal())
    monkeypatch.delenv("NO_COLOR")
    monkeypatch.setenv("TERM", "dumb")
    assert not terminal_colours(Terminal())
    report = onnx_roofline.analyze(
        FIXTURES / "gpt2_decode_fp16.onnx", sizing=Sizing(dims={"batch": 1, "past_sequence": 7})
    )
    plain, coloured = render_table(report, top=5), render_table(report, top=5, colour=True)
    assert BOUND_COLOURS["memory"] + "memory" in coloured and "\033" not in plain
    assert re.sub(r"\033\[[0-9;]*m", "", coloured) == plain


def test_progress_on_several_models_only_on_a_terminal(tmp_path, monkeypatch, capsys):
    """`[2/2] model` on stderr while a folder is analyzed, where stderr is a terminal; nothing when piped."""
    import shutil

    for name in ("a.onnx", "b.onnx"):
        shutil.copy(FIXTURES / "resnet50_fp32.onnx", tmp_path / name)
    assert main([str(tmp_path), "--dim", "batch=1"]) == 0
    assert "[2/2]" not in capsys.readouterr().err  # capsys is no terminal
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    assert main([str(tmp_path), "--dim", "batch=1"]) == 0
    err = capsys.readouterr().err
    assert "[1/2]" in err and f"[2/2] {tmp_path / 'b.onnx'}" in err
    assert main([str(tmp_path), "--dim", "batch=1", "-q"]) == 0
    assert "[1/2]" not in capsys.readouterr().err


def test_a_long_analysis_says_how_long_it_has_taken_only_on_a_terminal():
    """`what… N s` rewritten in place once the block has run `after` seconds, the line cleared at
    the end; nothing on a pipe, nothing for a quick block."""
    import time

    from onnx_roofline.commands.terminal import CLEAR_LINE, elapsed

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    slow, quick, piped = Terminal(), Terminal(), io.StringIO()
    with elapsed("analyzing m.onnx", slow, after=0.05, every=0.05):
        time.sleep(0.3)
    assert slow.getvalue().startswith(CLEAR_LINE + "analyzing m.onnx… 0 s") and slow.getvalue().endswith(CLEAR_LINE)
    with elapsed("analyzing m.onnx", quick, after=5):
        pass
    with elapsed("analyzing m.onnx", piped, after=0):
        time.sleep(0.1)
    assert quick.getvalue() == "" and piped.getvalue() == ""


def test_the_command_line_ends_past_the_interpreters_teardown_with_its_output_whole(model_path, tmp_path):
    """`python -m onnx_roofline` ends with os._exit once the command returns (__main__._exit_now):
    an atexit hook (set by a sitecustomize here) never runs, and yet what the command printed to
    a pipe (block-buffered) arrives whole, as in-process, and the exit status is the command's."""
    marker = tmp_path / "teardown-ran"
    (tmp_path / "sitecustomize.py").write_text(
        f"import atexit, pathlib\natexit.register(pathlib.Path({str(marker)!r}).touch)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    done = subprocess.run(
        [sys.executable, "-m", "onnx_roofline", str(model_path), "--dim", "batch=2", "--format", "json"],
        capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["nodes"][0]["op_type"] == "MatMul"  # the whole JSON text: it parses
    assert not marker.exists()
    control = subprocess.run([sys.executable, "-c", "pass"], env=env)  # the hook does run where Python tears down
    assert control.returncode == 0 and marker.exists()
    unknown = subprocess.run(
        [sys.executable, "-m", "onnx_roofline", str(tmp_path / "absent.onnx")], capture_output=True, text=True, env=env
    )
    assert unknown.returncode == 2 and unknown.stderr.startswith("onnx-roofline: error:")
