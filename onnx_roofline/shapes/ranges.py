"""The range of a value that is data: what the graph's own constants say it lies between.

A box a detector clips to the image (a Max with 0, a Min with the image's side: torchvision's
clip_boxes_to_image) holds coordinates in [0, side] whatever the network predicts; the box's height
(a Sub, + 1) lies in [1 − side, side + 1], and a mask resized to it is at most that tall. Interval
arithmetic over the ops that compute such values, from the constants the folder knows:

- value-keeping ops (Cast, Identity, Reshape, Squeeze, Unsqueeze, Flatten, Expand): their input's;
- Max, Min, Clip against constants; Add, Sub: the interval sum and difference;
- selections (Gather, Slice, GatherElements): the hull of their data's (any element may be picked);
- Concat along axis 0 of vectors (a shape assembled from scalars): each part's, in order; along
  another axis, the hull of its parts';
- ReduceMax, ReduceMin over everything: the largest (smallest) of the bounds.

A `Range` is flattened (C order): one low and one high bound per element, or a single pair that
holds for every element (a hull). ±inf where the graph bounds nothing. `upper_value` (bounds.py)
reads its high end; a name no node of the scope computes (an outer value of a body) takes the
range the enclosing scope found for it (`outer`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np
import onnx

from onnx_roofline.model.constants import MAX_FOLDED_ELEMENTS
from onnx_roofline.model.nodes import Node
from onnx_roofline.model.scopes import graph_outer_references
from onnx_roofline.model.tensors import TensorInfo, known

Value = Callable[[str], "np.ndarray | None"]  # a folded constant by name
Producer = Callable[[str], "Node | None"]  # the node that makes a value in this scope
Lookup = Callable[[str], "TensorInfo | None"]  # a value's type, as far as known


@dataclass(frozen=True)
class Range:
    """Per-element bounds, flattened; one pair where it holds for every element."""

    low: np.ndarray  # float64, -inf where unbounded below
    high: np.ndarray  # float64, inf where unbounded above

    def hull(self) -> Range:
        return Range(np.array([self.low.min()]), np.array([self.high.max()]))

    def bounded(self) -> bool:
        return bool(np.isfinite(self.high).all() and np.isfinite(self.low).all())


_KEEPING = frozenset({"Cast", "Identity", "Reshape", "Squeeze", "Unsqueeze", "Flatten", "Expand"})
_SELECTING = frozenset({"Gather", "GatherElements", "GatherND", "Slice"})
_DEPTH = 48  # a range is followed this far up the graph: a clip sits a few ops before the box is used


def value_range(name: str, producer: Producer, value: Value, tensor: Lookup,
                outer: Mapping[str, Range] | None = None) -> Range | None:  # fmt: skip
    """The range of `name`'s elements; None where the graph bounds it on neither side."""
    found = _Ranges(producer, value, tensor, outer or {}).of(name, _DEPTH)
    return None if found is None or not (np.isfinite(found.low).any() or np.isfinite(found.high).any()) else found


class _Ranges:
    def __init__(self, producer: Producer, value: Value, tensor: Lookup, outer: Mapping[str, Range]):
        self.producer, self.value, self.tensor, self.outer = producer, value, tensor, outer
        self.memo: dict[str, Range | None] = {}

    def of(self, name: str, depth: int) -> Range | None:
        if not name:
            return None
        if name not in self.memo:
            self.memo[name] = None  # a cycle (a body's carried value) bounds nothing
            self.memo[name] = self.computed(name, depth)
        return self.memo[name]

    def computed(self, name: str, depth: int) -> Range | None:
        folded = self.value(name)
        if folded is not None and folded.dtype.kind in "iufb":
            flat = folded.astype(np.float64).reshape(-1)
            return Range(flat, flat) if flat.size else None
        node = self.producer(name)
        if node is None:
            return self.outer.get(name)
        if node.domain or depth <= 0 or not node.inputs:
            return None
        op, parts = node.op_type, [self.of(i, depth - 1) if i else None for i in node.inputs]
        if op in _KEEPING:
            return _cast(parts[0], node) if op == "Cast" else parts[0]
        if op in _SELECTING:
            return None if parts[0] is None else parts[0].hull()
        if op in ("Max", "Min"):
            return _extreme(parts, op == "Max")
        if op == "Clip":
            return _extreme([_extreme([parts[0], parts[1] if len(parts) > 1 else None], True),
                             parts[2] if len(parts) > 2 else None], False)  # fmt: skip
        if op in ("Add", "Sub") and len(parts) == 2 and parts[0] is not None and parts[1] is not None:
            return _sum(parts[0], parts[1], op == "Sub")
        if op == "Concat":
            return self.concat(node, parts)
        if op in ("ReduceMax", "ReduceMin") and _reduces_all(node) and parts[0] is not None:
            pick = np.max if op == "ReduceMax" else np.min
            return Range(np.array([pick(parts[0].low)]), np.array([pick(parts[0].high)]))
        return None

    def concat(self, node: Node, parts: list[Range | None]) -> Range | None:
        """Vectors along axis 0: each part's bounds in order (a hull repeated over its elements);
        otherwise the hull of every part's."""
        if any(part is None for part in parts):
            return None
        ranges = [part for part in parts if part is not None]
        infos = [self.tensor(name) for name in node.inputs]
        axis = next((attr.i for attr in node.attributes if attr.name == "axis"), 0)
        sizes = [info.numel for info in infos if known(info) and info.rank == 1]
        if axis in (0, -1) and len(sizes) == len(infos):
            lows = [np.broadcast_to(part.low, (size,)) for part, size in zip(ranges, sizes, strict=True)]
            highs = [np.broadcast_to(part.high, (size,)) for part, size in zip(ranges, sizes, strict=True)]
            return Range(np.concatenate(lows), np.concatenate(highs))
        return Range(np.array([min(p.low.min() for p in ranges)]), np.array([max(p.high.max() for p in ranges)]))


