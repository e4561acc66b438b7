"""Quantization: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear; the integer matrix ops
MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv (ai.onnx) and onnxruntime's contrib forms
(com.microsoft): QGemm, DynamicQuantizeMatMul, MatMulIntegerToFloat, QOrderedMatMul, the weight-only
MatMulNBits, MatMulBnb4 and GatherBlockQuantized, and the QLinear* elementwise, pooling and
concatenation ops.

Counting, per element:

    dequantize   (q − zero_point)·scale        2 FLOPs (1 without a zero point)
    quantize     saturate(round(x / scale) + zero_point): divide, round, add, two-sided clamp
                                               5 FLOPs (4 without a zero point)

A zero point that is a constant 0 (symmetric quantization, as quantize_dynamic writes for weights)
subtracts nothing and is counted as absent; one that is not a constant (DynamicQuantizeLinear's
output) is counted.

Integer matrix ops are counted as they run on integer tensor cores: the zero points subtracted
from the operands (one per element of each operand with a zero point), the integer product at
2·M·K·N (a multiply-add is 2, as in float), then per output element the requantize (multiply by
the combined scale a_scale·b_scale/y_scale, round, add the zero point, clamp: the quantize count)
or, for float outputs, one multiply by a_scale·b_scale. Per-tensor and per-channel scale products
are set-up work (at most one per output channel) and are not counted. The compute dtype is the
integer operand's: int8/uint8 picks the int8 peak, float8 the fp8 one.

Weight-only quantized matmuls (MatMulNBits, MatMulBnb4) run on the matrix unit in A's dtype: 2·M·K·N
in `flops`; the dequantization of each weight element once is vector work beside it, counted in its
own column, `dequantize_flops` (in the fused kernel it overlaps the product; at decode, M = 1, it
would otherwise double the matrix FLOPs). Their packed weights are uint8 containers whose
size is already the packed bits (MatMulNBits B [N, k_blocks, block_size·bits/8]), so the default
bytes are the quantized weight's bytes, not K·N bytes. Their `parameters` are the logical weights:
the packed B counts K·N (not its bytes), its scales, zero points and g_idx count 0 (quantization
metadata, not weights); a bias counts as stored. GatherBlockQuantized's table counts its values
(8/bits per uint8), its scales and zero points 0.

QLinear elementwise ops (QLinearAdd, QLinearMul, ...) are counted by their definition per output
element: dequantize each operand, apply the op, quantize the result. Bytes are the default except
GatherBlockQuantized, which reads the rows it gathers."""

from __future__ import annotations

import math

import numpy as np

from onnx_roofline.costs.cost import Cost
from onnx_roofline.costs.rules.contrib import named_activation
from onnx_roofline.costs.rules.registry import MATRIX, register
from onnx_roofline.model.op_node import KnownNode

MS = "com.microsoft"


def nonzero_zero_point(node: KnownNode, index: int) -> bool:
    """True when input `index` is a zero point that may be non-zero: present and not a constant 0."""
    if node.input(index) is None:
        return False
    value = node.input_value(index)
    return value is None or bool(np.any(value != 0))


def dequantize(node: KnownNode, zero_point: int | None) -> int:
    """FLOPs to dequantize one element: (q − zp)·scale, 1 without a (non-zero) zero point."""
    return 2 if zero_point is not None and nonzero_zero_point(node, zero_point) else 1


def quantize(node: KnownNode, zero_point: int | None) -> int:
    """FLOPs to quantize one element: divide, round, add zp, clamp low and high; 4 without zp."""
    return 5 if zero_point is not None and nonzero_zero_point(node, zero_point) else 4


def _zero_points(node: KnownNode, *pairs: tuple[int, int]) -> tuple[int, tuple[tuple[tuple[int, ...], int], ...]]:
    """One subtract per element of operand `data` for each (data, zero_point) pair whose zero point
    may be non-zero: their sum, and each as Cost.load_flops — work on those two inputs alone, which
    a runtime does once at load where both are constant (a weight and its zero point)."""
    load = tuple(((data, zp), node.operand(data).numel) for data, zp in pairs if nonzero_zero_point(node, zp))
    return sum(flops for _, flops in load), load


