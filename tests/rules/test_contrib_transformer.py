"""Cost rules for the onnxruntime transformer-family ops whose shapes come from
shape_rules/transformer.py: group and gated norms, gated activations, GemmFloat8, mixture of
experts, the MatMulNBits fusions, hyper-connections, sparse/paged/Longformer attention, rotary
embeddings and position biases, padding removal. Every number is written as its arithmetic; the
outputs are left to the shape rules (the nodes declare none)."""

from __future__ import annotations

import numpy as np
import pytest

from onnx_roofline.costs import rules
from onnx_roofline.shapes import rules as shape_rules
from tests.conftest import analyze_node
from tests.rules.test_attention import sdpa

MS = "com.microsoft"
f32, f16, i32, i64, u8 = "float32", "float16", "int32", "int64", "uint8"


def test_every_op_with_a_shape_rule_has_a_cost_rule():
    """A node the shape rules type is costed, never left unsupported (issue 12, item 5)."""
    assert ("com.microsoft", "GroupQueryAttention") in shape_rules.registered()
    assert [key for key in shape_rules.registered() if rules.lookup(*key, None) is None] == []


NOT_RULED = {  # com.microsoft ops left without a rule, and why (docs/cost-model.md)
    "QuantizeBFP": "no kernel in public onnxruntime builds; the schema gives no block layout to size the output",
    "DequantizeBFP": "the same",
    "SparseToDenseMatMul": "a sparse input, whose non-zeros no type declares",
}


def test_every_contrib_op_onnxruntime_defines_has_its_rules():
    """Every com.microsoft op of the installed onnxruntime has a shape rule and a cost rule, but the
    few named here: a new onnxruntime's ops show up as this test failing."""
    from onnxruntime.capi import onnxruntime_pybind11_state as C

    defined = {s.name for s in C.get_all_operator_schema() if s.domain == MS and not s.deprecated}
    assert sorted(op for op in defined if rules.lookup(MS, op, None) is None) == sorted(NOT_RULED)
    assert sorted(op for op in defined if shape_rules.lookup(MS, op) is None) == sorted(NOT_RULED)


# --- norms ------------------------------------------------------------------------------------------

GN = [2, 8, 8, 32]  # NHWC
GN_N = 2 * 8 * 8 * 32  # elements
GN_GROUPS = 2 * 4  # N · groups


def test_group_norm_with_silu():
    inputs = [("x", f16, GN), ("gamma", f32, [32]), ("beta", f32, [32])]
    node = analyze_node("GroupNorm", inputs, ["y"], {"groups": 4, "activation": 1}, domain=MS)
    # standardize 5n + 2L, gamma n, beta n; SiLU x·sigmoid(x): n and n sigmoids
    assert node.cost.flops == 5 * GN_N + 2 * GN_GROUPS + GN_N + GN_N + GN_N
    assert node.cost.transcendentals == GN_GROUPS + GN_N  # a sqrt per group, a sigmoid per element
    assert node.cost.bytes_read == GN_N * 2 + 2 * 32 * 4  # x fp16, gamma and beta fp32
    assert node.cost.bytes_written == GN_N * 2


def test_skip_group_norm_adds_skip_and_bias_and_writes_the_sum():
    inputs = [("x", f16, GN), ("gamma", f32, [32]), ("beta", f32, [32]), ("skip", f16, [2, 32]), ("bias", f16, [32])]
    node = analyze_node("SkipGroupNorm", inputs, ["y", "sum"], {"groups": 4, "activation": 0}, domain=MS)
    assert node.cost.flops == GN_N + GN_N + 7 * GN_N + 2 * GN_GROUPS  # skip, bias, then GroupNorm without SiLU
    assert node.cost.bytes_written == 2 * GN_N * 2  # y and the sum


@pytest.mark.parametrize(
    "shape, attrs, scale",
    [([2, 8, 4, 64], {}, True), ([2, 8, 256], {"num_branches": 4}, True), ([2, 8, 4, 64], {}, False)],
)
def test_branchwise_rms_norm(shape, attrs, scale):
    n, rows = 2 * 8 * 256, 2 * 8 * 4  # a row per branch of H = 64 features
    inputs = [("x", f32, shape)] + ([("scale", f32, [64])] if scale else [])
    node = analyze_node("BranchwiseRMSNorm", inputs, ["y"], attrs, domain=MS)
    assert node.cost.flops == (4 * n + 2 * rows if scale else 3 * n + 2 * rows)  # no scale: no scale multiply
    assert node.cost.transcendentals == rows


