"""onnxruntime's fused contrib ops: each costs what the ops it fuses cost (LayerNorm 5n + 2L + n per
affine term, L sqrts; RMS norm 4n + 2L; softmax 4n − 2L, n exps; erf Gelu 4, tanh Gelu 8, one
transcendental; one FLOP per add), with the default bytes of the fused node."""

from __future__ import annotations

import pytest

from tests.conftest import analyze_node

MS = "com.microsoft"
B, S, D = 2, 16, 768
N = B * S * D  # elements of a [B, S, D] activation
ROWS = B * S  # rows normalized over D


def test_skip_layer_norm_bert_form():
    node = analyze_node(
        "SkipLayerNormalization",
        [
            ("x", "float32", [B, S, D]),
            ("skip", "float32", [B, S, D]),
            ("gamma", "float32", [D]),
            ("beta", "float32", [D]),
            ("bias", "float32", [D]),
        ],
        ["y"],
        domain=MS,
    )
    # skip add n, bias add n, statistics and normalize 5n + 2L, gamma n, beta n
    assert node.cost.flops == N + N + 5 * N + 2 * ROWS + N + N == 9 * N + 2 * ROWS
    assert node.cost.transcendentals == ROWS  # one sqrt per row
    assert node.cost.bytes_read == (2 * N + 3 * D) * 4  # x, skip, gamma, beta, bias
    assert node.cost.bytes_written == N * 4
    assert node.unit == "vector"


def test_skip_layer_norm_gamma_only_and_sum_output():
    node = analyze_node(
        "SkipLayerNormalization",
        [("x", "float16", [B, S, D]), ("skip", "float16", [1, S, D]), ("gamma", "float16", [D])],
        [("y", "float16", [B, S, D]), "", "", ("sum", "float16", [B, S, D])],
        domain=MS,
    )
    assert node.cost.flops == 7 * N + 2 * ROWS  # skip, standardize, gamma
    assert node.cost.bytes_read == (N + S * D + D) * 2  # the broadcast skip is read at its own size
    assert node.cost.bytes_written == 2 * N * 2  # y and input_skip_bias_sum


def test_skip_simplified_layer_norm():
    node = analyze_node(
        "SkipSimplifiedLayerNormalization",
        [
            ("x", "float16", [B, S, D]),
            ("skip", "float16", [B, S, D]),
            ("gamma", "float16", [D]),
            ("bias", "float16", [D]),
        ],
        ["y"],
        domain=MS,
    )
    assert node.cost.flops == N + N + 4 * N + 2 * ROWS  # skip, bias, RMS norm with gamma
    assert node.cost.transcendentals == ROWS


def test_simplified_layer_norm_is_in_the_onnx_domain():
    node = analyze_node(
        "SimplifiedLayerNormalization",
        [("x", "float32", [B, S, D]), ("gamma", "float32", [D])],
        [("y", "float32", [B, S, D])],
        {"axis": -1, "epsilon": 1e-6},
        opset=17,
    )
    assert node.domain == ""
    assert node.cost.flops == 4 * N + 2 * ROWS  # as ai.onnx RMSNormalization
    assert node.cost.transcendentals == ROWS


def test_simplified_layer_norm_from_axis_1():
    node = analyze_node(
        "SimplifiedLayerNormalization",
        [("x", "float32", [B, S, D]), ("gamma", "float32", [S, D])],
        [("y", "float32", [B, S, D])],
        {"axis": 1},
    )
    assert node.cost.flops == 4 * N + 2 * B  # one row per batch element
    assert node.cost.transcendentals == B


