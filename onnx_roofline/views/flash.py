"""Decomposed attention, found in the graph so the fused view can run it as one kernel.

The pattern: MatMul(Q, Kᵀ) → [scale] → [mask] → Softmax → [NaN guard, casts] → MatMul(·, V), every
intermediate consumed only inside it. A FlashAttention-style kernel also takes over the layout ops
and scalar scales that only prepare Q, K and V (Transpose, Reshape, Mul by 1/√dh) and the layout
ops that only rearrange O, so it reads Q, K, V once and writes O once; the S×T scores never reach
memory. Masks and constants feeding the pattern are taken as generated in the kernel (causal
masking from indices, as FlashAttention's is_causal does) and are not read.

Grouped- and multi-query attention reads each KV head once. However an exporter repeats K and V
to the query heads — transformers' `repeat_kv` as Unsqueeze → Expand → Reshape, a Tile, a Gather
over the head axis — the kernel indexes the KV head of each query head instead (FlashAttention's
GQA, onnxruntime's GroupQueryAttention): the repeat joins the kernel, which reads the tensor
before it, so the expanded K/V is neither written nor resident.

Some of the graph's work inside the pattern a fused kernel does not do (`graph_only`): K scaled
over the whole cache each step (the kernel scales the scores, or Q), and a NaN guard after the
softmax (IsNaN and its Where: an online softmax never makes the NaN). Its FLOPs stay in `flops`,
what the graph executes, and leave `useful_flops`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from onnx_roofline.views.graph import Dataflow, name_of
from onnx_roofline.views.mask import ConstantLookup, attention_mask
from onnx_roofline.views.ops import LAYOUT, SCALES, VIEWS, elementwise_ops

SOFTMAX = "Softmax"


@dataclass(frozen=True)
class CacheUpdate:
    """A KV-cache Concat the deployed kernel takes in, as FlashAttention's `flash_attn_with_kvcache`
    and onnxruntime's GroupQueryAttention do: it reads the past and the new rows, writes the present
    (the whole cache when copying, the new rows alone when updating in place) and attends to it
    without reading it back."""

    concat: int
    past: str  # the graph input holding the cache
    new: str  # the rows appended (after absorbing their layout ops)
    present: str  # the graph output: the cache after this step


@dataclass(frozen=True)
class AttentionMatch:
    members: frozenset[int]  # node indices the kernel replaces
    scores: int  # the Q·Kᵀ MatMul
    values: int  # the P·V MatMul
    q: str  # the tensors the kernel reads and writes (after absorbing layout ops and scales)
    k: str
    v: str
    o: str
    caches: tuple[CacheUpdate, ...] = ()  # deployed: the KV-cache Concats absorbed (K, V)
    causal: bool = False  # the mask compares query and key positions (mask.py)
    graph_only: frozenset[int] = frozenset()  # members whose work a fused kernel does not do (graph_only_work)
    repeats: frozenset[int] = frozenset()  # members repeating K/V heads to the query heads (read once, not repeated)
    window: int | None = None  # a sliding window's width in keys (mask.py), None for a plain causal or no mask


def find_attention(flow: Dataflow, graph_outputs: frozenset[str], caches: Mapping | None = None,
                   constant: ConstantLookup | None = None) -> list[AttentionMatch]:  # fmt: skip
    """Every decomposed attention. `caches` (the deployed view: present name → memory.KVCache of
    the Concat caches) also takes in the KV-cache Concats and a QKV Split whose outputs all feed
    the kernel; `constant` reads a sliding window's width (mask.py)."""
    matches = []
    for node in flow.nodes:
        if node.op_type == SOFTMAX and node.domain == "":
            match = _match_at(flow, graph_outputs, node.index, caches, constant)
            if match is not None:
                matches.append(match)
    return matches


def _body_ops() -> frozenset[str]:
    """What may sit between the two MatMuls: elementwise ops (scale, mask, guards), views, Softmax."""
    return elementwise_ops() | VIEWS | {SOFTMAX}


