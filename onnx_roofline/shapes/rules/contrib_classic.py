"""Output shapes for onnxruntime's "classic" contrib ops (com.microsoft versions of standard ops and
its small utility ops) and the retired ONNX experimental ops it still registers in the default
domain: ONNX types the ai.onnx Pad, Range, GatherND, … but has no schema for these. Each follows
what onnxruntime's kernel returns (tests/test_contrib_classic.py runs them); where a size is in a
tensor's values (Pad's pads, Range's limits, ExpandDims' axis, CropAndResize's crop_size) it comes
from the folded constant, and the output stays untyped without one. Unique's and Tokenizer's sizes
depend on the data: those outputs are never typed."""

from __future__ import annotations

import math

from onnx_roofline.model.op_node import KnownNode
from onnx_roofline.shapes.rules import contrib
from onnx_roofline.shapes.rules.arithmetic import broadcast, constant_values, matmul, same, window
from onnx_roofline.shapes.rules.contrib import reduced_shape
from onnx_roofline.shapes.rules.registry import DataDependent, Output, shape_function

shape_function("Trilu", "Inverse", "SampleOp")(same(0))
shape_function(
    "ImageScaler",
    "Affine",
    "Scale",
    "ScaledTanh",
    "ParametricSoftplus",
    "GRUUnit",
    "MemcpyFromHost",
    "MemcpyToHost",
    domain="",
)(same(0))  # GRUUnit's hidden has hidden_prev's shape


# --- standard ops in com.microsoft ----------------------------------------------------------------


@shape_function("Pad", value_inputs=(1,))
def pad(node: KnownNode) -> list[Output]:
    """Each dim grows by its begin and end pads (negative: cropped), pads being the constant input 1
    ([2·rank] or [1, 2·rank], begins first)."""
    data, pads = node.operand(0), constant_values(node, 1)
    if pads is None:
        return [None]
    rank = data.rank
    return [(tuple(d + pads[i] + pads[i + rank] for i, d in enumerate(data.shape)), data.dtype)]


@shape_function("Range", value_inputs=(0, 1, 2))
def range_(node: KnownNode) -> list[Output]:
    """[max(⌈(limit − start)/delta⌉, 0)] in start's dtype, from the constant scalars (delta default 1)."""
    start, limit = constant_values(node, 0), constant_values(node, 1)
    delta = constant_values(node, 2) if node.input(2) is not None else [1]
    if start is None or limit is None or delta is None:
        return [None]
    return [((max(math.ceil((limit[0] - start[0]) / delta[0]), 0),), node.operand(0).dtype)]


@shape_function("GatherND")
def gather_nd(node: KnownNode) -> list[Output]:
    """indices [..., k] pick slices of data: indices.shape[:-1] + data.shape[k:] (no batch_dims)."""
    data, indices = node.operand(0), node.operand(1)
    return [((*indices.shape[:-1], *data.shape[indices.shape[-1] :]), data.dtype)]


@shape_function("GridSample")
def grid_sample(node: KnownNode) -> list[Output]:
    """X [N, C, H, W] sampled at grid [N, Hout, Wout, 2]: Y [N, C, Hout, Wout] in X's dtype."""
    x, grid = node.operand(0), node.operand(1)
    return [((*x.shape[:2], *grid.shape[1:-1]), x.dtype)]


@shape_function("Unique")
def unique(node: KnownNode) -> list[Output]:
    """idx has the 1-D input's length (int64); the uniques and their counts have as many elements as
    the input has distinct values, which depends on the data: left untyped."""
    distinct = DataDependent("Unique's uniques and counts number the input's distinct values, which only the run knows")
    return [distinct, (node.operand(0).shape, "int64"), distinct]


@shape_function("MaxpoolWithMask")
def maxpool_with_mask(node: KnownNode) -> list[Output]:
    """MaxPool's window arithmetic (kernel_shape, strides, pads / auto_pad; no dilations) over X's
    spatial dims: [N, C, out…] in X's dtype."""
    x = node.operand(0)
    return [((*x.shape[:2], *window(node, x.shape[2:], node.attrs["kernel_shape"], dilation=False)), x.dtype)]


@shape_function("NhwcMaxPool")
def nhwc_max_pool(node: KnownNode) -> list[Output]:
    """MaxPool's window arithmetic (dilations, ceil_mode) in NHWC: [N, out…, C] in X's dtype."""
    x = node.operand(0)
    return [
        ((x.shape[0], *window(node, x.shape[1:-1], node.attrs["kernel_shape"], dilation=True), x.shape[-1]), x.dtype)
    ]


