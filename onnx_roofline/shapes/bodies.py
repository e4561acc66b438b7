"""How a control-flow node's bodies see their inputs, how many times they run, and which branch of
an If runs: what the walk needs to descend into If branches and Loop/Scan bodies as it walks the
main graph (DESIGN.md, "Control flow is transparent").

A body's inputs are typed from the call site, as ONNX's own inference types them: Loop's
iteration number int64 [] and condition bool [], then the loop-carried values as the node passes
them in; Scan's states as passed in, and each scan input without its scan axis (Scan-8: without
its batch axis too). A carried value is the same tensor from trip to trip: its body output takes
over the node's output of the same position (`aliases`), as an If branch's outputs become the If's."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast

import numpy as np
import onnx

from onnx_roofline.model.op_node import OpNode
from onnx_roofline.model.tensors import Dim, TensorInfo, known
from onnx_roofline.shapes.input_values import value_flag

CONTROL_FLOW = frozenset({"If", "Loop", "Scan"})
"""The ai.onnx ops whose bodies the walk descends into, their nodes rows of the report."""


@dataclass(frozen=True)
class Body:
    """One body of a control-flow node as it runs at this call site."""

    attribute: str  # "then_branch", "else_branch", "body"
    graph: onnx.GraphProto
    inputs: tuple[TensorInfo | None, ...]  # the body's inputs as the call site types them
    trips: int | None  # runs per run of the node; None where it is not a constant
    aliases: tuple[tuple[str, str], ...]  # (body output, node output): the same tensor under two names


def bodies(node: OpNode[TensorInfo]) -> list[Body]:
    """The bodies of an If (both branches, each run once), a Loop or a Scan."""
    if node.op_type == "If":
        return [_branch(node, "then_branch"), _branch(node, "else_branch")]
    if node.op_type == "Loop":
        return [_loop_body(node)]
    return [_scan_body(node) if node.opset is None or node.opset >= 9 else _scan_v8_body(node)]


def _branch(node: OpNode[TensorInfo], attribute: str) -> Body:
    graph = node.attrs[attribute]
    return Body(attribute, graph, (), 1, _aliases(graph.output, node.proto.output))


def _loop_body(node: OpNode[TensorInfo]) -> Body:
    graph = node.attrs["body"]
    trips = node.input_value(0) if node.inputs and node.inputs[0] is not None else None
    carried = len(node.inputs) - 2
    ends = [*node.outputs[:carried], *[None] * (carried - len(node.outputs))]
    last = [_at_last_trip(start, end, _count(trips)) for start, end in zip(node.inputs[2:], ends, strict=True)]
    inputs = (TensorInfo("iteration_num", (), "int64"), TensorInfo("condition", (), "bool"), *last)
    return Body(
        "body", graph, inputs, _count(trips), _aliases(graph.output[1 : 1 + carried], node.proto.output[:carried])
    )


def _at_last_trip(start: TensorInfo | None, end: TensorInfo | None, trips: int | None) -> TensorInfo | None:
    """A carried value as the last trip receives it where it grows by one length each trip (a result
    appended to: torchvision's pasted masks): its end less one trip's growth. Every trip's rows then
    cost at most what the last one's do; the value as it starts elsewhere."""
    if not trips or not known(start) or not known(end):
        return start
    grows = [axis for axis, (a, b) in enumerate(zip(start.shape, end.shape, strict=False)) if a != b]
    if len(start.shape) != len(end.shape) or len(grows) != 1:
        return start
    axis = grows[0]
    step, rest = divmod(end.shape[axis] - start.shape[axis], trips)
    if rest or step <= 0:
        return start
    shape = (*end.shape[:axis], end.shape[axis] - step, *end.shape[axis + 1 :])
    return TensorInfo(start.name, shape, start.dtype)


def _scan_body(node: OpNode[TensorInfo]) -> Body:
    graph = node.attrs["body"]
    states = len(node.inputs) - node.attrs["num_scan_inputs"]
    scans = node.operands[states:]
    axes = [
        axis % x.rank for x, axis in zip(scans, node.attrs.get("scan_input_axes") or [0] * len(scans), strict=False)
    ]
    inputs = (*node.inputs[:states], *[_drop(x, axis) for x, axis in zip(scans, axes, strict=False)])
    length = _dims(scans[0])[axes[0]] if scans else None
    return Body(
        "body",
        graph,
        inputs,
        length if isinstance(length, int) else None,
        _aliases(graph.output[:states], node.proto.output[:states]),
    )


def _scan_v8_body(node: OpNode[TensorInfo]) -> Body:
    """Opset 8: input 0 is the optional sequence_lens and scan inputs carry a batch axis first;
    the body runs batch × scan length times."""
    graph = node.attrs["body"]
    states = len(node.inputs) - node.attrs["num_scan_inputs"]
    first = node.operand(states)
    inputs = (*[_drop(s, 0) for s in node.operands[1:states]], *[_drop(_drop(x, 0), 0) for x in node.operands[states:]])
    batch, length = _dims(first)[:2]
    return Body(
        "body", graph, inputs, batch * length if isinstance(batch, int) and isinstance(length, int) else None, ()
    )


def _drop(tensor: TensorInfo, axis: int) -> TensorInfo:
    """The tensor as one iteration sees it: without `axis` (a scan axis, Scan-8's batch axis)."""
    shape = _dims(tensor)
    return TensorInfo(tensor.name, shape[:axis] + shape[axis + 1 :], tensor.dtype)


def _dims(scanned: TensorInfo) -> tuple[Dim, ...]:
    """A scanned input's shape: it has a rank (one without fails the body's walk, a TypeError, as
    it always did); a dim that is not a constant makes the trip count None, as Body says."""
    return cast("tuple[Dim, ...]", scanned.shape)


def _count(value: np.ndarray | None) -> int | None:
    return int(value.reshape(-1)[0]) if value is not None and value.size == 1 else None


def _aliases(body_outputs, node_outputs) -> tuple[tuple[str, str], ...]:
    return tuple(
        (inner.name, outer) for inner, outer in zip(body_outputs, node_outputs, strict=False) if outer and inner.name
    )


@dataclass(frozen=True)
class BranchChoice:
    """Which branch of an If the analysis takes, and why. `taken` None: nothing says which, both
    are analyzed and the heavier counted (the walk decides, once it has costed both)."""

    taken: str | None  # "then_branch" or "else_branch"
    why: str
    inputs: tuple[str, ...]  # the graph inputs the condition rests on (to name with --value)
    implied: tuple[str, int] | None = None  # a default's: the graph input value it stands for (use_cache_branch=1)


def cache_branch(condition: str, graph_inputs: Mapping[str, TensorInfo | None]) -> BranchChoice | None:
    """The branch a merged decoder's `use_cache_branch` (a graph input) takes at the bound dims:
    then_branch (optimum's with-past decoder) when its past inputs are not empty, else_branch when
    they are; None for any other condition, or pasts of unknown shape. The shape engine types the
    If's outputs from this branch alone, and the walk costs it."""
    if condition not in graph_inputs or "use_cache" not in condition.lower():
        return None
    pasts = [info for name, info in graph_inputs.items() if "past" in name.lower() and known(info)]
    if not pasts:
        return None
    empty = [info for info in pasts if 0 in info.shape]
    taken, value = ("else_branch", 0) if empty else ("then_branch", 1)
    state = (
        f"{empty[0].name!r} is empty"
        if empty
        else f"the past inputs are not empty ({pasts[0].name!r} {list(pasts[0].shape)})"
    )
    why = f"default: {condition}={value}, as {state}; --value {shlex.quote(f'{condition}={1 - value}')} for the other"
    return BranchChoice(taken, why, (condition,), (condition, value))


def choose_branch(
    node: OpNode[TensorInfo],
    condition_inputs: tuple[str, ...],
    graph_inputs: dict[str, TensorInfo],
    given: frozenset[str],
    conditions: Mapping[str, bool] | None = None,
) -> BranchChoice:
    """The branch the condition's value takes (a constant, a graph input given --value, or the
    condition itself given one: `conditions`, input_values.if_conditions); else
    the one its meaning and the bound dims imply: a merged decoder's `use_cache_branch` is true
    when its past inputs are not empty (optimum writes the with-past decoder as then_branch); else
    None: both branches, said as such."""
    name = node.inputs[0].name if node.inputs and node.inputs[0] is not None else ""
    if conditions and name in conditions:
        return BranchChoice(
            "then_branch" if conditions[name] else "else_branch",
            f"--value {shlex.quote(f'{name}={int(conditions[name])}')}",
            condition_inputs,
        )
    condition = node.input_value(0)
    if condition is not None and condition.size == 1:
        taken = "then_branch" if bool(condition.reshape(-1)[0]) else "else_branch"
        source = [name for name in condition_inputs if name in given]
        why = f"--value {source[0]}" if source else "its condition is a constant"
        return BranchChoice(taken, why, condition_inputs)
    if (implied := cache_branch(name, graph_inputs)) is not None:
        return implied
    flags = [value_flag(source, getattr(graph_inputs.get(source), "shape", None)) for source in condition_inputs]
    if condition_inputs and all(flags):
        picks = ", ".join(flag for flag in flags if flag)
    else:  # computed from data no flag gives (an image's scores): the condition itself takes one
        picks = f"--value {shlex.quote(f'{name}=1')} takes then_branch, =0 else_branch"
    return BranchChoice(
        None, f"its condition is data: both branches analyzed, the heavier counted ({picks})", condition_inputs
    )
