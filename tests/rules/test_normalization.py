"""Normalization rules. Standardizing n elements in L groups: 5n + 2L FLOPs and L square roots
(mean n, x − mean n, variance 2n, ε and reciprocal 2L, normalize n), plus n per scale and per bias."""

from __future__ import annotations

import pytest

from tests.conftest import analyze_node

X = ("x", "float32", [2, 3, 8])
N = 2 * 3 * 8


def test_layer_norm_last_axis_with_scale_and_bias():
    node = analyze_node(
        "LayerNormalization",
        [X, ("scale", "float32", [8]), ("bias", "float32", [8])],
        [("y", "float32", [2, 3, 8])],
        opset=17,
    )
    rows = 2 * 3
    assert node.cost.flops == 5 * N + 2 * rows + N + N == 7 * 48 + 12  # standardize, scale, shift
    assert node.cost.transcendentals == rows  # one sqrt per row
    assert node.cost.bytes_read == (N + 8 + 8) * 4  # x, scale, bias
    assert node.cost.bytes_written == N * 4


def test_layer_norm_without_bias_and_from_axis_1():
    node = analyze_node(
        "LayerNormalization",
        [X, ("scale", "float32", [3, 8])],
        [("y", "float32", [2, 3, 8])],
        {"axis": 1},
        opset=17,
    )
    rows = 2  # statistics over [3, 8]
    assert node.cost.flops == 6 * N + 2 * rows  # standardize and scale, no shift
    assert node.cost.transcendentals == rows


def test_layer_norm_statistics_outputs_are_written():
    node = analyze_node(
        "LayerNormalization",
        [X, ("scale", "float32", [8])],
        [("y", "float32", [2, 3, 8]), ("mean", "float32", [2, 3, 1]), ("inv_std", "float32", [2, 3, 1])],
        opset=17,
    )
    assert node.cost.bytes_written == (N + 6 + 6) * 4


def test_gpt2_layer_norm_is_memory_bound():
    node = analyze_node(
        "LayerNormalization",
        [("h", "float16", [1, 1024, 768]), ("g", "float16", [768]), ("b", "float16", [768])],
        [("y", "float16", [1, 1024, 768])],
        opset=17,
    )
    elements = 1024 * 768
    assert node.cost.flops == 7 * elements + 2 * 1024
    assert node.cost.bytes == (2 * elements + 2 * 768) * 2  # x, gamma, beta read; y written; fp16
    assert node.placement.intensity == pytest.approx(1.75, abs=0.01)  # ~7 FLOPs per 4 bytes
    assert node.bound == "memory"


def test_rms_norm():
    node = analyze_node("RMSNormalization", [X, ("scale", "float32", [8])], [("y", "float32", [2, 3, 8])], opset=23)
    rows = 6
    assert node.cost.flops == 2 * N + 2 * rows + 2 * N  # mean of squares, ε and 1/rms, ·1/rms ·scale
    assert node.cost.transcendentals == rows


@pytest.mark.parametrize(("opset", "param_shape"), [(21, [6]), (18, [3])])
def test_group_norm(opset, param_shape):
    node = analyze_node(
        "GroupNormalization",
        [("x", "float32", [2, 6, 4, 4]), ("scale", "float32", param_shape), ("bias", "float32", param_shape)],
        [("y", "float32", [2, 6, 4, 4])],
        {"num_groups": 3},
        opset=opset,
    )
    n, groups = 2 * 6 * 4 * 4, 2 * 3
    assert node.cost.flops == 7 * n + 2 * groups
    assert node.cost.transcendentals == groups


def test_instance_norm():
    node = analyze_node(
        "InstanceNormalization",
        [("x", "float32", [2, 6, 4, 4]), ("scale", "float32", [6]), ("b", "float32", [6])],
        [("y", "float32", [2, 6, 4, 4])],
    )
    n, groups = 2 * 6 * 4 * 4, 2 * 6
    assert node.cost.flops == 7 * n + 2 * groups
    assert node.cost.transcendentals == groups


