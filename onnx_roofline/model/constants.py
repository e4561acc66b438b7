"""Constant values of a graph (initializers with inline data, Constant nodes), read into numpy
only when asked for: weights stay unread, and of a TorchScript export's thousand Constant nodes
only those a fold or a rule needs are converted."""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import onnx
from onnx import helper, numpy_helper

from onnx_roofline.model.nodes import Node, read_nodes
from onnx_roofline.model.tensors import DTYPE_BITS, dtype_name

MAX_FOLDED_ELEMENTS = 4096  # shape values are small; anything larger is data, not a shape

ConstantSource = onnx.TensorProto | Node | np.ndarray  # an initializer, a Constant node, a value folded


# Element types whose inline raw_data numpy reads as is (little-endian, as ONNX stores it).
RAW_DTYPES: dict[int, np.dtype] = {
    code: np.dtype(name).newbyteorder("<")
    for code, name in {
        onnx.TensorProto.FLOAT: "float32",
        onnx.TensorProto.DOUBLE: "float64",
        onnx.TensorProto.FLOAT16: "float16",
        onnx.TensorProto.INT64: "int64",
        onnx.TensorProto.INT32: "int32",
        onnx.TensorProto.INT16: "int16",
        onnx.TensorProto.INT8: "int8",
        onnx.TensorProto.UINT8: "uint8",
        onnx.TensorProto.BOOL: "bool",
    }.items()
}


def tensor_array(tensor: onnx.TensorProto) -> np.ndarray | None:
    """The tensor's value; None where its bytes cannot be that value (`readable`). Inline raw data
    of a plain numeric type takes a fast path (a TorchScript export has a thousand Constant nodes)."""
    if not readable(tensor):
        return None
    dtype = RAW_DTYPES.get(tensor.data_type)
    if dtype is not None and tensor.raw_data:
        return np.frombuffer(tensor.raw_data, dtype).reshape(tuple(tensor.dims))
    return numpy_helper.to_array(tensor)


def readable(tensor: onnx.TensorProto) -> bool:
    """Whether the tensor holds, inline, the value its dims and type declare. Not where it is
    external (never read here), of an element type ONNX does not define (0, 255), or where what it
    stores disagrees with its dims (a truncated `raw_data`, `string_data` on a number). A
    stranger's file may hold any of these: the value is then unknown, as a weight's is.
    Raw data is counted in bytes (sub-byte types packed); a typed field in entries (a complex
    number takes two, sub-byte values pack into bytes of one entry each)."""
    name = dtype_name(tensor.data_type)
    if name is None or tensor.data_location == onnx.TensorProto.EXTERNAL:
        return False
    count, bits = math.prod(tensor.dims), DTYPE_BITS[name]
    if tensor.raw_data:
        return name != "string" and len(tensor.raw_data) == (count * bits + 7) // 8
    entries = len(getattr(tensor, helper.tensor_dtype_to_field(tensor.data_type)))
    if name == "string" or bits >= 8:
        return entries == (2 * count if name.startswith("complex") else count)
    return entries == (count * bits + 7) // 8


def constant_value(attributes: Iterable[onnx.AttributeProto]) -> np.ndarray | None:
    """The value a Constant node of these attributes produces (None for sparse or unsupported forms)."""
    for attr in attributes:
        if attr.name == "value":
            return tensor_array(attr.t)
        if attr.name == "value_float":
            return np.array(attr.f, dtype=np.float32)
        if attr.name == "value_floats":
            return np.array(list(attr.floats), dtype=np.float32)
        if attr.name == "value_int":
            return np.array(attr.i, dtype=np.int64)
        if attr.name == "value_ints":
            return np.array(list(attr.ints), dtype=np.int64)
    return None


def constant_table(graph: onnx.GraphProto, nodes: list[Node] | None = None) -> dict[str, onnx.TensorProto | Node]:
    """Where each constant value comes from: an initializer with inline data, or a Constant node.
    `nodes`: the graph's nodes, where the caller has read them already."""
    table: dict[str, onnx.TensorProto | Node] = dict(inline_initializers(graph))
    nodes = read_nodes(graph) if nodes is None else nodes
    table.update((n.outputs[0], n) for n in nodes if n.op_type == "Constant" and n.outputs)
    return table


def inline_initializers(graph: onnx.GraphProto) -> dict[str, onnx.TensorProto]:
    """The graph's initializers whose data is in the file, by name (never an external one's)."""
    return {t.name: t for t in graph.initializer if t.data_location != onnx.TensorProto.EXTERNAL}


def constant_array(source: ConstantSource) -> np.ndarray | None:
    if isinstance(source, np.ndarray):
        return source
    if isinstance(source, Node):
        return constant_value(source.attributes)
    return tensor_array(source)


def small_constant_table(graph: onnx.GraphProto, nodes: list[Node] | None = None) -> dict[str, ConstantSource]:
    """The constants small enough to be shapes, axes or indices (weights are never converted)."""
    return {name: source for name, source in constant_table(graph, nodes).items() if is_small(source)}


def is_small(source: onnx.TensorProto | Node) -> bool:
    """Whether a constant is small enough to be a shape, an axis or an index: a Constant node's
    value always is read; an initializer up to MAX_FOLDED_ELEMENTS (a weight is never converted)."""
    return isinstance(source, Node) or math.prod(source.dims) <= MAX_FOLDED_ELEMENTS
