"""Sizes that are data, assumed (--nonzero-fraction, selection.py): a NonZero's or Compress's
output sized as if a share of its candidates were selected, the count a graph fixes downstream
kept, the assumption named in every output; an MoE export from transformers fully costed."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnx_roofline import Sizing, analyze
from onnx_roofline.commands.cli import main
from onnx_roofline.model.tensors import TensorInfo
from onnx_roofline.shapes.selection import assumed_count, candidates, parse_fraction, selected_shape


def _model(nodes, inputs, outputs, initializers=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _routed(tokens=8, hidden=16, ffn=32):
    """An expert's share of the tokens: NonZero of a router mask picks the rows of x it
    multiplies, as transformers' eager MoE experts do (`torch.where(mask)`, `x[token_idx]`)."""
    weight = numpy_helper.from_array(np.zeros((hidden, ffn), np.float32), "w")
    nodes = [
        helper.make_node("NonZero", ["mask"], ["where"]),  # [1, n]
        helper.make_node("Squeeze", ["where", "zero"], ["rows"]),  # [n]
        helper.make_node("Gather", ["x", "rows"], ["picked"], axis=0),  # [n, hidden]
        helper.make_node("MatMul", ["picked", "w"], ["y"]),  # [n, ffn]
    ]
    zero = numpy_helper.from_array(np.array([0], np.int64), "zero")
    inputs = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [tokens, hidden]),
        helper.make_tensor_value_info("mask", TensorProto.BOOL, [tokens]),
    ]
    return _model(nodes, inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [weight, zero])


def test_parse_fraction_takes_a_decimal_or_a_ratio_in_zero_to_one():
    assert parse_fraction("0.125") == 0.125
    assert parse_fraction("1/8") == 0.125
    assert parse_fraction(" 1 ") == 1.0
    for bad in ("2", "-0.1", "abc", "1/0", "nan", ""):
        with pytest.raises(ValueError):
            parse_fraction(bad)


def test_the_assumed_count_rounds_up_within_the_candidates():
    data = TensorInfo("x", (3, 4), "float")
    assert candidates("NonZero", {}, (data,)) == 12
    assert assumed_count(12, 0.25) == 3 and selected_shape("NonZero", {}, data, 3) == (2, 3)
    assert assumed_count(12, 1 / 3) == 4  # not 5 from rounding error
    assert assumed_count(12, 0.01) == 1  # any share keeps at least one
    assert assumed_count(12, 0.0) == 0
    condition = TensorInfo("c", (4,), "bool")
    assert candidates("Compress", {"axis": 1}, (data, condition)) == 4
    assert selected_shape("Compress", {"axis": 1}, data, 2) == (3, 2)
    assert (
        candidates("Compress", {"axis": -2}, (data, TensorInfo("c", (2,), "bool"))) == 2
    )  # the condition's 2 of 3 rows
    assert selected_shape("Compress", {"axis": -2}, data, 2) == (2, 4)
    assert candidates("Compress", {}, (data, condition)) == 4  # flattened: the condition's 4 leading elements
    assert selected_shape("Compress", {}, data, 2) == (2,)
    assert candidates("NonZero", {}, (TensorInfo("x", ("n", 4), "float"),)) is None


def test_without_the_flag_each_selection_is_at_most_all_its_candidates():
    """A NonZero keeps at most every element of its input (bounds.selection_bound): costed there,
    every node downstream labelled at most, nothing left out."""
    report = analyze(_routed(tokens=8, hidden=16, ffn=32))
    assert report.uncosted.count == 0
    matmul = next(n for n in report.nodes if n.op_type == "MatMul")
    assert matmul.inputs[0].shape == (8, 16) and matmul.at_most  # all 8 tokens at most
    assert matmul.cost.flops == 2 * 8 * 16 * 32  # 2·M·K·N with M = 8 rows
    (bound,) = report.model.bounds
    assert (bound.op_type, bound.rows) == ("NonZero", 8)
    assert report.model.assumed is None


