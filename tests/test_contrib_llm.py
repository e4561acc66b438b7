"""The com.microsoft ops of recent LLM architectures (rules/contrib_llm.py, shape_rules/contrib_llm.py).

Ops with a CPU kernel are run in onnxruntime through `verify` (every output's shape and dtype and
every byte count checked against the real run) and their shapes are also written from the schema;
ops without one are checked against the schema's shapes. FLOPs are the schema's math, written out."""

from __future__ import annotations

import numpy as np
import pytest

from onnx_roofline import Sizing, analyze
from onnx_roofline.commands.verify import verify
from tests.conftest import one_node_model

MS = "com.microsoft"
f32 = "float32"


def _model(op_type, inputs, outputs, attrs=None, initializers=None):
    model = one_node_model(op_type, inputs, outputs, attrs, initializers, domain=MS)
    declared = [value for value in model.graph.output if value.name]  # absent optional outputs are ""
    del model.graph.output[:]
    model.graph.output.extend(declared)
    return model


def run_checked(*args, **kwargs):
    """The node, analyzed and verified against onnxruntime's CPU run of it."""
    result = verify(_model(*args, **kwargs))
    assert result.passed, result.comparison.disagreements
    (node,) = result.report.nodes
    assert node.status == "ok", node.reason
    return node


def analyzed(*args, **kwargs):
    """The node as the analysis alone costs it (ops without a CPU kernel)."""
    (node,) = analyze(_model(*args, **kwargs)).nodes
    assert node.status == "ok", node.reason
    return node


def shapes(node):
    return [(t.shape, t.dtype) for t in node.outputs if t is not None]


# --- stateful causal convolutions ------------------------------------------------------------------


def test_causal_conv_with_state_lfm2():
    # LFM2's short conv as onnxruntime-genai writes it: x [B=1, C=4, L=8], K = 3, no bias, past [1, 4, 2]
    node = run_checked(
        "CausalConvWithState",
        [("x", f32, [1, 4, 8]), ("w", f32, [4, 1, 3]), "", ("past", f32, [1, 4, 2])],
        ["y", "present"],
        {"ndim": 1, "activation": "none", "state_window": 0},
    )
    assert shapes(node) == [((1, 4, 8), f32), ((1, 4, 2), f32)]
    assert node.cost.flops == 2 * 3 * 32  # 3 multiply-adds per output
    assert node.cost.transcendentals == 0
    assert node.unit == "vector"


def test_causal_conv_with_state_channels_last_dilated_silu():
    # x [B=2, L=5, C=4], K = 3, dilation 2: present [2, (3 − 1)·2, 4] without past
    node = run_checked(
        "CausalConvWithState",
        [("x", f32, [2, 5, 4]), ("w", f32, [4, 1, 3]), ("b", f32, [4])],
        ["y", "present"],
        {"channels_last": 1, "dilation": 2, "activation": "silu"},
    )
    assert shapes(node) == [((2, 5, 4), f32), ((2, 4, 4), f32)]
    assert node.cost.flops == 40 * (2 * 3 + 1 + 1)  # taps, bias, x·sigmoid(x)
    assert node.cost.transcendentals == 40


def test_causal_conv_with_state_window_reads_one_slot():
    # state_window = 2 (CUDA): past [2, B, C, 2] read for its last slot, present written whole
    node = analyzed(
        "CausalConvWithState",
        [("x", f32, [1, 4, 8]), ("w", f32, [4, 1, 3]), "", ("past", f32, [2, 1, 4, 2])],
        ["y", "present"],
        {"state_window": 2},
    )
    assert shapes(node)[1] == ((2, 1, 4, 2), f32)
    assert node.cost.bytes_read == 4 * (32 + 12 + 8)  # x, w, one 1×4×2 slot
    assert node.cost.bytes_written == 4 * (32 + 16)


def test_varlen_causal_conv_with_state():
    # two requests of 2 and 3 tokens packed [N=5, C=4]; initial_state [2, 4, 2]
    node = run_checked(
        "VarlenCausalConvWithState",
        [("x", f32, [5, 4]), ("w", f32, [4, 1, 3]), ("cu", "int32", [3]), ("b", f32, [4]), ("state", f32, [2, 4, 2])],
        ["y", "final"],
        {"activation": "silu"},
        initializers={"cu": np.array([0, 2, 5], np.int32)},
    )
    assert shapes(node) == [((5, 4), f32), ((2, 4, 2), f32)]
    assert node.cost.flops == 20 * (2 * 3 + 1 + 1)  # the bias is input 3, not the offsets at 2
    assert node.cost.transcendentals == 20


