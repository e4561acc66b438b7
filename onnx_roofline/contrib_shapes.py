"""Output shapes for onnxruntime's contrib ops (com.microsoft) that neither ONNX's shape inference
(it has no schema for them) nor onnxruntime's SymbolicShapeInference infers: the quantized forms
quantize_dynamic and the QDQ/QOperator tools write (QAttention, QEmbedLayerNormalization, QGemm,
the QLinear* ops), the fusions of the graph optimizer (FusedMatMul, FusedGemm, FusedConv,
BiasSoftmax), the weight-only matmuls, and GatherBlockQuantized, whose uint8 data packs two 4-bit
values per byte (onnxruntime's rule reads it as an ordinary Gather and halves the last dim).

One pure function per op, registered by (domain, op_type) like the cost rules: it reads the node's
input TensorInfos, attributes and constant input values through the same OpNode view a cost rule
gets, and returns one (shape, dtype) per output (None for an output it does not type). Shapes and
dtypes follow the schemas of onnxruntime's docs/ContribOperators.md (the inference functions in
onnxruntime/core/graph/contrib_ops/*_defs.cc). `shapes.infer` calls `infer_outputs` only when its
other passes left values unknown."""

from __future__ import annotations

import logging
from collections import ChainMap
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import onnx

from onnx_roofline.rules.context import OpNode
from onnx_roofline.rules.registry import normalize_domain
from onnx_roofline.tensors import TensorInfo

log = logging.getLogger(__name__)

MS = "com.microsoft"
Shape = tuple[int, ...]
Output = tuple[Shape, str] | None
ShapeFunction = Callable[[OpNode], Sequence[Output]]

_SHAPES: dict[tuple[str, str], ShapeFunction] = {}


def shape_function(*op_types: str, domain: str = MS) -> Callable[[ShapeFunction], ShapeFunction]:
    """Register `function` as the output-shape function of each op type; a duplicate is a bug."""

    def decorate(function: ShapeFunction) -> ShapeFunction:
        for op_type in op_types:
            key = (normalize_domain(domain), op_type)
            if key in _SHAPES:
                raise ValueError(f"duplicate shape function for {key}")
            _SHAPES[key] = function
        return function

    return decorate


def lookup(domain: str, op_type: str) -> ShapeFunction | None:
    return _SHAPES.get((normalize_domain(domain), op_type))


def registered() -> list[tuple[str, str]]:
    return sorted(_SHAPES)


def infer_outputs(
    graph: onnx.GraphProto, values: Mapping[str, TensorInfo], constant: Callable[[str], np.ndarray | None]
) -> dict[str, TensorInfo]:
    """The outputs these functions can type now: of each node with a shape function, an output that
    is still unknown, when every input present is fully known. Graph order, so a chain of contrib
    ops resolves in one call. A function that fails (a malformed node) types nothing."""
    found: dict[str, TensorInfo] = {}
    known = ChainMap(found, values)
    for node in graph.node:
        function = lookup(node.domain, node.op_type)
        if function is None or all(known.get(o) is not None and known[o].is_known for o in node.output if o):
            continue
        inputs = tuple(known.get(name) if name else None for name in node.input)
        if any(name and (tensor is None or not tensor.is_known) for name, tensor in zip(node.input, inputs)):
            continue
        try:
            results = function(OpNode(node, None, inputs, (), constant))
        except (ValueError, KeyError, IndexError, TypeError, ZeroDivisionError) as exc:
            log.info("no output shape for %s %s: %s", node.op_type, node.name, exc)
            continue
        for name, result in zip(node.output, results):
            if not name or result is None or (known.get(name) is not None and known[name].is_known):
                continue
            shape = tuple(int(d) for d in result[0])
            if any(d < 0 for d in shape):
                log.info("no output shape for %s %s: negative dim in %s", node.op_type, node.name, shape)
                continue
            found[name] = TensorInfo(name, shape, result[1])
    return found


