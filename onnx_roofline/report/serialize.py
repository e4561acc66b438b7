"""Machine-readable renderings: JSON (the schema_version 1 contract) and CSV (one row per node)."""

from __future__ import annotations

import csv
import functools
import gc
import io
import json
import json.encoder
import operator
from collections.abc import Callable, Iterator
from typing import Any

from onnx_roofline.model.tensors import TensorInfo
from onnx_roofline.report.breakdown import module_path
from onnx_roofline.report.model import NodeResult, Report

CSV_COLUMNS = (
    "index",
    "name",
    "op_type",
    "domain",
    "status",
    "flops",
    "transcendentals",
    "dequantize_flops",
    "bytes_read",
    "bytes_written",
    "bytes",
    "parameters",
    "intensity",
    "unit",
    "dtype",
    "ridge",
    "bound",
    "time_s",
    "reason",
    "constant_foldable",
    "members",
    "module",
    "time_share",
    "attainable_flops",
    "at_most",
)


def render_json(report: Report, other: Report | None = None) -> str:
    """Deterministic: keys in a fixed order, no timestamps. The text of
    `json.dumps(report.to_dict(), indent=2, allow_nan=False)`, and a newline; `other`, the
    report's other view (by default `report.other`, as to_dict), adds its block to "views"."""
    return "".join(iter_json(report, other))


def iter_json(report: Report, other: Report | None = None) -> Iterator[str]:
    """render_json's text in pieces, the nodes written a few thousand at a time: a million-node
    report is never one dict or one string in memory."""
    encoder = _Encoder()
    head, tail = encoder.text(report.to_dict_with(_NODES, other if other is not None else report.other), 0).split(
        _NODES_MARK
    )
    yield head
    enabled = gc.isenabled()
    gc.disable()  # a node's lists are acyclic and freed at once: a cyclic collection would find nothing
    try:
        yield from _node_chunks(report, encoder)
    finally:
        if enabled:
            gc.enable()
    yield tail + "\n"


def _node_chunks(report: Report, encoder: _Encoder) -> Iterator[str]:
    """The nodes' list (`Report.node_dicts`, at NODES_LEVEL) written CHUNK_ITEMS nodes a piece,
    each node from its kind's row (`_row`) with what is its own (PER_NODE, and each of its
    tensors) in the row's places. A kind is a node's op, its graph (scope and trips), its number
    of inputs and outputs, and what its figures read (NodeResult.figures_key): a model's repeated
    layers have a few hundred kinds, a chain of a million nodes four."""
    nodes = report.nodes
    if not nodes:
        yield "[]"
        return
    level = NODES_LEVEL + 1
    separator = "," + encoder.newline(level)
    known_tensor, tensor_text = encoder.tensor_texts.get, encoder.tensor_text
    module_text = _Modules().text
    members, with_members = report.members, len(report.members)
    per_kernel = report.prediction.per_kernel if report.prediction is not None else None
    kinds: dict[tuple, tuple[list[str], NodeResult]] = {}
    chunk = ["[" + encoder.newline(level)]
    for index, node in enumerate(nodes):
        if index % CHUNK_ITEMS == 0 and index:
            yield "".join(chunk)
            chunk.clear()
        inputs, outputs = node.inputs, node.outputs
        key = (
            node.op_type,
            node.domain,
            node.scope,
            node.trips,
            len(inputs),
            len(outputs),
            node.figures_key,
            index < with_members,
            None if per_kernel is None else per_kernel[index],  # as its figures, a kernel's own
        )
        kind = kinds.get(key)
        if kind is None:
            if len(kinds) >= encoder.MAX_SHARED:
                kinds.clear()
            # The entry keeps the node, and so the records whose ids are in its key, alive.
            kind = kinds[key] = (_row(report, encoder, index, node, separator), node)
        own = [_int(index), _escape(node.name)]
        for tensor in inputs:
            own.append(known_tensor(id(tensor)) or tensor_text(tensor))
        for tensor in outputs:
            own.append(known_tensor(id(tensor)) or tensor_text(tensor))
        own.append(module_text(node))
        if index < with_members:
            own.append(encoder.list_text(list(members[index]), level + 1))
        row = kind[0]
        row[1::2] = own
        chunk += row
    chunk[-1] = chunk[-1].removesuffix(separator) + encoder.newline(NODES_LEVEL) + "]"
    yield "".join(chunk)


