"""Pooling (onnx_roofline/costs/rules/pooling.py): FLOPs per window over the taps inside the input, checked
against hand arithmetic and against a brute-force enumeration of every window. f32 = 4 bytes."""

from __future__ import annotations

import itertools

import pytest

from onnx_roofline.costs.rules.pooling import _axis_taps
from tests.conftest import analyze_node


def costs(node):
    c = node.cost
    return c.flops, c.transcendentals, c.bytes_read, c.bytes_written


def test_resnet_stem_max_pool():
    node = analyze_node(
        "MaxPool",
        [("x", "float32", [1, 64, 112, 112])],
        ["y"],
        attrs={"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
    )
    assert node.outputs[0].shape == (1, 64, 56, 56)
    # per axis: tap 0 sits on the pad for output 0 (55 real), taps 1 and 2 are real for all 56: 167
    taps = 64 * 167 * 167
    assert costs(node) == (taps - 64 * 56 * 56, 0, 64 * 112 * 112 * 4, 64 * 56 * 56 * 4)  # t − 1 compares


def test_max_pool_indices_output_is_written():
    node = analyze_node(
        "MaxPool",
        [("x", "float32", [1, 1, 4, 4])],
        ["y", ("i", "int64", [1, 1, 2, 2])],
        attrs={"kernel_shape": [2, 2], "strides": [2, 2]},
    )
    assert costs(node) == (16 - 4, 0, 16 * 4, 4 * 4 + 4 * 8)


def test_average_pool_is_one_flop_per_real_tap():
    node = analyze_node(
        "AveragePool", [("x", "float32", [1, 1, 4, 4])], ["y"], attrs={"kernel_shape": [2, 2], "strides": [2, 2]}
    )
    assert costs(node) == (4 * (3 + 1), 0, 16 * 4, 4 * 4)  # 3 adds + 1 divide per 2×2 window


@pytest.mark.parametrize("count_include_pad", [0, 1])
def test_average_pool_padding_is_not_arithmetic(count_include_pad):
    node = analyze_node(
        "AveragePool",
        [("x", "float32", [1, 1, 3, 3])],
        ["y"],
        attrs={"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": count_include_pad},
    )
    # per axis: the edge outputs see 2 real taps, the middle one 3 → 7; 7·7 = 49, not 9·9 = 81
    assert node.cost.flops == 49


def test_ceil_mode_overhang_is_not_counted():
    node = analyze_node(
        "MaxPool",
        [("x", "float32", [1, 1, 5, 5])],
        ["y"],
        attrs={"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1},
    )
    assert node.outputs[0].shape == (1, 1, 3, 3)
    # per axis: outputs 0 and 1 see 2 taps, output 2 only 1 (its second tap is past the end) → 5
    assert node.cost.flops == 5 * 5 - 9


def test_dilations():
    node = analyze_node(
        "MaxPool", [("x", "float32", [1, 1, 7, 7])], ["y"], attrs={"kernel_shape": [3, 3], "dilations": [2, 2]}
    )
    assert node.outputs[0].shape == (1, 1, 3, 3)  # span 5 in 7
    assert node.cost.flops == 9 * (9 - 1)
    avg = analyze_node(
        "AveragePool",
        [("x", "float32", [1, 1, 7, 7])],
        ["y"],
        attrs={"kernel_shape": [3, 3], "dilations": [2, 2]},
        opset=19,
    )
    assert avg.cost.flops == 9 * 9


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER", "VALID"])
def test_auto_pad(auto_pad):
    node = analyze_node(
        "AveragePool", [("x", "float32", [1, 1, 5])], ["y"], attrs={"kernel_shape": [2], "auto_pad": auto_pad}
    )
    # SAME: 5 outputs, one pad (end for UPPER, start for LOWER): 5·2 taps − 1 on the pad; VALID: 4·2
    assert node.cost.flops == (8 if auto_pad == "VALID" else 9)


def _brute_force_taps(size_in, size_out, kernel, stride, dilation, pad_begin):
    windows = itertools.product(range(size_out), range(kernel))
    return sum(0 <= o * stride + j * dilation - pad_begin < size_in for o, j in windows)


@pytest.mark.parametrize(
    "size_in, kernel, stride, dilation, pad_begin, pad_end, ceil",
    [
        (s, k, st, d, pb, pe, c)
        for s, k, st, d, pb, pe, c in itertools.product(
            [1, 5, 8, 13], [1, 2, 3, 5], [1, 2, 3], [1, 2], [0, 1, 2], [0, 1, 2], [False, True]
        )
        if pb < k and pe < k and s + pb + pe >= (k - 1) * d + 1
    ],
)
def test_axis_taps_match_brute_force(size_in, kernel, stride, dilation, pad_begin, pad_end, ceil):
    span = (kernel - 1) * dilation + 1
    steps = size_in + pad_begin + pad_end - span
    size_out = (-(-steps // stride) if ceil else steps // stride) + 1
    expected = _brute_force_taps(size_in, size_out, kernel, stride, dilation, pad_begin)
    assert _axis_taps(size_in, size_out, kernel, stride, dilation, pad_begin) == expected


@pytest.mark.parametrize("p, transcendentals", [(1, 0), (2, 4), (3, 16 + 4)])
def test_lp_pool(p, transcendentals):
    node = analyze_node(
        "LpPool", [("x", "float32", [1, 1, 4, 4])], ["y"], attrs={"kernel_shape": [2, 2], "strides": [2, 2], "p": p}
    )
    # 16 taps: 16 |x|^p (abs or square) + 4·3 adds; roots per output (p ≠ 1), pows per tap (p ∉ {1, 2})
    assert costs(node) == (16 + 12, transcendentals, 16 * 4, 4 * 4)


def test_global_pools():
    x = [("x", "float32", [1, 2048, 7, 7])]
    elements = 2048 * 49
    assert costs(analyze_node("GlobalAveragePool", x, ["y"])) == (elements, 0, elements * 4, 2048 * 4)
    assert analyze_node("GlobalMaxPool", x, ["y"]).cost.flops == 2048 * 48
    lp = analyze_node("GlobalLpPool", x, ["y"])
    assert (lp.cost.flops, lp.cost.transcendentals) == (2 * elements - 2048, 2048)  # p = 2: squares, adds, sqrt


def test_max_unpool_is_a_scatter():
    node = analyze_node(
        "MaxUnpool",
        [("x", "float32", [1, 1, 2, 2]), ("i", "int64", [1, 1, 2, 2])],
        ["y"],
        attrs={"kernel_shape": [2, 2], "strides": [2, 2]},
    )
    assert node.outputs[0].shape == (1, 1, 4, 4)
    assert costs(node) == (0, 0, 4 * 4 + 4 * 8, 16 * 4)


def test_pools_run_on_the_vector_unit():
    assert analyze_node("GlobalAveragePool", [("x", "float32", [1, 8, 2, 2])], ["y"]).unit == "vector"
