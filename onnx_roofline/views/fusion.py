"""The fused view: what a runtime that fuses kernels moves, beside the graph-as-written view.

Plan (from the graph's structure only, so one plan serves every dims): decomposed attention becomes
one FlashAttention-style kernel (see flash.py); then, in topological order, each elementwise op or
view joins the group of a producer — a MatMul/Gemm/Conv (as its epilogue: bias, activation,
residual add) or another elementwise chain — merging chains it joins, with at most one matrix op per
group and never a merge that would make the groups' graph cyclic (digraph.py checks the paths).

Cost (per report): a group does the FLOPs of its members, reads each external input once and writes
only what is consumed outside it or is a graph output; intermediates never touch memory. Views alias
their input, so reading a reshaped tensor is reading the tensor. Its compute time assumes the units
overlap (units.py: the busiest unit's FLOPs over its own peak, never a blended peak), its memory
time is bytes/bandwidth: the same roofline."""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from onnx_roofline.costs.cost import Cost
from onnx_roofline.costs.roofline import UNKNOWN, Placement, place
from onnx_roofline.model.tensors import KnownTensor, TensorInfo, known
from onnx_roofline.report.model import OK, Report, Totals
from onnx_roofline.views.dead import dead_nodes
from onnx_roofline.views.digraph import DiGraph
from onnx_roofline.views.flash import AttentionMatch, find_attention
from onnx_roofline.views.graph import Dataflow, name_of, tensor_table
from onnx_roofline.views.mask import scalar_constants, visible_scores
from onnx_roofline.views.ops import VIEWS, elementwise_ops, is_matrix
from onnx_roofline.views.quantized import is_quantize, requantizing
from onnx_roofline.views.rows import is_row_reduction, is_tile_local, packed_with, row_feeders
from onnx_roofline.views.units import UnitShare, busiest, kernel_placement, single_shares, unit_shares

if TYPE_CHECKING:
    from onnx_roofline.report.costed import CostedNode

SINGLE, EPILOGUE, ELEMENTWISE, ATTENTION, FOLDED = "single", "epilogue", "elementwise", "attention", "folded"
DROPPED = "dropped"  # deployed: a mask or guard only attention kernels read, which generate it (dead.py)
READ_THROUGH = (
    "read-through"  # deployed: a DequantizeLinear its readers read through, or a Q undoing one (quantized.py)
)
FREE = frozenset({FOLDED, DROPPED, READ_THROUGH})  # kinds that cost nothing per run and launch nothing
STORES = frozenset({"Split", "Transpose"})
"""Deployed: ops that only choose where a matrix op's output tiles are stored. The epilogue writes
each tile to its part (Split: the QKV projection's Q, K and V) in its layout (Transpose: K and V
in the cache's [batch, heads, sequence, head] layout, as `present`), so the output is written
once, where it is read, and never copied."""


@dataclass(frozen=True)
class PlannedGroup:
    kind: str
    members: tuple[int, ...]  # node indices, ascending
    anchor: int | None = None  # the matrix op of an epilogue group
    attention: AttentionMatch | None = None


@dataclass(frozen=True)
class FusionPlan:
    groups: tuple[PlannedGroup, ...]
    producer: dict[str, int]
    consumers: dict[str, tuple[int, ...]]
    graph_outputs: frozenset[str]


@dataclass(frozen=True)
class FusedGroup:
    """One kernel of the fused view; quacks like a NodeResult where studies read one."""

    kind: str
    name: str
    op_type: str  # "Gemm+7": the lead op and how many ops fused into it
    lead: int  # the node that names the kernel: its matrix op (the Q·Kᵀ MatMul for attention)
    members: tuple[int, ...]
    status: str
    cost: Cost | None
    placement: Placement | None
    matrix_flops: int = 0  # its members' FLOPs on the matrix unit
    reads: tuple[TensorInfo, ...] | None = None  # a fused kernel's external reads and writes (None: its one node's)
    writes: tuple[TensorInfo, ...] | None = None
    units: tuple[UnitShare, ...] = ()  # each unit's work and time (units.py); the busiest sets the compute time
    roof: UnitShare | None = None  # the busiest FLOP unit: its peak and ridge are the kernel's (None: no FLOPs)

    @property
    def bound(self) -> str:
        return self.placement.bound if self.placement else UNKNOWN

    @property
    def time_s(self) -> float | None:
        return self.placement.time_s if self.placement else None

    def to_dict(self) -> dict:
        cost, spot = self.cost, self.placement
        return {
            "kind": self.kind,
            "name": self.name,
            "op_type": self.op_type,
            "lead": self.lead,
            "members": list(self.members),
            "status": self.status,
            "flops": cost.flops if cost else None,
            "bytes": cost.bytes if cost else None,
            "intensity": spot.intensity if spot else None,
            "peak": self.roof.peak if self.roof else None,
            "ridge": spot.ridge if spot else None,
            "units": [u.to_dict() for u in self.units],
            "bound": self.bound,
            "time_s": self.time_s,
        }


