"""Breakdowns: module paths from name_scopes metadata or node names, groupings that add up exactly."""

from __future__ import annotations

import re

import pytest
from onnx import helper

from onnx_roofline import Sizing, analyze
from onnx_roofline.commands.cli import main
from onnx_roofline.model.nodes import read_nodes
from onnx_roofline.report.breakdown import (
    MODULE,
    OP_TYPE,
    breakdown,
    by_module,
    by_op_type,
    module_at,
    module_of,
    module_path,
    natural_key,
    scopes,
    top_nodes,
)
from onnx_roofline.report.model import NodeResult
from tests.conftest import FIXTURES, one_node_model

PREFILL = {"batch": 1, "sequence": 1024}
LAYERS = [f"model.transformer.h.{i}" for i in range(12)]


def node(name: str, name_scopes: str | None = None) -> NodeResult:
    proto = helper.make_node("MatMul", ["a", "b"], ["c"], name=name)
    if name_scopes is not None:
        helper.set_metadata_props(proto, {"pkg.torch.onnx.name_scopes": name_scopes})
    return NodeResult(
        0, name, "MatMul", "", (), (), "ok", graph_node=read_nodes(helper.make_graph([proto], "g", [], []))[0]
    )


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (
            "/model/transformer/h.0/attn/MatMul",
            ("model", "model.transformer", "model.transformer.h.0", "model.transformer.h.0.attn"),
        ),
        (
            "/layer2/layer2.0/conv2/Conv",
            ("layer2", "layer2.0", "layer2.0.conv2"),
        ),  # the Sequential child repeats its parent
        (
            "/layer1/layer1.0/downsample/downsample.0/Conv",
            ("layer1", "layer1.0", "layer1.0.downsample", "layer1.0.downsample.0"),
        ),
        ("/MatMul", ()),
        ("node_MatMul_12", ()),  # a dynamo name without a path: no module
    ],
)
def test_scopes_from_node_names(name, expected):
    assert scopes(node(name)) == expected


def test_name_scopes_metadata_comes_first():
    dynamo = node(
        "node_MatMul_3",
        "['', 'model', 'model.transformer', 'model.transformer.h.3', 'model.transformer.h.3.attn', 'matmul_3']",
    )
    assert module_path(dynamo) == "model.transformer.h.3.attn"  # the last entry is the FX node, not a module
    assert [module_at(dynamo, d) for d in (1, 2, 3, 4, 9)] == [
        "model",
        "model.transformer",
        "model.transformer.h.3",
        "model.transformer.h.3.attn",
        "model.transformer.h.3.attn",
    ]
    # torch's placeholder for nodes outside the module stack is no module, whatever the name says
    assert module_path(node("/Shape", "['_empty_nn_module_stack_from_metadata_hook', 'sym_size_int_83']")) == ""
    assert module_path(node("/relu/Relu", "['', 'relu', 'relu']")) == "relu"
    # unreadable metadata: fall back to the name
    assert module_path(node("/lm_head/MatMul", "not a list")) == "lm_head"


def test_metadata_reaches_the_breakdown_from_a_model():
    model = one_node_model("Relu", [("x", "float32", [4])], [("y", "float32", [4])])
    model.graph.node[0].name = "node_Relu_0"
    helper.set_metadata_props(
        model.graph.node[0], {"pkg.torch.onnx.name_scopes": "['', 'encoder', 'encoder.act', 'relu']"}
    )
    (group,) = by_module(analyze(model), depth=2)
    assert group.key == "encoder.act" and len(group.nodes) == 1


def test_natural_order_puts_h2_before_h10():
    assert sorted(["h.10", "h.2", "h.1"], key=natural_key) == ["h.1", "h.2", "h.10"]


@pytest.fixture(scope="module")
def prefill():
    return analyze(FIXTURES / "gpt2_prefill_fp32.onnx", sizing=Sizing(dims=PREFILL))


@pytest.fixture(scope="module")
def prefill_torchscript():
    return analyze(FIXTURES / "gpt2_prefill_fp32_torchscript.onnx", sizing=Sizing(dims=PREFILL))


