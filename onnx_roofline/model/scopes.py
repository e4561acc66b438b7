"""What a body (an If's branch, a Loop's or Scan's body) reads from the scope that encloses it:
those names are inputs of its node as much as the listed ones, for every pass that needs a node's
inputs typed or ordered."""

from __future__ import annotations

import onnx

from onnx_roofline.model.memo import once


def outer_references(node: onnx.NodeProto) -> list[str]:
    """Names a node's bodies (nested bodies included) read from the enclosing scope."""
    names: dict[str, None] = {}
    for attr in node.attribute:
        for graph in [attr.g] if attr.type == onnx.AttributeProto.GRAPH else attr.graphs:
            names.update((name, None) for name in graph_outer_references(graph))
    return list(names)


def graph_outer_references(graph: onnx.GraphProto) -> list[str]:
    """Names the graph's nodes (nested bodies included) read from an enclosing scope, found once
    per graph within an analysis (memo.py): the caller must not modify the list."""
    return once("outer reads", graph, lambda: _outer_reads(graph))


def remember_outer_reads(graph: onnx.GraphProto, names: list[str]) -> list[str]:
    """The graph's outer reads as validation found them checking it (the same names, in the same
    order), remembered for graph_outer_references; returns what is remembered."""
    return once("outer reads", graph, lambda: names)


def _outer_reads(graph: onnx.GraphProto) -> list[str]:
    nodes = graph.node
    local = {v.name for v in graph.input} | {t.name for t in graph.initializer}
    local.update(s.values.name for s in graph.sparse_initializer)
    read: dict[str, None] = {}
    for node in nodes:  # one pass, each field read once: this runs over every node of every body
        local.update(node.output)
        read.update(dict.fromkeys(node.input))
        if node.attribute:
            read.update(dict.fromkeys(outer_references(node)))
    return [name for name in read if name and name not in local]
