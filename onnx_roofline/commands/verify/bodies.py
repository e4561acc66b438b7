"""The run's view into If branches: a copy of the model whose Ifs with a known branch have that
branch's nodes in their place, so that every value the branch computes is a value of the graph,
observed like any other, and its nodes' rows are checked like the main graph's.

An If is inlined only where the branch the analysis took is the one the run takes: its condition
is a constant or a value the run is fed (`--value`, or the value a default stands for, which the
run is fed: `implied_values`). Its branch's outputs become the If's outputs
(an Identity where the names differ), its initializers the graph's (ONNX names are unique across
scopes); nested Ifs in the inlined branch are inlined in turn. A Loop's or Scan's body runs many
times with values that differ by trip: its rows stay unobserved (said per node)."""

from __future__ import annotations

import onnx

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
    output. Returns the copy and {stacked output: body value}; `unstacked` reads them back."""
    walked = {row.scope.removesuffix("/body") for row in report.nodes if row.scope.endswith("/body")}
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    stacked: dict[str, str] = {}
    for index, node in enumerate(copy.graph.node):
        name = node.name or f"{node.op_type}_{index}"
        body = next((a.g for a in node.attribute if a.name == "body"), None)
        if node.op_type not in ("Loop", "Scan") or body is None or name not in walked:
            continue
        values = [v.name for v in body.input] + [o for n in body.node for o in n.output if o]
        for value in dict.fromkeys(values):
            body.node.append(onnx.helper.make_node("Identity", [value], [value + OBSERVED]))
            body.output.append(onnx.ValueInfoProto(name=value + OBSERVED))
            node.output.append(value + OBSERVED + "/stacked")
            stacked[value + OBSERVED + "/stacked"] = value
        for attribute in node.attribute:  # a Scan's per-output axes and directions cover its new outputs too
            if attribute.name in ("scan_output_axes", "scan_output_directions"):
                attribute.ints.extend([0] * (len(node.output) - len(attribute.ints) - _states(node)))
    return copy, stacked


def _states(node: onnx.NodeProto) -> int:
    """A Scan's loop-carried states: its inputs but the scanned ones."""
    scanned = next((a.i for a in node.attribute if a.name == "num_scan_inputs"), 0)
    return len(node.input) - scanned


def unstacked(observed, stacked: dict[str, str]):
    """The body values as one trip sees them: each stacked output without its leading trip axis."""
    from onnx_roofline.model.tensors import TensorInfo

    found = {}
    for name, value in stacked.items():
        seen = observed.get(name)
        if seen is not None and seen.shape:
            found[value] = TensorInfo(value, seen.shape[1:], seen.dtype)
    return found
