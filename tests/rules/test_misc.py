"""DeformConv, TfIdfVectorizer, CausalConvWithState, LinearAttention, TensorScatter, FlexAttention
(onnx_roofline/costs/rules/misc.py). f32 = 4 bytes, f16 = 2, int64 = 8."""

from __future__ import annotations

from onnx import TensorProto, helper

from onnx_roofline import analyze
from tests.conftest import analyze_node, one_node_model

DEFORM_INPUTS = [("x", "float32", [1, 2, 5, 5]), ("w", "float32", [4, 2, 3, 3]), ("offset", "float32", [1, 18, 3, 3])]


def test_deform_conv_with_bias_and_mask():
    # X [1, 2, 5, 5], W [4, 2, 3, 3]: output [1, 4, 3, 3]; 9 taps per input channel
    plain = analyze_node("DeformConv", DEFORM_INPUTS, [("y", "float32", [1, 4, 3, 3])], opset=22)
    conv = 2 * (2 * 3 * 3) * (4 * 3 * 3)  # as Conv: 2 · (C/group)·kH·kW per output
    sampled = 1 * 2 * 9 * (3 * 3)  # N · C · taps · output positions
    assert plain.cost.flops == conv + 4 * 2 * sampled  # bilinear: 4 neighbours, a multiply-add each
    assert plain.unit == "matrix"
    full = analyze_node(
        "DeformConv",
        DEFORM_INPUTS + [("b", "float32", [4]), ("mask", "float32", [1, 9, 3, 3])],
        [("y", "float32", [1, 4, 3, 3])],
        opset=22,
    )
    assert full.cost.flops == conv + 4 * 3 * 3 + 4 * 2 * sampled + sampled  # + bias, + mask multiply


def test_deform_conv_grouped():
    node = analyze_node(
        "DeformConv",
        [DEFORM_INPUTS[0], ("w", "float32", [4, 1, 3, 3]), DEFORM_INPUTS[2]],
        [("y", "float32", [1, 4, 3, 3])],
        attrs={"group": 2},
        opset=22,
    )
    assert node.cost.flops == 2 * (1 * 9) * (4 * 9) + 4 * 2 * (2 * 9 * 9)  # sampling still per input channel


def test_tfidf_vectorizer_counts_candidate_ngrams():
    # rows of 6 items; 1- and 2-grams, skips up to 1
    node = analyze_node(
        "TfIdfVectorizer",
        [("x", "int64", [2, 6])],
        [("y", "float32", [2, 4])],
        attrs={
            "mode": "TFIDF",
            "min_gram_length": 1,
            "max_gram_length": 2,
            "max_skip_count": 1,
            "ngram_counts": [0, 2],
            "ngram_indexes": [0, 1, 2, 3],
            "pool_int64s": [1, 2, 1, 2, 2, 3],
            "weights": [1.0, 1.0, 0.5, 0.5],
        },
        opset=9,
    )
    per_row = 6 + (6 - 1) + (6 - 2)  # unigrams; bigrams at skip distances 1 and 2
    assert node.cost.flops == 2 * per_row + 2 * 4  # + one weight multiply per output
    pool = (2 + 4 + 6) * 8 + 4 * 4  # ngram_counts, ngram_indexes, pool_int64s; weights
    assert node.cost.bytes_read == 2 * 6 * 8 + pool


def test_causal_conv_with_state_silu():
    # input [B=2, C=4, L=8], K = 3 taps, past_state [2, 4, 2]
    node = analyze_node(
        "CausalConvWithState",
        [
            ("x", "float32", [2, 4, 8]),
            ("w", "float32", [4, 1, 3]),
            ("b", "float32", [4]),
            ("past", "float32", [2, 4, 2]),
        ],
        [("y", "float32", [2, 4, 8]), ("present", "float32", [2, 4, 2])],
        attrs={"activation": "silu"},
        opset=27,
    )
    outputs = 2 * 4 * 8
    assert node.cost.flops == outputs * (2 * 3 + 1 + 1)  # 3 multiply-adds, bias, x·sigmoid(x)
    assert node.cost.transcendentals == outputs  # the sigmoid
    assert node.cost.bytes_read == (64 + 12 + 4 + 16) * 4
    assert node.cost.bytes_written == (64 + 16) * 4
    assert node.unit == "vector"