def test_embed_layer_norm_reads_looked_up_rows():
    vocab, positions = 30522, 512
    node = analyze_node(
        "EmbedLayerNormalization",
        [
            ("ids", "int32", [B, S]),
            ("segment_ids", "int32", [B, S]),
            ("word", "float32", [vocab, D]),
            ("position", "float32", [positions, D]),
            ("segment", "float32", [2, D]),
            ("gamma", "float32", [D]),
            ("beta", "float32", [D]),
            ("mask", "int32", [B, S]),
        ],
        ["y", "mask_index"],
        domain=MS,
    )
    assert node.outputs[1].shape == (B,)
    # word + position + segment: 2n adds; LayerNorm with gamma and beta 7n + 2L; mask sums B·S − B
    assert node.cost.flops == 2 * N + 7 * N + 2 * ROWS + (B * S - B)
    assert node.cost.transcendentals == ROWS
    rows_read = B * S + S + 2  # word rows per token, position rows 0..S−1, the whole 2-row segment table
    ids = 3 * B * S * 4  # input_ids, segment_ids, mask
    assert node.cost.bytes_read == rows_read * D * 4 + 2 * D * 4 + ids
    assert node.cost.bytes_written == N * 4 + B * 4


def test_q_embed_layer_norm_dequantizes_what_it_reads():
    scalar = lambda name, dtype: (name, dtype, [])  # noqa: E731
    node = analyze_node(
        "QEmbedLayerNormalization",
        [
            ("ids", "int32", [B, S]),
            "",
            ("word", "uint8", [1000, D]),
            ("position", "uint8", [128, D]),
            "",
            ("gamma", "uint8", [D]),
            ("beta", "uint8", [D]),
            ("mask", "int32", [B, S]),
            scalar("ws", "float32"),
            scalar("ps", "float32"),
            "",
            scalar("gs", "float32"),
            scalar("bs", "float32"),
            scalar("wz", "uint8"),
            scalar("pz", "uint8"),
            "",
            scalar("gz", "uint8"),
            scalar("bz", "uint8"),
        ],
        [("y", "float32", [B, S, D]), ("mask_index", "int32", [B])],
        domain=MS,
    )
    dequantize = 2 * (2 * N + 2 * D)  # (q − zp)·scale per looked-up word and position element, gamma, beta
    assert node.cost.flops == N + 7 * N + 2 * ROWS + (B * S - B) + dequantize


@pytest.mark.parametrize(
    ("op", "inputs", "per_element", "transcendental"),
    [
        ("Gelu", [("x", "float32", [B, S, 3072])], 4, 1),  # x/√2, 1 +, two multiplies; erf
        ("BiasGelu", [("x", "float32", [B, S, 3072]), ("b", "float32", [3072])], 5, 1),  # + bias
        ("FastGelu", [("x", "float32", [B, S, 3072])], 8, 1),  # tanh form
        ("FastGelu", [("x", "float32", [B, S, 3072]), ("b", "float32", [3072])], 9, 1),  # + bias
        ("QuickGelu", [("x", "float32", [B, S, 3072])], 2, 1),  # x·sigmoid(alpha·x)
        ("BiasAdd", [("x", "float32", [B, S, 3072]), ("b", "float32", [3072]), ("s", "float32", [B, S, 3072])], 2, 0),
    ],
)
def test_activation_fusions(op, inputs, per_element, transcendental):
    node = analyze_node(op, inputs, ["y"], domain=MS)
    elements = B * S * 3072
    assert node.cost.flops == per_element * elements
    assert node.cost.transcendentals == transcendental * elements
    assert node.cost.bytes_written == elements * 4


def test_bias_split_gelu_halves_the_width():
    node = analyze_node("BiasSplitGelu", [("x", "float16", [2, 64, 2560]), ("b", "float16", [2560])], ["y"], domain=MS)
    assert node.outputs[0].shape == (2, 64, 1280)
    outputs = 2 * 64 * 1280
    assert node.cost.flops == 7 * outputs  # 2 bias adds (both halves), erf Gelu 4, the gating multiply
    assert node.cost.transcendentals == outputs


def test_bias_softmax():
    scores = ("x", "float32", [B, 12, S, S])
    node = analyze_node(
        "BiasSoftmax",
        [scores, ("mask", "float32", [B, 1, S, S])],
        [("y", "float32", [B, 12, S, S])],  # onnxruntime's symbolic inference does not know BiasSoftmax
        {"axis": 3, "is_inner_broadcast": 0},
        domain=MS,
    )
    n, rows = B * 12 * S * S, B * 12 * S
    assert node.cost.flops == n + 4 * n - 2 * rows  # the bias add, then softmax
    assert node.cost.transcendentals == n


