"""Output shapes for onnxruntime's contrib ops (com.microsoft) that ONNX's shape inference has no
schema for: the quantized forms quantize_dynamic and the QDQ/QOperator tools write (QAttention,
QEmbedLayerNormalization, QGemm, the QLinear* ops), the fusions of the graph optimizer (FusedMatMul,
FusedGemm, FusedConv, BiasSoftmax), the weight-only matmuls, and GatherBlockQuantized, whose uint8
data packs two 4-bit values per byte. Shapes and dtypes follow the schemas of onnxruntime's
docs/ContribOperators.md (the inference functions in onnxruntime/core/graph/contrib_ops/*_defs.cc)."""

from __future__ import annotations

from onnx_roofline.model.op_node import KnownNode
from onnx_roofline.shapes.rules.arithmetic import (
    broadcast,
    conv,
    gemm,
    matmul,
    merged_present,
    merged_qkv_width,
    same,
    window,
)
from onnx_roofline.shapes.rules.registry import Output, Shape, shape_function

# --- attention and embedding -----------------------------------------------------------------------


@shape_function("QAttention")
def q_attention(node: KnownNode) -> list[Output]:
    """input [B, S, Din], bias [Dq + Dk + Dv] → output [B, S, Dv] in the bias's float dtype (Dv =
    qkv_hidden_sizes[2], else a third of the bias); present [2, B, N, P + S, H] (past at input 8)."""
    x, bias = node.operand(0), node.operand(2)
    hidden = merged_qkv_width(node, bias.shape[0])
    return [((*x.shape[:2], hidden), bias.dtype), merged_present(node, 8, hidden, bias.dtype)]


@shape_function("DecoderMaskedSelfAttention")
def decoder_masked_self_attention(node: KnownNode) -> list[Output]:
    """input [B, S, Din], weights [Din, Dq + Dk + Dv] → output [B, S, Dv] in the input's dtype;
    present: the past buffer's shape [2, B, N, max length, H] (past_present_share_buffer), else
    [2, B, N, P + S, H]."""
    x, weights = node.operand(0), node.operand(1)
    hidden = merged_qkv_width(node, weights.shape[1])
    return [((*x.shape[:2], hidden), x.dtype), merged_present(node, 4, hidden, x.dtype)]


@shape_function("QEmbedLayerNormalization")
def q_embed_layer_normalization(node: KnownNode) -> list[Output]:
    """input_ids [B, S], word_embedding_quant [V, D] → layernorm_out [B, S, D] in the scales' float
    dtype (input 8); mask_index_out [B] in the ids' int32."""
    ids, word, scale = node.operand(0), node.operand(2), node.operand(8)
    return [((*ids.shape, word.shape[1]), scale.dtype), ((ids.shape[0],), ids.dtype)]


# --- quantized matrix ops --------------------------------------------------------------------------


@shape_function("DynamicQuantizeMatMul")
def dynamic_quantize_matmul(node: KnownNode) -> list[Output]:
    """Float A × 8-bit B with numpy matmul shapes; Y in A's float dtype."""
    a, b = node.operand(0), node.operand(1)
    return [(matmul(a.shape, b.shape), a.dtype)]


@shape_function("DynamicQuantizeLSTM")
def dynamic_quantize_lstm(node: KnownNode) -> list[Output]:
    """LSTM's shapes (onnxruntime runs ONNX's RNN inference): X [T, B, I], W [D, I, 4H] → Y
    [T, D, B, H], Y_h and Y_c [D, B, H], in X's dtype; H the hidden_size attribute, else R's [D, H, 4H]."""
    x, w, r = node.operand(0), node.operand(1), node.operand(2)
    hidden = node.attrs.get("hidden_size") or r.shape[1]
    steps, batch, directions = x.shape[0], x.shape[1], w.shape[0]
    state = ((directions, batch, hidden), x.dtype)
    return [((steps, directions, batch, hidden), x.dtype), state, state]


@shape_function("MatMulIntegerToFloat")
def matmul_integer_to_float(node: KnownNode) -> list[Output]:
    """8-bit A × 8-bit B with numpy matmul shapes; Y in a_scale's float dtype (input 2)."""
    a, b = node.operand(0), node.operand(1)
    return [(matmul(a.shape, b.shape), node.operand(2).dtype)]