# --- linear-attention recurrences ----------------------------------------------------------------

B, S, HQ, HV, DK, DV = 2, 3, 2, 4, 8, 6


def test_gated_delta_net_qwen35_form():
    # the builder's dense Qwen3.5 layer: [B, S, H, D] heads, Qwen gate, sigmoid beta, L2-normalized q/k
    node = run_checked(
        "GatedDeltaNet",
        [
            ("q", f32, [B, S, HQ, DK]),
            ("k", f32, [B, S, HQ, DK]),
            ("v", f32, [B, S, HV, DV]),
            "",
            ("decay", f32, [B, S, HV]),
            ("beta", f32, [B, S, HV]),
            ("state", f32, [B, HV, DV, DK]),
            ("a_log", f32, [HV]),
            ("dt_bias", f32, [HV]),
        ],
        ["o", "final"],
        {
            "update_rule": "gated_delta",
            "scale": 0.0,
            "gate_activation": "qwen",
            "beta_activation": "sigmoid",
            "qk_l2_norm": 1,
        },
    )
    assert shapes(node) == [((B, S, HV, DV), f32), ((B, HV, DV, DK), f32)]
    tokens = B * S
    per_head = (
        DK * DV  # exp(g)·S
        + 2 * DK * DV
        + 2 * DV  # Sᵀk, β·(v − Sᵀk)
        + 2 * DK * DV  # S + k ⊗ δ
        + 2 * DK * DV
        + DV
    )  # scale·Sᵀq, one per value head (Hv > Hq)
    gates = 3 * tokens * HV  # decay + dt_bias, Softplus, · −exp(a_log)
    l2 = 2 * tokens * HQ * (3 * DK + 2)  # every q and k head vector normalized
    assert node.cost.flops == tokens * HV * per_head + gates + l2
    exps = tokens * HV * (1 + 3)  # exp(g); softplus's exp and log, exp(a_log)
    assert node.cost.transcendentals == exps + tokens * HV + 2 * tokens * HQ  # + beta sigmoids, + the norms' sqrts
    assert node.unit == "matrix"


def test_gated_delta_net_packed_qkv():
    # packed QKV [N, 2·Hq·dk + Hv·dv]: head counts from initial_state; output [N, Hv, dv]
    n = B * S
    node = run_checked(
        "GatedDeltaNet",
        [
            ("qkv", f32, [n, 2 * HQ * DK + HV * DV]),
            "",
            "",
            "",
            "",
            ("beta", f32, [n, HV]),
            ("state", f32, [B, HV, DV, DK]),
        ],
        ["o", "final"],
        {"update_rule": "delta"},
    )
    assert shapes(node) == [((n, HV, DV), f32), ((B, HV, DV, DK), f32)]
    assert node.cost.flops == n * HV * (2 * DK * DV + 2 * DV + 2 * DK * DV + 2 * DK * DV + DV)  # no decay
    assert node.cost.transcendentals == 0  # no decay, raw beta


def test_gated_delta_net_state_update_shape():
    # state_update_capacity C = 2 (CUDA): [B, C·(Hv + Hq·dk + Hv·dv)] with scalar decay
    node = analyzed(
        "GatedDeltaNet",
        [
            ("q", f32, [6, HQ, DK]),
            ("k", f32, [6, HQ, DK]),
            ("v", f32, [6, HV, DV]),
            ("cu", "int32", [3]),
            ("decay", f32, [6, HV]),
            ("beta", f32, [6, HV]),
            ("state", f32, [B, HV, DV, DK]),
            "",
            "",
            ("count", "int32", [B]),
        ],
        ["o", "final", "update"],
        {"state_update_capacity": 2},
    )
    assert shapes(node)[2] == ((B, 2 * (HV + HQ * DK + HV * DV)), f32)


