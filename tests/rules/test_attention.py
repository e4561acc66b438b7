"""Attention rules: ai.onnx Attention / RotaryEmbedding and onnxruntime's contrib attention family.

The score cost over E = B·H·S·T score elements and L = B·H·S rows: Q·Kᵀ 2·E·dh, scale E, E per mask
source, softmax 4E − 2L (E exps), P·V 2·E·dv."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import analyze_node

MS = "com.microsoft"


def sdpa(batch, heads, q_len, kv_len, qk_dim, v_dim, masks=0):
    """The module docstring's count, spelled out term by term."""
    scores, rows = batch * heads * q_len * kv_len, batch * heads * q_len
    return (
        2 * scores * qk_dim  # Q·Kᵀ
        + scores  # scale
        + masks * scores  # one add/select per score per mask source
        + 4 * scores
        - 2 * rows  # softmax
        + 2 * scores * v_dim  # P·V
    )


# --- ai.onnx Attention -----------------------------------------------------------------------------


def test_attention_small_case_by_hand():
    node = analyze_node(
        "Attention",
        [("q", "float16", [1, 2, 4, 8]), ("k", "float16", [1, 2, 4, 8]), ("v", "float16", [1, 2, 4, 8])],
        [("y", "float16", [1, 2, 4, 8])],
        opset=23,
    )
    # E = 1·2·4·4 = 32 scores, L = 8 rows: QK 2·32·8 = 512, scale 32, softmax 4·32 − 2·8 = 112, PV 512
    assert node.cost.flops == 512 + 32 + 112 + 512 == 1168
    assert node.cost.transcendentals == 32  # one exp per score
    assert node.cost.bytes_read == 3 * 64 * 2  # Q, K, V (64 fp16 elements each): no score matrix
    assert node.cost.bytes_written == 64 * 2
    assert node.unit == "matrix" and node.dtype == "fp16"


def test_attention_4d_gqa_counts_every_query_head():
    inputs = [("q", "float16", [2, 12, 16, 64]), ("k", "float16", [2, 4, 16, 64]), ("v", "float16", [2, 4, 16, 64])]
    gqa = analyze_node("Attention", inputs, [("y", "float16", [2, 12, 16, 64])], opset=23)
    mha_inputs = [
        ("q", "float16", [2, 12, 16, 64]),
        ("k", "float16", [2, 12, 16, 64]),
        ("v", "float16", [2, 12, 16, 64]),
    ]
    mha = analyze_node("Attention", mha_inputs, [("y", "float16", [2, 12, 16, 64])], opset=23)
    assert gqa.cost.flops == mha.cost.flops == sdpa(2, 12, 16, 16, 64, 64)  # 12 query heads score all keys
    assert gqa.cost.bytes_read == (2 * 12 * 16 * 64 + 2 * 2 * 4 * 16 * 64) * 2  # K, V have 4 heads only


def test_attention_causal_counts_raw_rectangle_plus_one_select():
    inputs = [("q", "float32", [1, 4, 32, 16]), ("k", "float32", [1, 4, 32, 16]), ("v", "float32", [1, 4, 32, 16])]
    plain = analyze_node("Attention", inputs, [("y", "float32", [1, 4, 32, 16])], opset=23)
    causal = analyze_node("Attention", inputs, [("y", "float32", [1, 4, 32, 16])], {"is_causal": 1}, opset=23)
    scores = 1 * 4 * 32 * 32
    assert causal.cost.flops - plain.cost.flops == scores  # the causal select per score; no halving
    assert causal.cost.flops == sdpa(1, 4, 32, 32, 16, 16, masks=1)


