"""onnxruntime's NCHWc ops (domain com.microsoft.nchwc): the blocked-layout Conv, pools and
Upsample its CPU optimizer writes at ORT_ENABLE_ALL, and the reorders around them.

Each op costs what its NCHW counterpart costs (the Conv, pooling and Resize rules, called on the
NCHWc node's own shapes), so the padded channels — C rounded up to the block, which the kernels
compute and store like real ones — are counted as the work they are. A graph whose channel counts
are multiples of the block costs what the unoptimized graph costs. ReorderInput/ReorderOutput are
layout copies: 0 FLOPs, the default bytes (ReorderInput writes the zero padding, ReorderOutput
reads it)."""

from __future__ import annotations

from onnx_roofline.costs.cost import Cost
from onnx_roofline.costs.rules import pooling
from onnx_roofline.costs.rules.contrib import fused_conv
from onnx_roofline.costs.rules.movement import copy, resize
from onnx_roofline.costs.rules.registry import MATRIX, register
from onnx_roofline.model.op_node import KnownNode

NCHWC = "com.microsoft.nchwc"


@register("Conv", domain=NCHWC, unit=MATRIX)
def nchwc_conv(node: KnownNode) -> Cost:
    """As FusedConv: 2·N·M·Hout·Wout·(C/group)·kH·kW from the reordered filter W [M, C/group, kH,
    kW] (M, C padded), + one per output for the bias B, + one add per output for the Sum input
    (input 3), then `activation` per output element (Relu 1, Clip 2, …; Sigmoid, Tanh one
    transcendental)."""
    return fused_conv(node)


@register("MaxPool", domain=NCHWC)
def nchwc_max_pool(node: KnownNode) -> Cost:
    """As MaxPool: t − 1 compares per window of t real taps, over the padded channels."""
    return pooling.max_pool(node)


@register("AveragePool", domain=NCHWC)
def nchwc_average_pool(node: KnownNode) -> Cost:
    """As AveragePool: t FLOPs (t − 1 adds, 1 divide) per window of t real taps, over the padded
    channels."""
    return pooling.average_pool(node)


@register("GlobalMaxPool", domain=NCHWC)
def nchwc_global_max_pool(node: KnownNode) -> Cost:
    """As GlobalMaxPool: N·C·(H·W − 1) compares, C padded."""
    return pooling.global_max_pool(node)


@register("GlobalAveragePool", domain=NCHWC)
def nchwc_global_average_pool(node: KnownNode) -> Cost:
    """As GlobalAveragePool: N·C·H·W FLOPs, C padded."""
    return pooling.global_average_pool(node)


@register("Upsample", domain=NCHWC)
def nchwc_upsample(node: KnownNode) -> Cost:
    """As Resize by integer `scales`: nearest 0 FLOPs (a copy); linear 2 taps per scaled spatial
    axis at 2 FLOPs each (bilinear 8 per output). Reads the input once, writes the output."""
    return resize(node)


@register("ReorderInput", "ReorderOutput", domain=NCHWC)
def reorder(node: KnownNode) -> Cost:
    """A layout copy (NCHW/NHWC ↔ NCHWc): 0 FLOPs; the default bytes, padding included on the
    NCHWc side."""
    return copy(node)