def test_linear_attention_inverse_gqa_prescaled():
    # the builder's LinearAttention: Hq = 2 key heads, Hkv = 4 value heads, scale = 1 (Q pre-scaled)
    node = run_checked(
        "LinearAttention",
        [
            ("q", f32, [B, S, HQ * DK]),
            ("k", f32, [B, S, HQ * DK]),
            ("v", f32, [B, S, HV * DV]),
            ("past", f32, [B, HV, DK, DV]),
            ("decay", f32, [B, S, HV]),
            ("beta", f32, [B, S, HV]),
        ],
        ["o", "present"],
        {"q_num_heads": HQ, "kv_num_heads": HV, "update_rule": "gated_delta", "scale": 1.0},
    )
    assert shapes(node) == [((B, S, HV * DV), f32), ((B, HV, DK, DV), f32)]
    per_head = DK * DV + 2 * DK * DV + 2 * DV + 2 * DK * DV + 2 * DK * DV  # decay, delta, update, readout (no scale)
    assert node.cost.flops == B * S * HV * per_head  # every value head is read out
    assert node.cost.transcendentals == B * S * HV  # one exp per decay value


def test_linear_attention_present_without_past():
    node = run_checked(
        "LinearAttention",
        [("q", "float16", [B, S, 4 * DK]), ("k", "float16", [B, S, 2 * DK]), ("v", "float16", [B, S, 2 * DV])],
        ["o", "present"],
        {"q_num_heads": 4, "kv_num_heads": 2, "update_rule": "linear"},
    )
    assert shapes(node) == [((B, S, 4 * DV), "float16"), ((B, 2, DK, DV), "float16")]
    assert node.cost.flops == B * S * (2 * 2 * DK * DV + 4 * (2 * DK * DV + DV))  # 2 updates, 4 scaled readouts


def test_linear_attention_gate():
    node = run_checked(
        "LinearAttentionGate",
        [("a", f32, [B, S, HV]), ("dt_bias", f32, [HV]), ("scale", f32, [HV]), ("b", f32, [B, S, HV])],
        ["decay", "beta"],
    )
    assert shapes(node) == [((B, S, HV), f32)] * 2
    n = B * S * HV
    assert node.cost.flops == 3 * n  # + dt_bias, Softplus, · decay_scale
    assert node.cost.transcendentals == 2 * n + n  # Softplus's exp and log; the beta sigmoid


def test_gated_delta_net_state_replay_from_constant_metadata():
    # Hv = 2, Dv = 3, Dk = 4, Hk = 1, capacity 4, kept 3
    meta = np.array([0, 0, 0, 8, 16, 2, 3, 4, 1, 4, 3], np.int64)
    inputs = [("src", f32, [24]), ("capsule", f32, [100]), ("dst", f32, [24]), ("meta", "int64", [11])]
    node = analyzed("GatedDeltaNetStateReplay", inputs, ["out"], initializers={"meta": meta})
    assert shapes(node) == [((24,), f32)]
    assert node.cost.flops == 3 * 3 * 24  # s·decay + key·delta, 3 transitions, 24 state elements
    assert node.cost.bytes_written == 4 * 24
    (unknown,) = analyze(_model("GatedDeltaNetStateReplay", inputs, ["out"])).nodes
    assert unknown.status == "data-dependent"


def test_conv_state_replay_copies():
    meta = np.array([0, 0, 0, 2, 4, 3, 4, 2], np.int64)  # batch 2, channels 4, history 3
    node = analyzed(
        "ConvStateReplay",
        [("src", f32, [64]), ("capture", f32, [64]), ("dst", f32, [64]), ("meta", "int64", [8])],
        ["out"],
        initializers={"meta": meta},
    )
    assert node.cost.flops == 0
    assert node.cost.bytes_written == 4 * 2 * 4 * 3


