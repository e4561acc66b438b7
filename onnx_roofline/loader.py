"""Read an ONNX graph without its weights: external data is never loaded, so a model whose
data file is absent (or is over 2 GB) analyzes the same."""

from __future__ import annotations

import os
from pathlib import Path

import onnx
from google.protobuf.message import DecodeError

from onnx_roofline.errors import ModelLoadError
from onnx_roofline.nodes import Node, read_nodes


def load_model(source: str | os.PathLike | onnx.ModelProto) -> onnx.ModelProto:
    """The model's graph and small inline tensors; the caller's ModelProto is never modified."""
    return load_with_nodes(source)[0]


def load_with_nodes(source: str | os.PathLike | onnx.ModelProto) -> tuple[onnx.ModelProto, list[Node]]:
    """`load_model`, with the nodes its validation read, for the analysis to reuse."""
    if isinstance(source, onnx.ModelProto):
        model = onnx.ModelProto()
        model.CopyFrom(source)
        return model, _validated(model, "<in-memory model>")
    path = Path(source)
    if not path.exists():
        raise ModelLoadError(f"model file not found: {path}")
    if not path.is_file():
        raise ModelLoadError(f"not a file: {path}")
    try:
        model = onnx.load_model(str(path), load_external_data=False)
    except (DecodeError, ValueError, RuntimeError, OSError) as exc:
        raise ModelLoadError(f"not a valid ONNX model: {path} ({_first_line(exc)})") from None
    return model, _validated(model, str(path))


def _validated(model: onnx.ModelProto, where: str) -> list[Node]:
    """Protobuf parses many non-ONNX or truncated byte strings without complaint: check the essentials.
    Returns the graph's nodes."""
    if model.ir_version <= 0 or not model.HasField("graph"):
        raise ModelLoadError(f"not a valid ONNX model: {where} (no IR version or graph; truncated or not ONNX?)")
    nodes = read_nodes(model.graph)
    if not nodes:
        raise ModelLoadError(f"not a valid ONNX model: {where} (the graph has no nodes)")
    defined = {value.name for value in model.graph.input} | {t.name for t in model.graph.initializer}
    used: set[str] = set()
    for node in nodes:
        defined.update(node.outputs)
        used.update(node.inputs)
    used.discard("")
    if not used <= defined and not _uses_outer_scope(model):
        missing = next(name for node in nodes for name in node.inputs if name and name not in defined)
        raise ModelLoadError(f"not a valid ONNX model: {where} (value {missing!r} is used but never produced)")
    return nodes


def _uses_outer_scope(model: onnx.ModelProto) -> bool:
    return any(attr.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for n in model.graph.node for attr in n.attribute)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:200]


def opsets(model: onnx.ModelProto) -> dict[str, int]:
    """Imported opset version per domain ("" for ai.onnx)."""
    return {("" if imp.domain == "ai.onnx" else imp.domain): imp.version for imp in model.opset_import}
