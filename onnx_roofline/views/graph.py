"""A report seen as a dataflow graph: which node produces and which nodes consume each tensor."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from functools import cached_property
from typing import cast

from onnx_roofline.model.nodes import METADATA_READS
from onnx_roofline.model.tensors import TensorInfo
from onnx_roofline.report.model import NodeResult, Report
from onnx_roofline.views.digraph import DiGraph


def tensor_table(report: Report) -> dict[str, TensorInfo]:
    """Every tensor a node touches, by name, as the analysis saw it (bound shapes, --dtype applied)."""
    table: dict[str, TensorInfo] = {}
    for node in report.nodes:
        for tensor in (*node.inputs, *node.outputs):
            if tensor is not None:
                table.setdefault(tensor.name, tensor)
    return table


def matched(tensor: TensorInfo | None) -> TensorInfo:
    """A tensor in a slot the caller found present (by the op's pattern), typed as such: an absent
    one fails where it is read, as it always did (an AttributeError)."""
    return cast(TensorInfo, tensor)


def name_of(tensor: TensorInfo | None) -> str:
    """The name of a tensor in a slot the caller found present (`matched`)."""
    return matched(tensor).name


@dataclass(frozen=True)
class Dataflow:
    nodes: tuple[NodeResult, ...]
    producer: dict[str, int]  # tensor -> index of the node that writes it
    consumers: dict[str, tuple[int, ...]]  # tensor -> indices of the nodes that read it
    digraph: DiGraph  # node index -> node index, one edge per producer/consumer pair

    @classmethod
    def of(cls, report: Report) -> Dataflow:
        producer = {t.name: n.index for n in report.nodes for t in n.outputs if t is not None}
        consumers: dict[str, list[int]] = defaultdict(list)
        digraph = DiGraph(n.index for n in report.nodes)
        for node in report.nodes:
            if node.op_type in METADATA_READS and node.domain == "":
                continue
            for name in dict.fromkeys(t.name for t in node.inputs if t is not None):
                consumers[name].append(node.index)
                if name in producer:
                    digraph.add_edge(producer[name], node.index)
        return cls(report.nodes, producer, {k: tuple(v) for k, v in consumers.items()}, digraph)

    def node(self, index: int) -> NodeResult:
        return self.nodes[index]

    @cached_property
    def order(self) -> list[int]:
        """The nodes in topological order (DiGraph.topological_order), built once for every pass
        over the plan that walks it."""
        return self.digraph.topological_order()

    @cached_property
    def rank(self) -> dict[int, int]:
        """Each node's position in `order`: a path only climbs in rank."""
        return {index: position for position, index in enumerate(self.order)}

    def between(self, source: int, target: int) -> set[int]:
        """The nodes on a path from `source` to `target`, both included (empty without a path):
        descendants of one and ancestors of the other, each search kept inside the ranks between
        the two, so an attention layer's pattern costs its own nodes, not the graph's."""
        low, high = self.rank[source], self.rank[target]
        forward = _reached_within(self.digraph.successors, source, lambda n: self.rank[n] <= high)
        if target not in forward:
            return set()
        backward = _reached_within(self.digraph.predecessors, target, lambda n: self.rank[n] >= low)
        return forward & backward

    def producer_of(self, name: str) -> NodeResult | None:
        index = self.producer.get(name)
        return None if index is None else self.nodes[index]


def _reached_within(step, start: int, inside) -> set[int]:
    """`start` and every node reached from it by `step` through nodes `inside` accepts."""
    seen, frontier = {start}, [start]
    while frontier:
        for nxt in step(frontier.pop()):
            if nxt not in seen and inside(nxt):
                seen.add(nxt)
                frontier.append(nxt)
    return seen