def test_with_a_fraction_every_node_is_costed_at_the_share_of_the_tokens():
    report = analyze(_routed(tokens=8, hidden=16, ffn=32), sizing=Sizing(nonzero_fraction=0.25))
    assert report.uncosted.count == 0
    matmul = next(n for n in report.nodes if n.op_type == "MatMul")
    assert matmul.inputs[0].shape == (2, 16)  # 8 tokens × 1/4
    assert matmul.cost.flops == 2 * 2 * 16 * 32  # 2·M·N·K with M = 2 rows
    assert report.model.assumed.nonzero_fraction == 0.25
    assert report.model.assumed.nodes == ("NonZero_0",)
    assert report.to_dict()["model"]["assumed"] == {"nonzero_fraction": 0.25, "nodes": ["NonZero_0"]}


def test_a_constant_mask_is_folded_not_assumed():
    """Where the mask is a constant, the count is known: the assumption does not replace it."""
    model = _routed()
    mask = numpy_helper.from_array(np.array([1, 0, 0, 1, 1, 0, 0, 0], bool), "mask")
    model.graph.initializer.append(mask)
    del model.graph.input[1]
    report = analyze(model, sizing=Sizing(nonzero_fraction=0.5))
    assert next(n for n in report.nodes if n.op_type == "MatMul").inputs[0].shape == (3, 16)  # the 3 true of the mask
    assert report.model.assumed.nodes == ()


def test_a_split_of_the_selection_into_constant_sizes_fixes_its_count():
    """A TorchScript trace unrolls `for e in experts_hit` for the count it saw: NonZero → Transpose
    → Split into [1, 1, 1]; the graph runs at that count alone, whatever the fraction."""
    nodes = [
        helper.make_node("NonZero", ["hit"], ["where"]),  # [1, n]
        helper.make_node("Transpose", ["where"], ["each"], perm=[1, 0]),  # [n, 1]
        helper.make_node("Split", ["each", "sizes"], ["a", "b", "c"], axis=0),
    ]
    sizes = numpy_helper.from_array(np.array([1, 1, 1], np.int64), "sizes")
    outputs = [helper.make_tensor_value_info(name, TensorProto.INT64, None) for name in "abc"]
    model = _model(nodes, [helper.make_tensor_value_info("hit", TensorProto.BOOL, [5])], outputs, [sizes])
    report = analyze(model, sizing=Sizing(nonzero_fraction=0.25))
    assert report.uncosted.count == 0
    assert report.nodes[0].outputs[0].shape == (1, 3)  # the Split's 1 + 1 + 1, not ceil(5 / 4) = 2
    assert report.model.assumed.nodes == ()  # the graph's count, not an assumption
    plain = analyze(model)  # and without one: the graph runs at this count alone
    assert plain.uncosted.count == 0 and plain.nodes[0].outputs[0].shape == (1, 3) and plain.model.assumed is None


def test_the_command_line_names_the_assumption_in_the_table_json_and_stderr(tmp_path, capsys):
    path = tmp_path / "routed.onnx"
    path.write_bytes(_routed().SerializeToString())
    assert main([str(path), "--nonzero-fraction", "1/4"]) == 0
    captured = capsys.readouterr()
    assert (
        "ASSUMED   NonZero/Compress select 0.25 of their candidates (--nonzero-fraction): 1 node sized by it"
        in captured.out
    )
    assert "onnx-roofline: warning: assumed: NonZero/Compress select 0.25" in captured.err
    assert main([str(path), "--nonzero-fraction", "0.25", "--format", "json", "-q"]) == 0
    assert json.loads(capsys.readouterr().out)["model"]["assumed"] == {"nonzero_fraction": 0.25, "nodes": ["NonZero_0"]}
    assert main(["check", str(path), "--nonzero-fraction", "0.25"]) == 0  # every node costed: the gate passes
    assert main(["check", str(path)]) == 0  # and at the bound without it


@pytest.mark.parametrize(
    "args", [["--nonzero-fraction", "1.5"], ["--nonzero-fraction", "x"], ["verify", "--nonzero-fraction", "0.5"]]
)
def test_a_bad_fraction_or_verify_with_one_is_a_usage_error(tmp_path, capsys, args):
    """verify checks the sizes a real run produces: an assumed size is not one."""
    path = tmp_path / "routed.onnx"
    path.write_bytes(_routed().SerializeToString())
    command = [args[0], str(path), *args[1:]] if args[0] == "verify" else [str(path), *args]
    with pytest.raises(SystemExit) as exit_:
        main(command)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--nonzero-fraction" in err


