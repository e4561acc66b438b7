"""Quantization rules. Per element: dequantize (q − zp)·scale = 2 FLOPs (1 without a zero point);
quantize saturate(round(x / scale) + zp) = 5 (divide, round, add, clamp low/high; 4 without). A zero
point that is a constant 0 counts as absent. Integer matmuls: zero-point subtracts on the operands,
2·M·K·N, then a requantize or a dequantizing multiply per output."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import analyze_node

MS = "com.microsoft"
B, S, D = 2, 16, 768
N = B * S * D


def test_quantize_linear_with_and_without_zero_point():
    with_zp = analyze_node(
        "QuantizeLinear",
        [("x", "float32", [B, S, D]), ("s", "float32", []), ("z", "uint8", [])],
        [("y", "uint8", [B, S, D])],
    )
    assert with_zp.cost.flops == 5 * N  # divide, round, add zero point, clamp low, clamp high
    assert with_zp.cost.bytes_read == N * 4 + 4 + 1
    assert with_zp.cost.bytes_written == N  # uint8
    without = analyze_node("QuantizeLinear", [("x", "float32", [B, S, D]), ("s", "float32", [])], ["y"])
    assert without.cost.flops == 4 * N


def test_quantize_linear_constant_zero_zero_point_subtracts_nothing():
    node = analyze_node(
        "QuantizeLinear",
        [("x", "float32", [B, S, D]), ("s", "float32", []), ("z", "int8", [])],
        [("y", "int8", [B, S, D])],
        initializers={"z": np.array(0, dtype=np.int8)},
    )
    assert node.cost.flops == 4 * N


def test_quantize_linear_to_int4_writes_packed_bytes():
    node = analyze_node(
        "QuantizeLinear",
        [("x", "float16", [64, 128]), ("s", "float16", [64, 4])],
        [("y", "int4", [64, 128])],
        {"axis": 1, "block_size": 32},
    )
    assert node.cost.flops == 4 * 64 * 128  # blocked scales broadcast; no zero point
    assert node.cost.bytes_written == 64 * 128 // 2  # two int4 per byte


def test_dequantize_linear_computes_in_the_scale_dtype():
    node = analyze_node(
        "DequantizeLinear",
        [("x", "int8", [B, S, D]), ("s", "float16", []), ("z", "int8", [])],
        [("y", "float16", [B, S, D])],
    )
    assert node.cost.flops == 2 * N  # subtract zero point, multiply scale
    assert node.dtype == "fp16" and node.unit == "vector"
    assert node.cost.bytes_read == N + 2 + 1
    assert node.cost.bytes_written == N * 2


def test_contrib_quantize_and_dequantize():
    q = analyze_node(
        "QuantizeLinear", [("x", "float32", [8, 4]), ("s", "float32", []), ("z", "uint8", [])], ["y"], domain=MS
    )
    assert q.cost.flops == 5 * 32
    dq = analyze_node(
        "DequantizeLinear", [("x", "uint8", [8, 4]), ("s", "float32", [])], [("y", "float32", [8, 4])], domain=MS
    )
    assert dq.cost.flops == 1 * 32  # scale only


def test_dynamic_quantize_linear():
    node = analyze_node("DynamicQuantizeLinear", [("x", "float32", [B, S, D])], ["y", "y_scale", "y_zero_point"])
    # min and max 2(n − 1), include 0: 2, scale 2, zero point 5, quantize each element 5
    assert node.cost.flops == 2 * (N - 1) + 2 + 2 + 5 + 5 * N == 7 * N + 7
    assert node.cost.bytes_written == N + 4 + 1  # uint8 y, float scale, uint8 zero point


def test_matmul_integer_dynamic_activation_symmetric_weights():
    node = analyze_node(
        "MatMulInteger",
        [("a", "uint8", [B, S, D]), ("b", "int8", [D, 3072]), ("a_zp", "uint8", []), ("b_zp", "int8", [])],
        ["y"],
        initializers={"b_zp": np.array(0, dtype=np.int8)},  # quantize_dynamic's symmetric weights
    )
    outputs = B * S * 3072
    assert node.cost.flops == 2 * D * outputs + N  # the product; a's zero point subtracted from each element
    assert node.unit == "matrix" and node.dtype == "int8"
    assert node.cost.bytes_written == outputs * 4  # int32 accumulators


def test_conv_integer():
    node = analyze_node(
        "ConvInteger",
        [("x", "uint8", [1, 3, 32, 32]), ("w", "uint8", [8, 3, 3, 3]), ("xz", "uint8", []), ("wz", "uint8", [])],
        ["y"],
    )
    outputs = 8 * 30 * 30
    assert node.cost.flops == 2 * 27 * outputs + 3 * 32 * 32 + 8 * 27  # conv; both zero points subtracted
    assert node.dtype == "int8"


def test_qlinear_matmul():
    node = analyze_node(
        "QLinearMatMul",
        [
            ("a", "uint8", [B, S, D]),
            ("as", "float32", []),
            ("az", "uint8", []),
            ("b", "int8", [D, 64]),
            ("bs", "float32", [64]),
            ("bz", "int8", [64]),
            ("ys", "float32", []),
            ("yz", "uint8", []),
        ],
        ["y"],
        initializers={"bz": np.zeros(64, dtype=np.int8)},
    )
    outputs = B * S * 64
    assert node.cost.flops == 2 * D * outputs + N + 5 * outputs  # product, a's zp, requantize
    assert node.dtype == "int8" and node.unit == "matrix"


def test_qlinear_matmul_float8_picks_the_fp8_peak():
    node = analyze_node(
        "QLinearMatMul",
        [
            ("a", "float8e4m3fn", [S, 64]),
            ("as", "float32", []),
            ("az", "float8e4m3fn", []),
            ("b", "float8e4m3fn", [64, 32]),
            ("bs", "float32", []),
            ("bz", "float8e4m3fn", []),
            ("ys", "float32", []),
            ("yz", "float8e4m3fn", []),
        ],
        [("y", "float8e4m3fn", [S, 32])],
        opset=21,
    )
    assert node.dtype == "fp8"


@pytest.mark.parametrize("domain", ["", MS])
def test_qlinear_conv(domain):
    node = analyze_node(
        "QLinearConv",
        [
            ("x", "uint8", [1, 3, 32, 32]),
            ("xs", "float32", []),
            ("xz", "uint8", []),
            ("w", "int8", [8, 3, 3, 3]),
            ("ws", "float32", [8]),
            ("wz", "int8", [8]),
            ("ys", "float32", []),
            ("yz", "uint8", []),
            ("bias", "int32", [8]),
        ],
        [("y", "uint8", [1, 8, 30, 30])],  # onnxruntime's symbolic inference leaves the contrib form unknown
        {"kernel_shape": [3, 3]},
        initializers={"wz": np.zeros(8, dtype=np.int8)},
        domain=domain,
    )
    outputs = 8 * 30 * 30
    # conv, x's zero point per input element, int32 bias, requantize
    assert node.cost.flops == 2 * 27 * outputs + 3 * 32 * 32 + outputs + 5 * outputs
    assert node.dtype == "int8"


def test_qgemm_to_float():
    node = analyze_node(
        "QGemm",
        [
            ("a", "uint8", [S, D]),
            ("as", "float32", []),
            ("az", "uint8", []),
            ("b", "int8", [64, D]),
            ("bs", "float32", []),
            ("bz", "int8", []),
            ("c", "int32", [64]),
        ],
        [("y", "float32", [S, 64])],
        {"transB": 1},
        initializers={"bz": np.array(0, dtype=np.int8)},
        domain=MS,
    )
    outputs = S * 64
    assert node.cost.flops == 2 * D * outputs + S * D + outputs + outputs  # product, a's zp, C, dequantize


def test_dynamic_quantize_matmul():
    node = analyze_node(
        "DynamicQuantizeMatMul",
        [
            ("a", "float32", [B, S, D]),
            ("b", "int8", [D, 3072]),
            ("bs", "float32", [1]),
            "",
            ("bias", "float32", [3072]),
        ],
        [("y", "float32", [B, S, 3072])],  # given: onnxruntime's symbolic inference leaves it unknown
        domain=MS,
    )
    outputs = B * S * 3072
    quantize_a = 7 * N + 7  # DynamicQuantizeLinear of A
    assert node.cost.flops == quantize_a + N + 2 * D * outputs + outputs + outputs  # A's zp, product, scale, bias
    assert node.dtype == "int8" and node.unit == "matrix"  # B's 8-bit dtype, not A's float


def test_matmul_integer_to_float():
    node = analyze_node(
        "MatMulIntegerToFloat",
        [
            ("a", "uint8", [B, S, D]),
            ("b", "int8", [D, 3072]),
            ("as", "float32", []),
            ("bs", "float32", [3072]),
            ("az", "uint8", []),
        ],
        [("y", "float32", [B, S, 3072])],
        domain=MS,
    )
    outputs = B * S * 3072
    assert node.cost.flops == 2 * D * outputs + N + outputs  # product, a's zp, dequantizing multiply
    assert node.dtype == "int8"


def test_q_ordered_matmul():
    node = analyze_node(
        "QOrderedMatMul",
        [
            ("a", "int8", [B, S, D]),
            ("sa", "float32", []),
            ("b", "int8", [D, 64]),
            ("sb", "float32", []),
            ("sy", "float32", []),
            ("bias", "float32", [64]),
        ],
        [("y", "int8", [B, S, 64])],
        {"order_A": 1, "order_B": 0, "order_Y": 1},
        domain=MS,
    )
    outputs = B * S * 64
    assert node.cost.flops == 2 * D * outputs + 4 * outputs + outputs  # product, requantize, bias


def test_matmul_nbits_4bit_weight_bytes_are_bits():
    k, n, block = 4096, 4096, 32
    k_blocks = k // block
    node = analyze_node(
        "MatMulNBits",
        [
            ("a", "float16", [1, 1, k]),  # decode: one token
            ("b", "uint8", [n, k_blocks, block * 4 // 8]),
            ("scales", "float16", [n * k_blocks]),
            ("zp", "uint8", [n * k_blocks // 2]),  # packed 4-bit zero points
        ],
        ["y"],
        {"K": k, "N": n, "bits": 4, "block_size": block},
        domain=MS,
    )
    assert node.outputs[0].shape == (1, 1, n)
    assert node.cost.flops == 2 * k * n  # the product at M = 1
    assert node.cost.dequantize_flops == 2 * k * n  # (q − zp)·scale, every weight once: its own column
    weights = k * n // 2  # 4 bits per weight, not a byte
    assert node.cost.bytes_read == k * 2 + weights + n * k_blocks * 2 + n * k_blocks // 2
    assert node.unit == "matrix" and node.dtype == "fp16"  # A's dtype
    assert node.bound == "memory"


def test_matmul_bnb4():
    node = analyze_node(
        "MatMulBnb4",
        [("a", "float16", [S, 256]), ("b", "uint8", [256 * 128 // 2]), ("absmax", "float16", [256 * 128 // 64])],
        [("y", "float16", [S, 128])],
        {"K": 256, "N": 128, "block_size": 64, "quant_type": 1},
        domain=MS,
    )
    assert node.cost.flops == 2 * 256 * S * 128  # the product
    assert node.cost.dequantize_flops == 256 * 128  # one multiply by absmax per weight
    assert node.cost.bytes_read == S * 256 * 2 + 256 * 128 // 2 + 512 * 2


def test_gather_block_quantized_reads_the_gathered_rows():
    vocab, hidden, block = 1000, 768, 32
    node = analyze_node(
        "GatherBlockQuantized",
        [
            ("table", "uint8", [vocab, hidden // 2]),  # 4-bit values packed two per byte
            ("ids", "int64", [B, S]),
            ("scales", "float16", [vocab, hidden // block]),
        ],
        # given: onnxruntime's symbolic inference reports the packed width (384), not the 768 values
        [("y", "float16", [B, S, hidden])],
        {"bits": 4, "block_size": block, "gather_axis": 0, "quantize_axis": 1},
        domain=MS,
    )
    outputs = B * S * hidden
    assert node.cost.flops == 2 * outputs  # uint8 data: the default zero point 8 is subtracted, then scale
    rows = B * S  # 32 of the 1000 rows
    assert node.cost.bytes_read == rows * hidden // 2 + rows * (hidden // block) * 2 + B * S * 8  # rows, scales, ids
    assert node.cost.bytes_written == outputs * 2


def test_gather_block_quantized_int4_without_zero_point_scales_only():
    node = analyze_node(
        "GatherBlockQuantized",
        [("table", "int4", [100, 64]), ("ids", "int64", [4]), ("scales", "float32", [100, 2])],
        [("y", "float32", [4, 64])],
        {"block_size": 32, "gather_axis": 0, "quantize_axis": 1},
        domain=MS,
    )
    assert node.cost.flops == 4 * 64  # int4's default zero point is 0: one multiply per element
    assert node.cost.bytes_read == 4 * 64 // 2 + 4 * 2 * 4 + 4 * 8  # 4 packed rows, their scales, ids


def test_qlinear_add_broadcast():
    scalars = [("as", "float32", []), ("az", "uint8", [])]
    node = analyze_node(
        "QLinearAdd",
        [
            ("a", "uint8", [B, S, D]),
            *scalars,
            ("b", "uint8", [D]),
            ("bs", "float32", []),
            ("bz", "uint8", []),
            ("cs", "float32", []),
            ("cz", "uint8", []),
        ],
        ["y"],
        domain=MS,
    )
    assert node.cost.flops == (2 + 2 + 1 + 5) * N  # dequantize A and B, add, quantize, per output
    assert node.cost.bytes_read == N + D + 3 * 4 + 3  # A, the broadcast B at its own size, scales, zps


def test_qlinear_mul_without_zero_points():
    node = analyze_node(
        "QLinearMul",
        [
            ("a", "int8", [8, 8]),
            ("as", "float32", []),
            "",
            ("b", "int8", [8, 8]),
            ("bs", "float32", []),
            "",
            ("cs", "float32", []),
        ],
        ["y"],
        domain=MS,
    )
    assert node.cost.flops == (1 + 1 + 1 + 4) * 64


@pytest.mark.parametrize(
    ("op", "attrs", "per", "transcendental"), [("QLinearSigmoid", {}, 7, 1), ("QLinearLeakyRelu", {"alpha": 0.1}, 9, 0)]
)
def test_qlinear_activations(op, attrs, per, transcendental):
    node = analyze_node(
        op,
        [
            ("x", "uint8", [B, S, D]),
            ("xs", "float32", []),
            ("xz", "uint8", []),
            ("ys", "float32", []),
            ("yz", "uint8", []),
        ],
        [("y", "uint8", [B, S, D])],  # given: symbolic inference leaves QLinearSigmoid unknown
        attrs,
        domain=MS,
    )
    assert node.cost.flops == per * N  # dequantize 2, the activation (sigmoid: a transcendental; leaky: 2), quantize 5
    assert node.cost.transcendentals == transcendental * N


@pytest.mark.parametrize(("opset", "rows"), [(13, B * S), (11, B)])
def test_qlinear_softmax(opset, rows):
    node = analyze_node(
        "QLinearSoftmax",
        [
            ("x", "uint8", [B, S, D]),
            ("xs", "float32", []),
            ("xz", "uint8", []),
            ("ys", "float32", []),
            ("yz", "uint8", []),
        ],
        [("y", "uint8", [B, S, D])],
        {"opset": opset, "axis": -1 if opset >= 13 else 1},
        domain=MS,
    )
    assert node.cost.flops == 7 * N + 4 * N - 2 * rows  # requantize around a softmax of L rows
    assert node.cost.transcendentals == N


def test_qlinear_global_average_pool():
    node = analyze_node(
        "QLinearGlobalAveragePool",
        [
            ("x", "uint8", [1, 64, 7, 7]),
            ("xs", "float32", []),
            ("xz", "uint8", []),
            ("ys", "float32", []),
            ("yz", "uint8", []),
        ],
        [("y", "uint8", [1, 64, 1, 1])],
        domain=MS,
    )
    n, m = 64 * 49, 64
    assert node.cost.flops == 2 * n + (n - m) + m + 5 * m  # dequantize, sum, divide, quantize


def test_qlinear_average_pool():
    node = analyze_node(
        "QLinearAveragePool",
        [
            ("x", "uint8", [1, 8, 8, 8]),
            ("xs", "float32", []),
            ("xz", "uint8", []),
            ("ys", "float32", []),
            ("yz", "uint8", []),
        ],
        [("y", "uint8", [1, 8, 4, 4])],
        {"kernel_shape": [2, 2], "strides": [2, 2]},
        domain=MS,
    )
    n, m = 8 * 64, 8 * 16
    assert node.cost.flops == 2 * n + 4 * m + 5 * m  # dequantize, 3 adds + 1 divide per window, quantize


def test_qlinear_reduce_mean():
    node = analyze_node(
        "QLinearReduceMean",
        [
            ("x", "uint8", [4, 32]),
            ("xs", "float32", []),
            ("xz", "uint8", []),
            ("ys", "float32", []),
            ("yz", "uint8", []),
        ],
        [("y", "uint8", [4, 1])],
        {"axes": [1], "keepdims": 1},
        domain=MS,
    )
    assert node.cost.flops == 2 * 128 + (128 - 4) + 4 + 5 * 4


def test_qlinear_concat_copies_inputs_already_in_the_output_quantization():
    node = analyze_node(
        "QLinearConcat",
        [
            ("ys", "float32", []),
            ("yz", "uint8", []),
            ("a", "uint8", [1, 8, 4]),
            "ys",  # the same scale and zero point as Y: a copy
            "yz",
            ("b", "uint8", [1, 8, 4]),
            ("bs", "float32", []),
            ("bz", "uint8", []),
        ],
        [("y", "uint8", [1, 16, 4])],  # given: symbolic inference gets QLinearConcat's shape wrong
        {"axis": 1},
        domain=MS,
    )
    assert node.cost.flops == (2 + 5) * 32  # only b is requantized
    assert node.cost.bytes_written == 64


def test_qlinear_where():
    node = analyze_node(
        "QLinearWhere",
        [
            ("c", "bool", [B, S]),
            ("x", "uint8", [B, S]),
            ("xs", "float32", []),
            ("xz", "uint8", []),
            ("y", "uint8", [B, S]),
            ("ys", "float32", []),
            ("yz", "uint8", []),
            ("zs", "float32", []),
            ("zz", "uint8", []),
        ],
        [("z", "uint8", [B, S])],
        domain=MS,
    )
    assert node.cost.flops == (1 + 2 + 5) * B * S