def test_attention_3d_with_past_mask_and_softcap_opset_24():
    node = analyze_node(
        "Attention",
        [
            ("q", "float16", [2, 16, 768]),  # 12 heads of 64
            ("k", "float16", [2, 16, 256]),  # 4 kv heads of 64
            ("v", "float16", [2, 16, 256]),
            ("mask", "bool", [16, 21]),
            ("past_k", "float16", [2, 4, 5, 64]),
            ("past_v", "float16", [2, 4, 5, 64]),
        ],
        [("y", "float16", [2, 16, 768]), ("pk", "float16", [2, 4, 21, 64]), ("pv", "float16", [2, 4, 21, 64])],
        {"q_num_heads": 12, "kv_num_heads": 4, "softcap": 30.0},
        opset=24,
    )
    scores = 2 * 12 * 16 * 21  # T = 5 past + 16 new
    assert node.cost.flops == sdpa(2, 12, 16, 21, 64, 64, masks=1) + 2 * scores  # mask add; softcap 2/score
    assert node.cost.transcendentals == 2 * scores  # exp and tanh per score
    assert node.cost.bytes_written == (2 * 16 * 768 + 2 * 2 * 4 * 21 * 64) * 2  # Y and the presents


def test_attention_newest_version_applies_at_opset_25():
    inputs = [("q", "float16", [1, 2, 4, 8]), ("k", "float16", [1, 2, 4, 8]), ("v", "float16", [1, 2, 4, 8])]
    node = analyze_node("Attention", inputs, [("y", "float16", [1, 2, 4, 8])], opset=25)
    assert node.cost.flops == 1168  # the since-23 rule, as in the hand-counted case


# --- ai.onnx RotaryEmbedding ----------------------------------------------------------------------


def test_rotary_embedding_partial_rotation_reads_looked_up_cache_rows():
    node = analyze_node(
        "RotaryEmbedding",
        [
            ("x", "float16", [2, 12, 16, 64]),
            ("cos", "float16", [128, 16]),  # rot/2 = 16: 32 of each head's 64 dims rotate
            ("sin", "float16", [128, 16]),
            ("pos", "int64", [2, 16]),
        ],
        [("y", "float16", [2, 12, 16, 64])],
        {"rotary_embedding_dim": 32},
        opset=23,
    )
    elements = 2 * 12 * 16 * 64
    assert node.cost.flops == 3 * elements // 2  # half the elements rotated, 3 FLOPs each
    caches = 2 * (2 * 16) * 16 * 2  # cos and sin: 32 looked-up rows of 16 fp16
    assert node.cost.bytes_read == elements * 2 + 2 * 16 * 8 + caches  # X, position_ids, cache rows
    assert node.cost.bytes_written == elements * 2
    assert node.unit == "vector"


def test_rotary_embedding_3d_without_positions_reads_whole_gathered_caches():
    node = analyze_node(
        "RotaryEmbedding",
        [("x", "float32", [1, 8, 4 * 32]), ("cos", "float32", [1, 8, 16]), ("sin", "float32", [1, 8, 16])],
        [("y", "float32", [1, 8, 128])],
        {"num_heads": 4},
        opset=23,
    )
    assert node.cost.flops == 3 * 8 * 128  # full rotation: head 32 = 2·16
    assert node.cost.bytes_read == (8 * 128 + 2 * 8 * 16) * 4


# --- contrib Attention ------------------------------------------------------------------------------


def test_contrib_attention_bert_includes_projection_and_mask():
    node = analyze_node(
        "Attention",
        [
            ("x", "float32", [2, 16, 768]),
            ("w", "float32", [768, 2304]),
            ("b", "float32", [2304]),
            ("mask_index", "int32", [2]),
        ],
        ["y"],  # shape from onnxruntime's symbolic inference
        {"num_heads": 12},
        domain=MS,
    )
    projection = 2 * (2 * 16) * 768 * 2304 + (2 * 16) * 2304  # 2·tokens·Din·3D, then the bias
    assert node.cost.flops == projection + sdpa(2, 12, 16, 16, 64, 64, masks=1)
    assert node.cost.flops == 113_246_208 + 73_728 + 1_602_816 + 6_144
    assert node.cost.bytes_read == (2 * 16 * 768 + 768 * 2304 + 2304) * 4 + 2 * 4  # x, weights, bias, mask
    assert node.unit == "matrix" and node.dtype == "fp32"


