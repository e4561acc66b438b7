"""ONNX post-passes on an exported ModelProto, and the weight-stripped save.

Kept separate from the torch side so each pass can be tested on a tiny ``onnx.helper`` graph.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
from onnx import external_data_helper, helper, numpy_helper

NAME_SCOPES = "pkg.torch.onnx.name_scopes"
STACK_TRACE = "pkg.torch.onnx.stack_trace"
SIZE_THRESHOLD = 1024  # bytes: larger initializers go to the external-data file

Dim = int | str


def set_io_shapes(model: onnx.ModelProto, shapes: dict[str, list[Dim]]) -> dict[str, Dim]:
    """Give graph inputs/outputs the declared shapes; rewrite the exporter's symbols everywhere.

    The exporters name symbolic dims their own way (dynamo: ``s0``/``s1`` unless ``Dim`` names
    reach it; TorchScript: ``MatMullogits_dim_1`` for a dim it could not infer).  Each symbol
    found on a declared input/output is mapped to the declared name (or int), and the mapping
    is applied to every ``value_info`` too, inside expressions such as ``s0 + 1``, so the graph
    stays consistent.  A declared symbol where the exporter fixed an int, or two different
    ints, raises ``ValueError``: the export did not give the signature we asked for.
    Returns the mapping applied.
    """
    mapping: dict[str, Dim] = {}
    ios = {v.name: v for v in list(model.graph.input) + list(model.graph.output)}
    for name, want in shapes.items():
        if name not in ios:
            raise ValueError(f"graph has no input/output {name!r}")
        dims = ios[name].type.tensor_type.shape.dim
        if len(dims) != len(want):
            raise ValueError(f"{name}: rank {len(dims)}, expected {len(want)}")
        for d, w in zip(dims, want, strict=False):
            if d.HasField("dim_param"):
                if d.dim_param != str(w):
                    mapping[d.dim_param] = w
            elif d.HasField("dim_value") and d.dim_value != w:
                raise ValueError(f"{name}: exporter fixed a dim to {d.dim_value}, expected {w!r}")
            elif not d.HasField("dim_value"):
                _set_dim(d, w)
    if mapping:
        pattern = re.compile(r"\b(" + "|".join(map(re.escape, mapping)) + r")\b")
        values = list(model.graph.input) + list(model.graph.output) + list(model.graph.value_info)
        for v in values:
            for d in v.type.tensor_type.shape.dim:
                if not d.HasField("dim_param"):
                    continue
                if d.dim_param in mapping:
                    _set_dim(d, mapping[d.dim_param])
                else:
                    d.dim_param = pattern.sub(lambda m: str(mapping[m.group(1)]), d.dim_param)
    return mapping


def _set_dim(d: onnx.TensorShapeProto.Dimension, value: Dim) -> None:
    if isinstance(value, int):
        d.dim_value = value
    else:
        d.dim_param = value


def name_nodes_by_module(model: onnx.ModelProto) -> None:
    """Rename dynamo nodes ``/<module>/<path>/<OpType>[_k]`` from their ``name_scopes`` metadata.

    Dynamo names nodes ``node_Conv_754``; TorchScript names them ``/layer2/layer2.0/conv2/Conv``.
    Giving dynamo nodes the same scheme lets a reader (and a grep) find e.g. ResNet's conv3_x
    3x3 convs as ``/layer2/.../conv2/Conv`` in either export.  The metadata itself is untouched.
    A Conv is named after its weight's module: the optimizer folds BatchNorm into the Conv and
    the fused node inherits the BatchNorm's scope (``bn2``), while the weight keeps ``conv2``.
    Nodes the optimizer created without scopes (GPT-2's Split of the fused QKV) take the path of
    their first input's producer; graph-input consumers without scopes keep their names.
    """
    inits = {i.name for i in model.graph.initializer}
    used: Counter[str] = Counter()
    path_of: dict[str, str] = {}  # tensor name -> module path of the node producing it
    for node in model.graph.node:
        scopes = _scopes(node)
        if scopes is not None:
            path = _module_path(node, scopes, inits)
        elif node.input and node.input[0] in path_of:
            path = path_of[node.input[0]]
        else:
            continue
        base = path + node.op_type
        node.name = base if not used[base] else f"{base}_{used[base]}"
        used[base] += 1
        path_of.update(dict.fromkeys(node.output, path))


def _module_path(node: onnx.NodeProto, scopes: list[str], inits: set[str]) -> str:
    """``['', 'layer2', 'layer2.0', 'layer2.0.bn2', 'fx_name']`` -> ``/layer2/layer2.0/bn2/``."""
    modules = [s for s in scopes[1:-1] if s]  # first is the root (''), last the fx node
    if node.op_type == "Conv" and len(node.input) > 1 and node.input[1] in inits and modules:
        weight_module = node.input[1].removesuffix(".weight")
        parent = modules[-2] if len(modules) > 1 else ""
        if weight_module != node.input[1] and (not parent or weight_module.startswith(parent + ".")):
            modules[-1] = weight_module
    return "/" + "".join(seg + "/" for seg in _segments(modules))


def _scopes(node: onnx.NodeProto) -> list[str] | None:
    for p in node.metadata_props:
        if p.key == NAME_SCOPES:
            return ast.literal_eval(p.value)
    return None


def _segments(modules: list[str]) -> list[str]:
    """Qualified names -> TorchScript-style path parts: ``layer2``, ``layer2.0``, ``conv2``."""
    out, parent = [], ""
    for q in modules:
        rel = q[len(parent) + 1 :] if parent and q.startswith(parent + ".") else q
        if rel.isdigit() and parent:  # a child of a Sequential: "layer2" + "0" -> "layer2.0"
            rel = f"{parent.rsplit('.', 1)[-1]}.{rel}"
        out.append(rel)
        parent = q
    return out


def relativize_stack_traces(model: onnx.ModelProto, roots: list[str]) -> None:
    """Cut machine-specific prefixes (the checkout, site-packages) from dynamo stack traces.

    The traces stay useful in Netron, and the committed fixture no longer depends on where
    it was exported.
    """
    for node in model.graph.node:
        for p in node.metadata_props:
            if p.key == STACK_TRACE:
                for root in roots:
                    p.value = p.value.replace(root, "")


def save_stripped(model: onnx.ModelProto, path: str | Path) -> Path:
    """Save ``model`` to ``path`` with every initializer over 1 KiB in ``<file>.data`` beside it.

    The graph file keeps every initializer's name, dtype and shape, and the small ones (shape
    constants, scalars) inline, so shape inference and data propagation work without the data
    file; the data file is what ``.gitignore`` keeps out of the repository.  The tensors are
    marked here rather than with ``onnx.save(size_threshold=1024)``, which measures
    ``sys.getsizeof(raw_data)`` (payload + ~33 B) and skips tensors held in typed fields: the
    rule stays exactly "payload > 1024 bytes".  The data file is removed first because
    ``onnx.save`` appends to an existing one.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = path.with_name(path.name + ".data")
    data.unlink(missing_ok=True)
    for tensor in model.graph.initializer:
        if tensor.data_type == onnx.TensorProto.STRING or _nbytes(tensor) <= SIZE_THRESHOLD:
            continue
        if not tensor.HasField("raw_data"):  # float_data/int32_data/...: move to raw_data
            tensor.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(tensor), tensor.name))
        external_data_helper.set_external_data(tensor, data.name)
    onnx.save(model, path)  # writes the raw_data of tensors marked external to data.name
    return path


def _nbytes(tensor: onnx.TensorProto) -> int:
    count = 1
    for d in tensor.dims:
        count *= d
    return count * np.dtype(helper.tensor_dtype_to_np_dtype(tensor.data_type)).itemsize
