"""Map-typed graph inputs (a DictVectorizer's, as skl2onnx converts a pipeline on feature dicts):
no ONNX type holds how many entries a map has, so the user gives it as the input's shape
([entries]; a sequence of maps [maps, entries]), and the analysis says so when it is not given."""

from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto, helper

from onnx_roofline import Sizing, analyze
from onnx_roofline.commands.cli import main
from onnx_roofline.errors import EXIT_USAGE

ML = "ai.onnx.ml"
VOCABULARY = [1, 2, 5, 7, 9]


def dict_vectorizer() -> onnx.ModelProto:
    """map(int64 → float) → DictVectorizer (5 int64 keys) → Relu."""
    entries = helper.make_map_type_proto(TensorProto.INT64, helper.make_tensor_type_proto(TensorProto.FLOAT, []))
    nodes = [
        helper.make_node("DictVectorizer", ["m"], ["dense"], domain=ML, int64_vocabulary=VOCABULARY),
        helper.make_node("Relu", ["dense"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "dv", [helper.make_value_info("m", entries)], [helper.make_empty_tensor_value_info("y")]
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ML, 1)])


def test_a_map_input_given_its_entries_is_costed_through():
    report = analyze(dict_vectorizer(), sizing=Sizing(input_shapes={"m": (3,)}))
    vectorizer, relu = report.nodes
    assert report.uncosted.count == 0 and report.model.shape_warnings == ()
    assert vectorizer.inputs[0].to_dict() == {"name": "m", "shape": [3], "dtype": "float32", "key_dtype": "int64"}
    assert vectorizer.outputs[0].shape == (1, 5)  # one value per vocabulary key
    assert vectorizer.cost.flops == 5  # one lookup per key
    # 3 entries of an int64 key and a float32 value, plus the 5 int64 keys of the vocabulary; [1, 5] float32 out
    assert (vectorizer.cost.bytes_read, vectorizer.cost.bytes_written) == (3 * (8 + 4) + 5 * 8, 5 * 4)
    assert relu.cost.flops == 5


def test_a_map_input_without_entries_is_said_and_uncosted():
    report = analyze(dict_vectorizer(), partial=True)
    assert report.uncosted.count == 2
    assert report.model.shape_warnings == (
        "graph input 'm' is a map, whose entry count is data: give its shape [entries] as an input shape (--input m=16)",
    )
    assert report.nodes[0].inputs[0].key_dtype == "int64"  # typed as a map, only its entries unknown


def test_a_map_input_keeps_its_type_and_refuses_a_tensor_shape(tmp_path, capsys):
    path = tmp_path / "dv.onnx"
    onnx.save(dict_vectorizer(), path)
    assert main([str(path), "--input", "m=3", "-q", "-o", str(tmp_path / "t.txt")]) == 0
    assert main([str(path), "--input", "m=1x3"]) == EXIT_USAGE
    assert (
        capsys.readouterr().err.strip()
        == "onnx-roofline: error: --input m: rank 2 given for a map, whose shape is its entries: [entries]"
    )
    assert onnx.load(str(path)).graph.input[0].type.HasField("map_type")  # the model is never modified


def test_onnxruntime_agrees_on_the_vectorized_shape():
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(dict_vectorizer().SerializeToString(), providers=["CPUExecutionProvider"])
    (y,) = session.run(None, {"m": {1: 0.5, 5: -1.0, 9: 2.0}})
    assert y.shape == analyze(dict_vectorizer(), sizing=Sizing(input_shapes={"m": (3,)})).nodes[1].outputs[0].shape
