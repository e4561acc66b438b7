"""Sequences of tensors, element by element: ONNX's inference types a sequence by what its elements
agree on but never tracks its length, so a ConcatFromSequence (or anything sized by a
SequenceLength) after a SplitToSequence stays unknown. These rules follow each element's shape
from the op that builds the sequence to the one that reads it (ai.onnx, opset 11+)."""

from __future__ import annotations

from onnx_roofline.model.op_node import KnownNode
from onnx_roofline.model.tensors import TensorInfo, dtype_name, sequence_of
from onnx_roofline.shapes.rules.registry import Output, shape_function

Elements = list[tuple[int, ...]]


def _sequence(elements: Elements, dtype: str | None) -> TensorInfo:
    return sequence_of("", elements, dtype)  # renamed to the output's name by the registry


def _position(node: KnownNode, slot: int, length: int, default: int, inserting: bool = False) -> int:
    """The `position` input as an index into the elements (negative counts from the end), or
    `default` where the slot is absent. Raises when it is not a folded constant or out of range."""
    if node.input(slot) is None:
        return default
    value = node.input_value(slot)
    if value is None or value.size != 1:
        raise ValueError("position is not a constant")
    position = int(value.reshape(-1)[0])
    position += length + (1 if inserting else 0) if position < 0 else 0
    if not 0 <= position <= (length if inserting else length - 1):
        raise ValueError(f"position {position} outside a sequence of {length}")
    return position


def _elements(node: KnownNode, slot: int = 0) -> Elements:
    sequence = node.input(slot)
    if sequence is None or not sequence.sequence or sequence.elements is None:
        raise ValueError("the input sequence's elements are unknown")
    return list(sequence.elements)


@shape_function("SequenceEmpty", domain="")
def sequence_empty(node: KnownNode) -> list[Output]:
    return [_sequence([], dtype_name(node.attrs.get("dtype") or 1))]  # float by default


@shape_function("SequenceConstruct", domain="")
def sequence_construct(node: KnownNode) -> list[Output]:
    inputs = node.present_inputs
    return [_sequence([t.shape for t in inputs], inputs[0].dtype)]


@shape_function("SequenceInsert", domain="")
def sequence_insert(node: KnownNode) -> list[Output]:
    elements = _elements(node)
    elements.insert(_position(node, 2, len(elements), len(elements), inserting=True), node.operand(1).shape)
    return [_sequence(elements, node.operand(1).dtype)]


@shape_function("SequenceErase", domain="")
def sequence_erase(node: KnownNode) -> list[Output]:
    elements = _elements(node)
    del elements[_position(node, 1, len(elements), len(elements) - 1)]
    return [_sequence(elements, node.operand(0).dtype)]


@shape_function("SequenceAt", domain="")
def sequence_at(node: KnownNode) -> list[Output]:
    elements = _elements(node)
    if len(set(elements)) == 1 and node.input_value(1) is None:  # every element alike: any position gives it
        return [(elements[0], node.operand(0).dtype)]
    return [(elements[_position(node, 1, len(elements), 0)], node.operand(0).dtype)]


@shape_function("SequenceLength", domain="")
def sequence_length(node: KnownNode) -> list[Output]:
    return [((), "int64")]


@shape_function("SplitToSequence", domain="")
def split_to_sequence(node: KnownNode) -> list[Output]:
    """`split` a scalar: pieces of that length, the last one shorter; a 1-D list: those lengths;
    absent: pieces of 1, the axis dropped unless keepdims."""
    data = node.operand(0)
    axis = node.attrs.get("axis", 0) % len(data.shape)
    length = data.shape[axis]
    split = node.input_value(1) if node.input(1) is not None else None
    if node.input(1) is not None and split is None:
        raise ValueError("split is not a constant")
    keep = True
    if split is None:
        sizes, keep = [1] * length, bool(node.attrs.get("keepdims", 1))
    elif split.ndim == 0:
        step = int(split)
        sizes = [min(step, length - start) for start in range(0, length, step)]
    else:
        sizes = [int(size) for size in split]
        if sum(sizes) != length:
            raise ValueError(f"split {sizes} does not add up to the axis' {length}")
    pieces = [(*data.shape[:axis], *((size,) if keep else ()), *data.shape[axis + 1 :]) for size in sizes]
    return [_sequence(pieces, data.dtype)]


@shape_function("ConcatFromSequence", domain="")
def concat_from_sequence(node: KnownNode) -> list[Output]:
    """Every element joined along `axis`, or stacked on a new axis there (new_axis=1)."""
    elements = _elements(node)
    if not elements:
        raise ValueError("ConcatFromSequence of an empty sequence")
    rank = len(elements[0])
    stacked = bool(node.attrs.get("new_axis", 0))
    axis = node.attrs["axis"] % (rank + 1 if stacked else rank)
    if stacked:
        return [((*elements[0][:axis], len(elements), *elements[0][axis:]), node.operand(0).dtype)]
    joined = sum(shape[axis] for shape in elements)
    return [((*elements[0][:axis], joined, *elements[0][axis + 1 :]), node.operand(0).dtype)]
