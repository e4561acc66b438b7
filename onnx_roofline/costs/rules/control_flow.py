"""Control flow: If, Loop, Scan, SequenceMap. A body costs the sum of its nodes (each placed on the roofline on
its own); the node's time is the sum of their times.

A body's inputs are typed from the call site, as ONNX's own inference types them: Loop's
iteration number int64 [] and condition bool [], then the loop-carried values as the node passes
them in; Scan's states as passed in, and each scan input without its scan axis. Where the body's
values are not all declared, its shapes are inferred from those inputs before it is costed. A
carried value whose shape changes between iterations leaves the node's own outputs unknown at
the call site, so such a node is reported unknown-shape before its body is costed."""

from __future__ import annotations

from collections.abc import Iterable

from onnx_roofline.costs.cost import CompositeCost
from onnx_roofline.model.status import Uncostable
from onnx_roofline.model.op_node import OpNode
from onnx_roofline.costs.rules.registry import register
from onnx_roofline.model.tensors import TensorInfo, element_inputs

UNKNOWN_TRIPS = "unknown-trip-count"


@register("If")
def if_(node: OpNode) -> CompositeCost:
    """The branch its condition chooses, where the condition is a constant (a value given a graph
    input: optimum's merged decoder with --value use_cache_branch=1); the other is not costed, nor
    need it be typed. Else both are costed and the node takes the costlier by time: which branch
    runs is not knowable statically, so the report shows the worse case."""
    condition = node.input_value(0)
    if condition is not None and condition.size == 1:
        return node.subgraph(node.attrs["then_branch" if bool(condition.reshape(-1)[0]) else "else_branch"], ())
    then_cost = node.subgraph(node.attrs["then_branch"], ())
    else_cost = node.subgraph(node.attrs["else_branch"], ())
    return max(then_cost, else_cost, key=lambda cost: cost.time_s)


@register("Loop")
def loop(node: OpNode) -> CompositeCost:
    """Body cost × trip count M, when M is a constant. A loop that may stop early on its condition
    is costed at M trips (its upper bound). Without a constant M the cost is unknown, not zero."""
    if not node.inputs or node.inputs[0] is None:
        raise Uncostable(UNKNOWN_TRIPS, "Loop has no trip count M: it runs until its body's condition turns false, which is not a constant")
    trips = node.input_value(0)
    if trips is None:
        source = node.inputs[0].name
        raise Uncostable(UNKNOWN_TRIPS, f"Loop trip count {source!r} is not a constant (where it is a graph input, give it one: --value {source}=N)")
    inputs = [TensorInfo("iteration_num", (), "int64"), TensorInfo("condition", (), "bool"), *node.inputs[2:]]
    return _repeat(node.subgraph(node.attrs["body"], inputs), int(trips.reshape(-1)[0]))


@register("Scan", since=9)
def scan(node: OpNode) -> CompositeCost:
    """Body cost × the scan length: the first scan input's size along its scan axis."""
    states = len(node.inputs) - node.attrs["num_scan_inputs"]
    scans = node.inputs[states:]
    axes = [axis % x.rank for x, axis in zip(scans, node.attrs.get("scan_input_axes") or [0] * len(scans))]
    scanned = [_drop(x, axis) for x, axis in zip(scans, axes)]
    length = node.inputs[states].shape[axes[0]]
    return _repeat(node.subgraph(node.attrs["body"], [*node.inputs[:states], *scanned]), length)


@register("Scan", since=8)
def scan_v8(node: OpNode) -> CompositeCost:
    """Opset 8: input 0 is the optional sequence_lens and scan inputs carry a batch axis first;
    the scan axis is 1. Body cost × batch × scan length."""
    states = len(node.inputs) - node.attrs["num_scan_inputs"]
    first = node.inputs[states]
    inputs = [_drop(s, 0) for s in node.inputs[1:states]] + [_drop(_drop(x, 0), 0) for x in node.inputs[states:]]
    return _repeat(node.subgraph(node.attrs["body"], inputs), first.shape[0] * first.shape[1])


@register("SequenceMap", since=17)
def sequence_map(node: OpNode) -> CompositeCost:
    """Σ over the elements of the body's cost with that element: the body's i-th run sees the i-th
    element of each sequence input and every tensor input as it is (runs alike in shapes costed
    once, times their count)."""
    runs: dict[tuple, list[int]] = {}  # the element shapes a run sees → [its first run, how many runs]
    for index in range(len(node.inputs[0].elements)):
        key = tuple(t.elements[index] if t.sequence else None for t in node.inputs)
        runs.setdefault(key, [index, 0])[1] += 1
    body = node.attrs["body"]
    return repeated((node.subgraph(body, element_inputs(node.inputs, first)), count) for first, count in runs.values())


def _drop(tensor: TensorInfo, axis: int) -> TensorInfo:
    """The tensor as one iteration sees it: without `axis` (a scan axis, Scan-8's batch axis)."""
    return TensorInfo(tensor.name, tensor.shape[:axis] + tensor.shape[axis + 1 :], tensor.dtype)


def _repeat(body: CompositeCost, trips: int) -> CompositeCost:
    return repeated([(body, trips)])


_SUMMED = ("flops", "transcendentals", "bytes_read", "bytes_written", "dequantize_flops", "time_s", "memory_bound_time_s", "matrix_flops")


def repeated(parts: Iterable[tuple[CompositeCost, int]]) -> CompositeCost:
    """Σ count·cost over (body cost, runs) pairs, times included: the runs one after another."""
    parts = list(parts)
    totals = {name: sum(getattr(cost, name) * count for cost, count in parts) for name in _SUMMED}
    return CompositeCost(**totals, useful_flops=sum(cost.useful * count for cost, count in parts))
