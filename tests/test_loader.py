"""Loading never reads weights: huge external tensors and absent data files analyze the same."""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper

from onnx_roofline import analyze


def external_weight(name: str, dims: list[int]) -> TensorProto:
    """An initializer whose bytes live in a data file that does not exist."""
    tensor = TensorProto(name=name, data_type=TensorProto.FLOAT16, dims=dims, data_location=TensorProto.EXTERNAL)
    for key, value in (("location", "weights.bin"), ("offset", "0"), ("length", str(2 * dims[0] * dims[1]))):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    return tensor


def test_a_model_over_2_gb_with_its_data_file_absent(tmp_path):
    """An embedding table of 2²⁰ × 2048 fp16 = 4 GiB (over protobuf's 2 GB limit were it inline)."""
    rows, width = 2**20, 2048
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 16])
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT16, [1, 16, width])
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "ids"], ["y"], name="embed")],
        "big",
        [ids],
        [out],
        initializer=[external_weight("table", [rows, width])],
    )
    path = tmp_path / "big.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)
    assert path.stat().st_size < 10_000 and not (tmp_path / "weights.bin").exists()
    report = analyze(path)
    (node,) = report.nodes
    assert report.model.parameters == rows * width
    assert node.parameters == rows * width
    # Gather reads the 16 selected rows and the indices, not the 4 GiB table.
    assert node.cost.bytes_read == 16 * width * 2 + 16 * 8
    assert node.cost.bytes_written == 16 * width * 2


def test_the_shape_fallback_writes_nothing_in_the_working_directory(tmp_path, monkeypatch):
    """onnxruntime's symbolic shape inference saves `sym_shape_infer_temp.onnx` to the current
    folder when shapes stay unknown; the analysis must not leave it behind. An op no pass knows
    (a custom domain) keeps its output unknown and takes the fallback."""
    monkeypatch.chdir(tmp_path)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph([helper.make_node("Mystery", ["x"], ["y"], domain="acme")], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("acme", 1)])
    report = analyze(model, partial=True)
    assert report.nodes[0].status == "unsupported"
    assert list(tmp_path.iterdir()) == []
