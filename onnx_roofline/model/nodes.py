"""A graph's nodes with the fields every pass needs, read from protobuf once.

Each protobuf field read builds a new Python object (0.1–0.4 µs; a repeated field of value names
costs the most), and validation, the shapes pass, folding and the walk all read the same names
of every node: reading them once takes a large share off the analysis of a big graph.

A node's NodeProto is not held but fetched at each use (`Node.proto`); its attributes, and
whether it has metadata, are read once with the rest. protobuf's Python object for a node costs
~170 bytes, and once a field it does not have is read through it (most nodes have no attributes,
and every pass asks) another ~350, for as long as it lives: half a gigabyte for a million nodes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import compress
from operator import itemgetter
from typing import Any, NamedTuple

import onnx

from onnx_roofline.model.memo import once

METADATA_READS = frozenset({"Shape", "Size"})
"""Ops that read only their input's shape, which a runtime knows before the data exists: no data
dependency and no bytes of it (the deployed view waits on nothing and writes nothing for them)."""


BODY_TYPES = (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)  # the attribute types that hold a body


class Node(NamedTuple):
    graph_nodes: Any  # the graph's repeated `node` field, which `proto` indexes
    position: int  # in the graph's stored order
    op_type: str
    domain: str  # "" for the default domain, whether the file says "" or "ai.onnx"
    name: str  # as stored: may be empty
    inputs: list[str]  # "" marks an absent optional input
    outputs: list[str]
    attributes: Sequence[onnx.AttributeProto]  # () where it has none
    has_metadata: bool  # metadata_props (dynamo's name scopes), read through `proto` where there are

    @property
    def proto(self) -> onnx.NodeProto:
        return self.graph_nodes[self.position]

    @property
    def holds_body(self) -> bool:
        """Whether an attribute of the node is a graph (an If's branches, a Loop's body)."""
        return any(attr.type in BODY_TYPES for attr in self.attributes)

    def __repr__(self) -> str:  # not the graph's nodes, which the default would print whole
        return (
            f"Node({self.position}, {self.op_type!r}, {self.name!r}, inputs={self.inputs!r}, outputs={self.outputs!r})"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled with its own NodeProto in the place of the graph's repeated field, which does
        not pickle: `proto` finds it at `position` all the same (a report crosses processes)."""
        return Node._make, (({self.position: self.proto}, *self[1:]),)


def read_nodes(graph: onnx.GraphProto) -> list[Node]:
    """The graph's nodes in stored order, read once per graph within an analysis (memo.py): the
    caller must not modify the list."""
    return once("nodes", graph, lambda: read_fresh(graph))


Kind = tuple[str, str]  # (domain, op_type)
KIND = itemgetter(3, 2)  # a Node's Kind (its `domain` and `op_type` fields, read in C)


def kinds(nodes: list[Node]) -> frozenset[Kind]:
    """The distinct kinds among the nodes (a million-node graph has a few dozen), found once per
    list within an analysis (memo.py): read_nodes gives one list per graph, and a list of nodes
    is never modified (a graph reworked is read again, read_fresh: a new list), so its kinds
    never go stale. Any other list (a piece, a slice) is a list of its own, with its own kinds."""
    return once("kinds", nodes, lambda: frozenset(map(KIND, nodes)))


def of_kinds(nodes: list[Node], wanted: Callable[[str, str], bool]) -> list[Node]:
    """The nodes whose kind (domain, op_type) `wanted` accepts, in stored order: each distinct kind
    asked once, and the nodes walked (in C) only where some kind is wanted. What a pass that cares
    about a few ops (If, Constant, a deprecated op) runs over, where testing each node would cost
    ~0.3 µs a node: 0.3 s a pass at a million nodes."""
    chosen = {kind for kind in kinds(nodes) if wanted(*kind)}
    if not chosen:
        return []
    return list(compress(nodes, map(chosen.__contains__, map(KIND, nodes))))


def read_fresh(graph: onnx.GraphProto) -> list[Node]:
    """The nodes as they are now (a graph just reworked), never memoized (slicing a repeated field
    reads it faster than iterating; a graph's op types, read as a new string each, are interned:
    a few dozen among its nodes)."""
    stored = graph.node
    op_types: dict = {}  # the interning table: sys.intern refuses the bytes protobuf gives for text that is not UTF-8
    intern = op_types.setdefault
    new = tuple.__new__  # a NamedTuple's own __new__ is a Python function: a frame per node
    return [
        new(
            Node,
            (
                stored,
                position,
                intern(op := node.op_type, op),
                "" if (domain := node.domain) == "ai.onnx" else domain,
                node.name,
                node.input[:],
                node.output[:],
                node.attribute[:] or (),
                len(node.metadata_props) > 0,
            ),
        )  # fmt: skip
        for position, node in enumerate(stored)
    ]