@pytest.mark.parametrize("activation, gate", [("silu", (1, 1)), ("sigmoid", (0, 1))])
def test_gated_rms_norm(activation, gate):
    n, rows = 2 * 8 * 256, 2 * 8 * 4  # groups of C = 64
    inputs = [("x", f16, [2, 8, 256]), ("scale", f16, [64]), ("gate", f16, [2, 8, 256])]
    node = analyze_node("GatedRMSNorm", inputs, ["y"], {"activation": activation}, domain=MS)
    assert (
        node.cost.flops == 4 * n + 2 * rows + n + gate[0] * n
    )  # RMS norm with scale, the gating multiply, the activation
    assert node.cost.transcendentals == rows + gate[1] * n


# --- activations --------------------------------------------------------------------------------------

ACT = [2, 8, 64]
ACT_N = 2 * 8 * 64


def test_scaled_silu():
    node = analyze_node("ScaledSiLU", [("x", f16, ACT)], ["y"], domain=MS)
    assert (node.cost.flops, node.cost.transcendentals) == (2 * ACT_N, ACT_N)  # scale and multiply; a sigmoid


@pytest.mark.parametrize("limit, per_element", [(0.0, 4), (7.0, 4 + 3)])  # the clamps: G above, L both sides
def test_swiglu_packed_gate(limit, per_element):
    node = analyze_node("SwiGLU", [("gate", f16, [2, 8, 128])], ["y"], {"limit": limit}, domain=MS)
    assert node.outputs[0].shape == (2, 8, 64)
    assert node.cost.flops == per_element * ACT_N
    assert node.cost.transcendentals == ACT_N
    assert node.cost.bytes_read == 2 * ACT_N * 2  # the packed gate, fp16


@pytest.mark.parametrize("training, per_element", [(False, 2), (True, 2 + 2)])
def test_bias_dropout(training, per_element):
    inputs = [
        ("x", f16, ACT),
        ("bias", f16, [64]),
        ("residual", f16, ACT),
        ("ratio", f32, []),
        ("training", "bool", []),
    ]
    constants = {"ratio": np.array(0.1, np.float32), "training": np.array(training)}
    node = analyze_node("BiasDropout", inputs, ["y", "mask"], initializers=constants, domain=MS)
    assert node.cost.flops == per_element * ACT_N  # bias and residual adds, the dropout in training
    assert node.cost.bytes_written == ACT_N * 2 + ACT_N  # y fp16, the bool mask


# --- matrix fusions ---------------------------------------------------------------------------------


def test_gemm_float8_scaled_with_gelu():
    m, k, n = 16, 64, 256
    inputs = [("a", "float8e4m3fn", [m, k]), ("b", "float8e4m3fn", [n, k]), "", ("sa", f32, [1]), ("sb", f32, [1])]
    node = analyze_node("GemmFloat8", inputs, ["y"], {"transB": 1, "dtype": 10, "activation": "GELU"}, domain=MS)
    assert node.outputs[0].dtype == f16
    # 2·M·K·N, the scales once per output, the tanh-form GELU 8 per output
    assert node.cost.flops == 2 * m * k * n + m * n + 8 * m * n
    assert node.cost.transcendentals == m * n
    assert (node.unit, node.dtype) == ("matrix", "fp8")


def test_gemm_float8_with_c():
    m, k, n = 16, 64, 256
    inputs = [("a", f16, [m, k]), ("b", f16, [k, n]), ("c", f16, [n])]
    assert (
        analyze_node("GemmFloat8", inputs, ["y"], {"beta": 1.0, "dtype": 10}, domain=MS).cost.flops
        == 2 * m * k * n + m * n
    )
    # beta defaults to 0: C is not added
    assert analyze_node("GemmFloat8", inputs, ["y"], {"dtype": 10}, domain=MS).cost.flops == 2 * m * k * n


