"""DESIGN.md's byte conventions for the ops whose rules read less than every input or write less
than every output, restated here on the tensors the runtime produced. A rule for one of these ops
is checked against this table, not against its own formula: a Slice rule that read the whole
input, or a view that wrote its output, disagrees.

Each observer returns (bytes_read, bytes_written); None means the framework default (each
distinct input read once, each output written once)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from onnx_roofline.tensors import TensorInfo

Observer = Callable[[Sequence[TensorInfo | None], Sequence[TensorInfo | None]], tuple[int | None, int | None]]


def distinct_bytes(tensors: Sequence[TensorInfo | None], exclude: str | None = None) -> int:
    """Each distinct present tensor once (a tensor fed twice is read once), leaving out `exclude`."""
    return sum({t.name: t.nbytes for t in tensors if t is not None and t.name != exclude}.values())


def _side_inputs(inputs: Sequence[TensorInfo | None]) -> int:
    """Shape-only and index inputs (everything after the data input), tiny but real."""
    data = inputs[0] if inputs else None
    return distinct_bytes(inputs[1:], exclude=None if data is None else data.name)


def view(inputs, outputs):
    """Reshape, Squeeze, Unsqueeze, Flatten, Identity, BitCast: no data moved; the shape-only inputs are read."""
    return _side_inputs(inputs), 0


def metadata(inputs, outputs):
    """Shape, Size: read the input's metadata, none of its data; the small output is written."""
    return 0, None


def partial_read(inputs, outputs):
    """Gather*, Slice: the data input's kept elements (the output's count, at most the whole input),
    plus the index/shape inputs."""
    data, out = inputs[0], outputs[0]
    kept = min(data.nbytes, (out.numel * data.bits + 7) // 8)
    return kept + _side_inputs(inputs), None


def dtype_only_second_input(inputs, outputs):
    """CastLike: `target_type` lends only its dtype; its data is not read."""
    return inputs[0].nbytes, None


def baked_in(inputs, outputs):
    """Constant: the value is part of the program, like a weight; its consumers count the read."""
    return 0, 0


OBSERVERS: dict[str, tuple[str, Observer]] = {
    **{op: ("view", view) for op in ("Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity", "BitCast")},
    **{op: ("metadata", metadata) for op in ("Shape", "Size")},
    **{op: ("partial read", partial_read) for op in ("Gather", "GatherElements", "GatherND", "Slice")},
    "CastLike": ("dtype-only input", dtype_only_second_input),
    "Constant": ("baked in", baked_in),
}
"""op_type (default domain) → (convention name, observer)."""
