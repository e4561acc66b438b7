"""ONNX's partial result of a node completed by arithmetic, in the sweep, without inferring the
node again.

Where ONNX's pass could not compute a dim it writes a symbol of its own making: a Reshape to
`[batch, seq, -1, 64]` of a tensor whose seq is symbolic (every transformers export splitting
heads), the Concat of a KV cache with the new step's keys, a broadcast of two symbolic dims. Once
the inputs are known, the dim follows from what the op keeps: a Reshape keeps its input's element
count, a Concat sums its inputs along the axis, a broadcast takes each dim from the inputs. That
costs a division, where the node's inference costs a call into ONNX (a TorchScript GPT-2 decode
step has 145 such nodes)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from onnx_roofline.model.nodes import Node
from onnx_roofline.model.tensors import Dim, KnownTensor, TensorInfo, known

BROADCASTING = frozenset({
    "Add", "Sub", "Mul", "Div", "Pow", "Mod", "Max", "Min", "Sum", "Mean", "Where", "And", "Or", "Xor",
    "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor",
})  # fmt: skip
"""ai.onnx ops whose output is the multidirectional broadcast of their inputs."""


def complete(
    node: Node, inputs: tuple[TensorInfo | None, ...], partial: tuple[Dim, ...] | None
) -> tuple[int, ...] | None:
    """The node's single output shape from its known inputs, where ONNX's pass gave `partial` (the
    symbols learned so far put in); None where the op keeps nothing that tells."""
    tensors = [t for t in inputs if known(t)]
    if node.domain or partial is None or len(tensors) < len(inputs):
        return None
    if node.op_type == "Reshape":
        return _reshape(tensors[0].numel, partial)
    if node.op_type == "Concat":
        return _concat(node, tensors, partial)
    if node.op_type in BROADCASTING:
        try:
            return tuple(np.broadcast_shapes(*[t.shape for t in tensors]))
        except ValueError:
            return None  # ONNX's inference says why
    return None


def _reshape(elements: int, partial: tuple[Dim, ...]) -> tuple[int, ...] | None:
    """One unknown dim is the input's element count over the known dims' product."""
    unknown = [i for i, d in enumerate(partial) if not isinstance(d, int)]
    product = math.prod(d for d in partial if isinstance(d, int))
    if len(unknown) != 1 or product <= 0 or elements % product:
        return None
    return tuple([d if isinstance(d, int) else elements // product for d in partial])


def _concat(node: Node, inputs: Sequence[KnownTensor], partial: tuple[Dim, ...]) -> tuple[int, ...] | None:
    """The inputs' dims, summed along the axis."""
    axis = next((attr.i for attr in node.attributes if attr.name == "axis"), None)
    ranks = {len(t.shape) for t in inputs}
    if axis is None or ranks != {len(partial)} or not -len(partial) <= axis < len(partial):
        return None
    axis %= len(partial)
    if len({t.shape[:axis] + t.shape[axis + 1 :] for t in inputs}) != 1:
        return None  # the other dims disagree: ONNX's inference says why
    shape = list(inputs[0].shape)
    shape[axis] = sum(t.shape[axis] for t in inputs)
    return tuple(shape)