@dataclass(frozen=True)
class FusedView:
    report: Report
    plan: FusionPlan
    nodes: tuple[FusedGroup, ...]

    @property
    def totals(self) -> Totals:
        return Totals.over(self.nodes)  # duck-typed: groups carry .cost and .placement

    def attention(self) -> list[tuple[PlannedGroup, FusedGroup]]:
        return [(p, g) for p, g in zip(self.plan.groups, self.nodes, strict=False) if p.kind == ATTENTION]


# --- plan -------------------------------------------------------------------------------------


def plan_fusion(report: Report, graph_outputs: frozenset[str], folded: frozenset[int] = frozenset(), caches=None,
                deployed: bool = False, read_through: frozenset[int] = frozenset(),
                across: frozenset[int] = frozenset()) -> FusionPlan:  # fmt: skip
    """`folded` (the deployed view): nodes computed once at load, each its own FOLDED group that
    nothing joins; `read_through` (deployed): the DequantizeLinears whose readers read the quantized
    tensor, and the Qs undoing them (quantized.py), each its own READ_THROUGH group; `across`
    (deployed): the activations that join the kernel of the Q they read through a DQ of its own
    scale (quantized.py). `caches` (deployed): present name → memory.KVCache, the Concat caches attention
    kernels may take in (flash.find_attention). `deployed`: a node only attention kernels read, not
    as data, is its own DROPPED group (dead.py), a matrix op's epilogue also takes the Split and
    Transposes of its output (STORES), the row rules of rows.py apply (norms as one kernel,
    RoPE's rotate-half in the projection's epilogue, projections of one activation packed), and a
    QuantizeLinear ends the kernel of the op it quantizes (quantized.py)."""
    flow = Dataflow.of(report)
    drafts = _Drafts(flow, deployed=deployed, across=across)
    matches = find_attention(flow, graph_outputs, caches, scalar_constants(flow, report.model.source))
    for match in matches:
        drafts.new(ATTENTION, match.members, attention=match)
    dead = dead_nodes(flow, matches, graph_outputs) if deployed else frozenset()
    for index in flow.order:
        if index not in drafts.owner:
            if index in folded:
                drafts.new(FOLDED, [index])
            elif index in read_through:
                drafts.new(READ_THROUGH, [index])
            elif index in dead:
                drafts.new(DROPPED, [index])
            else:
                drafts.place(index)
        drafts.link(index)
    consumers = flow.consumers
    if (
        read_through
    ):  # a read-through DQ or Q runs nothing (its readers read the tensor it reads): nothing is written for it alone
        consumers = {name: tuple(c for c in readers if c not in read_through) for name, readers in consumers.items()}
    return FusionPlan(drafts.finished(), flow.producer, consumers, graph_outputs)


