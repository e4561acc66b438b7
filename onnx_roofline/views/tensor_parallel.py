"""The Megatron tensor-parallel split, inferred from the graph's structure (never from names).

A *projection* is a MatMul/Gemm that multiplies an activation by a 2-D weight. From each one the
region it feeds is followed forward, through every node but another projection (Shape and Size
read no data, so they lead nowhere). Projections whose regions meet form a candidate block: the
projections that open it, the projections it ends at, and the nodes between. A block is split
Megatron's way when it maps the hidden state to the hidden state — every opening projection reads
a [..., H] activation, every closing one writes [..., H] — and no tensor inside it leaves except a
KV cache:

- **attention** (the region holds a Softmax or an attention op): Q, K, V split by columns, the
  heads divided among the devices, the output projection split by rows;
- **MLP** (the region is elementwise: activation, gate·up): up and gate split by columns, down
  by rows.

Each block then ends in one all-reduce of its [..., H] output. A projection whose region ends at
a graph output with no projection after it is the **lm_head**, split by vocabulary (its columns),
its logits all-gathered. A Gather of a 2-D weight by the token ids is the **embedding**, split by
vocabulary: each device looks up the rows it holds, an all-reduce of the [..., H] output sums them.

What is divided: the split weights (a block's column and row weights, a column projection's bias
and the bias-like weights [..., width] added to its output, the vocabulary tables), every
activation inside a block, the KV cache. What stays whole: norms, residual adds, a row
projection's bias (added after the all-reduce), position tables, everything outside the blocks.
The plan names tensors and nodes, not sizes: like the fusion plan it holds at every binding."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

from onnx_roofline.report.model import OK, Report
from onnx_roofline.views.graph import Dataflow
from onnx_roofline.views.ops import LAYOUT, elementwise_ops

ATTENTION, MLP = "attention", "mlp"
PROJECTIONS = frozenset({"MatMul", "Gemm"})
ATTENTION_OPS = frozenset({"Attention", "GroupQueryAttention", "MultiHeadAttention", "PackedMultiHeadAttention", "SparseAttention",
                           "PagedAttention", "DecoderMaskedMultiHeadAttention"})  # fmt: skip
MLP_OPS = frozenset({"Cast", "Split", "Slice", "Concat"})  # besides elementwise ops and views: a packed gate_up split in two

SPLIT_PATTERN = ("Megatron-LM: attention's Q, K, V and the MLP's up/gate split by columns, the output projection and the "
                 "MLP's down by rows, heads divided; embedding and lm_head split by vocabulary, the logits all-gathered")  # fmt: skip


@dataclass(frozen=True)
class Block:
    kind: str  # ATTENTION or MLP
    columns: tuple[int, ...]  # the projections that open it, split by columns
    rows: tuple[int, ...]  # the projections that close it, split by rows; their outputs are all-reduced
    inner: frozenset[int]  # the nodes between, each device running its share
    heads: int | None  # attention heads (None for an MLP, or where the graph does not show them)
    kv_heads: int | None

    def divides(self, devices: int) -> bool:
        return all(h is None or h % devices == 0 for h in (self.heads, self.kv_heads))


@dataclass(frozen=True)
class TensorParallelPlan:
    blocks: tuple[Block, ...]
    embedding: int | None  # the Gather split by vocabulary
    lm_head: int | None  # the projection split by vocabulary
    split_tensors: frozenset[str]  # each device holds 1/N of them
    split_weights: frozenset[str]  # those of them that are weights
    reduced: tuple[str, ...]  # the tensors all-reduced each run, in graph order
    gathered: tuple[str, ...]  # the tensors all-gathered each run (the logits)
    replicated_projections: tuple[str, ...]  # projections in no block: run whole on every device
    hidden: int | None  # the hidden size the blocks map to itself

    @cached_property
    def divided_nodes(self) -> frozenset[int]:
        """Nodes whose FLOPs each device does 1/N of."""
        nodes = {i for b in self.blocks for i in (*b.columns, *b.rows, *b.inner)}
        return frozenset(nodes | ({self.lm_head} if self.lm_head is not None else set()))

    @property
    def found(self) -> bool:
        return bool(self.blocks)

    def layers(self) -> dict[str, int]:
        return {kind: sum(b.kind == kind for b in self.blocks) for kind in (ATTENTION, MLP)}

    def heads(self) -> tuple[int | None, int | None]:
        attention = [b for b in self.blocks if b.kind == ATTENTION]
        return (attention[0].heads, attention[0].kv_heads) if attention else (None, None)

    def refusal(self, devices: int) -> str | None:
        """Why the plan cannot run on `devices`, or None."""
        if devices > 1 and not self.found:
            return "no transformer blocks recognised (attention or MLP between projections): nothing to split"
        heads, kv_heads = self.heads()
        if not all(b.divides(devices) for b in self.blocks):
            return f"{devices} devices do not divide the {heads} heads ({kv_heads} KV heads)"
        return None

    def to_dict(self, report: Report) -> dict:
        heads, kv_heads = self.heads()
        name = lambda i: None if i is None else report.nodes[i].name  # noqa: E731
        return {
            "pattern": SPLIT_PATTERN,
            "layers": self.layers(),
            "hidden": self.hidden,
            "heads": heads,
            "kv_heads": kv_heads,
            "embedding": name(self.embedding),
            "lm_head": name(self.lm_head),
            "blocks": [{"kind": b.kind, "columns": [name(i) for i in b.columns], "rows": [name(i) for i in b.rows]} for b in self.blocks],
            "replicated_projections": list(self.replicated_projections),
            "all_reduced": list(self.reduced),
            "all_gathered": list(self.gathered),
        }


def plan_tensor_parallel(report: Report) -> TensorParallelPlan:
    """The Megatron split of an as-written report's graph (see the module docstring)."""
    flow = Dataflow.of(report)
    weights = {w.name for w in report.model.weight_tensors} | {t.name for n in report.nodes if n.constant_foldable for t in n.outputs if t is not None}
    projections = [n.index for n in report.nodes if _is_projection(n, weights)]
    regions = {p: _region(flow, p, set(projections)) for p in projections}
    outputs = frozenset(report.model.graph_outputs)
    blocks, lm_head = [], None
    for group in _meeting(projections, regions):
        inner = frozenset().union(*(regions[p][0] for p in group))
        ends = sorted(set().union(*(regions[p][1] for p in group)) - set(group))
        leaves = {t.name for i in (*inner, *group) for t in report.nodes[i].outputs if t is not None and t.name in outputs}
        if not ends and leaves and len(group) == 1:
            lm_head = group[0] if lm_head is None else lm_head
            continue
        block = _block(report, group, ends, inner, leaves)
        if block is not None:
            blocks.append(block)
    blocks.sort(key=lambda b: b.columns[0])
    in_blocks = {i for b in blocks for i in (*b.columns, *b.rows)}
    if not blocks:
        lm_head = None  # a lone vocabulary split of a graph with no blocks is not Megatron's
    embedding = _embedding(report, flow, weights) if blocks else None
    split = _split_tensors(report, flow, blocks, lm_head, embedding, weights)
    reduced = ([_out(report, embedding)] if embedding is not None else []) + [_out(report, r) for b in blocks for r in b.rows]
    hidden = report.nodes[blocks[0].rows[0]].outputs[0].shape[-1] if blocks else None
    return TensorParallelPlan(
        blocks=tuple(blocks),
        embedding=embedding,
        lm_head=lm_head,
        split_tensors=frozenset(split),
        split_weights=frozenset(split & weights),
        reduced=tuple(reduced),
        gathered=(_out(report, lm_head),) if lm_head is not None else (),
        replicated_projections=tuple(report.nodes[p].name for p in projections if p not in in_blocks and p != lm_head),
        hidden=hidden if isinstance(hidden, int) else None,
    )


