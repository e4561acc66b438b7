"""onnxruntime's "classic" contrib ops: com.microsoft versions of standard ONNX ops (Pad, Range,
Trilu, GatherND, GridSample, Unique, MaxpoolWithMask, the NHWC pool and conv, the FFTs) and its
small utility ops (ExpandDims, Inverse, CDist, the integer matmul/mul/reduce, the complex products,
IsAllFinite, the bit-packed dropouts, CropAndResize, MurmurHash3, the embeddings, Tokenizer), plus
the experimental ops ONNX retired that onnxruntime still registers in the default domain below
opset 10 (ImageScaler, Crop, Affine, Scale, ScaledTanh, ParametricSoftplus, DynamicSlice, GRUUnit)
and its Memcpy nodes.

An op with an ai.onnx counterpart is costed by that op's rule, registered here for the second
domain; where the inputs sit in other slots or the layout is NHWC, the rule is called on a view
of the node that puts them where the ai.onnx rule reads them (`_as`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import cast

from onnx_roofline.costs.cost import Cost
from onnx_roofline.costs.rules import contrib, conv, elementwise, linalg, movement, pooling, reduction, signal
from onnx_roofline.costs.rules.registry import MATRIX, register
from onnx_roofline.model.op_node import KnownNode, OpNode
from onnx_roofline.model.status import UNSUPPORTED, Uncostable
from onnx_roofline.model.tensors import KnownTensor, TensorInfo

MS = "com.microsoft"

# --- the same semantics as an ai.onnx op: its rule, for com.microsoft ------------------------------

register("Pad", domain=MS)(movement.pad)  # pads an input (int64, [2·rank] or [1, 2·rank]), mode attribute
register("Range", domain=MS)(movement.range_)
register("Trilu", "SampleOp", domain=MS)(movement.copy)  # SampleOp: an echo of its input
register("GatherND", "TorchEmbedding", domain=MS)(movement.gather)  # TorchEmbedding: weight[indices]
register("GridSample", domain=MS)(movement.grid_sample)  # mode bilinear (default), nearest, bicubic
register("Unique", domain=MS)(movement.unique)  # 1-D input, no axis
register("MaxpoolWithMask", domain=MS)(pooling.max_pool)
register("NhwcFusedConv", domain=MS, unit=MATRIX)(contrib.fused_conv)  # W in the ONNX layout
register("MatMulInteger16", domain=MS, unit=MATRIX)(linalg.matmul)
register("ReduceSumInteger", domain=MS)(reduction.reduce_combine)
register("ExpandDims", domain=MS)(movement.view_with_shape_input)  # Unsqueeze with an int32 axis input
register("BitmaskDropout", domain=MS)(movement.dropout)  # training_mode at input 2, as Dropout's
register("BitmaskBiasDropout", domain=MS)(contrib.bias_dropout)  # residual 2, training_mode 4, as BiasDropout's
register("Tokenizer", domain=MS)(movement.scan_strings)  # a scan of each string for tokenexp or separators
register("MemcpyFromHost", "MemcpyToHost")(movement.copy)
register("Crop", "DynamicSlice")(movement.slice_)


def _as(node: KnownNode, inputs: Sequence[KnownTensor | None], outputs: Sequence[KnownTensor | None]) -> KnownNode:
    """The node with other tensors in its slots, for the rule of its ai.onnx counterpart."""
    return OpNode(node.proto, node.opset, inputs, outputs, node.constant)


def _nchw(tensor: KnownTensor) -> KnownTensor:
    """An NHWC tensor's shape read as NCHW (the channels moved behind the batch)."""
    return cast(
        KnownTensor, TensorInfo(tensor.name, (tensor.shape[0], tensor.shape[-1], *tensor.shape[1:-1]), tensor.dtype)
    )


@register("NhwcMaxPool", domain=MS)
def nhwc_max_pool(node: KnownNode) -> Cost:
    """MaxPool's count on the NHWC (int8/uint8) tensors: t − 1 compares per window of t real taps
    (padding and ceil_mode overhang excluded, dilations honored); the default bytes."""
    return pooling.max_pool(_as(node, [_nchw(node.operand(0))], [_nchw(node.result(0))]))