@shape_function("QOrderedMatMul")
def q_ordered_matmul(node: KnownNode) -> list[Output]:
    """int8 A (input 0) × int8 B (input 2) with numpy matmul shapes; Y int8."""
    a, b = node.operand(0), node.operand(2)
    return [(matmul(a.shape, b.shape), a.dtype)]


@shape_function("QGemm")
def qgemm(node: KnownNode) -> list[Output]:
    """A (input 0) × B (input 3) → [M, N]; quantized to y_zero_point's dtype when it is given
    (input 8), else float32."""
    y_zero_point = node.input(8)
    dtype = y_zero_point.dtype if y_zero_point is not None else "float32"
    return [(gemm(node, node.operand(0).shape, node.operand(3).shape), dtype)]


@shape_function("MatMulNBits", "MatMulBnb4")
def matmul_nbits(node: KnownNode) -> list[Output]:
    """A [..., K] × an N×K quantized weight → [..., N] in A's dtype (N is an attribute)."""
    a = node.operand(0)
    if a.shape[-1] != node.attrs["K"]:
        raise ValueError(f"A's last dim {a.shape[-1]} is not K = {node.attrs['K']}")
    return [((*a.shape[:-1], node.attrs["N"]), a.dtype)]


@shape_function("GatherBlockQuantized")
def gather_block_quantized(node: KnownNode) -> list[Output]:
    """data[:gather_axis] + indices + data[gather_axis + 1:] in the scales' dtype, where uint8 data
    packs 8/bits values per byte along quantize_axis (default 1), so that dim counts 8/bits times its
    bytes (int4/uint4 data already hold one value per element)."""
    data, indices, scales = node.operand(0), node.operand(1), node.operand(2)
    gather_axis = node.attrs.get("gather_axis", 0) % data.rank
    quantize_axis = node.attrs.get("quantize_axis", 1) % data.rank
    shape = list(data.shape)
    if data.dtype == "uint8":
        shape[quantize_axis] *= 8 // node.attrs.get("bits", 4)
    return [((*shape[:gather_axis], *indices.shape, *shape[gather_axis + 1 :]), scales.dtype)]


# --- QLinear elementwise, pooling, concat, conv ---------------------------------------------------------


shape_function("QLinearSigmoid", "QLinearLeakyRelu", "QLinearSoftmax")(same(0))


@shape_function("QLinearAdd", "QLinearMul")
def qlinear_binary(node: KnownNode) -> list[Output]:
    """A (input 0) and B (input 3) broadcast; C in A's 8-bit dtype."""
    a, b = node.operand(0), node.operand(3)
    return [(broadcast(a.shape, b.shape), a.dtype)]


@shape_function("QLinearWhere")
def qlinear_where(node: KnownNode) -> list[Output]:
    """condition (0), X (1) and Y (4) broadcast; Z in X's 8-bit dtype."""
    condition, x, y = node.operand(0), node.operand(1), node.operand(4)
    return [(broadcast(condition.shape, x.shape, y.shape), x.dtype)]


@shape_function("QLinearConcat")
def qlinear_concat(node: KnownNode) -> list[Output]:
    """Y_scale, Y_zero_point, then (X, X_scale, X_zero_point) per input: the Xs concatenated along
    `axis`; Y in Y_zero_point's 8-bit dtype."""
    tensors = [node.operand(i) for i in range(2, len(node.inputs), 3)]
    axis = node.attrs["axis"] % tensors[0].rank
    first = tensors[0].shape
    if any(
        t.rank != len(first) or t.shape[:axis] + t.shape[axis + 1 :] != first[:axis] + first[axis + 1 :]
        for t in tensors
    ):
        raise ValueError(f"QLinearConcat inputs differ off axis {axis}: {[t.shape for t in tensors]}")
    length = sum(t.shape[axis] for t in tensors)
    return [((*first[:axis], length, *first[axis + 1 :]), node.operand(1).dtype)]


@shape_function("QLinearReduceMean")
def qlinear_reduce_mean(node: KnownNode) -> list[Output]:
    """data reduced over `axes` (all when absent), kept as 1s when keepdims (default 1)."""
    return [(reduced_shape(node), node.operand(0).dtype)]


def reduced_shape(node: KnownNode) -> Shape:
    """Input 0's shape reduced over `axes` (all when absent), kept as 1s when keepdims (default 1)."""
    data = node.operand(0)
    axes = {a % data.rank for a in node.attrs.get("axes") or range(data.rank)}
    keep = node.attrs.get("keepdims", 1)
    return tuple([1 if i in axes else d for i, d in enumerate(data.shape) if keep or i not in axes])


