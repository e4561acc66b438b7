"""A graph's nodes with the fields every pass needs, read from protobuf once.

Each protobuf field read builds a new Python object (0.1–0.4 µs; a repeated field of value names
costs the most), and validation, the shapes pass, folding and the walk all read the same names
of every node: reading them once takes a large share off the analysis of a big graph."""

from __future__ import annotations

from typing import NamedTuple

import onnx


class Node(NamedTuple):
    proto: onnx.NodeProto
    op_type: str
    domain: str  # "" for the default domain, whether the file says "" or "ai.onnx"
    name: str  # as stored: may be empty
    inputs: list[str]  # "" marks an absent optional input
    outputs: list[str]


def read_nodes(graph: onnx.GraphProto) -> list[Node]:
    """The graph's nodes in stored order (slicing a repeated field reads it faster than iterating)."""
    return [
        Node(node, node.op_type, "" if (domain := node.domain) == "ai.onnx" else domain, node.name, node.input[:], node.output[:])
        for node in graph.node
    ]