BN_INPUTS = [("x", "float32", [2, 6, 4, 4])] + [(name, "float32", [6]) for name in ("scale", "b", "mean", "var")]


def test_batch_norm_inference_folds_the_statistics():
    node = analyze_node("BatchNormalization", BN_INPUTS, [("y", "float32", [2, 6, 4, 4])], opset=15)
    n, channels = 2 * 6 * 4 * 4, 6
    assert node.cost.flops == 2 * n + 4 * channels  # x·s + t per element; s, t per channel
    assert node.cost.transcendentals == channels  # sqrt(var + ε) per channel
    assert node.cost.bytes_read == (n + 4 * channels) * 4  # x and the four per-channel tensors
    assert node.cost.bytes_written == n * 4


def test_batch_norm_inference_before_opset_9():
    node = analyze_node("BatchNormalization", BN_INPUTS, [("y", "float32", [2, 6, 4, 4])], opset=7)
    assert node.cost.flops == 2 * 192 + 4 * 6


def test_batch_norm_training_computes_batch_statistics():
    node = analyze_node(
        "BatchNormalization",
        BN_INPUTS,
        [("y", "float32", [2, 6, 4, 4]), ("running_mean", "float32", [6]), ("running_var", "float32", [6])],
        {"training_mode": 1},
        opset=15,
    )
    n, channels = 192, 6
    assert node.cost.flops == 7 * n + 2 * channels + 2 * 3 * channels  # standardize, affine, 2 running stats
    assert node.cost.transcendentals == channels


def test_mean_variance_normalization_default_axes():
    node = analyze_node(
        "MeanVarianceNormalization", [("x", "float32", [2, 6, 4, 4])], [("y", "float32", [2, 6, 4, 4])], opset=13
    )
    n, groups = 192, 6  # statistics over N, H, W per channel
    assert node.cost.flops == 5 * n + 3 * groups
    assert node.cost.transcendentals == groups


@pytest.mark.parametrize(("p", "transcendentals"), [(2, 6), (1, 0)])
def test_lp_normalization(p, transcendentals):
    node = analyze_node("LpNormalization", [X], [("y", "float32", [2, 3, 8])], {"p": p})
    lines = 6  # of 8 along the last axis
    assert node.cost.flops == 3 * N - lines  # square or abs, sum, divide
    assert node.cost.transcendentals == transcendentals  # p = 2: one sqrt per line


@pytest.mark.parametrize(
    ("size", "window_adds"),
    [
        (3, 1 + 2 + 2 + 2 + 1),  # windows [0,1] [0,2] [1,3] [2,4] [3,4] over 5 channels
        (4, 2 + 3 + 3 + 2 + 1),  # windows [0,2] [0,3] [1,4] [2,4] [3,4]: one before, two after
    ],
)
def test_lrn(size, window_adds):
    node = analyze_node("LRN", [("x", "float32", [1, 5, 2, 2])], [("y", "float32", [1, 5, 2, 2])], {"size": size})
    n, positions = 20, 4
    assert node.cost.flops == 4 * n + positions * window_adds  # square, ·alpha/size, +bias, divide; window sums
    assert node.cost.transcendentals == n  # one pow per element


def test_layer_normalization_before_opset_17_defaults_axis_to_last():
    """onnxruntime defines LayerNormalization in ai.onnx below opset 17 (no ONNX schema, no defaults):
    axis −1 applies. x [2, 4, 8], Scale and B: 7n + 2L FLOPs, L square roots (n = 64, L = 8 rows)."""
    from tests.conftest import analyze_node

    node = analyze_node(
        "LayerNormalization",
        [("x", "float32", [2, 4, 8]), ("s", "float32", [8]), ("b", "float32", [8])],
        [("y", "float32", [2, 4, 8])],
        opset=13,
    )
    assert node.cost.flops == 7 * 64 + 2 * 8
    assert node.cost.transcendentals == 8
