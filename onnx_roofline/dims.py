"""Binding symbolic dimensions: `--dim batch=8` sets every input dim named `batch`;
`--input pixel_values=1x3x224x224` sets one input's whole shape."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import onnx

from onnx_roofline.errors import DimensionError

_NAME_VALUE = re.compile(r"^\s*([^=\s][^=]*?)\s*=\s*(.+?)\s*$")


def parse_dim(text: str) -> tuple[str, int]:
    """`batch=8` → ("batch", 8)."""
    match = _NAME_VALUE.match(text)
    if not match or not match.group(2).isdigit() or int(match.group(2)) <= 0:
        raise DimensionError(f"malformed --dim {text!r}: expected NAME=POSITIVE_INT, e.g. batch=8")
    return match.group(1), int(match.group(2))


def parse_input_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """`x=1x3x224x224` → ("x", (1, 3, 224, 224))."""
    match = _NAME_VALUE.match(text)
    parts = match.group(2).lower().split("x") if match else []
    if not match or not all(p.strip().isdigit() for p in parts):
        raise DimensionError(f"malformed --input {text!r}: expected NAME=DxDx..., e.g. pixel_values=1x3x224x224")
    return match.group(1), tuple(int(p) for p in parts)


def symbolic_dims(graph: onnx.GraphProto) -> dict[str, list[str]]:
    """Each symbolic dim name of the graph inputs, with the inputs that use it."""
    uses: dict[str, list[str]] = {}
    initializers = {t.name for t in graph.initializer}
    for value in graph.input:
        if value.name in initializers or not value.type.HasField("tensor_type"):
            continue
        for dim in value.type.tensor_type.shape.dim:
            if dim.HasField("dim_param") and value.name not in uses.setdefault(dim.dim_param, []):
                uses[dim.dim_param].append(value.name)
    return uses


def bind(
    model: onnx.ModelProto, dims: Mapping[str, int], input_shapes: Mapping[str, Sequence[int]] | None = None
) -> onnx.ModelProto:
    """Bind dims in the graph inputs (in place, on the loader's copy). Declared shapes of outputs
    and intermediate values are cleared of symbols so inference recomputes them from the inputs."""
    input_shapes = dict(input_shapes or {})
    graph = model.graph
    known = symbolic_dims(graph)
    unknown_dims = sorted(set(dims) - set(known))
    if unknown_dims:
        listed = ", ".join(sorted(known)) or "none"
        raise DimensionError(f"--dim {unknown_dims[0]!r} is not a dimension of any model input (symbolic dims: {listed})")
    inputs = {value.name: value for value in graph.input}
    for name, shape in input_shapes.items():
        if name not in inputs:
            raise DimensionError(f"--input {name!r} is not a model input (inputs: {', '.join(inputs)})")
        _set_shape(inputs[name], shape)
    for value in graph.input:
        if value.name in input_shapes or not value.type.HasField("tensor_type"):
            continue
        for dim in value.type.tensor_type.shape.dim:
            if dim.HasField("dim_param") and dim.dim_param in dims:
                dim.dim_value = dims[dim.dim_param]
    del graph.value_info[:]
    for value in graph.output:
        for dim in value.type.tensor_type.shape.dim:
            if dim.HasField("dim_param"):
                dim.Clear()
    return model


def _set_shape(value: onnx.ValueInfoProto, shape: Sequence[int]) -> None:
    tensor_type = value.type.tensor_type
    declared = tensor_type.shape.dim
    if tensor_type.HasField("shape") and len(declared) != len(shape):
        raise DimensionError(
            f"--input {value.name}: rank {len(shape)} given, but the model declares rank {len(declared)}"
        )
    for dim, size in zip(declared, shape):
        if dim.HasField("dim_value") and dim.dim_value != size:
            raise DimensionError(f"--input {value.name}: dim {size} given where the model fixes {dim.dim_value}")
    tensor_type.shape.Clear()
    for size in shape:
        tensor_type.shape.dim.add().dim_value = size
