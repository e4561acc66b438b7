"""The run's view into If branches: a copy of the model whose Ifs with a known branch have that
branch's nodes in their place, so that every value the branch computes is a value of the graph,
observed like any other, and its nodes' rows are checked like the main graph's.

An If is inlined only where the branch the analysis took is the one the run takes: its condition
is a constant or a value the run is fed (`--value`, or the value a default stands for, which the
run is fed: `implied_values`). Its branch's outputs become the If's outputs
(an Identity where the names differ), its initializers the graph's (ONNX names are unique across
scopes); nested Ifs in the inlined branch are inlined in turn. A Loop's or Scan's body runs many
times, with values that differ by trip: each body value is also an output, one per trip (stacked
as a scan output, or, in a Loop whose sizes change from trip to trip, gathered in a carried
sequence), and its rows are checked at one trip's: the last, which the analysis sizes where a
carried value grows (bodies._at_last_trip)."""

from __future__ import annotations

import onnx

from onnx_roofline.model.tensors import TensorInfo, elem_type
from onnx_roofline.report.model import Report

CERTAIN = ("--value", "its condition is a constant")
"""How a branch was chosen when the run is sure to take it too (Branch.why)."""


def inline_taken_branches(model: onnx.ModelProto, report: Report) -> onnx.ModelProto:
    """A copy of `model` with every If the run takes a known branch of replaced by that branch."""
    taken = {
        branch.node: branch.taken
        for branch in report.model.branches
        if branch.other is None and (branch.why.startswith(CERTAIN) or branch.implied)
    }
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    if taken:
        nodes = _inlined(copy.graph, "", taken, copy.graph.initializer)
        del copy.graph.node[:]
        copy.graph.node.extend(nodes)
    return copy


def _inlined(graph: onnx.GraphProto, scope: str, taken: dict[str, str], initializers) -> list[onnx.NodeProto]:
    """The graph's nodes, each If of `taken` (by its report name) replaced by its branch's nodes,
    their own nested Ifs too, named as the report names them (`scope/name`)."""
    nodes: list[onnx.NodeProto] = []
    for index, node in enumerate(graph.node):
        own = node.name or f"{node.op_type}_{index}"
        name = f"{scope}/{own}" if scope else own
        attribute = taken.get(name) if node.op_type == "If" and node.domain in ("", "ai.onnx") else None
        branch = next((a.g for a in node.attribute if a.name == attribute), None)
        if branch is None:
            nodes.append(node)
            continue
        initializers.extend(branch.initializer)
        nodes.extend(_inlined(branch, f"{name}/{attribute}", taken, initializers))
        nodes.extend(
            onnx.helper.make_node("Identity", [inner.name], [outer], name=f"{name}/{attribute}/output_{slot}")
            for slot, (inner, outer) in enumerate(zip(branch.output, node.output, strict=False))
            if outer and inner.name != outer
        )
    return nodes


def implied_values(report: Report) -> dict[str, int]:
    """The graph-input values the analysis's default branches stand for (`use_cache_branch=1` where
    the past is not empty): fed to the run, so that it takes the branch costed."""
    return dict(branch.implied for branch in report.model.branches if branch.implied)


OBSERVED = "/observed"  # the suffix of a Loop's or Scan's extra output that stacks one body value


def expose_loop_values(model: onnx.ModelProto, report: Report) -> tuple[onnx.ModelProto, dict[str, str]]:
    """A copy of `model` whose Loops and Scans (of the main graph, where the report walked their
    body) also output every value their body computes or receives, stacked over the trips, as
    extra scan outputs (an Identity of each in the body): onnxruntime returns them like any
    output. A Loop whose body the report sized at a bound (a mask pasted at its box's size) or
    whose carried values grow has values whose shapes change by trip, which no scan output can
    stack: each is gathered in a carried sequence instead (`_gathered`). Returns the copy and
    {stacked output: body value}; `unstacked` reads them back."""
    walked = {row.scope.removesuffix("/body") for row in report.nodes if row.scope.endswith("/body")}
    varying = _varying_loops(report)
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    stacked: dict[str, str] = {}
    for index, node in enumerate(list(copy.graph.node)):
        name = node.name or f"{node.op_type}_{index}"
        body = next((a.g for a in node.attribute if a.name == "body"), None)
        if node.op_type not in ("Loop", "Scan") or body is None or name not in walked:
            continue
        values = [v.name for v in body.input] + [o for n in body.node for o in n.output if o]
        if name in varying:
            stacked.update(_gathered(copy.graph, node, body, dict.fromkeys(values), varying[name]))
            continue
        for value in dict.fromkeys(values):
            body.node.append(onnx.helper.make_node("Identity", [value], [value + OBSERVED]))
            body.output.append(onnx.ValueInfoProto(name=value + OBSERVED))
            node.output.append(value + OBSERVED + "/stacked")
            stacked[value + OBSERVED + "/stacked"] = value
        for attribute in node.attribute:  # a Scan's per-output axes and directions cover its new outputs too
            if attribute.name in ("scan_output_axes", "scan_output_directions"):
                attribute.ints.extend([0] * (len(node.output) - len(attribute.ints) - _states(node)))
    return copy, stacked


