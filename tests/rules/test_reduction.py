"""Reduction rules: n − m combines, per-element and per-output work, Softmax lines, scans and TopK."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import analyze_node

X = ("x", "float32", [2, 3, 4])
N = 2 * 3 * 4  # input elements


def reduce(op_type, out_shape, opset=18, axes=(1,), keepdims=1, out_dtype="float32"):
    """Axes as an input (from opset 18; 13 for ReduceSum) or as an attribute (before); Arg* take `axis`."""
    attrs, inputs, initializers = {"keepdims": keepdims}, [X], {}
    if op_type in ("ArgMax", "ArgMin"):
        attrs["axis"] = axes[0]
    elif opset >= (13 if op_type == "ReduceSum" else 18):
        inputs.append(("axes", "int64", [len(axes)]))
        initializers["axes"] = np.array(axes, dtype=np.int64)
    else:
        attrs["axes"] = list(axes)
    return analyze_node(op_type, inputs, [("y", out_dtype, out_shape)], attrs, initializers, opset=opset)


# n = 24 input elements, m = 8 outputs (axis 1 of [2, 3, 4] reduced): n − m = 16 combines
@pytest.mark.parametrize(
    ("op_type", "flops", "transcendentals"),
    [
        ("ReduceSum", 24 - 8, 0),  # adds
        ("ReduceMax", 24 - 8, 0),  # compares
        ("ReduceMin", 24 - 8, 0),
        ("ReduceProd", 24 - 8, 0),  # multiplies
        ("ReduceMean", (24 - 8) + 8, 0),  # adds, one divide per output
        ("ReduceL1", 24 + (24 - 8), 0),  # abs, adds
        ("ReduceSumSquare", 24 + (24 - 8), 0),  # squares, adds
        ("ReduceL2", 24 + (24 - 8), 8),  # squares, adds; one sqrt per output
        ("ReduceLogSum", 24 - 8, 8),  # adds; one log per output
        ("ReduceLogSumExp", (24 - 8) + 24 + (24 - 8) + 8, 24 + 8),  # max, x − max, sum, + max; exps, logs
    ],
)
def test_reduce_axes_input(op_type, flops, transcendentals):
    node = reduce(op_type, [2, 1, 4])
    assert node.cost.flops == flops
    assert node.cost.transcendentals == transcendentals
    assert node.cost.bytes_read == N * 4 + 8  # x, and the int64 axes input (tiny but real)
    assert node.cost.bytes_written == 8 * 4


def test_reduce_sum_axes_input_from_opset_13():
    node = reduce("ReduceSum", [2, 4], opset=13, keepdims=0)
    assert node.cost.flops == 24 - 8
    assert node.cost.bytes_read == N * 4 + 8


@pytest.mark.parametrize("op_type", ["ReduceSum", "ReduceMean", "ReduceMax"])
def test_reduce_axes_attribute_before_the_input_form(op_type):
    node = reduce(op_type, [2, 4], opset=11, keepdims=0)
    assert node.cost.flops == (24 if op_type == "ReduceMean" else 24 - 8)
    assert node.cost.bytes_read == N * 4  # no axes input


def test_reduce_everything_by_default():
    node = analyze_node("ReduceSum", [X], [("y", "float32", [1, 1, 1])], opset=13)
    assert node.cost.flops == 24 - 1  # 23 adds


def test_reduce_noop_with_empty_axes_is_a_copy():
    node = analyze_node("ReduceSum", [X], [("y", "float32", [2, 3, 4])], {"noop_with_empty_axes": 1}, opset=13)
    assert node.cost.flops == 0
    assert node.cost.bytes == 2 * N * 4


@pytest.mark.parametrize("op_type", ["ArgMax", "ArgMin"])
def test_arg_reductions_compare_and_write_int64(op_type):
    node = reduce(op_type, [2, 3], axes=(2,), keepdims=0, out_dtype="int64", opset=13)
    assert node.cost.flops == 24 - 6  # 3 compares in each of 6 lines of 4
    assert node.cost.bytes_written == 6 * 8  # int64 indices


def test_softmax_last_axis():
    node = analyze_node("Softmax", [X], [("y", "float32", [2, 3, 4])], opset=13)
    lines, length = 2 * 3, 4
    per_line = (length - 1) + length + (length - 1) + length  # max, x − max, sum, divide
    assert node.cost.flops == lines * per_line == 4 * N - 2 * lines == 84
    assert node.cost.transcendentals == N  # one exp per element
    assert node.cost.bytes == 2 * N * 4


def test_softmax_middle_axis():
    node = analyze_node("Softmax", [X], [("y", "float32", [2, 3, 4])], {"axis": 1}, opset=13)
    assert node.cost.flops == 4 * N - 2 * (2 * 4)  # 8 lines of 3


def test_softmax_before_opset_13_coerces_to_2d():
    node = analyze_node("Softmax", [X], [("y", "float32", [2, 3, 4])], opset=11)
    assert node.cost.flops == 4 * N - 2 * 2  # axis defaults to 1: 2 lines of 3·4 = 12
    assert node.cost.transcendentals == N


def test_log_softmax():
    node = analyze_node("LogSoftmax", [X], [("y", "float32", [2, 3, 4])], {"axis": 1}, opset=13)
    lines = 2 * 4  # of 3 elements
    assert node.cost.flops == 4 * N - 2 * lines  # max, x − max, sum, − log(sum)
    assert node.cost.transcendentals == N + lines  # an exp per element, a log per line


def test_hardmax():
    node = analyze_node("Hardmax", [X], [("y", "float32", [2, 3, 4])], opset=13)
    assert node.cost.flops == 6 * (4 - 1)  # an argmax per line of 4
    assert node.cost.transcendentals == 0


def test_gpt2_attention_softmax_is_memory_bound():
    shape = [1, 12, 1024, 1024]  # batch, heads, queries, keys
    node = analyze_node("Softmax", [("s", "float16", shape)], [("p", "float16", shape)], opset=13)
    elements = 12 * 1024 * 1024
    assert node.cost.flops == 4 * elements - 2 * 12 * 1024
    assert node.cost.bytes == 2 * elements * 2  # read and write the T×T scores, fp16
    assert node.bound == "memory"


@pytest.mark.parametrize(("op_type", "opset"), [("CumSum", 14), ("CumProd", 26)])
@pytest.mark.parametrize(("exclusive", "per_line"), [(0, 3 - 1), (1, 3 - 2)])
def test_cumulative_along_a_constant_axis(op_type, opset, exclusive, per_line):
    node = analyze_node(
        op_type,
        [X, ("axis", "int64", [])],
        [("y", "float32", [2, 3, 4])],
        {"exclusive": exclusive},
        {"axis": np.array(1, dtype=np.int64)},
        opset=opset,
    )
    assert node.cost.flops == 2 * 4 * per_line  # 8 lines of 3
    assert node.cost.bytes_read == N * 4 + 8  # x and the int64 axis


def test_cumsum_with_an_unknown_axis_counts_the_upper_bound():
    node = analyze_node("CumSum", [X, ("axis", "int64", [])], [("y", "float32", [2, 3, 4])], opset=14)
    assert node.cost.flops == N  # one add per element: the line length is unknown


@pytest.mark.parametrize(("k", "per_line"), [(1, 16 - 1), (2, 16 * 1), (4, 16 * 2), (5, 16 * 3), (16, 16 * 4)])
def test_top_k_compares_against_a_k_heap(k, per_line):
    node = analyze_node(
        "TopK",
        [("x", "float32", [2, 3, 16]), ("k", "int64", [1])],
        [("values", "float32", [2, 3, k]), ("indices", "int64", [2, 3, k])],
        initializers={"k": np.array([k], dtype=np.int64)},
        opset=11,
    )
    assert node.cost.flops == 6 * per_line  # 6 lines of 16: max(15, 16·⌈log2 k⌉)
    assert node.cost.bytes_read == 2 * 3 * 16 * 4 + 8  # x, and the int64 K
    assert node.cost.bytes_written == 6 * k * 4 + 6 * k * 8  # float32 values, int64 indices


def test_top_k_attribute_form_before_opset_10():
    node = analyze_node(
        "TopK",
        [("x", "float32", [2, 16, 3])],
        [("values", "float32", [2, 4, 3]), ("indices", "int64", [2, 4, 3])],
        {"k": 4, "axis": 1},
        opset=1,
    )
    assert node.cost.flops == 6 * 16 * 2  # 6 lines of 16 along axis 1, ⌈log2 4⌉ = 2
