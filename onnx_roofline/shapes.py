"""The shapes pass: every value of the graph gets a TensorInfo.

ONNX shape inference with data propagation runs first (fast, exact). Where it leaves values
unknown, shape-computing subgraphs (Shape → Gather → Range chains) are folded with numpy and
inference runs again on just the nodes still unknown; whatever remains goes to onnxruntime's
symbolic shape inference, on the graph alone, and last to our own output-shape functions for the
contrib ops neither knows (contrib_shapes.py). None of them reads weights. onnxsim is not used:
it loads and runs the weights, taking seconds where these take milliseconds."""

from __future__ import annotations

import functools
import importlib.util
import logging
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from onnx_roofline import contrib_shapes
from onnx_roofline.folding import MAX_FOLDED_ELEMENTS, fold, infer_remaining
from onnx_roofline.nodes import Node, read_nodes
from onnx_roofline.tensors import Dim, TensorInfo, dtype_name

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ShapeResult:
    values: dict[str, TensorInfo]
    folded: dict[str, np.ndarray]  # small values computed from shapes and constants
    method: str  # the passes that ran: "onnx", then "+fold", "+ort-symbolic", "+contrib" as needed
    unresolved: tuple[str, ...]  # node outputs still not fully known


def infer(model: onnx.ModelProto, nodes: list[Node] | None = None) -> ShapeResult:
    """Infer every value's shape; each fallback runs only when the passes before left unknowns.
    `nodes`: the graph's nodes, where the caller has read them already."""
    nodes = read_nodes(model.graph) if nodes is None else nodes
    inferred = _onnx_inference(_without_metadata(model, nodes))
    values = collect(inferred.graph, nodes)
    unresolved = _unresolved(model.graph, values, nodes)
    method, folded, constants = "onnx", {}, {}
    if unresolved:
        constants = _small_constants(model.graph, nodes)
        folded = fold(model.graph, values, constants, nodes)
        if folded:
            method += "+fold"
            values.update((name, TensorInfo(name, array.shape, _numpy_dtype_name(array))) for name, array in folded.items())
            unresolved = _unresolved(model.graph, values, nodes)
        if unresolved and folded:
            _merge(values, _onnx_inference(infer_remaining(model, values, {**constants, **folded}, set(unresolved), nodes)))
            unresolved = _unresolved(model.graph, values, nodes)
    if unresolved:
        fallback = _ort_symbolic_inference(inferred)
        if fallback is not None:
            method += "+ort-symbolic"
            _merge(values, fallback)
            unresolved = _unresolved(model.graph, values, nodes)
    if unresolved and _contrib_shapes(model, values, {**constants, **folded}, nodes):
        method += "+contrib"
        unresolved = _unresolved(model.graph, values, nodes)
    return ShapeResult(values, folded, method, tuple(unresolved))


def _contrib_shapes(
    model: onnx.ModelProto, values: dict[str, TensorInfo], constants: dict[str, np.ndarray], nodes: list[Node]
) -> bool:
    """Contrib ops no inference types (contrib_shapes.py) get their outputs from their inputs;
    then the nodes downstream of them are inferred (ONNX, then onnxruntime's symbolic inference)
    on a scratch model of what is still unknown. Repeated while a round types something new: each
    round types at least one more output, so it ends. Returns whether anything was typed."""
    typed = False
    while computed := contrib_shapes.infer_outputs(model.graph, values, constants.get):
        typed = True
        values.update(computed)
        pending = set(_unresolved(model.graph, values, nodes))
        if pending:
            scratch = infer_remaining(model, values, constants, pending, nodes)
            _merge(values, _onnx_inference(scratch))
            fallback = _ort_symbolic_inference(scratch) if _unresolved(scratch.graph, values) else None
            if fallback is not None:
                _merge(values, fallback)
    return typed


def _merge(values: dict[str, TensorInfo], model: onnx.ModelProto) -> None:
    """Take a later pass's shapes where they are known, or where nothing was known before."""
    values.update((name, info) for name, info in collect(model.graph).items() if info.is_known or name not in values)


def _small_constants(graph: onnx.GraphProto, nodes: list[Node] | None = None) -> dict[str, np.ndarray]:
    """Constant values small enough to be shapes, axes or indices (weights are never converted)."""
    return {
        name: constant_array(source)
        for name, source in constant_table(graph, nodes).items()
        if isinstance(source, onnx.NodeProto) or math.prod(source.dims) <= MAX_FOLDED_ELEMENTS
    }


def _without_metadata(model: onnx.ModelProto, nodes: list[Node]) -> onnx.ModelProto:
    """The model as shape inference needs it. Dynamo exports carry metadata_props on every node
    (stack traces, most of the file), which inference would serialize, parse and return for
    nothing: a copy without them halves its time. The first node tells whether they are there."""
    if not nodes or not nodes[0].proto.metadata_props:
        return model
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for node in copy.graph.node:
        node.ClearField("metadata_props")
    return copy


def _onnx_inference(model: onnx.ModelProto) -> onnx.ModelProto:
    try:
        return onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    except Exception as exc:  # onnx raises several types (InferenceError, RuntimeError); keep going without
        log.warning("onnx shape inference failed: %s", exc)
        return model


# Ops whose onnxruntime rule gives a wrong shape; contrib_shapes.py types them instead.
_ORT_WRONG = ("GatherBlockQuantized",)  # read as a plain Gather: uint8 data's packed 4-bit dim comes out halved


