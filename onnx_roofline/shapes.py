"""The shapes pass: every value of the graph gets a TensorInfo.

ONNX shape inference with data propagation runs first (fast, exact); where it leaves values
unknown (shape-computing subgraphs of exporters, contrib ops) onnxruntime's symbolic shape
inference runs on the graph alone. Neither reads weights. onnxsim is not used by default: it
loads and runs the weights, taking seconds where these take milliseconds."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import numpy_helper

from onnx_roofline.tensors import Dim, TensorInfo, dtype_name

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ShapeResult:
    model: onnx.ModelProto  # the model with inferred value_info
    values: dict[str, TensorInfo]
    method: str  # which passes ran: "onnx", "onnx+ort-symbolic"
    unresolved: tuple[str, ...]  # node outputs still not fully known


def infer(model: onnx.ModelProto) -> ShapeResult:
    """Infer every value's shape; the fallback runs only when ONNX's own pass leaves unknowns."""
    inferred = _onnx_inference(model)
    values = collect(inferred.graph)
    unresolved = _unresolved(inferred.graph, values)
    method = "onnx"
    if unresolved:
        fallback = _ort_symbolic_inference(inferred)
        if fallback is not None:
            inferred, method = fallback, "onnx+ort-symbolic"
            values = collect(inferred.graph)
            unresolved = _unresolved(inferred.graph, values)
    return ShapeResult(inferred, values, method, tuple(unresolved))


def _onnx_inference(model: onnx.ModelProto) -> onnx.ModelProto:
    try:
        return onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    except Exception as exc:  # onnx raises several types (InferenceError, RuntimeError); keep going without
        log.warning("onnx shape inference failed: %s", exc)
        return model


def _ort_symbolic_inference(model: onnx.ModelProto) -> onnx.ModelProto | None:
    from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

    try:
        return SymbolicShapeInference.infer_shapes(model, auto_merge=True, guess_output_rank=True)
    except Exception as exc:  # its failures are many and untyped; the onnx result stands
        log.info("onnxruntime symbolic shape inference failed: %s", exc)
        return None


def collect(graph: onnx.GraphProto) -> dict[str, TensorInfo]:
    """TensorInfo for every value the graph declares (inputs, initializers, value_info, outputs)."""
    values: dict[str, TensorInfo] = {}
    for value in [*graph.input, *graph.value_info, *graph.output]:
        info = _from_value_info(value)
        if info is not None and (value.name not in values or _more_known(info, values[value.name])):
            values[value.name] = info
    for tensor in graph.initializer:
        values[tensor.name] = TensorInfo(tensor.name, tuple(int(d) for d in tensor.dims), dtype_name(tensor.data_type))
    for node in graph.node:  # Constant outputs are known without inference
        if node.op_type == "Constant" and node.output and node.output[0] not in values:
            value = constant_value(node)
            if value is not None:
                values[node.output[0]] = TensorInfo(node.output[0], value.shape, _numpy_dtype_name(value))
    return values


def _from_value_info(value: onnx.ValueInfoProto) -> TensorInfo | None:
    if not value.type.HasField("tensor_type"):
        return None
    tensor_type = value.type.tensor_type
    shape: tuple[Dim, ...] | None = None
    if tensor_type.HasField("shape"):
        shape = tuple(
            d.dim_value if d.HasField("dim_value") else (d.dim_param if d.HasField("dim_param") else None)
            for d in tensor_type.shape.dim
        )
    return TensorInfo(value.name, shape, dtype_name(tensor_type.elem_type))


def _more_known(new: TensorInfo, old: TensorInfo) -> bool:
    return len(new.unknown_dims()) < len(old.unknown_dims()) or (old.dtype is None and new.dtype is not None)


def _unresolved(graph: onnx.GraphProto, values: dict[str, TensorInfo]) -> list[str]:
    return [
        name
        for node in graph.node
        for name in node.output
        if name and (name not in values or not values[name].is_known)
    ]


def _numpy_dtype_name(array: np.ndarray) -> str | None:
    return dtype_name(onnx.helper.np_dtype_to_tensor_dtype(array.dtype))


def constant_value(node: onnx.NodeProto) -> np.ndarray | None:
    """The value a Constant node produces (None for sparse or unsupported forms)."""
    for attr in node.attribute:
        if attr.name == "value":
            return numpy_helper.to_array(attr.t)
        if attr.name == "value_float":
            return np.array(attr.f, dtype=np.float32)
        if attr.name == "value_floats":
            return np.array(list(attr.floats), dtype=np.float32)
        if attr.name == "value_int":
            return np.array(attr.i, dtype=np.int64)
        if attr.name == "value_ints":
            return np.array(list(attr.ints), dtype=np.int64)
    return None


def constant_table(graph: onnx.GraphProto) -> dict[str, onnx.TensorProto | onnx.NodeProto]:
    """Where each constant value comes from: an initializer with inline data, or a Constant node."""
    table: dict[str, onnx.TensorProto | onnx.NodeProto] = {
        t.name: t for t in graph.initializer if t.data_location != onnx.TensorProto.EXTERNAL
    }
    table.update((n.output[0], n) for n in graph.node if n.op_type == "Constant" and n.output)
    return table


def constant_array(source: onnx.TensorProto | onnx.NodeProto) -> np.ndarray | None:
    if isinstance(source, onnx.NodeProto):
        return constant_value(source)
    return numpy_helper.to_array(source)