def _row(report: Report, encoder: _Encoder, index: int, node: NodeResult, separator: str) -> list[str]:
    """The row of the node's kind: the pieces of its text (`Report.node_dict`, at NODES_LEVEL + 1)
    around each of PER_NODE and each item of PER_TENSOR, with a place between each two for the
    node's own, the separator after the last. A chunk takes a node's row as it is, its places
    filled, and joins the rows of all its nodes at once: filling a %-template instead scans the
    kilobyte of fixed text again for every node, a microsecond a node, six times the row's cost."""
    value = report.node_dict(index, node, report.totals.time_s, report.hardware.memory_bandwidth)
    pieces = _template(encoder, value, NODES_LEVEL + 1, PER_NODE, PER_TENSOR)
    pieces[-1] += separator
    row = [""] * (2 * len(pieces) - 1)
    row[::2] = pieces
    return row


class _Modules(dict):
    """Nodes' modules (breakdown.module_path), written, by their nodes' name's folder
    (`/model/h.0/attn` of `/model/h.0/attn/MatMul`): module_path reads the module of a node of
    the main graph without metadata from that alone, and the nodes of a module share it — worked
    out once per module rather than in module_path's four calls for every node."""

    MAX_FOLDERS = 1 << 12  # folders kept: a module's nodes mostly stand together

    def text(self, node: NodeResult) -> str:
        graph_node = node.graph_node
        if node.scope or (graph_node is not None and graph_node.has_metadata):
            return _escape(module_path(node))
        folder = node.name.rpartition("/")[0]
        text = self.get(folder)
        if text is None:
            if len(self) >= self.MAX_FOLDERS:
                self.clear()
            text = self[folder] = _escape(module_path(node))
        return text


PER_NODE = ("index", "name", "module", "members")
PER_TENSOR = ("inputs", "outputs")
"""The keys of a node's object written per node (PER_TENSOR's lists item by item), in the order
they stand; the others are written once per template."""
_SLOT = "\0slot\0"  # never in json's text, which escapes control characters


def _template(
    encoder: _Encoder, value: dict, level: int, slots: tuple[str, ...], item_slots: tuple[str, ...] = ()
) -> list[str]:
    """A dict written at `level` as a template: its text's pieces around the value of each key
    in `slots` and each item of the lists of `item_slots`."""
    slot = _Text(_SLOT)
    marked = {
        key: slot if key in slots else [slot] * len(item) if key in item_slots else item for key, item in value.items()
    }
    return encoder.dict_text(marked, level).split(_SLOT)


_NODES_MARK = "\0nodes\0"  # never in json's text, which escapes control characters
CHUNK_ITEMS = 2048  # nodes joined into one piece of text


class _Nodes:
    """Stands for the nodes in the report's object while its other parts are written."""


_NODES = _Nodes()
NODES_LEVEL = 1  # the indentation of the nodes' list: the report's "nodes"
TENSOR_LEVEL = NODES_LEVEL + 3  # a node's inputs and outputs: in a list in a dict in the nodes' list


