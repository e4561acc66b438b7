"""The Megatron tensor-parallel split, inferred from the graph's structure (never from names).

A *projection* multiplies an activation by a weight (below). From each one the
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

A projection is a MatMul or Gemm by a 2-D weight, a MatMulNBits by its packed 4/8-bit weight (an
onnxruntime-genai export), or onnxruntime's fused `Attention`, whose weight holds Q, K and V (the op
opens its block and is its attention at once). Between projections an MLP may hold onnxruntime's
fused activations (Gelu, BiasGelu, FastGelu, QuickGelu) besides ai.onnx elementwise ops.

Grouped-query attention with fewer KV heads than devices keeps whole KV heads on every device, as
vLLM and TensorRT-LLM do: with N devices and H_kv < N KV heads, each device holds one, replicated
on N/H_kv devices. A K or V projection (found by its width: H_kv of the H query heads' width), the
K/V part of a packed QKV projection, and the KV cache then count 1/min(N, H_kv) per device, the
query part 1/N. A degree is refused where N does not divide the query heads, or where it neither
divides the KV heads nor is a multiple of them.

Each block then ends in one all-reduce of its [..., H] output. A projection whose region ends at
a graph output with no projection after it is the **lm_head**, split by vocabulary (its columns),
its logits all-gathered. A Gather of a 2-D weight by the token ids is the **embedding**, split by
vocabulary: each device looks up the rows it holds, an all-reduce of the [..., H] output sums them.

What is divided (1/N, or 1/min(N, H_kv) on the KV side): the split weights (a block's column and
row weights, a column projection's bias and the bias-like weights [..., width] added to its
output, the vocabulary tables), every activation inside a block (those reshaped to heads count
1/N: the new token's K and V, a sliver in decode), the KV cache. What stays whole: norms,
residual adds, a row projection's bias (added after the all-reduce), position tables, everything
outside the blocks.
The plan names tensors and nodes, not sizes: like the fusion plan it holds at every binding."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from typing import cast

from onnx_roofline.model.tensors import Dim, TensorInfo
from onnx_roofline.report.model import OK, Report
from onnx_roofline.views.graph import Dataflow, name_of
from onnx_roofline.views.ops import LAYOUT, elementwise_ops

ATTENTION, MLP = "attention", "mlp"
MS = "com.microsoft"
PROJECTIONS = frozenset({("", "MatMul"), ("", "Gemm"), (MS, "MatMulNBits"), (MS, "Attention")})  # (domain, op type)
ROW_WEIGHT_SLOTS = {
    "MatMul": (1,),
    "Gemm": (1,),
    "MatMulNBits": (1, 2, 3, 4),
}  # split along K by a row projection; a bias stays whole
ATTENTION_OPS = frozenset({"Attention", "GroupQueryAttention", "MultiHeadAttention", "PackedMultiHeadAttention", "SparseAttention",
                           "PagedAttention", "DecoderMaskedMultiHeadAttention"})  # fmt: skip
MLP_OPS = frozenset(
    {"Cast", "Split", "Slice", "Concat"}
)  # besides elementwise ops and views: a packed gate_up split in two
FUSED_ACTIVATIONS = frozenset(
    {"Gelu", "BiasGelu", "FastGelu", "QuickGelu"}
)  # onnxruntime's, one output per input element

SPLIT_PATTERN = ("Megatron-LM: attention's Q, K, V and the MLP's up/gate split by columns, the output projection and the "
                 "MLP's down by rows, query heads divided, KV heads divided or replicated where the devices outnumber them; "
                 "embedding and lm_head split by vocabulary, the logits all-gathered")  # fmt: skip


@dataclass(frozen=True)
class Block:
    kind: str  # ATTENTION or MLP
    columns: tuple[int, ...]  # the projections that open it, split by columns
    rows: tuple[int, ...]  # the projections that close it, split by rows; their outputs are all-reduced
    inner: frozenset[int]  # the nodes between, each device running its share
    heads: int | None  # attention heads (None for an MLP, or where the graph does not show them)
    kv_heads: int | None


@dataclass(frozen=True)
class Part:
    """What a split tensor holds, in heads: `query` units divided among the devices, `kv` units of
    `kv_heads` KV heads, whole heads on each device (1/min(N, kv_heads) of them). (1, 0): plain 1/N."""

    query: int = 1
    kv: int = 0
    kv_heads: int = 1

    def share(self, devices: int) -> Fraction:
        return (Fraction(self.query, devices) + Fraction(self.kv, min(devices, self.kv_heads))) / (self.query + self.kv)


PLAIN = Part()


@dataclass(frozen=True)
class TensorParallelPlan:
    blocks: tuple[Block, ...]
    embedding: int | None  # the Gather split by vocabulary
    lm_head: int | None  # the projection split by vocabulary
    split_tensors: dict[str, Part]  # each device holds a share of them (Part.share)
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

    def shares(self, devices: int) -> dict[str, Fraction]:
        """What share of each split tensor one of `devices` holds (tensors not named: whole)."""
        return {name: part.share(devices) for name, part in self.split_tensors.items()} if devices > 1 else {}

    def kv_share(self, devices: int) -> Fraction:
        """The share of the KV cache one device holds: 1/min(N, KV heads)."""
        _, kv_heads = self.heads()
        return Fraction(1, min(devices, kv_heads or devices)) if self.found else Fraction(1)

    def kv_replicas(self, devices: int) -> int:
        """How many devices hold each KV head (1: the heads are divided)."""
        _, kv_heads = self.heads()
        return devices // kv_heads if kv_heads and devices > kv_heads else 1

    def refusal(self, devices: int) -> str | None:
        """Why the plan cannot run on `devices`, or None: the limit the heads set."""
        if devices > 1 and not self.found:
            return "no transformer blocks recognised (attention or MLP between projections): nothing to split"
        for block in self.blocks:
            heads, kv_heads = block.heads, block.kv_heads
            if heads is not None and heads % devices:
                return f"{devices} devices do not divide the {heads} query heads"
            if kv_heads is not None and kv_heads % devices and devices % kv_heads:
                return (f"the {kv_heads} KV heads can be neither divided among {devices} devices nor replicated evenly on them "
                        f"(each device holds whole KV heads: {devices} must divide {kv_heads} or be a multiple of it)")  # fmt: skip
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
            "blocks": [
                {"kind": b.kind, "columns": [name(i) for i in b.columns], "rows": [name(i) for i in b.rows]}
                for b in self.blocks
            ],
            "replicated_projections": list(self.replicated_projections),
            "all_reduced": list(self.reduced),
            "all_gathered": list(self.gathered),
        }


def plan_tensor_parallel(report: Report) -> TensorParallelPlan:
    """The Megatron split of an as-written report's graph (see the module docstring)."""
    flow = Dataflow.of(report)
    weights = {w.name for w in report.model.weight_tensors} | {
        t.name for n in report.nodes if n.constant_foldable for t in n.outputs if t is not None
    }
    projections = [n.index for n in report.nodes if _is_projection(n, weights)]
    regions = {p: _region(flow, p, set(projections)) for p in projections}
    outputs = frozenset(report.model.graph_outputs)
    blocks, lm_head = [], None
    for group in _meeting(projections, regions):
        inner = frozenset().union(*(regions[p][0] for p in group))
        ends = sorted(set().union(*(regions[p][1] for p in group)) - set(group))
        leaves = {
            t.name for i in (*inner, *group) for t in report.nodes[i].outputs if t is not None and t.name in outputs
        }
        if not ends and leaves and len(group) == 1 and not _is_attention(report.nodes[group[0]]):
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
    reduced = ([_out(report, embedding)] if embedding is not None else []) + [
        _out(report, r) for b in blocks for r in b.rows
    ]
    hidden = _dims(report.nodes[blocks[0].rows[0]].outputs[0])[-1] if blocks else None
    return TensorParallelPlan(
        blocks=tuple(blocks),
        embedding=embedding,
        lm_head=lm_head,
        split_tensors=split,
        split_weights=frozenset(split.keys() & weights),
        reduced=tuple(reduced),
        gathered=(_out(report, lm_head),) if lm_head is not None else (),
        replicated_projections=tuple(report.nodes[p].name for p in projections if p not in in_blocks and p != lm_head),
        hidden=hidden if isinstance(hidden, int) else None,
    )


