"""What an attention pattern's mask lets through: causal or not, and a sliding window's width.

A FlashAttention-style kernel skips the blocks a causal mask hides, so a causal kernel does about
half the score work of a bidirectional one; calling a mask causal that is not halves the work
counted for it. A mask is causal only where its structure compares a query position with a key
position — a `Trilu`, or a comparison whose two operands are both positions (each computed from a
`Range`), as transformers' masking utilities build `kv_idx <= q_idx`. A comparison of one
position with a constant or with data (BERT's padding mask checks `kv_idx >= 0` and indexes the
attention mask), or of a position difference with a constant (T5's relative-position buckets),
says nothing of causality. A positional comparison `Or`-ed with anything else (a prefix-LM's
bidirectional prefix, Gemma-3's image tokens) lets more than the lower triangle through: not causal.

A sliding window is a positional comparison one of whose operands is a position shifted by a
constant (`kv_idx > q_idx - w`, Mistral's and Gemma-2's local layers), or a position difference
compared with a constant (`q_idx - kv_idx < w`): each query sees its last w keys."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import onnx

from onnx_roofline.model.constants import constant_array, inline_initializers, is_small
from onnx_roofline.model.nodes import Node
from onnx_roofline.views.graph import Dataflow

COMPARISONS = frozenset({"Less", "LessOrEqual", "Greater", "GreaterOrEqual"})
INCLUSIVE = frozenset({"LessOrEqual", "GreaterOrEqual"})
PASS_THROUGH = frozenset({"Unsqueeze", "Squeeze", "Reshape", "Cast", "Identity", "Flatten", "Expand"})
"""Ops a position passes through unchanged (in value) on its way to a comparison."""

ConstantLookup = Callable[[str], "int | None"]
"""A scalar integer constant's value by tensor name (an initializer or a Constant node), or None."""


@dataclass(frozen=True)
class Mask:
    causal: bool = False
    window: int | None = None  # keys each query sees under a sliding window (causal only)


def attention_mask(
    flow: Dataflow, members: frozenset[int], matmuls: frozenset[int], constant: ConstantLookup | None = None
) -> Mask:
    """The mask of the attention pattern `members` (Q·Kᵀ and P·V: `matmuls`): every node upstream
    of what the nodes between the MatMuls read from outside the pattern is examined (not Q's or
    K's producers: earlier layers' masks say nothing of this one's; see the module docstring)."""
    sources = {p for i in members - matmuls for t in flow.node(i).inputs
               if t is not None and (p := flow.producer.get(t.name)) is not None and p not in members}  # fmt: skip
    upstream: set[int] = set()
    for source in sources:
        upstream |= flow.digraph.ancestors(source) | {source}
    if any(flow.node(i).op_type == "Trilu" for i in upstream):
        return Mask(causal=True)
    positions = _Positions(flow)
    positional = [
        i for i in upstream if flow.node(i).op_type in COMPARISONS and all(positions.of(t) for t in _operands(flow, i))
    ]
    if not positional:
        return Mask()
    ors = {i for i in upstream if flow.node(i).op_type == "Or"}
    if any(ors & flow.digraph.descendants(i) for i in positional):
        return Mask()
    windows = [
        w for i in upstream if flow.node(i).op_type in COMPARISONS for w in [_window(flow, i, positions, constant)] if w
    ]
    return Mask(causal=True, window=min(windows) if windows else None)


def scalar_constants(flow: Dataflow, model: onnx.ModelProto | None) -> ConstantLookup:
    """A ConstantLookup over the model's small constants, each read where it is asked: a Constant
    node's value from the report row that writes it (its graph node's attributes), an inline
    initializer's from the model's graph (their table built on the first such question). Not a
    table of every constant: a TorchScript export holds a thousand Constant nodes, and reading
    them all took a sixth of a deployed view; a window candidate asks for two."""
    initializers: dict[str, onnx.TensorProto] | None = None

    def lookup(name: str) -> int | None:
        nonlocal initializers
        if model is None:
            return None
        producer = flow.producer_of(name)
        source: onnx.TensorProto | Node | None
        if producer is not None:
            node = producer.graph_node
            source = node if node is not None and node.op_type == "Constant" else None
        else:
            initializers = inline_initializers(model.graph) if initializers is None else initializers
            source = initializers.get(name)
        value = constant_array(source) if source is not None and is_small(source) else None
        return (
            int(value.reshape(-1)[0]) if value is not None and value.size == 1 and value.dtype.kind in "iuf" else None
        )

    return lookup


