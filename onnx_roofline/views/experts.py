"""Deployed, each mixture-of-experts layer runs as one grouped-GEMM kernel (vLLM's fused_moe,
TensorRT-LLM's MoE plugin, onnxruntime's MoE op).

The kernel takes in every kernel of the deployed view that runs a node of the layer's routed
experts (model/experts.py): the token selection, the experts' projections and activations, the
scatter back. It reads what enters it from outside (the tokens, the routing) and the weights of
the *distinct* experts the step touches, and writes what leaves it. With T tokens each choosing
k of E experts, `ExpertLoad.distinct` of them are touched: E·(1 − (1 − k/E)^T) under uniform
routing — k at one token, nearly E at large batch, which is what makes MoE decode memory-bound.

The kernel runs the rows the load gives (`ExpertLoad.rows`: the T·k choices, or every expert
padded to its capacity): its FLOPs, and its traffic other than weights, are the written work's
scaled to them. A routed expert's written rows are rounded up (one row for half a token's share
at T = 1); the dense all-experts form (every token through every expert, then weighted) runs
T·E rows as written, so deployed it is the same routed kernel at k/E of that work. The written
view keeps both as written."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from onnx_roofline.costs.cost import Cost
from onnx_roofline.model.nodes import METADATA_READS
from onnx_roofline.model.status import OK
from onnx_roofline.records import record
from onnx_roofline.report.experts import LayerSummary
from onnx_roofline.report.model import NodeResult, Report
from onnx_roofline.shapes.routing import ExpertLoad
from onnx_roofline.views.kernel import KernelResult
from onnx_roofline.views.units import busiest, kernel_placement, unit_shares

SHAPE_PASSES = frozenset({"Slice", "Reshape", "Identity", "Squeeze", "Unsqueeze"})
GROUPED_GEMM = "MoEGroupedGemm"
"""The op_type of the kernel that runs one MoE layer's routed experts."""


@record
class GroupedGemm(KernelResult):
    """One MoE layer's routed experts as one kernel: how many experts it holds, how many distinct
    ones the step touches, and the bytes of their weights it reads."""

    experts: int = 0
    top_k: int = 0
    tokens: int = 0
    distinct_experts: float = 0.0
    expert_weight_bytes: int = 0

    def figures(self) -> dict:
        moe = {"experts": self.experts, "top_k": self.top_k, "tokens": self.tokens, "distinct_experts": self.distinct_experts,
               "expert_weight_bytes": self.expert_weight_bytes}  # fmt: skip
        return {**KernelResult.figures(self), "moe": moe}


def group_experts(kernels: Sequence[KernelResult], written: Report) -> tuple[tuple[KernelResult, ...], tuple[str, ...]]:
    """`kernels` (of the deployed view of `written`) with each MoE layer's expert kernels made one
    grouped-GEMM kernel in the place of the first, re-indexed; and the notes saying so. A layer
    with a node not costed keeps its kernels."""
    summary = written.model.experts
    if summary is None:
        return tuple(kernels), ()
    kernels, notes = list(kernels), []
    row = {
        n.graph_node.position: n.index for n in written.nodes if not n.scope and n.graph_node is not None
    }  # graph position → row
    for layer in summary.layers:
        experts = frozenset(row[i] for i in layer.layer.nodes)
        taken = [k for k in kernels if experts.intersection(k.members)]
        if not taken or layer.tokens is None or any(k.status != OK for k in taken):
            continue
        merged = _grouped(
            taken, experts, layer, layer.tokens, summary.load, written, written.nodes[row[layer.layer.router]].name
        )
        first = kernels.index(taken[0])
        kernels = [k for k in kernels if k not in taken]
        kernels.insert(first, merged)
        notes.append(f"{merged.name}: {layer.experts} experts in one grouped GEMM reading {merged.distinct_experts:.2f} distinct experts' "
                     f"weights for {layer.tokens} token{'s' if layer.tokens != 1 else ''} ({summary.load})")  # fmt: skip
    return tuple(dataclasses.replace(k, index=i) for i, k in enumerate(kernels)), tuple(notes)


