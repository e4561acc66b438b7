"""Which files a command touches, seen by an audit hook (`sys.addaudithook`): `analyze` opens the
model file and nothing else; `--annotate` and `verify` read nothing outside the model's folder,
and write only the outputs asked for. Hooks cannot be removed, so each run is a process of its
own; a warm-up run of the same command on a copy first, so imports are not counted.

Python's hooks see what Python opens (onnx parses from memory, onnxruntime gets the model as
bytes with every weight inline, so neither opens a file of its own in these runs)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import hostile

SCRIPT = r"""
import json, os, sys
import onnx, onnx_roofline
from onnx_roofline.commands.cli import main

warm_up, command = json.loads(sys.argv[1]), json.loads(sys.argv[2])
main(warm_up)
ignored = tuple(os.path.realpath(p) + os.sep for p in
                {sys.prefix, sys.base_prefix, os.path.dirname(onnx_roofline.__file__), os.path.dirname(onnx.__file__)})
events = []

def hook(event, args):
    if event not in ("open", "os.link", "shutil.copyfile", "os.rename", "os.replace", "os.remove", "os.listdir",
                     "os.scandir", "os.chmod", "os.symlink", "os.mkdir"):
        return
    named = args[:1] if event in ("open", "os.listdir", "os.scandir", "os.chmod", "os.remove", "os.mkdir") else args[:2]
    paths = [os.fsdecode(a) for a in named if isinstance(a, (str, bytes, os.PathLike))]
    if event == "open" and not paths:
        return  # an open of a descriptor already held
    if event == "open" and os.path.realpath(paths[0]).startswith(ignored):
        return  # the interpreter and packages' own files
    flags = args[2] if event == "open" and isinstance(args[2], int) else 0
    mode = args[1] if event == "open" and isinstance(args[1], str) else ""
    writes = bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT)) or any(c in mode for c in "wax+")
    events.append([event, [os.path.realpath(p) for p in paths], writes])

sys.addaudithook(hook)
code = main(command)
sys.stdout.flush()
print("\n@@" + json.dumps({"code": code, "events": events}))
"""


def audited(warm_up: list, command: list) -> tuple[int, list]:
    """(exit code, [[event, [paths], writes], ...]) of `command` after `warm_up`, in a fresh process."""
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            SCRIPT,
            json.dumps([os.fspath(a) for a in warm_up]),
            json.dumps([os.fspath(a) for a in command]),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in result.stderr, result.stderr
    report = json.loads(result.stdout.rsplit("\n@@", 1)[1])
    return report["code"], report["events"]


def inside(path: str, folder: Path) -> bool:
    return Path(path).is_relative_to(folder.resolve())


@pytest.fixture
def folders(tmp_path) -> tuple[Path, Path, Path]:
    """(model's folder, its copy for the warm-up, an output folder), each model with its weights file."""
    made = []
    for name in ("model", "warm"):
        folder = tmp_path / name
        folder.mkdir()
        hostile.weights_file(folder)
        hostile.save(hostile.matmul_with(hostile.external("w.bin")), folder / "mm.onnx")
        made.append(folder)
    (tmp_path / "out").mkdir()
    (tmp_path / "warm-out").mkdir()
    return made[0], made[1], tmp_path / "out"


def test_analyze_opens_only_the_model(folders):
    model, warm, _ = folders
    code, events = audited([warm / "mm.onnx", "--format", "json"], [model / "mm.onnx", "--format", "json"])
    assert code == 0
    assert events == [["open", [str((model / "mm.onnx").resolve())], False]]


def test_annotate_reads_only_inside_the_model_folder_and_writes_only_its_outputs(folders):
    model, warm, out = folders
    code, events = audited(
        [warm / "mm.onnx", "--annotate", out.parent / "warm-out" / "a.onnx"],
        [model / "mm.onnx", "--annotate", out / "a.onnx"],
    )
    assert code == 0
    reads = {p for event, paths, writes in events if event == "open" and not writes for p in paths}
    written = {
        p
        for event, paths, writes in events
        if writes or event in ("os.replace", "os.chmod", "os.remove")
        for p in paths
    }
    linked = [paths for event, paths, _ in events if event in ("os.link", "shutil.copyfile")]
    assert reads and all(inside(p, model) for p in reads), reads
    assert written and all(inside(p, out) for p in written), written
    assert linked and all(inside(src, model) and inside(dst, out) for src, dst in linked), linked


def test_verify_reads_only_inside_the_model_folder_and_writes_nothing(folders):
    model, warm, _ = folders
    code, events = audited(["verify", warm / "mm.onnx"], ["verify", model / "mm.onnx"])
    assert code == 0
    assert all(event == "open" and not writes for event, _, writes in events), events
    assert {p for _, paths, _ in events for p in paths} == {
        str((model / name).resolve()) for name in ("mm.onnx", "w.bin")
    }


@pytest.mark.parametrize("command", ["annotate", "verify"])
def test_a_hostile_location_opens_nothing_outside(folders, command):
    model, warm, out = folders
    target = out.parent / "secret.txt"
    target.write_text("not for the model\n")
    hostile.save(hostile.matmul_with(hostile.external("../secret.txt", dims=(1, 1))), model / "escape.onnx")
    os.symlink(target, model / "link.bin")
    hostile.save(hostile.matmul_with(hostile.external("link.bin", dims=(1, 1))), model / "link.onnx")
    shutil.copy(model / "escape.onnx", warm / "escape.onnx")
    for name in ("escape.onnx", "link.onnx"):
        if command == "annotate":
            args = [
                [warm / "mm.onnx", "--annotate", out.parent / "warm-out" / "a.onnx"],
                [model / name, "--annotate", out / "a.onnx"],
            ]
        else:
            args = [["verify", warm / "mm.onnx"], ["verify", model / name]]
        code, events = audited(*args)
        assert code == 2
        assert {(event, tuple(paths), writes) for event, paths, writes in events} == {
            ("open", (str((model / name).resolve()),), False)
        }
    assert list(out.iterdir()) == []