def _is_projection(node, weights: set[str]) -> bool:
    """A MatMul/Gemm of an activation (slot 0) by a 2-D weight (slot 1)."""
    if node.op_type not in PROJECTIONS or node.domain != "" or node.status != OK or len(node.inputs) < 2:
        return False
    a, b = node.inputs[0], node.inputs[1]
    return a is not None and b is not None and a.name not in weights and b.name in weights and b.rank == 2


def _region(flow: Dataflow, start: int, projections: set[int]) -> tuple[set[int], set[int]]:
    """(the nodes `start` feeds up to the next projections, those projections)."""
    inner, ends, stack = set(), set(), [start]
    while stack:
        for tensor in flow.node(stack.pop()).outputs:
            for consumer in flow.consumers.get(tensor.name, ()) if tensor is not None else ():
                if consumer in projections:
                    ends.add(consumer)
                elif consumer not in inner:
                    inner.add(consumer)
                    stack.append(consumer)
    return inner, ends


def _meeting(projections: list[int], regions: dict) -> list[list[int]]:
    """The projections grouped where their regions share a node (Q, K and V meet in attention;
    gate and up at their product), in graph order."""
    parent = {p: p for p in projections}

    def root(p: int) -> int:
        while parent[p] != p:
            parent[p] = parent[parent[p]]
            p = parent[p]
        return p

    owner: dict[int, int] = {}
    for p in projections:
        for node in regions[p][0]:
            if node in owner:
                parent[root(p)] = root(owner[node])
            else:
                owner[node] = p
    groups: dict[int, list[int]] = {}
    for p in projections:
        groups.setdefault(root(p), []).append(p)
    return list(groups.values())