def _is_projection(node, weights: set[str]) -> bool:
    """An activation (slot 0) times a weight (slot 1): a 2-D one for MatMul/Gemm, MatMulNBits'
    packed one, the QKV weight of a fused Attention."""
    if (node.domain, node.op_type) not in PROJECTIONS or node.status != OK or len(node.inputs) < 2:
        return False
    a, b = node.inputs[0], node.inputs[1]
    two_d = b is not None and (b.rank == 2 or node.domain == MS)
    return a is not None and b is not None and a.name not in weights and b.name in weights and two_d


def _is_attention(node) -> bool:
    return node.op_type in ATTENTION_OPS and node.domain == MS


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
    members = inner | set(group)
    if not ends or len(widths) != 1 or None in widths or set(_caches(report, members)) != leaves:
        return None
    ops = {(nodes[i].domain, nodes[i].op_type) for i in inner}
    if any(_is_attention(nodes[i]) or nodes[i].op_type == "Softmax" for i in members):
        kind = ATTENTION
    elif all((domain == "" and (op in elementwise_ops() or op in LAYOUT or op in MLP_OPS)) or (domain == MS and op in FUSED_ACTIVATIONS)
             for domain, op in ops):  # fmt: skip
        kind = MLP
    else:
        return None
    heads, kv_heads = _heads(report, members) if kind == ATTENTION else (None, None)
    return Block(kind, tuple(sorted(group)), tuple(ends), inner, heads, kv_heads)


