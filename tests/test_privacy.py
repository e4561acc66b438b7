"""Nothing leaves the machine (issue 32): onnxruntime 1.32 writes a device id and an events
database under $HOME/.cache/Microsoft/ from its import on, for its uploader, unless
ORT_DISABLE_TELEMETRY=1 is set before it loads. The package sets it; a run of `verify` (which
loads onnxruntime) with a fresh, empty $HOME must leave that folder empty."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import FIXTURES


def _run_in_fresh_home(tmp_path, *args):
    home = tmp_path / "home"
    home.mkdir()
    env = {
        key: value for key, value in os.environ.items() if key != "ORT_DISABLE_TELEMETRY"
    }  # the package, not the test, must set it
    env.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"))
    result = subprocess.run(
        [sys.executable, "-m", "onnx_roofline", *args],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return result, sorted(str(p.relative_to(home)) for p in home.rglob("*"))


def test_verify_writes_nothing_in_home(tmp_path):
    result, written = _run_in_fresh_home(
        tmp_path, "verify", str(FIXTURES / "gpt2_decode_fp16.onnx"), "--dim", "batch=1", "--dim", "past_sequence=3"
    )
    assert result.returncode == 0, result.stderr
    assert written == []


@pytest.mark.skipif(sys.platform != "linux", reason="onnxruntime's 1DS uploader is the Linux build's")
def test_the_check_above_would_see_telemetry(tmp_path):
    """Without the package's setting, importing onnxruntime writes under $HOME: the test above can fail."""
    home = tmp_path / "home"
    home.mkdir()
    env = {key: value for key, value in os.environ.items() if key != "ORT_DISABLE_TELEMETRY"}
    env.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"))
    subprocess.run([sys.executable, "-c", "import onnxruntime"], env=env, cwd=tmp_path, check=True, timeout=120)
    if not any(home.rglob("*")):
        pytest.skip("this onnxruntime build writes no telemetry files")
    assert any(home.rglob("*"))