def visible_scores(queries: int, keys: int, window: int | None = None) -> int:
    """Scores a causal kernel computes: the S queries are the last S of T positions, query j
    (1-based absolute position) sees keys max(1, j − w + 1)…j, min(j, w) of them; summed over
    j = P + 1 … P + S with P = T − S the past (S·P + S·(S + 1)/2 without a window)."""
    past = max(keys - queries, 0)
    low, high = past + 1, past + min(queries, keys)
    if high < low:
        return 0
    window = high if window is None else max(window, 0)
    below = min(high, window)  # the positions j ≤ w see all j keys
    total = (below - low + 1) * (low + below) // 2 if below >= low else 0
    return total + window * (high - max(below, low - 1))


class _Positions:
    """Which tensors hold positions: computed from a Range (memoized over the dataflow)."""

    def __init__(self, flow: Dataflow):
        self.flow = flow
        self.memo: dict[str, bool] = {}

    def of(self, name: str) -> bool:
        if name not in self.memo:
            producer = self.flow.producer.get(name)
            self.memo[name] = producer is not None and (
                self.flow.node(producer).op_type == "Range"
                or any(self.flow.node(a).op_type == "Range" for a in self.flow.digraph.ancestors(producer))
            )
        return self.memo[name]


def _operands(flow: Dataflow, index: int) -> list[str]:
    return [t.name for t in flow.node(index).inputs[:2] if t is not None]


def _window(flow: Dataflow, index: int, positions: _Positions, constant: ConstantLookup | None) -> int | None:
    """The width a comparison gives a sliding window: a position shifted by a constant compared
    with a position, or a difference of positions compared with a constant; None otherwise."""
    if constant is None:
        return None
    node = flow.node(index)
    operands = _operands(flow, index)
    if len(operands) != 2:
        return None
    inclusive = node.op_type in INCLUSIVE
    shifts = [_shift(flow, name, positions, constant) for name in operands]
    if all(positions.of(name) for name in operands):
        width = next((abs(s) for s in shifts if s), None)
    else:
        differences = [name for name in operands if _is_difference(flow, name, positions)]
        values = [constant(name) for name in operands if name not in differences]
        width = abs(values[0]) if len(differences) == 1 and len(values) == 1 and values[0] else None
    return None if width is None else width + inclusive


def _source(flow: Dataflow, name: str):
    """The node computing `name`'s value, past the ops that only reshape or retype it."""
    while (
        (producer := flow.producer_of(name)) is not None
        and producer.op_type in PASS_THROUGH
        and producer.inputs
        and producer.inputs[0] is not None
    ):
        name = producer.inputs[0].name
    return flow.producer_of(name)


def _shift(flow: Dataflow, name: str, positions: _Positions, constant: ConstantLookup) -> int | None:
    """c where `name` is a position plus or minus the constant c (signed), else None."""
    node = _source(flow, name)
    if (
        node is None
        or node.op_type not in ("Add", "Sub")
        or len(node.inputs) != 2
        or any(t is None for t in node.inputs)
    ):
        return None
    a, b = (t.name for t in node.inputs)
    if positions.of(a) and (value := constant(b)) is not None:
        return value if node.op_type == "Add" else -value
    if node.op_type == "Add" and positions.of(b) and (value := constant(a)) is not None:
        return value
    return None


def _is_difference(flow: Dataflow, name: str, positions: _Positions) -> bool:
    node = _source(flow, name)
    return (
        node is not None
        and node.op_type == "Sub"
        and all(t is not None and positions.of(t.name) for t in node.inputs[:2])
    )
