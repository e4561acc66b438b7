"""The install a user gets. `.ci/run` runs the suite a second time against `pip install .` with no
extras (ONNX_ROOFLINE_CORE_INSTALL=1), from a copy of the repository without the package's source:
there these tests prove that the package under test is the installed one, that none of the extras'
packages crept in, and that the analysis is complete on the hardest shipped fixture."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

import onnx_roofline
from onnx_roofline import Sizing
from tests.conftest import FIXTURES, REPO

CORE = os.environ.get("ONNX_ROOFLINE_CORE_INSTALL") == "1"
core_only = pytest.mark.skipif(not CORE, reason="runs in the core-install environment of .ci/run")


@core_only
def test_the_package_under_test_is_the_installed_one():
    installed = Path(onnx_roofline.__file__).resolve()
    assert "site-packages" in installed.parts, installed
    assert not (REPO / "onnx_roofline").exists()  # the copy the tests run from has no source tree


@core_only
@pytest.mark.parametrize("extra", ["torch", "transformers", "sympy", "skl2onnx", "onnxruntime_genai"])
def test_no_extra_is_installed(extra):
    assert importlib.util.find_spec(extra) is None, f"{extra} is installed: this is not the core environment"


@core_only
def test_packaged_data_is_there():
    """Files the package reads at run time ship with it (a missing package-data entry shows here)."""
    from onnx_roofline.costs.hardware import list_hardware

    assert {hw.key for hw in list_hardware()} >= {"h100", "a100"}


def test_the_torchscript_decode_fixture_is_complete_on_this_install():
    """The first round's silent failure: without sympy, onnxruntime's symbolic inference failed
    quietly and 791 of 2,614 nodes stayed unknown (1.9 µs instead of 265 µs)."""
    report = onnx_roofline.analyze(
        FIXTURES / "gpt2_decode_fp32_torchscript.onnx", sizing=Sizing(dims={"batch": 1, "past_sequence": 1023})
    )
    assert report.uncosted.count == 0, report.uncosted.message
    assert report.model.node_count == 2614
    assert report.totals.time_s > 200e-6  # 124 M parameters of fp32 weights at 3.35 TB/s alone take 149 µs
