"""What ONNX's operator schemas say of an op, memoized by op: the passes over every node of a
graph ask it instead of reading each node's attributes (every read of `node.attribute` builds
Python objects; a TorchScript GPT-2 has 2,600 nodes and 26 ops)."""

from __future__ import annotations

import functools

import onnx
import onnx.defs

_BODY_TYPES = (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
_HOLDING_TYPES = (*_BODY_TYPES, onnx.AttributeProto.TENSOR, onnx.AttributeProto.TENSORS, onnx.AttributeProto.SPARSE_TENSOR,
                  onnx.AttributeProto.SPARSE_TENSORS)  # fmt: skip


@functools.cache
def _attribute_types(domain: str, op_type: str, opset: int | None) -> dict[str, int] | None:
    """The attributes the op's schema at the opset declares, by name: validation has refused a
    node with any other. None where it checked none: an op ONNX does not define there (a contrib
    op, a custom domain, onnxruntime's ops registered in the default domain), a deprecated one, an
    opset the model does not import."""
    if opset is None:
        return None
    try:
        schema = onnx.defs.get_schema(op_type, opset, "" if domain == "ai.onnx" else domain)
    except onnx.defs.SchemaError:
        return None
    if schema.deprecated:  # validation holds no node of a deprecated op to its schema
        return None
    return {name: int(attr.type) for name, attr in schema.attributes.items()}  # type: ignore[call-overload]  # onnx's stub: AttrType is an int enum


@functools.cache
def onnx_knows(domain: str, op_type: str, opset: int | None) -> bool:
    """Whether ONNX's inference has a current schema for the op: past a node it has none for (a
    contrib op, a custom domain, a deprecated op), its checked pass drops every error it finds
    (onnx's has_unsupported_op), which a pass in pieces must do alike (pieces.py)."""
    if opset is None:
        return False
    try:
        return not onnx.defs.get_schema(op_type, opset, "" if domain == "ai.onnx" else domain).deprecated
    except onnx.defs.SchemaError:
        return False


@functools.cache
def may_have_bodies(domain: str, op_type: str, opset: int | None) -> bool:
    """Whether a node of this op can carry a graph attribute (If, Loop, Scan; any op ONNX does not
    define). For an op it defines, validation has refused an attribute its schema lacks."""
    declared = _attribute_types(domain, op_type, opset)
    return declared is None or any(kind in _BODY_TYPES for kind in declared.values())


@functools.cache
def may_hold_tensors(domain: str, op_type: str, opset: int | None) -> bool:
    """Whether a node of this op can hold a tensor (Constant's value) or a body, which may hold
    tensors in turn: what a search for external data must read the attributes of."""
    declared = _attribute_types(domain, op_type, opset)
    return declared is None or any(kind in _HOLDING_TYPES for kind in declared.values())


@functools.cache
def may_have_attribute(domain: str, op_type: str, opset: int | None, name: str) -> bool:
    """Whether a node of this op can carry the named attribute (any op ONNX does not define can)."""
    declared = _attribute_types(domain, op_type, opset)
    return declared is None or name in declared


def opsets(model: onnx.ModelProto) -> dict[str, int]:
    """Imported opset version per domain ("" for ai.onnx)."""
    return {("" if imp.domain == "ai.onnx" else imp.domain): imp.version for imp in model.opset_import}


def normalize_domain(domain: str) -> str:
    """The default domain has two spellings: "" and "ai.onnx"."""
    return "" if domain in ("", "ai.onnx") else domain