shape_function("NhwcFusedConv")(contrib.nhwc_conv)  # NhwcConv with FusedConv's sum and activation


@shape_function("ConvTransposeWithDynamicPads", value_inputs=(2,))
def conv_transpose_with_dynamic_pads(node: KnownNode) -> list[Output]:
    """ConvTranspose's [N, Cout·group, out…], out = stride·(in − 1) + output_padding + (k − 1)·dilation
    + 1 − pad_begin − pad_end, the pads from the constant input 2 (begins first; absent: 0)."""
    x, w = node.operand(0), node.operand(1)
    spatial = x.rank - 2
    pads = constant_values(node, 2) if node.input(2) is not None else [0] * (2 * spatial)
    if pads is None:
        return [None]
    kernel = node.attrs.get("kernel_shape") or w.shape[2:]
    strides = node.attrs.get("strides") or [1] * spatial
    dilations = node.attrs.get("dilations") or [1] * spatial
    extra = node.attrs.get("output_padding") or [0] * spatial
    out = [
        strides[i] * (x.shape[2 + i] - 1) + extra[i] + (kernel[i] - 1) * dilations[i] + 1 - pads[i] - pads[i + spatial]
        for i in range(spatial)
    ]
    return [((x.shape[0], w.shape[1] * node.attrs.get("group", 1), *out), x.dtype)]


def _signal(node: KnownNode) -> tuple[int, int]:
    """(index of the last signal dim, onesided) of Rfft/Irfft: signal_ndim (default 1) counts the
    signal dims from the end, before Irfft's trailing [2]."""
    x = node.operand(0)
    complex_input = node.op_type == "Irfft"
    return x.rank - 1 - complex_input, node.attrs.get("onesided", 1)


