"""Graph-input dims that have neither a size nor a name, named when the model is read, so that
every later stage binds, defaults and reports them like any symbolic dim; and the negative sizes
converters write for a dynamic dim, made dynamic first."""

from __future__ import annotations

from collections.abc import Iterator

import onnx

UNNAMED = frozenset({"", "?"})
"""dim_params that name nothing: an empty one, and `?`, which converters and printers write for an
unknown size (`x [?, 3, ?, ?]`: by ONNX's letter one symbol, batch = height = width, which no
model means)."""


def name_unnamed_dims(graph: onnx.GraphProto) -> None:
    """Name each graph-input dim that has neither a size nor a name (skl2onnx's and tf2onnx's
    batch: `X [?, 6]`; an empty dim_param, or `?`) `<input>_dim<axis>` (`X_dim0`), in place on the loader's copy: it then binds
    (`--dim X_dim0=8`), takes its default and is named where it blocks a cost like any symbolic
    dim, where an unnamed one left every node downstream unknown with nothing to bind it by. A
    name some declared type already uses gets a `_` more: a symbol means one size throughout."""
    unnamed = [
        (input_name, axis, dim)
        for input_name, axis, dim in graph_input_dims(graph)
        if dim.dim_param in UNNAMED and dim.WhichOneof("value") != "dim_value"
    ]  # unset, a dim_param of "" (skl2onnx's text inputs) or "?"
    if not unnamed:
        return
    taken = {
        dim.dim_param
        for value in (*graph.input, *graph.output, *graph.value_info)
        if value.type.WhichOneof("value") == "tensor_type"
        for dim in value.type.tensor_type.shape.dim
        if dim.dim_param and dim.dim_param not in UNNAMED
    }
    for input_name, axis, dim in unnamed:
        name = f"{input_name}_dim{axis}"
        while name in taken:
            name += "_"
        taken.add(name)
        dim.dim_param = name


def dynamic_negative_dims(value: onnx.ValueInfoProto) -> None:
    """A graph input's or output's negative dim_value made a dim with no size (in place, on the
    loader's copy): paddle2onnx (and other converters) write `dim_value: -1` for a dynamic dim,
    which ONNX's checker accepts and onnxruntime runs at any size. A main-graph input's is then
    named `<input>_dim<axis>` by name_unnamed_dims, as an anonymous one is. Only graph inputs and
    outputs: a negative dim anywhere else (an initializer) stays invalid."""
    for dim in value.type.tensor_type.shape.dim:
        if dim.WhichOneof("value") == "dim_value" and dim.dim_value < 0:
            dim.ClearField("dim_value")


def graph_input_dims(graph: onnx.GraphProto) -> Iterator[tuple[str, int, onnx.TensorShapeProto.Dimension]]:
    """(input, axis, dim) of each dim the graph's tensor inputs declare, initializers aside."""
    initializers = {t.name for t in graph.initializer}
    for value in graph.input:
        if value.name not in initializers and value.type.WhichOneof("value") == "tensor_type":
            for axis, dim in enumerate(value.type.tensor_type.shape.dim):
                yield value.name, axis, dim
