"""How many elements a NonZero or a Compress selects, where that count is data.

Their output length is the count of true (non-zero) elements of a tensor the graph computes, often
from activations (an MoE router's top-k choices, a mask): no static analysis can know it — unless
the graph itself fixes it (fixed_count: a trace's loop unrolled over the selection, which runs at
that count alone). Asked to (`--nonzero-fraction F`), the shape engine sizes each other such output
as if F of the elements it chooses from were selected, rounded up — a node that keeps any share
keeps at least one element — and the report names the fraction and every node it sized: the
figures downstream are estimates under that assumption. For an MoE layer whose experts each take
the tokens routed to them through a one-hot mask (transformers' eager experts), F = 1/num_experts
is uniform routing: each expert gets tokens · top_k / num_experts of them. Otherwise it is costed
at its bound, every candidate selected, and labelled at most (bounds.selection_bound)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction

import numpy as np

from onnx_roofline.model.nodes import Node
from onnx_roofline.model.tensors import Dim, KnownTensor, TensorInfo, known

SELECTING_OPS = frozenset({"NonZero", "Compress"})
"""The ai.onnx ops whose output length is a count of selected elements."""


def parse_fraction(text: str) -> float:
    """--nonzero-fraction's value: a number in [0, 1], as a decimal (0.125) or a ratio (1/8).
    Raises ValueError saying what is wrong."""
    try:
        value = float(Fraction(text.strip()))
    except (ValueError, ZeroDivisionError):
        raise ValueError(f"malformed fraction {text!r}: expected a number in [0, 1], e.g. 0.125 or 1/8") from None
    check_fraction(value)
    return value


def check_fraction(value: float) -> None:
    if not 0 <= value <= 1:  # NaN too
        raise ValueError(f"the fraction of elements selected must be in [0, 1], not {value!r}")


def candidates(op_type: str, attributes: dict, inputs: Sequence[TensorInfo | None]) -> int | None:
    """How many elements a NonZero (every element of its input) or a Compress (along its axis, or
    of its flattened input: as many as its condition covers) chooses from; None where its inputs
    are not known well enough to say."""
    data = inputs[0] if inputs else None
    if not known(data):
        return None
    if op_type == "NonZero":
        return data.numel
    condition = inputs[1] if len(inputs) > 1 else None
    if not known(condition):
        return None
    axis = attributes.get("axis")
    return min(data.numel if axis is None else data.shape[axis % len(data.shape)], condition.numel)


def selected_shape(op_type: str, attributes: dict, data: KnownTensor, count: int) -> tuple[Dim, ...]:
    """The output shape when `count` elements are selected: NonZero's [rank, count]; Compress's
    input with its axis cut to `count` ([count] without an axis)."""
    if op_type == "NonZero":
        return len(data.shape), count
    axis = attributes.get("axis")
    if axis is None:
        return (count,)
    axis %= len(data.shape)
    return (*data.shape[:axis], count, *data.shape[axis + 1 :])


def assumed_count(candidates: int, fraction: float) -> int:
    """`fraction` of the candidates, rounded up: a share of any size keeps at least one."""
    return min(candidates, math.ceil(candidates * fraction - 1e-9))  # 1/3 of 3 is 1, not 2 from 1.0000000000000002


def count_axis(op_type: str, attributes: dict, data_rank: int) -> tuple[int, int]:
    """(axis, rank) of the selected count in the output: NonZero's [rank, count] axis 1,
    Compress's `axis` (of its flattened 1-D output without one)."""
    if op_type == "NonZero":
        return 1, 2
    axis = attributes.get("axis")
    return (0, 1) if axis is None else (axis % data_rank, data_rank)


def fixed_count(
    output: str,
    axis: int,
    rank: int,
    consumers: Mapping[str, Sequence[Node]],
    value: Callable[[str], np.ndarray | None],
) -> int | None:
    """The count the graph itself fixes, where it does: a Split of the selection (through
    Transposes, Casts, Identities) along its count axis into constant sizes, as a TorchScript trace
    unrolls a loop over the selected elements (an MoE's `for expert in experts_hit`) for the count
    it saw; the graph runs at no other count. None where nothing downstream fixes it."""
    frontier = [(output, axis, rank)]
    while frontier:
        name, axis, rank = frontier.pop()
        for node in consumers.get(name, ()):
            if node.domain or not node.inputs or node.inputs[0] != name or not node.outputs:
                continue
            attributes = {attr.name: attr for attr in node.attributes}
            if node.op_type in ("Cast", "Identity"):
                frontier.append((node.outputs[0], axis, rank))
            elif node.op_type == "Transpose":
                perm = list(attributes["perm"].ints) if "perm" in attributes else list(reversed(range(rank)))
                if sorted(perm) == list(range(rank)):
                    frontier.append((node.outputs[0], perm.index(axis), rank))
            elif node.op_type == "Split" and (attributes["axis"].i if "axis" in attributes else 0) % rank == axis:
                sizes = list(attributes["split"].ints) if "split" in attributes else None
                if sizes is None and len(node.inputs) > 1 and node.inputs[1]:
                    folded = value(node.inputs[1])
                    sizes = None if folded is None else [int(size) for size in folded.reshape(-1)]
                if sizes:
                    return sum(sizes)
    return None
