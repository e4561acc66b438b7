"""The project's own hostile corpus (issue 13, docs/hostile-inputs.md): files from strangers,
escaping external data, special files, invalid graphs, absurd options, signals. Each case asserts
its exit code and a message fragment, a single line on stderr and no traceback, under a deadline.
Most run in-process through `cli.main`; the few that need a process of their own (a signal, a
memory cap) run one."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnx_roofline import analyze
from onnx_roofline.commands.cli import main
from onnx_roofline.errors import ModelLoadError
from tests import hostile
from tests.conftest import FIXTURES

GiB = 2**30


class Hang(Exception):
    """A case ran past its deadline."""


@contextlib.contextmanager
def deadline(seconds: float):
    def expire(signum, frame):
        raise Hang(f"no answer within {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run(capsys, *args, seconds: float = 60) -> tuple[int, str, str]:
    """`onnx-roofline ARGS` in-process: (exit code, stdout, stderr)."""
    with deadline(seconds):
        try:
            code = main([os.fspath(a) if isinstance(a, os.PathLike) else a for a in args])
        except SystemExit as exc:  # argparse's own exit
            code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def refused(capsys, fragment: str, *args, code: int = 2, seconds: float = 60) -> str:
    """The command fails with `code`, one line on stderr that contains `fragment`."""
    rc, _, err = run(capsys, *args, seconds=seconds)
    assert rc == code, err
    assert "Traceback" not in err
    assert err.count("\n") == 1 and err.startswith("onnx-roofline: error: "), err
    assert fragment in err, err
    return err


@pytest.fixture
def good(tmp_path) -> Path:
    return hostile.save(hostile.relu(), tmp_path / "m" / "relu.onnx")


# --- the model file itself ----------------------------------------------------------------------------


def test_model_file_kinds(tmp_path, capsys, good):
    (tmp_path / "dir.onnx").mkdir()
    hostile.fifo(tmp_path / "fifo.onnx")
    (tmp_path / "empty.onnx").write_bytes(b"")
    refused(capsys, "model file not found", tmp_path / "absent.onnx")
    refused(capsys, "not a regular file (a directory)", tmp_path / "dir.onnx")
    refused(capsys, "not a regular file (a FIFO)", tmp_path / "fifo.onnx", seconds=10)
    refused(capsys, "not a regular file (a character device)", "/dev/zero", seconds=10)
    refused(capsys, "not a valid ONNX model", tmp_path / "empty.onnx")
    refused(capsys, "model file path contains a null byte", f"{good}\0.onnx")


@pytest.mark.parametrize(
    "text, broken", [(b"Relu", b"R\xfflu"), (b"relu", b"r\xfflu"), (b"\x0a\x01x", b"\x0a\x01\xff")]
)
def test_an_op_type_or_name_that_is_not_utf8(tmp_path, capsys, text, broken):
    """Protobuf gives bytes, not str, for such a string field (the op type, the node's name, a value
    name): refused as not ONNX, never a TypeError from whatever reads it first."""
    data = hostile.relu().SerializeToString()
    assert data.count(text) >= 1
    path = tmp_path / "broken.onnx"
    path.write_bytes(data.replace(text, broken, 1))
    refused(capsys, "not valid UTF-8", path)


def test_a_newline_in_a_path_stays_on_one_line(tmp_path, capsys):
    err = refused(capsys, "model file not found", tmp_path / "two\nlines\x1b[31m.onnx")
    assert "two\\nlines\\x1b[31m.onnx" in err
    unknown = hostile.one_node("Frobnicate", ["x"], {})
    unknown.graph.node[0].name = "two\nlines"
    code, _, err = run(capsys, hostile.save(unknown, tmp_path / "named.onnx"))
    assert (
        code == 2 and "two\\nlines" in err and all(line.startswith("onnx-roofline: ") for line in err.splitlines())
    ), err  # nothing costed: exit 2


def test_an_oversized_model_is_refused_without_being_read(tmp_path, capsys):
    """A 3 GB hole named .onnx, and a valid model with 3 GB appended: refused by size, at once."""
    zeros = hostile.sparse_file(tmp_path / "zeros.onnx", 3 * GiB)
    appended = hostile.sparse_file(tmp_path / "appended.onnx", 3 * GiB, hostile.relu().SerializeToString())
    for path in (zeros, appended):
        start = time.perf_counter()
        refused(capsys, "over the 2,147,483,647-byte limit", path, seconds=10)
        assert time.perf_counter() - start < 5


# --- external data: --annotate and verify follow nothing outside the model's folder -------------------

LOCATIONS = {  # case → (the external weight's location and entries, the message fragment)
    "dotdot": (("../../../../etc/passwd",), {}, "leaves the model's folder"),
    "absolute": (("/etc/hostname",), {}, "is absolute"),
    "proc": (("/proc/self/environ",), {}, "is absolute"),
    "symlink-file": (("link.bin",), {}, "leads outside the model's folder (through a symlink)"),
    "symlink-dir": (("sub/hostname",), {}, "leads outside the model's folder (through a symlink)"),
    "symlink-proc": (("environ.bin",), {}, "leads outside the model's folder"),
    "dev-zero": (("zero.bin",), {}, "leads outside the model's folder"),
    "fifo": (("fifo.bin",), {}, "is not a regular file (a FIFO)"),
    "directory": (("dir.bin",), {}, "is not a regular file (a directory)"),
    "null-byte": (("w.bin\0/../../etc/passwd",), {}, "contains a null byte"),
    "empty": (("",), {}, "no location"),
    "offset-past-end": (("w.bin",), {"offset": "4096"}, "offset 4096 is past the end of 'w.bin' (128 bytes)"),
    "length-2^62": (("w.bin",), {"length": str(2**62)}, "runs past the end of 'w.bin'"),
    "negative-offset": (("w.bin",), {"offset": "-1"}, "offset '-1' is not a non-negative 64-bit integer"),
    "text-offset": (("w.bin",), {"offset": "zero"}, "offset 'zero' is not a non-negative 64-bit integer"),
    "unicode-offset": (("w.bin",), {"offset": "²"}, "offset '²' is not a non-negative 64-bit integer"),
    "huge-length": (("w.bin",), {"length": str(2**64)}, "is not a non-negative 64-bit integer"),
    "5000-digit-offset": (("w.bin",), {"offset": "9" * 5000}, "is not a non-negative 64-bit integer"),
}
CASES = sorted(LOCATIONS)


@pytest.fixture(scope="module")
def location_models(tmp_path_factory) -> dict[str, tuple[Path, str]]:
    """Each case's model, in one folder that also holds what the locations name."""
    folder = tmp_path_factory.mktemp("locations")
    hostile.weights_file(folder)
    for link, target in (
        ("link.bin", "/etc/hostname"),
        ("zero.bin", "/dev/zero"),
        ("environ.bin", "/proc/self/environ"),
        ("sub", "/etc"),
    ):
        os.symlink(target, folder / link)
    hostile.fifo(folder / "fifo.bin")
    (folder / "dir.bin").mkdir()
    return {
        name: (hostile.save(hostile.matmul_with(hostile.external(*args, **entries)), folder / f"{name}.onnx"), fragment)
        for name, (args, entries, fragment) in LOCATIONS.items()
    }


