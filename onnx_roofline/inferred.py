"""ONNX's shape inference of a whole model, read back for the value types alone.

`onnx.shape_inference.infer_shapes` parses the whole inferred model back into a ModelProto —
every node and inline tensor again — where the analysis reads only its graph's declared types
(input, output, value_info). Its serialized result is parsed here as a message that declares
those three fields alone, with GraphProto's field numbers and ONNX's own ValueInfoProto: the
nodes stay bytes protobuf skips over, in half the time."""

from __future__ import annotations

import functools

import onnx
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from onnx.onnx_cpp2py_export import shape_inference as _cpp

DECLARED_FIELDS = {"input": 11, "output": 12, "value_info": 13}  # onnx.GraphProto's numbers
GRAPH_FIELD = 7  # onnx.ModelProto's


def inferred_types(model: onnx.ModelProto):
    """The model's graph after ONNX's inference (strict_mode off, data propagation on), as a
    message with only `input`, `output` and `value_info`. Raises what onnx raises."""
    result = _declared_model()()
    result.ParseFromString(_cpp.infer_shapes(model.SerializeToString(), False, False, True))
    result.DiscardUnknownFields()
    return result.graph


@functools.cache
def _declared_model() -> type:
    """The message class, built once: a file of two messages, registered beside onnx's."""
    field = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(
        name="onnx_roofline/inferred.proto", package="onnx_roofline", syntax="proto2", dependency=[onnx.ModelProto.DESCRIPTOR.file.name]
    )
    graph = file.message_type.add(name="DeclaredGraph")
    for name, number in DECLARED_FIELDS.items():
        graph.field.add(name=name, number=number, label=field.LABEL_REPEATED, type=field.TYPE_MESSAGE, type_name=".onnx.ValueInfoProto")
    model = file.message_type.add(name="DeclaredModel")
    model.field.add(name="graph", number=GRAPH_FIELD, label=field.LABEL_OPTIONAL, type=field.TYPE_MESSAGE, type_name=".onnx_roofline.DeclaredGraph")
    pool = descriptor_pool.Default()
    try:
        pool.FindFileByName(file.name)
    except KeyError:
        pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("onnx_roofline.DeclaredModel"))