def test_linear_attention_gated_delta_gqa():
    # B=1, T=3; 4 query heads, 2 KV heads; dk = 8, dv = 6
    node = analyze_node(
        "LinearAttention",
        [
            ("q", "float32", [1, 3, 4 * 8]),
            ("k", "float32", [1, 3, 2 * 8]),
            ("v", "float32", [1, 3, 2 * 6]),
            "",
            ("decay", "float32", [1, 3, 2]),
            ("beta", "float32", [1, 3, 2]),
        ],
        [("o", "float32", [1, 3, 4 * 6]), ("state", "float32", [1, 2, 8, 6])],
        attrs={"q_num_heads": 4, "kv_num_heads": 2},
        opset=27,
    )
    per_kv_head = (
        8 * 6  # exp(g)·S
        + 2 * 8 * 6
        + 6
        + 6  # Sᵀk, v − Sᵀk, β·(…)
        + 2 * 8 * 6
    )  # S + k ⊗ v
    per_q_head = 2 * 8 * 6 + 6  # scale · qᵀS
    assert node.cost.flops == 3 * (2 * per_kv_head + 4 * per_q_head)
    assert node.cost.transcendentals == 3 * 2  # one exp per decay value
    assert node.unit == "matrix"


def test_linear_attention_linear_rule():
    node = analyze_node(
        "LinearAttention",
        [("q", "float32", [2, 5, 16]), ("k", "float32", [2, 5, 16]), ("v", "float32", [2, 5, 16])],
        [("o", "float32", [2, 5, 16]), ("state", "float32", [2, 2, 8, 8])],
        attrs={"q_num_heads": 2, "kv_num_heads": 2, "update_rule": "linear"},
        opset=27,
    )
    assert node.cost.flops == 2 * 5 * (2 * (2 * 64) + 2 * (2 * 64 + 8))
    assert node.cost.transcendentals == 0


def test_tensor_scatter_graph_as_written():
    node = analyze_node(
        "TensorScatter",
        [("past", "float16", [2, 1, 8, 4]), ("update", "float16", [2, 1, 1, 4]), ("idx", "int64", [2])],
        [("present", "float16", [2, 1, 8, 4])],
        opset=24,
    )
    assert node.cost.flops == 0
    assert node.cost.bytes_read == 2 * 8 * 4 * 2 + 2 * 4 * 2 + 2 * 8  # past, update, write_indices
    assert node.cost.bytes_written == 2 * 8 * 4 * 2  # present, a new tensor in the graph as written


def flex(score_mod=None, opset=26):
    attrs = {} if score_mod is None else {"score_mod": score_mod}
    return analyze_node(
        "FlexAttention",
        [("q", "float32", [1, 2, 3, 4]), ("k", "float32", [1, 1, 5, 4]), ("v", "float32", [1, 1, 5, 6])],
        [("y", "float32", [1, 2, 3, 6])],
        attrs=attrs,
        opset=opset,
        domain="ai.onnx.preview",
    )


def test_flex_attention_gqa():
    node = flex()
    lines, scores = 1 * 2 * 3, 1 * 2 * 3 * 5  # B·Hq·L softmax lines of S = 5
    assert node.cost.flops == 2 * scores * 4 + scores + (4 * scores - 2 * lines) + 2 * scores * 6
    assert node.cost.transcendentals == scores  # an exp per score
    assert node.cost.bytes_read == (24 + 20 + 30) * 4  # Q, K, V: the scores never leave the op
    assert node.cost.bytes_written == 36 * 4
    assert node.unit == "matrix"


def test_flex_attention_score_mod_adds_its_subgraph():
    scores_type = helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["B", "H", "L", "S"])
    out_type = helper.make_tensor_value_info("capped", TensorProto.FLOAT, ["B", "H", "L", "S"])
    cap = helper.make_tensor("cap", TensorProto.FLOAT, [], [30.0])
    soft_cap = helper.make_graph(
        [
            helper.make_node("Div", ["scores", "cap"], ["scaled"]),
            helper.make_node("Tanh", ["scaled"], ["t"]),
            helper.make_node("Mul", ["t", "cap"], ["capped"]),
        ],
        "soft_cap",
        [scores_type],
        [out_type],
        initializer=[cap],
    )
    base = flex()
    node = flex(soft_cap)
    assert node.cost.flops == base.cost.flops + 2 * 30  # a divide and a multiply per score
    assert node.cost.transcendentals == base.cost.transcendentals + 30  # a tanh per score
    assert node.cost.bytes_read == base.cost.bytes_read  # the modifier runs inside the fused op


def test_flex_attention_uncostable_modifier_is_not_zero():
    scores_type = helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["B", "H", "L", "S"])
    out_type = helper.make_tensor_value_info("out", TensorProto.FLOAT, ["B", "H", "L", "S"])
    unknown = helper.make_graph(
        [helper.make_node("NoSuchOp", ["scores"], ["out"], domain="example")], "mystery", [scores_type], [out_type]
    )
    model = one_node_model(
        "FlexAttention",
        [("q", "float32", [1, 2, 3, 4]), ("k", "float32", [1, 1, 5, 4]), ("v", "float32", [1, 1, 5, 6])],
        [("y", "float32", [1, 2, 3, 6])],
        attrs={"score_mod": unknown},
        opset=26,
        domain="ai.onnx.preview",
    )
    (node,) = analyze(model).nodes
    assert node.status != "ok" and "score_mod" in node.reason