def _cast(part: Range | None, node: Node) -> Range | None:
    """A cast keeps the values; to an integer type it truncates, within floor(low) and ceil(high)."""
    if part is None:
        return None
    to = next((attr.i for attr in node.attributes if attr.name == "to"), 0)
    integer = to in (2, 3, 4, 5, 6, 7, 12, 13)  # TensorProto's (u)int8/16/32/64
    return Range(np.floor(part.low), np.ceil(part.high)) if integer else part


def _extreme(parts: list[Range | None], largest: bool) -> Range | None:
    """Max (largest) or Min of broadcast operands: a Max is at least each operand's low, a Min at
    most each one's high; an operand bounding nothing leaves that side unbounded."""
    given = [part for part in parts if part is not None]
    if not given:
        return None
    lows = [part.low for part in given] + ([np.array([-np.inf])] if len(given) < len(parts) else [])
    highs = [part.high for part in given] + ([np.array([np.inf])] if len(given) < len(parts) else [])
    try:
        low, high = np.broadcast_arrays(*lows), np.broadcast_arrays(*highs)
    except ValueError:  # flattened shapes that do not broadcast: the hulls
        low, high = tuple(np.array([part.min()]) for part in lows), tuple(np.array([part.max()]) for part in highs)
    pick = np.maximum.reduce if largest else np.minimum.reduce
    return Range(pick(low), pick(high))


def _sum(left: Range, right: Range, subtract: bool) -> Range:
    """The interval sum (difference) of two operands, elementwise where their shapes broadcast."""
    pairs = [(left.low, right.high if subtract else right.low), (left.high, right.low if subtract else right.high)]
    try:
        with np.errstate(invalid="ignore"):  # inf − inf: nothing bounds that side
            low, high = (np.subtract(*pair) if subtract else np.add(*pair) for pair in pairs)
    except ValueError:
        return _sum(left.hull(), right.hull(), subtract)
    return Range(np.where(np.isnan(low), -np.inf, low), np.where(np.isnan(high), np.inf, high))


def _reduces_all(node: Node) -> bool:
    """A ReduceMax/ReduceMin over every axis: no axes given (attribute or input)."""
    return len(node.inputs) < 2 and not any(attr.name == "axes" and attr.ints for attr in node.attributes)


NO_RANGES: Mapping[str, Range] = MappingProxyType({})


def outer_ranges(graph: onnx.GraphProto, producer: Producer, value: Value, tensor: Lookup,
                 outer: Mapping[str, Range] = NO_RANGES) -> dict[str, Range]:  # fmt: skip
    """The ranges of the values a body reads from the scope around it (its outer references), where
    that scope's graph bounds them: what the body's own ranges start from. Small values only (a
    detector's boxes), as a shape is: a weight or an activation bounds no size."""
    ranges = _Ranges(producer, value, tensor, outer)
    found = {}
    for name in graph_outer_references(graph):
        info = tensor(name)
        if info is None or not info.is_known or info.numel > MAX_FOLDED_ELEMENTS or value(name) is not None:
            continue
        bounds = ranges.of(name, _DEPTH)
        if bounds is not None and (np.isfinite(bounds.low).any() or np.isfinite(bounds.high).any()):
            found[name] = bounds
    return found
