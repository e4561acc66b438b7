"""Read an ONNX graph without its weights: external data is never loaded, so a model whose
data file is absent (or is over 2 GB) analyzes the same. The file is read through `files` (a
regular file under protobuf's 2 GB, checked before a byte is read) and parsed from memory, so
onnx itself opens nothing; `validation` then checks it is a graph at all."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import onnx
import onnx.serialization
from google.protobuf.message import DecodeError

from onnx_roofline.errors import ModelLoadError
from onnx_roofline.model import files, heap
from onnx_roofline.model.anonymous_dims import name_unnamed_dims
from onnx_roofline.model.nodes import Node, read_nodes
from onnx_roofline.model.text import decode_text_fields
from onnx_roofline.model.validation import check_model

if TYPE_CHECKING:
    from onnx_roofline.model.conformance import Invalid


@dataclass(frozen=True, eq=False)
class LoadedModel:
    """A model file parsed and validated once, to be analyzed at many dims (a what-if session):
    each load of it is a copy, not validated again, and once an analysis has checked the file
    for conformance its findings are `invalid` here, said by every analysis after without a
    check (a file's conformance does not depend on the dims it is analyzed at). Compared, and
    hashed, by identity: one per load of a file."""

    model: onnx.ModelProto  # validated; never modified
    path: str | None  # the file, whose folder its external data lies in; None for an in-memory model
    invalid: tuple[Invalid, ...] | None = None  # None: not checked yet


def loaded(source: str | os.PathLike | onnx.ModelProto | LoadedModel) -> LoadedModel:
    """The source loaded once (a caller's ModelProto copied, never modified); a LoadedModel as it is."""
    if isinstance(source, LoadedModel):
        return source
    return LoadedModel(load_model(source), None if isinstance(source, onnx.ModelProto) else str(source))


def load_model(source: str | os.PathLike | onnx.ModelProto | LoadedModel) -> onnx.ModelProto:
    """The model's graph and small inline tensors; the caller's ModelProto is never modified."""
    return load_with_nodes(source)[0]


def load_with_nodes(source: str | os.PathLike | onnx.ModelProto | LoadedModel) -> tuple[onnx.ModelProto, list[Node]]:
    """`load_model`, with the nodes its validation read, for the analysis to reuse."""
    model = parsed(source)
    return model, validated(model, source)


def parsed(source: str | os.PathLike | onnx.ModelProto | LoadedModel) -> onnx.ModelProto:
    """The source's ModelProto, before `validated` has checked it (a caller's own is copied, a
    LoadedModel's too)."""
    if isinstance(source, LoadedModel):
        source = source.model
    if isinstance(source, onnx.ModelProto):
        model = onnx.ModelProto()
        model.CopyFrom(source)
        return model
    return _parse(Path(source))


def referenced_files(source: str | os.PathLike) -> tuple[Path, ...]:
    """The model file and the external-data files it names: what an output must never replace."""
    return files.referenced_files(source, _parse(Path(source)))


def _parse(path: Path) -> onnx.ModelProto:
    """The file's ModelProto, parsed from memory (so onnx opens nothing; the format follows the
    extension, as onnx.load's does)."""
    data = files.read_bytes(path, "model file", files.MAX_MODEL_BYTES, ModelLoadError)
    fmt = onnx.serialization.registry.get_format_from_file_extension(path.suffix) or "protobuf"
    try:
        return onnx.load_model_from_string(data, format=fmt)
    except (DecodeError, ValueError, RuntimeError, UnicodeDecodeError) as exc:
        raise ModelLoadError(f"not a valid ONNX model: {path} ({_first_line(exc)})") from None


def validated(model: onnx.ModelProto, source: str | os.PathLike | onnx.ModelProto | LoadedModel) -> list[Node]:
    """The model `parsed` from `source`, checked and made ready in place: protobuf parses many
    non-ONNX or truncated byte strings without complaint, so the essentials are checked. Returns
    the graph's nodes. A LoadedModel's copy was validated as it was loaded: its nodes are read."""
    if isinstance(source, LoadedModel):
        return read_nodes(model.graph)
    where = "<in-memory model>" if isinstance(source, onnx.ModelProto) else str(source)
    if model.ir_version <= 0 or not model.HasField("graph"):
        raise ModelLoadError(f"not a valid ONNX model: {where} (no IR version or graph; truncated or not ONNX?)")
    nodes = read_nodes(model.graph)
    if not nodes:
        raise ModelLoadError(f"not a valid ONNX model: {where} (the graph has no nodes)")
    check_model(model, nodes, where)
    heap.release(len(nodes))  # validation's tables of every name
    decode_text_fields(model, nodes)
    name_unnamed_dims(model.graph)
    return nodes


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:200]