def test_a_transformers_mixtral_export_with_eager_experts_is_costed_under_uniform_routing(tmp_path):
    """transformers' eager MoE experts, TorchScript export: each expert takes the tokens routed to
    it through NonZero of its one-hot mask. With F = 1/num_experts (uniform routing) every node is
    costed, and each expert's two matmuls take tokens · top_k / experts rows (formula below)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    experts, top_k, tokens, hidden, ffn = 4, 2, 8, 64, 96
    config = transformers.MixtralConfig(
        vocab_size=128, hidden_size=hidden, intermediate_size=ffn, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        num_local_experts=experts, num_experts_per_tok=top_k, max_position_embeddings=64, experts_implementation="eager",
    )  # fmt: skip
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = transformers.MixtralForCausalLM(config).eval()

    class Logits(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, ids, mask):
            return self.model(input_ids=ids, attention_mask=mask, use_cache=False).logits

    ids = torch.randint(0, 128, (1, tokens))
    path = tmp_path / "mixtral.onnx"
    torch.onnx.export(Logits(), (ids, torch.ones_like(ids)), str(path), dynamo=False, input_names=["input_ids", "attention_mask"],
                      output_names=["logits"], dynamic_axes={"input_ids": {1: "sequence"}, "attention_mask": {1: "sequence"}}, opset_version=17)  # fmt: skip
    assert (
        analyze(path, sizing=Sizing(dims={"sequence": tokens})).uncosted.count == 0
    )  # the experts recognized, sized by uniform routing (issue 34)
    report = analyze(path, sizing=Sizing(dims={"sequence": tokens}, nonzero_fraction=1 / experts))
    assert report.uncosted.count == 0
    expert_matmuls = [n for n in report.nodes if n.op_type in ("MatMul", "Gemm") and "experts" in n.name]
    hit = len(expert_matmuls) // 2  # the trace unrolls the experts its random routing hit: gate_up and down each
    rows = tokens * top_k // experts  # uniform routing: 8 tokens × 2 choices / 4 experts = 4 rows per expert
    per_expert = (
        2 * rows * hidden * (2 * ffn) + 2 * rows * ffn * hidden
    )  # gate_up [rows, 64]×[64, 192], down [rows, 96]×[96, 64]
    assert sum(n.cost.flops for n in expert_matmuls) == hit * per_expert
    assert math.isclose(report.model.assumed.nonzero_fraction, 0.25)
    assert all("experts/NonZero" in name for name in report.model.assumed.nodes)


def test_a_policy_file_carries_the_fraction_and_the_flag_wins(tmp_path, capsys):
    path = tmp_path / "routed.onnx"
    path.write_bytes(_routed().SerializeToString())
    policy = tmp_path / "roofline.toml"
    policy.write_text('nonzero_fraction = "1/8"\n')
    assert main(["check", str(path), "--policy", str(policy), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["model"]["nonzero_fraction"] == 0.125
    assert main(["check", str(path), "--policy", str(policy), "--nonzero-fraction", "0.5"]) == 0
    assert (
        "assumed: NonZero/Compress select 0.5 of their candidates" in capsys.readouterr().out
    )  # the gate's text says it
    assert main(["check", str(path), "--format", "json"]) == 0  # costed at the bound without one
    assert json.loads(capsys.readouterr().out)["model"]["nonzero_fraction"] is None


def test_the_what_if_studies_take_the_fraction_and_say_so(tmp_path, capsys):
    path = tmp_path / "routed.onnx"
    path.write_bytes(_routed(tokens=8).SerializeToString())
    assert main(["sweep", str(path), "--nonzero-fraction", "0.5", "--format", "json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["nonzero_fraction"] == 0.5
    assert main(["sweep", str(path), "--nonzero-fraction", "1/2"]) == 0
    assert "assumed: NonZero/Compress select 0.5 of their candidates" in capsys.readouterr().out.splitlines()[0]
