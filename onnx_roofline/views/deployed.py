"""The deployed view: an estimate of what a runtime runs, beside the graph as written.

Built on the fused view (fusion.py, flash.py), in this order:

1. **Constant folding.** Nodes whose inputs are all weights or constants (`constant_foldable`,
   marked by the analysis) are computed once at load, as onnxruntime's ConstantFolding does at
   ORT_ENABLE_BASIC: each is a kernel of its own with no cost per run. Its outputs are weights.
2. **Fusion**: MatMul/Gemm/Conv epilogues and elementwise chains, as `fuse` merges them.
3. **Attention**: decomposed attention as one FlashAttention-style kernel, which here also takes in
   the QKV Split and the layout ops of Q, K and V, and the KV-cache Concat (as
   `flash_attn_with_kvcache` and GroupQueryAttention append the new rows themselves). A causal
   kernel (its mask compares positions) is timed on its useful FLOPs — the scores on or below the
   diagonal — since FlashAttention skips the blocks above it; `flops` stays what the graph executes.
   A mask or guard only attention kernels read, not as data (the causal `Where`, the `Expand`
   and comparison building it, the shape arithmetic of a head reshape), is dropped: the kernel
   generates it, so nothing runs it (dead.py). A constant weight's zero-point subtract is done at
   load (load.py).
4. **KV cache** (`kv_cache`): `inplace` (the default, in every command: serving engines keep a
   static, paged or shared-buffer cache) writes only the new rows and holds one buffer; `copy`
   (what the graph says) writes the whole present cache every step and holds past and present.
   It applies alike to a Concat cache and to the attention ops that carry one
   (GroupQueryAttention, MultiHeadAttention, …) whose past and present are separate buffers; a
   buffer the graph already shares is in place either way.

The result is a Report (`view` "deployed") whose nodes are the kernels, in execution order, each
a KernelResult naming the graph nodes it covers. Every renderer takes it."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

from onnx_roofline.analysis import cyclic_gc_paused
from onnx_roofline.costs.memory import KVCache, kv_caches
from onnx_roofline.costs.roofline import place
from onnx_roofline.model.nodes import METADATA_READS
from onnx_roofline.report.costed import is_ok
from onnx_roofline.report.model import DEPLOYED, OK, NodeResult, Report
from onnx_roofline.report.units import duration, si
from onnx_roofline.views.digraph import CycleError, DiGraph
from onnx_roofline.views.experts import group_experts
from onnx_roofline.views.fusion import (
    ATTENTION,
    DROPPED,
    FOLDED,
    FREE,
    READ_THROUGH,
    FusedGroup,
    FusedView,
    FusionPlan,
    fuse,
    plan_fusion,
)
from onnx_roofline.views.kernel import KernelResult
from onnx_roofline.views.load import fold_constant_operand_work
from onnx_roofline.views.ops import VIEWS
from onnx_roofline.views.prediction import DEFAULT_LAUNCH, predict
from onnx_roofline.views.quantized import Quantized, quantize
from onnx_roofline.views.quantized import note as quantized_note

if TYPE_CHECKING:
    from onnx_roofline.views.flash import AttentionMatch

COPY, INPLACE = "copy", "inplace"
KV_MODES = (COPY, INPLACE)


def deployed_plan(report: Report) -> FusionPlan:
    """The deployed fusion plan of an as-written report: structural, so valid at every dims."""
    return _plan(report, quantize(report), _caches(report))


def deploy(
    report: Report, kv_cache: str = INPLACE, plan: FusionPlan | None = None, launch: str = DEFAULT_LAUNCH
) -> Report:
    """The deployed view of an as-written `report` (`plan`: deployed_plan of the same graph).
    Its `kv_cache` is the mode asked for where the model has a KV cache, None where it has none
    (a ResNet has nothing to copy: saying "KV cache copy" of it would mislead). Its `prediction`:
    the kernels at the fractions of peak real kernels reach, launched as `launch` says
    (views/prediction.py)."""
    if kv_cache not in KV_MODES:
        raise ValueError(f"kv_cache must be one of {', '.join(KV_MODES)}, got {kv_cache!r}")
    with cyclic_gc_paused():  # as the analysis: tens of thousands of acyclic records
        return _deploy(report, kv_cache, plan, launch)


def _deploy(report: Report, kv_cache: str | None, plan: FusionPlan | None, launch: str) -> Report:
    quantized = quantize(report)  # once: the plan and the costs read the same read-throughs
    caches = _caches(report)
    if not caches:
        kv_cache = None  # no cache to copy or update: no mode to print
    plan = plan or _plan(report, quantized, caches)
    inplace = kv_cache == INPLACE
    updated = caches if quantized.report is report else _caches(quantized.report)
    costed, load_flops = fold_constant_operand_work(_with_cache_updates(quantized.report, plan, updated, inplace))
    view = fuse(costed, plan, kv_inplace=inplace, useful=True, special=True)
    kernels, grouped = group_experts(
        [_kernel(costed, position, group) for position, group in enumerate(_execution_order(view))], costed
    )
    members = tuple(k.members for k in kernels)
    quantized_notes = tuple(filter(None, [quantized_note(quantized, kernels)]))
    deployed = Report(report.model, report.hardware, kernels, view=DEPLOYED, kv_cache=kv_cache, written=report,
                      members=members, notes=_notes(report, view, kv_cache, load_flops) + quantized_notes + grouped)  # fmt: skip
    return dataclasses.replace(deployed, prediction=predict(deployed, launch))


def _plan(report: Report, quantized: Quantized, caches: list[KVCache]) -> FusionPlan:
    """deployed_plan, from the read-throughs and KV caches deploy has already found."""
    folded = frozenset(n.index for n in quantized.report.nodes if n.constant_foldable)
    concat_caches = {c.present.name: c for c in caches if c.new and c.present is not None}
    return plan_fusion(quantized.report, frozenset(report.model.graph_outputs), folded, concat_caches, deployed=True,
                       read_through=quantized.through, across=quantized.across)  # fmt: skip


def kernel_count(report: Report) -> int:
    """Kernels launched per run: deployed, those of KernelResult.launches; as written, every node
    but the pure views (Reshape, Squeeze, … move nothing and launch nothing)."""
    return report.kernels


def has_kv_cache(report: Report) -> bool:
    """Whether the graph carries a KV cache (a Concat of a past input into a present output, or an
    attention op with cache slots): where it does not, the --kv-cache mode means nothing."""
    return bool(_caches(report))


def _caches(report: Report) -> list[KVCache]:
    return kv_caches(report.nodes, frozenset(report.model.graph_inputs), frozenset(report.model.graph_outputs))


def _with_cache_updates(report: Report, plan: FusionPlan, caches: list[KVCache], inplace: bool) -> Report:
    """`report` with the cache updates costed in place where asked: a Concat cache no attention
    kernel takes in reads and writes only its new rows; an attention op with separate past and
    present buffers writes the new rows only (bytes_written less the past's bytes)."""
    if not inplace:
        return report
    absorbed = {c.concat for g in plan.groups if g.attention for c in g.attention.caches}
    changed: dict[int, NodeResult] = {}
    for cache in caches:  # kv_caches of `report`
        node = changed.get(cache.node, report.nodes[cache.node])
        if not is_ok(node) or cache.node in absorbed or cache.past is None or cache.present is None or cache.shared:
            continue
        if cache.new:  # a Concat
            rows = sum(t.nbytes for t in cache.new)
            cost = dataclasses.replace(node.cost, bytes_read=rows, bytes_written=rows)
        else:
            cost = dataclasses.replace(node.cost, bytes_written=max(node.cost.bytes_written - cache.past.nbytes, 0))
        placement = place(cost.flops, cost.bytes, node.peak, report.hardware.memory_bandwidth)
        changed[cache.node] = dataclasses.replace(node, cost=cost, placement=placement)
    if not changed:
        return report
    nodes = tuple(changed.get(n.index, n) for n in report.nodes)
    return dataclasses.replace(report, nodes=nodes)


def _execution_order(view: FusedView) -> list[FusedGroup]:
    """The kernels in an order a runtime can run them: topological over the groups' dataflow,
    ties broken by graph order. Shape and Size read only their input's shape, known before its
    data (a Reshape in an attention kernel may take its target from the Shape of the cache the
    kernel writes): they wait for nothing."""
    owner = {index: gid for gid, group in enumerate(view.nodes) for index in group.members}
    nodes, producers = view.report.nodes, view.plan.producer
    first = [group.members[0] for group in view.nodes]
    edges: list[tuple[int, int]] = []
    for index, gid in owner.items():
        node = nodes[index]
        if node.op_type in METADATA_READS and node.domain == "":
            continue
        for tensor in node.inputs:
            producer = producers.get(tensor.name) if tensor is not None else None
            if producer is not None and owner[producer] != gid:
                edges.append((owner[producer], gid))
    graph_order = sorted(view.nodes, key=lambda group: group.members[0])
    if all(first[tail] < first[head] for tail, head in edges):
        return graph_order  # every edge runs forward in graph order: it is the smallest topological order by that key
    graph = DiGraph(range(len(view.nodes)))
    for tail, head in edges:
        graph.add_edge(tail, head)
    try:
        return [view.nodes[gid] for gid in graph.lexicographical_order(key=first.__getitem__)]
    except CycleError:  # a kernel reads what another writes and back (a Shape wrapped in a function reads the cache an attention kernel writes)
        return graph_order  # the graph's order: the costs are the same, only liveness reads the order


def _kernel(report: Report, position: int, group: FusedGroup) -> KernelResult:
    lead = report.nodes[group.lead]
    free = group.kind in FREE  # folded, dropped, read through: launches nothing, holds no parameters
    if len(group.members) == 1:  # most kernels, a TorchScript export's folded Constants among them: the lone node leads
        single = group.kind != READ_THROUGH  # a folded node keeps its tensors: its outputs are weights from then on
        reason, at_most, views_only = lead.reason if lead.status != OK else None, lead.at_most, lead.op_type in VIEWS
        parameters = 0 if free else lead.parameters or 0
    else:
        nodes = [report.nodes[i] for i in group.members]
        single = False
        reason, at_most = next((n.reason for n in nodes if n.status != OK), None), any(n.at_most for n in nodes)
        views_only = all(n.op_type in VIEWS for n in nodes)
        parameters = 0 if free else sum(n.parameters or 0 for n in nodes)
    inputs = lead.inputs if single or group.reads is None else group.reads
    outputs = lead.outputs if single or group.writes is None else group.writes
    roof = group.roof
    return KernelResult(
        index=position,
        name=lead.name,
        op_type=group.op_type,
        domain=lead.domain,
        inputs=tuple(inputs),
        outputs=tuple(outputs),
        status=group.status,
        reason=reason,
        cost=group.cost,
        parameters=parameters,
        unit=roof.unit if roof else lead.unit,
        dtype=roof.dtype if roof else lead.dtype,
        peak=roof.peak if roof else lead.peak,
        placement=group.placement,
        graph_node=lead.graph_node,
        constant_foldable=group.kind == FOLDED,
        at_most=at_most,
        members=group.members,
        lead=group.lead,
        kernel_matrix_flops=group.matrix_flops,
        launches=0 if free or views_only else 1,
        units=group.units,
    )


def _notes(report: Report, view: FusedView, kv_cache: str | None, load_flops: int = 0) -> tuple[str, ...]:
    """The assumptions this deployed estimate took, as the report prints and the JSON lists them."""
    folded = [report.nodes[g.lead] for g, p in zip(view.nodes, view.plan.groups, strict=False) if p.kind == FOLDED]
    notes = []
    if folded:
        moved = sum(n.cost.bytes for n in folded if n.cost is not None)
        spent = sum(n.time_s for n in folded if n.time_s is not None)
        notes.append(
            f"constant folding: {len(folded)} node(s) computed once at load ({si(moved, 'B')}, {duration(spent)} as written)"
        )
    if load_flops:
        notes.append(f"zero points: {si(load_flops, 'FLOP')} on constant weights folded at load")
    dropped = sum(p.kind == DROPPED for p in view.plan.groups)
    if dropped:
        notes.append(
            f"masks and guards: {dropped} node(s) dropped, read only by attention kernels that generate what they compute"
        )
    attention = cast(
        "list[AttentionMatch]", [p.attention for p in view.plan.groups if p.kind == ATTENTION]
    )  # an attention group holds its match
    if attention:
        causal = sum(a.causal for a in attention)
        windows = sorted({a.window for a in attention if a.window})
        grouped = sum(bool(a.repeats) for a in attention)
        notes.append(f"attention: {len(attention)} FlashAttention-style kernel(s), {causal} causal"
                     + (f" (sliding window of {', '.join(map(str, windows))} keys)" if windows else "") + ", timed on useful FLOPs"
                     + (" (without the graph-only work: K scaled over the whole cache, NaN guards)" if any(a.graph_only for a in attention) else "")
                     + (f"; {grouped} grouped-query: each KV head read once, its repeat to the query heads never written" if grouped else ""))  # fmt: skip
    caches = sum(len(a.caches) for a in attention)
    rate = report.hardware.special_function_rate
    notes.append(f"transcendentals on the special-function units at {si(rate, 'op/s')}" if rate
                 else "transcendentals not timed: the hardware gives no special-function rate")  # fmt: skip
    if kv_cache is not None:
        notes.append(
            f"KV cache {kv_cache}: "
            + ("the whole present cache written each step" if kv_cache == COPY else "only the new rows written")
            + (f"; {caches} cache Concat(s) taken into attention" if caches else "")
        )
    return tuple(notes)


def both_views(report: Report, kv_cache: str = INPLACE) -> tuple[Report, Report]:
    """(as written, deployed) from either."""
    if report.view == DEPLOYED:
        return report.written, report  # type: ignore[return-value]
    return report, deploy(report, kv_cache)


__all__: Sequence[str] = (
    "COPY",
    "INPLACE",
    "KV_MODES",
    "KernelResult",
    "both_views",
    "deploy",
    "deployed_plan",
    "has_kv_cache",
    "kernel_count",
)