def test_contrib_attention_gpt2_decode_with_past():
    node = analyze_node(
        "Attention",
        [
            ("x", "float16", [1, 1, 768]),
            ("w", "float16", [768, 2304]),
            ("b", "float16", [2304]),
            "",
            ("past", "float16", [2, 1, 12, 127, 64]),
        ],
        [("y", "float16", [1, 1, 768]), ("present", "float16", [2, 1, 12, 128, 64])],
        {"num_heads": 12, "unidirectional": 1},
        domain=MS,
    )
    projection = 2 * 768 * 2304 + 2304
    assert node.cost.flops == projection + sdpa(1, 12, 1, 128, 64, 64, masks=1)  # T = 127 + 1; causal select
    assert node.cost.bytes_written == (768 + 2 * 12 * 128 * 64) * 2  # y and the whole present (concat)


def test_contrib_attention_shared_buffer_with_constant_past_length():
    node = analyze_node(
        "Attention",
        [
            ("x", "float16", [1, 1, 768]),
            ("w", "float16", [768, 2304]),
            ("b", "float16", [2304]),
            "",
            ("past", "float16", [2, 1, 12, 1024, 64]),  # max-length buffer
            "",
            ("past_len", "int32", [1]),
        ],
        [("y", "float16", [1, 1, 768]), ("present", "float16", [2, 1, 12, 1024, 64])],
        {"num_heads": 12, "unidirectional": 1, "past_present_share_buffer": 1},
        initializers={"past_len": np.array([99], dtype=np.int32)},
        domain=MS,
    )
    assert node.cost.flops == 2 * 768 * 2304 + 2304 + sdpa(1, 12, 1, 100, 64, 64, masks=1)  # T = 99 + 1
    row = 2 * 12 * 64 * 2  # one sequence position of K and V, fp16
    weights = (768 * 2304 + 2304) * 2
    assert node.cost.bytes_read == 768 * 2 + weights + 99 * row + 4  # x, weights, 99 past rows, past_len
    assert node.cost.bytes_written == 768 * 2 + 1 * row  # y and the one new row


def test_contrib_attention_shared_buffer_unknown_length_is_the_buffer():
    node = analyze_node(
        "Attention",
        [
            ("x", "float16", [1, 1, 768]),
            ("w", "float16", [768, 2304]),
            "",
            "",
            ("past", "float16", [2, 1, 12, 1024, 64]),
            "",
            ("past_len", "int32", [1]),  # a graph input: its value is unknown
        ],
        [("y", "float16", [1, 1, 768]), ("present", "float16", [2, 1, 12, 1024, 64])],
        {"num_heads": 12, "past_present_share_buffer": 1},
        domain=MS,
    )
    assert node.cost.flops == 2 * 768 * 2304 + sdpa(1, 12, 1, 1024, 64, 64)  # upper bound: the whole buffer


def test_contrib_attention_uneven_qkv_hidden_sizes():
    node = analyze_node(
        "Attention",
        [("x", "float32", [1, 8, 64]), ("w", "float32", [64, 64 + 64 + 128])],
        [("y", "float32", [1, 8, 128])],
        {"num_heads": 4, "qkv_hidden_sizes": [64, 64, 128]},
        domain=MS,
    )
    assert node.cost.flops == 2 * 8 * 64 * 256 + sdpa(1, 4, 8, 8, 16, 32)  # dh = 64/4, dv = 128/4; no bias


def test_decoder_masked_self_attention_is_attention_for_one_step():
    node = analyze_node(
        "DecoderMaskedSelfAttention",
        [
            ("x", "float16", [4, 1, 768]),
            ("w", "float16", [768, 2304]),
            ("b", "float16", [2304]),
            ("mask", "int32", [4, 50]),
            ("past", "float16", [2, 4, 12, 49, 64]),
            "",
            ("past_len", "int32", [1]),
        ],
        [("y", "float16", [4, 1, 768]), ("present", "float16", [2, 4, 12, 50, 64])],
        {"num_heads": 12},
        domain=MS,
    )
    assert node.cost.flops == 2 * 4 * 768 * 2304 + 4 * 2304 + sdpa(4, 12, 1, 50, 64, 64, masks=1)


