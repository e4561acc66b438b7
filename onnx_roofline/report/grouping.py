"""Alike nodes as one: twelve identical `c_fc` Gemms, one per GPT-2 layer, are one row ×12
(`--group`), and the module breakdown can total across layers (`h.*.mlp`: every layer's mlp).

Two nodes are alike when their names (and module paths) are the same once each layer index is
written `*` (`/model/transformer/h.3/mlp/c_fc/Gemm` → `/model/transformer/h.*/mlp/c_fc/Gemm`,
`layer1.2.conv1` → `layer1.*.conv1`) and their op, output shape, FLOPs, bytes and unit agree:
a group's figures are exact sums of its members'."""

from __future__ import annotations

import re
from dataclasses import dataclass

from onnx_roofline.report.breakdown import Group, group_by, module_at
from onnx_roofline.report.costed import ok_rows
from onnx_roofline.report.model import Report, Totals

TYPE_CHECKING = False
if TYPE_CHECKING:
    from onnx_roofline.report.costed import CostedNode

_INDEX_IN_NAME = re.compile(r"(?<=[./])[0-9]+(?=[./]|$)")  # a path part, or a dotted part of one, that is a number


def layerless(text: str) -> str:
    """`/model/transformer/h.3/attn/MatMul` → `/model/transformer/h.*/attn/MatMul`; `h.11.mlp` → `h.*.mlp`."""
    return _INDEX_IN_NAME.sub("*", text)


@dataclass(frozen=True)
class Alike:
    """Nodes alike but for their layer: `label` (the layerless name), the members, their totals."""

    label: str
    nodes: tuple[CostedNode, ...]
    totals: Totals

    @property
    def count(self) -> int:
        return len(self.nodes)

    @property
    def first(self) -> CostedNode:
        return self.nodes[0]


def _key(node: CostedNode) -> tuple:
    out = node.outputs[0] if node.outputs else None
    cost = node.cost
    return (layerless(node.name), node.op_type, out.shape if out is not None else None,
            cost.flops, cost.bytes, cost.transcendentals, node.unit, node.dtype)  # fmt: skip


def alike_groups(report: Report) -> list[Alike]:
    """The costed nodes, alike ones together, heaviest group first (ties in graph order)."""
    members: dict[tuple, list[CostedNode]] = {}
    for node in ok_rows(report.nodes):
        members.setdefault(_key(node), []).append(node)
    groups = [Alike(layerless(nodes[0].name) if len(nodes) > 1 else nodes[0].name, tuple(nodes), Totals.over(nodes))
              for nodes in members.values()]  # fmt: skip
    return sorted(groups, key=lambda g: (-g.totals.time_s, g.first.index))


def top_alike(report: Report, k: int) -> list[Alike]:
    """The k heaviest groups of alike nodes (a node alike to none is a group of one)."""
    return alike_groups(report)[: max(k, 0)]


def by_module_across_layers(report: Report, depth: int) -> list[Group]:
    """The module breakdown at `depth`, each layer index written `*`: at depth 4 on GPT-2,
    `model.transformer.h.*.attn` is every layer's attention, `h.*.mlp` every layer's mlp."""
    return group_by(report.nodes, lambda n: layerless(module_at(n, depth)))