def _varying_loops(report: Report) -> dict[str, dict[str, TensorInfo]]:
    """The Loops (by name) whose body values may change shape from trip to trip, with the types the
    report gave their body's values: a body row sized at a bound, or a carried value that ends
    with another shape than it starts with. A Loop of opset < 13 carries no sequence: left out."""
    from onnx_roofline.model.schemas import opsets

    if report.model.source is None or opsets(report.model.source).get("", 0) < 13:
        return {}
    found: dict[str, dict[str, TensorInfo]] = {}
    for row in report.nodes:
        if row.op_type == "Loop" and not row.domain and _grows(row):
            found.setdefault(row.name, {})
        loop = row.scope.removesuffix("/body") if row.scope.endswith("/body") else None
        if loop is not None:
            types = found.setdefault(loop, {}) if row.at_most or loop in found else None
            if types is not None:
                types.update((t.name, t) for t in (*row.inputs, *row.outputs) if t is not None)
    typed = {row.scope.removesuffix("/body"): row for row in report.nodes if row.scope.endswith("/body")}
    return {loop: types for loop, types in found.items() if loop in typed and types}


def _grows(row) -> bool:
    """Whether a Loop row's carried values end with other shapes than they start with."""
    carried = [t for t in row.inputs[2:] if t is not None]
    return any(t is not None and start.shape != t.shape for start, t in zip(carried, row.outputs, strict=False))


def _gathered(graph: onnx.GraphProto, node: onnx.NodeProto, body: onnx.GraphProto, values, types) -> dict[str, str]:
    """Each body value of a known tensor type appended, trip by trip, to a sequence the Loop carries
    (SequenceEmpty before it, SequenceInsert in the body): {the Loop's sequence output: value}."""
    carried = len(node.input) - 2
    position = list(graph.node).index(node)
    gathered: dict[str, str] = {}
    for value in values:
        info = types.get(value)
        if info is None or info.dtype is None or info.sequence or info.key_dtype is not None:
            continue
        start, inside, grown, out = (f"{value}{OBSERVED}/{part}" for part in ("empty", "in", "out", "gathered"))
        graph.node.insert(position, onnx.helper.make_node("SequenceEmpty", [], [start], dtype=elem_type(info.dtype)))
        position += 1
        node.input.append(start)
        node.output.insert(carried, out)
        body.input.append(onnx.ValueInfoProto(name=inside))
        body.node.append(onnx.helper.make_node("SequenceInsert", [inside, value], [grown]))
        body.output.insert(1 + carried, onnx.ValueInfoProto(name=grown))
        carried += 1
        gathered[out] = value
    return gathered


def _states(node: onnx.NodeProto) -> int:
    """A Scan's loop-carried states: its inputs but the scanned ones."""
    scanned = next((a.i for a in node.attribute if a.name == "num_scan_inputs"), 0)
    return len(node.input) - scanned


def unstacked(observed, stacked: dict[str, str]):
    """The body values as one trip sees them: each stacked output without its leading trip axis; a
    gathered one (a sequence of the trips' values), its last trip's: the trip the analysis sizes
    a growing carried value at (shapes/bodies.py)."""
    found = {}
    for name, value in stacked.items():
        seen = observed.get(name)
        if seen is not None and seen.sequence and seen.elements:
            found[value] = TensorInfo(value, seen.elements[-1], seen.dtype)
        elif seen is not None and not seen.sequence and seen.shape:
            found[value] = TensorInfo(value, seen.shape[1:], seen.dtype)
    return found