M, K = 2 * 8, 64  # rows of A [2, 8, 64], its width


def _packed(n):
    return [(f"b{n}", u8, [n, K // 32, 16]), (f"s{n}", f16, [n * K // 32])]


def test_matmul_nbits_qkv():
    nq, nkv = 128, 32
    inputs = [("a", f16, [2, 8, K]), ("skip", f16, [2, 8, K]), ("norm", f16, [K]), *_packed(nq), "", ("bk", u8, [nkv, 2, 16]),
              ("sk", f16, [nkv * 2]), "", ("bv", u8, [nkv, 2, 16]), ("sv", f16, [nkv * 2])]  # fmt: skip
    node = analyze_node(
        "MatMulNBitsQkv", inputs, ["q", "k", "v", "sum"], {"K": K, "Nq": nq, "Nkv": nkv, "block_size": 32}, domain=MS
    )
    norm = M * K + 4 * M * K + 2 * M  # the skip add, then RMSNorm with scale
    projections = sum(2 * M * K * n for n in (nq, nkv, nkv))  # the products
    assert node.cost.flops == norm + projections
    assert node.cost.dequantize_flops == sum(2 * K * n for n in (nq, nkv, nkv))  # each weight dequantized once
    assert node.cost.transcendentals == M  # a sqrt per row
    assert node.unit == "matrix"


def test_matmul_nbits_mlp():
    n = 128
    inputs = [("a", f16, [2, 8, K]), "", ("norm", f16, [K]), *_packed(n), ("gate_bias", f16, [n]), ("bu", u8, [n, 2, 16]),
              ("su", f16, [n * 2])]  # fmt: skip
    node = analyze_node(
        "MatMulNBitsMlp", inputs, ["y"], {"K": K, "N": n, "block_size": 32, "activation": "silu"}, domain=MS
    )
    norm = 4 * M * K + 2 * M  # RMSNorm, no skip
    projections = 2 * (2 * M * K * n) + M * n  # gate and up, the gate's bias
    assert node.cost.flops == norm + projections + M * n + M * n  # silu (x·σ) and the gating product
    assert node.cost.dequantize_flops == 2 * (2 * K * n)  # gate and up weights, each once
    assert node.cost.transcendentals == M * n + M  # a sigmoid per gate element, a sqrt per row


def _moe_inputs(tokens, experts, inter, dtype=f32):
    return [("x", dtype, [tokens, K]), ("router", dtype, [tokens, experts]), ("w1", dtype, [experts, inter, K]), "",
            ("w2", dtype, [experts, K, inter])]  # fmt: skip


def test_moe_prefill_relu():
    tokens, experts, inter, k = 16, 4, 128, 2
    node = analyze_node("MoE", _moe_inputs(tokens, experts, inter), ["y"], {"k": k}, domain=MS)
    pair = 2 * K * inter + 2 * inter * K + 2 * K + inter  # fc1, fc2, weight-and-accumulate, relu
    routing = tokens * (4 * experts - 2 + k * (experts - 1))  # softmax over E, k arg-max passes
    assert node.cost.flops == tokens * k * pair + routing
    assert node.cost.transcendentals == tokens * experts  # the softmax's exps
    weights = 2 * experts * inter * K * 4  # every expert is used (32 pairs ≥ 4 experts): all weights read
    assert node.cost.bytes_read == tokens * K * 4 + tokens * experts * 4 + weights


def test_moe_decode_reads_only_the_routed_experts():
    experts, inter, k = 8, 128, 2
    node = analyze_node("MoE", _moe_inputs(1, experts, inter), ["y"], {"k": k}, domain=MS)
    one_expert = 2 * inter * K * 4  # fc1 and fc2 slices, fp32
    assert node.cost.bytes_read == K * 4 + experts * 4 + k * one_expert  # 2 of 8 experts' weights


def test_moe_fused_swiglu():
    tokens, experts, inter, k = 4, 4, 64, 1
    inputs = [("x", f16, [tokens, K]), ("router", f16, [tokens, experts]), ("w1", f16, [experts, 2 * inter, K]), "",
              ("w2", f16, [experts, K, inter])]  # fmt: skip
    node = analyze_node("MoE", inputs, ["y"], {"k": k, "activation_type": "swiglu", "swiglu_fusion": 1}, domain=MS)
    pair = 2 * K * 2 * inter + 2 * inter * K + 2 * K + 4 * inter  # fused fc1, fc2, accumulate, swiglu per I
    assert node.cost.flops == tokens * k * pair + tokens * (4 * experts - 2 + k * (experts - 1))
    assert node.cost.transcendentals == tokens * k * inter + tokens * experts


def test_qmoe_dequantizes_the_used_experts():
    experts, inter, k = 8, 128, 2
    inputs = [("x", f16, [1, K]), ("router", f16, [1, experts]), ("w1", u8, [experts, inter, K // 2]), ("s1", f16, [experts, inter]), "",
              ("w2", u8, [experts, K, inter // 2]), ("s2", f16, [experts, K])]  # fmt: skip
    node = analyze_node("QMoE", inputs, ["y"], {"k": k, "expert_weight_bits": 4}, domain=MS)
    pair = 2 * K * inter + 2 * inter * K + 2 * K + inter
    dequantize = k * (inter * K + K * inter)  # one multiply by the scale per weight element (no zero points)
    assert node.cost.flops == k * pair + (4 * experts - 2 + k * (experts - 1))
    assert node.cost.dequantize_flops == dequantize
    expert_bytes = inter * K // 2 + inter * 2 + K * inter // 2 + K * 2  # packed weights and fp16 scales of one expert
    assert node.cost.bytes_read == K * 2 + experts * 2 + k * expert_bytes


# --- hyper-connections ------------------------------------------------------------------------------


@pytest.mark.parametrize("scale, per_output", [(1.0, 2 * 4), (0.5, 2 * 4 + 1)])
def test_hyper_connection_pre_mix(scale, per_output):
    inputs = [("s", f32, [2, 8, 4, 64]), ("m", f32, [2, 8, 4])]
    node = analyze_node("HyperConnectionPreMix", inputs, ["y"], {"reduction_scale": scale}, domain=MS)
    assert node.cost.flops == 2 * 8 * 64 * per_output  # C = 4 multiply-adds per output feature


@pytest.mark.parametrize("stream_mix, per_output", [(False, 2), (True, 2 * 4 + 2)])
def test_hyper_connection_post_mix(stream_mix, per_output):
    inputs = [("s", f32, [2, 8, 4, 64]), ("o", f32, [2, 8, 64]), ("m", f32, [2, 8, 4])]
    inputs += [("mix", f32, [2, 8, 4, 4])] if stream_mix else []
    node = analyze_node("HyperConnectionPostMix", inputs, ["y"], domain=MS)
    assert node.cost.flops == 2 * 8 * 4 * 64 * per_output


def test_hyper_connection_low_rank_mix():
    rows, c, h, r = 2 * 8, 4, 64, 8
    n = rows * c * h
    inputs = [("s", f32, [2, 8, c * h]), ("ns", f32, [c * h]), ("down", f32, [c * h, r]), ("up", f32, [r, c * h]),
              ("inject", f32, [c * h, c])]  # fmt: skip
    node = analyze_node("HyperConnectionLowRankMix", inputs, ["pre", "gate", "streams"], {"num_branches": c}, domain=MS)
    rms = 4 * n + 2 * rows * c  # per-branch RMS norm with scale
    low_rank = 2 * n * r + 2 * rows * r + 2 * n * r  # hn·down, ScaledSiLU, ·up
    assert node.cost.flops == rms + low_rank + 2 * n + 2 * n * c + 2 * rows * c  # Σ_c hn·g; hn·inject, /div ·mul
    assert node.cost.transcendentals == rows * c + rows * r + n + rows * c  # sqrts, SiLU's and the two gates' sigmoids
    assert node.unit == "matrix"


# --- attention -----------------------------------------------------------------------------------


def test_sparse_attention_prefill_in_place_buffers():
    heads, kv_heads, head, seq, capacity = 8, 2, 16, 8, 128
    cache = (f16, [1, kv_heads, capacity, head])
    inputs = [("q", f16, [1, seq, heads * head]), ("k", f16, [1, seq, kv_heads * head]), ("v", f16, [1, seq, kv_heads * head]),
              ("pk", *cache), ("pv", *cache), ("rows", i32, [1, 9]), ("cols", i32, [1, 36]), ("total", i32, []),
              ("lengths", i32, [1])]  # fmt: skip
    attrs = {"num_heads": heads, "kv_num_heads": kv_heads, "sparse_block_size": 16}
    total = {"total": np.array(seq, np.int32)}
    node = analyze_node(
        "SparseAttention", inputs, ["y", "present_k", "present_v"], attrs, initializers=total, domain=MS
    )
    assert node.cost.flops == sdpa(1, heads, seq, seq, head, head, masks=1)  # T = total = 8, the causal block mask
    row = kv_heads * head * 2  # one position of one buffer, fp16
    assert node.cost.bytes_written == seq * heads * head * 2 + 2 * seq * row  # y, the 8 new rows of each buffer
    qkv = seq * (heads + 2 * kv_heads) * head * 2
    assert (
        node.cost.bytes_read == qkv + 0 + (9 + 36 + 1 + 1) * 4
    )  # no past rows to read; the block mask, total, lengths


PAGED = {"num_heads": 8, "kv_num_heads": 2}


def _paged_inputs(tokens, table):
    cache = (f16, [10, 16, 2, 16])
    return [("q", f16, [tokens, 8 * 16]), ("k", f16, [tokens, 2 * 16]), ("v", f16, [tokens, 2 * 16]), ("kc", *cache), ("vc", *cache),
            ("cumulative", i32, [table[0] + 1]), ("past", i32, [table[0]]), ("table", i32, list(table))]  # fmt: skip


def test_paged_attention_upper_bound_over_the_block_table():
    tokens = 12
    node = analyze_node("PagedAttention", _paged_inputs(tokens, (2, 5)), ["y", "kco", "vco"], PAGED, domain=MS)
    keys = 5 * 16  # max blocks per sequence · block size
    assert node.cost.flops == sdpa(1, 8, tokens, keys, 16, 16, masks=1)  # is_causal by default
    cache = 10 * 16 * 2 * 16 * 2  # bytes of one block cache
    assert node.cost.bytes_written == tokens * 8 * 16 * 2 + 2 * cache * tokens // (10 * 16)  # y; 12 new rows per cache
    qkv = tokens * (8 + 2 + 2) * 16 * 2
    assert node.cost.bytes_read == qkv + 2 * cache + (3 + 2 + 10) * 4  # the 10 blocks referenced: the whole caches


def test_paged_attention_reads_the_referenced_blocks():
    node = analyze_node("PagedAttention", _paged_inputs(1, (1, 2)), ["y", "kco", "vco"], PAGED, domain=MS)
    block = 16 * 2 * 16 * 2  # one block of one cache
    qkv = (8 + 2 + 2) * 16 * 2
    assert node.cost.bytes_read == qkv + 2 * 2 * block + (2 + 1 + 2) * 4  # 2 of the 10 blocks, per cache


def test_longformer_attention():
    batch, seq, hidden, heads, window = 2, 8, 64, 4, 2
    inputs = [("x", f16, [batch, seq, hidden]), ("w", f16, [hidden, 3 * hidden]), ("b", f16, [3 * hidden]), ("mask", f16, [batch, seq]),
              ("gw", f16, [hidden, 3 * hidden]), ("gb", f16, [3 * hidden]), ("global", i32, [batch, seq])]  # fmt: skip
    node = analyze_node("LongformerAttention", inputs, ["y"], {"num_heads": heads, "window": window}, domain=MS)
    projected = batch * seq * 3 * hidden
    projections = 2 * (2 * projected * hidden + projected)  # local and global weights, with biases
    assert node.cost.flops == projections + sdpa(batch, heads, seq, 2 * window + 1, 16, 16, masks=1)  # a 5-key band


def test_gemma_rotary_embedding():
    q = [2, 4, 8, 16]
    inputs = [("emb", f32, [2, 8, 16]), ("q", f16, q), ("q_rot", f16, q), ("k", f16, q), ("k_rot", f16, q)]
    node = analyze_node("GemmaRotaryEmbedding", inputs, ["qe", "ke"], domain=MS)
    assert node.cost.flops == 3 * 2 * (2 * 4 * 8 * 16)  # two multiplies and an add per element of each output
    assert node.cost.transcendentals == 2 * (2 * 8 * 16)  # sin and cos of emb


def test_m_rotary_embedding_reads_three_position_streams():
    inputs = [("x", f32, [2, 8, 64]), ("positions", i64, [3, 2, 8]), ("cos", f32, [64, 8]), ("sin", f32, [64, 8])]
    node = analyze_node("MRotaryEmbedding", inputs, ["y"], {"num_heads": 4, "mrope_section": [2, 3, 3]}, domain=MS)
    assert node.cost.flops == 3 * 2 * 8 * 64  # rot = 2·8 = the whole 16-wide head
    rows = 3 * 2 * 8  # T, H and W positions of each token
    assert node.cost.bytes_read == 2 * 8 * 64 * 4 + 3 * 2 * 8 * 8 + 2 * rows * 8 * 4


@pytest.mark.parametrize("bidirectional, per_pair", [(0, 7), (1, 9)])
def test_relative_position_bias(bidirectional, per_pair):
    lengths = {"q": np.array([8], np.int64), "k": np.array([11], np.int64)}
    inputs = [("table", f32, [32, 4]), ("q", i64, [1]), ("k", i64, [1])]
    attrs = {"max_distance": 128, "is_bidirectional": bidirectional}
    node = analyze_node("RelativePositionBias", inputs, ["y"], attrs, initializers=lengths, domain=MS)
    assert node.outputs[0].shape == (1, 4, 8, 11)
    assert node.cost.flops == per_pair * 8 * 11  # one bucket per (query, key) pair, shared by the heads
    assert node.cost.transcendentals == 8 * 11  # its log


def test_gated_relative_position_bias():
    inputs = [("q", f16, [2, 8, 64]), ("qb", f16, [64]), ("rel", f16, [1, 4, 8, 8]), ("w", f16, [16, 8]), ("b", f16, [8]),
              ("eco", f16, [1, 4, 1, 1])]  # fmt: skip
    node = analyze_node("GatedRelativePositionBias", inputs, ["y"], {"num_heads": 4}, domain=MS)
    rows = 2 * 8 * 4  # (batch, position, head) rows of dh = 16
    per_row = 2 * 16 * 8 + 8 + (8 - 2) + 4  # the gate projection and its bias, the halves' sums, the gate formula
    assert node.cost.flops == 2 * 8 * 64 + rows * per_row + 2 * 4 * 8 * 8  # query bias add; one multiply per output
    assert node.cost.transcendentals == 2 * rows  # two sigmoids per row


# --- padding and unfold --------------------------------------------------------------------------


def test_remove_padding_reads_the_real_tokens():
    counts = {"counts": np.array([3, 5], np.int32)}
    outputs = ["y", "offsets", "cumulated", "max"]
    node = analyze_node(
        "RemovePadding", [("x", f16, [2, 8, 64]), ("counts", i32, [2])], outputs, initializers=counts, domain=MS
    )
    assert node.cost.flops == 0
    assert node.cost.bytes_read == (3 + 5) * 64 * 2 + 2 * 4  # the 8 real rows, the counts
    assert node.cost.bytes_written == 8 * 64 * 2 + (2 * 8 + 3 + 1) * 4


def test_restore_padding_and_unfold_are_copies():
    node = analyze_node("RestorePadding", [("x", f16, [12, 64]), ("offsets", i32, [2, 8])], ["y"], domain=MS)
    assert (node.cost.flops, node.cost.bytes_read, node.cost.bytes_written) == (0, 12 * 64 * 2 + 16 * 4, 2 * 8 * 64 * 2)
    node = analyze_node("UnfoldTensor", [("x", f32, [2, 8, 64])], ["y"], {"dim": 1, "size": 4, "step": 2}, domain=MS)
    assert node.outputs[0].shape == (2, 3, 64, 4)  # (8 − 4)/2 + 1 = 3 overlapping windows
    assert (node.cost.flops, node.cost.bytes_read, node.cost.bytes_written) == (0, 2 * 8 * 64 * 4, 2 * 3 * 64 * 4 * 4)