def _block(report: Report, group: list[int], ends: list[int], inner: frozenset[int], leaves: set[str]) -> Block | None:
    """The group as a Megatron block, or None where it is not one (see the module docstring)."""
    nodes = report.nodes
    widths = {_last(nodes[p].inputs[0]) for p in group} | {_last(_first_output(nodes[e])) for e in ends}
    if not ends or len(widths) != 1 or None in widths or set(_caches(report, inner)) != leaves:
        return None
    ops = {(nodes[i].domain, nodes[i].op_type) for i in inner}
    if any(op in ATTENTION_OPS or op == "Softmax" for _, op in ops):
        kind = ATTENTION
    elif all(domain == "" and (op in elementwise_ops() or op in LAYOUT or op in MLP_OPS) for domain, op in ops):
        kind = MLP
    else:
        return None
    heads, kv_heads = _heads(report, inner) if kind == ATTENTION else (None, None)
    return Block(kind, tuple(sorted(group)), tuple(ends), inner, heads, kv_heads)


def _caches(report: Report, inner: frozenset[int]) -> dict[str, object]:
    """The graph outputs a block writes that carry state to the next step: a KV cache, appended by
    a Concat or written by an attention op, by name."""
    outputs = frozenset(report.model.graph_outputs)
    nodes = (report.nodes[i] for i in inner if report.nodes[i].op_type == "Concat" or report.nodes[i].op_type in ATTENTION_OPS)
    return {t.name: t for n in nodes for t in n.outputs if t is not None and t.name in outputs}


def _heads(report: Report, inner: frozenset[int]) -> tuple[int | None, int | None]:
    """Heads from the attention's scores [B, heads, S, T] (or an attention op's attributes); KV
    heads from its cache [B, kv_heads, T, dh] (the heads where there is no cache)."""
    heads = kv_heads = None
    for i in sorted(inner):
        node = report.nodes[i]
        if node.op_type == "Softmax" and node.inputs and node.inputs[0] is not None and node.inputs[0].rank == 4:
            heads = node.inputs[0].shape[1]
        elif node.op_type in ATTENTION_OPS and node.proto is not None:
            attributes = {a.name: a.i for a in node.proto.attribute}
            heads = attributes.get("num_heads", attributes.get("q_num_heads", heads))
            kv_heads = attributes.get("kv_num_heads", kv_heads)
        if heads is not None:
            break
    kv_heads = next((t.shape[1] for t in _caches(report, inner).values() if t.rank == 4), kv_heads)
    heads = heads if isinstance(heads, int) else None
    kv_heads = kv_heads if isinstance(kv_heads, int) else heads
    return heads, kv_heads


