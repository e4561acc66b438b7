"""Sizes the graph bounds: a data-dependent size whose upper bound the graph's own constants fix.

How many boxes a NonMaxSuppression keeps depends on their scores and overlaps, which no static
analysis knows; but it never keeps more than max_output_boxes_per_class of each class's boxes, a
constant input of the node. The shape engine types such an output at its bound (`typed_at_bound`)
and records it (`Bound`); the nodes downstream of it are then typed by ordinary shape propagation
(a Gather of the selected rows, a TopK whose k is Min(kept, K), a Slice of the first rows: each at
most what it will run), and every format labels their figures "at most" (`at_most`). A size the
graph does not bound (NonZero, whose count is data) stays unknown, loudly, with the flag that sizes
it named (selection.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from onnx_roofline.model.nodes import Node
from onnx_roofline.model.tensors import TensorInfo


@dataclass(frozen=True)
class Bound:
    """A node's output typed at the bound the graph fixes: `rows` at most, for the reason `why`."""

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


def typed_at_bound(node: Node, inputs: Sequence[TensorInfo | None], value: Callable[[str], np.ndarray | None]) -> tuple[TensorInfo, Bound] | None:
    """The node's data-dependent output typed at the graph's bound, and the bound; None where the
    op has none, or its inputs and constants do not fix it."""
    rule = _RULES.get(node.op_type) if not node.domain else None
    return None if rule is None else rule(node, inputs, value)


def _non_max_suppression(node: Node, inputs: Sequence[TensorInfo | None], value: Callable[[str], np.ndarray | None]) -> tuple[TensorInfo, Bound] | None:
    """selected_indices [rows, 3]: each (batch, class) keeps at most max_output_boxes_per_class of
    its boxes, and no more boxes than there are: rows ≤ batch × classes × min(max, boxes). The
    maximum is an optional input, 0 where absent (the spec: nothing is kept); a maximum that is
    data bounds nothing."""
    boxes, scores = (inputs[0], inputs[1]) if len(inputs) > 1 else (None, None)
    if boxes is None or scores is None or not boxes.is_known or not scores.is_known or len(scores.shape) != 3:
        return None
    batch, classes, count = scores.shape
    given = node.inputs[2] if len(node.inputs) > 2 else ""
    maximum = value(given) if given else np.zeros(1, np.int64)
    if maximum is None or maximum.size != 1:
        return None
    per_class = max(0, int(maximum.reshape(-1)[0]))
    rows = batch * classes * min(per_class, count)
    why = f"batch {batch} × classes {classes} × min(max_output_boxes_per_class {per_class}, boxes {count})"
    return TensorInfo(node.outputs[0], (rows, 3), "int64"), Bound(node.name or f"{node.op_type}_{node.position}", node.op_type, node.outputs[0], rows, why)


_RULES = {"NonMaxSuppression": _non_max_suppression}
"""The ai.onnx ops whose data-dependent output size the graph can bound, and how."""


def at_most(nodes: Iterable[Node], bounds: Iterable[Bound]) -> set[int]:
    """The positions of the nodes whose sizes rest on a bound: each node a bound types, and every
    node that reads, directly or not, what one of them computes. Their figures are at most what a
    run costs, not what it costs. One pass: a graph's nodes come in topological order."""
    bounded = {bound.output for bound in bounds}
    positions = set()
    for node in nodes:
        if any(name in bounded for name in (*node.inputs, *node.outputs) if name):
            positions.add(node.position)
            bounded.update(name for name in node.outputs if name)
    return positions
