"""The shapes pass: every value of the graph gets a TensorInfo.

ONNX shape inference with data propagation runs first (fast, exact). Where it leaves values
unknown, shape-computing subgraphs (Shape → Gather → Range chains) are folded with numpy and
inference runs again; whatever still remains (contrib ops) goes to onnxruntime's symbolic shape
inference, on the graph alone. None of them reads weights. onnxsim is not used: it loads and
runs the weights, taking seconds where these take milliseconds."""

from __future__ import annotations

import functools
import importlib.util
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from onnx_roofline.folding import MAX_FOLDED_ELEMENTS, fold, infer_remaining
from onnx_roofline.tensors import Dim, TensorInfo, dtype_name

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ShapeResult:
    values: dict[str, TensorInfo]
    folded: dict[str, np.ndarray]  # small values computed from shapes and constants
    method: str  # the passes that ran: "onnx", "onnx+fold", "onnx+fold+ort-symbolic"
    unresolved: tuple[str, ...]  # node outputs still not fully known


def infer(model: onnx.ModelProto) -> ShapeResult:
    """Infer every value's shape; each fallback runs only when the passes before left unknowns."""
    inferred = _onnx_inference(model)
    values = collect(inferred.graph)
    unresolved = _unresolved(model.graph, values)
    method, folded = "onnx", {}
    if unresolved:
        constants = _small_constants(model.graph)
        folded = fold(model.graph, values, constants)
        if folded:
            method += "+fold"
            values.update((name, TensorInfo(name, array.shape, _numpy_dtype_name(array))) for name, array in folded.items())
            unresolved = _unresolved(model.graph, values)
        if unresolved and folded:
            _merge(values, _onnx_inference(infer_remaining(model, values, {**constants, **folded}, set(unresolved))))
            unresolved = _unresolved(model.graph, values)
    if unresolved:
        fallback = _ort_symbolic_inference(inferred)
        if fallback is not None:
            method += "+ort-symbolic"
            _merge(values, fallback)
            unresolved = _unresolved(model.graph, values)
    return ShapeResult(values, folded, method, tuple(unresolved))


def _merge(values: dict[str, TensorInfo], model: onnx.ModelProto) -> None:
    """Take a later pass's shapes where they are known, or where nothing was known before."""
    values.update((name, info) for name, info in collect(model.graph).items() if info.is_known or name not in values)


def _small_constants(graph: onnx.GraphProto) -> dict[str, np.ndarray]:
    """Constant values small enough to be shapes, axes or indices (weights are never converted)."""
    return {
        name: constant_array(source)
        for name, source in constant_table(graph).items()
        if isinstance(source, onnx.NodeProto) or np.prod(source.dims) <= MAX_FOLDED_ELEMENTS
    }


def _onnx_inference(model: onnx.ModelProto) -> onnx.ModelProto:
    try:
        return onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    except Exception as exc:  # onnx raises several types (InferenceError, RuntimeError); keep going without
        log.warning("onnx shape inference failed: %s", exc)
        return model


def _ort_symbolic_inference(model: onnx.ModelProto) -> onnx.ModelProto | None:
    try:
        return _symbolic_shape_inference().infer_shapes(model, auto_merge=True, guess_output_rank=False)
    except Exception as exc:  # its failures are many and untyped; the onnx result stands
        log.info("onnxruntime symbolic shape inference failed: %s", exc)
        return None


@functools.lru_cache(maxsize=1)
def _symbolic_shape_inference():
    """onnxruntime's SymbolicShapeInference, loaded from its file: importing it as
    `onnxruntime.tools.symbolic_shape_infer` runs `onnxruntime/tools/__init__.py`, which imports
    torch (seconds) for helpers this pass never uses."""
    import onnxruntime

    path = Path(onnxruntime.__file__).parent / "tools" / "symbolic_shape_infer.py"
    spec = importlib.util.spec_from_file_location("_onnx_roofline_symbolic_shape_infer", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.onnx = _OnnxThatNeverSaves()
    return module.SymbolicShapeInference


class _OnnxThatNeverSaves:
    """The onnx module as SymbolicShapeInference sees it, less `save_model`: when shapes stay
    unknown it would write `sym_shape_infer_temp.onnx` into the user's working directory."""

    def __getattr__(self, name: str):
        return getattr(onnx, name)

    @staticmethod
    def save_model(*args, **kwargs) -> None:
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
    if value.type.WhichOneof("value") != "tensor_type":
        return None
    tensor_type = value.type.tensor_type
    shape: tuple[Dim, ...] | None = None
    if tensor_type.HasField("shape"):
        shape = tuple(_dim(d) for d in tensor_type.shape.dim)
    return TensorInfo(value.name, shape, dtype_name(tensor_type.elem_type))


def _dim(dim: onnx.TensorShapeProto.Dimension) -> Dim:
    kind = dim.WhichOneof("value")
    return dim.dim_value if kind == "dim_value" else (dim.dim_param if kind == "dim_param" else None)


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


def constant_array(source: onnx.TensorProto | onnx.NodeProto | np.ndarray) -> np.ndarray | None:
    if isinstance(source, np.ndarray):
        return source
    if isinstance(source, onnx.NodeProto):
        return constant_value(source)
    return numpy_helper.to_array(source)