# --- QuantizeLinear / DequantizeLinear ---------------------------------------------------------


@register("QuantizeLinear", since=10)
@register("QuantizeLinear", domain=MS)
def quantize_linear(node: KnownNode) -> Cost:
    """y = saturate(round(x / y_scale) + y_zero_point): 5 FLOPs per element (divide, round, add,
    clamp low, clamp high), 4 without a zero point (or a constant-0 one). Per-axis and blocked
    scales broadcast; the bytes are the default (x, scale, zero point read; y written at its own
    width, int4 packed)."""
    return Cost(flops=quantize(node, 2) * node.operand(0).numel)


@register("DequantizeLinear", since=10, compute_dtype=1)
@register("DequantizeLinear", domain=MS, compute_dtype=1)
def dequantize_linear(node: KnownNode) -> Cost:
    """y = (x − x_zero_point)·x_scale: 2 FLOPs per element, 1 without a zero point (or a constant-0
    one). Computes in the scale's (output's) float dtype."""
    return Cost(flops=dequantize(node, 2) * node.operand(0).numel)


@register("DynamicQuantizeLinear", since=11)
def dynamic_quantize_linear(node: KnownNode) -> Cost:
    """uint8 quantization with computed parameters, over n elements: min and max (2(n − 1) compares),
    include 0 in the range (2), scale = (max − min)/255 (2), zero point = saturate(round(−min/scale))
    (negate, divide, round, clamp low/high: 5), then quantize each element (5): 7n + 7 FLOPs."""
    n = node.operand(0).numel
    return Cost(flops=7 * n + 7)


# --- integer matrix ops ----------------------------------------------------------------------------


@register("MatMulInteger", since=10, unit=MATRIX)
def matmul_integer(node: KnownNode) -> Cost:
    """(A − a_zero_point)·(B − b_zero_point) accumulated in int32: 2·K per output element, plus one
    subtract per element of A and of B for a zero point that is not a constant 0."""
    k = node.operand(0).shape[-1]
    subtracts, load = _zero_points(node, (0, 2), (1, 3))
    return Cost(flops=2 * k * node.result(0).numel + subtracts, load_flops=load)


@register("ConvInteger", since=10, unit=MATRIX)
def conv_integer(node: KnownNode) -> Cost:
    """Conv of (x − x_zero_point) with (w − w_zero_point), int32 out: 2·taps per output element
    (taps = (Cin/group)·kH·kW from w), plus one subtract per element of x and of w for a zero point
    that is not a constant 0."""
    taps = math.prod(node.operand(1).shape[1:])
    subtracts, load = _zero_points(node, (0, 2), (1, 3))
    return Cost(flops=2 * taps * node.result(0).numel + subtracts, load_flops=load)


@register("QLinearMatMul", since=10, unit=MATRIX)
def qlinear_matmul(node: KnownNode) -> Cost:
    """a [.., M, K] × b [.., K, N], all 8-bit (float8 from opset 21): zero-point subtracts (one per
    element of a and of b with a non-constant-0 zero point), the integer product 2·K per output,
    then requantize each output (combined-scale multiply, round, + y_zero_point, clamp: 5, 4
    without zero point)."""
    outputs = node.result(0).numel
    k = node.operand(0).shape[-1]
    subtracts, load = _zero_points(node, (0, 2), (3, 5))
    flops = 2 * k * outputs + subtracts + quantize(node, 7) * outputs
    return Cost(flops=flops, load_flops=load)


@register("QLinearConv", since=10, unit=MATRIX)
@register("QLinearConv", domain=MS, unit=MATRIX)
def qlinear_conv(node: KnownNode) -> Cost:
    """8-bit conv: zero-point subtracts (one per element of x and of w with a non-constant-0 zero
    point), 2·taps per output element (taps = (Cin/group)·kH·kW from w [M, C/group, kH, kW], in
    either layout), one add per output for the int32 bias B, then requantize each output (5 FLOPs,
    4 without y_zero_point)."""
    outputs = node.result(0).numel
    taps = math.prod(node.operand(3).shape[1:])
    subtracts, load = _zero_points(node, (0, 2), (3, 5))
    flops = 2 * taps * outputs + subtracts
    flops += (outputs if node.input(8) is not None else 0) + quantize(node, 7) * outputs
    return Cost(flops=flops, load_flops=load)