def _caches(report: Report, members: Iterable[int]) -> dict[str, TensorInfo]:
    """The graph outputs a block writes that carry state to the next step: a KV cache, appended by
    a Concat or written by an attention op, by name."""
    outputs = frozenset(report.model.graph_outputs)
    nodes = (
        report.nodes[i]
        for i in members
        if report.nodes[i].op_type == "Concat" or report.nodes[i].op_type in ATTENTION_OPS
    )
    return {t.name: t for n in nodes for t in n.outputs if t is not None and t.name in outputs}


def _heads(report: Report, members: Iterable[int]) -> tuple[int | None, int | None]:
    """Heads from the attention's scores [B, heads, S, T] (or an attention op's attributes); KV
    heads from its cache [B, kv_heads, T, dh] (the heads where there is no cache)."""
    heads = kv_heads = None
    members = sorted(members)
    for i in members:
        node = report.nodes[i]
        if node.op_type == "Softmax" and node.inputs and node.inputs[0] is not None and node.inputs[0].rank == 4:
            heads = _dims(node.inputs[0])[1]
        elif node.op_type in ATTENTION_OPS and node.proto is not None:
            attributes = {a.name: a.i for a in node.proto.attribute}
            heads = attributes.get("num_heads", attributes.get("q_num_heads", heads))
            kv_heads = attributes.get("kv_num_heads", kv_heads)
        if heads is not None:
            break
    kv_heads = next((_dims(t)[1] for t in _caches(report, members).values() if t.rank == 4), kv_heads)
    heads = heads if isinstance(heads, int) else None
    kv_heads = kv_heads if isinstance(kv_heads, int) else heads
    return heads, kv_heads


def _embedding(report: Report, flow: Dataflow, weights: set[str]) -> int | None:
    """The Gather of a 2-D weight whose indices are the token ids (the first integer graph input,
    through views and casts)."""
    read = {t.name: t for t in _graph_inputs(report)}
    tokens = next(
        (name for name in report.model.graph_inputs if name in read and "int" in (read[name].dtype or "")), None
    )
    for node in report.nodes:
        if node.op_type == "Gather" and node.domain == "" and node.status == OK and len(node.inputs) == 2:
            table, indices = node.inputs
            if (
                table is not None
                and table.name in weights
                and table.rank == 2
                and indices is not None
                and _source(flow, indices.name) == tokens
            ):
                return node.index
    return None


def _source(flow: Dataflow, name: str) -> str:
    """The tensor `name` is a view or cast of (a one-input Concat is a copy)."""
    while (node := flow.producer_of(name)) is not None and _copies(node):
        name = name_of(node.inputs[0])  # _copies found it present
    return name


def _copies(node) -> bool:
    ops = node.op_type in LAYOUT or node.op_type == "Cast" or (node.op_type == "Concat" and len(node.inputs) == 1)
    return ops and node.domain == "" and bool(node.inputs) and node.inputs[0] is not None