class _Text:
    """Text written already, at the place it stands: a template's slot."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


class _Encoder:
    """`json.dumps(value, indent=2, allow_nan=False)`, rewritten for speed: the standard library
    writes an indented document in pure Python (its C encoder does not indent), a tenth of a
    millisecond per node of a report here. A dict is written by a writer made for its layout (its
    keys, the types of its values, its level: a report's nodes have a handful): a %-template of the
    keys' texts, each value written by the function for its type — ints converted in C, strings
    through json's own C escaping (ensure_ascii), floats as their repr (remembered: a float's
    shortest repr costs more than the rest of its node's figures, and a report repeats few of
    them). A tensor that several nodes read is written once, from a template of its type; a node,
    from its kind's row (`_row`).
    The same text: NaN and infinities refused with json's error, keys converted as json converts
    them; any other type (a subclass, an object json refuses) is written, or refused, by json."""

    MAX_LAYOUTS = 512  # layouts whose writers are kept
    MAX_SHARED = 1 << 16  # tensors' texts and nodes' rows kept (a node's inputs are mostly recent outputs)
    MAX_FLOATS = 1 << 16  # float texts kept

    def __init__(self) -> None:
        self.newlines = ["\n" + "  " * level for level in range(32)]
        self.layouts: dict[tuple, Callable[[dict], str]] = {}  # a dict's writer, by (level, keys, value types)
        self.tensor_texts: dict[int, str] = {}  # by id(TensorInfo)
        self.held: list[TensorInfo] = []  # the tensors of tensor_texts
        self.floats = _FloatTexts(self.MAX_FLOATS)
        self.types: dict[tuple, list[str]] = {}  # a tensor's template, by (shape, dtype, key dtype): a graph has few

    def newline(self, level: int) -> str:
        while level >= len(self.newlines):
            self.newlines.append("\n" + "  " * len(self.newlines))
        return self.newlines[level]

    def tensor_text(self, tensor: TensorInfo | None) -> str:
        """A node's input or output (null: an absent optional input), written: its dict's text
        where the nodes' tensors stand (TENSOR_LEVEL), all but its name once per type. Kept in
        `tensor_texts` while it is among the last MAX_SHARED tensors (a chain's values appear
        twice, a shared weight thousands of times): a node's writer looks there first."""
        if tensor is None:
            return "null"
        if len(self.held) >= self.MAX_SHARED:
            self.tensor_texts.clear()
            self.held.clear()
        key = _tensor_type(tensor)
        pieces = self.types.get(key)
        if pieces is None:
            if len(self.types) >= self.MAX_SHARED:
                self.types.clear()
            pieces = self.types[key] = _template(self, tensor.to_dict(), TENSOR_LEVEL, ("name",))
        before, after = pieces
        text = self.tensor_texts[id(tensor)] = before + _escape(tensor.name) + after
        self.held.append(tensor)  # alive, and so its id, while its text is kept
        return text

    def text(self, value: Any, level: int) -> str:
        """The text of `value` at indentation `level` (of its closing bracket)."""
        kind = type(value)
        if kind is dict:
            return self.dict_text(value, level)
        if kind is list or kind is tuple:
            return self.list_text(value, level)
        return self.scalar(value, level)

    def scalar(self, value: Any, level: int) -> str:
        """A value that is not an exact dict, list or tuple, as json writes it."""
        kind = type(value)
        if kind is str:
            return _escape(value)
        if kind is int:
            return _int(value)
        if kind is float:
            return self.floats[value]
        if value is None:
            return "null"
        if value is True:
            return "true"
        if value is False:
            return "false"
        if kind is _Text:
            return value.text
        if value is _NODES:
            return _NODES_MARK
        # A subclass (an IntEnum, an OrderedDict) or a type json refuses: json's own text, indented
        # as it would be here (its strings hold no raw newline), or json's TypeError.
        return json.dumps(value, indent=2, allow_nan=False).replace("\n", self.newline(level))

    def list_text(self, value: list | tuple, level: int) -> str:
        if not value:
            return "[]"
        newline = self.newline(level + 1)
        first = type(value[0])
        if first is int and set(map(type, value)) == _INTS:  # a shape: one join
            return "[" + newline + ("," + newline).join(map(_int, value)) + self.newlines[level] + "]"
        text = self.text
        return (
            "[" + newline + ("," + newline).join([text(item, level + 1) for item in value]) + self.newlines[level] + "]"
        )

    def dict_text(self, value: dict, level: int) -> str:
        if not value:
            return "{}"
        return "{" + self.newline(level + 1) + self.items_text(value, level) + self.newlines[level] + "}"

    def items_text(self, value: dict, level: int) -> str:
        """A non-empty dict's text between the first newline and the last (the items, and the
        newlines between them): dict_text's core, and what a node's text is joined from."""
        layout = (level, tuple(value), tuple(map(type, value.values())))
        write = self.layouts.get(layout)
        if write is None:
            if len(self.layouts) >= self.MAX_LAYOUTS:
                self.layouts.clear()
            write = self.layouts[layout] = self.layout_writer(*layout)
        return write(value)

    def layout_writer(self, level: int, keys: tuple, kinds: tuple[type, ...]) -> Callable[[dict], str]:
        """The writer of the items of a dict of these keys and value types at this level: one
        %-template of the keys' texts, each value written by the function for its type."""
        template = ("," + self.newline(level + 1)).join(_key(key).replace("%", "%%") + ": %s" for key in keys)
        writers = [self.value_writer(kind, level + 1) for kind in kinds]

        def write(value: dict) -> str:
            return template % tuple(map(_call, writers, value.values()))

        return write

    def value_writer(self, kind: type, level: int) -> Callable[[Any], str]:
        """The function that writes a value of exactly type `kind` at `level` (any other type: `scalar`)."""
        if kind is str:
            return _escape
        if kind is int:
            return _int
        if kind is float:
            return self.floats.__getitem__
        if kind is bool:
            return _BOOLS.__getitem__
        if kind is type(None):
            return _NULL.__getitem__
        if kind is dict:
            return functools.partial(self.dict_text, level=level)
        if kind is list or kind is tuple:
            return functools.partial(self.list_text, level=level)
        return functools.partial(self.scalar, level=level)


