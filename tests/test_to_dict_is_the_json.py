"""`report.to_dict()` is the object `--format json` prints (issue 41; DESIGN.md's JSON contract,
the README's Python API): on each fixture, both views, and for a deployed report too."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

import onnx_roofline as r
from onnx_roofline import Sizing
from onnx_roofline.commands.cli import main
from onnx_roofline.views.deployed import deploy
from tests.conftest import FIXTURES

ALL_FIXTURES = sorted(p.name for p in FIXTURES.glob("*.onnx"))


def cli_json(*args: str) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main([*args, "--format", "json", "-q"]) == 0
    return json.loads(out.getvalue())


def as_json(data: dict) -> dict:
    """What a JSON text of `data` reads back as (tuples become lists, as the CLI's text has them)."""
    return json.loads(json.dumps(data))


@pytest.mark.parametrize("fixture", ALL_FIXTURES)
def test_to_dict_equals_format_json(fixture):
    path = str(FIXTURES / fixture)
    report = r.analyze(path, hw="h100", sizing=Sizing(default_dims=True))
    printed = cli_json(path)
    assert set(printed["views"]) == {"written", "deployed"}  # both views, as the README says
    assert as_json(report.to_dict()) == printed


def test_a_deployed_report_is_its_json_too():
    path = str(FIXTURES / "gpt2_decode_fp16.onnx")
    deployed = deploy(r.analyze(path, hw="h100", sizing=Sizing(default_dims=True)))
    assert as_json(deployed.to_dict()) == cli_json(path, "--view", "deployed")


def test_the_other_view_is_planned_once_and_travels():
    import pickle

    report = r.analyze(str(FIXTURES / "resnet50_fp16.onnx"), hw="h100", sizing=Sizing(default_dims=True))
    assert report.other is report.other and report.other.view == "deployed"
    back = pickle.loads(pickle.dumps(report))
    assert as_json(back.to_dict()) == as_json(report.to_dict())
