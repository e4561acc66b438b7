"""Sizes the graph bounds: a data-dependent size whose upper bound the graph's own constants fix.

How many boxes a NonMaxSuppression keeps depends on their scores and overlaps, which no static
analysis knows; but it never keeps more than max_output_boxes_per_class of each class's boxes, a
constant input of the node. Likewise a Slice to a constant length keeps at most that length of an
axis whose size is data, and a TopK whose k is a Min against a constant (`upper_value`) keeps at
most that constant. The shape engine types such an output at its bound (`typed_at_bound`), from
its inputs as far as they are known, and records it (`Bound`); the nodes downstream are then typed
by ordinary shape propagation (a Gather of the selected rows, a TopK at Min(kept, K) folded from
the bound: each at most what it will run), and every format labels their figures "at most"
(`at_most`). A NonZero or Compress given no count (selection.py: --nonzero-fraction, an MoE's
routing, a count the graph fixes) selects at most all its candidates (`selection_bound`); a scatter's
output has its data's shape whatever its indices (exact: no bound)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from onnx_roofline.model.nodes import Node, read_nodes
from onnx_roofline.model.tensors import KnownTensor, TensorInfo, dtype_name, known
from onnx_roofline.shapes.ranges import Range, value_range


@dataclass(frozen=True)
class Bound:
    """A node's output typed at the bound the graph fixes: `rows` at most along the axis that is
    data, for the reason `why`."""

    node: str
    op_type: str
    output: str
    rows: int
    why: str  # the constants and dims that fix it, as a product: "batch 1 × classes 80 × ..."

    @property
    def message(self) -> str:
        return f"{self.op_type} {self.node!r} keeps at most {self.rows:,} rows ({self.why})"

    def to_dict(self) -> dict:
        return {"node": self.node, "op_type": self.op_type, "output": self.output, "rows": self.rows, "why": self.why}


Value = Callable[[str], "np.ndarray | None"]  # a value by name: the folded one, or an upper bound of one that is data
Typed = tuple[
    tuple[TensorInfo, ...], "Bound | None"
]  # the outputs typed at the bound, and the bound (None: the size is exact)


def typed_at_bound(node: Node, inputs: Sequence[TensorInfo | None], value: Value, upper: Value) -> Typed | None:
    """The node's data-dependent outputs typed at the graph's bound, and the bound; None where the
    op has none, or its inputs and constants do not fix it. `inputs` as far as they are known (a
    dim None or a symbol where it is data); `value` folds a constant, `upper` bounds a value
    that is data (upper_value)."""
    rule = _RULES.get(node.op_type) if not node.domain else None
    return None if rule is None else rule(node, inputs, value, upper)


def _bound(node: Node, outputs: tuple[TensorInfo, ...], rows: int, why: str) -> Typed:
    return outputs, Bound(node.name or f"{node.op_type}_{node.position}", node.op_type, outputs[0].name, rows, why)


def _non_max_suppression(node: Node, inputs: Sequence[TensorInfo | None], value: Value, upper: Value) -> Typed | None:
    """selected_indices [rows, 3]: each (batch, class) keeps at most max_output_boxes_per_class of
    its boxes, and no more boxes than there are: rows ≤ batch × classes × min(max, boxes). The
    maximum is an optional input, 0 where absent (the spec: nothing is kept); a maximum that is
    data bounds nothing."""
    boxes, scores = (inputs[0], inputs[1]) if len(inputs) > 1 else (None, None)
    if not known(boxes) or not known(scores) or len(scores.shape) != 3:
        return None
    batch, classes, count = scores.shape
    given = node.inputs[2] if len(node.inputs) > 2 else ""
    maximum = value(given) if given else np.zeros(1, np.int64)
    if maximum is None or maximum.size != 1:
        return None
    per_class = max(0, int(maximum.reshape(-1)[0]))
    rows = batch * classes * min(per_class, count)
    why = f"batch {batch} × classes {classes} × min(max_output_boxes_per_class {per_class}, boxes {count})"
    return _bound(node, (TensorInfo(node.outputs[0], (rows, 3), "int64"),), rows, why)


_SATURATED = (
    2**62
)  # an axis this long stands for one whose size is data: a slice that keeps less of it keeps a constant length


def _slice(node: Node, inputs: Sequence[TensorInfo | None], value: Value, upper: Value) -> Typed | None:
    """Slice (opset ≥ 10) of an axis whose size is data, to a constant length: each such axis
    keeps what the slice keeps of an axis of any length, where that stops growing (starts 0, ends
    64: 64; starts -8 to the end: 8); where an end is itself data, a Min against a constant, the
    length at that constant (starts ≥ 0, steps > 0: the length only grows with the end). The
    other axes must be known. None where nothing is bounded: ONNX's inference types the rest."""
    data = inputs[0] if inputs else None
    if data is None or not data.shape or data.dtype is None or len(node.inputs) < 3:
        return None
    given_starts, given_axes, given_steps = (
        value(node.inputs[slot]) if slot < len(node.inputs) and node.inputs[slot] else None for slot in (1, 3, 4)
    )
    exact = value(node.inputs[2])
    given_ends = exact if exact is not None else upper(node.inputs[2])
    if given_starts is None or given_ends is None:
        return _sliced_from(node, data, given_axes)
    if any(
        array is not None and array.dtype.kind not in "iu"
        for array in (given_starts, given_ends, given_axes, given_steps)
    ):
        return None  # a float index: the file is invalid, and ONNX's inference says so
    starts, ends = given_starts.reshape(-1).tolist(), given_ends.reshape(-1).tolist()
    steps = [1] * len(starts) if given_steps is None else given_steps.reshape(-1).tolist()
    axes = list(range(len(starts))) if given_axes is None else given_axes.reshape(-1).tolist()
    if exact is None and not all(
        start >= 0 and end >= 0 and step > 0 for start, end, step in zip(starts, ends, steps, strict=False)
    ):
        return None  # the length grows with the end only from a start and to an end counted from the front
    shape, bounded = list(data.shape), []
    for start, end, axis, step in zip(starts, ends, axes, steps, strict=False):
        if step == 0 or not -len(shape) <= axis < len(shape):
            return None  # a runtime refuses it
        axis %= len(shape)
        size = shape[axis] if isinstance(shape[axis], int) and shape[axis] >= 0 else _SATURATED
        kept = len(range(*slice(start, end, step).indices(size)))
        if size == _SATURATED and kept != len(range(*slice(start, end, step).indices(size + 1))):
            return None  # grows with the axis: no bound
        shape[axis] = kept
        if size == _SATURATED or exact is None:
            end_is = "" if exact is not None else " (the end at most that: a Min)"
            bounded.append(f"axis {axis} sliced {start}:{end}" + (f":{step}" if step != 1 else "") + end_is)
    sizes = [d for d in shape if isinstance(d, int)]
    if not bounded or len(sizes) < len(shape):
        return None
    rows = math.prod(sizes[axis % len(sizes)] for axis in axes)
    return _bound(node, (TensorInfo(node.outputs[0], tuple(sizes), data.dtype),), rows, "; ".join(bounded))