@pytest.mark.parametrize("case", CASES)
def test_annotate_refuses_a_location_it_may_not_follow(case, location_models, tmp_path, capsys):
    model, fragment = location_models[case]
    out = tmp_path / "out"
    out.mkdir()
    refused(capsys, fragment, model, "--annotate", out / "annotated.onnx", seconds=20)
    assert list(out.iterdir()) == []  # nothing written: no model, no data, no sidecar


@pytest.mark.parametrize("case", CASES)
def test_verify_refuses_a_location_before_synthesizing_anything(case, location_models, capsys, monkeypatch):
    from onnx_roofline.commands.verify import weights

    def synthesized(*args, **kwargs):
        raise AssertionError("weights were synthesized before the reference was refused")

    monkeypatch.setattr(weights, "synthetic", synthesized)
    model, fragment = location_models[case]
    refused(capsys, fragment, "verify", model, seconds=20)


def test_analyze_alone_never_needs_the_reference(location_models, capsys):
    """The analysis reads no weight: a hostile location does not stop it (nothing is followed)."""
    model, _ = location_models["dotdot"]
    code, out, _ = run(capsys, model, "--format", "json")
    assert code == 0 and json.loads(out)["totals"]["flops"] == 2 * 2 * 4 * 8


def test_a_location_not_in_utf8_is_one_line_whatever_the_options(tmp_path, capsys):
    """Protobuf gives bytes for a location that is not UTF-8 (so a fuzzed ResNet's did, CI of
    2026-12-06, a traceback where onnx's checker ran): the model cannot be loaded safely, said in one line."""
    data = hostile.matmul_with(hostile.external("w\u00e9.bin")).SerializeToString().replace("é".encode(), b"\x80\x80")
    model = tmp_path / "mm.onnx"
    model.write_bytes(data)
    for command in ([model], [model, "--partial"], ["check", model], ["verify", model]):
        refused(capsys, "an entry is not valid UTF-8", *command)