class _Drafts:
    """Groups under construction and the quotient graph between them (kept acyclic)."""

    def __init__(self, flow: Dataflow, deployed: bool = False, across: frozenset[int] = frozenset()):
        self.flow = flow
        self.deployed = deployed  # a matrix op's epilogue takes STORES too, and the row rules apply
        self.across = across  # activations that join their Q's kernel through its Q → DQ pair
        self.feeders = row_feeders(flow) if deployed else frozenset()  # nodes of a norm before its reduction
        self.rows: set[int] = set()  # groups holding a row reduction: never a matrix op's epilogue
        self.packs: dict[str, int] = {}  # activation -> the group of the projections that read it
        self.owner: dict[int, int] = {}
        self.members: dict[int, set[int]] = {}
        self.kind: dict[int, str] = {}
        self.anchor: dict[int, int | None] = {}
        self.match: dict[int, AttentionMatch] = {}
        self.quotient = DiGraph()
        self._ids = itertools.count()  # merged groups leave gaps: ids are never reused

    def new(self, kind: str, members, anchor: int | None = None, attention: AttentionMatch | None = None) -> int:
        gid = next(self._ids)
        self.kind[gid], self.members[gid], self.anchor[gid] = kind, set(members), anchor
        if attention is not None:
            self.match[gid] = attention
        for index in members:
            self.owner[index] = gid
        self.quotient.add_node(gid)
        return gid

    def place(self, index: int) -> None:
        node = self.flow.node(index)
        if is_matrix(node.domain, node.op_type):
            self._place_matrix(index)
            return
        store = self.deployed and node.op_type in STORES and node.domain == ""
        reduction = self.deployed and is_row_reduction(node)
        quantize = self.deployed and is_quantize(node)  # joins its producer's kernel, whatever the op
        fusible = (
            node.op_type in elementwise_ops()
            or node.op_type in VIEWS
            or store
            or reduction
            or quantize
            or (self.deployed and is_tile_local(node))
        )
        whole_rows = reduction or index in self.feeders  # needs whole rows: no matrix op's epilogue holds them
        target = None
        for gid in self._fusible_producers(index, any_kernel=quantize or index in self.across) if fusible else ():
            if store and self.anchor[gid] is None:
                continue  # only a matrix op's epilogue writes its tiles wherever they go
            if (whole_rows or target in self.rows) and self.anchor[gid] is not None:
                continue
            if target is None and self._can_join(gid, index):
                target = gid
                self.members[gid].add(index)
                self.owner[index] = gid
                if self.kind[gid] == SINGLE:
                    self.kind[gid] = ELEMENTWISE  # an op and its quantize epilogue
            elif target is not None and gid != target and self._can_merge(target, gid):
                self._merge(target, gid)
        if target is None:
            target = self.new(ELEMENTWISE if node.op_type in elementwise_ops() or reduction else SINGLE, [index])
        if reduction:
            self.rows.add(target)

    def _place_matrix(self, index: int) -> None:
        """A matrix op anchors its epilogue; deployed, a projection joins the projections already
        reading its activation (rows.py: packed into one GEMM)."""
        activation = packed_with(self.flow.node(index)) if self.deployed else None
        gid = self.packs.get(activation) if activation is not None else None
        if gid is not None and gid in self.members and self._can_join(gid, index):
            self.members[gid].add(index)
            self.owner[index] = gid
            return
        gid = self.new(EPILOGUE, [index], anchor=index)
        if activation is not None:
            self.packs[activation] = gid

    def link(self, index: int) -> None:
        for producer in self.flow.digraph.predecessors(index):
            a, b = self.owner[producer], self.owner[index]
            if a != b:
                self.quotient.add_edge(a, b)

    def _fusible_producers(self, index: int, any_kernel: bool = False) -> list[int]:
        """Groups that may take this node: data producers' groups, epilogue (matrix) groups first.
        `any_kernel`: a single op's too (a QuantizeLinear joins whatever it quantizes). Deployed,
        never through a quantized tensor, which is stored between two QDQ units, but for an
        activation of `across`: the Q → DQ pair it reads through is removed."""
        node = self.flow.node(index)
        inputs = (
            node.inputs[:1]
            if node.op_type in VIEWS or node.op_type in STORES or node.op_type == "Slice"
            else node.inputs
        )
        kinds = (EPILOGUE, ELEMENTWISE, SINGLE) if any_kernel else (EPILOGUE, ELEMENTWISE)
        gids = []
        for tensor in inputs:
            producer = self.flow.producer.get(tensor.name) if tensor is not None else None
            quantized = producer is not None and self.deployed and is_quantize(self.flow.node(producer))
            if quantized and index not in self.across:
                continue
            gid = self.owner.get(producer) if producer is not None else None
            if gid is not None and self.kind[gid] in kinds and gid not in gids:
                gids.append(gid)
        return sorted(gids, key=lambda g: self.anchor[g] is None)

    def _can_join(self, gid: int, index: int) -> bool:
        others = {self.owner[p] for p in self.flow.digraph.predecessors(index)} - {gid}
        return not any(self.quotient.has_path(gid, other) for other in others)

    def _can_merge(self, a: int, b: int) -> bool:
        if self.anchor[a] is not None and self.anchor[b] is not None:
            return False
        if (a in self.rows and self.anchor[b] is not None) or (b in self.rows and self.anchor[a] is not None):
            return False
        return not (self._detour(a, b) or self._detour(b, a))

    def _detour(self, a: int, b: int) -> bool:
        """A path a → x → … → b through some other group x: merging a and b would close a cycle."""
        return any(x != b and self.quotient.has_path(x, b) for x in self.quotient.successors(a))

    def _merge(self, into: int, other: int) -> None:
        for index in self.members.pop(other):
            self.owner[index] = into
            self.members[into].add(index)
        if self.anchor[into] is None:
            self.anchor[into] = self.anchor[other]
        if other in self.rows:
            self.rows.add(into)
        self.kind[into] = ELEMENTWISE if self.anchor[into] is None else EPILOGUE
        del self.kind[other], self.anchor[other]
        self.quotient.contract(into, other)

    def finished(self) -> tuple[PlannedGroup, ...]:
        groups = []
        for gid, members in self.members.items():
            kind = self.kind[gid] if len(members) > 1 or gid in self.match or self.kind[gid] in FREE else SINGLE
            groups.append(PlannedGroup(kind, tuple(sorted(members)), self.anchor[gid], self.match.get(gid)))
        return tuple(sorted(groups, key=lambda g: g.members[0]))


