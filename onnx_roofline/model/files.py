"""Files a stranger named: the model, a spec, a policy, a baseline, a saved report, and the
external-data files a model names. Every read of one goes through here.

The rules (DESIGN.md, "Files from strangers"): a file is read only when it is a regular file no
larger than its cap, checked before a byte is read (a FIFO would block, /dev/zero never ends, a
3 GB file is not a model); an external-data `location` is followed only when it resolves, symlinks
followed, to a regular file inside the model's folder, and its offset and length fit that file.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import TYPE_CHECKING, Any

from onnx_roofline.errors import ExternalDataError, RooflineError

if TYPE_CHECKING:  # onnx loads with the analysis, not with the command line that names files
    import onnx

_EXTERNAL = 1  # onnx.TensorProto.EXTERNAL: a tensor's data_location when its bytes are in a file

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

MAX_MODEL_BYTES = 2**31 - 1  # protobuf cannot parse a larger message: anything bigger is not a model
MAX_TEXT_BYTES = 64 * 2**20  # a spec, policy, baseline or saved report; GPT-2's JSON report is ~2 MB
MAX_NESTING = 64  # levels of tables/lists in JSON or TOML: real files use 3 or 4
_CHUNK = 2**20


def read_bytes(path: str | os.PathLike, what: str, limit: int, error: type[RooflineError] = RooflineError) -> bytes:
    """The whole of `path`, a regular file of at most `limit` bytes (`what` names it in errors)."""
    with open_regular(path, what, error) as (fd, info):
        if info.st_size > limit:
            raise error(f"{what} {path}: {info.st_size:,} bytes, over the {limit:,}-byte limit")
        chunks, size = [], 0
        while chunk := os.read(fd, min(_CHUNK, limit + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:  # it grew while we read
                raise error(f"{what} {path}: over the {limit:,}-byte limit")
        return b"".join(chunks)


@contextlib.contextmanager
def open_regular(
    path: str | os.PathLike, what: str, error: type[RooflineError] = RooflineError, follow: bool = True
) -> Iterator[tuple[int, os.stat_result]]:
    """An open descriptor on `path` and its fstat, once both say "regular file". The type is checked
    before opening (opening a device can have effects) and again on the descriptor (the name may
    have changed in between); O_NONBLOCK keeps a FIFO swapped in meanwhile from blocking the open."""
    check_regular(path, what, error)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | (0 if follow else getattr(os, "O_NOFOLLOW", 0))
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise error(f"{what} {path}: cannot open it ({exc.strerror or exc})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise error(f"{what} {path}: not a regular file ({file_kind(info.st_mode)})")
        yield fd, info
    finally:
        os.close(fd)


def check_regular(path: str | os.PathLike, what: str, error: type[RooflineError] = RooflineError) -> os.stat_result:
    """`os.stat(path)` when it is a regular file; else the error, naming what it is instead."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise error(f"{what} not found: {path}") from None
    except ValueError:  # an embedded null byte
        raise error(f"{what} path contains a null byte: {os.fsdecode(path)!r}") from None
    except OSError as exc:
        raise error(f"{what} {path}: cannot read it ({exc.strerror or exc})") from None
    if not stat.S_ISREG(info.st_mode):
        raise error(f"{what} {path}: not a regular file ({file_kind(info.st_mode)})")
    return info


def file_kind(mode: int) -> str:
    kinds = (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISLNK, "a symlink"),
    )
    return next((name for test, name in kinds if test(mode)), "not a file")


# --- structured text --------------------------------------------------------------------------------


def read_json(path: str | os.PathLike, what: str, error: type[RooflineError] = RooflineError) -> Any:
    return parse_text(read_bytes(path, what, MAX_TEXT_BYTES, error), path, what, error, "JSON")


def read_toml(path: str | os.PathLike, what: str, error: type[RooflineError] = RooflineError) -> Any:
    return parse_text(read_bytes(path, what, MAX_TEXT_BYTES, error), path, what, error, "TOML")