@shape_function("Rfft")
def rfft(node: KnownNode) -> list[Output]:
    """The last signal dim n becomes n//2 + 1 (onesided, the default; n otherwise), and a last dim
    [2] holds the real and imaginary parts; X's dtype."""
    x = node.operand(0)
    last, onesided = _signal(node)
    return [((*x.shape[:last], x.shape[last] // 2 + 1 if onesided else x.shape[last], 2), x.dtype)]


@shape_function("Irfft")
def irfft(node: KnownNode) -> list[Output]:
    """X [..., m, 2] → [..., 2·m − 1] (onesided, the default: what onnxruntime's kernel returns, not
    the 2·(m − 1) of torch.irfft), [..., m] otherwise; X's dtype."""
    x = node.operand(0)
    last, onesided = _signal(node)
    return [((*x.shape[:last], 2 * x.shape[last] - 1 if onesided else x.shape[last]), x.dtype)]


# --- utility ops ------------------------------------------------------------------------------------


@shape_function("ExpandDims", value_inputs=(1,))
def expand_dims(node: KnownNode) -> list[Output]:
    """X with a 1 inserted at the constant axis (input 1; negative counts from the end of the result)."""
    x, axis = node.operand(0), constant_values(node, 1)
    if axis is None:
        return [None]
    at = axis[0] % (x.rank + 1)
    return [((*x.shape[:at], 1, *x.shape[at:]), x.dtype)]


@shape_function("CDist")
def cdist(node: KnownNode) -> list[Output]:
    """A [M, N] and B [K, N] → [M, K] in A's dtype."""
    a, b = node.operand(0), node.operand(1)
    return [((a.shape[0], b.shape[0]), a.dtype)]


def _integer_result(*tensors) -> str:
    """uint32 when every operand is unsigned, int32 otherwise (the schemas' T3 / T2)."""
    return "uint32" if all(t.dtype.startswith("uint") for t in tensors) else "int32"


@shape_function("MatMulInteger16")
def matmul_integer16(node: KnownNode) -> list[Output]:
    """numpy matmul shapes of the 16-bit A and B; int32 (uint32 when both are uint16)."""
    a, b = node.operand(0), node.operand(1)
    return [(matmul(a.shape, b.shape), _integer_result(a, b))]


@shape_function("MulInteger")
def mul_integer(node: KnownNode) -> list[Output]:
    """A (input 0) and B (input 2) broadcast; C int32."""
    return [(broadcast(node.operand(0).shape, node.operand(2).shape), "int32")]


@shape_function("ReduceSumInteger")
def reduce_sum_integer(node: KnownNode) -> list[Output]:
    """data reduced over `axes`, kept as 1s when keepdims; int32 (uint32 for uint8 data)."""
    return [(reduced_shape(node), _integer_result(node.operand(0)))]


@shape_function("ComplexMul", "ComplexMulConj")
def complex_mul(node: KnownNode) -> list[Output]:
    """A and B ([..., 2] complex pairs) broadcast, in A's dtype."""
    a, b = node.operand(0), node.operand(1)
    return [(broadcast(a.shape, b.shape), a.dtype)]


@shape_function("IsAllFinite")
def is_all_finite(node: KnownNode) -> list[Output]:
    """One bool scalar for all the inputs."""
    return [((), "bool")]


@shape_function("BitmaskDropout", "BitmaskBiasDropout")
def bitmask_dropout(node: KnownNode) -> list[Output]:
    """output has data's shape and dtype; the mask packs one bit per element into uint32 words: [⌈n/32⌉]."""
    data = node.operand(0)
    return [(data.shape, data.dtype), ((-(-data.numel // 32),), "uint32")]


@shape_function("MurmurHash3")
def murmur_hash3(node: KnownNode) -> list[Output]:
    """One 32-bit hash per element of X: uint32 when `positive` (the default), else int32."""
    return [(node.operand(0).shape, "uint32" if node.attrs.get("positive", 1) else "int32")]


@shape_function("CropAndResize", value_inputs=(3,))
def crop_and_resize(node: KnownNode) -> list[Output]:
    """[num_rois, C, crop_h, crop_w] from X [N, C, H, W], the batch_indices' length and the constant
    crop_size (input 3); X's dtype."""
    x, crop = node.operand(0), constant_values(node, 3)
    if crop is None:
        return [None]
    return [((node.operand(2).shape[0], x.shape[1], *crop[:2]), x.dtype)]


@shape_function("WordConvEmbedding")
def word_conv_embedding(node: KnownNode) -> list[Output]:
    """Sequence [S, L] and W [M, 1, w, E] → Y [S, M] in W's float dtype."""
    return [((node.operand(0).shape[0], node.operand(1).shape[0]), node.operand(1).dtype)]


@shape_function("TorchEmbedding")
def torch_embedding(node: KnownNode) -> list[Output]:
    """weight [N, M] looked up at indices: indices.shape + [M] in weight's dtype."""
    weight, indices = node.operand(0), node.operand(1)
    return [((*indices.shape, weight.shape[1]), weight.dtype)]


@shape_function("Tokenizer")
def tokenizer(node: KnownNode) -> list[Output]:
    """[N, C, D] or [C, D] strings, D the most tokens any string holds: a size in the strings'
    values, so never typed."""
    raise DataDependent(
        "Tokenizer's output holds as many tokens as the longest string splits into: the strings' values"
    )


# --- onnxruntime's default-domain ops ONNX retired --------------------------------------------------


@shape_function("Crop", domain="")
def crop(node: KnownNode) -> list[Output]:
    """X [N, C, H, W] → [N, C, scale_h, scale_w] when `scale` is given, else [N, C, H − top −
    bottom, W − left − right], `border` being (left, top, right, bottom)."""
    x = node.operand(0)
    scale = node.attrs.get("scale")
    if scale:
        return [((*x.shape[:2], *scale), x.dtype)]
    left, top, right, bottom = node.attrs["border"]
    return [((*x.shape[:2], x.shape[2] - top - bottom, x.shape[3] - left - right), x.dtype)]


@shape_function("DynamicSlice", domain="", value_inputs=(1, 2, 3))
def dynamic_slice(node: KnownNode) -> list[Output]:
    """Slice with starts, ends and axes (default all) as constant inputs, step 1: each sliced dim
    keeps len(range(dim)[start:end]) (negative indices count from the end, clamped)."""
    x = node.operand(0)
    starts, ends = constant_values(node, 1), constant_values(node, 2)
    axes = constant_values(node, 3) if node.input(3) is not None else list(range(len(starts or ())))
    if starts is None or ends is None or axes is None:
        return [None]
    shape = list(x.shape)
    for axis, start, end in zip(axes, starts, ends, strict=False):
        shape[axis % x.rank] = len(range(shape[axis % x.rank])[start:end])
    return [(tuple(shape), x.dtype)]
