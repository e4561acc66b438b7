"""Deployed fusions that work within rows of the last axis, and projections packed side by side.

A runtime's norm kernel holds whole rows of the hidden size; a projection's epilogue holds whole
rows of a head. Three rules follow, each from the graph's structure (shapes at the planning dims,
op types; never names):

- *Row reductions.* A reduction over the last axis only (ReduceMean, ReduceSum, … with its leading
  dims kept) joins an elementwise kernel, never a matrix op's epilogue (whose tile holds part of a
  row). The elementwise nodes that only feed it — a decomposed RMSNorm's or LayerNorm's casts,
  squares and centring, everything between the tensor normalized and the reduction — join it too,
  not the previous projection's epilogue: the norm is one kernel that reads x once and writes y once.
- *Tile-local rearrangements.* A Slice or Concat along the last axis (RoPE's rotate-half: two
  halves of a head, one negated, swapped) is done in registers by the kernel that holds the rows.
- *Packed projections.* MatMuls and Gemms that read the same activation with constant weights (Q, K
  and V; an MLP's gate and up) run as one GEMM over the concatenated weights, as the genai builder
  and onnxruntime's fusions pack them: the activation is read once."""

from __future__ import annotations

from onnx_roofline.report.model import NodeResult
from onnx_roofline.views.graph import Dataflow
from onnx_roofline.views.ops import elementwise_ops

ROW_REDUCTIONS = frozenset(
    {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceL2", "ReduceSumSquare", "ReduceLogSumExp"}
)
TILE_LOCAL = frozenset({"Slice", "Concat"})
PACKABLE = frozenset({"MatMul", "Gemm"})


def is_row_reduction(node: NodeResult) -> bool:
    """Reduces the last axis and nothing else (its leading dims kept, the last kept as 1 or dropped)."""
    if node.domain != "" or node.op_type not in ROW_REDUCTIONS:
        return False
    rows, out = _shape(node.inputs[:1]), _shape(node.outputs[:1])
    return rows is not None and out is not None and len(rows) >= 1 and out in (rows[:-1] + (1,), rows[:-1])


def is_tile_local(node: NodeResult) -> bool:
    """A Slice or Concat that keeps every leading dim: it moves data only along the last axis."""
    if node.domain != "" or node.op_type not in TILE_LOCAL:
        return False
    data = node.inputs[:1] if node.op_type == "Slice" else node.inputs
    shapes = [_shape([t]) for t in data] + [_shape(node.outputs[:1])]
    ranked = [s for s in shapes if s]
    if len(ranked) < len(shapes):
        return False
    return len({s[:-1] for s in ranked}) == 1


def packed_with(node: NodeResult) -> str | None:
    """The activation a packable projection reads (its first input), where its weight is constant."""
    if (
        node.domain != ""
        or node.op_type not in PACKABLE
        or not node.parameters
        or not node.inputs
        or node.inputs[0] is None
    ):
        return None
    return node.inputs[0].name


def row_feeders(flow: Dataflow) -> frozenset[int]:
    """The elementwise nodes that only feed row reductions (and what follows them within the same
    rows): walked back from each reduction while every consumer of a node is inside the pattern."""
    elementwise = elementwise_ops()
    feeders: set[int] = set()
    for node in flow.nodes:
        if not is_row_reduction(node):
            continue
        inside = {node.index} | _after(flow, node.index, elementwise)
        frontier = [node.index]
        while frontier:
            for producer in flow.digraph.predecessors(frontier.pop()):
                candidate = flow.node(producer)
                if producer in inside or candidate.op_type not in elementwise or candidate.domain != "":
                    continue
                if all(c in inside for t in candidate.outputs if t is not None for c in flow.consumers.get(t.name, ())):
                    inside.add(producer)
                    feeders.add(producer)
                    frontier.append(producer)
    return frozenset(feeders)


def _after(flow: Dataflow, start: int, elementwise: frozenset[str]) -> set[int]:
    """The elementwise nodes downstream of `start` through elementwise nodes only."""
    seen, frontier = set(), [start]
    while frontier:
        for consumer in flow.digraph.successors(frontier.pop()):
            node = flow.node(consumer)
            if consumer not in seen and node.op_type in elementwise and node.domain == "":
                seen.add(consumer)
                frontier.append(consumer)
    return seen


def _shape(tensors) -> tuple | None:
    tensor = tensors[0] if tensors else None
    return None if tensor is None or tensor.shape is None else tuple(tensor.shape)
