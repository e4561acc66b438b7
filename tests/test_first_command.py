"""The first command gives a result: unbound dims take documented defaults named on stderr;
`check` and the Python API stay strict, their errors naming the dims and what would work, each
in its own language (flags on the command line, `dims={...}` in Python); `--partial` with no
dims never reads as a result; --quiet, --verbose; did-you-mean for --hw."""

from __future__ import annotations

import json
import pickle
import re
import shlex

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnx_roofline
from onnx_roofline import Sizing
from onnx_roofline.commands.cli import main
from onnx_roofline.errors import DimensionError, UnboundDimensionError
from onnx_roofline.shapes.defaults import NO_DEFAULT, PAST, SEQUENCE, default_dims, derived_dims, words
from tests.conftest import FIXTURES, symbolic_matmul
from tests.corpus import MODELS as CORPUS

# The fixtures' symbolic dims, read from the files by hand (inspect lists the same), and the
# defaults docs/defaults.md's table gives them.
EXPECTED_DEFAULTS = {
    "resnet50": {"batch": 1},
    "gpt2_prefill": {"batch": 1, "sequence": 512},
    "gpt2_decode": {"batch": 1, "past_sequence": 511},
}
ALL_FIXTURES = sorted(p.name for p in FIXTURES.glob("*.onnx"))


def expected_for(fixture: str) -> dict[str, int]:
    return next(dims for prefix, dims in EXPECTED_DEFAULTS.items() if fixture.startswith(prefix))


# --- the defaults themselves ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("names", "given", "expected"),
    [
        (["batch", "sequence"], {}, {"batch": 1, "sequence": 512}),  # a prompt of 512 tokens
        (["batch", "past_sequence"], {}, {"batch": 1, "past_sequence": 511}),  # a context of 512
        # genai's names: a decode step (a past dim is there), the mask's total = 511 + 1; the head dim has no guess
        (
            ["batch_size", "sequence_length", "past_sequence_length", "total_sequence_length", "kv_cache_dim"],
            {},
            {
                "batch_size": 1,
                "sequence_length": 1,
                "past_sequence_length": 511,
                "total_sequence_length": 512,
                "kv_cache_dim": 1,
            },
        ),
        (
            ["sequence", "total_sequence"],
            {"past_sequence": 100},
            {"sequence": 1, "total_sequence": 101},
        ),  # bound dims are context
        (
            ["batch", "sequence", "encoder_sequence", "past_sequence"],
            {},
            {"batch": 1, "sequence": 1, "encoder_sequence": 512, "past_sequence": 511},
        ),
        (["N", "height", "width"], {}, {"N": 1, "height": 224, "width": 224}),
        (["batchSize", "seqLen"], {}, {"batchSize": 1, "seqLen": 512}),
        (["past_sequence", "past_sequence + 1"], {}, {"past_sequence": 511, "past_sequence + 1": 512}),  # an expression
        (["unk__42", "steps"], {}, {"unk__42": 1, "steps": 1}),
    ],
)
def test_defaults_by_name(names, given, expected):
    assert {name: size for name, (size, _) in default_dims(names, given).items()} == expected


def test_a_name_without_a_guess_says_so():
    assert default_dims(["kv_cache_dim"]) == {"kv_cache_dim": (1, NO_DEFAULT)}
    assert words("past_sequence_length") == ("past", "sequence", "length") and words("batchSize") == ("batch", "size")


def test_the_documented_table_holds_the_constants():
    from tests.conftest import REPO

    doc = (REPO / "docs" / "defaults.md").read_text()
    assert f"| {PAST} |" in doc and f"| {SEQUENCE}; **1** in a model that also has a past dim |" in doc


# --- the first command on every fixture ----------------------------------------------------------


@pytest.mark.parametrize("fixture", ALL_FIXTURES)
def test_first_command_gives_a_result_with_a_notice(fixture, capsys):
    expected = expected_for(fixture)
    assert main([str(FIXTURES / fixture), "--hw", "h100", "--format", "json"]) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert report["model"]["dims"] == expected
    assert report["model"]["defaulted_dims"] == sorted(expected)
    assert report["uncosted"]["count"] == 0
    (notice,) = captured.err.strip().splitlines()  # one line, naming each default
    assert notice.startswith("onnx-roofline: note: unbound dims set to defaults: ")
    assert all(f"{name}={size}" in notice for name, size in expected.items())
    # the same figures as binding those sizes by hand
    bound = onnx_roofline.analyze(FIXTURES / fixture, sizing=Sizing(dims=expected))
    assert report["totals"]["flops"] == bound.totals.flops and report["totals"]["bytes"] == bound.totals.bytes


