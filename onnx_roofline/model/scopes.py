"""What a body (an If's branch, a Loop's or Scan's body) reads from the scope that encloses it:
those names are inputs of its node as much as the listed ones, for every pass that needs a node's
inputs typed or ordered."""

from __future__ import annotations

import onnx


def outer_references(node: onnx.NodeProto) -> list[str]:
    """Names a node's bodies (nested bodies included) read from the enclosing scope."""
    names: dict[str, None] = {}
    for attr in node.attribute:
        for graph in [attr.g] if attr.type == onnx.AttributeProto.GRAPH else attr.graphs:
            names.update((name, None) for name in graph_outer_references(graph))
    return list(names)


def graph_outer_references(graph: onnx.GraphProto) -> list[str]:
    """Names the graph's nodes (nested bodies included) read from an enclosing scope."""
    local = {v.name for v in graph.input} | {t.name for t in graph.initializer} | {o for n in graph.node for o in n.output}
    names: dict[str, None] = {}
    for node in graph.node:
        names.update((name, None) for name in node.input if name and name not in local)
        names.update((name, None) for name in outer_references(node) if name not in local)
    return list(names)
