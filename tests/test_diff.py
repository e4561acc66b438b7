"""`onnx-roofline diff`: two saved reports compared — totals, paired nodes, added and removed
nodes, flipped bounds, modules — with diff(1)'s exit codes. Expected values are the graphs' arithmetic."""

from __future__ import annotations

import json

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnx_roofline.commands.cli import main


def _model(n: int, extra_relu: bool = False) -> onnx.ModelProto:
    """x [64, 256] · W [256, n], then a Relu (and optionally a second one)."""
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["y"], name="/proj/MatMul"),
        helper.make_node("Relu", ["y"], ["z"], name="/act/Relu"),
    ]
    if extra_relu:
        nodes.append(helper.make_node("Relu", ["z"], ["out"], name="/act/Relu_1"))
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 256])],
        [helper.make_tensor_value_info("out" if extra_relu else "z", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(np.zeros((256, n), np.float32), "w")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _report(tmp_path, name, model, capsys) -> str:
    onnx.save(model, tmp_path / f"{name}.onnx")
    assert main([str(tmp_path / f"{name}.onnx"), "--format", "json", "-o", str(tmp_path / f"{name}.json")]) == 0
    capsys.readouterr()
    return str(tmp_path / f"{name}.json")


def test_the_same_report_is_the_same(tmp_path, capsys):
    a = _report(tmp_path, "a", _model(128), capsys)
    assert main(["diff", a, a]) == 0
    assert capsys.readouterr().out.strip().endswith("same figures")


def test_a_wider_projection_and_an_added_node(tmp_path, capsys):
    a = _report(tmp_path, "a", _model(128), capsys)
    b = _report(tmp_path, "b", _model(256, extra_relu=True), capsys)
    assert main(["diff", a, b, "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    flops = data["totals"]["flops"]
    # MatMul 2·64·256·n plus one Relu op per output element (64·n each)
    assert flops["before"] == 2 * 64 * 256 * 128 + 64 * 128
    assert flops["after"] == 2 * 64 * 256 * 256 + 2 * 64 * 256
    assert flops["delta"] == flops["after"] - flops["before"]
    assert [n["name"] for n in data["added"]] == ["/act/Relu_1"] and data["removed"] == []
    assert {c["after"]["name"] for c in data["changed"]} == {"/proj/MatMul", "/act/Relu"}  # both doubled in width


def test_node_lines_are_aligned(tmp_path, capsys):
    """The changed nodes' arrows line up however long their names."""
    a = _report(tmp_path, "a", _model(128), capsys)
    b = _report(tmp_path, "b", _model(256), capsys)
    assert main(["diff", a, b]) == 1
    lines = capsys.readouterr().out.splitlines()
    start = lines.index(next(line for line in lines if line.startswith("top 2 changed nodes")))
    nodes = lines[start + 1 : start + 3]
    assert len({line.index("→") for line in nodes}) == 1 and len({line.index("(+") for line in nodes}) == 1


def test_a_flipped_bound_is_named(tmp_path, capsys):
    """[64, 256]·[256, n] in fp32 on the H100's CUDA-core fp32 ridge: n = 1 is memory-bound, a
    wide n compute-bound (intensity 2·64·256·n / 4·(64·256 + 256·n + 64·n) grows with n)."""
    a = _report(tmp_path, "a", _model(1), capsys)
    b = _report(tmp_path, "b", _model(8192), capsys)
    assert main(["diff", a, b, "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["bound_changed"] == ["/proj/MatMul"]


def test_not_a_report_is_exit_2(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert main(["diff", str(bad), str(bad)]) == 2
    assert "not an onnx-roofline report" in capsys.readouterr().err