def test_table_marks_defaults_and_given_dims_are_not_notes(capsys):
    path = str(FIXTURES / "gpt2_decode_fp16.onnx")
    assert main([path, "--dim", "past_sequence=1023", "--top", "1"]) == 0
    captured = capsys.readouterr()
    assert "dims: batch=1 (default), past_sequence=1023" in captured.out
    assert "batch=1" in captured.err and "past_sequence" not in captured.err
    assert main([path, "--dim", "batch=1", "--dim", "past_sequence=1023", "--top", "1"]) == 0
    assert "note:" not in capsys.readouterr().err  # nothing defaulted, nothing said


# --- strict where it must be ---------------------------------------------------------------------


def test_check_is_strict_names_dims_not_inputs_and_prints_a_command_that_works(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = str(FIXTURES / "gpt2_decode_fp16.onnx")
    assert main(["check", path, "--max-latency", "1ms"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "dimension 'batch' is unbound" in line and "also unbound: past_sequence" in line
    assert (
        "'input_ids', 'past.0.key' and 23 more" in line and "past.5.key" not in line
    )  # 25 inputs use batch: not listed
    command = re.search(r"`([^`]+)`", line).group(1)
    assert command == f"onnx-roofline check {path} --max-latency 1ms --dim batch=1 --dim past_sequence=511"
    assert main(shlex.split(command)[1:]) == 0  # the printed command works


def test_python_errors_speak_python():
    with pytest.raises(UnboundDimensionError) as caught:
        onnx_roofline.analyze(FIXTURES / "gpt2_decode_fp16.onnx")
    error = caught.value
    assert isinstance(error, DimensionError)
    assert error.dims == ("batch", "past_sequence") and error.suggested == {"batch": 1, "past_sequence": 511}
    assert len(error.inputs["batch"]) == 25 and len(error.inputs["past_sequence"]) == 24
    text = str(error)
    assert "dims={'batch': 1, 'past_sequence': 511}" in text and "partial=True" in text
    assert "--" not in text  # no flag in a library message
    again = pickle.loads(pickle.dumps(error))
    assert str(again) == text and again.dims == error.dims
    # the suggestion works
    assert (
        onnx_roofline.analyze(FIXTURES / "gpt2_decode_fp16.onnx", sizing=Sizing(dims=error.suggested)).uncosted.count
        == 0
    )


@pytest.mark.parametrize(
    ("kwargs", "python", "flag_args", "cli"),
    [
        (
            {"dims": {"bacth": 1}},
            "dims key 'bacth' is not a dimension",
            ["--dim", "bacth=1"],
            "--dim 'bacth' is not a dimension",
        ),
        (
            {"input_shapes": {"nope": (1, 2, 768)}},
            "input_shapes key 'nope' is not a model input",
            ["--input", "nope=1x2x768"],
            "--input 'nope' is not a model input",
        ),
        (
            {"input_shapes": {"x": (1, 2)}},
            "input_shapes['x']: rank 2 given",
            ["--input", "x=1x2"],
            "--input x: rank 2 given",
        ),
        (
            {"values": {"nope": 3}},
            "values key 'nope' is not a model input",
            ["--value", "nope=3"],
            "--value 'nope' is not a model input",
        ),
    ],
)
def test_each_error_in_its_own_language(tmp_path, capsys, kwargs, python, flag_args, cli):
    path = tmp_path / "mlp.onnx"
    onnx.save(symbolic_matmul(), path)
    with pytest.raises(DimensionError) as caught:
        onnx_roofline.analyze(path, **kwargs)
    assert python in str(caught.value) and "--" not in str(caught.value)
    assert main([str(path), *flag_args]) == 2
    assert cli in capsys.readouterr().err


# --- input dims with no name -------------------------------------------------------------------


def _unnamed_batch_model(also_declared: str | None = None) -> onnx.ModelProto:
    """skl2onnx's and tf2onnx's inputs: X [?, 6] (a dim with neither size nor name) → MatMul by a
    [6, 3] weight → Relu. `also_declared`: a symbol an output's declared shape already uses."""
    weight = numpy_helper.from_array(np.ones((6, 3), np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["X", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])], "g",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [also_declared, 3] if also_declared else None)],
        initializer=[weight],
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_an_unnamed_input_dim_is_named_and_binds_like_any_symbolic_dim(tmp_path, capsys):
    path = tmp_path / "unnamed.onnx"
    onnx.save(_unnamed_batch_model(), path)
    before = path.read_bytes()
    assert main([str(path), "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert "unbound dims set to defaults: X_dim0=1" in captured.err
    report = json.loads(captured.out)
    assert report["totals"]["costed_nodes"] == 2 and report["model"]["defaulted_dims"] == ["X_dim0"]
    assert (
        report["totals"]["flops"] == 2 * 1 * 6 * 3 + 1 * 3
    )  # [1, 6] @ [6, 3]: a multiply-add per (row, column, k); Relu: 1 per output
    assert main([str(path), "--dim", "X_dim0=4", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["totals"]["flops"] == 2 * 4 * 6 * 3 + 4 * 3
    assert main(["inspect", str(path)]) == 0
    assert "[X_dim0, 6]" in capsys.readouterr().out
    with pytest.raises(UnboundDimensionError, match="X_dim0"):  # the API stays strict, and says which dim
        onnx_roofline.analyze(path)
    assert path.read_bytes() == before  # named in the analysis's copy, never in the file


def test_an_empty_dim_name_is_no_name():
    """skl2onnx declares a text input's batch as dim_param "": named like an unset one."""
    model = _unnamed_batch_model()
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = ""
    assert model.graph.input[0].type.tensor_type.shape.dim[0].WhichOneof("value") == "dim_param"
    report = onnx_roofline.analyze(model, sizing=Sizing(dims={"X_dim0": 3}))
    assert report.nodes[0].outputs[0].shape == (3, 3)


def test_an_unnamed_dim_takes_a_name_no_declared_type_uses():
    model = _unnamed_batch_model(
        also_declared="X_dim0"
    )  # the output's first dim: another symbol, which must stay apart
    report = onnx_roofline.analyze(model, sizing=Sizing(dims={"X_dim0_": 2}))
    assert report.model.dims == {"X_dim0_": 2}
    assert report.nodes[0].outputs[0].shape == (2, 3)


# --- --partial with no dims ----------------------------------------------------------------------


def test_nothing_costed_with_every_dim_bound_points_at_the_root_cause(tmp_path, capsys):
    # No dim to bind: the one node has no shape rule. Binding dims or --partial would not help.
    path = tmp_path / "mystery.onnx"
    graph = helper.make_graph(
        [helper.make_node("Mystery", ["x"], ["y"], domain="acme")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    onnx.save(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("acme", 1)]), path
    )
    assert main([str(path)]) == 2  # nothing costed is no answer (docs/defaults.md, "Nothing costed")
    captured = capsys.readouterr()
    (line,) = captured.err.splitlines()
    assert (
        line.startswith("onnx-roofline: error: none of the 1 nodes could be costed")
        and "(Mystery)" in line
        and "fix: " in line
    )
    assert "--partial" not in captured.err + captured.out and captured.out == ""


def test_partial_without_dims_does_not_read_as_a_result(tmp_path, capsys):
    path = tmp_path / "mlp.onnx"
    onnx.save(symbolic_matmul(), path)
    assert main([str(path), "--partial"]) == 2  # nothing costed: exit 2, the cause and the fix on one line
    captured = capsys.readouterr()
    assert (
        captured.out == ""
        and "fix: bind the dims (--dim batch=N, --dim sequence=N), or drop --partial to take the defaults"
        in captured.err
    )
    assert "note:" not in captured.err  # --partial takes no default: unbound stays unbound
    from onnx_roofline.report.table import render_table

    report = onnx_roofline.analyze(path, partial=True)  # the API's report, rendered, still never reads as a result
    table = render_table(report)
    assert "totals    unknown: none of the 1 nodes could be costed" in table
    totals_lines = [line for line in table.splitlines() if line.startswith(("totals", "latency"))]
    assert len(totals_lines) == 2 and not any("0 FLOP" in line or "0.0 ns" in line for line in totals_lines)
    assert (
        "latency   unknown: bind the dims (--dim batch=N, --dim sequence=N), or drop --partial to take the defaults"
        in table
    )
    assert report.to_dict()["totals"]["costed_nodes"] == 0 and report.model.defaulted_dims == ()


# --- --quiet, --verbose, did-you-mean ------------------------------------------------------------


def test_quiet_says_nothing_and_verbose_says_what_ran(capsys):
    path = str(FIXTURES / "gpt2_decode_fp16.onnx")
    assert main([path, "--quiet", "--format", "json"]) == 0
    assert capsys.readouterr().err == ""
    assert main([path, "-v", "--dim", "past_sequence=1023", "--format", "json"]) == 0
    err = capsys.readouterr().err
    assert "dims: batch=1 (default: batch), past_sequence=1023 (given)" in err
    assert "shape passes: onnx" in err and "node outputs typed" in err and "nodes: ok 648" in err
    with pytest.raises(SystemExit) as caught:  # argparse's usage error: one or the other
        main([path, "-q", "-v"])
    assert caught.value.code == 2


@pytest.mark.parametrize(("typed", "meant"), [("h10", "h100"), ("a10O", "a100"), ("h100-pci", "h100-pcie")])
def test_hw_did_you_mean(typed, meant, capsys):
    assert main([str(FIXTURES / "resnet50_fp16.onnx"), "--hw", typed]) == 2
    assert f"did you mean `{meant}`?" in capsys.readouterr().err


def test_a_dim_named_by_an_expression_of_dims_given_is_bound_by_them(tmp_path, capsys):
    """optimum names the attention mask's length `past_sequence_length + sequence_length`: given
    the two, the strict commands (check, verify) take it too, and the default table calls it no
    default: the sizes given determine it (5 + 3 = 8)."""
    total = "past_sequence_length + sequence_length"
    nodes = [
        helper.make_node("Relu", ["mask"], ["a"]),
        helper.make_node("Relu", ["ids"], ["b"]),
        helper.make_node("Relu", ["past"], ["c"]),
    ]
    inputs = [helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["batch", total]),
              helper.make_tensor_value_info("ids", TensorProto.FLOAT, ["batch", "sequence_length"]),
              helper.make_tensor_value_info("past", TensorProto.FLOAT, ["batch", "past_sequence_length"])]  # fmt: skip
    outputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in "abc"]
    path = tmp_path / "mask.onnx"
    onnx.save(
        helper.make_model(helper.make_graph(nodes, "g", inputs, outputs), opset_imports=[helper.make_opsetid("", 17)]),
        path,
    )
    given = ["--dim", "batch=2", "--dim", "sequence_length=3", "--dim", "past_sequence_length=5"]
    report = onnx_roofline.analyze(
        path, sizing=Sizing(dims={"batch": 2, "sequence_length": 3, "past_sequence_length": 5})
    )
    assert report.nodes[0].outputs[0].shape == (2, 8) and report.model.defaulted_dims == ()
    assert main(["check", str(path), *given, "--max-latency", "1s"]) == 0
    assert main(["verify", str(path), *given]) == 0
    capsys.readouterr()
    assert main([str(path), *given]) == 0
    assert "note:" not in capsys.readouterr().err  # nothing defaulted


def test_a_total_length_is_the_past_and_the_step_given(capsys):
    """onnxruntime-genai names its mask's length `total_sequence_length`: the cache after this step,
    past + new tokens. Given the two, the strict commands bind it (12 + 1 = 13): a context sweep
    over the past moves it at each point, and GroupQueryAttention's present holds 13 positions, as
    onnxruntime's does. Two past lengths leave it unbound: which one would it follow?"""
    path = CORPUS / "genai_llama_int4.onnx"
    dims = {
        "batch_size": 1,
        "sequence_length": 1,
        "past_sequence_length": 12,
        "kv_cache_dim": 128 // 4,
    }  # corpus: hidden 128, 4 heads
    report = onnx_roofline.analyze(path, sizing=Sizing(dims=dims))
    assert report.model.dims["total_sequence_length"] == 12 + 1 and report.totals.uncosted_nodes == 0
    (attention, *_) = [n for n in report.nodes if n.op_type == "GroupQueryAttention"]
    assert attention.outputs[1].shape == (1, 2, 13, 32)  # present key: batch, 2 KV heads, past + 1, head size
    assert derived_dims(["total_sequence_length"], {"past_a": 3, "past_b": 4, "sequence": 1}) == {}
    given = [f"--dim={name}={size}" for name, size in dims.items() if name != "past_sequence_length"]
    assert (
        main(["context", str(path), *given, "--context", "16,32"]) == 0
    )  # the cache's dim found, not kv_cache_dim (also on past, and present)
    assert capsys.readouterr().out.splitlines()[1].startswith("past_sequence_length")