def _match_at(flow: Dataflow, graph_outputs: frozenset[str], softmax: int, caches: Mapping | None = None,
              constant: ConstantLookup | None = None) -> AttentionMatch | None:  # fmt: skip
    body = _body_ops()
    size = _numel(flow.node(softmax).outputs[0])
    scores = [m for m in _reach(flow, softmax, body, upstream=True) if _numel(flow.node(m).outputs[0]) == size]
    values = _reach(flow, softmax, body, upstream=False)
    if len(scores) != 1 or len(values) != 1:
        return None
    (first,), (second,) = scores, values
    members = {first, second} | flow.between(first, second)
    inner = [flow.node(i) for i in members - {first, second}]
    if any(n.op_type not in body for n in inner) or sum(n.op_type == SOFTMAX for n in inner) != 1:
        return None
    if not _closed(flow, graph_outputs, members, exempt=second):
        return None
    inner_members = frozenset(members)
    q = _absorb_inputs(flow, graph_outputs, members, _input(flow, first, 0))
    before_k = set(members)
    k = _absorb_inputs(flow, graph_outputs, members, _input(flow, first, 1), repeats=True)
    k_scales = frozenset(i for i in members - before_k if flow.node(i).op_type in SCALES)
    v = _absorb_inputs(flow, graph_outputs, members, _input(flow, second, 1), repeats=True)
    o = _absorb_output(flow, graph_outputs, members, name_of(flow.node(second).outputs[0]))
    updates: list[CacheUpdate] = []
    if caches is not None:
        k = _absorb_cache(flow, graph_outputs, members, k, caches, updates)
        v = _absorb_cache(flow, graph_outputs, members, v, caches, updates)
        q, k, v = _absorb_split(flow, graph_outputs, members, (q, k, v))
    mask = attention_mask(flow, inner_members, frozenset({first, second}), constant)
    graph_only = k_scales | _nan_guards(flow, inner_members)
    repeats = frozenset(i for i in members if _repeat_input(flow.node(i)) is not None)
    return AttentionMatch(
        frozenset(members), first, second, q, k, v, o, tuple(updates), mask.causal, graph_only, repeats, mask.window
    )


def _nan_guards(flow: Dataflow, members: frozenset[int]) -> frozenset[int]:
    """An IsNaN of the probabilities and the Where it steers (exporters guard a fully masked row):
    a fused kernel's online softmax never makes the NaN, so it does neither."""
    guards = {i for i in members if flow.node(i).op_type == "IsNaN"}
    tests = {t.name for i in guards for t in flow.node(i).outputs if t is not None}
    return frozenset(guards | {i for i in members if flow.node(i).op_type == "Where" and (condition := flow.node(i).inputs[0]) is not None
                               and condition.name in tests})  # fmt: skip


def _absorb_cache(
    flow: Dataflow, graph_outputs: frozenset[str], members: set[int], tensor: str, caches: Mapping, updates: list
) -> str:
    """K or V read from a KV-cache Concat's output: the Concat joins the kernel, which then reads
    the past and the new rows (their layout ops absorbed) instead of the present."""
    cache = caches.get(tensor)
    producer = flow.producer_of(tensor)
    if cache is None or producer is None or producer.index != cache.node or len(cache.new) != 1:
        return tensor
    members.add(producer.index)
    new = _absorb_inputs(flow, graph_outputs, members, cache.new[0].name)
    updates.append(CacheUpdate(producer.index, cache.past.name, new, tensor))
    return new


def _absorb_split(
    flow: Dataflow, graph_outputs: frozenset[str], members: set[int], roots: tuple[str, ...]
) -> tuple[str, ...]:
    """A Split (the QKV projection's) whose every output feeds only the kernel joins it: the kernel
    reads Q, K and V where the projection wrote them, one buffer read once."""
    producers = {flow.producer.get(name) for name in roots}
    for index in producers:
        node = flow.node(index) if index is not None else None
        if (
            index is None
            or node is None
            or node.op_type != "Split"
            or node.domain != ""
            or not _only_feeds(flow, graph_outputs, members, index)
        ):
            continue
        members.add(index)
        source = _absorb_inputs(flow, graph_outputs, members, name_of(node.inputs[0]))
        outputs = {t.name for t in node.outputs if t is not None}
        roots = tuple(source if name in outputs else name for name in roots)
    return roots


