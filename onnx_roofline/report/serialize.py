"""Machine-readable renderings: JSON (the schema_version 1 contract) and CSV (one row per node)."""

from __future__ import annotations

import csv
import functools
import gc
import io
import json
import json.encoder
import operator
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from onnx_roofline.model.tensors import TensorInfo
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
    """render_json's text in pieces, the nodes' objects built and written a few thousand at a
    time: a million-node report is never one dict or one string in memory."""
    encoder = _Encoder()
    head, tail = encoder.text(report.to_dict_with(_NODES, other if other is not None else report.other), 0).split(
        _NODES_MARK
    )
    yield head
    enabled = gc.isenabled()
    gc.disable()  # the nodes' dicts are acyclic and freed at once: a cyclic collection would find nothing
    try:
        yield from encoder.stream_list(_node_texts(report, encoder), NODES_LEVEL)
    finally:
        if enabled:
            gc.enable()
    yield tail + "\n"


def _node_texts(report: Report, encoder: _Encoder) -> Iterator[_Text]:
    """The text of each of `Report.node_dicts`, from a %-template per kind of node — its op, its
    number of inputs and outputs, and what its figures read (NodeResult.figures_key): a model's
    repeated layers have a few hundred kinds, a chain of a million nodes four — filled with what
    is each node's own (PER_NODE, and each of its tensors)."""
    from onnx_roofline.report.breakdown import module_path

    level = NODES_LEVEL + 1
    tensor_text, list_text = encoder.tensor_text, encoder.list_text
    model_time, bandwidth, members = report.totals.time_s, report.hardware.memory_bandwidth, report.members
    templates: dict[tuple, tuple[str, NodeResult]] = {}
    for index, node in enumerate(report.nodes):
        has_members = index < len(members)
        tensors = node.inputs + node.outputs
        predicted = (
            report.prediction.per_kernel[index] if report.prediction is not None else None
        )  # a kernel's own, as its figures are
        key = (node.op_type, node.domain, len(node.inputs), len(tensors), node.figures_key, has_members, predicted)
        written = templates.get(key)
        if written is None:
            if len(templates) >= encoder.MAX_SHARED:
                templates.clear()
            # The entry keeps the node, and so the records whose ids are in its key, alive.
            node_dict = report.node_dict(index, node, model_time, bandwidth)
            written = templates[key] = (_template(encoder, node_dict, level, PER_NODE, PER_TENSOR), node)
        own = [_int(index), _escape(node.name)]
        own += ["null" if t is None else tensor_text(t) for t in tensors]
        own.append(_escape(module_path(node)))
        if has_members:
            own.append(list_text(list(members[index]), level + 1))
        yield _Text(written[0] % tuple(own))


PER_NODE = ("index", "name", "module", "members")
PER_TENSOR = ("inputs", "outputs")
"""The keys of a node's object written per node (PER_TENSOR's lists item by item), in the order
they stand; the others are written once per template."""
_SLOT = "\0slot\0"  # never in json's text, which escapes control characters


def _template(
    encoder: _Encoder, value: dict, level: int, slots: tuple[str, ...], item_slots: tuple[str, ...] = ()
) -> str:
    """A dict written at `level` as a %-template: a %s for the value of each key in `slots` and
    for each item of the lists of `item_slots`."""
    slot = _Text(_SLOT)
    marked = {
        key: slot if key in slots else [slot] * len(item) if key in item_slots else item for key, item in value.items()
    }
    text = encoder.dict_text(marked, level)
    return "%s".join(part.replace("%", "%%") for part in text.split(_SLOT))


_NODES_MARK = "\0nodes\0"  # never in json's text, which escapes control characters
CHUNK_ITEMS = 2048  # list items joined into one piece of text


class _Nodes:
    """Stands for the nodes in the report's object while its other parts are written."""


_NODES = _Nodes()
NODES_LEVEL = 1  # the indentation of the nodes' list: the report's "nodes"
TENSOR_LEVEL = NODES_LEVEL + 3  # a node's inputs and outputs: in a list in a dict in the nodes' list


class _Text:
    """Text written already, at the place it stands: a node's, or a template's slot."""

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
    from a template of its kind (`_node_texts`).
    The same text: NaN and infinities refused with json's error, keys converted as json converts
    them; any other type (a subclass, an object json refuses) is written, or refused, by json."""

    MAX_LAYOUTS = 512  # layouts whose writers are kept
    MAX_SHARED = 1 << 16  # tensors whose dict and text are kept (a node's inputs are mostly recent outputs)
    MAX_FLOATS = 1 << 16  # float texts kept

    def __init__(self) -> None:
        self.newlines = ["\n" + "  " * level for level in range(32)]
        self.layouts: dict[tuple, Callable[[dict], str]] = {}  # a dict's writer, by (level, keys, value types)
        self.tensors: dict[int, tuple[TensorInfo, str]] = {}  # by id(TensorInfo)
        self.floats = _FloatTexts(self.MAX_FLOATS)
        self.types: dict[tuple, str] = {}  # a tensor's %-template, by (shape, dtype, key dtype): a graph has few

    def newline(self, level: int) -> str:
        while level >= len(self.newlines):
            self.newlines.append("\n" + "  " * len(self.newlines))
        return self.newlines[level]

    def tensor_text(self, tensor: TensorInfo) -> str:
        """A node's input or output, written: its dict's text where the nodes' tensors stand
        (TENSOR_LEVEL), once for every node that reads or writes it while it is among the last
        MAX_SHARED tensors (a chain's values appear twice, a shared weight thousands of times);
        all but its name once per type."""
        entry = self.tensors.get(id(tensor))
        if entry is not None:
            return entry[1]
        if len(self.tensors) >= self.MAX_SHARED:
            self.tensors.clear()
        key = (tensor.shape, tensor.dtype, tensor.key_dtype, tensor.sequence, tensor.elements)
        template = self.types.get(key)
        if template is None:
            if len(self.types) >= self.MAX_SHARED:
                self.types.clear()
            template = self.types[key] = _template(self, tensor.to_dict(), TENSOR_LEVEL, ("name",))
        text = template % _escape(tensor.name)
        self.tensors[id(tensor)] = (tensor, text)  # the entry keeps the tensor, and so its id, alive
        return text

    def stream_list(self, items: Iterable[Any], level: int) -> Iterator[str]:
        """The text of a list of `items` at indentation `level` (of its brackets), in pieces."""
        separator = "," + self.newline(level + 1)
        text = self.text
        chunk: list[str] = []
        first = True
        for item in items:
            chunk.append(text(item, level + 1))
            if len(chunk) == CHUNK_ITEMS:
                yield ("[" + separator[1:] if first else separator) + separator.join(chunk)
                chunk.clear()
                first = False
        if first and not chunk:
            yield "[]"
            return
        last = ("[" + separator[1:] if first else separator) + separator.join(chunk) if chunk else ""
        yield last + self.newlines[level] + "]"

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