def test_fused_matmul_transposed_b_and_alpha():
    node = analyze_node(
        "FusedMatMul",
        [("q", "float16", [B, 12, S, 64]), ("k", "float16", [B, 12, S, 64])],
        [("scores", "float16", [B, 12, S, S])],  # given: symbolic inference leaves FusedMatMul unknown
        {"transB": 1, "alpha": 0.125},
        domain=MS,
    )
    outputs = B * 12 * S * S
    assert node.cost.flops == 2 * 64 * outputs + outputs  # K = 64, the alpha scaling
    assert node.unit == "matrix" and node.dtype == "fp16"


def test_fused_matmul_trans_a_and_trans_batch_a():
    # A [K=32, B=3, M=8]: transBatchA → [3, 32, 8], transA → [3, 8, 32]; B [3, 32, 5]
    node = analyze_node(
        "FusedMatMul",
        [("a", "float32", [32, 3, 8]), ("b", "float32", [3, 32, 5])],
        [("y", "float32", [3, 8, 5])],
        {"transA": 1, "transBatchA": 1},
        domain=MS,
    )
    assert node.cost.flops == 2 * 32 * 3 * 8 * 5


def test_transpose_matmul_is_fused_matmul():
    node = analyze_node(
        "TransposeMatMul",
        [("a", "float32", [64, 8]), ("b", "float32", [64, 5])],
        [("y", "float32", [8, 5])],
        {"transA": 1},
        domain=MS,
    )
    assert node.cost.flops == 2 * 64 * 8 * 5


def test_fused_gemm_with_leaky_relu():
    node = analyze_node(
        "FusedGemm",
        [("a", "float32", [S, D]), ("b", "float32", [64, D]), ("c", "float32", [64])],
        [("y", "float32", [S, 64])],
        {"transB": 1, "activation": "LeakyRelu", "activation_alpha": 0.01},
        domain=MS,
    )
    outputs = S * 64
    assert node.cost.flops == 2 * D * outputs + outputs + 2 * outputs  # product, C, LeakyRelu (multiply, select)


def test_fused_gemm_unknown_activation_is_an_error_not_zero():
    from onnx_roofline import analyze
    from tests.conftest import one_node_model

    model = one_node_model(
        "FusedGemm",
        [("a", "float32", [4, 8]), ("b", "float32", [8, 2])],
        [("y", "float32", [4, 2])],
        {"activation": "Mystery"},
        domain=MS,
    )
    (node,) = analyze(model).nodes
    assert node.status == "rule-error" and "Mystery" in node.reason


def test_fused_conv_with_relu_and_sum():
    node = analyze_node(
        "FusedConv",
        [
            ("x", "float32", [1, 64, 56, 56]),
            ("w", "float32", [64, 64, 3, 3]),
            ("b", "float32", [64]),
            ("z", "float32", [1, 64, 56, 56]),
        ],
        [("y", "float32", [1, 64, 56, 56])],
        {"activation": "Relu", "kernel_shape": [3, 3], "pads": [1, 1, 1, 1]},
        domain=MS,
    )
    outputs = 64 * 56 * 56
    taps = 64 * 3 * 3
    assert node.cost.flops == 2 * taps * outputs + outputs + outputs + outputs  # conv, bias, Z, Relu
    assert node.unit == "matrix"


def test_nhwc_conv():
    node = analyze_node(
        "NhwcConv",
        [("x", "float16", [1, 56, 56, 64]), ("w", "float16", [128, 64, 1, 1])],
        [("y", "float16", [1, 56, 56, 128])],
        domain=MS,
    )
    assert node.cost.flops == 2 * 64 * 56 * 56 * 128


def test_gemm_fast_gelu():
    node = analyze_node(
        "GemmFastGelu",
        [("x", "float16", [B, S, D]), ("w", "float16", [D, 3072]), ("b", "float16", [3072])],
        ["y"],
        domain=MS,
    )
    outputs = B * S * 3072
    assert node.cost.flops == 2 * D * outputs + outputs + 8 * outputs  # product, bias, tanh Gelu
    assert node.cost.transcendentals == outputs
