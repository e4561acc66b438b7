"""Shape arithmetic the shape rules share: numpy broadcasting and matmul, conv and pool windows,
Gemm's operand transposes, and the output width and present state of the attention ops whose QKV
weights are merged (contrib Attention, QAttention, DecoderMaskedSelfAttention)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from onnx_roofline.model.op_node import KnownNode
from onnx_roofline.shapes.rules.registry import Output, Shape, ShapeFunction


def broadcast(*shapes: Shape) -> Shape:
    return tuple(np.broadcast_shapes(*shapes))


def matmul(a: Shape, b: Shape) -> Shape:
    """numpy matmul: a 1-D operand is promoted to a matrix and its added dim dropped from the
    result; the batch dims broadcast."""
    left = (1, *a) if len(a) == 1 else a
    right = (*b, 1) if len(b) == 1 else b
    if left[-1] != right[-2]:
        raise ValueError(f"matmul of {a} and {b}: inner dims differ")
    rows = (left[-2],) if len(a) > 1 else ()
    columns = (right[-1],) if len(b) > 1 else ()
    return (*broadcast(left[:-2], right[:-2]), *rows, *columns)


def constant_values(node: KnownNode, index: int) -> list | None:
    """The constant (or folded) value at input `index` as a flat list, else None."""
    value = node.input_value(index)
    return None if value is None else value.reshape(-1).tolist()


def text(value) -> str:
    return value.decode() if isinstance(value, bytes) else value


def window(node: KnownNode, spatial: Shape, kernel: Sequence[int], dilation: bool) -> Shape:
    """Output spatial dims of a conv or pool window (ONNX's convPoolShapeInference): explicit pads
    (NOTSET), none (VALID: ⌊(in − k)/s⌋ + 1) or SAME (⌈in/s⌉); ceil_mode rounds up but drops a last
    window that would start in the end padding."""
    n = len(spatial)
    strides = node.attrs.get("strides") or [1] * n
    dilations = (node.attrs.get("dilations") or [1] * n) if dilation else [1] * n
    pads = node.attrs.get("pads") or [0] * (2 * n)
    auto_pad = text(node.attrs.get("auto_pad", "NOTSET"))
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


def conv(node: KnownNode, x: Shape, w: Shape, channels_last: bool) -> Shape:
    """Conv output: [N, M, spatial…] from X [N, C, spatial…] and W [M, C/group, k…]; the kernel is
    W's trailing dims unless kernel_shape says. channels_last: X and the output are [N, spatial…, C]."""
    spatial = x[1:-1] if channels_last else x[2:]
    kernel = node.attrs.get("kernel_shape") or w[2:]
    out = window(node, spatial, kernel, dilation=True)
    return (x[0], *out, w[0]) if channels_last else (x[0], w[0], *out)


def same(index: int = 0) -> ShapeFunction:
    def same(node: KnownNode) -> list[Output]:
        x = node.operand(index)
        return [(x.shape, x.dtype)]

    return same


def gemm(node: KnownNode, a: Shape, b: Shape) -> Shape:
    """[M, N] from A [M, K] (transA: [K, M]) and B [K, N] (transB: [N, K])."""
    if len(a) != 2 or len(b) != 2:
        raise ValueError(f"Gemm operands must be matrices, got {a} and {b}")
    return (a[1] if node.attrs.get("transA", 0) else a[0], b[0] if node.attrs.get("transB", 0) else b[1])


def merged_qkv_width(node: KnownNode, total: int) -> int:
    """Hidden size of the attention output: qkv_hidden_sizes[2], else a third of the QKV width."""
    sizes = node.attrs.get("qkv_hidden_sizes")
    if sizes:
        return sizes[2]
    if total % 3:
        raise ValueError(f"QKV width {total} is not divisible by 3")
    return total // 3


def merged_present(node: KnownNode, past_index: int, hidden: int, dtype: str) -> Output:
    """present [2, B, N, P + S, H] from past [2, B, N, P, H] (the past's own shape when the buffer is
    shared); without past, P = 0 and H = hidden / num_heads."""
    batch, sequence = node.operand(0).shape[:2]
    past = node.input(past_index)
    if past is not None:
        shared = node.attrs.get("past_present_share_buffer", 0)
        length = past.shape[3] if shared else past.shape[3] + sequence
        return (past.shape[0], *past.shape[1:3], length, past.shape[4]), dtype
    heads = node.attrs["num_heads"]
    if hidden % heads:
        raise ValueError(f"hidden size {hidden} is not divisible by num_heads {heads}")
    return (2, batch, heads, sequence, hidden // heads), dtype
