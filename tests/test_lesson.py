"""The lesson's numbers (shared/roofline-lesson.txt), from the CLI's JSON on one-node models."""

from __future__ import annotations

import json

import onnx
import pytest

from onnx_roofline.commands.cli import main
from tests.conftest import one_node_model

H100_PEAK_FP16 = 989.4e12  # FLOP/s, dense tensor core (H100 SXM5 whitepaper)
H100_BANDWIDTH = 3.35e12  # B/s HBM3


def cli_json(tmp_path, model: onnx.ModelProto, *flags: str) -> dict:
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    out = tmp_path / "report.json"
    assert main([str(path), "--hw", "h100", "--format", "json", "-o", str(out), *flags]) == 0
    return json.loads(out.read_text())


def test_h100_ridge_is_295(tmp_path):
    model = one_node_model("MatMul", [("a", "float16", [64, 64]), ("b", "float16", [64, 64])], ["y"])
    (node,) = cli_json(tmp_path, model)["nodes"]
    assert node["ridge"] == pytest.approx(H100_PEAK_FP16 / H100_BANDWIDTH)  # 295.34
    assert node["ridge"] == pytest.approx(295, abs=1)


def test_resnet_conv3x_3x3_conv_is_just_compute_bound(tmp_path):
    model = one_node_model(
        "Conv",
        [("x", "float16", [1, 128, 28, 28]), ("w", "float16", [128, 128, 3, 3])],
        ["y"],
        attrs={"pads": [1, 1, 1, 1]},
    )
    (node,) = cli_json(tmp_path, model)["nodes"]
    assert node["outputs"][0]["shape"] == [1, 128, 28, 28]
    assert node["flops"] == 2 * 1 * 128 * 28 * 28 * 128 * 3 * 3 == 231_211_008
    in_bytes = 1 * 128 * 28 * 28 * 2  # fp16 input
    weight_bytes = 128 * 128 * 3 * 3 * 2
    out_bytes = 1 * 128 * 28 * 28 * 2
    assert node["bytes"] == in_bytes + weight_bytes + out_bytes == 696_320
    assert node["intensity"] == pytest.approx(231_211_008 / 696_320)  # ≈ 332.05
    assert node["intensity"] == pytest.approx(332.05, abs=0.01)
    assert node["bound"] == "compute"
    assert node["unit"] == "matrix"


@pytest.mark.parametrize(
    ("tokens", "bound"),
    [(1024, "compute"), (1, "memory")],  # prefill vs decode MLP up-projection
)
def test_gpt2_mlp_matmul_prefill_vs_decode(tmp_path, tokens, bound):
    model = one_node_model("MatMul", [("a", "float16", [tokens, 768]), ("b", "float16", [768, 3072])], ["y"])
    (node,) = cli_json(tmp_path, model)["nodes"]
    assert node["flops"] == 2 * tokens * 768 * 3072
    assert node["bytes"] == 2 * (tokens * 768 + 768 * 3072 + tokens * 3072)  # fp16: A, B read, Y written
    assert node["bound"] == bound


def test_time_is_the_larger_of_compute_and_memory_time(tmp_path):
    model = one_node_model("MatMul", [("a", "float16", [1, 768]), ("b", "float16", [768, 3072])], ["y"])
    (node,) = cli_json(tmp_path, model)["nodes"]
    flops, moved = 2 * 768 * 3072, 2 * (768 + 768 * 3072 + 3072)
    assert node["time_s"] == pytest.approx(max(flops / H100_PEAK_FP16, moved / H100_BANDWIDTH))
    assert node["time_s"] == pytest.approx(moved / H100_BANDWIDTH)  # decode: memory-bound
