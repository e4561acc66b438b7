"""The analysis on the shipped fixtures: nothing uncosted, and the lesson's figures come out."""

from __future__ import annotations

import pytest

from onnx_roofline import Sizing, analyze
from tests.conftest import FIXTURES

RESNET = {"batch": 1}
PREFILL = {"batch": 1, "sequence": 1024}
DECODE = {"batch": 1, "past_sequence": 1023}

FIXTURE_DIMS = {
    "resnet50_fp32": RESNET,
    "resnet50_fp16": RESNET,
    "resnet50_fp32_torchscript": RESNET,
    "gpt2_prefill_fp32": PREFILL,
    "gpt2_prefill_fp16": PREFILL,
    "gpt2_prefill_fp32_torchscript": PREFILL,
    "gpt2_decode_fp32": DECODE,
    "gpt2_decode_fp16": DECODE,
    "gpt2_decode_fp32_torchscript": DECODE,
}


def fixture(name: str):
    path = FIXTURES / f"{name}.onnx"
    if not path.exists():
        pytest.fail(f"fixture {path.name} is missing: regenerate with `python -m exporters all --out fixtures/`")
    return path


def matrix_flops(report) -> int:
    return sum(n.cost.flops for n in report.nodes if n.unit == "matrix")


@pytest.mark.parametrize("name", sorted(FIXTURE_DIMS))
def test_every_node_of_every_fixture_is_costed(name):
    """Zero unsupported or unknown-shape nodes, from either torch exporter; external data absent."""
    report = analyze(fixture(name), hw="h100", sizing=Sizing(dims=FIXTURE_DIMS[name]))
    assert report.unsupported == {}
    assert report.status_counts == {"ok": len(report.nodes)}


@pytest.mark.parametrize("name", ["resnet50_fp32", "resnet50_fp32_torchscript"])
def test_resnet50_matmul_conv_flops_match_the_published_count(name):
    """ResNet-50 at 224×224 is 4.09 G multiply-adds (He et al. 2016, Table 1 reports 3.8 G for the
    convolutions; torchvision's model card lists 4.09 GMACs with the fc layer): 2 FLOPs each."""
    report = analyze(fixture(name), hw="h100", sizing=Sizing(dims=RESNET))
    assert matrix_flops(report) == pytest.approx(2 * 4.09e9, rel=0.01)


def test_resnet50_conv3x_3x3_conv_is_the_lesson_s():
    """The second conv of a conv3_x (layer2) bottleneck: 128→128 channels, 3×3, 28×28 out."""
    report = analyze(fixture("resnet50_fp16"), hw="h100", sizing=Sizing(dims=RESNET))
    convs = [
        n
        for n in report.nodes
        if n.op_type == "Conv"
        and "layer2" in n.name
        and n.inputs[1].shape == (128, 128, 3, 3)
        and n.inputs[0].shape == n.outputs[0].shape == (1, 128, 28, 28)
    ]
    assert len(convs) >= 3  # layer2.1, .2, .3 (layer2.0's 3×3 has stride 2 from 56×56)
    for conv in convs:
        assert conv.cost.flops == 2 * 128 * 28 * 28 * 128 * 3 * 3 + 128 * 28 * 28  # + one add per output for the bias
        assert conv.cost.bytes == 2 * (128 * 28 * 28 + 128 * 128 * 9 + 128 + 128 * 28 * 28)  # fp16 x, W, b, y
        assert conv.bound == "compute"


def _by_module(report, suffix: str):
    return [n for n in report.nodes if n.unit == "matrix" and suffix in n.name]


def test_gpt2_prefill_matmuls_compute_bound_decode_memory_bound_fp16():
    """The lesson's picture on h100 in FP16: prefill's MLP and QKV projection are compute-bound,
    decode's (batch 1) matmuls are all memory-bound. The intensity of a [T,D]×[D,F] product is
    T·D·F/(T·D + D·F + T·F) (fp16: 2 FLOPs per multiply-add, 2 bytes per element, the 2s cancel)."""
    prefill = analyze(fixture("gpt2_prefill_fp16"), hw="h100", sizing=Sizing(dims=PREFILL))
    decode = analyze(fixture("gpt2_decode_fp16"), hw="h100", sizing=Sizing(dims=DECODE))
    t = 1024
    for module, d, f in (("mlp/c_fc", 768, 3072), ("mlp/c_proj", 3072, 768), ("attn/c_attn", 768, 2304)):
        nodes = _by_module(prefill, module)
        assert len(nodes) == 12
        for node in nodes:
            flops = 2 * t * d * f + t * f  # + the bias add
            moved = 2 * (t * d + d * f + f + t * f)  # fp16 x, W, b, y
            assert (node.cost.flops, node.cost.bytes) == (flops, moved)
            assert node.bound == "compute"
    # The attention output projection (768×768) sits just below the ridge at T = 1024:
    # 1024·768·768/(2·1024·768 + 768²) ≈ 279 < 295 — memory-bound, as the formula says.
    assert all(n.bound == "memory" for n in _by_module(prefill, "attn/c_proj"))
    assert all(n.bound == "memory" for n in decode.nodes if n.unit == "matrix")
    assert decode.totals.memory_bound_time_share > 0.95


def _flop_counter_total(module, *inputs) -> int:
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        module(*inputs)
    return counter.get_total_flops()


@pytest.fixture(scope="module")
def gpt2():
    """Eager attention: FlopCounterMode has no formula for the CPU SDPA kernel, so with SDPA it
    would silently count the attention products as zero. The FLOPs are the same either way."""
    pytest.importorskip("torch")
    from exporters.gpt2 import build_gpt2

    model = build_gpt2(seed=0)
    model.config._attn_implementation = "eager"
    return model


def test_gpt2_prefill_flops_match_torch_flop_counter(gpt2):
    import torch

    from exporters.gpt2 import GPT2Prefill

    expected = _flop_counter_total(GPT2Prefill(gpt2), torch.zeros(1, 1024, dtype=torch.long))
    report = analyze(fixture("gpt2_prefill_fp32"), hw="h100", sizing=Sizing(dims=PREFILL))
    assert matrix_flops(report) == pytest.approx(expected, rel=0.01)


def test_gpt2_decode_flops_match_torch_flop_counter(gpt2):
    import torch

    from exporters.gpt2 import GPT2Decode

    past = [torch.zeros(1, 12, 1023, 64) for _ in range(24)]
    expected = _flop_counter_total(GPT2Decode(gpt2), torch.zeros(1, 1, dtype=torch.long), *past)
    report = analyze(fixture("gpt2_decode_fp32"), hw="h100", sizing=Sizing(dims=DECODE))
    assert matrix_flops(report) == pytest.approx(expected, rel=0.01)
