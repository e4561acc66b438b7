"""Pooling: MaxPool, AveragePool, LpPool, their Global forms, and MaxUnpool. Vector unit.

FLOPs count the window's arithmetic over the taps that land inside the input. Padding and
`ceil_mode` windows that hang off the edge hold fewer real taps; a padded position adds nothing to
a sum and cannot win a max, so it is not counted (AveragePool's `count_include_pad` changes the
divisor, not the arithmetic). Per window of t real taps:

- max: t − 1 compares;
- average: t − 1 adds + 1 divide = t;
- Lp: one |x|^p per tap (p = 1: abs; p = 2: x·x; otherwise abs and a pow, a transcendental),
  t − 1 adds, then the p-th root (p = 2: sqrt; other p ≠ 1: pow), a transcendental.

Bytes: the default (input read once, outputs written once, MaxPool's int64 Indices included).
"""

from __future__ import annotations

from onnx_roofline.costs.cost import Cost
from onnx_roofline.costs.rules.registry import register
from onnx_roofline.model.op_node import KnownNode


def _axis_taps(size_in: int, size_out: int, kernel: int, stride: int, dilation: int, pad_begin: int) -> int:
    """Σ over the output positions of one axis of the taps that land inside [0, size_in): tap j of
    output o reads o·stride + j·dilation − pad_begin. Counted per tap in closed form."""
    total = 0
    for tap in range(kernel):
        offset = tap * dilation - pad_begin
        first = max(0, -(offset // stride))  # the smallest o with o·stride + offset ≥ 0
        last = min(size_out - 1, (size_in - 1 - offset) // stride)
        total += max(0, last - first + 1)
    return total


def _real_taps(node: KnownNode) -> int:
    """Taps inside the input summed over every output of a windowed pool: windows are products of
    per-axis ranges, so the total is N·C·∏ per-axis sums."""
    data, out = node.operand(0), node.result(0)
    spatial = data.rank - 2
    kernel = node.attrs["kernel_shape"]
    strides = node.attrs.get("strides") or [1] * spatial
    dilations = node.attrs.get("dilations") or [1] * spatial
    begins = _pad_begins(node, kernel, strides, dilations)
    taps = data.shape[0] * data.shape[1]
    for axis in range(spatial):
        taps *= _axis_taps(
            data.shape[2 + axis], out.shape[2 + axis], kernel[axis], strides[axis], dilations[axis], begins[axis]
        )
    return taps


def _pad_begins(node: KnownNode, kernel, strides, dilations) -> list[int]:
    """Leading pads per spatial axis: explicit `pads` (NOTSET), none (VALID), or SAME's split of the
    total padding (the extra one at the end for SAME_UPPER, at the start for SAME_LOWER)."""
    auto_pad = node.attrs.get("auto_pad", "NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
    spatial = len(kernel)
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        data, out = node.operand(0), node.result(0)
        begins = []
        for axis in range(spatial):
            span = (kernel[axis] - 1) * dilations[axis] + 1
            total = max(0, (out.shape[2 + axis] - 1) * strides[axis] + span - data.shape[2 + axis])
            begins.append(total // 2 if auto_pad == "SAME_UPPER" else total - total // 2)
        return begins
    if auto_pad == "VALID":
        return [0] * spatial
    pads = node.attrs.get("pads") or [0] * (2 * spatial)
    return list(pads[:spatial])


def _global_taps(node: KnownNode) -> int:
    """A global pool's window is the whole spatial extent: every input element is a tap."""
    return node.operand(0).numel


def _max(taps: int, outputs: int) -> Cost:
    return Cost(flops=max(taps - outputs, 0))


def _average(taps: int) -> Cost:
    return Cost(flops=taps)


def _lp(taps: int, outputs: int, p: int) -> Cost:
    transcendentals = 0 if p == 1 else outputs if p == 2 else taps + outputs
    return Cost(flops=2 * taps - outputs, transcendentals=transcendentals)


@register("MaxPool")
def max_pool(node: KnownNode) -> Cost:
    """t − 1 compares per window of t real taps (padding and ceil_mode overhang excluded; dilations
    honored). The optional int64 Indices output is written by the default bytes."""
    return _max(_real_taps(node), node.result(0).numel)


@register("AveragePool")
def average_pool(node: KnownNode) -> Cost:
    """t − 1 adds and 1 divide per window of t real taps: t FLOPs. `count_include_pad` changes only
    the divisor; `ceil_mode` and `dilations` (opset 19) change which taps are real."""
    return _average(_real_taps(node))


@register("LpPool")
def lp_pool(node: KnownNode) -> Cost:
    """Per tap |x|^p, 1 FLOP (abs, or x·x for p = 2) plus, for p ∉ {1, 2}, a pow (transcendental);
    t − 1 adds; then the p-th root, a transcendental unless p = 1: 2t − 1 FLOPs per window."""
    return _lp(_real_taps(node), node.result(0).numel, node.attrs.get("p", 2))


@register("GlobalMaxPool")
def global_max_pool(node: KnownNode) -> Cost:
    """One window over all of H·W(·D): N·C·(H·W − 1) compares."""
    return _max(_global_taps(node), node.result(0).numel)


@register("GlobalAveragePool")
def global_average_pool(node: KnownNode) -> Cost:
    """N·C·(H·W − 1) adds + N·C divides = N·C·H·W FLOPs, one per input element."""
    return _average(_global_taps(node))


@register("GlobalLpPool")
def global_lp_pool(node: KnownNode) -> Cost:
    """LpPool over one window of all of H·W(·D): 2·N·C·H·W − N·C FLOPs, plus the roots (and pows for
    p ∉ {1, 2}) as transcendentals."""
    return _lp(_global_taps(node), node.result(0).numel, node.attrs.get("p", 2))


@register("MaxUnpool")
def max_unpool(node: KnownNode) -> Cost:
    """Scatters X to the positions in I over a zeroed output: 0 FLOPs; reads X, I (and
    `output_shape`) once, writes the whole output once."""
    return Cost()