def test_q_attention_integer_projection():
    node = analyze_node(
        "QAttention",
        [
            ("x", "uint8", [2, 16, 768]),
            ("w", "int8", [768, 2304]),
            ("b", "float32", [2304]),
            ("xs", "float32", []),
            ("ws", "float32", []),
            ("mask", "int32", [2]),
            ("xz", "uint8", []),  # a graph input: may be non-zero
            ("wz", "int8", []),
        ],
        [("y", "float32", [2, 16, 768])],  # onnxruntime's symbolic inference leaves QAttention unknown
        {"num_heads": 12},
        initializers={"wz": np.array(0, dtype=np.int8)},  # symmetric weights: nothing to subtract
        domain=MS,
    )
    projected = 2 * 16 * 2304
    expected = 2 * projected * 768 + projected  # integer product, bias
    expected += projected + 2 * 16 * 768  # dequantize the projection; subtract the input zero point
    assert node.cost.flops == expected + sdpa(2, 12, 16, 16, 64, 64, masks=1)
    assert node.dtype == "int8" and node.unit == "matrix"


# --- MultiHeadAttention, GroupQueryAttention ----------------------------------------------------


def test_multi_head_attention_with_bias_and_key_padding_mask():
    node = analyze_node(
        "MultiHeadAttention",
        [
            ("q", "float16", [2, 16, 768]),
            ("k", "float16", [2, 24, 768]),
            ("v", "float16", [2, 24, 512]),
            ("bias", "float16", [768 + 768 + 512]),
            ("kpm", "int32", [2, 24]),
        ],
        [("y", "float16", [2, 16, 512])],
        {"num_heads": 8},
        domain=MS,
    )
    bias = 2 * 16 * 768 + 2 * 24 * (768 + 512)  # one add per element of Q, K and V
    assert node.cost.flops == sdpa(2, 8, 16, 24, 96, 64, masks=1) + bias


def test_multi_head_attention_packed_qkv():
    node = analyze_node(
        "MultiHeadAttention",
        [("qkv", "float16", [2, 16, 12, 3, 64])],
        ["y"],
        {"num_heads": 12},
        domain=MS,
    )
    assert node.outputs[0].shape == (2, 16, 768)
    assert node.cost.flops == sdpa(2, 12, 16, 16, 64, 64)


def test_multi_head_attention_cross_attention_bnsh_cache_appends_nothing():
    node = analyze_node(
        "MultiHeadAttention",
        [("q", "float16", [2, 1, 768]), ("k", "float16", [2, 12, 1500, 64]), ("v", "float16", [2, 12, 1500, 64])],
        [("y", "float16", [2, 1, 768])],
        {"num_heads": 12},
        domain=MS,
    )
    assert node.cost.flops == sdpa(2, 12, 1, 1500, 64, 64)  # Whisper-style cross attention, T = encoder length


def test_multi_head_attention_with_past_appends():
    node = analyze_node(
        "MultiHeadAttention",
        [
            ("q", "float16", [2, 1, 768]),
            ("k", "float16", [2, 1, 768]),
            ("v", "float16", [2, 1, 768]),
            "",
            "",
            "",
            ("pk", "float16", [2, 12, 7, 64]),
            ("pv", "float16", [2, 12, 7, 64]),
        ],
        ["y", "present_k", "present_v"],
        {"num_heads": 12, "unidirectional": 1},
        domain=MS,
    )
    assert node.outputs[1].shape == (2, 12, 8, 64)
    assert node.cost.flops == sdpa(2, 12, 1, 8, 64, 64, masks=1)  # T = 7 + 1


def test_group_query_attention_decode_in_place_cache():
    batch, heads, kv_heads, head, capacity = 1, 32, 8, 128, 4096
    cache = ("float16", [batch, kv_heads, capacity, head])
    node = analyze_node(
        "GroupQueryAttention",
        [
            ("q", "float16", [batch, 1, heads * head]),
            ("k", "float16", [batch, 1, kv_heads * head]),
            ("v", "float16", [batch, 1, kv_heads * head]),
            ("past_k", *cache),
            ("past_v", *cache),
            ("seqlens_k", "int32", [batch]),
            ("total_len", "int32", []),
        ],
        [("y", "float16", [batch, 1, heads * head]), ("present_k", *cache), ("present_v", *cache)],
        {"num_heads": heads, "kv_num_heads": kv_heads},
        initializers={"total_len": np.array(100, dtype=np.int32)},
        domain=MS,
    )
    assert node.cost.flops == sdpa(1, 32, 1, 100, 128, 128, masks=1)  # T = 100; causal by default
    row = kv_heads * head * 2  # one position of one cache, fp16
    new_qkv = (heads + 2 * kv_heads) * head * 2
    assert node.cost.bytes_read == new_qkv + 2 * 99 * row + 4 + 4  # q/k/v, 99 past rows of K and V, ints
    assert node.cost.bytes_written == heads * head * 2 + 2 * 1 * row  # y and one new row per cache
    assert node.dtype == "fp16"