# --- cost -------------------------------------------------------------------------------------


def fuse(
    report: Report, plan: FusionPlan, kv_inplace: bool = False, useful: bool = False, special: bool = False
) -> FusedView:
    """The fused view of `report` (a report of the graph `plan` was made from, at any dims).
    The deployed view also asks: `kv_inplace`, an absorbed KV-cache Concat writes only its new
    rows; `useful`, every kernel is timed on its useful FLOPs (a causal attention kernel's lower
    triangle); `special`, transcendentals are timed on the special-function units."""
    tensors = tensor_table(report)
    rate = report.hardware.special_function_rate if special else None
    timing = _Timing(report.hardware.memory_bandwidth, useful, rate)
    groups = (_cost_group(report, plan, group, tensors, timing, kv_inplace) for group in plan.groups)
    return FusedView(report, plan, tuple(groups))


@dataclass(frozen=True)
class _Timing:
    bandwidth: float
    useful: bool  # timed on useful FLOPs
    special_rate: float | None  # transcendentals on the special-function units at this rate


def _cost_group(
    report: Report, plan: FusionPlan, group: PlannedGroup, tensors, timing: _Timing, kv_inplace: bool = False
) -> FusedGroup:
    nodes = [report.nodes[group.members[0]]] if len(group.members) == 1 else [report.nodes[i] for i in group.members]
    lead = report.nodes[_lead(group, nodes)]
    label = "FlashAttention" if group.attention else lead.op_type + (f"+{len(nodes) - 1}" if len(nodes) > 1 else "")
    if group.kind in FREE:  # computed once at load, or by the kernels that read it: nothing per run
        return FusedGroup(group.kind, lead.name, label, lead.index, group.members, OK, NOTHING, _nothing_placed(lead.peak or 1.0, timing.bandwidth),
                          reads=(), writes=())  # fmt: skip
    base: dict[str, Any] = dict(kind=group.kind, name=lead.name, op_type=label, lead=lead.index, members=group.members,
                matrix_flops=sum(n.matrix_flops for n in nodes if n.status == OK))  # fmt: skip
    failed = next((n for n in nodes if n.status != OK), None)
    if failed is not None:
        return FusedGroup(**base, status=failed.status, cost=None, placement=None)
    if len(nodes) == 1:
        return _single(base, lead, timing)
    costed = cast("list[CostedNode]", nodes)  # none failed
    useful_flops = sum(n.cost.useful for n in costed)
    if group.attention:
        match = group.attention
        caches = match.caches
        reads = [tensors[name] for name in dict.fromkeys((match.q, match.k, match.v))] + [
            _windowed(tensors[c.past], match.window) for c in caches
        ]
        writes = [tensors[match.o]] + [
            _rows(tensors[c.present], tensors[c.new]) if kv_inplace else tensors[c.present] for c in caches
        ]
        useful_flops = sum(n.cost.useful for n in costed if n.index not in match.graph_only)
        if timing.useful and match.causal:
            useful_flops = _causal_useful(report, match, useful_flops)
    else:
        reads, writes = _boundary(plan, set(group.members), report, tensors)
    cost = Cost(
        flops=sum(n.cost.flops for n in costed),
        transcendentals=sum(n.cost.transcendentals for n in costed),
        dequantize_flops=sum(n.cost.dequantize_flops for n in costed),
        bytes_read=sum(t.nbytes for t in reads),
        bytes_written=sum(t.nbytes for t in writes),
        useful_flops=useful_flops,
    )
    scale = cost.useful / cost.flops if timing.useful and cost.flops else 1.0
    placed = requantizing(nodes, report.nodes[group.anchor]) if group.anchor is not None else nodes
    shares = unit_shares(placed, scale, timing.special_rate)
    _, roof = busiest(shares)
    ridge = (roof.peak if roof else cast(float, lead.peak)) / timing.bandwidth  # the lead is costed
    flops = cost.useful if timing.useful else cost.flops
    placement = kernel_placement(flops, cost.bytes, cost.bytes / timing.bandwidth, shares, ridge)
    return FusedGroup(
        **base,
        status=OK,
        cost=cost,
        placement=placement,
        reads=tuple(reads),
        writes=tuple(writes),
        units=shares,
        roof=roof,
    )