def test_node_metadata_not_in_utf8_is_read_as_text_where_it_is_read(tmp_path, capsys):
    """A node's metadata_props is decoded as it is read (model/text.py), not at load: bytes that
    are not UTF-8 (protobuf gives them as bytes) come out with U+FFFD in the breakdown's module
    names, the JSON and an annotated copy, and the plain command succeeds."""
    proto = hostile.matmul_with(numpy_helper.from_array(np.ones((4, 8), np.float32), "w"))
    helper.set_metadata_props(proto.graph.node[0], {"pkg.torch.onnx.name_scopes": "['', 'l\u00e9']"})
    data = proto.SerializeToString().replace("é".encode(), b"\x80\x80")
    model = tmp_path / "mm.onnx"
    model.write_bytes(data)
    (row,) = analyze(model).nodes
    assert row.metadata == {"pkg.torch.onnx.name_scopes": "['', 'l\ufffd\ufffd']"}  # each stray byte one U+FFFD
    code, out, err = run(capsys, model, "--by", "module")
    assert code == 0 and "Traceback" not in err
    code, _, err = run(capsys, model, "--annotate", tmp_path / "a.onnx")
    assert code == 0 and "Traceback" not in err
    annotated = onnx.load(tmp_path / "a.onnx", load_external_data=False).graph.node[0]
    assert "['', 'l\ufffd\ufffd']" in [entry.value for entry in annotated.metadata_props]


def test_annotate_and_verify_use_a_good_reference(tmp_path, capsys):
    folder = tmp_path / "m"
    folder.mkdir()
    hostile.weights_file(folder)
    model = hostile.save(hostile.matmul_with(hostile.external("w.bin")), folder / "mm.onnx")
    (tmp_path / "out").mkdir()
    code, _, err = run(capsys, model, "--annotate", tmp_path / "out" / "a.onnx")
    assert code == 0 and "weights: linked" in err
    assert (tmp_path / "out" / "a.onnx.data").read_bytes() == (folder / "w.bin").read_bytes()
    code, out, err = run(capsys, "verify", model)
    assert code == 0 and "1 loaded, 0 synthesized" in out and err == ""


def test_a_length_that_disagrees_with_the_dims_is_refused(tmp_path, capsys):
    hostile.weights_file(tmp_path, dims=(4, 4))  # 64 bytes where 4×8 floats need 128
    model = hostile.save(hostile.matmul_with(hostile.external("w.bin")), tmp_path / "mm.onnx")
    refused(capsys, "its external data is 64 bytes, its dims and type need 128", "verify", model)


# --- outputs never replace a file the model references --------------------------------------------------


def test_outputs_refuse_every_file_the_model_references(tmp_path, capsys):
    folder = tmp_path / "m"
    folder.mkdir()
    data = hostile.weights_file(folder)
    model = hostile.save(hostile.matmul_with(hostile.external("w.bin")), folder / "mm.onnx")
    os.link(data, tmp_path / "hardlink.bin")
    os.symlink(data, tmp_path / "symlink.bin")
    before = data.read_bytes(), model.read_bytes()
    for target in (data, model, tmp_path / "hardlink.bin", tmp_path / "symlink.bin"):
        refused(capsys, "refusing to overwrite the input", model, "-o", target)
    os.link(data, folder / "w.png")
    refused(capsys, "refusing to overwrite the input", model, "--plot", folder / "w.png")
    refused(capsys, "refusing to overwrite the input", model, "--annotate", data)
    refused(capsys, "refusing to overwrite the input", "verify", model, "-o", data)
    refused(capsys, "refusing to overwrite the input", "fuse", model, "-o", data)
    assert (data.read_bytes(), model.read_bytes()) == before


def test_a_constant_nodes_data_file_is_protected_without_reading_the_model_again(tmp_path, capsys, monkeypatch):
    """The analysis finds the data files as it loads the model (a Constant's value among them):
    `-o` onto one is refused, and the model is not parsed a second time to know it."""
    folder = tmp_path / "m"
    folder.mkdir()
    data = hostile.weights_file(folder, "c.bin")
    constant = onnx.helper.make_node("Constant", [], ["w"], value=hostile.external("c.bin"))
    graph = hostile.model(
        [constant, onnx.helper.make_node("MatMul", ["x", "w"], ["y"])],
        [("x", onnx.TensorProto.FLOAT, [2, 4])],
        [("y", onnx.TensorProto.FLOAT, [2, 8])],
    )
    model = hostile.save(graph, folder / "c.onnx")
    monkeypatch.setattr(
        "onnx_roofline.model.loader.referenced_files", lambda *a: pytest.fail("the model was parsed again")
    )
    refused(capsys, "refusing to overwrite the input", model, "-o", data)
    code, _, err = run(capsys, model, "-o", folder / "out.txt")
    assert code == 0 and (folder / "out.txt").is_file(), err