def _sliced_from(node: Node, data: TensorInfo, axes: np.ndarray | None) -> Typed | None:
    """A Slice whose starts or ends are data (a mask cut to the part of its box inside the image)
    keeps at most each sliced axis whole: the tensor it is sliced from bounds it. The data's shape
    must be known; constant axes name the axes sliced (every axis where they are data)."""
    if not known(data) or not data.shape or (axes is not None and axes.dtype.kind not in "iu"):
        return None
    rank = len(data.shape)
    chosen = {int(axis) % rank for axis in ([] if axes is None else axes.reshape(-1)) if -rank <= axis < rank}
    sliced = range(rank) if axes is None else sorted(chosen)
    why = f"each of axes {list(sliced)} at most its length in the {'x'.join(map(str, data.shape))} it is sliced from"
    rows = math.prod(data.shape[axis] for axis in sliced)
    return _bound(node, (TensorInfo(node.outputs[0], data.shape, data.dtype),), rows, why)


def _top_k(node: Node, inputs: Sequence[TensorInfo | None], value: Value, upper: Value) -> Typed | None:
    """TopK whose k is data bounded by a constant (Min(kept, K)): k at most that constant, or the
    axis where it is shorter. The other axes must be known. None where k is a constant: then the
    output is k exactly, which ONNX's inference types."""
    data = inputs[0] if inputs else None
    if (
        data is None
        or not data.shape
        or data.dtype is None
        or len(node.inputs) < 2
        or value(node.inputs[1]) is not None
    ):
        return None
    bounded = upper(node.inputs[1])
    if bounded is None or bounded.size != 1 or bounded[0] < 0:
        return None
    k = int(bounded[0])
    axis = next((attr.i for attr in node.attributes if attr.name == "axis"), -1)
    if not -len(data.shape) <= axis < len(data.shape):
        return None
    axis %= len(data.shape)
    shape = list(data.shape)
    size = shape[axis]
    kept = shape[axis] = min(k, size) if isinstance(size, int) else k
    if not all(isinstance(d, int) for d in shape):
        return None
    outputs = (
        TensorInfo(node.outputs[0], tuple(shape), data.dtype),
        *(TensorInfo(name, tuple(shape), "int64") for name in node.outputs[1:2] if name),
    )
    return _bound(node, outputs, kept, f"k at most {k}")


def selection_bound(node: Node, candidates: int, data: KnownTensor) -> Bound:
    """A NonZero or Compress with no count given: it selects at most every one of its candidates
    (each element of a NonZero's input; a Compress's along its axis)."""
    what = "elements" if node.op_type == "NonZero" else "candidates"
    return Bound(
        node.name or f"{node.op_type}_{node.position}",
        node.op_type,
        node.outputs[0],
        candidates,
        f"all its input's {candidates:,} {what}: {'x'.join(str(d) for d in data.shape)}",
    )