def test_group_query_attention_prompt_with_rotary_and_packed_qkv():
    batch, seq, heads, kv_heads, head = 2, 16, 32, 8, 128
    node = analyze_node(
        "GroupQueryAttention",
        [
            ("qkv", "float16", [batch, seq, (heads + 2 * kv_heads) * head]),
            "",
            "",
            ("past_k", "float16", [batch, kv_heads, 0, head]),
            ("past_v", "float16", [batch, kv_heads, 0, head]),
            ("seqlens_k", "int32", [batch]),
            ("total_len", "int32", []),
            ("cos", "float16", [4096, 64]),
            ("sin", "float16", [4096, 64]),
        ],
        [
            ("y", "float16", [batch, seq, heads * head]),
            ("present_k", "float16", [batch, kv_heads, seq, head]),
            ("present_v", "float16", [batch, kv_heads, seq, head]),
        ],
        {"num_heads": heads, "kv_num_heads": kv_heads, "do_rotary": 1},
        domain=MS,
    )
    rotary = 3 * batch * seq * (heads + kv_heads) * 128  # Q and new K, rot = 2·64 = the whole head
    assert node.cost.flops == sdpa(batch, heads, seq, seq, head, head, masks=1) + rotary  # T = present's 16
    caches = 2 * (batch * seq) * 64 * 2  # cos and sin: 32 looked-up rows, not 4096
    assert node.cost.bytes_read == batch * seq * (heads + 2 * kv_heads) * head * 2 + 2 * 4 + 4 + caches


def test_group_query_attention_int8_cache_dequantizes():
    kwargs = dict(
        outputs=[
            ("y", "float16", [1, 1, 256]),
            ("present_k", "int8", [1, 2, 64, 64]),
            ("present_v", "int8", [1, 2, 64, 64]),
        ],
        attrs={"num_heads": 4, "kv_num_heads": 2},
        initializers={"total": np.array(64, dtype=np.int32)},
        domain=MS,
    )
    inputs = [
        ("q", "float16", [1, 1, 256]),
        ("k", "float16", [1, 1, 128]),
        ("v", "float16", [1, 1, 128]),
        ("pk", "int8", [1, 2, 64, 64]),
        ("pv", "int8", [1, 2, 64, 64]),
        ("sk", "int32", [1]),
        ("total", "int32", []),
    ]
    node = analyze_node("GroupQueryAttention", inputs, **kwargs)
    dequantize = 2 * 1 * 2 * 64 * 64  # K and V: T = 64 rows of 2 heads × 64
    quantize = 2 * 4 * 1 * 2 * 64  # the new K and V row, 4 FLOPs per element
    assert node.cost.flops == sdpa(1, 4, 1, 64, 64, 64, masks=1) + dequantize + quantize


# --- packed and decoder-masked forms ----------------------------------------------------------------


def test_packed_attention_counts_the_padded_rectangle():
    node = analyze_node(
        "PackedAttention",
        [
            ("x", "float16", [20, 768]),  # 20 real tokens of 2 sequences padded to 16
            ("w", "float16", [768, 2304]),
            ("b", "float16", [2304]),
            ("token_offset", "int32", [2, 16]),
            ("cum", "int32", [3]),
        ],
        ["y"],
        {"num_heads": 12},
        domain=MS,
    )
    assert node.cost.flops == 2 * 20 * 768 * 2304 + 20 * 2304 + sdpa(2, 12, 16, 16, 64, 64)


