"""Text fields that are not UTF-8. Protobuf hands back `bytes` for a string field whose bytes are
not valid UTF-8, where every later stage expects `str` (a regex on a dim's name, a sort of
metadata keys). onnxruntime and onnx's checker take any bytes there, so such a file is not refused:
names and op types are (validation.py); the free text the analysis reads — a symbolic dim's name,
metadata, the producer, a graph's name — is decoded with replacement characters (U+FFFD), as
`--annotate` writes doc strings back: at load (`decode_text_fields`), but for the dims of
value_info and a node's metadata, decoded as they are read (`as_text`: a GPT-2 has 800 value
infos, and a dynamo export metadata on every node, which the analysis reads only to name a
node's module in the breakdown)."""

from __future__ import annotations

from collections.abc import Iterable

import onnx

from onnx_roofline.model.nodes import Node, read_nodes

_MODEL_FIELDS = ("producer_name", "producer_version", "domain")


def decode_text_fields(model: onnx.ModelProto, nodes: list[Node]) -> None:
    """The model's free text made `str`, in place: its own fields and metadata, and in its graph
    (`nodes`, as read) and every body, the graph's name and the dims of its inputs and outputs."""
    _decode(model, _MODEL_FIELDS)
    _decode_props(model.metadata_props)
    _decode_graph(model.graph, nodes)


def _decode_graph(graph: onnx.GraphProto, nodes: Iterable[Node]) -> None:
    _decode(graph, ("name",))
    for value in (*graph.input, *graph.output):
        _decode_type(value.type)
    for node in nodes:
        for attr in node.attributes:
            if attr.type == onnx.AttributeProto.GRAPH:
                _decode_graph(attr.g, read_nodes(attr.g))
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for body in attr.graphs:
                    _decode_graph(body, read_nodes(body))


def as_text(value: str | bytes) -> str:
    """A string field's value as text (bytes where protobuf found no UTF-8)."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _decode(message, fields: tuple[str, ...]) -> None:
    for name in fields:
        value = getattr(message, name)
        if type(value) is bytes:
            setattr(message, name, as_text(value))


def _decode_props(entries) -> None:
    for entry in entries:
        _decode(entry, ("key", "value"))


def _decode_type(value_type: onnx.TypeProto) -> None:
    """A tensor's symbolic dims and denotations, inside sequences, optionals and maps too."""
    kind = value_type.WhichOneof("value")
    if kind in ("tensor_type", "sparse_tensor_type"):
        for dim in getattr(value_type, kind).shape.dim:
            if dim.HasField("dim_param"):
                _decode(dim, ("dim_param",))
    elif kind in ("sequence_type", "optional_type"):
        _decode_type(getattr(value_type, kind).elem_type)
    elif kind == "map_type":
        _decode_type(value_type.map_type.value_type)