def _reach(flow: Dataflow, start: int, body: frozenset[str], upstream: bool) -> list[int]:
    """MatMuls reached from `start` through body ops only: producers (upstream), or consumers that
    take the reached tensor as their first input (downstream, the P of P·V)."""
    found, seen, frontier = [], {start}, [start]
    while frontier:
        node = flow.node(frontier.pop())
        if upstream:
            steps = [(flow.producer.get(t.name), t.name) for t in node.inputs if t is not None]
        else:
            steps = [(c, t.name) for t in node.outputs if t is not None for c in flow.consumers.get(t.name, ())]
        for index, tensor in steps:
            if index is None or index in seen:
                continue
            seen.add(index)
            nxt = flow.node(index)
            if nxt.op_type == "MatMul":
                if upstream or (nxt.inputs[0] is not None and nxt.inputs[0].name == tensor):
                    found.append(index)
            elif nxt.op_type in body:
                frontier.append(index)
    return found


def _closed(flow: Dataflow, graph_outputs: frozenset[str], members: set[int], exempt: int) -> bool:
    """No intermediate escapes: every output of a member (but `exempt`'s) stays inside."""
    for index in members - {exempt}:
        for tensor in flow.node(index).outputs:
            if tensor is None:
                continue
            if tensor.name in graph_outputs or not set(flow.consumers.get(tensor.name, ())) <= members:
                return False
    return True


def _input(flow: Dataflow, index: int, position: int) -> str:
    return name_of(flow.node(index).inputs[position])


def _absorb_inputs(
    flow: Dataflow, graph_outputs: frozenset[str], members: set[int], tensor: str, repeats: bool = False
) -> str:
    """Walk up from a MatMul operand through layout ops and scalar scales that feed only the
    kernel (and, for K and V, `repeats` of their heads); adds them to `members` and returns the
    tensor the kernel actually reads."""
    while (producer := flow.producer_of(tensor)) is not None:
        data = _data_input(producer) or (_repeat_input(producer) if repeats else None)
        if data is None or not _only_feeds(flow, graph_outputs, members, producer.index):
            break
        members.add(producer.index)
        tensor = data
    return tensor


def _absorb_output(flow: Dataflow, graph_outputs: frozenset[str], members: set[int], tensor: str) -> str:
    """Walk down from the P·V output through layout ops that are its only consumer."""
    while tensor not in graph_outputs and len(users := flow.consumers.get(tensor, ())) == 1:
        user = flow.node(users[0])
        if user.op_type not in LAYOUT or name_of(user.inputs[0]) != tensor:
            break
        members.add(user.index)
        tensor = name_of(user.outputs[0])
    return tensor


def _data_input(node) -> str | None:
    """The input a layout op, a whole-tensor Slice or a scalar scale passes through, or None when
    the node is none of them. A Slice that keeps every element (torch.export writes `x[:, :]` as
    one) is read through by strides, as onnxruntime's EliminateSlice removes it."""
    if node.op_type in LAYOUT or (node.op_type == "Slice" and _whole_slice(node)):
        return node.inputs[0].name
    if node.op_type in SCALES and len(node.inputs) == 2 and all(t is not None for t in node.inputs):
        a, b = node.inputs
        if _numel(b) == 1:
            return a.name
        if node.op_type == "Mul" and _numel(a) == 1:
            return b.name
    return None


def _repeat_input(node) -> str | None:
    """The tensor a head repeat copies (an Expand, a Tile, or a Gather whose output holds at
    least its data's elements: indices over the head axis that repeat heads), or None: an
    attention kernel indexes the KV head of each query head rather than read copies of it."""
    if node.domain != "" or not node.inputs or node.inputs[0] is None:
        return None
    if node.op_type in ("Expand", "Tile"):
        return node.inputs[0].name
    if node.op_type == "Gather":
        data, out = _numel(node.inputs[0]), _numel(node.outputs[0]) if node.outputs else None
        if data is not None and out is not None and out >= data:
            return node.inputs[0].name
    return None


def _whole_slice(node) -> bool:
    data, out = node.inputs[0] if node.inputs else None, node.outputs[0] if node.outputs else None
    return node.domain == "" and _numel(data) is not None and _numel(data) == _numel(out)


def _only_feeds(flow: Dataflow, graph_outputs: frozenset[str], members: set[int], index: int) -> bool:
    outputs = [t for t in flow.node(index).outputs if t is not None]
    return all(t.name not in graph_outputs and set(flow.consumers.get(t.name, ())) <= members for t in outputs)


def _numel(tensor) -> int | None:
    return tensor.numel if tensor is not None and tensor.is_known else None
