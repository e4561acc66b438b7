"""Normalizations: BatchNormalization, LayerNormalization, GroupNormalization, InstanceNormalization,
RMSNormalization, MeanVarianceNormalization, LpNormalization, LRN.

Counting, with n elements split into L groups that share statistics (rows of a LayerNorm, (n, group)
pairs of a GroupNorm, (n, c) pairs of an InstanceNorm), standardizing costs

    mean        n − L adds + L divides         = n
    x − mean    n subtracts                    = n
    variance    n squares + n − L adds + L div = 2n
    1/σ         L adds of ε, L reciprocals     = 2L   and L square roots (transcendentals)
    normalize   n multiplies by 1/σ            = n

5n + 2L FLOPs and L transcendentals; a per-element scale adds n multiplies, a bias n adds. So a
LayerNorm with scale and bias is 7n + 2L: about 7 FLOPs per element, one sqrt per row. Scale, bias
and statistics inputs are read once each (default bytes), and optional statistics outputs (Mean,
InvStdDev, running_mean, ...) are written."""

from __future__ import annotations

import math

from onnx_roofline.costs.cost import Cost
from onnx_roofline.costs.rules.reduction import lines
from onnx_roofline.costs.rules.registry import register
from onnx_roofline.model.op_node import KnownNode


def _standardize(n: int, groups: int, affine: int) -> Cost:
    """Mean and variance over `groups` groups of n elements, normalize, then `affine` per-element ops."""
    return Cost(flops=5 * n + 2 * groups + affine * n, transcendentals=groups)


@register("LayerNormalization")
def layer_normalization(node: KnownNode) -> Cost:
    """Statistics over the dims from `axis` (default −1) on, one group per row: 5n + 2L FLOPs and L
    square roots, plus n for Scale and n for B when given — 7n + 2L with both."""
    shape = node.operand(0).shape
    axis = node.attrs.get("axis", -1) % len(shape)
    rows, _ = lines(shape, range(axis, len(shape)))
    affine = 1 + (node.input(2) is not None)
    return _standardize(node.operand(0).numel, rows, affine)


@register("GroupNormalization")
def group_normalization(node: KnownNode) -> Cost:
    """X [N, C, ...] in num_groups groups of channels: L = N·num_groups; scale and bias are per
    channel (opset 21) or per group (18), applied per element either way: 7n + 2L FLOPs, L sqrts."""
    groups = node.operand(0).shape[0] * node.attrs["num_groups"]
    return _standardize(node.operand(0).numel, groups, affine=2)


@register("InstanceNormalization")
def instance_normalization(node: KnownNode) -> Cost:
    """X [N, C, ...], statistics per (n, c): L = N·C; scale and B per channel: 7n + 2L FLOPs, L sqrts."""
    shape = node.operand(0).shape
    return _standardize(node.operand(0).numel, shape[0] * shape[1], affine=2)


@register("BatchNormalization")
def batch_normalization(node: KnownNode) -> Cost:
    """Inference (the common case): the C statistics fold into a per-channel scale and shift first —
    s = scale / sqrt(var + ε), t = B − mean·s: 4 FLOPs and 1 sqrt per channel — then y = x·s + t is
    2 FLOPs per element: 2n + 4C FLOPs and C transcendentals. C is the size of `scale` ([C]; before
    opset 9 with spatial=0 it can be [C, H, W], still one entry per statistic).
    Training (training_mode=1, or running statistics among the outputs): batch statistics per
    channel, normalize, scale and shift — 7n + 2C FLOPs, C sqrts — plus 3 FLOPs per channel for each
    running statistic written (input·momentum + batch·(1 − momentum))."""
    n, channels = node.operand(0).numel, node.operand(1).numel
    statistics_out = len(node.present_outputs) - 1
    if node.attrs.get("training_mode", 0) or statistics_out > 0:
        cost = _standardize(n, channels, affine=2)
        running = min(statistics_out, 2)  # running_mean, running_var (opsets < 14 also emit saved_*)
        return Cost(flops=cost.flops + 3 * channels * running, transcendentals=cost.transcendentals)
    return Cost(flops=2 * n + 4 * channels, transcendentals=channels)


@register("RMSNormalization")
def rms_normalization(node: KnownNode) -> Cost:
    """Per row of the dims from `axis` on: mean of squares (n squares, n − L adds, L divides: 2n),
    + ε and reciprocal (2L), one sqrt per row (L transcendentals), then x·(1/rms)·scale (2n):
    4n + 2L FLOPs."""
    shape = node.operand(0).shape
    axis = node.attrs.get("axis", -1) % len(shape)
    rows, _ = lines(shape, range(axis, len(shape)))
    return Cost(flops=4 * node.operand(0).numel + 2 * rows, transcendentals=rows)


@register("MeanVarianceNormalization")
def mean_variance_normalization(node: KnownNode) -> Cost:
    """The ONNX function body over `axes` (default [0, 2, 3]), L groups of the other dims:
    E[x] (n), x² (n), E[x²] (n), E[x]² and E[x²] − E[x]² (2L), sqrt (L transcendentals), + ε (L),
    x − E[x] (n), divide (n): 5n + 3L FLOPs, L transcendentals."""
    shape = node.operand(0).shape
    groups, _ = lines(shape, node.attrs["axes"])
    return Cost(flops=5 * node.operand(0).numel + 3 * groups, transcendentals=groups)


@register("LpNormalization")
def lp_normalization(node: KnownNode) -> Cost:
    """x / ‖x‖_p along `axis`, L lines: p = 2 squares, p = 1 takes abs (n), n − L adds, one divide per
    element (n): 3n − L FLOPs; p = 2 adds one sqrt per line (L transcendentals)."""
    shape = node.operand(0).shape
    count, _ = lines(shape, [node.attrs["axis"]])
    n = node.operand(0).numel
    return Cost(flops=max(3 * n - count, 0), transcendentals=count if node.attrs["p"] == 2 else 0)


@register("LRN")
def lrn(node: KnownNode) -> Cost:
    """y = x / (bias + alpha/size · Σ x²)^beta, the sum over a window of `size` channels clipped at
    the edges: per element a square, an alpha/size multiply, a bias add and a divide (4n FLOPs) and
    one pow (n transcendentals), plus the window adds: N·spatial · Σ_c (window_c − 1)."""
    shape = node.operand(0).shape
    channels, size = shape[1], node.attrs["size"]
    before, after = (size - 1) // 2, math.ceil((size - 1) / 2)
    window_adds = sum(min(channels - 1, c + after) - max(0, c - before) for c in range(channels))
    positions, _ = lines(shape, [1])
    return Cost(flops=4 * node.operand(0).numel + positions * window_adds, transcendentals=node.operand(0).numel)