@register("ConvTransposeWithDynamicPads", domain=MS, unit=MATRIX)
def conv_transpose_with_dynamic_pads(node: KnownNode) -> Cost:
    """ConvTranspose's count, its pads given as input 2 (int64) and the bias B at input 3:
    2·N·Cin·Hin·Win·(Cout/group)·kH·kW, + one per output for B. Default bytes (Pads read)."""
    x, w, _, b = (*node.inputs, None, None)[:4]
    return conv.conv_transpose(_as(node, [x, w, b], node.outputs))


# --- FFTs -------------------------------------------------------------------------------------------


def _fft(node: KnownNode, real: KnownTensor) -> Cost:
    """One real-data FFT per batch line over the last signal_ndim dims of `real` (the real side):
    FFTW's 2.5·N·log2(N), N their product."""
    dims = node.attrs.get("signal_ndim", 1)
    length = math.prod(real.shape[real.rank - dims :])
    return Cost(flops=real.numel // length * signal.fft_flops(length, real=True) if length else 0)


@register("Rfft", domain=MS)
def rfft(node: KnownNode) -> Cost:
    """One-sided FFT of a real signal over the last `signal_ndim` dims (default 1), N their product:
    2.5·N·log2(N) per batch line, FFTW's real-data count (the DFT rule's). Default bytes."""
    return _fft(node, node.operand(0))


@register("Irfft", domain=MS)
def irfft(node: KnownNode) -> Cost:
    """The inverse of Rfft to a real signal of N points (the output's signal dims): 2.5·N·log2(N) per
    batch line, plus the 1/N normalization, one multiply per output element. Default bytes."""
    y = node.result(0)
    return Cost(flops=_fft(node, y).flops + y.numel)


# --- linear algebra and distances --------------------------------------------------------------------


@register("Inverse", domain=MS)
def inverse(node: KnownNode) -> Cost:
    """[*, M, M]: LU factorization and inversion from it, 2·M³ FLOPs per matrix (LAPACK's getrf
    ⅔M³ + getri ⁴⁄₃M³, the leading terms). Default bytes."""
    m = node.operand(0).shape[-1]
    matrices = node.operand(0).numel // (m * m) if m else 0
    return Cost(flops=matrices * 2 * m**3)


@register("CDist", domain=MS)
def cdist(node: KnownNode) -> Cost:
    """A [M, N] against B [K, N]: per pair N subtracts, N squares and N − 1 adds, 3N − 1 FLOPs
    (sqeuclidean, the default); euclidean adds a sqrt per pair (a transcendental). onnxruntime's
    kernel has no other metric: any other is reported unsupported. Default bytes."""
    metric = contrib.text_attr(node, "metric", "sqeuclidean")
    if metric not in ("sqeuclidean", "euclidean"):
        raise Uncostable(UNSUPPORTED, f"CDist metric {metric!r}: onnxruntime implements only sqeuclidean and euclidean")
    n, pairs = node.operand(0).shape[1], node.result(0).numel
    return Cost(flops=pairs * (3 * n - 1), transcendentals=pairs if metric == "euclidean" else 0)


# --- elementwise -------------------------------------------------------------------------------------


@register("MulInteger", domain=MS)
def mul_integer(node: KnownNode) -> Cost:
    """(A − A_zero_point)·(B − B_zero_point) into int32, broadcast: per output element 1 multiply and
    1 subtract per zero point given. Default bytes."""
    subtracts = (node.input(1) is not None) + (node.input(3) is not None)
    return Cost(flops=(1 + subtracts) * node.result(0).numel)


@register("ComplexMul", "ComplexMulConj", domain=MS)
def complex_mul(node: KnownNode) -> Cost:
    """A·B or A·conj(B) of complex numbers stored as [..., 2] (real, imaginary), broadcast: 4
    multiplies and 2 adds per complex output, 3 FLOPs per output element. Default bytes."""
    return Cost(flops=3 * node.result(0).numel)


@register("IsAllFinite", domain=MS)
def is_all_finite(node: KnownNode) -> Cost:
    """One test per element of every input (isfinite, or isnan / isinf alone); a failing element
    clears the one bool output, a store. Default bytes (every input read, 1 byte written)."""
    return Cost(flops=sum(t.numel for t in node.present_inputs))


_MURMUR_BLOCK, _MURMUR_FINAL = 7, 9
"""MurmurHash3_x86_32's integer ops: per 4-byte block multiply, rotate, multiply, xor, rotate,
multiply, add; the finalizer xors the length and mixes (3 shift-xors, 2 multiplies)."""


@register("MurmurHash3", domain=MS)
def murmur_hash3(node: KnownNode) -> Cost:
    """One MurmurHash3_x86_32 per element of a 4- or 8-byte key: 7 integer ops per 4-byte block + 9
    in the finalizer (16 for int32/float, 23 for int64/double), counted one FLOP each as the bitwise
    ops are; a string key of the L bytes assumed (--string-bytes), ⌊L/4⌋ blocks. Default bytes."""
    x = node.operand(0)
    return Cost(flops=x.numel * (_MURMUR_BLOCK * (x.bits // 32) + _MURMUR_FINAL))


# --- image and embedding ops ---------------------------------------------------------------------------


@register("CropAndResize", domain=MS)
def crop_and_resize(node: KnownNode) -> Cost:
    """Y [R, C, crop_h, crop_w]: bilinear (default) 4 taps per output at 2 FLOPs (a multiply-add)
    each, 8 FLOPs; nearest a copy, 0. Crop positions are per output position, shared across
    channels: not counted. Reads the taps touched (capped at X) plus rois, batch_indices and
    crop_size; writes Y."""
    taps = 1 if contrib.text_attr(node, "mode", "bilinear") == "nearest" else 4
    return movement.interpolation_cost(node, taps)


@register("WordConvEmbedding", domain=MS)
def word_conv_embedding(node: KnownNode) -> Cost:
    """Sequence [S, L] of char ids → Y [S, M]: per word, its chars' embeddings (C [V, E]) convolved
    with W [M, 1, w, E] at stride 1, the bias, tanh, and a max over the windows. How many windows a
    word has depends on its length (L − w + 1 at most); the lower bound is counted, as for the other
    data-dependent sampling ops: one window per word, 2·M·w·E + M FLOPs (the dot products, the
    bias) + M compares, M tanh. Bytes: the w char rows looked up per word (at most the table), and
    Sequence, W, B whole; Y written."""
    sequence, w, bias, table = node.operands
    words, filters = sequence.shape[0], w.shape[0]
    taps = math.prod(w.shape[1:])
    looked_up = movement.kept_bytes(table, words * w.shape[2] * table.shape[1])
    return Cost(
        flops=words * filters * (2 * taps + 2),
        transcendentals=words * filters,
        bytes_read=sequence.nbytes + w.nbytes + bias.nbytes + looked_up,
    )


# --- onnxruntime's default-domain ops ONNX retired ---------------------------------------------------

elementwise.per_element("Affine", 2, 0, "alpha·x + beta")
elementwise.per_element("Scale", 1, 0, "scale·x")
elementwise.per_element("ScaledTanh", 2, 1, "alpha·tanh(beta·x) (tanh; two multiplies)")
elementwise.per_element("ParametricSoftplus", 3, 2, "alpha·ln(exp(beta·x) + 1) (exp, log; two multiplies, an add)")
elementwise.per_element(
    "ImageScaler", 2, 0, "scale·x + bias[c] (a multiply, an add; the per-channel bias read from the attribute)"
)


@register("GRUUnit")
def gru_unit(node: KnownNode) -> Cost:
    """Caffe2's GRU step: u = sigmoid(gates[:, D:2D]), h = h_prev·u + tanh(gates[:, 2D:])·(1 − u) per
    element of hidden [N, D]: 4 FLOPs and 2 transcendentals (the sequence-length test is a branch).
    Default bytes."""
    outputs = node.result(0).numel
    return Cost(flops=4 * outputs, transcendentals=2 * outputs)
