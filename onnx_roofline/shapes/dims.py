"""Binding symbolic dimensions: `--dim batch=8` sets every input dim named `batch`;
`--input pixel_values=1x3x224x224` sets one input's whole shape."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import onnx

from onnx_roofline.errors import DimensionError
from onnx_roofline.model.anonymous_dims import graph_input_dims
from onnx_roofline.model.validation import MAX_TENSOR_BYTES, check_tensor_size

_NAME_VALUE = re.compile(r"^\s*([^=\s][^=]*?)\s*=\s*(.+?)\s*$")
_DIGITS = re.compile(r"[0-9]+", re.ASCII)  # not str.isdigit: it takes "²" and other digits int() refuses


def parse_dim(text: str) -> tuple[str, int]:
    """`batch=8` → ("batch", 8). A size of 0 is an empty axis, as onnxruntime runs one: the
    first step of a KV-cache decoder, whose cache is still empty (`past_sequence=0`)."""
    match = _NAME_VALUE.match(text)
    if not match or not _DIGITS.fullmatch(match.group(2)):
        raise DimensionError(
            f"malformed --dim {_short(text)!r}: expected NAME=SIZE, a whole number (0: an empty axis), e.g. batch=8"
        )
    return match.group(1), _size(match.group(2), f"--dim {_short(text)!r}")


def parse_input_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """`x=1x3x224x224` → ("x", (1, 3, 224, 224))."""
    match = _NAME_VALUE.match(text)
    parts = [p.strip() for p in match.group(2).lower().split("x")] if match else []
    if not match or not all(_DIGITS.fullmatch(p) for p in parts):
        raise DimensionError(
            f"malformed --input {_short(text)!r}: expected NAME=DxDx..., e.g. pixel_values=1x3x224x224"
        )
    return match.group(1), tuple(_size(p, f"--input {_short(text)!r}") for p in parts)


def _short(text: str) -> str:
    return text if len(text) <= 60 else text[:57] + "..."


def _size(digits: str, where: str) -> int:
    """A dim from the command line: at most 2^57, like every dim a model declares (checked on the
    digits first: int() refuses strings of over 4,300 digits with a ValueError of its own)."""
    digits = digits.lstrip("0") or "0"
    if len(digits) > 18 or int(digits) > MAX_TENSOR_BYTES:
        raise DimensionError(
            f"{where}: a dim must be at most 2^57 (no tensor can be larger than the largest address space of any CPU)"
        )
    return int(digits)


def checked_sizes(
    dims: Mapping | None, input_shapes: Mapping | None
) -> tuple[dict[str, int], dict[str, tuple[int, ...]] | None]:
    """The API's `dims` and `input_shapes`, each size a whole number from 0 to 2^57 (a string or a
    float is a DimensionError naming it, not a TypeError deep in the engine)."""

    def size(value, where: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise DimensionError(f"{where}: {value!r} is not a whole number (give an int)")
        if not 0 <= value <= MAX_TENSOR_BYTES:
            raise DimensionError(f"{where}: {value} is out of range (0 to 2^57)")
        return value

    def name(key, what: str) -> str:
        if not isinstance(key, str):
            raise DimensionError(f"{what} keys are names: {key!r} is not a string")
        return key

    checked = {name(k, "dims"): size(v, f"dims[{k!r}]") for k, v in (dims or {}).items()}
    if input_shapes is None:
        return checked, None
    shapes = {}
    for key, shape in input_shapes.items():
        if isinstance(shape, (str, bytes)) or not isinstance(shape, Sequence):
            raise DimensionError(f"input_shapes[{key!r}]: {shape!r} is not a sequence of sizes")
        shapes[name(key, "input_shapes")] = tuple(size(v, f"input_shapes[{key!r}]") for v in shape)
    return checked, shapes


def input_dim_names(graph: onnx.GraphProto) -> dict[tuple[str, int], str]:
    """The symbolic dims of the graph inputs by (input, axis), read before binding replaces them."""
    return {(input_name, axis): dim.dim_param for input_name, axis, dim in graph_input_dims(graph) if dim.dim_param}


def symbolic_dims(graph: onnx.GraphProto, names: Mapping[tuple[str, int], str] | None = None) -> dict[str, list[str]]:
    """Each symbolic dim name of the graph inputs, with the inputs that use it (from `names`, the
    graph's input_dim_names, where the caller has read them)."""
    uses: dict[str, list[str]] = {}
    for (input_name, _), dim in (input_dim_names(graph) if names is None else names).items():
        if input_name not in uses.setdefault(dim, []):
            uses[dim].append(input_name)
    return uses


def bind(
    model: onnx.ModelProto, dims: Mapping[str, int], input_shapes: Mapping[str, Sequence[int]] | None = None
) -> onnx.ModelProto:
    """Bind dims in the graph inputs (in place, on the loader's copy). Declared shapes of outputs
    and intermediate values are cleared of symbols so inference recomputes them from the inputs;
    where inputs were bound, of every dim: an exporter fixes an output's dims at the sizes it traced
    (onnxmltools' `label [1]` whatever the batch), which onnxruntime does not hold a run to."""
    input_shapes = dict(input_shapes or {})
    rebound = bool(dims or input_shapes)
    graph = model.graph
    known = symbolic_dims(graph)
    unknown_dims = sorted(set(dims) - set(known))
    if unknown_dims:
        listed = ", ".join(sorted(known)) or "none"
        what = f"is not a dimension of any model input (symbolic dims: {listed})"
        raise DimensionError(f"dims key {unknown_dims[0]!r} {what}", cli=f"--dim {unknown_dims[0]!r} {what}")
    inputs = {value.name: value for value in graph.input}
    for name, shape in input_shapes.items():
        if name not in inputs:
            what = f"is not a model input (inputs: {', '.join(inputs)})"
            raise DimensionError(f"input_shapes key {name!r} {what}", cli=f"--input {name!r} {what}")
        rank = map_rank(inputs[name].type)
        if rank is None:
            _set_shape(inputs[name], shape)
        elif len(shape) != rank:
            what = f"rank {len(shape)} given for a {_MAP_SHAPES[rank]}"
            raise DimensionError(f"input_shapes[{name!r}]: {what}", cli=f"--input {name}: {what}")
    for value in graph.input:
        if value.name in input_shapes or not value.type.HasField("tensor_type"):
            continue
        for dim in value.type.tensor_type.shape.dim:
            if dim.HasField("dim_param") and dim.dim_param in dims:
                dim.dim_value = dims[dim.dim_param]
    for value in graph.input:
        if value.type.HasField("tensor_type") and value.type.tensor_type.HasField("shape"):
            declared = [d.dim_value if d.HasField("dim_value") else None for d in value.type.tensor_type.shape.dim]
            check_tensor_size(value.name, declared, value.type.tensor_type.elem_type, "", DimensionError)
    del graph.value_info[:]
    for value in graph.output:
        for dim in value.type.tensor_type.shape.dim:
            if rebound or dim.HasField("dim_param"):
                dim.Clear()
    return model


_MAP_SHAPES = {1: "map, whose shape is its entries: [entries]", 2: "sequence of maps: [maps, entries]"}


def map_rank(value_type: onnx.TypeProto) -> int | None:
    """1 for a map type, 2 for a sequence of maps (the report sizes them as [entries] and [maps,
    entries], as TensorInfo does), None for anything else."""
    kind = value_type.WhichOneof("value")
    if kind == "sequence_type":
        return 2 if value_type.sequence_type.elem_type.WhichOneof("value") == "map_type" else None
    return 1 if kind == "map_type" else None


def map_shapes(graph: onnx.GraphProto, input_shapes: Mapping[str, Sequence[int]] | None) -> dict[str, tuple[int, ...]]:
    """The shapes given to map-typed graph inputs: a map's entry count is data that no ONNX type
    holds, so the shape engine puts these in itself (`bind` has checked their rank)."""
    maps = {value.name for value in graph.input if map_rank(value.type) is not None}
    return {name: tuple(shape) for name, shape in (input_shapes or {}).items() if name in maps}


def _set_shape(value: onnx.ValueInfoProto, shape: Sequence[int]) -> None:
    tensor_type = value.type.tensor_type
    declared = tensor_type.shape.dim
    if tensor_type.HasField("shape") and len(declared) != len(shape):
        what = f"rank {len(shape)} given, but the model declares rank {len(declared)}"
        raise DimensionError(f"input_shapes[{value.name!r}]: {what}", cli=f"--input {value.name}: {what}")
    for dim, size in zip(declared, shape, strict=False):
        if dim.HasField("dim_value") and dim.dim_value != size:
            what = f"dim {size} given where the model fixes {dim.dim_value}"
            raise DimensionError(f"input_shapes[{value.name!r}]: {what}", cli=f"--input {value.name}: {what}")
    tensor_type.shape.Clear()
    for size in shape:
        tensor_type.shape.dim.add().dim_value = size