@pytest.mark.parametrize(
    "flags, fragment",
    [
        (["--plot", "x.jpg"], "plot file must end in .png or .svg"),
        (["--plot", "absent/x.png"], "output folder does not exist"),
        (["--annotate", "absent/a.onnx"], "output folder does not exist"),
        (["--top", "-1"], "--top: must be at least 0"),
        (["--depth", "0"], "--depth: must be at least 1"),
        (["--jobs", "0"], "--jobs: must be at least 1"),
    ],
)
def test_arguments_are_checked_before_the_analysis(tmp_path, capsys, good, monkeypatch, flags, fragment):
    """A bad output path or count is refused before any work: nothing printed, the analysis never run."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("onnx_roofline.analysis.analyze", lambda *a, **k: pytest.fail("the analysis ran"))
    code, out, err = run(capsys, good, *flags)
    assert code == 2 and out == "" and err.count("\n") == 1 and fragment in err, err


def test_output_paths_that_cannot_be_written(tmp_path, capsys, good):
    (tmp_path / "dir").mkdir()
    refused(capsys, "it is a directory", good, "-o", tmp_path / "dir")
    refused(capsys, "the file name is longer than 255 bytes", good, "-o", tmp_path / ("x" * 300))
    refused(capsys, "output folder does not exist", good, "-o", tmp_path / "absent" / "out.txt")
    refused(capsys, "output path contains a null byte", good, "-o", f"{tmp_path}/out\0.txt")
    code, _, err = run(capsys, good, "-o", tmp_path / ("y" * 250))  # long, but within NAME_MAX: written
    assert code == 0 and (tmp_path / ("y" * 250)).is_file(), err
    code, _, err = run(capsys, good, "-o", "/dev/null")  # written into, not replaced
    assert code == 0 and Path("/dev/null").is_char_device()
    os.symlink("real.json", tmp_path / "link.json")
    code, _, err = run(capsys, good, "--format", "json", "-o", tmp_path / "link.json")  # written through, the link kept
    assert code == 0 and (tmp_path / "link.json").is_symlink() and json.loads((tmp_path / "real.json").read_text())
    reader = hostile.fifo(tmp_path / "pipe")
    refused(capsys, "No such device or address", good, "-o", reader, seconds=10)  # a FIFO nobody reads: not waited on


# --- every other file argument ----------------------------------------------------------------------------


def test_special_files_as_spec_policy_baseline_or_report(tmp_path, capsys, good):
    fifo = hostile.fifo(tmp_path / "fifo.json")
    for args in (
        [good, "--hw", fifo],
        ["hw", "show", fifo],
        ["plot", fifo, "-o", tmp_path / "p.png"],
        ["check", good, "--policy", fifo],
        ["check", good, "--baseline", fifo, "--max-latency", "1s"],
    ):
        refused(capsys, "not a regular file (a FIFO)", *args, seconds=10)
    refused(capsys, "not a regular file (a character device)", good, "--hw", "/dev/zero", seconds=10)
    refused(
        capsys,
        "not a regular file (a character device)",
        "check",
        good,
        "--baseline",
        "/dev/zero",
        "--max-latency",
        "1s",
        seconds=10,
    )


def test_oversized_text_files_are_refused(tmp_path, capsys, good):
    big = hostile.sparse_file(tmp_path / "big.json", 65 * 2**20)
    refused(capsys, "over the 67,108,864-byte limit", good, "--hw", big)
    refused(capsys, "over the 67,108,864-byte limit", "plot", big, "-o", tmp_path / "p.png")


@pytest.mark.parametrize("depth", [100, 100_000])
def test_deeply_nested_json_and_toml(tmp_path, capsys, good, depth):
    spec_json = tmp_path / "spec.json"
    spec_json.write_text(hostile.nested_json(depth))
    spec_toml = tmp_path / "spec.toml"
    spec_toml.write_text(hostile.nested_toml(depth))
    policy = tmp_path / "roofline.toml"
    policy.write_text(hostile.nested_toml(depth).replace("memory_bandwidth = 1e12\n", ""))
    report = tmp_path / "report.json"
    report.write_text('{"schema_version": 1, "nodes": ' + hostile.nested_json(depth) + "}")
    for args in (
        [good, "--hw", spec_json],
        [good, "--hw", spec_toml],
        ["check", good, "--policy", policy],
        ["check", good, "--baseline", report, "--max-latency", "1s"],
        ["plot", report, "-o", tmp_path / "p.png"],
    ):
        refused(capsys, "nested deeper than 64 levels", *args)


def test_a_spec_whose_figures_make_times_infinite(tmp_path, capsys, good):
    spec = tmp_path / "tiny.toml"
    spec.write_text('name = "tiny"\nsource = "hostile"\nmemory_bandwidth = 5e-324\n[peaks.vector]\nfp32 = 5e-324\n')
    refused(
        capsys,
        "`memory_bandwidth` must be a positive number (B/s) between 1e3 and 1e21, got 5e-324",
        good,
        "--hw",
        spec,
    )
    spec.write_text('name = "huge"\nsource = "hostile"\nmemory_bandwidth = 1e300\n[peaks.vector]\nfp32 = 1e12\n')
    refused(capsys, "between 1e3 and 1e21", good, "--hw", spec)
    spec.write_text('{"name": "x", "source": "s", "memory_bandwidth": 1' + "0" * 5000 + "}")
    refused(capsys, "not valid TOML", good, "--hw", spec)  # the suffix says TOML
    spec.with_suffix(".json").write_text('{"name": "x", "source": "s", "memory_bandwidth": 1' + "0" * 5000 + "}")
    refused(capsys, "not valid JSON", good, "--hw", spec.with_suffix(".json"))


# --- absurd options ---------------------------------------------------------------------------------------


@pytest.fixture
def symbolic(tmp_path) -> Path:
    proto = hostile.model(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        [("x", TensorProto.FLOAT, ["batch", 4])],
        [("y", TensorProto.FLOAT, ["batch", 4])],
    )
    return hostile.save(proto, tmp_path / "sym.onnx")


@pytest.mark.parametrize(
    ("flag", "value", "fragment"),
    [
        ("--dim", "batch=99999999999999999999", "a dim must be at most 2^57"),
        ("--dim", "batch=" + "9" * 5000, "a dim must be at most 2^57"),
        ("--dim", "batch=²", "malformed --dim"),
        ("--dim", "batch=٣", "malformed --dim"),
        ("--dim", "batch=8.5", "malformed --dim"),
        ("--dim", "batch=-1", "malformed --dim"),
        ("--input", "x=99999999999999999999x4", "a dim must be at most 2^57"),
        ("--input", "x=²x4", "malformed --input"),
        ("--dim", "batch=144115188075855872", "larger than 2^57 bytes"),  # 2^57 rows of 4 floats
    ],
)
def test_absurd_dims(symbolic, capsys, flag, value, fragment):
    refused(capsys, fragment, symbolic, flag, value)


def test_verify_budget_refuses_before_running(tmp_path, capsys, symbolic):
    trips = hostile.save(hostile.loop(10**18), tmp_path / "loop.onnx")
    idle = hostile.save(hostile.loop(10**18, body_op="Identity"), tmp_path / "idle.onnx")
    big = hostile.save(
        hostile.matmul_with(hostile.external("absent.bin", dims=(50_000, 50_000))), tmp_path / "big.onnx"
    )
    huge = hostile.save(
        hostile.matmul_with(hostile.external("absent.bin", dims=(10**6, 10**6))), tmp_path / "huge.onnx"
    )
    start = time.perf_counter()
    refused(capsys, "FLOPs, over --max-flops 1e+12", "verify", trips, seconds=30)
    refused(capsys, "node runs, over --max-node-runs 1e+07", "verify", idle, seconds=30)
    refused(capsys, "the run would take 1e+10 bytes of memory (weights, feeds, activations)", "verify", big, seconds=30)
    refused(
        capsys, "the run would take 4e+12 FLOPs, over --max-flops", "verify", huge, seconds=30
    )  # 2·2·10¹²: before its 4 TB
    table = onnx.TensorProto(
        name="table", data_type=TensorProto.INT64, dims=[50_000, 50_000], data_location=TensorProto.EXTERNAL
    )
    table.external_data.add(key="location", value="absent.bin")
    lookup = hostile.model([helper.make_node("Gather", ["table", "i"], ["y"])], [("i", TensorProto.INT64, [2])],
                           [("y", TensorProto.INT64, [2, 50_000])], [table])  # fmt: skip
    indices = hostile.save(lookup, tmp_path / "lookup.onnx")  # integers go inline: onnxruntime takes one protobuf
    refused(
        capsys,
        "integer, quantized and packed weights inline (20.00 GB), exceeds protobuf's 2 GB",
        "verify",
        indices,
        seconds=30,
    )
    refused(
        capsys,
        "bytes of memory (weights, feeds, activations), over --max-memory 4.29e+09",
        "verify",
        symbolic,
        "--dim",
        "batch=1000000000",
        seconds=30,
    )
    refused(capsys, "over --max-memory 1e+03", "verify", symbolic, "--dim", "batch=1000", "--max-memory", "1kB")
    refused(capsys, "malformed amount", "verify", trips, "--max-flops", "lots")
    assert time.perf_counter() - start < 30
    code, out, _ = run(capsys, "verify", hostile.save(hostile.loop(3), tmp_path / "three.onnx"))
    assert code == 0 and "verdict: PASS" in out


def test_calibrate_checks_its_arguments_first(tmp_path, capsys):
    start = time.perf_counter()
    refused(
        capsys,
        "expected a positive integer from 256 up to 16384, got '10000000'",
        "hw",
        "calibrate",
        "--size",
        "10000000",
    )
    refused(capsys, "positive integer", "hw", "calibrate", "--size", "²")
    refused(capsys, "output folder does not exist", "hw", "calibrate", "-o", tmp_path / "absent" / "spec.toml")
    refused(capsys, "it is a directory", "calibrate", "-o", tmp_path)
    refused(capsys, "up to 4096", "verify", "m.onnx", "--threads", "99999999999")
    assert time.perf_counter() - start < 5  # nothing was measured


# --- invalid graphs ---------------------------------------------------------------------------------------

INVALID = {
    "cycle": (hostile.cycle, "the graph has a cycle: 'first' (Add) → 'second' (Relu) → 'first' (Add)"),
    "cycle-in-a-branch": (
        hostile.cycle_in_a_branch,
        "the graph has a cycle: 'first' (Add) → 'second' (Mul) → 'first' (Add)",
    ),
    "self-loop": (hostile.self_loop, "node 'selfish' (Add) reads its own output 'y'"),
    "two-writers": (hostile.two_writers, "value 'y' is written by two nodes: 'one' (Relu) and 'two' (Neg)"),
    "writes-an-input": (
        lambda: hostile.model(
            [helper.make_node("Relu", ["x"], ["x"], name="over")],
            [("x", TensorProto.FLOAT, [2])],
            [("x", TensorProto.FLOAT, [2])],
        ),
        "writes 'x', a graph input or initializer",
    ),
    "undefined": (
        lambda: _without_last_input(hostile.one_node("Add", ["x", "ghost"], {})),
        "value 'ghost' is used but never produced",
    ),
    "perm-float": (
        lambda: hostile.one_node("Transpose", ["x"], {"perm": [1.0, 0.0]}),
        "node 'transpose' (Transpose): Mismatched attribute type in 'perm'",
    ),
    "alpha-int": (
        lambda: hostile.one_node("Gemm", ["x", "w"], {"alpha": 1}, shape=(4, 4)),
        "node 'gemm' (Gemm): Mismatched attribute type in 'alpha'",
    ),
    "unknown-attribute": (
        lambda: hostile.one_node("Relu", ["x"], {"frobnicate": 1}),
        "Unrecognized attribute: frobnicate",
    ),
    "too-many-inputs": (
        lambda: hostile.one_node("Relu", ["x", "x2"], {}),
        "has input size 2 not in range [min=1, max=1]",
    ),
    "softmax-axis": (
        lambda: hostile.one_node("Softmax", ["x"], {"axis": 99}),
        "axis 99 is out of range for its rank-2 input 'x'",
    ),
    "perm-not-permutation": (
        lambda: hostile.one_node("Transpose", ["x"], {"perm": [0, 0]}),
        "perm [0, 0] is not a permutation of its rank-2 input's axes",
    ),
    "dim-negative": (
        lambda: hostile.with_weight_dim(-5),
        "tensor 'w' has a dim of -5",
    ),  # an input's or output's is dynamic (test_negative_dims.py)
    "dim-int64-min": (lambda: hostile.with_weight_dim(-(2**63)), "has a dim of -9223372036854775808"),
    "dim-2^62": (lambda: hostile.with_dim(2**62), "has a dim of 4611686018427387904: dims must be between 0 and 2^57"),
    "tensor-too-large": (lambda: hostile.with_dim(2**56), "larger than 2^57 bytes"),
    "ir-99": (lambda: hostile.relu(ir_version=99), "IR version 99"),
    "opset-99": (lambda: hostile.relu(opset=99), "opset 99 of domain 'ai.onnx'"),
    "opset-0": (lambda: hostile.relu(opset=0), "opset 0 of domain 'ai.onnx'"),
    "no-opset": (lambda: hostile.relu(opset=None), "no opset_import"),
    "recursive-functions": (hostile.recursive_functions, "model-local function 'f' calls itself: f → g → f"),
}


def _without_last_input(proto: onnx.ModelProto) -> onnx.ModelProto:
    proto.graph.input.pop()
    return proto


def _in_domain(proto: onnx.ModelProto, domain: str) -> onnx.ModelProto:
    proto.graph.node[0].domain = domain
    return proto


@pytest.mark.parametrize("case", sorted(INVALID))
def test_an_invalid_graph_is_refused_naming_the_node(case, tmp_path, capsys):
    build, fragment = INVALID[case]
    path = hostile.save(build(), tmp_path / f"{case}.onnx")
    refused(capsys, fragment, path)


def _dequantize(scale_shape: list[int], axis: int) -> onnx.ModelProto:
    """DequantizeLinear of an int8 [4] with the given scale shape and axis."""
    scale = numpy_helper.from_array(np.full(scale_shape, 0.5, np.float32), "scale")
    node = helper.make_node("DequantizeLinear", ["q", "scale"], ["y"], axis=axis, name="dq")
    graph = helper.make_graph(
        [node],
        "dq",
        [helper.make_tensor_value_info("q", TensorProto.INT8, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[scale],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])


def test_a_per_tensor_dequantize_ignores_its_axis_as_onnxruntime_does():
    # onnxruntime's ORT_ENABLE_ALL writes axis=1 on a per-tensor DequantizeLinear of a rank-1 bias
    # (a QDQ Segformer): the spec and the runtime ignore it, so it is not refused.
    import onnxruntime as ort

    for scale_shape in ([], [1]):
        model = _dequantize(scale_shape, axis=1)
        (y,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
            None, {"q": np.arange(4, dtype=np.int8)}
        )
        assert analyze(model).nodes[0].outputs[0].shape == y.shape == (4,)
    with pytest.raises(ModelLoadError, match="axis 1 is out of range for its rank-1 input 'q'"):
        analyze(_dequantize([4], axis=1))  # per-axis: the axis names the scale's dimension, and must exist


def test_an_op_onnx_does_not_define_is_reported_and_fails_check(tmp_path, capsys):
    """Not refused as invalid (onnxruntime registers ops of its own in the default domain; a custom
    domain is the user's): the node is uncosted — here the only node, so `analyze` has no answer
    and says why (exit 2) — and `check` fails on it by default."""
    for name, proto in (
        ("unknown", hostile.one_node("Frobnicate", ["x"], {})),
        ("undeclared", _in_domain(hostile.one_node("Mystery", ["x"], {}), "acme")),
    ):
        path = hostile.save(proto, tmp_path / f"{name}.onnx")
        code, out, err = run(capsys, path, "--format", "json")
        assert code == 2 and "Traceback" not in err and "none of the 1 nodes could be costed" in err and out == ""
        assert analyze(path).nodes[0].status != "ok"
        code, _, err = run(capsys, "check", path, "--max-latency", "1s")
        assert code == 1 and "Traceback" not in err


def test_fuse_on_a_cyclic_graph(tmp_path, capsys):
    refused(capsys, "the graph has a cycle", "fuse", hostile.save(hostile.cycle(), tmp_path / "cycle.onnx"))


def test_a_graph_out_of_topological_order_is_still_analyzed(tmp_path, capsys):
    """The spec asks for topological order; the analysis does not need it (only a real cycle is refused)."""
    proto = hostile.model(
        [helper.make_node("Neg", ["a"], ["y"], name="second"), helper.make_node("Relu", ["x"], ["a"], name="first")],
        [("x", TensorProto.FLOAT, [2])],
        [("y", TensorProto.FLOAT, [2])],
    )
    code, out, err = run(capsys, hostile.save(proto, tmp_path / "unsorted.onnx"), "--format", "json")
    assert code == 0, err
    assert [n["status"] for n in json.loads(out)["nodes"]] == ["ok", "ok"]


def test_markdown_escapes_names_from_the_model(tmp_path, capsys):
    path = hostile.save(hostile.named("<script>alert(1)</script>`|\n"), tmp_path / "xss.onnx")
    code, out, _ = run(capsys, path, "--format", "markdown")
    assert code == 0
    assert "<script" not in out and "&lt;script&gt;alert(1)&lt;/script&gt;" in out
    assert all(
        line.startswith(("|", "#", "<details>", "</details>", "**", "- ")) or not line for line in out.splitlines()
    )  # no line broken by a name


# --- processes of their own: signals, memory ----------------------------------------------------------------


def _cli_process(*args, memory: int | None = None, timeout: float = 60, interrupt_after: float | None = None):
    def limit():
        if memory is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    command = [sys.executable, "-m", "onnx_roofline", *map(os.fspath, args)]
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=limit
    ) as process:
        if interrupt_after is not None:
            time.sleep(interrupt_after)
            process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=timeout)
    return process.returncode, out, err


HELD_INTERRUPT = r"""
import importlib.abc, os, signal, sys
class Interrupting(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "onnx":
            os.kill(os.getpid(), signal.SIGINT)  # a Ctrl-C arriving as onnx starts to load
        return None
sys.meta_path.insert(0, Interrupting())
from onnx_roofline.commands import cli
try:
    cli._import_onnx()
except KeyboardInterrupt:
    print("onnx" in sys.modules, "onnx.onnx_cpp2py_export" in sys.modules)
"""


def test_a_ctrl_c_while_onnx_loads_waits_for_its_cpp_extension():
    # onnx's C++ extension calls back into Python as it loads; a KeyboardInterrupt raised there
    # cannot unwind through C++ and aborts the process (std::terminate, a traceback on stderr):
    # the interrupt is held until the import is done, then raised.
    result = subprocess.run([sys.executable, "-c", HELD_INTERRUPT], capture_output=True, text=True, timeout=120)
    assert (result.returncode, result.stdout.split(), result.stderr) == (0, ["True", "True"], "")


def test_sigint_during_start_up_is_a_quiet_130(good):
    """Ctrl-C at a fifth, a half and four fifths of a run (most of it is importing onnx, numpy and
    the analysis): exit 130, nothing on stderr. (Before Python's own start-up has installed its
    handler, some 20 ms, no program can answer; the first fifth of a run is well past that.)"""
    start = time.perf_counter()
    assert _cli_process(good)[0] == 0
    whole = time.perf_counter() - start
    for share in (0.2, 0.5, 0.8):
        code, _, err = _cli_process(good, interrupt_after=share * whole)
        assert "Traceback" not in err and "KeyboardInterrupt" not in err
        # 0: the run beat the signal; -2: it came during Python's shutdown, after the handlers are gone
        # (a shell reports that as 130 too)
        assert code in (130, 0, -signal.SIGINT) and err == "", (share, code, err)


def test_oversized_inputs_stay_under_a_memory_cap(tmp_path):
    """With 1.5 GiB of address space a 3 GB read or a 10 GB synthesis would fail: each is refused first."""
    appended = hostile.sparse_file(tmp_path / "appended.onnx", 3 * GiB, hostile.relu().SerializeToString())
    big = hostile.save(
        hostile.matmul_with(hostile.external("absent.bin", dims=(50_000, 50_000))), tmp_path / "big.onnx"
    )
    for args, fragment in (
        ([appended], "over the 2,147,483,647-byte limit"),
        (["verify", big], "over --max-memory"),
        ([tmp_path / "absent.onnx", "--hw", "/dev/zero"], "character device"),
    ):
        code, _, err = _cli_process(*args, memory=int(1.5 * GiB), timeout=60)
        assert code == 2 and fragment in err and err.count("\n") == 1, err


def test_onnxruntime_logs_stay_off_stderr(tmp_path, capsys):
    """An initializer listed among the graph inputs: onnxruntime warns about it in colour, unasked."""
    proto = hostile.relu()
    proto.graph.initializer.append(onnx.numpy_helper.from_array(np.ones(3, np.float32), "spare"))
    proto.graph.input.append(helper.make_tensor_value_info("spare", TensorProto.FLOAT, [3]))
    code, out, err = run(capsys, "verify", hostile.save(proto, tmp_path / "spare.onnx"))
    assert code == 0 and err == "" and "verdict: PASS" in out


def test_the_fixtures_still_pass_every_check(capsys):
    """The validation refuses what is invalid, not what is unusual: every shipped fixture loads."""
    from onnx_roofline.model.loader import load_model

    fixtures = sorted(FIXTURES.glob("*.onnx"))
    assert fixtures
    for path in fixtures:
        load_model(path)
