"""Labels the deployed view prints must be true of the model (issue 29): a KV-cache mode only
where there is a cache, no blended peak above the hardware table's, no charge for a mask whose
readers were all fused, zero points of constant weights folded at load, and a fused attention's
useful FLOPs without the graph-only work. Expected figures are arithmetic from the graphs' sizes."""

from __future__ import annotations

import json

import pytest

from onnx_roofline import analyze
from onnx_roofline.commands.cli import main
from onnx_roofline.commands.whatif import Session, sweep
from onnx_roofline.views.deployed import COPY, INPLACE, deploy
from tests.conftest import FIXTURES

RESNET = FIXTURES / "resnet50_fp32.onnx"
DECODE = FIXTURES / "gpt2_decode_fp16.onnx"


def _out(capsys, argv) -> str:
    assert main(argv) == 0, argv
    return capsys.readouterr().out


# --- the KV-cache mode, only where there is a cache ------------------------------------------------


def test_no_kv_cache_mode_is_printed_for_a_model_without_a_cache(capsys):
    for argv in ([str(RESNET), "--top", "1"], [str(RESNET), "--view", "deployed", "--top", "1"]):
        assert "KV cache" not in _out(capsys, argv)  # neither the written table's deployed line nor the deployed notes
    data = json.loads(_out(capsys, [str(RESNET), "--view", "deployed", "--format", "json"]))
    assert data["kv_cache"] is None and not any("KV cache" in note for note in data["notes"])
    assert deploy(analyze(RESNET, dims={"batch": 1}), INPLACE).kv_cache is None  # whatever was asked: there is nothing to update


def test_a_decoder_still_says_its_kv_cache_mode(capsys):
    dims = ["--dim", "batch=1", "--dim", "past_sequence=15"]
    assert "KV cache copy" in _out(capsys, [str(DECODE), *dims, "--top", "1"])
    assert "KV cache inplace" in _out(capsys, [str(DECODE), *dims, "--view", "deployed", "--kv-cache", "inplace", "--top", "1"])
    data = json.loads(_out(capsys, [str(DECODE), *dims, "--view", "deployed", "--format", "json"]))
    assert data["kv_cache"] == COPY and any(note.startswith("KV cache copy") for note in data["notes"])


def test_a_study_of_a_model_without_a_cache_says_no_mode(capsys):
    result = sweep(Session(RESNET, kv_cache=INPLACE), {"batch": [1]}, "deployed")
    assert result.setup["kv_cache"] is None
    assert "KV cache" not in _out(capsys, ["sweep", str(RESNET), "--dim", "batch=1", "--view", "deployed"])
    decoder = sweep(Session(DECODE, dims={"past_sequence": 15}, kv_cache=INPLACE), {"batch": [1]}, "deployed")
    assert decoder.setup["kv_cache"] == INPLACE