def test_packed_multi_head_attention():
    node = analyze_node(
        "PackedMultiHeadAttention",
        [
            ("q", "float16", [20, 768]),
            ("k", "float16", [20, 768]),
            ("v", "float16", [20, 768]),
            ("bias", "float16", [2304]),
            ("token_offset", "int32", [2, 16]),
            ("cum", "int32", [3]),
        ],
        ["y"],
        {"num_heads": 12},
        domain=MS,
    )
    assert node.cost.flops == sdpa(2, 12, 16, 16, 64, 64) + 20 * 2304  # bias: one add per Q, K, V element


def test_decoder_masked_mha_shared_buffer():
    node = analyze_node(
        "DecoderMaskedMultiHeadAttention",
        [
            ("q", "float16", [2, 1, 768]),
            ("k", "float16", [2, 1, 768]),
            ("v", "float16", [2, 1, 768]),
            "",
            "",
            ("pk", "float16", [2, 12, 32, 64]),
            ("pv", "float16", [2, 12, 32, 64]),
            ("psl", "int32", [1]),
        ],
        ["y", "presk", "presv"],
        {"num_heads": 12, "past_present_share_buffer": 1},
        initializers={"psl": np.array([9], dtype=np.int32)},
        domain=MS,
    )
    assert node.cost.flops == sdpa(2, 12, 1, 10, 64, 64)  # T = 9 past + 1 new, not the 32-row buffer
    row = 2 * 12 * 64 * 2  # one position of one cache for the batch, fp16
    assert node.cost.bytes_read == 3 * 2 * 768 * 2 + 2 * 9 * row + 4
    assert node.cost.bytes_written == 2 * 768 * 2 + 2 * row


def test_decoder_masked_mha_cross_attention():
    node = analyze_node(
        "DecoderMaskedMultiHeadAttention",
        [("q", "float16", [2, 1, 768]), ("k", "float16", [2, 12, 1500, 64]), ("v", "float16", [2, 12, 1500, 64])],
        [("y", "float16", [2, 1, 768])],
        {"num_heads": 12},
        domain=MS,
    )
    assert node.cost.flops == sdpa(2, 12, 1, 1500, 64, 64)


# --- contrib RotaryEmbedding --------------------------------------------------------------------------


@pytest.mark.parametrize(("positions", "rows"), [([2, 16], 32), ([1], 16)])
def test_contrib_rotary_embedding(positions, rows):
    node = analyze_node(
        "RotaryEmbedding",
        [
            ("x", "float16", [2, 16, 768]),
            ("pos", "int64", positions),
            ("cos", "float16", [2048, 32]),
            ("sin", "float16", [2048, 32]),
        ],
        ["y"],
        {"num_heads": 12},
        domain=MS,
    )
    assert node.cost.flops == 3 * 2 * 16 * 768  # rot = 2·32 = head 64: every element rotates
    cache_rows = 2 * rows * 32 * 2  # B·S looked-up rows, or S rows from a start offset
    assert node.cost.bytes_read == 2 * 16 * 768 * 2 + int(np.prod(positions)) * 8 + cache_rows


def test_causal_attention_reports_useful_flops_over_the_lower_triangle():
    """ai.onnx Attention, is_causal=1, B = H = 1, S = T = 4, dh = dv = 2: E = 16 scores executed,
    4·5/2 = 10 useful; L = 4 rows; one mask source (the causal select).
    FLOPs(E) = 2·E·dh + E·(1 + 1) + 4·E − 2·L + 2·E·dv."""
    from tests.conftest import analyze_node

    node = analyze_node(
        "Attention",
        [("q", "float32", [1, 1, 4, 2]), ("k", "float32", [1, 1, 4, 2]), ("v", "float32", [1, 1, 4, 2])],
        [("y", "float32", [1, 1, 4, 2])],
        attrs={"is_causal": 1},
        opset=23,
    )
    assert node.cost.flops == 2 * 16 * 2 + 16 * 2 + 4 * 16 - 2 * 4 + 2 * 16 * 2  # 216
    assert node.cost.useful_flops == 2 * 10 * 2 + 10 * 2 + 4 * 10 - 2 * 4 + 2 * 10 * 2  # 132
    assert node.to_dict()["useful_flops"] == 132