def _ort_symbolic_inference(model: onnx.ModelProto) -> onnx.ModelProto | None:
    """onnxruntime's symbolic inference, run as its `infer_shapes` runs it, except that a node it
    cannot infer (it stops there) does not discard what it inferred before that node."""
    try:
        if max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=0) < 7:
            return None  # its infer_shapes refuses these too
        inference = _symbolic_shape_inference()(2**31 - 1, True, False, 0)  # int_max, auto_merge, guess_output_rank, verbose
        for op_type in _ORT_WRONG:
            inference.dispatcher_.pop(op_type, None)
        inference._preprocess(model)
        while inference.run_:
            inference._infer_impl()
        inference._update_output_from_vi()
        return inference.out_mp_
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


_TensorType = tuple[tuple[Dim, ...] | None, str | None]  # (shape, dtype)


def collect(graph: onnx.GraphProto, nodes: list[Node] | None = None) -> dict[str, TensorInfo]:
    """TensorInfo for every value the graph declares (inputs, initializers, value_info, outputs).
    `nodes`: the graph's nodes, where the caller has read them already."""
    values: dict[str, TensorInfo] = {}
    # A graph's values share few distinct types (every [batch, sequence, 768] activation has the
    # same one): each is read field by field once, keyed by its serialized bytes, which cost a
    # fraction of the field reads (each builds a Python object).
    types: dict[bytes, _TensorType | None] = {}
    for value in [*graph.input, *graph.value_info, *graph.output]:
        value_type = value.type
        key = value_type.SerializeToString()
        if key not in types:
            types[key] = _read_type(value_type)
        if types[key] is None:
            continue
        info = TensorInfo(value.name, *types[key])
        if info.name not in values or _more_known(info, values[info.name]):
            values[info.name] = info
    for tensor in graph.initializer:
        values[tensor.name] = TensorInfo(tensor.name, tuple(tensor.dims), dtype_name(tensor.data_type))
    for node in read_nodes(graph) if nodes is None else nodes:  # Constant outputs are known without inference
        if node.op_type == "Constant" and node.outputs and node.outputs[0] not in values:
            value = constant_value(node.proto)
            if value is not None:
                values[node.outputs[0]] = TensorInfo(node.outputs[0], value.shape, _numpy_dtype_name(value))
    return values


def _read_type(value_type: onnx.TypeProto) -> _TensorType | None:
    """A tensor type's (shape, dtype); None for sequences, maps and optionals."""
    if value_type.WhichOneof("value") != "tensor_type":
        return None
    tensor_type = value_type.tensor_type
    shape: tuple[Dim, ...] | None = None
    if tensor_type.HasField("shape"):
        # A slice reads a repeated field faster than iterating it; a non-zero dim_value is set.
        shape = tuple([d.dim_value or _dim(d) for d in tensor_type.shape.dim[:]])
    return shape, dtype_name(tensor_type.elem_type)


def _dim(dim: onnx.TensorShapeProto.Dimension) -> Dim:
    """A dim whose dim_value reads 0: a 0, a symbol, or unknown."""
    kind = dim.WhichOneof("value")
    return 0 if kind == "dim_value" else (dim.dim_param if kind == "dim_param" else None)


def _more_known(new: TensorInfo, old: TensorInfo) -> bool:
    return len(new.unknown_dims()) < len(old.unknown_dims()) or (old.dtype is None and new.dtype is not None)


def _unresolved(graph: onnx.GraphProto, values: dict[str, TensorInfo], nodes: list[Node] | None = None) -> list[str]:
    """Node outputs whose shape or dtype is not fully known, in graph order."""
    return [
        name
        for node in (read_nodes(graph) if nodes is None else nodes)
        for name in node.outputs
        if name and (name not in values or not values[name].is_known)
    ]


def _numpy_dtype_name(array: np.ndarray) -> str | None:
    return dtype_name(onnx.helper.np_dtype_to_tensor_dtype(array.dtype))


# Element types whose inline raw_data numpy reads as is (little-endian, as ONNX stores it).
_RAW_DTYPES = {
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


def tensor_array(tensor: onnx.TensorProto) -> np.ndarray:
    """`numpy_helper.to_array`, with a fast path for inline raw data of a plain numeric type (the
    common case, at half the cost: a TorchScript export has a thousand Constant nodes)."""
    dtype = _RAW_DTYPES.get(tensor.data_type)
    if dtype is not None and tensor.raw_data and tensor.data_location != onnx.TensorProto.EXTERNAL:
        return np.frombuffer(tensor.raw_data, dtype).reshape(tuple(tensor.dims))
    return numpy_helper.to_array(tensor)


def constant_value(node: onnx.NodeProto) -> np.ndarray | None:
    """The value a Constant node produces (None for sparse or unsupported forms)."""
    for attr in node.attribute:
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


def constant_table(graph: onnx.GraphProto, nodes: list[Node] | None = None) -> dict[str, onnx.TensorProto | onnx.NodeProto]:
    """Where each constant value comes from: an initializer with inline data, or a Constant node.
    `nodes`: the graph's nodes, where the caller has read them already."""
    table: dict[str, onnx.TensorProto | onnx.NodeProto] = {
        t.name: t for t in graph.initializer if t.data_location != onnx.TensorProto.EXTERNAL
    }
    nodes = read_nodes(graph) if nodes is None else nodes
    table.update((n.outputs[0], n.proto) for n in nodes if n.op_type == "Constant" and n.outputs)
    return table


def constant_array(source: onnx.TensorProto | onnx.NodeProto | np.ndarray) -> np.ndarray | None:
    if isinstance(source, np.ndarray):
        return source
    if isinstance(source, onnx.NodeProto):
        return constant_value(source)
    return tensor_array(source)