def _key(key: Any) -> str:
    """A dict key as json writes it: a string escaped; a number, true, false or null as text."""
    if isinstance(key, str):
        return _escape(key)
    if isinstance(key, float):
        if not -_INFINITY < key < _INFINITY:
            json.dumps({key: 0}, indent=2, allow_nan=False)  # raises json's ValueError
        return _escape(_float(key))
    if key is True or key is False or key is None:
        return _escape(json.dumps(key))
    if isinstance(key, int):
        return _escape(_int(key))
    json.dumps({key: 0}, indent=2)  # raises json's TypeError
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


_escape = json.encoder.encode_basestring_ascii
_tensor_type = operator.attrgetter(
    "shape", "dtype", "key_dtype", "sequence", "elements"
)  # what a TensorInfo's dict holds besides its name
_int = int.__repr__
_float = float.__repr__
_INFINITY = float("inf")
_INTS = {int}
_call = getattr(operator, "call", lambda function, value: function(value))  # operator.call: Python 3.11 on
_BOOLS = {True: "true", False: "false"}
_NULL = {None: "null"}


class _FloatTexts(dict):
    """A float's text by its value, made when first asked: its repr, after json's refusal of NaN
    and the infinities (allow_nan=False). The last `limit` are kept, never a zero: 0.0 == -0.0,
    whose texts differ."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def __missing__(self, value: float) -> str:
        if not -_INFINITY < value < _INFINITY:
            json.dumps(value, indent=2, allow_nan=False)  # raises json's own ValueError
        text = _float(value)
        if value:
            if len(self) >= self.limit:
                self.clear()
            self[value] = text
        return text


def render_csv(report: Report) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(
        buffer, fieldnames=[*CSV_COLUMNS, "output_shape"], extrasaction="ignore", lineterminator="\n"
    )
    writer.writeheader()
    for node in report.node_dicts():  # to_dict's "nodes", one at a time: not the whole report's tree at once
        output = node["outputs"][0] if node["outputs"] else None
        shape = output["shape"] if output else None
        members = (
            " ".join(map(str, node["members"])) if "members" in node else ""
        )  # deployed: the graph nodes a kernel covers
        writer.writerow(
            {**node, "members": members, "output_shape": "x".join(map(str, shape)) if shape is not None else ""}
        )
    return buffer.getvalue()