def _grouped(taken: Sequence[KernelResult], experts: frozenset[int], layer: LayerSummary, tokens: int, load: ExpertLoad, written: Report,
             router: str) -> GroupedGemm:  # fmt: skip
    """One kernel for the layer: the kernels `taken`, their members joined; `experts`: the rows of
    the layer's routed experts, whose work is scaled to the rows the load runs (the rest is taken
    in as it is)."""
    members = sorted({i for k in taken for i in k.members})
    nodes = [written.nodes[i] for i in members]
    read, writes = _traffic(nodes, written)
    names = {name for expert in layer.layer.routed for name in expert.weights}
    touched = load.distinct(layer.experts, layer.top_k, tokens)
    weights = round(sum(t.nbytes for name, t in read.items() if name in names) * touched / layer.experts)
    written_rows = sum(row or 0 for row in layer.rows)  # dense: T·E; routed: each expert's, rounded up
    scale = load.rows(layer.experts, layer.top_k, tokens) / written_rows if written_rows else 1.0
    costed = [n for n in nodes if n.cost is not None]
    scaled, others = [n for n in costed if n.index in experts], [n for n in costed if n.index not in experts]
    cost = Cost(flops=round(_sum(scaled, "flops") * scale) + _sum(others, "flops"),
                transcendentals=round(_sum(scaled, "transcendentals") * scale) + _sum(others, "transcendentals"),
                bytes_read=sum(t.nbytes for name, t in read.items() if name not in names) + weights,
                bytes_written=sum(t.nbytes for t in writes))  # fmt: skip
    special, bandwidth = written.hardware.special_function_rate, written.hardware.memory_bandwidth
    shares = unit_shares(scaled, scale, special) + unit_shares(others, 1.0, special)
    _, roof = busiest(shares)
    lead = next((k for k in taken if k.matrix_flops), taken[0])
    fields = {f.name: getattr(lead, f.name) for f in dataclasses.fields(lead)}
    return GroupedGemm(**{
        **fields, "name": f"{router} experts", "op_type": GROUPED_GEMM, "cost": cost, "members": tuple(members), "units": shares,
        "placement": kernel_placement(cost.flops, cost.bytes, cost.bytes / bandwidth, shares, roof.peak / bandwidth if roof else 0.0),
        "inputs": tuple(read.values()), "outputs": tuple(writes), "launches": 1, "parameters": sum(n.parameters or 0 for n in nodes),
        "kernel_matrix_flops": round(sum(n.matrix_flops for n in scaled) * scale) + sum(n.matrix_flops for n in others),
        "peak": roof.peak if roof else lead.peak, "unit": roof.unit if roof else lead.unit, "dtype": roof.dtype if roof else lead.dtype,
        "experts": layer.experts, "top_k": layer.top_k, "tokens": layer.tokens, "distinct_experts": touched, "expert_weight_bytes": weights,
    })  # fmt: skip


def _traffic(nodes: Sequence[NodeResult], written: Report) -> tuple[dict, list]:
    """What a kernel running `nodes` reads from memory (by name: what they read and do not
    compute) and writes to it (what other nodes read for its data, and graph outputs)."""
    produced = {t.name for n in nodes for t in n.outputs if t is not None}
    read = {t.name: t for n in nodes for t in n.inputs if t is not None and t.name not in produced}
    readers = _read_outside(written, {n.index for n in nodes})
    writes = [
        t
        for n in nodes
        for t in n.outputs
        if t is not None and (t.name in readers or t.name in written.model.graph_outputs)
    ]
    return read, writes


def _sum(nodes: Sequence[NodeResult], figure: str) -> int:
    return sum(getattr(n.cost, figure) for n in nodes)


def _read_outside(written: Report, inside: set[int]) -> set[str]:
    """The tensors nodes outside `inside` read for their data: not a Shape or Size, nor a Slice or
    view whose outputs only those read (the accumulator's shape, taken by the next expert)."""
    readers: dict[str, list] = {}
    for node in written.nodes:
        for tensor in node.inputs:
            if tensor is not None:
                readers.setdefault(tensor.name, []).append(node)

    def shape_only(node) -> bool:
        if node.op_type in METADATA_READS:
            return True
        return node.op_type in SHAPE_PASSES and all(
            r.op_type in METADATA_READS for t in node.outputs if t is not None for r in readers.get(t.name, ())
        )

    return {name for name, nodes in readers.items() if any(n.index not in inside and not shape_only(n) for n in nodes)}
