"""Mixture of experts (issue 34), on optimum's own exports of tiny random MoE decoders
(tests/corpus/moe: Qwen3-MoE and DeepSeek-V3 select each expert's tokens with a NonZero, GPT-OSS
runs every token through every expert). Every expected figure is derived here from the config
the generator wrote (tests/corpus/optimum_moe.py), never from the tool's output."""

from __future__ import annotations

import json
import math
from pathlib import Path

import onnx
import pytest

from onnx_roofline import analyze, json_schema
from onnx_roofline.commands.cli import main
from onnx_roofline.model.experts import recognize
from onnx_roofline.model.nodes import read_nodes
from onnx_roofline.report.serialize import render_json
from onnx_roofline.views.deployed import deploy
from onnx_roofline.views.experts import GROUPED_GEMM

MOE = Path(__file__).resolve().parent / "corpus" / "moe"
QWEN, GPT_OSS, DEEPSEEK = (MOE / f"optimum_{arch}_decoder_with_past_model.onnx" for arch in ("qwen3_moe", "gpt_oss", "deepseek_v3"))
H, E, K, I, V, L = 64, 4, 2, 32, 256, 2  # hidden, experts, top-k, expert width, vocabulary, layers (the generator's config)
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
    return sum(math.prod(a.t.dims) for n in graph.node if n.op_type == "Constant" for a in n.attribute if a.name == "value" and a.t.data_type in floats)


# --- bindings only: every node costed, the active experts' FLOPs --------------------------------


def test_bindings_alone_cost_every_node_at_the_active_experts_flops():
    report = analyze(QWEN, dims=STEP)
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
    assert "ASSUMED   uniform routing" in table and "4 experts, top-2, 0 shared" in table and "active per token" in table
    assert main([str(QWEN), *dims, "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    experts = document["model"]["experts"]
    assert experts["load"] == "uniform" and experts["layers"][0]["top_k"] == K and experts["layers"][0]["experts"] == E
    page = tmp_path / "report.html"
    assert main([str(QWEN), *dims, "--format", "html", "-o", str(page)]) == 0
    html = page.read_text()
    assert "uniform routing" in html and "active per token" in html


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
    summary = analyze(path, dims=STEP).model.experts
    assert (summary.parameters, summary.active_parameters) == (total, active)
    assert [layer.shared_experts for layer in summary.layers] == [1 if shared else 0] * L


# --- deployed: one grouped GEMM reading the distinct experts a step touches -----------------------


@pytest.mark.parametrize("batch", [1, 2, 64])
@pytest.mark.parametrize("path", [QWEN, GPT_OSS])
def test_deployed_decode_reads_the_weights_of_the_distinct_experts(path, batch):
    per_expert = 3 * H * I * FP32  # gate, up, down
    if path == GPT_OSS:
        per_expert += (2 * I + H) * FP32  # its gate_up and down biases
    deployed = deploy(analyze(path, dims=_decode(batch)))
    kernels = [k for k in deployed.nodes if k.op_type == GROUPED_GEMM]
    touched = E * (1 - (1 - K / E) ** batch)  # k at one token, 3 of 4 at two, ~E at 64
    assert len(kernels) == L
    for kernel in kernels:
        assert kernel.expert_weight_bytes == pytest.approx(touched * per_expert, rel=0.01)
        assert kernel.cost.bytes_read >= kernel.expert_weight_bytes
    assert not deployed.unsupported


def test_the_dense_export_is_an_moe_written_as_written_and_deployed_routed():
    report = analyze(GPT_OSS, dims=STEP)
    summary = report.model.experts
    assert [(s.form, s.experts, s.top_k) for s in summary.layers] == [("dense", E, K)] * L
    pass_flops = 2 * H * 2 * I + 2 * I * H  # gate_up [H, 2I], down [I, H]
    expert_matmuls = [n for n in report.nodes if n.index in summary.layers[0].layer.nodes and n.matrix_flops]
    assert sum(n.matrix_flops for n in expert_matmuls) == T * E * pass_flops  # as written: every token through every expert
    kernel = next(k for k in deploy(report).nodes if k.op_type == GROUPED_GEMM)
    assert kernel.matrix_flops == T * K * pass_flops  # deployed: tokens·k passes


# --- the load option, and --nonzero-fraction still overriding ---------------------------------------


def test_the_expert_load_option_sizes_the_experts():
    skew = analyze(QWEN, dims=STEP, expert_load="skew=2").model.experts
    assert skew.layers[0].rows == (T * K // 2, T * K // 2, 0, 0)  # the choices on a hot half of the experts
    capacity = analyze(QWEN, dims=STEP, expert_load="capacity=1.5").model.experts
    assert capacity.layers[0].rows == (math.ceil(1.5 * T * K / E),) * E  # 6 rows each: the capacity bound
    with pytest.raises(ValueError, match="expert load"):
        analyze(QWEN, dims=STEP, expert_load="zipf")


def test_nonzero_fraction_still_overrides_the_routing():
    report = analyze(QWEN, dims=STEP, nonzero_fraction=1.0)
    assert report.model.assumed.nonzero_fraction == 1.0
    assert report.model.experts.layers[0].rows == (K * T,) * E  # every cell of a [k, tokens] mask: per NonZero, as documented
    assert not report.model.experts.sized


def test_experts_are_recognized_from_the_structure_not_the_names():
    model = onnx.load(DEEPSEEK, load_external_data=False)  # every node nameless, every value a number
    renamed = {name: f"v{i}" for i, name in enumerate(dict.fromkeys(n for node in model.graph.node for n in [*node.input, *node.output] if n))}
    for node in model.graph.node:
        node.name = ""
        node.input[:] = [renamed.get(n, n) for n in node.input]
        node.output[:] = [renamed.get(n, n) for n in node.output]
    for value in [*model.graph.input, *model.graph.output, *model.graph.initializer]:
        value.name = renamed.get(value.name, value.name)
    found = recognize(model.graph, read_nodes(model.graph))
    assert [(layer.form, layer.experts, layer.top_k, len(layer.routed), len(layer.shared)) for layer in found] == [("routed", E, K, E, 1)] * L


@pytest.mark.parametrize("path", [QWEN, GPT_OSS])
def test_both_views_validate_against_the_shipped_schema(path):
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(json_schema())
    written = analyze(path, dims=_decode(4))
    deployed = deploy(written)
    for report, other in ((written, deployed), (deployed, written)):
        document = json.loads(render_json(report, other))
        errors = sorted(validator.iter_errors(document), key=lambda e: list(e.path))
        assert not errors, f"{report.view}: {errors[0].message} at {list(errors[0].path)}"
        assert document["model"]["experts"]["layers"][0]["experts"] == E
    assert any("moe" in node for node in json.loads(render_json(deployed, written))["nodes"])