# --- shape arithmetic ---------------------------------------------------------------------------------


def _broadcast(*shapes: Shape) -> Shape:
    return tuple(np.broadcast_shapes(*shapes))


def _matmul(a: Shape, b: Shape) -> Shape:
    """numpy matmul: a 1-D operand is promoted to a matrix and its added dim dropped from the
    result; the batch dims broadcast."""
    left = (1, *a) if len(a) == 1 else a
    right = (*b, 1) if len(b) == 1 else b
    if left[-1] != right[-2]:
        raise ValueError(f"matmul of {a} and {b}: inner dims differ")
    rows = (left[-2],) if len(a) > 1 else ()
    columns = (right[-1],) if len(b) > 1 else ()
    return (*_broadcast(left[:-2], right[:-2]), *rows, *columns)


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _window(node: OpNode, spatial: Shape, kernel: Sequence[int], dilation: bool) -> Shape:
    """Output spatial dims of a conv or pool window (ONNX's convPoolShapeInference): explicit pads
    (NOTSET), none (VALID: ⌊(in − k)/s⌋ + 1) or SAME (⌈in/s⌉); ceil_mode rounds up but drops a last
    window that would start in the end padding."""
    n = len(spatial)
    strides = node.attrs.get("strides") or [1] * n
    dilations = (node.attrs.get("dilations") or [1] * n) if dilation else [1] * n
    pads = node.attrs.get("pads") or [0] * (2 * n)
    auto_pad = _text(node.attrs.get("auto_pad", "NOTSET"))
    ceil_mode = node.attrs.get("ceil_mode", 0)
    out = []
    for i, size in enumerate(spatial):
        extent = (kernel[i] - 1) * dilations[i] + 1
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            out.append(-(-size // strides[i]))
        elif auto_pad == "VALID":
            out.append((size - extent) // strides[i] + 1)
        else:
            span = size + pads[i] + pads[i + n] - extent
            count = (-(-span // strides[i]) if ceil_mode else span // strides[i]) + 1
            if ceil_mode and (count - 1) * strides[i] >= size + pads[i]:
                count -= 1
            out.append(count)
    return tuple(out)


def _conv(node: OpNode, x: Shape, w: Shape, channels_last: bool) -> Shape:
    """Conv output: [N, M, spatial…] from X [N, C, spatial…] and W [M, C/group, k…]; the kernel is
    W's trailing dims unless kernel_shape says. channels_last: X and the output are [N, spatial…, C]."""
    spatial = x[1:-1] if channels_last else x[2:]
    kernel = node.attrs.get("kernel_shape") or w[2:]
    out = _window(node, spatial, kernel, dilation=True)
    return (x[0], *out, w[0]) if channels_last else (x[0], w[0], *out)


def _same(index: int = 0) -> ShapeFunction:
    def same(node: OpNode) -> list[Output]:
        x = node.inputs[index]
        return [(x.shape, x.dtype)]

    return same


# --- attention and embedding -----------------------------------------------------------------------


def _attention_width(node: OpNode, total: int) -> int:
    """Hidden size of the attention output: qkv_hidden_sizes[2], else a third of the QKV width."""
    sizes = node.attrs.get("qkv_hidden_sizes")
    if sizes:
        return sizes[2]
    if total % 3:
        raise ValueError(f"QKV width {total} is not divisible by 3")
    return total // 3


def _present(node: OpNode, past_index: int, hidden: int, dtype: str) -> Output:
    """present [2, B, N, P + S, H] from past [2, B, N, P, H] (the past's own shape when the buffer is
    shared); without past, P = 0 and H = hidden / num_heads."""
    batch, sequence = node.inputs[0].shape[:2]
    past = node.input(past_index)
    if past is not None:
        shared = node.attrs.get("past_present_share_buffer", 0)
        length = past.shape[3] if shared else past.shape[3] + sequence
        return (past.shape[0], *past.shape[1:3], length, past.shape[4]), dtype
    heads = node.attrs["num_heads"]
    if hidden % heads:
        raise ValueError(f"hidden size {hidden} is not divisible by num_heads {heads}")
    return (2, batch, heads, sequence, hidden // heads), dtype


@shape_function("QAttention")
def q_attention(node: OpNode) -> list[Output]:
    """input [B, S, Din], bias [Dq + Dk + Dv] → output [B, S, Dv] in the bias's float dtype (Dv =
    qkv_hidden_sizes[2], else a third of the bias); present [2, B, N, P + S, H] (past at input 8)."""
    x, bias = node.inputs[0], node.inputs[2]
    hidden = _attention_width(node, bias.shape[0])
    return [((*x.shape[:2], hidden), bias.dtype), _present(node, 8, hidden, bias.dtype)]


@shape_function("DecoderMaskedSelfAttention")
def decoder_masked_self_attention(node: OpNode) -> list[Output]:
    """input [B, S, Din], weights [Din, Dq + Dk + Dv] → output [B, S, Dv] in the input's dtype;
    present: the past buffer's shape [2, B, N, max length, H] (past_present_share_buffer), else
    [2, B, N, P + S, H]."""
    x, weights = node.inputs[0], node.inputs[1]
    hidden = _attention_width(node, weights.shape[1])
    return [((*x.shape[:2], hidden), x.dtype), _present(node, 4, hidden, x.dtype)]


@shape_function("QEmbedLayerNormalization")
def q_embed_layer_normalization(node: OpNode) -> list[Output]:
    """input_ids [B, S], word_embedding_quant [V, D] → layernorm_out [B, S, D] in the scales' float
    dtype (input 8); mask_index_out [B] in the ids' int32."""
    ids, word, scale = node.inputs[0], node.inputs[2], node.inputs[8]
    return [((*ids.shape, word.shape[1]), scale.dtype), ((ids.shape[0],), ids.dtype)]


# --- quantized matrix ops --------------------------------------------------------------------------


@shape_function("DynamicQuantizeMatMul")
def dynamic_quantize_matmul(node: OpNode) -> list[Output]:
    """Float A × 8-bit B with numpy matmul shapes; Y in A's float dtype."""
    a, b = node.inputs[0], node.inputs[1]
    return [(_matmul(a.shape, b.shape), a.dtype)]


@shape_function("MatMulIntegerToFloat")
def matmul_integer_to_float(node: OpNode) -> list[Output]:
    """8-bit A × 8-bit B with numpy matmul shapes; Y in a_scale's float dtype (input 2)."""
    a, b = node.inputs[0], node.inputs[1]
    return [(_matmul(a.shape, b.shape), node.inputs[2].dtype)]


@shape_function("QOrderedMatMul")
def q_ordered_matmul(node: OpNode) -> list[Output]:
    """int8 A (input 0) × int8 B (input 2) with numpy matmul shapes; Y int8."""
    a, b = node.inputs[0], node.inputs[2]
    return [(_matmul(a.shape, b.shape), a.dtype)]


def _gemm(node: OpNode, a: Shape, b: Shape) -> Shape:
    """[M, N] from A [M, K] (transA: [K, M]) and B [K, N] (transB: [N, K])."""
    if len(a) != 2 or len(b) != 2:
        raise ValueError(f"Gemm operands must be matrices, got {a} and {b}")
    return (a[1] if node.attrs.get("transA", 0) else a[0], b[0] if node.attrs.get("transB", 0) else b[1])


@shape_function("QGemm")
def qgemm(node: OpNode) -> list[Output]:
    """A (input 0) × B (input 3) → [M, N]; quantized to y_zero_point's dtype when it is given
    (input 8), else float32."""
    y_zero_point = node.input(8)
    dtype = y_zero_point.dtype if y_zero_point is not None else "float32"
    return [(_gemm(node, node.inputs[0].shape, node.inputs[3].shape), dtype)]


@shape_function("MatMulNBits", "MatMulBnb4")
def matmul_nbits(node: OpNode) -> list[Output]:
    """A [..., K] × an N×K quantized weight → [..., N] in A's dtype (N is an attribute)."""
    a = node.inputs[0]
    if a.shape[-1] != node.attrs["K"]:
        raise ValueError(f"A's last dim {a.shape[-1]} is not K = {node.attrs['K']}")
    return [((*a.shape[:-1], node.attrs["N"]), a.dtype)]


@shape_function("GatherBlockQuantized")
def gather_block_quantized(node: OpNode) -> list[Output]:
    """data[:gather_axis] + indices + data[gather_axis + 1:] in the scales' dtype, where uint8 data
    packs 8/bits values per byte along quantize_axis (default 1), so that dim counts 8/bits times its
    bytes (int4/uint4 data already hold one value per element)."""
    data, indices, scales = node.inputs[0], node.inputs[1], node.inputs[2]
    gather_axis = node.attrs.get("gather_axis", 0) % data.rank
    quantize_axis = node.attrs.get("quantize_axis", 1) % data.rank
    shape = list(data.shape)
    if data.dtype == "uint8":
        shape[quantize_axis] *= 8 // node.attrs.get("bits", 4)
    return [((*shape[:gather_axis], *indices.shape, *shape[gather_axis + 1 :]), scales.dtype)]


# --- QLinear elementwise, pooling, concat, conv ---------------------------------------------------------


shape_function("QLinearSigmoid", "QLinearLeakyRelu", "QLinearSoftmax")(_same(0))


@shape_function("QLinearAdd", "QLinearMul")
def qlinear_binary(node: OpNode) -> list[Output]:
    """A (input 0) and B (input 3) broadcast; C in A's 8-bit dtype."""
    a, b = node.inputs[0], node.inputs[3]
    return [(_broadcast(a.shape, b.shape), a.dtype)]


@shape_function("QLinearWhere")
def qlinear_where(node: OpNode) -> list[Output]:
    """condition (0), X (1) and Y (4) broadcast; Z in X's 8-bit dtype."""
    condition, x, y = node.inputs[0], node.inputs[1], node.inputs[4]
    return [(_broadcast(condition.shape, x.shape, y.shape), x.dtype)]


@shape_function("QLinearConcat")
def qlinear_concat(node: OpNode) -> list[Output]:
    """Y_scale, Y_zero_point, then (X, X_scale, X_zero_point) per input: the Xs concatenated along
    `axis`; Y in Y_zero_point's 8-bit dtype."""
    tensors = [node.inputs[i] for i in range(2, len(node.inputs), 3)]
    axis = node.attrs["axis"] % tensors[0].rank
    first = tensors[0].shape
    if any(t.rank != len(first) or t.shape[:axis] + t.shape[axis + 1 :] != first[:axis] + first[axis + 1 :] for t in tensors):
        raise ValueError(f"QLinearConcat inputs differ off axis {axis}: {[t.shape for t in tensors]}")
    length = sum(t.shape[axis] for t in tensors)
    return [((*first[:axis], length, *first[axis + 1 :]), node.inputs[1].dtype)]


@shape_function("QLinearReduceMean")
def qlinear_reduce_mean(node: OpNode) -> list[Output]:
    """data reduced over `axes` (all when absent), kept as 1s when keepdims (default 1)."""
    data = node.inputs[0]
    axes = {a % data.rank for a in node.attrs.get("axes") or range(data.rank)}
    keep = node.attrs.get("keepdims", 1)
    shape = [1 if i in axes else d for i, d in enumerate(data.shape) if keep or i not in axes]
    return [(tuple(shape), data.dtype)]


@shape_function("QLinearGlobalAveragePool")
def qlinear_global_average_pool(node: OpNode) -> list[Output]:
    """N and C kept, every spatial dim 1: [N, C, 1, …] or, channels_last, [N, 1, …, C]."""
    x = node.inputs[0]
    if x.rank < 2:
        raise ValueError("QLinearGlobalAveragePool needs N and C")
    ones = (1,) * (x.rank - 2)
    shape = (x.shape[0], *ones, x.shape[-1]) if node.attrs.get("channels_last", 0) else (*x.shape[:2], *ones)
    return [(shape, x.dtype)]


@shape_function("QLinearAveragePool")
def qlinear_average_pool(node: OpNode) -> list[Output]:
    """AveragePool's window arithmetic over kernel_shape, strides, pads / auto_pad, ceil_mode (no
    dilations), in NCHW or, channels_last, NHWC; Y in X's dtype."""
    x = node.inputs[0]
    last = bool(node.attrs.get("channels_last", 0))
    spatial = x.shape[1:-1] if last else x.shape[2:]
    out = _window(node, spatial, node.attrs["kernel_shape"], dilation=False)
    shape = (x.shape[0], *out, x.shape[-1]) if last else (*x.shape[:2], *out)
    return [(shape, x.dtype)]


@shape_function("QLinearConv")
def qlinear_conv(node: OpNode) -> list[Output]:
    """Conv of x (input 0) with w (input 3, [M, C/group, k…]) in NCHW or, channels_last, NHWC;
    y in y_zero_point's 8-bit dtype (input 7)."""
    x, w = node.inputs[0], node.inputs[3]
    return [(_conv(node, x.shape, w.shape, bool(node.attrs.get("channels_last", 0))), node.inputs[7].dtype)]


# --- fused float ops -------------------------------------------------------------------------------------


shape_function("BiasSoftmax")(_same(0))


def _fused_operand(shape: Shape, trans: bool, trans_batch: bool) -> Shape:
    """An operand as FusedMatMul sees it: transBatch moves the first dim behind the batch dims (to
    the rows), trans swaps the last two (ORT's FusedMatMulShapeInference)."""
    if len(shape) == 1:
        return shape
    batch = shape[1:-1] if trans_batch else shape[:-2]
    rows, columns = (shape[0], shape[-1]) if trans_batch else (shape[-2], shape[-1])
    return (*batch, columns, rows) if trans else (*batch, rows, columns)


@shape_function("FusedMatMul", "TransposeMatMul", "FusedMatMulActivation")
def fused_matmul(node: OpNode) -> list[Output]:
    """op(A)·op(B) with numpy matmul shapes, op a transpose of the last two dims (transA/transB)
    and/or of the batch dims (transBatchA/transBatchB); Y in A's dtype."""
    a, b = node.inputs[0], node.inputs[1]
    left = _fused_operand(a.shape, bool(node.attrs.get("transA", 0)), bool(node.attrs.get("transBatchA", 0)))
    right = _fused_operand(b.shape, bool(node.attrs.get("transB", 0)), bool(node.attrs.get("transBatchB", 0)))
    return [(_matmul(left, right), a.dtype)]


@shape_function("FusedGemm")
def fused_gemm(node: OpNode) -> list[Output]:
    """Gemm's [M, N] from A and B (transA/transB); Y in A's dtype."""
    a, b = node.inputs[0], node.inputs[1]
    return [(_gemm(node, a.shape, b.shape), a.dtype)]


@shape_function("FusedConv")
def fused_conv(node: OpNode) -> list[Output]:
    """Conv's [N, M, spatial…] from X [N, C, spatial…] and W [M, C/group, k…]; Y in X's dtype."""
    x, w = node.inputs[0], node.inputs[1]
    return [(_conv(node, x.shape, w.shape, channels_last=False), x.dtype)]


@shape_function("NhwcConv")
def nhwc_conv(node: OpNode) -> list[Output]:
    """Conv in NHWC: X [N, spatial…, C], W [M, C/group, k…] → [N, spatial…, M]; Y in X's dtype."""
    x, w = node.inputs[0], node.inputs[1]
    return [(_conv(node, x.shape, w.shape, channels_last=True), x.dtype)]

