"""A graph's declared value types, read without building protobuf objects for what is not read.

`onnx.shape_inference.infer_shapes` parses the whole inferred model back into a ModelProto —
every node and inline tensor again — where the analysis reads only its graph's declared types
(input, output, value_info), and of each value its name and its type. The serialized result is
parsed here as messages that declare just those, with GraphProto's and ValueInfoProto's field
numbers: the nodes stay bytes protobuf skips over (half the parse), and each value's type stays
its serialized TypeProto, which is what the reader keys its table of types by (a graph's values
share few) and parses once per distinct type.

ONNX's pass over a model it may crash on (isolation.crash_prone: skl2onnx's decision-path tree)
runs in a child process: a crash is PassCrashed, not the end of the process. The child sends back
the declared types alone, re-serialized without the rest (the nodes, inline weights)."""

from __future__ import annotations

import functools
from typing import NamedTuple

import onnx
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import Message
from onnx.onnx_cpp2py_export import shape_inference as _cpp

from onnx_roofline.model.isolation import crash_prone, isolated

DECLARED_FIELDS = {"input": 11, "output": 12, "value_info": 13}  # onnx.GraphProto's numbers
NODE_FIELD = 1  # onnx.GraphProto's
GRAPH_FIELD = 7  # onnx.ModelProto's
NAME_FIELD, TYPE_FIELD = 1, 2  # onnx.ValueInfoProto's


DeclaredTypes = list  # of DeclaredValue: each input's, value_info's and output's `name` and `type` (bytes)


class Mode(NamedTuple):
    """How ONNX's pass runs: `checked`, with check_type and strict_mode (the first error raised,
    a type an op's schema refuses included); `propagated`, with data propagation (small shape
    values folded through Shape → Gather → Concat, so that a Reshape's target is known)."""

    checked: bool
    propagated: bool


LENIENT = Mode(checked=False, propagated=True)  # the shape engine's: every type it can find, errors passed over
CHECKED = Mode(checked=True, propagated=False)  # onnx.checker's full check (conformance.py)
CHECKED_PROPAGATED = Mode(checked=True, propagated=True)  # the engine's first try: both at once (engine.py)


def inferred_types(model: onnx.ModelProto, mode: Mode = LENIENT) -> DeclaredTypes:
    """The declared types of the model's graph after ONNX's inference in `mode`. Raises what onnx
    raises, and PassCrashed where it crashes."""
    serialized = model.SerializeToString()
    declared = isolated(
        "ONNX's C++ shape inference", _declared_after_inference, serialized, mode, risky=crash_prone(model)
    )
    result = _messages()[0].FromString(declared)
    graph = result.graph
    return [*graph.input, *graph.value_info, *graph.output]


def _declared_after_inference(serialized: bytes, mode: Mode) -> bytes:
    """ONNX's inference of a serialized model, its result cut to the declared types (a
    DeclaredModel's fields: what the parent reads, and a pipe carries quickly)."""
    inferred = _cpp.infer_shapes(serialized, mode.checked, mode.checked, mode.propagated)
    result = _messages()[0].FromString(inferred)
    result.DiscardUnknownFields()
    return result.SerializeToString()


def declared_types(graph: onnx.GraphProto) -> DeclaredTypes:
    """A graph's own declared types, in the same form (a body's, or where ONNX's pass failed):
    each value re-read as a DeclaredValue, never the whole graph (its nodes, its weights)."""
    read = _messages()[1].FromString
    return [read(value.SerializeToString()) for value in [*graph.input, *graph.value_info, *graph.output]]


def stored_nodes_type() -> type[Message]:
    """StoredNodes: a graph's `node` field with each node kept as its serialized bytes, which a
    run of nodes is sliced from and serialized again without a Python object per node (pieces.py)."""
    return _messages()[2]


@functools.cache
def _messages() -> tuple[type[Message], type[Message], type[Message]]:
    """(DeclaredModel, DeclaredValue, StoredNodes), built once: a file of four messages, registered
    beside onnx's."""
    field = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(
        name="onnx_roofline/model/inferred.proto", package="onnx_roofline", syntax="proto2"
    )
    value = file.message_type.add(name="DeclaredValue")
    value.field.add(name="name", number=NAME_FIELD, label=field.LABEL_OPTIONAL, type=field.TYPE_STRING)
    value.field.add(name="type", number=TYPE_FIELD, label=field.LABEL_OPTIONAL, type=field.TYPE_BYTES)
    graph = file.message_type.add(name="DeclaredGraph")
    for name, number in DECLARED_FIELDS.items():
        graph.field.add(
            name=name,
            number=number,
            label=field.LABEL_REPEATED,
            type=field.TYPE_MESSAGE,
            type_name=".onnx_roofline.DeclaredValue",
        )
    model = file.message_type.add(name="DeclaredModel")
    model.field.add(
        name="graph",
        number=GRAPH_FIELD,
        label=field.LABEL_OPTIONAL,
        type=field.TYPE_MESSAGE,
        type_name=".onnx_roofline.DeclaredGraph",
    )
    nodes = file.message_type.add(name="StoredNodes")
    nodes.field.add(name="node", number=NODE_FIELD, label=field.LABEL_REPEATED, type=field.TYPE_BYTES)
    pool = descriptor_pool.Default()
    try:
        pool.FindFileByName(file.name)
    except KeyError:
        pool.Add(file)
    return tuple(
        message_factory.GetMessageClass(pool.FindMessageTypeByName(f"onnx_roofline.{name}"))
        for name in ("DeclaredModel", "DeclaredValue", "StoredNodes")
    )