def parse_text(raw: bytes, path: str | os.PathLike, what: str, error: type[RooflineError], kind: str) -> Any:
    """`raw` parsed as "JSON" or "TOML", nested at most MAX_NESTING deep."""
    parse, failure = (json.loads, json.JSONDecodeError) if kind == "JSON" else (tomllib.loads, tomllib.TOMLDecodeError)
    try:
        data = parse(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise error(f"{what} {path}: not UTF-8 text") from None
    except failure as exc:
        raise error(f"{what} {path}: not valid {kind}: {exc}") from None
    except ValueError as exc:  # an integer of over 4,300 digits
        raise error(f"{what} {path}: not valid {kind}: {str(exc)[:120]}") from None
    except RecursionError:
        raise error(f"{what} {path}: nested deeper than {MAX_NESTING} levels") from None
    if _depth(data) > MAX_NESTING:
        raise error(f"{what} {path}: nested deeper than {MAX_NESTING} levels")
    return data


def _depth(data: Any) -> int:
    """Nesting depth, without recursion (a deep value must not be what overflows the stack)."""
    deepest, stack = 0, [(data, 1)]
    while stack:
        value, depth = stack.pop()
        deepest = max(deepest, depth)
        if depth > MAX_NESTING:
            break
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return deepest


# --- external data ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DataRef:
    """Where one tensor's bytes are: a regular file inside the model's folder, and the span in it."""

    tensor: str
    location: str
    path: Path  # resolved: no symlink left in it
    offset: int
    length: int  # bytes to read (the rest of the file when the model gives none)


def model_folder(model_path: str | os.PathLike) -> Path:
    """The folder of the model as named (not of a symlink's target), symlinks in it resolved."""
    return Path(os.path.abspath(model_path)).parent.resolve()


def external_tensors(model: onnx.ModelProto, nodes=None) -> Iterator[onnx.TensorProto]:
    """Every tensor whose bytes live in an external file: initializers, Constant-style attributes,
    in subgraphs and model-local functions too. The attributes are read only of nodes whose op can
    hold a tensor or a body (schemas.may_hold_tensors): a million-node graph has few. `nodes`: the
    main graph's nodes.Node where the caller has them read (their attributes read already; only
    those of its kinds that may hold one visited: nodes.of_kinds)."""
    from onnx_roofline.model.nodes import of_kinds
    from onnx_roofline.model.schemas import may_hold_tensors
    from onnx_roofline.model.schemas import opsets as imported_opsets

    opsets = imported_opsets(model)
    graphs: list[onnx.GraphProto] = [model.graph]
    pending: list[Sequence[onnx.AttributeProto]] = [
        node.attribute for function in model.functions for node in function.node
    ]
    if nodes is not None:  # the main graph's, read already
        holding = of_kinds(nodes, lambda domain, op_type: may_hold_tensors(domain, op_type, opsets.get(domain)))
        pending += [node.attributes for node in holding]
    read = nodes is None
    while graphs or pending:
        if graphs:
            graph = graphs.pop()
            yield from (t for t in graph.initializer if t.data_location == _EXTERNAL)
            yield from (s.values for s in graph.sparse_initializer if s.values.data_location == _EXTERNAL)
            if read:
                pending.extend(
                    node.attribute
                    for node in graph.node
                    if may_hold_tensors(node.domain, node.op_type, opsets.get(node.domain))
                )
            read = True  # every body's nodes
            continue
        # Plain branches, no list or generator an attribute: a TorchScript graph has a thousand Constants.
        for attr in pending.pop():
            if attr.HasField("t"):
                if (tensor := attr.t).data_location == _EXTERNAL:
                    yield tensor
            else:
                for tensor in attr.tensors:
                    if tensor.data_location == _EXTERNAL:
                        yield tensor
            if attr.HasField("g"):
                graphs.append(attr.g)
            else:
                graphs.extend(attr.graphs)


def entries_of(tensor: onnx.TensorProto) -> dict[str, str]:
    """The external_data key/value pairs (protobuf gives bytes for a string that is not UTF-8)."""
    entries = {}
    for entry in tensor.external_data:  # one loop, no generator: every external tensor is read so
        key, value = entry.key, entry.value
        if type(key) is bytes or type(value) is bytes:
            raise ExternalDataError(f"external data of tensor {tensor.name!r}: an entry is not valid UTF-8")
        entries[key] = value
    return entries


def location_of(tensor: onnx.TensorProto) -> str:
    return entries_of(tensor).get("location", "")


def referenced_files(model_path: str | os.PathLike, model: onnx.ModelProto) -> tuple[Path, ...]:
    """The model file and every file its external data names (wherever it points: these are the
    files an output must never replace)."""
    return named_files(model_path, data_locations(model))


def data_locations(model: onnx.ModelProto, nodes=None) -> tuple[str, ...]:
    """The external-data locations the model names, as written, sorted (`nodes`: as
    external_tensors takes them)."""
    return tuple(sorted({location_of(t) for t in external_tensors(model, nodes)}))


def named_files(model_path: str | os.PathLike, locations: Iterable[str]) -> tuple[Path, ...]:
    """The model file and the files these locations name, beside it."""
    folder = Path(os.path.abspath(model_path)).parent
    return (Path(model_path), *sorted(folder / name for name in set(locations) if name and "\0" not in name))


def locate(tensor: onnx.TensorProto, folder: Path) -> DataRef | None:
    """The checked reference of an external tensor, or None when its data file is absent (the
    committed fixtures ship without one). Raises ExternalDataError for anything that may not be
    followed. Reads nothing: the file is only stat()ed."""
    entries = entries_of(tensor)
    location = entries.get("location", "")
    where = f"external data of tensor {tensor.name!r}"
    path = resolve_location(location, folder, where)
    offset = _span_value(entries, "offset", where) or 0
    length = _span_value(entries, "length", where)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ExternalDataError(f"{where}: location {location!r} cannot be read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(info.st_mode):
        raise ExternalDataError(f"{where}: location {location!r} is not a regular file ({file_kind(info.st_mode)})")
    if offset > info.st_size:
        raise ExternalDataError(f"{where}: offset {offset} is past the end of {location!r} ({info.st_size} bytes)")
    length = info.st_size - offset if length is None else length
    if offset + length > info.st_size:
        raise ExternalDataError(
            f"{where}: offset {offset} + length {length} runs past the end of {location!r} ({info.st_size} bytes)"
        )
    return DataRef(tensor.name, location, path, offset, length)


def resolve_location(location: str, folder: Path, where: str) -> Path:
    """`folder / location`, symlinks resolved, when it stays inside `folder`. Refused, as by
    onnx's checker and onnxruntime: empty, absolute, or with a `..` part; and whatever a symlink
    leads outside the folder."""
    if not location:
        raise ExternalDataError(f"{where}: no location")
    if "\0" in location:
        raise ExternalDataError(f"{where}: location {location!r} contains a null byte")
    relative = PurePosixPath(location)
    if relative.is_absolute() or os.path.isabs(location):
        raise ExternalDataError(f"{where}: location {location!r} is absolute; it must be inside the model's folder")
    if ".." in relative.parts or ".." in PureWindowsPath(location).parts:  # onnx's checker reads `..\x` as leaving too
        raise ExternalDataError(f"{where}: location {location!r} leaves the model's folder")
    try:
        resolved = (folder / relative).resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop
        raise ExternalDataError(f"{where}: location {location!r} cannot be resolved ({exc})") from None
    if not resolved.is_relative_to(folder.resolve()):
        raise ExternalDataError(f"{where}: location {location!r} leads outside the model's folder (through a symlink)")
    return resolved


def _span_value(entries: dict[str, str], key: str, where: str) -> int | None:
    """`offset`/`length` as ONNX writes them: decimal ASCII digits, a non-negative int64."""
    text = entries.get(key)
    if text is None:
        return None
    if not (text.isascii() and text.isdigit()) or len(text) > 19 or int(text) >= 2**63:
        raise ExternalDataError(f"{where}: {key} {text!r} is not a non-negative 64-bit integer")
    return int(text)


def read_span(ref: DataRef) -> bytes:
    """The tensor's bytes: `ref.length` bytes at `ref.offset`, from the file `locate` checked
    (opened without following a symlink swapped in since)."""
    where = f"external data of tensor {ref.tensor!r}: location {ref.location!r}"
    with open_regular(ref.path, where, ExternalDataError, follow=False) as (fd, info):
        if ref.offset + ref.length > info.st_size:
            raise ExternalDataError(f"{where}: the file shrank to {info.st_size} bytes while being read")
        data = os.pread(fd, ref.length, ref.offset) if ref.length else b""
    if len(data) != ref.length:
        raise ExternalDataError(f"{where}: read {len(data)} of {ref.length} bytes")
    return data


def locate_all(model: onnx.ModelProto, folder: Path | None) -> list[DataRef | None]:
    """`locate` for every external tensor: checks every reference before anything is read or
    synthesized. Without a folder (an in-memory model) nothing can be located."""
    return [None if folder is None else locate(t, folder) for t in external_tensors(model)]
