"""Mixture of experts (issue 34), on optimum's own exports of tiny random MoE decoders
(tests/corpus/moe: Qwen3-MoE and DeepSeek-V3 select each expert's tokens with a NonZero, GPT-OSS
runs every token through every expert). Every expected figure is derived here from the config
the generator wrote (tests/corpus/optimum_moe.py), never from the tool's output."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import onnx
import pytest

from onnx_roofline import Sizing, analyze, json_schema
from onnx_roofline.commands.cli import main
from onnx_roofline.model.experts import recognize
from onnx_roofline.model.nodes import read_nodes
from onnx_roofline.report.serialize import render_json
from onnx_roofline.views.deployed import deploy
from onnx_roofline.views.experts import GROUPED_GEMM
from tests.test_loader import external_weight

MOE = Path(__file__).resolve().parent / "corpus" / "moe"
QWEN, GPT_OSS, DEEPSEEK = (
    MOE / f"optimum_{arch}_decoder_with_past_model.onnx" for arch in ("qwen3_moe", "gpt_oss", "deepseek_v3")
)
H, E, K, I, V, L = 64, 4, 2, 32, 256, 2  # noqa: E741 (the config's letters) hidden, experts, top-k, expert width, vocabulary, layers (the generator's config)
HEADS, KV_HEADS, D = 4, 2, 16  # attention heads, KV heads, head width
T, PAST = 8, 24  # the step: 8 new tokens on a 24-token cache, batch 1
STEP = {"batch_size": 1, "sequence_length": T, "past_sequence_length": PAST}
FP32 = 4


def _decode(batch: int) -> dict[str, int]:
    return {"batch_size": batch, "sequence_length": 1, "past_sequence_length": PAST}


def _export_constants(path: Path) -> int:
    """Elements of the float tensors the exporter stores in Constant nodes (RMSNorm's epsilon,
    the rotary frequencies): weights by the project's convention, in no config."""
    graph = onnx.load(path, load_external_data=False).graph
    floats = (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16)
    return sum(
        math.prod(a.t.dims)
        for n in graph.node
        if n.op_type == "Constant"
        for a in n.attribute
        if a.name == "value" and a.t.data_type in floats
    )


# --- bindings only: every node costed, the active experts' FLOPs --------------------------------