def _split_tensors(report: Report, flow: Dataflow, blocks: list[Block], lm_head: int | None, embedding: int | None,
                   weights: set[str]) -> dict[str, Part]:  # fmt: skip
    """Every tensor each device holds a share of, and what it holds (see the module docstring)."""
    nodes = report.nodes
    split: dict[str, Part] = {}
    for block in blocks:
        parts = _column_parts(report, block)  # by a column's output width
        for c in block.columns:
            part = _part(parts, _first_output(nodes[c]))
            split |= dict.fromkeys(
                _names(t for t in nodes[c].inputs[1:] if t is not None and t.name in weights), part
            )  # weights, biases
            split |= {
                t.name: _part(parts, t) for t in nodes[c].outputs if t is not None
            }  # a fused Attention's output: plain
        for i in block.inner:
            split |= {t.name: _part(parts, t) for t in nodes[i].outputs if t is not None}
            split |= {t.name: _part(parts, t) for t in nodes[i].inputs
                      if t is not None and t.name in weights and t.rank >= 1 and (last := _last(t)) in parts and last is not None and last > 1}  # fmt: skip
        split |= {name_of(nodes[r].inputs[slot]): PLAIN for r in block.rows for slot in ROW_WEIGHT_SLOTS.get(nodes[r].op_type, ())
                  if slot < len(nodes[r].inputs) and nodes[r].inputs[slot] is not None}  # fmt: skip
        cache = Part(0, 1, block.kv_heads or 1)
        split |= dict.fromkeys(
            set(_caches(report, {*block.inner, *block.columns})) | _pasts(report, flow, block), cache
        )
    for index in (lm_head, embedding):
        if index is not None:
            split |= dict.fromkeys(_names(t for t in nodes[index].inputs if t is not None and t.name in weights), PLAIN)
    if lm_head is not None:
        split |= dict.fromkeys(_names(nodes[lm_head].outputs), PLAIN)
    return split


def _column_parts(report: Report, block: Block) -> dict[int, Part]:
    """A block's column widths and what each holds: in an attention block with fewer KV heads than
    heads, the widest column is Q, one H_kv/H as wide is K or V, and a lone column (packed QKV)
    holds both; everything else, and every MLP width, is plain."""
    widths = {w for w in (_last(_first_output(report.nodes[c])) for c in block.columns) if w is not None}
    parts = dict.fromkeys(widths, PLAIN)
    heads, kv_heads = block.heads, block.kv_heads
    if block.kind != ATTENTION or heads is None or kv_heads is None or kv_heads == heads or not widths:
        return parts
    if len(block.columns) == 1:
        return dict.fromkeys(widths, Part(heads, 2 * kv_heads, kv_heads))
    query = max(widths)
    return parts | {w: Part(0, 1, kv_heads) for w in widths if w * heads == query * kv_heads}


def _pasts(report: Report, flow: Dataflow, block: Block) -> set[str]:
    """The graph inputs a block's cache appends to: those its nodes read, directly or as copies."""
    inputs = frozenset(report.model.graph_inputs)
    fused = [
        t for c in block.columns if _is_attention(report.nodes[c]) for t in report.nodes[c].inputs[4:5]
    ]  # a fused Attention's past
    read = {
        _source(flow, t.name)
        for t in (*(t for i in block.inner for t in report.nodes[i].inputs), *fused)
        if t is not None
    }
    return {name for name in read if name in inputs} & {
        t.name for t in _graph_inputs(report) if t.rank is not None and t.rank >= 3
    }


def _graph_inputs(report: Report):
    """The graph inputs some node reads, as the analysis typed them."""
    inputs = frozenset(report.model.graph_inputs)
    return {t.name: t for n in report.nodes for t in n.inputs if t is not None and t.name in inputs}.values()


def _names(tensors: Iterable) -> set[str]:
    return {t.name for t in tensors if t is not None}


def _first_output(node):
    return node.outputs[0] if node.outputs else None


def _out(report: Report, index: int) -> str:
    return name_of(report.nodes[index].outputs[0])


def _part(parts: dict[int, Part], tensor: TensorInfo | None) -> Part:
    """The part a tensor of this last dim holds (PLAIN where its last dim is not one of `parts`)."""
    last = _last(tensor)
    return PLAIN if last is None else parts.get(last, PLAIN)


def _dims(tensor: TensorInfo | None) -> tuple[Dim, ...]:
    """The shape of a tensor whose rank the caller read (a costed row's): typed as present."""
    return cast("tuple[Dim, ...]", cast(TensorInfo, tensor).shape)


def _last(tensor) -> int | None:
    if tensor is None or tensor.shape is None or not tensor.shape:
        return None
    last = tensor.shape[-1]
    return last if isinstance(last, int) else None
