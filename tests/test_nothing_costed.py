"""Nothing costed is a failure: `analyze` exits 2 with the root cause and the fix on one line of
stderr, where a partial answer keeps exit 0 and its UNCOSTED block. A root cause that rests on a
graph input's value names that input and the flag that gives it (`--value sr=16000`); every
command the tool prints is quoted for a shell."""

from __future__ import annotations

import json
import shlex

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import onnx_roofline
from onnx_roofline.commands.cli import main
from onnx_roofline.commands.inspect import inspect_model, render_text
from onnx_roofline.errors import UnboundDimensionError
from onnx_roofline.shapes.input_values import value_flag


def _save(model: onnx.ModelProto, path) -> str:
    onnx.save(model, path)
    return str(path)


def _custom_op(also_relu: bool = False) -> onnx.ModelProto:
    nodes = [helper.make_node("Frob", ["x"], ["f"], domain="acme", name="frob")]
    nodes.append(
        helper.make_node("Relu", ["x"], ["r"], name="relu")
        if also_relu
        else helper.make_node("Frob", ["f"], ["r"], domain="acme", name="frob2")
    )
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("f", TensorProto.FLOAT, [2, 3]), helper.make_tensor_value_info("r", TensorProto.FLOAT, [2, 3])])  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("acme", 1)])


def test_nothing_costed_exits_2_with_the_cause_and_the_fix(tmp_path, capsys):
    path = _save(_custom_op(), tmp_path / "custom.onnx")
    for extra in ([], ["--format", "json"], ["--view", "deployed"]):
        assert main([path, *extra]) == 2
        captured = capsys.readouterr()
        assert captured.out == ""  # no table of unknowns, no JSON that reads as a result
        (line,) = captured.err.splitlines()
        assert line.startswith("onnx-roofline: error: none of the 2 nodes could be costed")
        assert "frob (Frob): no cost rule for acme::Frob" in line and "fix: a cost rule" in line


def test_a_partial_answer_keeps_exit_0_and_says_what_it_leaves_out(tmp_path, capsys):
    path = _save(_custom_op(also_relu=True), tmp_path / "partial.onnx")
    assert main([path]) == 0
    captured = capsys.readouterr()
    assert "UNCOSTED  1 of 2 nodes uncosted" in captured.out
    assert "warning: 1 of 2 nodes uncosted" in captured.err


def test_partial_with_every_node_blocked_exits_2_naming_the_dims_quoted(tmp_path, capsys):
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node("Neg", ["r"], ["y"], name="neg")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b*", 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])  # fmt: skip
    path = _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "blocked.onnx")
    assert main([path, "--partial"]) == 2
    err = capsys.readouterr().err
    assert "none of the 2 nodes could be costed" in err and "fix: bind the dims (--dim 'b*=N')" in err
    assert main([path]) == 0  # the defaults: b* = 1


def test_the_summary_of_several_models_gives_an_error_row(tmp_path, capsys):
    good = _save(_custom_op(also_relu=True), tmp_path / "a.onnx")
    bad = _save(_custom_op(), tmp_path / "b.onnx")
    assert main([good, bad, "--format", "json"]) == 2
    rows = json.loads(capsys.readouterr().out)["models"]
    assert rows[0]["error"] is None and "none of the 2 nodes could be costed" in rows[1]["error"]


def _rate_model() -> onnx.ModelProto:
    """A frame count computed from the value of `sr` (samples per 10 ms = sr / 100): Range(0, sr/100)
    sizes the frames a MatMul weighs; nothing is known until sr is given."""
    hundred = numpy_helper.from_array(np.array(100, np.int64), "hundred")
    zero = numpy_helper.from_array(np.array(0, np.int64), "zero")
    one = numpy_helper.from_array(np.array(1, np.int64), "one")
    w = numpy_helper.from_array(np.ones((1, 4), np.float32), "w")
    nodes = [helper.make_node("Div", ["sr", "hundred"], ["hop"], name="hop"),
             helper.make_node("Range", ["zero", "hop", "one"], ["frames"], name="frames"),
             helper.make_node("Cast", ["frames"], ["ff"], to=TensorProto.FLOAT, name="cast"),
             helper.make_node("Unsqueeze", ["ff", "one_axis"], ["col"], name="col"),
             helper.make_node("MatMul", ["col", "w"], ["y"], name="weigh")]  # fmt: skip
    axis = numpy_helper.from_array(np.array([1], np.int64), "one_axis")
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("sr", TensorProto.INT64, [])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=[hundred, zero, one, w, axis])  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_root_cause_resting_on_an_inputs_value_names_the_input_and_the_flag(tmp_path, capsys):
    report = onnx_roofline.analyze(_rate_model())
    cause = report.uncosted.root_cause
    assert cause.name == "frames" and "'sr'" in cause.reason and "--value sr=16000" in cause.reason
    path = _save(_rate_model(), tmp_path / "rate.onnx")
    assert main([path]) == 0  # Div(sr, 100) is costed: a partial answer, its UNCOSTED line naming the flag
    assert "--value sr=16000" in capsys.readouterr().out
    assert main([path, "--value", "sr=16000", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["totals"]["uncosted_nodes"] == 0
    assert data["nodes"][-1]["flops"] == 2 * 160 * 1 * 4  # [160, 1] @ [1, 4]: 16000 / 100 frames


def test_a_value_flag_is_quoted_and_a_rate_takes_16_khz():
    assert value_flag("sr") == "--value sr=16000"
    assert value_flag("sample_rate") == "--value sample_rate=16000"
    assert value_flag("max steps") == "--value 'max steps=N'"
    assert shlex.split(value_flag("a*"))[1] == "a*=N"


def test_inspects_suggested_command_is_quoted_for_a_shell(tmp_path):
    model = _custom_op(also_relu=True)
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "b[0]*"
    path = _save(model, tmp_path / "odd name.onnx")
    line = next(text for text in render_text(inspect_model(path)).splitlines() if text.startswith("analyze"))
    words = shlex.split(line.removeprefix("analyze").strip())
    assert words == ["onnx-roofline", path, "--hw", "h100", "--dim", "b[0]*=1"]


def test_an_unbound_dim_error_without_a_command_line_is_quoted():
    error = UnboundDimensionError(["?x"], {"?x": ["x"]}, {"?x": 1})
    assert "e.g. `--dim '?x=1'`" in error.for_command_line()