def test_bindings_alone_cost_every_node_at_the_active_experts_flops():
    report = analyze(QWEN, sizing=Sizing(dims=STEP))
    assert not report.unsupported and report.uncosted.count == 0
    attention_per_layer = (
        2 * T * H * HEADS * D  # q_proj
        + 2 * 2 * T * H * KV_HEADS * D  # k_proj, v_proj
        + 2 * 2 * HEADS * T * (PAST + T) * D  # Q·Kᵀ and scores·V over the 32 positions
        + 2 * T * HEADS * D * H  # o_proj
    )
    router = 2 * T * H * E
    experts = T * K * 3 * 2 * H * I  # tokens·k expert passes, each gate, up and down: 3 matmuls of H×I
    rotary = 2 * (D // 2) * T  # inv_freq [8, 1] × positions [1, T]
    expected = L * (attention_per_layer + router + experts) + 2 * T * H * V + rotary  # + lm_head; no shared expert
    matrix = sum(n.matrix_flops for n in report.nodes)
    assert matrix == pytest.approx(expected, rel=0.01)
    summary = report.model.experts
    assert "uniform routing" in summary.assumption and "tokens·2/4" in summary.assumption
    assert [layer.rows for layer in summary.layers] == [(T * K // E,) * E] * L  # 4 rows each: 16 choices over 4 experts
    assert len(summary.sized) == E * L


def test_the_assumption_and_the_parameters_are_in_every_format(capsys, tmp_path):
    dims = [f"--dim={name}={size}" for name, size in STEP.items()]
    assert main([str(QWEN), *dims]) == 0
    table = capsys.readouterr().out
    assert (
        "ASSUMED   uniform routing" in table and "4 experts, top-2, 0 shared" in table and "active per token" in table
    )
    assert main([str(QWEN), *dims, "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    experts = document["model"]["experts"]
    assert experts["load"] == "uniform" and experts["layers"][0]["top_k"] == K and experts["layers"][0]["experts"] == E
    page = tmp_path / "report.html"
    assert main([str(QWEN), *dims, "--format", "html", "-o", str(page)]) == 0
    html = page.read_text()
    assert "uniform routing" in html and "active per token" in html
    assert main([str(MOE), "--format", "csv"]) == 0  # several models: one summary row each
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert all("top-2" in row["experts"] and "active per token" in row["experts"] for row in rows) and len(rows) == 3


# --- parameters: total and active per token -------------------------------------------------------


def _attention_parameters_qwen3() -> int:
    return H * HEADS * D + 2 * H * KV_HEADS * D + HEADS * D * H + 2 * D  # q, k, v, o projections; q_norm, k_norm


def _attention_parameters_deepseek() -> int:
    nope, rope, rank, v_head = 8, 8, 16, 16  # qk_nope_head_dim, qk_rope_head_dim, kv_lora_rank, v_head_dim
    return (H * HEADS * (nope + rope)  # q_proj (no q_lora_rank)
            + H * (rank + rope) + rank  # kv_a_proj_with_mqa, kv_a_layernorm
            + rank * HEADS * (nope + v_head)  # kv_b_proj
            + HEADS * v_head * H)  # o_proj  # fmt: skip


@pytest.mark.parametrize(("path", "attention", "router", "shared"), [
    (QWEN, _attention_parameters_qwen3(), E * H, 0),  # the router: [H, E]
    (DEEPSEEK, _attention_parameters_deepseek(), E * H + E, 3 * H * I),  # + its score-correction bias; one shared expert of width I
])  # fmt: skip
def test_parameters_total_and_active_per_token_from_the_config(path, attention, router, shared):
    routed = E * 3 * H * I  # E experts of gate, up, down
    per_layer = attention + 2 * H + router + routed + shared  # + input and post-attention RMSNorms
    total = L * per_layer + H + 2 * V * H + _export_constants(path)  # + final norm, embedding, lm_head (untied)
    active = total - L * (E - K) * routed // E  # a token runs k of the E routed experts
    summary = analyze(path, sizing=Sizing(dims=STEP)).model.experts
    assert (summary.parameters, summary.active_parameters) == (total, active)
    assert [layer.shared_experts for layer in summary.layers] == [1 if shared else 0] * L


# --- deployed: one grouped GEMM reading the distinct experts a step touches -----------------------


@pytest.mark.parametrize("batch", [1, 2, 64])
@pytest.mark.parametrize("path", [QWEN, GPT_OSS])
def test_deployed_decode_reads_the_weights_of_the_distinct_experts(path, batch):
    per_expert = 3 * H * I * FP32  # gate, up, down
    if path == GPT_OSS:
        per_expert += (2 * I + H) * FP32  # its gate_up and down biases
    deployed = deploy(analyze(path, sizing=Sizing(dims=_decode(batch))))
    kernels = [k for k in deployed.nodes if k.op_type == GROUPED_GEMM]
    touched = E * (1 - (1 - K / E) ** batch)  # k at one token, 3 of 4 at two, ~E at 64
    assert len(kernels) == L
    for kernel in kernels:
        assert kernel.expert_weight_bytes == pytest.approx(touched * per_expert, rel=0.01)
        assert kernel.cost.bytes_read >= kernel.expert_weight_bytes
    assert not deployed.unsupported


def test_the_dense_export_is_an_moe_written_as_written_and_deployed_routed():
    report = analyze(GPT_OSS, sizing=Sizing(dims=STEP))
    summary = report.model.experts
    assert [(s.form, s.experts, s.top_k) for s in summary.layers] == [("dense", E, K)] * L
    pass_flops = 2 * H * 2 * I + 2 * I * H  # gate_up [H, 2I], down [I, H]
    expert_matmuls = [
        n for n in report.nodes if n.graph_node.position in summary.layers[0].layer.nodes and n.matrix_flops
    ]
    assert (
        sum(n.matrix_flops for n in expert_matmuls) == T * E * pass_flops
    )  # as written: every token through every expert
    kernel = next(k for k in deploy(report).nodes if k.op_type == GROUPED_GEMM)
    assert kernel.matrix_flops == T * K * pass_flops  # deployed: tokens·k passes


# --- the load option, and --nonzero-fraction still overriding ---------------------------------------


def test_the_expert_load_option_sizes_the_experts():
    skew = analyze(QWEN, sizing=Sizing(dims=STEP, expert_load="skew=2")).model.experts
    assert skew.layers[0].rows == (T * K // 2, T * K // 2, 0, 0)  # the choices on a hot half of the experts
    capacity = analyze(QWEN, sizing=Sizing(dims=STEP, expert_load="capacity=1.5")).model.experts
    assert capacity.layers[0].rows == (math.ceil(1.5 * T * K / E),) * E  # 6 rows each: the capacity bound
    with pytest.raises(ValueError, match="expert load"):
        analyze(QWEN, sizing=Sizing(dims=STEP, expert_load="zipf"))


def test_nonzero_fraction_still_overrides_the_routing():
    report = analyze(QWEN, sizing=Sizing(dims=STEP, nonzero_fraction=1.0))
    assert report.model.assumed.nonzero_fraction == 1.0
    assert (
        report.model.experts.layers[0].rows == (K * T,) * E
    )  # every cell of a [k, tokens] mask: per NonZero, as documented
    assert not report.model.experts.sized


def test_experts_are_recognized_from_the_structure_not_the_names():
    model = onnx.load(DEEPSEEK, load_external_data=False)  # every node nameless, every value a number
    renamed = {
        name: f"v{i}"
        for i, name in enumerate(
            dict.fromkeys(n for node in model.graph.node for n in [*node.input, *node.output] if n)
        )
    }
    for node in model.graph.node:
        node.name = ""
        node.input[:] = [renamed.get(n, n) for n in node.input]
        node.output[:] = [renamed.get(n, n) for n in node.output]
    for value in [*model.graph.input, *model.graph.output, *model.graph.initializer]:
        value.name = renamed.get(value.name, value.name)
    found = recognize(model.graph, read_nodes(model.graph))
    assert [(layer.form, layer.experts, layer.top_k, len(layer.routed), len(layer.shared)) for layer in found] == [
        ("routed", E, K, E, 1)
    ] * L


@pytest.mark.parametrize("path", [QWEN, GPT_OSS])
def test_both_views_validate_against_the_shipped_schema(path):
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(json_schema())
    written = analyze(path, sizing=Sizing(dims=_decode(4)))
    deployed = deploy(written)
    for report, other in ((written, deployed), (deployed, written)):
        document = json.loads(render_json(report, other))
        errors = sorted(validator.iter_errors(document), key=lambda e: list(e.path))
        assert not errors, f"{report.view}: {errors[0].message} at {list(errors[0].path)}"
        assert document["model"]["experts"]["layers"][0]["experts"] == E
    assert any("moe" in node for node in json.loads(render_json(deployed, written))["nodes"])


# --- sweep and critical: the distinct experts move the bound -------------------------------------


def _moe_layer(hidden: int = 2048, width: int = 1024, experts: int = 8, top_k: int = 2) -> onnx.ModelProto:
    """One routed MoE layer in fp16 as transformers' eager experts trace (onnx.helper): a router,
    TopK, a one-hot mask over the experts, and per expert a NonZero of its row, its tokens
    gathered, gate·up·down, the result scattered back and accumulated. Weights declared, never filled."""
    from onnx import TensorProto, helper

    f16 = TensorProto.FLOAT16

    def weight(name: str, *dims: int) -> onnx.TensorProto:
        return external_weight(name, list(dims))

    def ints(name: str, *values: int) -> onnx.TensorProto:
        return helper.make_tensor(name, TensorProto.INT64, [len(values)], list(values))

    weights = [weight("router", hidden, experts)]
    nodes = [
        helper.make_node("MatMul", ["x", "router"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["probs"], axis=-1),
        helper.make_node("TopK", ["probs", "k"], ["top", "chosen"], axis=-1),
        helper.make_node("OneHot", ["chosen", "depth", "off_on"], ["one_hot"]),  # [T, k, E]
        helper.make_node("Transpose", ["one_hot"], ["mask"], perm=[2, 1, 0]),  # [E, k, T]
        helper.make_node("Shape", ["x"], ["x_shape"]),
        helper.make_node("ConstantOfShape", ["x_shape"], ["acc_0"]),
    ]
    constants = [ints("k", top_k), ints("depth", experts), ints("off_on", 0, 1), ints("one", 1), ints("row", 1)]
    for e in range(experts):
        weights += [
            weight(f"gate_{e}", hidden, width),
            weight(f"up_{e}", hidden, width),
            weight(f"down_{e}", width, hidden),
        ]
        constants.append(helper.make_tensor(f"e{e}", TensorProto.INT64, [], [e]))
        p = f"x{e}_"
        nodes += [
            helper.make_node("Gather", ["mask", f"e{e}"], [p + "row"], axis=0),  # [k, T]
            helper.make_node("NonZero", [p + "row"], [p + "where"]),  # [2, n]
            helper.make_node("Gather", [p + "where", "row"], [p + "tokens"], axis=0),  # [1, n]
            helper.make_node("Squeeze", [p + "tokens", "one_zero"], [p + "idx"]),  # [n]
            helper.make_node("Gather", ["x", p + "idx"], [p + "in"], axis=0),  # [n, H]
            helper.make_node("MatMul", [p + "in", f"gate_{e}"], [p + "gate"]),
            helper.make_node("Sigmoid", [p + "gate"], [p + "sig"]),
            helper.make_node("Mul", [p + "gate", p + "sig"], [p + "act"]),
            helper.make_node("MatMul", [p + "in", f"up_{e}"], [p + "up"]),
            helper.make_node("Mul", [p + "act", p + "up"], [p + "h"]),
            helper.make_node("MatMul", [p + "h", f"down_{e}"], [p + "out"]),  # [n, H]
            helper.make_node("Unsqueeze", [p + "idx", "one"], [p + "idx2"]),
            helper.make_node("Shape", [p + "out"], [p + "out_shape"]),
            helper.make_node("Expand", [p + "idx2", p + "out_shape"], [p + "at"]),
            helper.make_node(
                "ScatterElements", [f"acc_{e}", p + "at", p + "out"], [p + "scattered"], axis=0, reduction="add"
            ),
            helper.make_node("Add", [f"acc_{e}", p + "scattered"], [f"acc_{e + 1}"]),
        ]
    constants.append(ints("one_zero", 0))
    nodes[-1].output[0] = "y"
    graph = helper.make_graph(nodes, "moe", [helper.make_tensor_value_info("x", f16, ["tokens", hidden])],
                              [helper.make_tensor_value_info("y", f16, ["tokens", hidden])], initializer=weights + constants)  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_sweep_and_critical_show_the_distinct_experts_moving_the_bound(tmp_path, capsys):
    hidden, width, experts, top_k = 2048, 1024, 8, 2
    path = tmp_path / "moe.onnx"
    onnx.save(_moe_layer(hidden, width, experts, top_k), path)
    per_expert = 3 * hidden * width * 2  # gate, up, down in fp16
    assert main(["sweep", str(path), "--dim", "tokens=1,64,4096", "--view", "deployed", "--format", "json"]) == 0
    points = json.loads(capsys.readouterr().out)["points"]
    read = [p["moe"]["expert_weight_bytes"] for p in points]
    assert read == pytest.approx(
        [experts * (1 - (1 - top_k / experts) ** t) * per_expert for t in (1, 64, 4096)], rel=0.01
    )
    assert read[0] == top_k * per_expert  # one token: its k experts
    assert [p["moe"]["bound"] for p in points] == [
        "memory",
        "memory",
        "compute",
    ]  # weights saturate at E experts' while FLOPs grow
    assert main(["critical", str(path), "--over", "tokens", "--view", "deployed", "--format", "json"]) == 0
    (found,) = json.loads(capsys.readouterr().out)["model"]["moe"]
    assert found["distinct_experts"]["1"] == pytest.approx(top_k) and found["distinct_experts"]["64"] == pytest.approx(
        experts, rel=0.01
    )
    critical = found["critical"]
    assert 64 < critical <= 4096
    bounds = [
        next(
            k for k in deploy(analyze(path, sizing=Sizing(dims={"tokens": t}))).nodes if k.op_type == GROUPED_GEMM
        ).placement.bound
        for t in (critical - 1, critical)
    ]
    assert bounds == ["memory", "compute"]  # the crossing is where the kernel flips
    assert main(["sweep", str(path), "--dim", "tokens=1,4096", "--view", "deployed"]) == 0
    assert "experts read" in capsys.readouterr().out
