"""The memory a model holds while it runs: weights, the KV cache, and the peak of live activations.

- **Weights**: the bytes of every weight (model/weights.py: initializers and the tensors of Constant
  nodes, small integer shape constants aside, in the main graph and every body), each once, in the
  dtype costed (`--dtype` applies). `weight_bytes` are those the run reads (and any nothing reads);
  `untaken_branch_weight_bytes` those only an If branch the run does not take reads, which the
  runtime holds all the same (a merged decoder whose branches each keep a copy of the weights). In the deployed view the outputs of folded nodes are weights
  too (a runtime stores the transposed embedding it folded: `folded_weight_bytes`, said beside the
  weights) and a weight read only by folded nodes is not.
- **KV cache** (`kv_caches`): the cache tensors a decode graph carries from step to step — a
  `Concat` of a graph input (past) into a graph output (present), or the past/present slots of the
  attention ops that take a cache (GroupQueryAttention, MultiHeadAttention, contrib Attention, …).
  `kv_cache_bytes` is the cache at the bound dims (the presents: what the next step reads), per
  sequence divided by the batch. `kv_cache_resident_bytes` is what the step holds: past and present
  both while the graph copies one into the other (the graph as written, or the deployed view's
  `--kv-cache copy`), one buffer where it is updated in place (a shared past/present buffer, or the
  deployed view's `--kv-cache inplace`, the default: what serving engines do).
- **Peak activations**: tensor liveness over the execution order (the graph's order as written,
  the kernels' order deployed). A tensor is allocated when its producer runs (a graph input from the
  start) and freed after its last reader (a graph output at the end); a view (Reshape, Squeeze, …)
  shares its input's buffer. Weights and cache tensors are not activations. The peak is the largest
  sum of live bytes at any node, its inputs and outputs live together. A body's nodes are rows
  after their If, Loop or Scan, and the node's outputs are its body's (one buffer, not two).

`fits`: weights + resident KV cache + peak activations ≤ the usable memory, the hardware's
`memory_capacity` × its memory utilization (costs/capacity.py: vLLM's `gpu_memory_utilization`,
0.9 by default, leaves the rest to the runtime's workspace); None where the spec gives no capacity.
The footprint the commands judge by is the deployed view's (what a runtime holds), and the largest
batch that fits is capacity.largest_fitting over it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from onnx_roofline.costs.capacity import MemoryBudget
from onnx_roofline.model.tensors import TensorInfo, is_floating, known, with_precision
from onnx_roofline.shapes.bodies import CONTROL_FLOW

VIEW_OPS = frozenset({"Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity", "BitCast"})

CACHE_SLOTS: dict[tuple[str, str], tuple[tuple[int, ...], tuple[int, ...]]] = {
    ("", "Attention"): ((4, 5), (1, 2)),
    ("com.microsoft", "GroupQueryAttention"): ((3, 4), (1, 2)),
    ("com.microsoft", "SparseAttention"): ((3, 4), (1, 2)),
    ("com.microsoft", "PagedAttention"): ((3, 4), (1, 2)),
    ("com.microsoft", "MultiHeadAttention"): ((6, 7), (1, 2)),
    ("com.microsoft", "DecoderMaskedMultiHeadAttention"): ((5, 6), (1, 2)),
    ("com.microsoft", "Attention"): ((4,), (1,)),
    ("com.microsoft", "DecoderMaskedSelfAttention"): ((4,), (1,)),
    ("com.microsoft", "QAttention"): ((8,), (1,)),
}
"""(past input slots, present output slots) of the attention ops that carry a KV cache
(onnxruntime's ContribOperators.md; ai.onnx Attention-23)."""

CACHE_OPS = frozenset({"Concat", "Identity", *(op_type for _, op_type in CACHE_SLOTS)})
"""The op types kv_caches looks at: a cache update, or a copy of a past (_copies_of_inputs)."""

_CONSTANT = frozenset({"Constant"})  # a node whose outputs are stored, never activations


@dataclass(frozen=True)
class KVCache:
    """One cache tensor pair: the past a step reads and the present it writes (either may be absent)."""

    node: int  # the Concat or attention node that updates it
    past: TensorInfo | None
    present: TensorInfo | None
    new: tuple[TensorInfo, ...]  # a Concat's other operands: the rows this step adds
    shared: bool  # past and present are one buffer in the graph itself (same shape, attention op)

    @property
    def cache(self) -> TensorInfo:
        return self.present if self.present is not None else self.past  # type: ignore[return-value]


def kv_caches(nodes, graph_inputs: frozenset[str], graph_outputs: frozenset[str]) -> list[KVCache]:
    """The KV caches of a graph, by the node that updates each (see the module docstring)."""
    found = []
    candidates = _of_types(nodes, CACHE_OPS)  # the few nodes that may update a cache, or copy a past into one
    copies = _copies_of_inputs(candidates, graph_inputs)
    for node in candidates:
        if node.op_type == "Concat" and node.domain == "" and node.outputs and node.outputs[0] is not None:
            present = node.outputs[0]
            operands = [copies.get(t.name, t) if t is not None else None for t in node.inputs]
            pasts = [
                t
                for t in operands
                if t is not None and t.name in graph_inputs and t.shape is not None and len(t.shape) >= 3
            ]
            if (
                pasts and present.name in graph_outputs and is_floating(present.dtype)
            ):  # the first cache-like operand: Concat(past, new)
                new = tuple(t for t in dict.fromkeys(operands) if t is not None and t.name != pasts[0].name)
                found.append(KVCache(node.index, pasts[0], present, new, False))
            continue
        slots = CACHE_SLOTS.get((node.domain, node.op_type))
        if slots is None:
            continue
        for past_slot, present_slot in zip(*slots, strict=False):
            past = node.inputs[past_slot] if past_slot < len(node.inputs) else None
            present = node.outputs[present_slot] if present_slot < len(node.outputs) else None
            if past is None and present is None:
                continue
            shared = past is not None and present is not None and past.shape == present.shape
            found.append(KVCache(node.index, past, present, (), shared))
    return found


def _copies_of_inputs(nodes, graph_inputs: frozenset[str]) -> dict[str, TensorInfo]:
    """Outputs that are a graph input unchanged (an Identity, a one-operand Concat: TorchScript
    writes `Concat(past)` before `Concat(·, new)`), each with the input it copies."""
    copies = {}
    for node in nodes:
        if node.domain == "" and node.op_type in ("Identity", "Concat") and len(node.inputs) == 1 and node.outputs:
            source, out = node.inputs[0], node.outputs[0]
            if source is not None and out is not None and source.name in graph_inputs:
                copies[out.name] = source
    return copies


@dataclass(frozen=True)
class Footprint:
    view: str  # "written" or "deployed"
    weight_bytes: int  # the weights the run reads (and those nothing reads)
    untaken_branch_weight_bytes: int  # held for an If branch the run does not take: in memory all the same
    kv_cache_bytes: int
    kv_cache_bytes_per_sequence: int | None  # None when the caches have no common batch dim
    kv_cache_resident_bytes: int
    peak_activation_bytes: int
    peak_at: str | None  # the node (kernel) running at the peak
    budget: MemoryBudget  # the capacity and the share of it the model may hold
    kv_cache: str | None = None  # "copy" or "inplace": how the resident cache was counted; None without one
    folded_weight_bytes: int = 0  # of weight_bytes, the outputs of folded nodes a runtime stores (a transposed lm_head)

    @property
    def total_bytes(self) -> int:
        return (
            self.weight_bytes
            + self.untaken_branch_weight_bytes
            + self.kv_cache_resident_bytes
            + self.peak_activation_bytes
        )

    @property
    def capacity(self) -> float | None:
        return self.budget.capacity

    @property
    def fits(self) -> bool | None:
        return self.budget.fits(self.total_bytes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "view": self.view,
            "weight_bytes": self.weight_bytes,
            "folded_weight_bytes": self.folded_weight_bytes,
            "untaken_branch_weight_bytes": self.untaken_branch_weight_bytes,
            "kv_cache_bytes": self.kv_cache_bytes,
            "kv_cache_bytes_per_sequence": self.kv_cache_bytes_per_sequence,
            "kv_cache_resident_bytes": self.kv_cache_resident_bytes,
            "peak_activation_bytes": self.peak_activation_bytes,
            "peak_activation_at": self.peak_at,
            "total_bytes": self.total_bytes,
            "kv_cache": self.kv_cache,
            **self.budget.to_dict(),
            "fits": self.fits,
        }


def footprint(report, kv_inplace: bool = False) -> Footprint:
    """The footprint of `report` (as written, or a deployed report whose nodes are its kernels in
    execution order). `kv_inplace`: the cache is updated in place (one buffer per cache); the
    graph as written copies it."""
    model = report.model
    graph_inputs, graph_outputs = frozenset(model.graph_inputs), frozenset(model.graph_outputs)
    deployed = getattr(report, "view", "written") == "deployed"
    rows = report.written.nodes if deployed else report.nodes
    folded, made_by_folding = _folded(report.nodes) if deployed else (set(), set())
    walked = {""} | {row.scope for row in rows}  # the graphs whose nodes are rows: the main graph, the bodies run
    weights = {
        w.name for w in model.weight_tensors if w.graph in walked
    }  # a name is a weight only where it is one (sibling bodies reuse names)
    weights |= made_by_folding
    caches = kv_caches(rows, graph_inputs, graph_outputs)
    cache_names = {t.name for c in caches for t in (c.past, c.present) if t is not None}
    stored = {
        t.name for n in _of_types(report.nodes, _CONSTANT) if not n.domain for t in n.outputs if t is not None
    }  # a stored tensor: never an activation

    running = [n for n in report.nodes if n.index not in folded] if folded else report.nodes
    weight_bytes: dict[str | tuple[str, str], int] = _weight_bytes(running, weights)
    unsized = {
        w.name for w in model.weight_tensors if w.graph in walked and w.name not in weight_bytes
    }  # no running node reads them as a known tensor: mostly none, so the rows are seldom walked for them
    read = _read_among(rows, unsized)
    untaken: dict[tuple[str, str], int] = {}  # the weights only a branch the run does not take reads
    for weight in model.weight_tensors:  # those no row reads: a branch's not taken, or nobody's
        if weight.graph not in walked or (weight.name not in read and weight.name not in weight_bytes):
            held = untaken if _not_taken(weight, model.branches) else weight_bytes
            held[(weight.graph, weight.name)] = _costed_bytes(weight.info(), model.precision)
    peak, at = _peak_activations(
        running, weights | cache_names | stored, graph_inputs, graph_outputs, model.body_outputs
    )

    present = {c.cache.name: c.cache.nbytes for c in caches if c.cache.is_known}
    resident: dict[str, int] = dict(present)
    for cache in caches:
        if (
            cache.past is not None
            and cache.present is not None
            and not (cache.shared or kv_inplace)
            and cache.past.is_known
        ):
            resident[cache.past.name] = cache.past.nbytes
    return Footprint(
        view="deployed" if deployed else "written",
        weight_bytes=sum(weight_bytes.values()),
        untaken_branch_weight_bytes=sum(untaken.values()),
        kv_cache_bytes=sum(present.values()),
        kv_cache_bytes_per_sequence=_per_sequence(caches, sum(present.values())),
        kv_cache_resident_bytes=sum(resident.values()),
        peak_activation_bytes=peak,
        peak_at=at,
        budget=report.hardware.memory_budget,
        kv_cache=None if not caches else "inplace" if kv_inplace or all(c.shared for c in caches) else "copy",
        folded_weight_bytes=sum(size for name, size in weight_bytes.items() if name in made_by_folding),
    )


def _of_types(nodes, op_types: frozenset[str]) -> list:
    """The nodes whose op type is one of `op_types`, in order: the few a pass looks at, picked out
    once, so that its own tests run on them alone."""
    return [node for node in nodes if node.op_type in op_types]


def _folded(nodes) -> tuple[set[int], set[str]]:
    """The deployed view's folded kernels (computed once at load) and the tensors they make."""
    folded = [node for node in nodes if node.constant_foldable]
    return {n.index for n in folded}, {t.name for n in folded for t in n.outputs if t is not None}


def _weight_bytes(nodes, weights: set[str]) -> dict[str | tuple[str, str], int]:
    """The bytes of each weight the nodes read, by name (nbytes asked once a weight, not once a read)."""
    return {name: tensor.nbytes for name, tensor in _last_known_reads(nodes, weights).items()}


def _last_known_reads(nodes, names: set[str]) -> dict[str, TensorInfo]:
    """The last known tensor the nodes read under each of `names` (sibling bodies reuse names). The
    reads are taken last first, so the first known read of a name is the one kept, and the walk
    ends once every name has one: a graph whose weights are all read (a chain, which reads its few
    at every layer) stops early."""
    last: dict[str, TensorInfo] = {}
    for node in reversed(nodes):
        for tensor in reversed(node.inputs):
            if tensor is not None and (name := tensor.name) in names and name not in last and tensor.is_known:
                last[name] = tensor
                if len(last) == len(names):
                    return last
    return last


def _read_among(nodes, names: set[str]) -> set[str]:
    """Those of `names` the nodes read: a set of a few names, not of every name read, and the walk
    ends once all of them are found (at once, for none)."""
    found: set[str] = set()
    if not names:
        return found
    for node in nodes:
        for tensor in node.inputs:
            if tensor is not None and (name := tensor.name) in names and name not in found:
                found.add(name)
                if len(found) == len(names):
                    return found
    return found


def _not_taken(weight, branches) -> bool:
    """Whether only an If branch the run does not take reads the weight: stored in that branch (or
    a body inside it), or an outer weight it alone reads."""
    for branch in branches:
        scope = branch.not_taken
        if weight.graph == scope or weight.graph.startswith(scope + "/") or weight.name in branch.reads:
            return True
    return False


def _costed_bytes(tensor: TensorInfo, precision: str | None) -> int:
    """A weight's bytes in the dtype costed (`--dtype`: floating-point tensors in that precision)."""
    return (with_precision({tensor.name: tensor}, precision)[tensor.name] if precision else tensor).nbytes


def _per_sequence(caches: list[KVCache], total: int) -> int | None:
    """The cache bytes over the batch: the leading dim of [B, H, T, dh] caches, the second of the
    [2, B, H, T, dh] ones; None without caches or when they disagree (a paged cache has blocks)."""
    batches = set()
    for cache in caches:
        tensor = cache.cache
        if not known(tensor) or tensor.rank not in (4, 5) or (tensor.rank == 5 and tensor.shape[0] != 2):
            return None
        batches.add(tensor.shape[0] if tensor.rank == 4 else tensor.shape[1])
    if len(batches) != 1:
        return None
    (batch,) = batches
    return total // batch if batch else None


def _peak_activations(nodes, excluded: set[str], graph_inputs: frozenset[str], graph_outputs: frozenset[str],
                      body_outputs: tuple[tuple[str, str], ...] = ()) -> tuple[int, str | None]:  # fmt: skip
    """(peak live bytes, the node at the peak) over `nodes` in order; see the module docstring.
    One pass over the nodes (this runs over every node of the graph) finds each step's bytes
    written and freed (sizes, views, last uses); the running total is then a sum over steps.
    Each buffer written is numbered, its size and last reader kept in lists by number: one table
    of every name, not two, is what a read looks up (on a million nodes, the pass's time goes to
    such lookups); names read before any node writes them (graph inputs, weights) go to a small
    table of their own."""
    alias: dict[str, str] = {
        outer: inner for inner, outer in body_outputs if inner != outer
    }  # a view's output, a control-flow node's: the buffer it shares
    from_bodies = {
        outer for _, outer in body_outputs
    }  # written by the body's node, after the control-flow node's own row
    buffers: dict[str, int] = {}  # each buffer a node writes, by name: its number, in the order written
    sizes: list[int] = []  # by number
    last_read: list[int] = []  # by number: the step of its last reader (its writer's, where none)
    unwritten: dict[str, int] = {}  # the last step reading a name no node has written yet
    inputs: dict[str, int] = {}  # the graph inputs read, live from the start
    written: list[int] = []  # bytes each step's node writes (a name twice is one buffer)

    for step, node in enumerate(nodes):
        for tensor in node.inputs:
            if tensor is not None:
                name = buffer = tensor.name
                while buffer in alias:
                    buffer = alias[buffer]
                number = buffers.get(buffer)
                if number is None:
                    unwritten[buffer] = step
                else:
                    last_read[number] = step
                if name in graph_inputs and name not in excluded and tensor.is_known:
                    inputs[name] = tensor.nbytes
        op_type, outputs = node.op_type, node.outputs
        if op_type in VIEW_OPS and node.inputs and node.inputs[0] is not None and outputs and outputs[0] is not None:
            buffer = node.inputs[0].name
            while buffer in alias:
                buffer = alias[buffer]
            alias[outputs[0].name] = buffer  # a view's output is in `alias`, never in `buffers`
            written.append(0)
            continue
        wrote = 0
        for tensor in outputs:
            if (
                tensor is not None
                and tensor.is_known
                and (name := tensor.name) not in excluded
                and name not in buffers
                and name not in alias
                and (name not in from_bodies or op_type not in CONTROL_FLOW)
            ):
                buffers[name] = len(sizes)
                size = tensor.nbytes
                sizes.append(size)
                last_read.append(unwritten.get(name, step))  # read before written: freed there all the same
                wrote += size
        written.append(wrote)
    for name in graph_outputs:
        while name in alias:
            name = alias[name]
        if (number := buffers.get(name)) is not None:
            last_read[number] = len(nodes)
    freed = [0] * (len(nodes) + 1)  # bytes whose last use is each step (a graph output's: after the last)
    for step, size in zip(last_read, sizes, strict=True):
        freed[step] += size
    for name, step in unwritten.items():
        if name not in buffers:
            freed[step] += inputs.get(name, 0)
    live = sum(inputs.values())
    peak, at = live, None
    for step, size in enumerate(written):
        live += size
        if live > peak:
            peak, at = live, step
        live -= freed[step]
    return peak, None if at is None else nodes[at].name
