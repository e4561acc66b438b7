"""Every hint runs (issue 42): each flag the plain command prints as a fix — `--value` in the form
its input takes, `--nonzero-fraction`, `--frames-per-token`, `--dim`, `--input`, the value that
chooses an If's branch — is followed here, on the committed corpus (tests/corpus/) and on graphs
built here for the hints the corpus does not print, and the command it makes must run."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnx_roofline.commands.cli import main
from tests.test_bounded_sizes import detector_tail
from tests.test_shape_engine import _masked

CORPUS = Path(__file__).parent / "corpus"
_FLAG = re.compile(r"--(value|dim|input|nonzero-fraction|frames-per-token)[ =]('[^']*'|[^\s;]+)")
_PLACEHOLDERS = {"N": "2", "F": "1/2"}


def hints(text: str) -> list[tuple[str, str]]:
    """The fixes a command printed: (flag, argument), each placeholder (N, F) put in as a user
    would; the generic notes' `NAME=N` left out (no graph input is named NAME)."""
    found = []
    for flag, argument in _FLAG.findall(text):
        (argument,) = shlex.split(argument.rstrip(").,"))
        if argument.startswith("NAME="):
            continue
        name, _, value = argument.rpartition("=") if "=" in argument else ("", "", argument)
        value = ",".join(_PLACEHOLDERS.get(part, part) for part in value.split(","))
        found.append((f"--{flag}", f"{name}={value}" if name else value))
    return list(dict.fromkeys(found))


def _run(capsys, *args: str) -> tuple[int, str]:
    code = main([*args, "--top", "0"])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def if_on_a_score() -> onnx.ModelProto:
    """An If whose condition is a score the graph computes from an image (data: no input's
    value gives it): the heavy branch a matmul, the light one an Identity."""
    then_branch = helper.make_graph([helper.make_node("MatMul", ["features", "w"], ["out_then"])], "heavy", [],
                                    [helper.make_tensor_value_info("out_then", TensorProto.FLOAT, None)])  # fmt: skip
    else_branch = helper.make_graph([helper.make_node("Identity", ["features"], ["out_else"])], "light", [],
                                    [helper.make_tensor_value_info("out_else", TensorProto.FLOAT, None)])  # fmt: skip
    nodes = [
        helper.make_node("Flatten", ["image"], ["features"], axis=1),  # [1, 48]
        helper.make_node("ReduceMax", ["features"], ["score"], keepdims=0),
        helper.make_node("Greater", ["score", "threshold"], ["confident"]),
        helper.make_node("If", ["confident"], ["out"], then_branch=then_branch, else_branch=else_branch),
    ]
    initializers = [
        numpy_helper.from_array(np.float32(0.5), "threshold"),
        numpy_helper.from_array(np.zeros((48, 48), np.float32), "w"),
    ]
    graph = helper.make_graph(nodes, "if_on_a_score", [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 4, 4])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)], initializer=initializers)  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def a_token_tensor_sizing_a_range() -> onnx.ModelProto:
    """A Range to the sum of a [1, 8] integer input: data that no --value can give (rank 2)."""
    nodes = [
        helper.make_node("ReduceSum", ["ids"], ["total"], keepdims=0),
        helper.make_node("Range", ["zero", "total", "one"], ["positions"]),
    ]
    constants = [numpy_helper.from_array(np.array(value, np.int64), name) for name, value in (("zero", 0), ("one", 1))]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 8])],
                              [helper.make_tensor_value_info("positions", TensorProto.INT64, None)], initializer=constants)  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


GENERATED = {
    "nms_with_data_maximum": lambda: detector_tail(per_class=None),  # the NMS's maximum a [1] input: --value max_out=N
    "mask_sizing_an_expand": lambda: _masked(expand=True),  # a [6] mask: --value mask=N,N,N,N,N,N
    "if_on_a_score": if_on_a_score,  # the condition itself: --value confident=1
}


def _graphs(tmp_path: Path) -> list[Path]:
    paths = sorted(CORPUS.glob("**/*.onnx"))
    for name, make in GENERATED.items():
        onnx.save(make(), tmp_path / f"{name}.onnx")
        paths.append(tmp_path / f"{name}.onnx")
    return paths


def test_every_hint_printed_on_the_corpus_and_generated_graphs_runs(tmp_path, capsys):
    followed = []
    for path in _graphs(tmp_path):
        code, text = _run(capsys, str(path))
        assert code == 0, text
        for flag, argument in hints(text):
            after, result = _run(capsys, str(path), flag, argument)
            assert after == 0, f"{path.name}: following {flag} {argument} gave exit {after}: {result}"
            assert result != text, f"{path.name}: {flag} {argument} changed nothing"
            followed.append((path.name, flag, argument))
    names = {name for name, _, _ in followed}
    assert {f"{name}.onnx" for name in GENERATED} <= names  # each generated graph printed a hint, and it ran
    assert ("mask_sizing_an_expand.onnx", "--value", "mask=2,2,2,2,2,2") in followed  # the form a 1-D input takes
    assert ("if_on_a_score.onnx", "--value", "confident=1") in followed
    assert (
        "ts_bert.onnx",
        "--dim",
        "sequence=64",
    ) in followed  # IMPLAUSIBLE: 512 positions against the 128 its table holds


def test_a_hint_never_offers_a_value_for_a_tensor_input(tmp_path, capsys):
    """A Range sized by a [1, 8] input's values: --value cannot give a rank-2 input, so none is
    offered, and the report says why."""
    path = tmp_path / "ids.onnx"
    onnx.save(a_token_tensor_sizing_a_range(), path)
    code, text = _run(capsys, str(path))
    assert code == 0 and hints(text) == []
    assert "'ids' [1, 8]: a value (--value) is given only to a scalar or a short 1-D input" in text
    # a partial answer says so on stdout beside the totals, and in the JSON, with exit 0 (README: exit 2 only where nothing is costed)
    assert main([str(path), "-q"]) == 0
    out = capsys.readouterr().out
    assert "UNCOSTED  1 of 2 nodes uncosted" in out and "not in the totals, which are a partial answer: Range×1" in out
    assert main([str(path), "--format", "json", "-q"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["totals"]["uncosted_nodes"] == 1 and document["uncosted"]["count"] == 1


@pytest.mark.parametrize(("value", "branch"), [("1", "then_branch"), ("0", "else_branch")])
def test_the_value_of_an_if_condition_chooses_its_branch(tmp_path, capsys, value, branch):
    path = tmp_path / "if.onnx"
    onnx.save(if_on_a_score(), path)
    code, text = _run(capsys, str(path), "--value", f"confident={value}")
    assert code == 0 and f"If_3: {branch} (--value confident={value})" in text and "BOTH" not in text
