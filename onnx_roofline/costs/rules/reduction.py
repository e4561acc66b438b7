"""Reductions (Reduce*, ArgMax/ArgMin), Softmax/LogSoftmax/Hardmax, CumSum/CumProd and TopK.

Counting: reducing r elements to one takes r − 1 combining operations, so a reduction from n input
elements to m outputs costs n − m of them (XLA's HloCostAnalysis counts the same). Per-element work
before the combine (a square, an abs, an exp) counts n, per-output work after it (a divide, a sqrt)
counts m. The output shape already says which axes were reduced, so the axes attribute → input
change (opset 13 for ReduceSum, 18 for the others) and keepdims do not change the rules; an axes
input is read like any input (tiny but real). Bytes: the default (input read once, output written)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from onnx_roofline.costs.cost import Cost
from onnx_roofline.costs.rules.registry import register
from onnx_roofline.model.op_node import KnownNode


def lines(shape: Sequence[int], axes: Iterable[int]) -> tuple[int, int]:
    """(lines, length): how many independent lines `axes` cut the shape into, and how many elements
    each holds. Negative axes count from the end. No division, so zero-sized dims are fine."""
    rank = len(shape)
    along = {axis % rank for axis in axes}
    return (
        math.prod(size for axis, size in enumerate(shape) if axis not in along),
        math.prod(shape[axis] for axis in along),
    )


def _combines(node: KnownNode) -> tuple[int, int, int]:
    """(n, m, n − m): input elements, output elements and the combining operations between them."""
    n, m = node.operand(0).numel, node.result(0).numel
    return n, m, max(n - m, 0)


@register("ReduceSum", "ReduceProd", "ReduceMax", "ReduceMin", "ArgMax", "ArgMin")
def reduce_combine(node: KnownNode) -> Cost:
    """n − m combining operations (n input, m output elements): adds for ReduceSum, multiplies for
    ReduceProd, compares for ReduceMax/ReduceMin and ArgMax/ArgMin (which keep the winner's index)."""
    return Cost(flops=_combines(node)[2])


@register("ReduceMean")
def reduce_mean(node: KnownNode) -> Cost:
    """n − m adds, then one divide per output: n FLOPs."""
    _, m, adds = _combines(node)
    return Cost(flops=adds + m)


@register("ReduceL1", "ReduceSumSquare")
def reduce_mapped_sum(node: KnownNode) -> Cost:
    """n abs (ReduceL1) or squares (ReduceSumSquare), then n − m adds: 2n − m FLOPs."""
    n, _, adds = _combines(node)
    return Cost(flops=n + adds)


@register("ReduceL2")
def reduce_l2(node: KnownNode) -> Cost:
    """n squares, n − m adds (2n − m FLOPs), then one sqrt per output (m transcendentals)."""
    n, m, adds = _combines(node)
    return Cost(flops=n + adds, transcendentals=m)


@register("ReduceLogSum")
def reduce_log_sum(node: KnownNode) -> Cost:
    """n − m adds, then one log per output (m transcendentals)."""
    _, m, adds = _combines(node)
    return Cost(flops=adds, transcendentals=m)


@register("ReduceLogSumExp")
def reduce_log_sum_exp(node: KnownNode) -> Cost:
    """The numerically stable form (as ONNX's reference and runtimes compute it):
    max = reduce-max (n − m compares); sum of exp(x − max) (n subtracts, n exps, n − m adds);
    log(sum) + max (m logs, m adds). FLOPs 3n − m, transcendentals n + m."""
    n, m, combines = _combines(node)
    return Cost(flops=combines + n + combines + m, transcendentals=n + m)


def _softmax_lines(node: KnownNode) -> tuple[int, int]:
    """Before opset 13 the input is coerced to 2-D at `axis` (default 1): one line per index of the
    leading dims, of length prod(shape[axis:]). From 13 the line is the single `axis` (default −1)."""
    shape = node.operand(0).shape
    axis = node.attrs["axis"] % len(shape)
    if node.opset is not None and node.opset < 13:
        return lines(shape, range(axis, len(shape)))
    return lines(shape, [axis])


@register("Softmax")
def softmax(node: KnownNode) -> Cost:
    """Per line of r elements: max (r − 1 compares), x − max (r subtracts), exp (r transcendentals),
    sum (r − 1 adds), divide by the sum (r divides) — 4r − 2 FLOPs. Over n elements in L lines:
    4n − 2L FLOPs and n transcendentals (about 4 FLOPs and 1 exp per element)."""
    count, length = _softmax_lines(node)
    n = count * length
    return Cost(flops=max(4 * n - 2 * count, 0), transcendentals=n)


@register("LogSoftmax")
def log_softmax(node: KnownNode) -> Cost:
    """Per line of r elements: max (r − 1), x − max (r), exp (r transcendentals), sum (r − 1), one log
    (transcendental), subtract the log (r): 4r − 2 FLOPs and r + 1 transcendentals. Over n elements
    in L lines: 4n − 2L FLOPs, n + L transcendentals."""
    count, length = _softmax_lines(node)
    n = count * length
    return Cost(flops=max(4 * n - 2 * count, 0), transcendentals=n + count if n else 0)


@register("Hardmax")
def hardmax(node: KnownNode) -> Cost:
    """Per line of r elements an argmax (r − 1 compares); writing the one-hot row is a store, not
    arithmetic. n − L FLOPs over n elements in L lines."""
    count, length = _softmax_lines(node)
    return Cost(flops=count * max(length - 1, 0))


@register("CumSum", "CumProd")
def cumulative(node: KnownNode) -> Cost:
    """Per line of r elements along `axis` (input 1): r − 1 adds (multiplies for CumProd), one fewer
    when `exclusive` (its first two outputs are the identity and a copy); `reverse` changes only the
    order. When the axis is not a constant the line length is unknown and the count is the upper
    bound of one operation per element."""
    shape = node.operand(0).shape
    axis = node.input_value(1)
    if axis is None:
        return Cost(flops=node.operand(0).numel)
    count, length = lines(shape, [int(axis.reshape(-1)[0])])
    return Cost(flops=count * max(length - 1 - node.attrs.get("exclusive", 0), 0))


@register("TopK")
def top_k(node: KnownNode) -> Cost:
    """Selecting k of each line of r elements along `axis`: r·⌈log2 k⌉ compares (each element tested
    against a size-k heap), at least r − 1 (k = 1 is a max scan); k = 0 costs nothing. k is read from
    the Values output's shape, so the attribute (opset 1) and input (opset 10+) forms agree.
    Bytes: the default (X and K read; Values and Indices written)."""
    shape = node.operand(0).shape
    axis = node.attrs.get("axis", -1) % len(shape)
    count, length = lines(shape, [axis])
    k = node.result(0).shape[axis]
    per_line = 0 if k == 0 else max(length - 1, length * math.ceil(math.log2(k)))
    return Cost(flops=count * per_line)
