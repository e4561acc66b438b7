"""Control flow: If, Loop, Scan, SequenceMap.

The walk descends into If branches and Loop/Scan bodies (analysis.py, shapes/bodies.py): each body
node is a row of its own, a Loop's or Scan's scaled by its trip count. The rules here cost what the
control-flow node itself does beside its body: it reads its condition or trip count, and a Loop or
Scan copies each trip's scan outputs into its stacked outputs. SequenceMap's body runs once per
element of its sequences, which are data: it stays one row, its body costed run by run."""

from __future__ import annotations

from collections.abc import Iterable
from typing import cast

from onnx_roofline.costs.cost import ADDITIVE, CompositeCost, Cost
from onnx_roofline.costs.rules.registry import register
from onnx_roofline.model.op_node import KnownNode
from onnx_roofline.model.status import Uncostable
from onnx_roofline.model.tensors import element_inputs

UNKNOWN_TRIPS = "unknown-trip-count"


@register("If")
def if_(node: KnownNode) -> Cost:
    """0 FLOPs; reads its condition (one bool). Its branch's nodes are rows of their own: the walk
    takes the branch the condition, a --value or the bound dims imply (shapes/bodies.py), or
    costs both and counts the heavier."""
    condition = node.input(0)
    return Cost(bytes_read=0 if condition is None else condition.nbytes, bytes_written=0)


@register("Loop")
def loop(node: KnownNode) -> Cost:
    """0 FLOPs; reads its trip count M and condition, and copies each trip's scan outputs into
    its stacked outputs (their bytes read and written once). Its body's nodes are rows, each × M.
    A loop that may stop early on its condition is costed at M trips (its upper bound). Without a
    constant M the trip count is unknown, not zero: the node is uncosted, naming the input to give."""
    if not node.inputs or node.inputs[0] is None:
        raise Uncostable(
            UNKNOWN_TRIPS,
            "Loop has no trip count M: it runs until its body's condition turns false, which is not a constant",
        )
    if node.input_value(0) is None:
        source = node.operand(0).name
        raise Uncostable(
            UNKNOWN_TRIPS,
            f"Loop trip count {source!r} is not a constant (where it is a graph input, give it one: --value {source}=N)",
        )
    stacked = sum(t.nbytes for t in node.outputs[len(node.inputs) - 2 :] if t is not None)
    return Cost(bytes_read=sum(t.nbytes for t in node.inputs[:2] if t is not None) + stacked, bytes_written=stacked)


@register("Scan", since=8)
def scan(node: KnownNode) -> Cost:
    """0 FLOPs; copies each trip's scan outputs into its stacked outputs (their bytes read and
    written once). Its body's nodes are rows, each × the scan length."""
    states = len(node.inputs) - node.attrs["num_scan_inputs"] - (1 if node.opset is not None and node.opset < 9 else 0)
    stacked = sum(t.nbytes for t in node.outputs[states:] if t is not None)
    return Cost(bytes_read=stacked, bytes_written=stacked)


@register("SequenceMap", since=17)
def sequence_map(node: KnownNode) -> CompositeCost:
    """Σ over the elements of the body's cost with that element: the body's i-th run sees the i-th
    element of each sequence input and every tensor input as it is (runs alike in shapes costed
    once, times their count)."""
    runs: dict[tuple, list[int]] = {}  # the element shapes a run sees → [its first run, how many runs]
    elements = cast("tuple[tuple[int, ...], ...]", node.operand(0).elements)  # a known sequence has its elements
    for index in range(len(elements)):
        key = tuple(t.elements[index] if t.sequence and t.elements is not None else None for t in node.operands)
        runs.setdefault(key, [index, 0])[1] += 1
    body = node.attrs["body"]
    return repeated(
        (node.subgraph(body, element_inputs(node.operands, first)), count) for first, count in runs.values()
    )


def repeated(parts: Iterable[tuple[CompositeCost, int]]) -> CompositeCost:
    """Σ count·cost over (body cost, runs) pairs, times included: the runs one after another."""
    parts = list(parts)
    totals = {name: sum(getattr(cost, name) * count for cost, count in parts) for name in ADDITIVE}
    return CompositeCost(**totals, useful_flops=sum(cost.useful * count for cost, count in parts))