@register("QGemm", domain=MS, unit=MATRIX)
def qgemm(node: KnownNode) -> Cost:
    """8-bit Gemm: zero-point subtracts on A and B, 2·M·K·N, one add per output for the int32 C,
    then per output either a requantize (5, 4 without y_zero_point) when y_scale is given, or one
    multiply (alpha·a_scale·b_scale) to a float output."""
    a = node.operand(0).shape
    k = a[0] if node.attrs.get("transA", 0) else a[1]
    outputs = node.result(0).numel
    subtracts, load = _zero_points(node, (0, 2), (3, 5))
    flops = 2 * k * outputs + subtracts
    flops += outputs if node.input(6) is not None else 0
    flops += (quantize(node, 8) if node.input(7) is not None else 1) * outputs
    return Cost(flops=flops, load_flops=load)


@register("DynamicQuantizeMatMul", domain=MS, unit=MATRIX, compute_dtype=1)
def dynamic_quantize_matmul(node: KnownNode) -> Cost:
    """Float A quantized on the fly to uint8 (DynamicQuantizeLinear: 7·numel(A) + 7), its zero point
    subtracted (numel(A)), B's zero point when not a constant 0 (numel(B)), the integer product
    2·K per output, one multiply per output to dequantize, one add per output for the bias.
    Computes in B's 8-bit dtype."""
    a = node.operand(0)
    outputs = node.result(0).numel
    subtracts, load = _zero_points(node, (1, 3))
    flops = 7 * a.numel + 7 + a.numel + subtracts
    flops += 2 * a.shape[-1] * outputs + outputs + (outputs if node.input(4) is not None else 0)
    return Cost(flops=flops, load_flops=load)


@register("MatMulIntegerToFloat", domain=MS, unit=MATRIX)
def matmul_integer_to_float(node: KnownNode) -> Cost:
    """MatMulInteger then (a_scale·b_scale)·Y + bias to float: zero-point subtracts on A and B (when
    not constant 0), 2·K per output, one multiply per output, one add per output for the bias."""
    outputs = node.result(0).numel
    subtracts, load = _zero_points(node, (0, 4), (1, 5))
    flops = 2 * node.operand(0).shape[-1] * outputs + subtracts
    flops += outputs + (outputs if node.input(6) is not None else 0)
    return Cost(flops=flops, load_flops=load)


@register("QOrderedMatMul", domain=MS, unit=MATRIX)
def q_ordered_matmul(node: KnownNode) -> Cost:
    """int8 Y = requantize(alpha·A·B + bias + beta·C), symmetric (no zero points): 2·K per output,
    one add per output for the bias, 2 per output for the scaled C, then requantize (4: scale,
    round, clamp low/high)."""
    outputs = node.result(0).numel
    flops = 2 * node.operand(0).shape[-1] * outputs + 4 * outputs
    flops += outputs if node.input(5) is not None else 0
    flops += 2 * outputs if node.input(6) is not None else 0
    return Cost(flops=flops)


# --- weight-only quantized matmuls ------------------------------------------------------------------


@register("MatMulNBits", domain=MS, unit=MATRIX)
def matmul_nbits(node: KnownNode) -> Cost:
    """A [..., K] × B, B an N×K weight quantized to `bits` (2–8) in blocks of block_size along K:
    2·M·K·N for the product (M = numel(A)/K), M·N for the bias; `dequantize_flops` 2·K·N, each
    weight dequantized once ((q − zero point)·scale; the zero point defaults to 2^(bits−1), so it
    is always subtracted). Runs on the matrix unit in A's dtype (accuracy_level=4 lets a CPU kernel quantize A to
    int8; the peak stays A's). Bytes: the default — B is [N, k_blocks, block_size·bits/8] uint8, so
    its size is the packed bits (N·K/2 bytes at 4 bits), plus scales and packed zero points.
    Parameters: K·N for B (its weights, not its packed bytes); scales, zero points, g_idx 0."""
    k, n = node.attrs["K"], node.attrs["N"]
    outputs = node.result(0).numel
    bias = outputs if node.input(5) is not None else 0
    return Cost(flops=2 * k * outputs + bias, dequantize_flops=2 * k * n, parameters=_nbits_parameters({1: k * n}))