def _embedding(report: Report, flow: Dataflow, weights: set[str]) -> int | None:
    """The Gather of a 2-D weight whose indices are the token ids (the first integer graph input,
    through views and casts)."""
    read = {t.name: t for t in _graph_inputs(report)}
    tokens = next((name for name in report.model.graph_inputs if name in read and "int" in (read[name].dtype or "")), None)
    for node in report.nodes:
        if node.op_type == "Gather" and node.domain == "" and node.status == OK and len(node.inputs) == 2:
            table, indices = node.inputs
            if table is not None and table.name in weights and table.rank == 2 and indices is not None and _source(flow, indices.name) == tokens:
                return node.index
    return None


def _source(flow: Dataflow, name: str) -> str:
    """The tensor `name` is a view or cast of (a one-input Concat is a copy)."""
    while (node := flow.producer_of(name)) is not None and _copies(node):
        name = node.inputs[0].name
    return name


def _copies(node) -> bool:
    ops = node.op_type in LAYOUT or node.op_type == "Cast" or (node.op_type == "Concat" and len(node.inputs) == 1)
    return ops and node.domain == "" and bool(node.inputs) and node.inputs[0] is not None


def _split_tensors(report: Report, flow: Dataflow, blocks: list[Block], lm_head: int | None, embedding: int | None, weights: set[str]) -> set[str]:
    """Every tensor each device holds 1/N of (see the module docstring)."""
    nodes = report.nodes
    split: set[str] = set()
    for block in blocks:
        widths = {_last(_first_output(nodes[c])) for c in block.columns}
        for c in block.columns:
            split |= _names(t for t in nodes[c].inputs[1:])  # the weight and a Gemm's bias
            split |= _names(nodes[c].outputs)
        for i in block.inner:
            split |= _names(nodes[i].outputs)
            split |= _names(t for t in nodes[i].inputs if t is not None and t.name in weights and t.rank >= 1 and _last(t) in widths and _last(t) > 1)
        split |= _names(nodes[r].inputs[1] for r in block.rows)  # the weight; the bias stays whole
        split |= set(_caches(report, block.inner)) | _pasts(report, flow, block)
    for index in (lm_head, embedding):
        if index is not None:
            split |= _names(t for t in nodes[index].inputs if t is not None and t.name in weights)
    if lm_head is not None:
        split |= _names(nodes[lm_head].outputs)
    return split


def _pasts(report: Report, flow: Dataflow, block: Block) -> set[str]:
    """The graph inputs a block's cache appends to: those its nodes read, directly or as copies."""
    inputs = frozenset(report.model.graph_inputs)
    read = {_source(flow, t.name) for i in block.inner for t in report.nodes[i].inputs if t is not None}
    return {name for name in read if name in inputs} & {t.name for t in _graph_inputs(report) if t.rank is not None and t.rank >= 3}


def _graph_inputs(report: Report):
    """The graph inputs some node reads, as the analysis typed them."""
    inputs = frozenset(report.model.graph_inputs)
    return {t.name: t for n in report.nodes for t in n.inputs if t is not None and t.name in inputs}.values()


def _names(tensors: Iterable) -> set[str]:
    return {t.name for t in tensors if t is not None}


def _first_output(node):
    return node.outputs[0] if node.outputs else None


def _out(report: Report, index: int) -> str:
    return report.nodes[index].outputs[0].name


def _last(tensor) -> int | None:
    if tensor is None or tensor.shape is None or not tensor.shape:
        return None
    last = tensor.shape[-1]
    return last if isinstance(last, int) else None