def test_mamba2_verify():
    heads, groups, state, head_dim, rows = 2, 1, 128, 64, 3
    inner = heads * head_dim
    channels = inner + 2 * groups * state
    node = analyzed(
        "Mamba2Verify",
        [
            ("proj", "bfloat16", [rows, 2 * inner + 2 * groups * state + heads]),
            ("conv", "bfloat16", [1, channels, 3]),
            ("ssm", f32, [1, heads, state, head_dim]),
            ("cw", "bfloat16", [channels, 1, 4]),
            ("cb", "bfloat16", [channels]),
            ("dt_bias", f32, [heads]),
            ("a", f32, [heads]),
            ("d", f32, [heads]),
            ("nw", f32, [inner]),
            ("row", "int32", [1]),
        ],
        ["y", "conv_out", "ssm_out"],
        {"heads": heads, "n_groups": groups},
    )
    assert shapes(node) == [
        ((rows, inner), "bfloat16"),
        ((1, channels, 3), "bfloat16"),
        ((1, heads, state, head_dim), f32),
    ]
    conv = channels * (2 * 4 + 1 + 1)  # 4 taps, bias, SiLU
    per_head = (
        3 + 1 + head_dim + 3 * state * head_dim + 2 * state * head_dim + 2 * head_dim
    )  # dt, decay, dt·x, update, readout
    gate_norm = 2 * inner + 4 * inner + 2 * groups  # SiLU(gate)·y, grouped RMS norm
    assert node.cost.flops == rows * (conv + heads * per_head + gate_norm)


# --- mixture of experts ---------------------------------------------------------------------------


def test_moe_group_router_legacy_routing():
    # T = 6 tokens, E = 8 experts in 2 groups of 4; top 2 per group summed, 1 group, top_k 2
    node = run_checked(
        "MoEGroupRouter",
        [("logits", f32, [2, 3, 8]), ("bias", f32, [8])],
        ["probs"],
        {"top_k": 2, "n_group": 2, "group_topk": 2, "topk_group": 1},
    )
    assert shapes(node) == [((6, 8), f32)]
    per_token = (
        8  # + expert_bias
        + 2 * (2 * 3 + 1)  # each group: two arg-max passes over 4, one add
        + 1 * (2 - 1)  # the best group
        + 2 * (4 - 1)  # top 2 of its 4 experts
        + 2
    )  # log(max(s, 1e-20)) of the 2 chosen
    assert node.cost.flops == 6 * per_token
    assert node.cost.transcendentals == 6 * (8 + 2)  # sigmoids, logs


def test_moe_packed_counts_the_routed_experts():
    t, d, inter, e, k = 4, 64, 32, 8, 2
    node = analyzed(
        "MoEPacked",
        [
            ("x", "float16", [t, d]),
            ("router", f32, [t, e]),
            ("gate", "uint8", [e, inter, 36]),
            ("up", "uint8", [e, inter, 36]),
            ("down", "uint8", [e, d, 18]),
        ],
        ["y"],
        {"gate_type": 2, "up_type": 2, "down_type": 2, "k": k},
    )
    assert shapes(node) == [((t, d), "float16")]
    pair = 3 * 2 * d * inter + 4 * inter + 2 * d  # gate, up, down; SwiGLU; weight and accumulate
    routing = 4 * e - 2 + k * (e - 1) + 2 * k - 1  # softmax, top-k, renormalize
    assert node.cost.flops == t * k * pair + t * routing
    used = min(t * k, e)  # all 8 experts
    assert node.cost.dequantize_flops == 2 * used * 3 * d * inter


def test_router_gate_up_proj():
    node = analyzed(
        "RouterGateUpProj",
        [("x", "float16", [2, 3, 64]), ("w", "float16", [64, 16 + 2 * 32])],
        ["router", "act"],
        {"router_size": 16},
    )
    assert shapes(node) == [((2, 3, 16), "float16"), ((2, 3, 32), "float16")]
    assert node.cost.flops == 6 * 2 * 64 * 80 + 4 * 6 * 32  # one GEMM, SwiGLU per activated element
    assert node.cost.transcendentals == 6 * 32


# --- block-quantized and packed weights ----------------------------------------------------------


def test_matmul_fp8_weight_w8a8():
    m, k, n = 6, 256, 128
    node = analyzed(
        "MatMulBlockQuantizedFp8Weight",
        [
            ("a", "float16", [2, 3, k]),
            ("b", "float8e4m3fn", [n, k]),
            ("scale", f32, [n, 2]),
            ("a_scale", f32, []),
            ("bias", "float16", [n]),
        ],
        ["y"],
        {"block_size": 128},
    )
    assert shapes(node) == [((2, 3, n), "float16")]
    assert node.cost.flops == 2 * m * k * n + m * n + 5 * m * k  # product, bias, A fake-quantized
    assert node.cost.dequantize_flops == k * n  # one scale multiply per weight
    assert node.unit == "matrix"