def _nbits_parameters(weights: dict[int, int]) -> tuple[tuple[int, int], ...]:
    """`Cost.parameters` of packed weights at the given slots (logical elements each), their scales
    (the next slot) and, for MatMulNBits (B at slot 1), zero points and g_idx: 0."""
    pairs = []
    for slot, elements in weights.items():
        pairs += [(slot, elements), (slot + 1, 0)]
        if slot == 1:
            pairs += [(3, 0), (4, 0)]
    return tuple(pairs)


def _nbits_norm(node: KnownNode, rows: int, k: int, norm_index: int, skip_index: int) -> tuple[int, int]:
    """(FLOPs, sqrts) of the RMS norm a MatMulNBits fusion applies to A first: 4·M·K + 2M and M
    sqrts when norm_scale is given, + M·K adds for the skip; none without norm_scale."""
    if node.input(norm_index) is None:
        return 0, 0
    return 4 * rows * k + 2 * rows + rows * k * (node.input(skip_index) is not None), rows


def _nbits_projections(node: KnownNode, rows: int, k: int, widths: dict[int, int]) -> tuple[int, int]:
    """MatMulNBits' count for each projection of A (M rows) to `widths[bias index]` columns:
    (FLOPs: 2·M·K per column, M per column when that bias is given; dequantize FLOPs: 2·K per
    column, each weight dequantized once)."""
    flops = sum(2 * rows * k * n + rows * n * (node.input(bias) is not None) for bias, n in widths.items())
    return flops, sum(2 * k * n for n in widths.values())


@register("MatMulNBitsQkv", domain=MS, unit=MATRIX)
def matmul_nbits_qkv(node: KnownNode) -> Cost:
    """RMSNorm of A [..., K] (M = numel(A)/K rows: 4·M·K + 2M, M sqrts; + M·K adds with the skip
    input), then the Q, K and V projections as MatMulNBits: 2·M·K per output column (Nq + 2·Nkv),
    M per column of each bias given; `dequantize_flops` 2·K per column, the weights once. Bytes: the
    default (the packed weights are their quantized size). Parameters: K per column (the weights),
    scales 0."""
    k = node.attrs["K"]
    rows = node.operand(0).numel // k
    nq, nkv = node.attrs["Nq"], node.attrs["Nkv"]
    norm, sqrts = _nbits_norm(node, rows, k, 2, 1)
    projections, dequantize = _nbits_projections(node, rows, k, {5: nq, 8: nkv, 11: nkv})
    parameters = _nbits_parameters({3: k * nq, 6: k * nkv, 9: k * nkv})  # each weight two slots before its bias
    return Cost(flops=norm + projections, transcendentals=sqrts, dequantize_flops=dequantize, parameters=parameters)


@register("MatMulNBitsMlp", domain=MS, unit=MATRIX)
def matmul_nbits_mlp(node: KnownNode) -> Cost:
    """activation(A·gate + gate_bias)·(A·up + up_bias), A [..., K] in M rows, N columns: the
    optional RMSNorm of A first (norm_scale given: 4·M·K + 2M, M sqrts; + M·K adds with skip), the
    gate and up projections as MatMulNBits (2·M·K·N + 2·K·N each, + M·N per bias given), then the
    activation per gate element (silu 1 FLOP and 1 sigmoid, gelu 4 and 1 erf) and the product M·N.
    Parameters: K·N per projection (the weights), scales 0."""
    k, n = node.attrs["K"], node.attrs["N"]
    rows = node.operand(0).numel // k
    norm, sqrts = _nbits_norm(node, rows, k, 2, 1)
    flops, transcendentals = named_activation(node, node.attrs["activation"], rows * n)
    projections, dequantize = _nbits_projections(node, rows, k, {5: n, 8: n})
    flops += norm + projections + rows * n
    parameters = _nbits_parameters({3: k * n, 6: k * n})  # gate and up weights, two slots before their biases
    return Cost(
        flops=flops, transcendentals=transcendentals + sqrts, dequantize_flops=dequantize, parameters=parameters
    )