@pytest.mark.parametrize("which", ["prefill", "prefill_torchscript"])
def test_gpt2_layers_and_blocks(which, request):
    report = request.getfixturevalue(which)
    layers = {g.key: g for g in by_module(report, depth=3)}
    assert [k for k in layers if k.startswith("model.transformer.h.")] == LAYERS  # heaviest first, then h.1 … h.11
    blocks = {g.key for g in by_module(report, depth=4)}
    for layer in LAYERS:
        assert {f"{layer}.attn", f"{layer}.mlp"} <= blocks
        # every MatMul/Gemm of a layer sits in its attn or mlp block: 4 weight GEMMs + 2 attention products
        matmuls = [n for n in layers[layer].nodes if n.op_type in ("MatMul", "Gemm")]
        assert {module_at(n, 4).rsplit(".", 1)[-1] for n in matmuls} == {"attn", "mlp"}
        assert len(matmuls) == 6
    # the layers are identical; h.0 may also hold the causal mask's construction (dynamo puts it there)
    assert len({layers[k].totals.flops for k in LAYERS[1:]}) == 1
    assert layers[LAYERS[0]].totals.flops >= layers[LAYERS[1]].totals.flops


@pytest.mark.parametrize(("family", "depth"), [(OP_TYPE, 3), *((MODULE, d) for d in range(1, 7))])
def test_gpt2_prefill_breakdowns_sum_to_the_totals(prefill, family, depth):
    groups = breakdown(prefill, family, depth)
    totals = prefill.totals
    assert sum(len(g.nodes) for g in groups) == len(prefill.nodes)
    for field in ("flops", "transcendentals", "bytes_read", "bytes_written", "costed_nodes", "uncosted_nodes"):
        assert sum(getattr(g.totals, field) for g in groups) == getattr(totals, field), field  # ints: exact
    assert sum(g.totals.time_s for g in groups) == pytest.approx(totals.time_s, rel=1e-12)  # same terms, another order
    assert sum(g.totals.memory_bound_time_s for g in groups) == pytest.approx(totals.memory_bound_time_s, rel=1e-12)


def test_op_type_groups_and_top_nodes(prefill):
    groups = by_op_type(prefill)
    assert [g.totals.time_s for g in groups] == sorted((g.totals.time_s for g in groups), reverse=True)
    top = top_nodes(prefill, 3)
    assert top[0].name == "/model/lm_head/MatMul"
    assert [n.time_s for n in top] == sorted((n.time_s for n in prefill.nodes if n.time_s is not None), reverse=True)[
        :3
    ]


def test_table_shows_module_breakdown(capsys):
    code = main(
        [
            str(FIXTURES / "gpt2_prefill_fp32.onnx"),
            "--dim",
            "batch=1",
            "--dim",
            "sequence=1024",
            "--by",
            "module",
            "--depth",
            "3",
            "--top",
            "2",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "by module (depth 3)" in out and "by op type" not in out
    rows = re.findall(r"^(model\.transformer\.h\.\d+) ", out, flags=re.M)
    assert rows == LAYERS


def test_breakdowns_count_transcendentals(capsys):
    """GPT-2 decode at batch 1: each of the 12 layers' GELU takes one tanh per MLP activation,
    12 · 3072 = 36,864, which the Tanh row says (its FLOPs alone are 0) as the node rows do."""
    code = main([str(FIXTURES / "gpt2_decode_fp32.onnx"), "--dim", "batch=1", "--dim", "past_sequence=8", "-q"])
    out = capsys.readouterr().out
    assert code == 0
    (tanh,) = re.findall(r"^Tanh .*$", out, flags=re.M)
    assert "0 FLOP + 36.86 k transc." in tanh
    assert re.search(r"^totals +[\d.]+ MFLOP \+ [\d.]+ k transc\.", out, flags=re.M)


def test_a_conv_is_not_renamed_by_the_batchnorm_folded_into_it():
    """The dynamo ResNet-50 fixture went through onnxscript's optimizer, which folded every
    BatchNorm into its Conv and left the Conv with the BatchNorm's metadata (`bn1`): the Conv's
    module is its own name's (`/conv1/Conv` is in `conv1`), and no module is a BatchNorm's."""
    report = analyze(FIXTURES / "resnet50_fp32.onnx", sizing=Sizing(dims={"batch": 1}))
    convs = [n for n in report.nodes if n.op_type == "Conv"]
    assert module_path(convs[0]) == "conv1"
    assert all(module_path(n) == module_of(n.name) for n in convs)
    assert not [g.key for g in by_module(report, 9) if ".bn" in f".{g.key.rsplit('.', 1)[-1]}"]