@shape_function("QLinearGlobalAveragePool")
def qlinear_global_average_pool(node: KnownNode) -> list[Output]:
    """N and C kept, every spatial dim 1: [N, C, 1, …] or, channels_last, [N, 1, …, C]."""
    x = node.operand(0)
    if x.rank < 2:
        raise ValueError("QLinearGlobalAveragePool needs N and C")
    ones = (1,) * (x.rank - 2)
    shape = (x.shape[0], *ones, x.shape[-1]) if node.attrs.get("channels_last", 0) else (*x.shape[:2], *ones)
    return [(shape, x.dtype)]


@shape_function("QLinearAveragePool")
def qlinear_average_pool(node: KnownNode) -> list[Output]:
    """AveragePool's window arithmetic over kernel_shape, strides, pads / auto_pad, ceil_mode (no
    dilations), in NCHW or, channels_last, NHWC; Y in X's dtype."""
    x = node.operand(0)
    last = bool(node.attrs.get("channels_last", 0))
    spatial = x.shape[1:-1] if last else x.shape[2:]
    out = window(node, spatial, node.attrs["kernel_shape"], dilation=False)
    shape = (x.shape[0], *out, x.shape[-1]) if last else (*x.shape[:2], *out)
    return [(shape, x.dtype)]


@shape_function("QLinearConv")
def qlinear_conv(node: KnownNode) -> list[Output]:
    """Conv of x (input 0) with w (input 3, [M, C/group, k…]) in NCHW or, channels_last, NHWC;
    y in y_zero_point's 8-bit dtype (input 7)."""
    x, w = node.operand(0), node.operand(3)
    return [(conv(node, x.shape, w.shape, bool(node.attrs.get("channels_last", 0))), node.operand(7).dtype)]


# --- fused float ops -------------------------------------------------------------------------------------


shape_function("BiasSoftmax")(same(0))


def _fused_operand(shape: Shape, trans: bool, trans_batch: bool) -> Shape:
    """An operand as FusedMatMul sees it: transBatch moves the first dim behind the batch dims (to
    the rows), trans swaps the last two (ORT's FusedMatMulShapeInference)."""
    if len(shape) == 1:
        return shape
    batch = shape[1:-1] if trans_batch else shape[:-2]
    rows, columns = (shape[0], shape[-1]) if trans_batch else (shape[-2], shape[-1])
    return (*batch, columns, rows) if trans else (*batch, rows, columns)


@shape_function("FusedMatMul", "TransposeMatMul", "FusedMatMulActivation")
def fused_matmul(node: KnownNode) -> list[Output]:
    """op(A)·op(B) with numpy matmul shapes, op a transpose of the last two dims (transA/transB)
    and/or of the batch dims (transBatchA/transBatchB); Y in A's dtype."""
    a, b = node.operand(0), node.operand(1)
    left = _fused_operand(a.shape, bool(node.attrs.get("transA", 0)), bool(node.attrs.get("transBatchA", 0)))
    right = _fused_operand(b.shape, bool(node.attrs.get("transB", 0)), bool(node.attrs.get("transBatchB", 0)))
    return [(matmul(left, right), a.dtype)]


@shape_function("FusedGemm")
def fused_gemm(node: KnownNode) -> list[Output]:
    """Gemm's [M, N] from A and B (transA/transB); Y in A's dtype."""
    a, b = node.operand(0), node.operand(1)
    return [(gemm(node, a.shape, b.shape), a.dtype)]


@shape_function("FusedConv")
def fused_conv(node: KnownNode) -> list[Output]:
    """Conv's [N, M, spatial…] from X [N, C, spatial…] and W [M, C/group, k…]; Y in X's dtype."""
    x, w = node.operand(0), node.operand(1)
    return [(conv(node, x.shape, w.shape, channels_last=False), x.dtype)]


@shape_function("NhwcConv")
def nhwc_conv(node: KnownNode) -> list[Output]:
    """Conv in NHWC: X [N, spatial…, C], W [M, C/group, k…] → [N, spatial…, M]; Y in X's dtype."""
    x, w = node.operand(0), node.operand(1)
    return [(conv(node, x.shape, w.shape, channels_last=True), x.dtype)]