@register("MatMulBnb4", domain=MS, unit=MATRIX)
def matmul_bnb4(node: KnownNode) -> Cost:
    """A × dequant(B), B an N×K weight in 4-bit FP4/NF4 with one absmax per block: 2 FLOPs per
    multiply-add over A's last dim per output; `dequantize_flops` one multiply per weight element
    (code-book value × absmax). Bytes: the default (B packed two per byte). Parameters: K·N for B,
    0 for absmax."""
    k, n = node.attrs["K"], node.attrs["N"]
    contracted = node.operand(0).shape[-1]
    return Cost(flops=2 * contracted * node.result(0).numel, dequantize_flops=k * n, parameters=((1, k * n), (2, 0)))


@register("GatherBlockQuantized", domain=MS, compute_dtype=2)
def gather_block_quantized(node: KnownNode) -> Cost:
    """Gather from a block-quantized table, dequantizing what it gathers: 2 FLOPs per output element
    ((q − zero point)·scale) when a zero point applies (given and not constant 0, or uint8 data with
    its default 2^(bits−1)), 1 otherwise (int4/uint4 default to 0; float8/float4 data are scale-only).
    Bytes: reads the gathered fraction of data, scales and zero points (output elements over the
    table's, capped at 1 — a repeated row is read once) plus the indices; writes the output.
    Parameters: the table's values (8/bits per uint8 byte); scales and zero points 0."""
    data, out = node.operand(0), node.result(0)
    bits = node.attrs.get("bits", 4) if data.dtype == "uint8" else data.bits
    elements = data.numel * (8 // bits if data.dtype == "uint8" and bits < 8 else 1)
    zero_point = nonzero_zero_point(node, 3) or (node.input(3) is None and data.dtype == "uint8")
    flops = (2 if zero_point else 1) * out.numel
    selected = min(out.numel, elements)
    reads = {
        t.name: -(-t.nbytes * selected // max(elements, 1))  # the gathered fraction, rounded up
        for t in (data, node.input(2), node.input(3))
        if t is not None
    }
    read = sum({t.name: reads.get(t.name, t.nbytes) for t in node.present_inputs}.values())
    return Cost(flops=flops, bytes_read=read, parameters=((0, elements), (2, 0), (3, 0)))


# --- QLinear elementwise, pooling, concat ------------------------------------------------------------


def _qlinear_binary(node: KnownNode) -> Cost:
    """A, A_scale, A_zp, B, B_scale, B_zp, C_scale, C_zp: per output dequantize A and B, 1 op,
    quantize C."""
    per = dequantize(node, 2) + dequantize(node, 5) + 1 + quantize(node, 7)
    return Cost(flops=per * node.result(0).numel)


@register("QLinearAdd", domain=MS)
def qlinear_add(node: KnownNode) -> Cost:
    """C = quantize(dequantize(A) + dequantize(B)), broadcasting: per output element 2 + 2 + 1 + 5 =
    10 FLOPs (a dequantize is 1 and a quantize 4 without a non-zero zero point)."""
    return _qlinear_binary(node)


@register("QLinearMul", domain=MS)
def qlinear_mul(node: KnownNode) -> Cost:
    """C = quantize(dequantize(A)·dequantize(B)), broadcasting: per output element 2 + 2 + 1 + 5 =
    10 FLOPs (a dequantize is 1 and a quantize 4 without a non-zero zero point)."""
    return _qlinear_binary(node)


@register("QLinearSigmoid", domain=MS)
def qlinear_sigmoid(node: KnownNode) -> Cost:
    """quantize(sigmoid(dequantize(X))): 2 + 5 = 7 FLOPs and 1 transcendental per element."""
    n = node.result(0).numel
    return Cost(flops=(dequantize(node, 2) + quantize(node, 4)) * n, transcendentals=n)


@register("QLinearLeakyRelu", domain=MS)
def qlinear_leaky_relu(node: KnownNode) -> Cost:
    """quantize(LeakyRelu(dequantize(X))): 2 + 2 (multiply, select) + 5 = 9 FLOPs per element."""
    n = node.result(0).numel
    return Cost(flops=(dequantize(node, 2) + 2 + quantize(node, 4)) * n)


@register("QLinearSoftmax", domain=MS)
def qlinear_softmax(node: KnownNode) -> Cost:
    """quantize(Softmax(dequantize(X))) over n elements in L rows (opset < 13: the dims from `axis`
    on are one row; 13+: rows along `axis` alone): (2 + 5)·n + 4n − 2L FLOPs, n exps."""
    shape = node.operand(0).shape
    n = node.operand(0).numel
    axis = node.attrs.get("axis", -1) % len(shape)
    rows = math.prod(shape[:axis]) if node.attrs.get("opset", 13) < 13 else (n // shape[axis] if shape[axis] else 0)
    flops = (dequantize(node, 2) + quantize(node, 4)) * n + max(4 * n - 2 * rows, 0)
    return Cost(flops=flops, transcendentals=n)


def _quantized_mean(node: KnownNode, taps_per_output: int | None) -> Cost:
    """Dequantize n inputs, average into m outputs (n − m adds + m divides, or `taps` per output for
    a windowed pool), quantize the m outputs."""
    n, m = node.operand(0).numel, node.result(0).numel
    average = m * taps_per_output if taps_per_output is not None else max(n - m, 0) + m
    return Cost(flops=dequantize(node, 2) * n + average + quantize(node, 4) * m)


@register("QLinearGlobalAveragePool", domain=MS)
def qlinear_global_average_pool(node: KnownNode) -> Cost:
    """Per (n, c): dequantize its H·W inputs (2 each), sum them and divide (H·W − 1 adds, 1 divide),
    quantize the mean (5): 2n + n + 5m FLOPs for n inputs and m outputs, in either layout."""
    return _quantized_mean(node, None)


@register("QLinearReduceMean", domain=MS)
def qlinear_reduce_mean(node: KnownNode) -> Cost:
    """Dequantize the n inputs (2 each), reduce to m means (n − m adds, m divides), quantize (5):
    3n + 5m FLOPs."""
    return _quantized_mean(node, None)


@register("QLinearAveragePool", domain=MS)
def qlinear_average_pool(node: KnownNode) -> Cost:
    """Dequantize the n inputs (2 each), per output sum the kernel's taps and divide (taps − 1 adds,
    1 divide), quantize (5): 2n + (taps + 5)·m FLOPs."""
    return _quantized_mean(node, math.prod(node.attrs["kernel_shape"]))


def _same_input(node: KnownNode, i: int, j: int) -> bool:
    a, b = node.input(i), node.input(j)
    if a is None or b is None:
        return a is None and b is None
    if a.name == b.name:
        return True
    va, vb = node.input_value(i), node.input_value(j)
    return va is not None and vb is not None and va.shape == vb.shape and bool(np.array_equal(va, vb))


@register("QLinearConcat", domain=MS)
def qlinear_concat(node: KnownNode) -> Cost:
    """Y_scale, Y_zero_point, then (X, X_scale, X_zero_point) per input: an input already in Y's
    quantization (the same scale and zero point tensors, or equal constants) is copied, 0 FLOPs;
    any other is requantized, dequantize + quantize = 7 FLOPs per element."""
    flops = 0
    for index in range(2, len(node.inputs), 3):
        if node.input(index) is None:
            continue
        if _same_input(node, index + 1, 0) and _same_input(node, index + 2, 1):
            continue
        flops += (dequantize(node, index + 2) + quantize(node, 1)) * node.operand(index).numel
    return Cost(flops=flops)


@register("QLinearWhere", domain=MS, compute_dtype=1)
def qlinear_where(node: KnownNode) -> Cost:
    """Select X or Y by condition, requantized to Z: per output element 1 select + dequantize (2) +
    quantize (5) = 8 FLOPs."""
    per = 1 + dequantize(node, 3) + quantize(node, 8)
    return Cost(flops=per * node.result(0).numel)