def test_matmul_fp4_weight():
    m, k, n = 4, 64, 32
    node = analyzed(
        "MatMulBlockQuantizedFp4Weight",
        [("a", "bfloat16", [m, k]), ("b", "uint8", [n, k // 2]), ("scale", "uint8", [n, k // 16]), ("scale2", f32, [])],
        ["y"],
    )
    assert shapes(node) == [((m, n), "bfloat16")]
    assert node.cost.flops == 2 * m * k * n
    assert node.cost.dequantize_flops == 2 * k * n  # e2m1 · global scale · block scale


def test_matmul_nbits_qlora():
    m, k, n, r = 3, 64, 32, 8
    node = analyzed(
        "MatMulNBitsQLoRA",
        [
            ("x", "float16", [m, k]),
            ("w", "uint8", [n, 2, 16]),
            ("ws", "float16", [n, 2]),
            ("la", "uint8", [r, 2, 32]),
            ("las", "float16", [r, 2]),
            ("lb", "uint8", [n, 1, 32]),
            ("lbs", "float16", [n, 1]),
        ],
        ["y"],
        {"K": k, "N": n},
    )
    assert shapes(node) == [((m, n), "float16")]
    assert node.cost.flops == 2 * m * k * n + 2 * m * k * r + 2 * m * r * n + m * n  # base, down, up, add
    assert node.cost.dequantize_flops == 2 * (k * n + r * k + n * r)


def test_matmul_packed_relu2():
    node = analyzed(
        "MatMulPacked",
        [("a", "bfloat16", [5, 256]), ("b", "uint8", [64, 144])],
        ["y"],
        {"K": 256, "N": 64, "packed_type": 2, "activation_type": "relu2"},
    )
    assert shapes(node) == [((5, 64), "bfloat16")]
    assert node.cost.flops == 2 * 5 * 256 * 64 + 2 * 5 * 64  # product; relu and square per output


def test_gather_packed_reads_the_rows_gathered():
    # packed_type 2: 256 values a row in 8 blocks of 18 bytes
    node = run_checked(
        "GatherPacked",
        [("table", "uint8", [10, 144]), ("ids", "int64", [2, 3])],
        ["y"],
        {"packed_type": 2, "K": 256, "output_dtype": 1},
        initializers={"table": np.random.default_rng(0).integers(0, 255, (10, 144)).astype(np.uint8)},
    )
    assert shapes(node) == [((2, 3, 256), f32)]
    assert node.cost.flops == 2 * 6 * 256  # dequantized per output element
    assert node.cost.bytes_read == 6 * 144 + 6 * 8  # 6 of the 10 rows, the ids


# --- normalization, gating, Engram ---------------------------------------------------------------


def test_rms_norm_rotary():
    b, s, heads, stride, rot = 2, 3, 4, 64, 32
    node = analyzed(
        "RMSNormRotary",
        [
            ("x", "bfloat16", [b, s, heads, stride]),
            ("scale", f32, [stride]),
            ("pos", "int64", [b, s]),
            ("cos", f32, [128, rot // 2]),
            ("sin", f32, [128, rot // 2]),
        ],
        ["y", "normed"],
        {"rotary_embedding_dim": rot},
    )
    assert shapes(node) == [((b, s, heads * stride), "bfloat16"), ((b, s, heads, stride), f32)]
    rows = b * s * heads
    assert node.cost.flops == 4 * rows * stride + 2 * rows + 3 * rows * rot  # RMS norm, rotary
    assert node.cost.transcendentals == rows


def test_engram_gate_with_normed_output():
    b, s, hc, h = 2, 3, 2, 16
    node = run_checked(
        "EngramGate",
        [
            ("key", f32, [b, s, hc, h]),
            ("query", f32, [b, s, hc, h]),
            ("value", f32, [b, s, h]),
            ("kn", f32, [hc, h]),
            ("qn", f32, [hc, h]),
            ("cn", f32, [hc, h]),
        ],
        ["y", "normed"],
    )
    assert shapes(node) == [((b, s, hc, h), f32)] * 2
    n, rows = b * s * hc * h, b * s * hc
    assert node.cost.flops == 3 * (4 * n + 2 * rows) + 2 * n + 4 * rows + n  # three RMS norms, dot, gate, gate·value
    assert node.cost.transcendentals == 3 * rows + 2 * rows  # the norms' sqrts; the gate's sqrt and sigmoid


def test_gated_add_plain():
    node = run_checked("GatedAdd", [("x", f32, [2, 3, 8]), ("y", f32, [2, 3, 8]), ("gate", f32, [2, 3, 1])], ["out"])
    assert shapes(node) == [((2, 3, 8), f32)]
    assert node.cost.flops == 2 * 48  # y·gate, x + …


def test_gated_add_projected():
    node = analyzed(
        "GatedAdd",
        [
            ("x", "bfloat16", [6, 8]),
            ("y", "bfloat16", [6, 8]),
            ("gate", "bfloat16", [6, 32]),
            ("gw", "bfloat16", [32, 1]),
        ],
        ["out"],
    )
    assert node.cost.flops == 2 * 48 + 2 * 6 * 32  # + each row's dot with gate_weight
    assert node.cost.transcendentals == 6


NGRAM = {"pad_id": 0, "n_head_per_ngram": 2, "max_ngram_size": 3}
HASH = {"mult": np.array([3, 5, 7], np.int64), "vocab": np.array([11, 13, 17, 19], np.int64)}


def test_ngram_hash_mapping():
    node = run_checked(
        "NGramHashMapping",
        [("ids", "int64", [2, 5]), ("mult", "int64", [3]), ("vocab", "int64", [4]), ("past", "int64", [2, 2])],
        ["hash", "present"],
        NGRAM,
        initializers=HASH,
    )
    assert shapes(node) == [((2, 5, 4), "int64"), ((2, 2), "int64")]
    assert node.cost.flops == 10 * ((2 * 2 - 1) + (2 * 3 - 1) + 4)  # 2- and 3-gram mixes, 4 modulos


def test_varlen_ngram_hash_mapping():
    node = run_checked(
        "VarlenNGramHashMapping",
        [("ids", "int64", [5]), ("mult", "int64", [3]), ("vocab", "int64", [4]), ("cu", "int32", [3])],
        ["hash", "present"],
        NGRAM,
        initializers={**HASH, "cu": np.array([0, 2, 5], np.int32)},
    )
    assert shapes(node) == [((5, 4), "int64"), ((2, 2), "int64")]
    assert node.cost.flops == 5 * (3**2 - 1 + 4)


# --- sparse attention ----------------------------------------------------------------------------


def test_dynamic_sparse_attention_selected_only():
    b, s, h, hkv, dh, sel, cache = 1, 2, 4, 2, 16, 8, 32
    node = analyzed(
        "DynamicSparseAttention",
        [
            ("q", "float16", [b, s, h * dh]),
            ("k", "float16", [b, s, hkv * dh]),
            ("v", "float16", [b, s, hkv * dh]),
            ("pk", "float16", [b, hkv, cache, dh]),
            ("pv", "float16", [b, hkv, cache, dh]),
            "",
            "",
            ("sel", "int32", [b * s, sel]),
            ("cnt", "int32", [b * s]),
            ("seqlens", "int32", [b]),
            ("total", "int32", [1]),
        ],
        ["y", "pk_out", "pv_out"],
        {"num_heads": h, "kv_num_heads": hkv},
    )
    assert shapes(node) == [
        ((b, s, h * dh), "float16"),
        ((b, hkv, cache, dh), "float16"),
        ((b, hkv, cache, dh), "float16"),
    ]
    e, rows = b * h * s * sel, b * h * s  # each query scores its 8 selected keys
    assert node.cost.flops == 2 * e * dh + e + 4 * e - 2 * rows + 2 * e * dh
    assert node.cost.bytes_written == 2 * (b * s * h * dh) + 2 * 2 * (b * hkv * s * dh)  # output; 2 new rows per cache


def test_sparse_paged_attention_shapes():
    n, h, hkv, dh = 3, 4, 2, 16
    node = analyzed(
        "SparsePagedAttention",
        [
            ("q", "float16", [n, h * dh]),
            ("k", "float16", [n, hkv * dh]),
            ("v", "float16", [n, hkv * dh]),
            ("kc", "float16", [4, 8, hkv, dh]),
            ("vc", "float16", [4, 8, hkv, dh]),
            ("cu", "int32", [2]),
            ("past", "int32", [1]),
            ("table", "int32", [1, 4]),
            "",
            ("sel", "int32", [n, 6]),
            ("cnt", "int32", [n]),
        ],
        ["y", "kc_out", "vc_out"],
        {"num_heads": h, "kv_num_heads": hkv},
    )
    assert shapes(node)[0] == ((n, h * dh), "float16")
    e = h * n * 6
    assert node.cost.flops == 2 * e * dh + e + 4 * e - 2 * h * n + 2 * e * dh


def test_indexer_shapes():
    (merge,) = analyze(
        _model(
            "PackedSparseAttentionIndexerMerge",
            [
                ("base", "int32", [4, 8]),
                ("counts", "int32", [4]),
                ("rows", "int32", [5]),
                ("start", "int32", [5]),
                ("end", "int32", [5]),
            ],
            ["sel", "cnt", "status"],
            {"max_output_entries": 12, "policy_mode": "append_range"},
        )
    ).nodes
    assert shapes(merge) == [((5, 12), "int32"), ((5,), "int32"), ((5,), "int32")]
    assert (
        merge.status == "data-dependent" and "window plans" in merge.reason
    )  # typed, not costed: the selection is data
    (indexer,) = analyze(
        _model(
            "SparseAttentionIndexer",
            [
                ("q", "float16", [1, 3, 2 * 16]),
                ("k", "float16", [1, 3, 16]),
                ("qn", "float16", [16]),
                ("kn", "float16", [16]),
                ("cos", "float16", [64, 8]),
                ("sin", "float16", [64, 8]),
                "",
                ("past", "float16", [1, 5, 16]),
            ],
            ["sel", "present"],
            {"policy_mode": "qsa", "compress_ratio": 4, "token_budget": 8},
        )
    ).nodes
    assert shapes(indexer) == [((1, 3, 8 + 4 - 1), "int32"), ((1, 5 + 3, 16), "float16")]  # qsa appends the raw keys


def test_speculative_prefix_commit():
    node = analyzed(
        "SpeculativePrefixCommit",
        [
            ("next", "int64", [2, 8]),
            ("ids", "int64", [2, 8]),
            ("status", "int32", [1]),
            ("ctl", "int64", [32]),
            ("ctx", "int64", [4]),
            ("prefixes", "int64", [32]),
            ("ptrs", "int64", [2]),
        ],
        ["head_c", "ctl_out", "ctx_out"],
    )
    assert shapes(node) == [((2,), "int32"), ((32,), "int64"), ((4,), "int64")]
    assert node.cost.flops == 16  # a compare per prediction


def test_unknown_update_rule_is_an_error_not_zero():
    (node,) = analyze(
        _model(
            "LinearAttention",
            [("q", f32, [1, 2, 8]), ("k", f32, [1, 2, 8]), ("v", f32, [1, 2, 8])],
            ["o", "present"],
            {"q_num_heads": 1, "kv_num_heads": 1, "update_rule": "bogus"},
        )
    ).nodes
    assert node.status != "ok" and node.cost is None


def test_the_genai_builders_lfm2_is_costed_and_agrees_with_onnxruntime(tmp_path):
    """onnxruntime-genai's LFM2 build (a short-conv layer, then attention) from a tiny random
    checkpoint: every node costed, verify passes, and the conv is 2·3 taps per output of
    [1, HIDDEN, 8] (no bias, no activation in LFM2's conv)."""
    pytest.importorskip("onnxruntime_genai")
    pytest.importorskip("transformers")
    from tests.corpus import genai, sources

    genai.checkpoint("lfm2", tmp_path / "hf")
    genai.build(tmp_path / "hf", tmp_path / "out", "fp32", tmp_path / "cache")
    dims = {"batch_size": 1, "sequence_length": 8, "past_sequence_length": 12, "kv_cache_dim": sources.HEAD}
    report = analyze(tmp_path / "out" / "model.onnx", sizing=Sizing(dims=dims))
    assert report.totals.uncosted_nodes == 0
    (conv,) = [n for n in report.nodes if n.op_type == "CausalConvWithState"]
    assert conv.outputs[1].shape == (1, sources.HIDDEN, 3 - 1)  # present conv state: the last k − 1 positions
    assert conv.cost.flops == 2 * 3 * sources.HIDDEN * 8
    assert verify(tmp_path / "out" / "model.onnx", dims=dims).passed
