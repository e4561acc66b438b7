"""A report seen as a dataflow graph: which node produces and which nodes consume each tensor."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from onnx_roofline.model.nodes import METADATA_READS
from onnx_roofline.report.model import NodeResult, Report
from onnx_roofline.model.tensors import TensorInfo
from onnx_roofline.views.digraph import DiGraph


def tensor_table(report: Report) -> dict[str, TensorInfo]:
    """Every tensor a node touches, by name, as the analysis saw it (bound shapes, --dtype applied)."""
    table: dict[str, TensorInfo] = {}
    for node in report.nodes:
        for tensor in (*node.inputs, *node.outputs):
            if tensor is not None:
                table.setdefault(tensor.name, tensor)
    return table


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

    def producer_of(self, name: str) -> NodeResult | None:
        index = self.producer.get(name)
        return None if index is None else self.nodes[index]
