"""Elementwise rules: per output element counts, broadcasting, the same input twice, casts and views."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto

from tests.conftest import analyze_node

SHAPE = [2, 3, 4]
N = 2 * 3 * 4  # output elements of the one-input cases


def unary(op_type, dtype="float32", attrs=None, opset=21, out_dtype=None):
    return analyze_node(op_type, [("x", dtype, SHAPE)], [("y", out_dtype or dtype, SHAPE)], attrs, opset=opset)


def binary(op_type, dtype="float32", attrs=None, out_dtype=None, opset=21):
    """a [2, 3, 4] op b [4] (broadcast)."""
    inputs = [("a", dtype, SHAPE), ("b", dtype, [4])]
    return analyze_node(op_type, inputs, [("y", out_dtype or dtype, SHAPE)], attrs, opset=opset)


# (op, input dtype, attrs, opset, FLOPs per element, transcendentals per element)
UNARY = [
    ("Neg", "float32", None, 21, 1, 0),
    ("Abs", "float32", None, 21, 1, 0),
    ("Reciprocal", "float32", None, 21, 1, 0),  # 1 / x
    ("Floor", "float32", None, 21, 1, 0),
    ("Ceil", "float32", None, 21, 1, 0),
    ("Round", "float32", None, 21, 1, 0),
    ("Sign", "float32", None, 21, 1, 0),
    *[
        (op, "float32", None, 21, 0, 1)
        for op in (
            "Sqrt",
            "Exp",
            "Log",
            "Erf",
            "Tanh",
            "Sigmoid",
            "Sin",
            "Cos",
            "Tan",
            "Asin",
            "Acos",
            "Atan",
            "Sinh",
            "Cosh",
            "Asinh",
            "Acosh",
            "Atanh",
        )
    ],
    ("Relu", "float32", None, 21, 1, 0),  # max(0, x)
    ("LeakyRelu", "float32", None, 21, 2, 0),  # multiply, select
    ("ThresholdedRelu", "float32", None, 21, 1, 0),  # compare-select
    ("HardSigmoid", "float32", None, 21, 4, 0),  # multiply, add, min, max
    ("HardSwish", "float32", None, 21, 5, 0),  # HardSigmoid + multiply by x
    ("Elu", "float32", None, 21, 3, 1),  # exp; subtract 1, multiply alpha, select
    ("Selu", "float32", None, 21, 4, 1),  # exp; multiply, subtract, select, multiply gamma
    ("Celu", "float32", None, 21, 6, 1),  # exp; divide, subtract, multiply, min, max, add
    ("Mish", "float32", None, 21, 2, 3),  # exp, log, tanh; add 1, multiply x
    ("Softplus", "float32", None, 21, 1, 2),  # exp, log; add 1
    ("Softsign", "float32", None, 21, 3, 0),  # abs, add, divide
    ("Shrink", "float32", None, 21, 3, 0),  # two compares, one add
    ("Swish", "float32", None, 24, 2, 1),  # sigmoid; multiply alpha, multiply x
    ("Not", "bool", None, 21, 1, 0),
    ("BitwiseNot", "int32", None, 21, 1, 0),
]


@pytest.mark.parametrize(("op_type", "dtype", "attrs", "opset", "flops", "transcendentals"), UNARY)
def test_unary_counts_per_output_element(op_type, dtype, attrs, opset, flops, transcendentals):
    node = unary(op_type, dtype, attrs, opset)
    assert node.cost.flops == flops * N
    assert node.cost.transcendentals == transcendentals * N
    size = node.inputs[0].bits // 8
    assert node.cost.bytes_read == N * size  # x read once
    assert node.cost.bytes_written == N * size  # y written once
    assert node.unit == "vector"


# (op, input dtype, output dtype, attrs, FLOPs per output element)
BINARY = [
    ("Add", "float32", None, None, 1),
    ("Sub", "float32", None, None, 1),
    ("Mul", "float32", None, None, 1),
    ("Div", "float32", None, None, 1),
    ("Mod", "float32", None, {"fmod": 1}, 1),
    ("Mod", "int64", None, None, 1),
    ("Equal", "float32", "bool", None, 1),
    ("Less", "float32", "bool", None, 1),
    ("Greater", "float32", "bool", None, 1),
    ("LessOrEqual", "float32", "bool", None, 1),
    ("GreaterOrEqual", "float32", "bool", None, 1),
    ("And", "bool", None, None, 1),
    ("Or", "bool", None, None, 1),
    ("Xor", "bool", None, None, 1),
    ("BitShift", "uint8", None, {"direction": "LEFT"}, 1),
    ("BitwiseAnd", "int32", None, None, 1),
    ("BitwiseOr", "int32", None, None, 1),
    ("BitwiseXor", "int32", None, None, 1),
    ("PRelu", "float32", None, None, 2),  # multiply by slope, select
]


@pytest.mark.parametrize(("op_type", "dtype", "out_dtype", "attrs", "flops"), BINARY)
def test_binary_broadcast_counts_output_elements_and_reads_each_input_at_its_size(
    op_type, dtype, out_dtype, attrs, flops
):
    node = binary(op_type, dtype, attrs, out_dtype)
    size = node.inputs[0].bits // 8
    assert node.cost.flops == flops * N  # a [2,3,4] with b [4]: 24 output elements
    assert node.cost.transcendentals == 0
    assert node.cost.bytes_read == (N + 4) * size  # a, and b at its own 4 elements
    assert node.cost.bytes_written == N * node.outputs[0].bits // 8


def test_broadcast_both_ways_follows_the_output():
    node = analyze_node("Add", [("x", "float16", [8, 1, 5]), ("y", "float16", [1, 6, 5])], ["z"])
    assert node.outputs[0].shape == (8, 6, 5)
    assert node.cost.flops == 8 * 6 * 5  # one add per output element
    assert node.cost.bytes_read == (8 * 5 + 6 * 5) * 2  # fp16 inputs at their own sizes
    assert node.cost.bytes_written == 8 * 6 * 5 * 2
    assert node.dtype == "fp16"


def test_same_input_twice_is_read_once():
    node = analyze_node("Mul", [("x", "float16", [1000]), "x"], [("y", "float16", [1000])])
    assert node.cost.flops == 1000  # x·x: two operands, one multiply each
    assert node.cost.bytes_read == 1000 * 2  # x read once
    assert node.cost.bytes_written == 1000 * 2


def test_elementwise_is_memory_bound_on_h100():
    node = analyze_node("Add", [("x", "float16", [1, 1024, 768]), ("y", "float16", [1, 1024, 768])], ["z"])
    elements = 1024 * 768
    assert node.cost.bytes == 3 * elements * 2  # 2 reads + 1 write, fp16
    assert node.placement.intensity == pytest.approx(elements / (3 * elements * 2))  # 1/6 FLOP/byte
    assert node.bound == "memory"


def test_where_selects_per_output_element_at_the_data_dtype():
    node = analyze_node(
        "Where",
        [("c", "bool", [4, 1]), ("x", "float16", [4, 8]), ("y", "float16", [8])],
        [("z", "float16", [4, 8])],
    )
    assert node.cost.flops == 4 * 8  # one select per output element
    assert node.cost.bytes_read == 4 * 1 + 4 * 8 * 2 + 8 * 2  # bool cond, fp16 x, fp16 y
    assert node.dtype == "fp16"  # the peak follows x, not the bool condition


@pytest.mark.parametrize(("approximate", "flops"), [("none", 4), ("tanh", 8)])
def test_gelu(approximate, flops):
    node = unary("Gelu", attrs={"approximate": approximate}, opset=20)
    # none: x/√2, +1, ·x, ·0.5; tanh: x³ (2), ·0.044715, +x, ·√(2/π), +1, ·x, ·0.5
    assert node.cost.flops == flops * N
    assert node.cost.transcendentals == N  # one erf or tanh


def test_swiglu():
    node = analyze_node(
        "SwiGLU", [("a", "float32", SHAPE), ("b", "float32", SHAPE)], [("y", "float32", SHAPE)], opset=28
    )
    assert node.cost.flops == 3 * N  # alpha·a, ·a, ·b
    assert node.cost.transcendentals == N  # sigmoid
    assert node.cost.bytes_read == 2 * N * 4


@pytest.mark.parametrize(
    ("exponent", "flops", "transcendentals"),
    [
        (2.0, 1, 0),  # x·x
        (3.0, 2, 0),  # x·x·x
        (4.0, 2, 0),  # (x²)²
        (1.0, 0, 0),  # a copy
        (-1.0, 1, 0),  # 1/x
        (-2.0, 2, 0),  # 1/(x·x)
        (0.5, 0, 1),  # sqrt
        (1.7, 0, 1),  # pow
    ],
)
def test_pow_with_a_constant_exponent(exponent, flops, transcendentals):
    node = analyze_node(
        "Pow",
        [("x", "float32", SHAPE), ("e", "float32", [])],
        [("y", "float32", SHAPE)],
        initializers={"e": np.array(exponent, dtype=np.float32)},
    )
    assert node.cost.flops == flops * N
    assert node.cost.transcendentals == transcendentals * N
    assert node.cost.bytes_read == N * 4 + 4  # x, and the scalar exponent


def test_pow_with_a_tensor_exponent_is_one_transcendental_per_element():
    node = binary("Pow")
    assert node.cost.flops == 0
    assert node.cost.transcendentals == N
    varying = analyze_node(
        "Pow",
        [("x", "float32", SHAPE), ("e", "float32", [4])],
        [("y", "float32", SHAPE)],
        initializers={"e": np.array([2, 2, 2, 3], dtype=np.float32)},
    )
    assert varying.cost.transcendentals == N  # not one value: pow


@pytest.mark.parametrize(("op_type", "per_element"), [("Sum", 2), ("Max", 2), ("Min", 2), ("Mean", 3)])
def test_variadic_with_three_inputs(op_type, per_element):
    node = analyze_node(
        op_type,
        [("a", "float32", [2, 3, 4]), ("b", "float32", [3, 1]), ("c", "float32", [4])],
        [("y", "float32", [2, 3, 4])],
    )
    assert node.cost.flops == per_element * N  # 2 adds/compares; Mean adds a divide by 3
    assert node.cost.bytes_read == (N + 3 + 4) * 4  # each input at its own size
    assert node.cost.bytes_written == N * 4


def test_variadic_with_one_input_is_a_copy():
    node = analyze_node("Sum", [("a", "float32", SHAPE)], [("y", "float32", SHAPE)])
    assert node.cost.flops == 0
    assert node.cost.bytes == 2 * N * 4  # still read and written


def test_variadic_same_input_twice():
    node = analyze_node("Max", [("a", "float32", SHAPE), "a"], [("y", "float32", SHAPE)])
    assert node.cost.flops == N  # max(a, a): one compare per element
    assert node.cost.bytes_read == N * 4  # a read once


def test_clip_before_opset_11_applies_both_attribute_bounds():
    assert unary("Clip", opset=6).cost.flops == 2 * N  # min, max default to ∓FLT_MAX
    assert unary("Clip", attrs={"min": 0.0, "max": 6.0}, opset=6).cost.flops == 2 * N


@pytest.mark.parametrize(
    ("bounds", "flops"),
    [(["lo", "hi"], 2), (["lo"], 1), (["", "hi"], 1), ([], 0)],
)
def test_clip_from_opset_11_counts_the_bound_inputs_given(bounds, flops):
    initializers = {name: np.array(0.0, dtype=np.float32) for name in bounds if name}
    inputs = [("x", "float32", SHAPE)] + [(name, "float32", []) if name else "" for name in bounds]
    node = analyze_node("Clip", inputs, [("y", "float32", SHAPE)], initializers=initializers, opset=13)
    assert node.cost.flops == flops * N
    assert node.cost.bytes_read == N * 4 + 4 * len(initializers)  # x, and each scalar bound


def test_cast_converts_without_arithmetic():
    node = analyze_node("Cast", [("x", "float32", [10])], [("y", "float16", [10])], {"to": TensorProto.FLOAT16})
    assert node.cost.flops == 0
    assert node.cost.bytes_read == 10 * 4
    assert node.cost.bytes_written == 10 * 2


def test_cast_to_a_sub_byte_type_writes_packed_bits():
    node = analyze_node("Cast", [("x", "float32", [10])], [("y", "int4", [10])], {"to": TensorProto.INT4})
    assert node.cost.bytes_written == (10 * 4 + 7) // 8  # 40 bits → 5 bytes


def test_cast_like_does_not_read_the_target_data():
    node = analyze_node("CastLike", [("x", "float32", [10]), ("t", "float16", [3])], [("y", "float16", [10])])
    assert node.cost.flops == 0
    assert node.cost.bytes_read == 10 * 4  # only x: t gives its dtype, its 3 elements are not read
    assert node.cost.bytes_written == 10 * 2


@pytest.mark.parametrize(
    ("op_type", "attrs", "opset"), [("Identity", None, 21), ("BitCast", {"to": TensorProto.INT32}, 26)]
)
def test_views_move_nothing(op_type, attrs, opset):
    node = analyze_node(op_type, [("x", "float32", SHAPE)], ["y"], attrs, opset=opset)
    assert node.cost.flops == 0
    assert node.cost.bytes == 0
    assert node.time_s == 0


def test_is_nan_and_is_inf():
    for op_type in ("IsNaN", "IsInf"):
        node = unary(op_type, out_dtype="bool")
        assert node.cost.flops == N
        assert node.cost.bytes == N * 4 + N * 1  # float32 read, bool written