NOTHING = Cost(bytes_read=0, bytes_written=0)
"""The cost of a FREE group per run; one record shared by all of them (a TorchScript export folds a
thousand Constants), as is their placement per peak (_nothing_placed)."""


@functools.lru_cache(maxsize=64)
def _nothing_placed(peak: float, bandwidth: float) -> Placement:
    return place(0, 0, peak, bandwidth)


def _single(base: dict, node, timing: _Timing) -> FusedGroup:
    """A kernel of one node: its own placement, unless the deployed view times it on its useful
    FLOPs or its transcendentals on the special-function units and that changes its time."""
    scale = node.cost.useful / node.cost.flops if timing.useful and node.cost.flops else 1.0
    shares = single_shares(node, scale, timing.special_rate)
    roof = shares[0] if node.cost.flops else None
    compute = (
        shares[0].time_s if len(shares) == 1 else busiest(shares)[0]
    )  # one unit (no transcendentals timed): its own time
    placement = node.placement
    if compute != placement.compute_time_s:
        flops = node.cost.useful if timing.useful else node.cost.flops
        placement = kernel_placement(flops, node.cost.bytes, placement.memory_time_s, shares, placement.ridge)
    return FusedGroup(**base, status=OK, cost=node.cost, placement=placement, units=shares, roof=roof)


def _rows(present: TensorInfo, new: TensorInfo) -> TensorInfo:
    """The part of a cache an in-place update writes: the present, as big as the new rows."""
    return TensorInfo(present.name, new.shape, new.dtype)


def _windowed(past: TensorInfo, window: int | None) -> TensorInfo:
    """The part of a cache's past [.., P, dh] a sliding-window kernel reads: the last w − 1 rows
    (the new row makes w), as FlashAttention's window_size skips the blocks before them."""
    if window is None or not known(past) or past.rank < 2 or past.shape[-2] < window:
        return past
    return TensorInfo(past.name, (*past.shape[:-2], window - 1, past.shape[-1]), past.dtype)


def _causal_useful(report: Report, match: AttentionMatch, total: int) -> int:
    """The kernel's FLOPs (`total`, its graph-only work left out) scaled to the scores its mask
    lets through: with S queries, the last S of T positions, query i sees the P = T − S past keys
    and i + 1 new ones (S·P + S·(S+1)/2 of the S·T scores, the rules' causal count,
    rules/attention.py), or its last w keys under a sliding window (mask.visible_scores)."""
    *_, queries, keys = cast(
        KnownTensor, report.nodes[match.scores].outputs[0]
    ).shape  # Q·Kᵀ is costed: its scores known
    seen = visible_scores(queries, keys, match.window)
    return total * seen // (queries * keys) if queries * keys else total


def _lead(group: PlannedGroup, nodes) -> int:
    """The node that names a kernel: Q·Kᵀ for attention, the matrix op of an epilogue, else the
    member doing the most FLOPs (a QuantizeLinear only where nothing else is: the op it quantizes
    names the kernel)."""
    if group.attention:
        return group.attention.scores
    if len(nodes) == 1:
        return nodes[0].index
    if group.anchor is not None:
        return group.anchor
    return max(nodes, key=lambda n: (not is_quantize(n), n.cost.flops if n.cost else -1)).index


def _boundary(
    plan: FusionPlan, members: set[int], report: Report, tensors
) -> tuple[list[TensorInfo], list[TensorInfo]]:
    """External inputs read once; outputs used outside (or graph outputs) written once; views alias."""
    views = {
        name_of(report.nodes[i].outputs[0]): name_of(report.nodes[i].inputs[0])
        for i in members
        if report.nodes[i].op_type in VIEWS
    }

    def root(name: str) -> str:
        while name in views:
            name = views[name]
        return name

    reads: dict[str, None] = {}
    writes: dict[str, None] = {}
    for index in sorted(members):
        node = report.nodes[index]
        if node.op_type not in VIEWS:
            for tensor in node.inputs:
                if tensor is not None and plan.producer.get(source := root(tensor.name)) not in members:
                    reads[source] = None
        for tensor in node.outputs:
            if tensor is None:
                continue
            outside = set(plan.consumers.get(tensor.name, ())) - members
            if outside or tensor.name in plan.graph_outputs:
                writes[root(tensor.name)] = None
    return [tensors[n] for n in reads], [tensors[n] for n in writes]
