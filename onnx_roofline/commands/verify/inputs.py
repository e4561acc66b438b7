"""Random feeds for the graph inputs at the bound dims: the runtime must see the shapes the
analysis assumed, and token ids must be valid rows of the embedding table they index."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import onnx
from onnx import helper

from onnx_roofline.commands.verify.errors import VerifyError
from onnx_roofline.commands.verify.run import FED_AS_BITS
from onnx_roofline.commands.verify.texts import texts, vocabulary
from onnx_roofline.model.tensors import dtype_name
from onnx_roofline.shapes.dims import bind

SMALL_INT_RANGE = 2  # integer inputs with no table to index: 0/1 is valid as ids, positions, flags
_VIEWS = {"Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity", "Cast"}


def bound_inputs(
    model: onnx.ModelProto, dims: Mapping[str, int], input_shapes: Mapping[str, Sequence[int]] | None = None
) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """Shape and numpy dtype of every graph input that is not an initializer, after binding."""
    bound = onnx.ModelProto()
    bound.CopyFrom(model)
    bind(bound, dims, input_shapes)
    initializers = {t.name for t in bound.graph.initializer}
    result = {}
    for value in bound.graph.input:
        if value.name in initializers:
            continue
        if not value.type.HasField("tensor_type"):
            raise VerifyError(f"input {value.name!r} is not a tensor; verify feeds tensors only")
        tensor_type = value.type.tensor_type
        shape = []
        for dim in tensor_type.shape.dim:
            if not dim.HasField("dim_value"):
                what = dim.dim_param or "an unnamed dim"
                raise VerifyError(
                    f"input {value.name!r}: {what} is unbound; verify needs every dim (--dim NAME=N or --input)"
                )
            shape.append(dim.dim_value)
        result[value.name] = (tuple(shape), helper.tensor_dtype_to_np_dtype(tensor_type.elem_type))
    return result


def index_ranges(graph: onnx.GraphProto) -> dict[str, int]:
    """For each graph input that (through views and casts) indexes a Gather's initializer table,
    the table's size along the gathered axis: token ids must stay below the vocabulary size."""
    tables = {t.name: tuple(t.dims) for t in graph.initializer}
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    ranges: dict[str, int] = {}
    for value in graph.input:
        frontier, seen = [value.name], set()
        while frontier:
            name = frontier.pop()
            seen.add(name)
            for node in consumers.get(name, []):
                if node.op_type in _VIEWS and node.input[0] == name:
                    frontier.extend(o for o in node.output if o not in seen)
                elif (
                    node.op_type == "Gather"
                    and len(node.input) > 1
                    and node.input[1] == name
                    and node.input[0] in tables
                ):
                    axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
                    size = tables[node.input[0]][axis]
                    ranges[value.name] = min(size, ranges.get(value.name, size))
    return ranges


def make_feeds(
    model: onnx.ModelProto,
    dims: Mapping[str, int],
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    seed: int = 0,
) -> dict[str, np.ndarray]:
    """Deterministic feeds: token ids uniform in [0, vocab), other integers in [0, 2), masks all
    ones (a fully masked row is a NaN, not a shape problem, but it hides nothing either way),
    floats standard normal (KV-cache inputs get the bound past length from their dims), strings
    texts of words (texts.py)."""
    rng = np.random.default_rng(seed)
    ranges = index_ranges(model.graph)
    words = vocabulary(model.graph)
    feeds = {}
    for name, (shape, dtype) in bound_inputs(model, dims, input_shapes).items():
        if dtype.type.__module__ == "ml_dtypes" and dtype_name(helper.np_dtype_to_tensor_dtype(dtype)) in FED_AS_BITS:
            feeds[name] = (
                rng.standard_normal(size=shape).astype(np.float32).astype(dtype)
            )  # bfloat16, float8: fed as bits (run.runtime_feeds)
        elif "mask" in name.lower() and (
            dtype == np.bool_ or np.issubdtype(dtype, np.integer) or np.issubdtype(dtype, np.floating)
        ):
            feeds[name] = np.ones(shape, dtype=dtype)
        elif dtype == np.bool_:
            feeds[name] = rng.integers(0, 2, size=shape).astype(np.bool_)
        elif np.issubdtype(dtype, np.integer):
            feeds[name] = rng.integers(0, ranges.get(name, SMALL_INT_RANGE), size=shape).astype(dtype)
        elif np.issubdtype(dtype, np.floating):
            feeds[name] = rng.standard_normal(size=shape).astype(dtype)
        elif dtype == np.object_:  # numpy holds ONNX strings as objects
            feeds[name] = texts(shape, rng, words)
        else:
            raise VerifyError(f"input {name!r} has dtype {dtype}, which verify cannot synthesize")
    return feeds