def _scatter(node: Node, inputs: Sequence[TensorInfo | None], value: Value, upper: Value) -> Typed | None:
    """ScatterND, ScatterElements (Scatter before opset 11): the output has its data's shape,
    whatever its indices and updates, which may be data (a VLM's image tokens placed where
    `input_ids` holds the image token: NonZero → ScatterND). Exact, not a bound: no Bound made."""
    data = inputs[0] if inputs else None
    if not known(data) or not node.outputs:
        return None
    return (TensorInfo(node.outputs[0], data.shape, data.dtype),), None


def _at_most_sizes(node: Node, slot: int, upper: Value) -> tuple[int, ...] | None:
    """A shape input that is data, at its upper bound (ranges.py); None where it is a constant
    (ONNX's inference types the node) or nothing bounds it."""
    name = node.inputs[slot] if slot < len(node.inputs) else ""
    bounded = upper(name) if name else None
    return None if bounded is None or (bounded < 0).any() else tuple(int(size) for size in bounded)


def _resize(node: Node, inputs: Sequence[TensorInfo | None], value: Value, upper: Value) -> Typed | None:
    """Resize to `sizes` that are data (a mask resized to its box): each output dim at most the
    bound the graph fixes on its size (a box clipped to the image: its side + 1). Without `axes`
    only; `scales` that are data bound nothing."""
    data = inputs[0] if inputs else None
    if not known(data) or len(node.inputs) < 4 or value(node.inputs[3]) is not None:
        return None
    sizes = _at_most_sizes(node, 3, upper)
    if sizes is None or len(sizes) != len(data.shape) or any(attr.name == "axes" for attr in node.attributes):
        return None
    why = f"sizes at most {list(sizes)}"
    return _bound(node, (TensorInfo(node.outputs[0], sizes, data.dtype),), math.prod(sizes), why)


def _constant_of_shape(node: Node, inputs: Sequence[TensorInfo | None], value: Value, upper: Value) -> Typed | None:
    """ConstantOfShape of a shape that is data (the zeros a mask is padded with to the image): each
    dim at most the bound the graph fixes on it."""
    if not node.inputs or value(node.inputs[0]) is not None:
        return None
    shape = _at_most_sizes(node, 0, upper)
    if shape is None:
        return None
    filled = next((attr.t for attr in node.attributes if attr.name == "value"), None)
    dtype = "float32" if filled is None else dtype_name(filled.data_type)
    why = f"shape at most {list(shape)}"
    return _bound(node, (TensorInfo(node.outputs[0], shape, dtype),), math.prod(shape), why)


_RULES = {"NonMaxSuppression": _non_max_suppression, "Slice": _slice, "TopK": _top_k,
          "ScatterND": _scatter, "ScatterElements": _scatter, "Scatter": _scatter,
          "Resize": _resize, "ConstantOfShape": _constant_of_shape}  # fmt: skip
"""The ai.onnx ops whose data-dependent output size the graph can bound, and how."""
BOUNDED_OPS = frozenset(_RULES)


def upper_value(name: str, producer: Callable[[str], Node | None], value: Value,
                tensor: Callable[[str], TensorInfo | None] = lambda name: None,
                outer: Mapping[str, Range] | None = None) -> np.ndarray | None:  # fmt: skip
    """An upper bound on an integer value that is data, flattened, where the graph fixes one: a Min
    with a constant among its inputs is at most that constant (elementwise), a box clipped to the
    image at most its side, and what is computed from them (ranges.py: `tensor` types the parts of
    a Concat, `outer` holds the ranges of a body's outer values). None where nothing bounds it."""
    found = value_range(name, producer, value, tensor, outer)
    if found is None or not np.isfinite(found.high).all():
        return None
    return np.floor(found.high).astype(np.int64)


def at_most(nodes: Iterable[Node], bounds: Iterable[Bound]) -> set[str]:
    """The values whose sizes rest on a bound: each output a bound types, and every value computed,
    directly or not, from one of them, in control-flow bodies too (a body that holds or reads one
    makes its node's outputs at most). A node reading or writing one is costed at most what a run
    costs. One pass per graph: its nodes come in topological order."""
    bounded = {bound.output for bound in bounds}
    return _closure(nodes, bounded) if bounded else bounded


_SHAPED_BY_DATA = frozenset({"ScatterND", "ScatterElements", "Scatter"})
"""Ops whose output has their first input's shape: sized at most only where that input is."""


def _closure(nodes: Iterable[Node], bounded: set[str]) -> set[str]:
    """`bounded` grown by what `nodes` compute from it, bodies first (a body's names are its own)."""
    for node in nodes:
        inner = False
        for attr in node.attributes:
            for graph in (*attr.graphs, *([attr.g] if attr.HasField("g") else [])):
                body = read_nodes(graph)
                _closure(body, bounded)
                inner |= any(name in bounded for step in body for name in step.outputs)
        # the updates' count is at most; the output's shape is its data's
        reads = node.inputs[:1] if node.op_type in _SHAPED_BY_DATA and not node.domain and not inner else node.inputs
        if inner or any(name in bounded for name in (*reads, *node.outputs) if name):
            bounded.update(name for name in node.outputs if name)
    return bounded
