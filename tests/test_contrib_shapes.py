"""Output shapes of onnxruntime contrib ops that no inference types (onnx_roofline/shapes/rules/contrib.py):
one node per shape function, the expected shape written from the op's schema in
ContribOperators.md. `_direct` runs the shape function alone; `_analyzed` runs the whole analysis
(ONNX's pass, then the sweep that calls the shape rules) and requires the node costed."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from onnx_roofline import analyze
from onnx_roofline.shapes import rules as shape_rules
from onnx_roofline.shapes.engine import collect, infer
from tests.conftest import one_node_model

MS = "com.microsoft"
B, S, D, HEADS = 2, 16, 768, 12


def _direct(op_type, inputs, outputs, attrs=None, initializers=None):
    """{output: (shape, dtype)} from the op's shape function, given the declared inputs."""
    model = one_node_model(op_type, inputs, outputs, attrs, initializers, domain=MS)
    values = collect(model.graph)
    arrays = {
        t.name: np.asarray(v) for t, v in zip(model.graph.initializer, (initializers or {}).values(), strict=False)
    }
    (node,) = model.graph.node
    found = shape_rules.infer_node(node, tuple(values.get(name) if name else None for name in node.input), arrays.get)
    return {name: (info.shape, info.dtype) for name, info in found.items()}


def _analyzed(op_type, inputs, outputs, attrs=None, initializers=None):
    """{output: (shape, dtype)} as the full analysis reports them; the node must be costed."""
    report = analyze(one_node_model(op_type, inputs, outputs, attrs, initializers, domain=MS))
    (node,) = report.nodes
    assert node.status == "ok", node.reason
    assert report.model.shape_inference == "onnx+sweep"
    return {t.name: (t.shape, t.dtype) for t in node.outputs if t is not None}


def test_registry_refuses_a_duplicate():
    with pytest.raises(ValueError, match="duplicate"):
        shape_rules.shape_function("QAttention")(lambda node: [])


# --- attention and embedding -------------------------------------------------------------------------


def _q_attention_inputs(past=None):
    inputs = [
        ("x", "uint8", [B, S, D]),
        ("w", "int8", [D, 3 * D]),
        ("bias", "float32", [3 * D]),
        ("x_scale", "float32", []),
        ("w_scale", "float32", []),
        ("mask_index", "int32", [B]),
        ("x_zp", "uint8", []),
        ("w_zp", "int8", []),
    ]
    return inputs + ([("past", "float32", past)] if past else [])


def test_q_attention_output_and_present_without_past():
    shapes = _analyzed("QAttention", _q_attention_inputs(), ["y", "present"], {"num_heads": HEADS})
    assert shapes["y"] == ((B, S, D), "float32")  # hidden = bias width / 3, in the bias's dtype
    assert shapes["present"] == ((2, B, HEADS, S, D // HEADS), "float32")  # past length 0


def test_q_attention_present_grows_the_past():
    shapes = _direct(
        "QAttention", _q_attention_inputs(past=[2, B, HEADS, 5, 64]), ["y", "present"], {"num_heads": HEADS}
    )
    assert shapes["present"] == ((2, B, HEADS, 5 + S, 64), "float32")


def test_q_attention_qkv_hidden_sizes():
    inputs = _q_attention_inputs()
    inputs[1], inputs[2] = ("w", "int8", [D, 768 + 768 + 512]), ("bias", "float32", [768 + 768 + 512])
    shapes = _direct("QAttention", inputs, ["y"], {"num_heads": 8, "qkv_hidden_sizes": [768, 768, 512]})
    assert shapes["y"] == ((B, S, 512), "float32")  # the V width


def test_decoder_masked_self_attention_shares_the_past_buffer():
    inputs = [
        ("x", "float16", [B, 1, D]),
        ("w", "float16", [D, 3 * D]),
        ("bias", "float16", [3 * D]),
        ("mask", "int32", [B, 128]),
        ("past", "float16", [2, B, HEADS, 128, 64]),
    ]
    attrs = {"num_heads": HEADS, "past_present_share_buffer": 1}
    shapes = _direct("DecoderMaskedSelfAttention", inputs, ["y", "present"], attrs)
    assert shapes == {"y": ((B, 1, D), "float16"), "present": ((2, B, HEADS, 128, 64), "float16")}


def test_q_embed_layer_normalization():
    u8, f32 = "uint8", "float32"
    inputs = [
        ("ids", "int32", [B, S]), ("segment_ids", "int32", [B, S]),
        ("word", u8, [1000, D]), ("position", u8, [128, D]), ("segment", u8, [2, D]),
        ("gamma", u8, [D]), ("beta", u8, [D]), ("mask", "int32", [B, S]),
        ("word_scale", f32, []), ("position_scale", f32, []), ("segment_scale", f32, []),
        ("gamma_scale", f32, []), ("beta_scale", f32, []),
        ("word_zp", u8, []), ("position_zp", u8, []), ("segment_zp", u8, []), ("gamma_zp", u8, []), ("beta_zp", u8, []),
    ]  # fmt: skip
    shapes = _analyzed("QEmbedLayerNormalization", inputs, ["out", "mask_index"])
    assert shapes["out"] == ((B, S, D), "float32")  # the scales' float dtype, not the tables' uint8
    assert shapes["mask_index"] == ((B,), "int32")


# --- quantized matrix ops ------------------------------------------------------------------------------


def test_dynamic_quantize_matmul():
    inputs = [
        ("a", "float32", [B, S, D]),
        ("b", "int8", [D, 3072]),
        ("b_scale", "float32", [3072]),
        ("b_zp", "int8", [3072]),
    ]
    assert _analyzed("DynamicQuantizeMatMul", inputs, ["y"]) == {"y": ((B, S, 3072), "float32")}


def test_matmul_integer_to_float_takes_the_scale_dtype():
    inputs = [("a", "uint8", [S, D]), ("b", "int8", [D, 64]), ("a_scale", "float16", []), ("b_scale", "float16", [])]
    assert _analyzed("MatMulIntegerToFloat", inputs, ["y"]) == {"y": ((S, 64), "float16")}


def test_matmul_integer_to_float_broadcasts_batch_dims():
    inputs = [
        ("a", "uint8", [4, 1, S, D]),
        ("b", "int8", [3, D, 64]),
        ("a_scale", "float32", []),
        ("b_scale", "float32", []),
    ]
    assert _direct("MatMulIntegerToFloat", inputs, ["y"]) == {"y": ((4, 3, S, 64), "float32")}


def test_q_ordered_matmul():
    inputs = [
        ("a", "int8", [B, S, D]),
        ("sa", "float32", []),
        ("b", "int8", [D, 64]),
        ("sb", "float32", []),
        ("sy", "float32", []),
    ]
    assert _direct("QOrderedMatMul", inputs, ["y"]) == {"y": ((B, S, 64), "int8")}


@pytest.mark.parametrize(
    "trans_a, trans_b, a, b", [(0, 0, [32, 64], [64, 128]), (1, 0, [64, 32], [64, 128]), (0, 1, [32, 64], [128, 64])]
)
def test_qgemm_float_output(trans_a, trans_b, a, b):
    inputs = [
        ("a", "uint8", a),
        ("sa", "float32", []),
        ("za", "uint8", []),
        ("b", "int8", b),
        ("sb", "float32", []),
        ("zb", "int8", []),
    ]
    shapes = _analyzed("QGemm", inputs, ["y"], {"transA": trans_a, "transB": trans_b})
    assert shapes == {"y": ((32, 128), "float32")}  # [M, N]; no y_scale: float output


def test_qgemm_quantized_output_takes_the_zero_point_dtype():
    inputs = [
        ("a", "uint8", [32, 64]), ("sa", "float32", []), ("za", "uint8", []),
        ("b", "int8", [64, 128]), ("sb", "float32", []), ("zb", "int8", []),
        ("c", "int32", [128]), ("sy", "float32", []), ("zy", "int8", []),
    ]  # fmt: skip
    assert _direct("QGemm", inputs, ["y"]) == {"y": ((32, 128), "int8")}


def test_matmul_nbits_agrees_with_onnxruntime():
    """onnxruntime infers MatMulNBits itself; the shape function gives the same [..., N]."""
    inputs = [
        ("a", "float16", [B, S, 4096]),
        ("b", "uint8", [11008, 4096 // 32, 16]),
        ("scales", "float16", [11008 * 128]),
    ]
    attrs = {"K": 4096, "N": 11008, "bits": 4, "block_size": 32}
    expected = {"y": ((B, S, 11008), "float16")}
    assert _direct("MatMulNBits", inputs, ["y"], attrs) == expected
    report = analyze(one_node_model("MatMulNBits", inputs, ["y"], attrs, domain=MS))
    assert {t.name: (t.shape, t.dtype) for t in report.nodes[0].outputs} == expected


def test_matmul_bnb4():
    inputs = [
        ("a", "float16", [S, 4096]),
        ("b", "uint8", [4096 * 1024 // 2]),
        ("absmax", "float16", [4096 * 1024 // 64]),
    ]
    attrs = {"K": 4096, "N": 1024, "block_size": 64, "quant_type": 1}
    assert _analyzed("MatMulBnb4", inputs, ["y"], attrs) == {"y": ((S, 1024), "float16")}


@pytest.mark.parametrize(
    "data_dtype, data_shape, expected_last",
    [
        ("uint8", [1000, 256 // 2], 256),  # 4 bits: two values per byte, the packed dim doubles
        ("int4", [1000, 256], 256),  # int4 holds one value per element
    ],
)
def test_gather_block_quantized_unpacks_four_bit_data(data_dtype, data_shape, expected_last):
    inputs = [("data", data_dtype, data_shape), ("ids", "int64", [B, S]), ("scales", "float16", [1000, 256 // 32])]
    attrs = {"gather_axis": 0, "quantize_axis": 1, "block_size": 32, "bits": 4}
    assert _analyzed("GatherBlockQuantized", inputs, ["y"], attrs) == {"y": ((B, S, expected_last), "float16")}


def test_gather_block_quantized_eight_bits_and_gather_axis():
    inputs = [("data", "uint8", [4, 1000, 64]), ("ids", "int64", [5]), ("scales", "float32", [4, 1000, 2])]
    attrs = {"gather_axis": 1, "quantize_axis": 2, "block_size": 32, "bits": 8}
    assert _direct("GatherBlockQuantized", inputs, ["y"], attrs) == {"y": ((4, 5, 64), "float32")}


def test_onnxruntime_does_not_halve_gather_block_quantized():
    """onnxruntime's rule for it is Gather's, which leaves the packed dim at its byte count; that
    rule is set aside and the shape function types the node."""
    inputs = [("data", "uint8", [1000, 64]), ("ids", "int64", [S]), ("scales", "float32", [1000, 4])]
    model = one_node_model("GatherBlockQuantized", inputs, ["y"], {"block_size": 32}, domain=MS)
    assert infer(model).values["y"].shape == (S, 128)  # bits defaults to 4


# --- QLinear elementwise, pooling, concat, conv -----------------------------------------------------------


@pytest.mark.parametrize("op_type", ["QLinearSigmoid", "QLinearLeakyRelu"])
def test_qlinear_unary_keeps_the_input(op_type):
    inputs = [
        ("x", "int8", [B, 64, 7, 7]),
        ("xs", "float32", []),
        ("xz", "int8", []),
        ("ys", "float32", []),
        ("yz", "int8", []),
    ]
    assert _analyzed(op_type, inputs, ["y"]) == {"y": ((B, 64, 7, 7), "int8")}


def test_qlinear_softmax():
    inputs = [
        ("x", "uint8", [B, HEADS, S, S]),
        ("xs", "float32", []),
        ("xz", "uint8", []),
        ("ys", "float32", []),
        ("yz", "uint8", []),
    ]
    assert _analyzed("QLinearSoftmax", inputs, ["y"], {"axis": -1, "opset": 13}) == {"y": ((B, HEADS, S, S), "uint8")}


@pytest.mark.parametrize("op_type", ["QLinearAdd", "QLinearMul"])
def test_qlinear_binary_broadcasts_and_agrees_with_onnxruntime(op_type):
    """onnxruntime infers these itself; the shape function gives the same broadcast shape."""
    f32, u8 = "float32", "uint8"
    inputs = [("a", u8, [B, 1, 8]), ("sa", f32, []), ("za", u8, []), ("b", u8, [5, 1]), ("sb", f32, []), ("zb", u8, []),
              ("sc", f32, []), ("zc", u8, [])]  # fmt: skip
    expected = {"c": ((B, 5, 8), "uint8")}
    assert _direct(op_type, inputs, ["c"]) == expected
    report = analyze(one_node_model(op_type, inputs, ["c"], domain=MS))
    assert {t.name: (t.shape, t.dtype) for t in report.nodes[0].outputs} == expected


def test_qlinear_where():
    f32, i8 = "float32", "int8"
    inputs = [("cond", "bool", [S, 1]), ("x", i8, [S, 8]), ("xs", f32, []), ("xz", i8, []), ("y", i8, [8]), ("ys", f32, []),
              ("yz", i8, []), ("zs", f32, []), ("zz", i8, [])]  # fmt: skip
    assert _analyzed("QLinearWhere", inputs, ["z"]) == {"z": ((S, 8), "int8")}


def test_qlinear_concat():
    """Y_scale, Y_zero_point, then (X, scale, zero point) per input: 32 + 16 + 8 channels."""
    f32, u8 = "float32", "uint8"
    inputs = [("ys", f32, []), ("yz", u8, [])]
    for i, channels in enumerate((32, 16, 8)):
        inputs += [(f"x{i}", u8, [B, channels, 7, 7]), (f"s{i}", f32, []), (f"z{i}", u8, [])]
    assert _analyzed("QLinearConcat", inputs, ["y"], {"axis": 1}) == {"y": ((B, 32 + 16 + 8, 7, 7), "uint8")}


def test_qlinear_concat_rejects_mismatched_inputs():
    f32, u8 = "float32", "uint8"
    inputs = [("ys", f32, []), ("yz", u8, []), ("x0", u8, [B, 4, 7]), ("s0", f32, []), ("z0", u8, []),
              ("x1", u8, [B, 4, 6]), ("s1", f32, []), ("z1", u8, [])]  # fmt: skip
    assert _direct("QLinearConcat", inputs, ["y"], {"axis": 1}) == {}  # left unknown, never guessed


@pytest.mark.parametrize("keepdims, expected", [(1, (B, 1, 1, 64)), (0, (B, 64))])
def test_qlinear_reduce_mean(keepdims, expected):
    inputs = [
        ("x", "uint8", [B, 7, 7, 64]),
        ("xs", "float32", []),
        ("xz", "uint8", []),
        ("ys", "float32", []),
        ("yz", "uint8", []),
    ]
    shapes = _analyzed("QLinearReduceMean", inputs, ["y"], {"axes": [1, 2], "keepdims": keepdims})
    assert shapes == {"y": (expected, "uint8")}


@pytest.mark.parametrize(
    "channels_last, shape, expected", [(0, [B, 64, 7, 7], (B, 64, 1, 1)), (1, [B, 7, 7, 64], (B, 1, 1, 64))]
)
def test_qlinear_global_average_pool(channels_last, shape, expected):
    inputs = [
        ("x", "uint8", shape),
        ("xs", "float32", []),
        ("xz", "uint8", []),
        ("ys", "float32", []),
        ("yz", "uint8", []),
    ]
    shapes = _analyzed("QLinearGlobalAveragePool", inputs, ["y"], {"channels_last": channels_last})
    assert shapes == {"y": (expected, "uint8")}


@pytest.mark.parametrize(
    "attrs, expected_hw",
    [
        ({"kernel_shape": [3, 3], "strides": [2, 2]}, 3),  # ⌊(7 − 3)/2⌋ + 1
        ({"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, 4),  # ⌊(9 − 3)/2⌋ + 1
        ({"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}, 4),  # ⌈(7 − 2)/2⌉ + 1
        ({"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"}, 4),  # ⌈7/2⌉
        ({"kernel_shape": [3, 3], "auto_pad": "VALID"}, 5),  # 7 − 3 + 1
    ],
)
def test_qlinear_average_pool(attrs, expected_hw):
    inputs = [
        ("x", "uint8", [B, 64, 7, 7]),
        ("xs", "float32", []),
        ("xz", "uint8", []),
        ("ys", "float32", []),
        ("yz", "uint8", []),
    ]
    assert _analyzed("QLinearAveragePool", inputs, ["y"], attrs) == {"y": ((B, 64, expected_hw, expected_hw), "uint8")}


def test_qlinear_average_pool_ceil_mode_drops_a_window_starting_in_the_padding():
    """in 5, pads 0/1, kernel 1, stride 2, ceil_mode: ⌈(5 + 1 − 1)/2⌉ + 1 = 4 windows, but the 4th
    would start at 3·2 = 6 ≥ 5 + 0, in the end padding: 3 (ONNX's rule)."""
    inputs = [
        ("x", "uint8", [1, 1, 5]),
        ("xs", "float32", []),
        ("xz", "uint8", []),
        ("ys", "float32", []),
        ("yz", "uint8", []),
    ]
    attrs = {"kernel_shape": [1], "strides": [2], "pads": [0, 1], "ceil_mode": 1}
    assert _direct("QLinearAveragePool", inputs, ["y"], attrs) == {"y": ((1, 1, 3), "uint8")}


def test_qlinear_average_pool_channels_last():
    inputs = [
        ("x", "uint8", [B, 7, 7, 64]),
        ("xs", "float32", []),
        ("xz", "uint8", []),
        ("ys", "float32", []),
        ("yz", "uint8", []),
    ]
    attrs = {"kernel_shape": [3, 3], "channels_last": 1}
    assert _direct("QLinearAveragePool", inputs, ["y"], attrs) == {"y": ((B, 5, 5, 64), "uint8")}


def _qlinear_conv_inputs(x, w):
    f32 = "float32"
    return [("x", "uint8", x), ("xs", f32, []), ("xz", "uint8", []), ("w", "int8", w), ("ws", f32, []), ("wz", "int8", []),
            ("ys", f32, []), ("yz", "uint8", [])]  # fmt: skip


def test_qlinear_conv_contrib_nchw():
    """ResNet's stem: 224², 7×7 stride 2 pad 3 → ⌊(224 + 6 − 7)/2⌋ + 1 = 112."""
    inputs = _qlinear_conv_inputs([1, 3, 224, 224], [64, 3, 7, 7])
    attrs = {"strides": [2, 2], "pads": [3, 3, 3, 3]}
    assert _analyzed("QLinearConv", inputs, ["y"], attrs) == {"y": ((1, 64, 112, 112), "uint8")}


def test_qlinear_conv_contrib_channels_last_grouped_dilated():
    """NHWC 56², depthwise 3×3 dilation 2 pad 2: extent 5, ⌊(56 + 4 − 5)/1⌋ + 1 = 56."""
    inputs = _qlinear_conv_inputs([1, 56, 56, 64], [64, 1, 3, 3])
    attrs = {"group": 64, "dilations": [2, 2], "pads": [2, 2, 2, 2], "channels_last": 1}
    assert _direct("QLinearConv", inputs, ["y"], attrs) == {"y": ((1, 56, 56, 64), "uint8")}


# --- fused float ops ---------------------------------------------------------------------------------------


def test_bias_softmax():
    inputs = [("x", "float16", [B, HEADS, S, S]), ("bias", "float16", [B, 1, 1, S])]
    assert _analyzed("BiasSoftmax", inputs, ["y"], {"axis": -1}) == {"y": ((B, HEADS, S, S), "float16")}


@pytest.mark.parametrize(
    "attrs, a, b, expected",
    [
        ({}, [B, HEADS, S, 64], [B, HEADS, 64, S], (B, HEADS, S, S)),
        ({"transB": 1}, [B, HEADS, S, 64], [B, HEADS, S, 64], (B, HEADS, S, S)),  # Q·Kᵀ
        ({"transA": 1}, [64, S], [64, 32], (S, 32)),
        # transBatchA: A [S, B, H, 64] is read as [B, H, S, 64] (its first dim moves behind the batch dims)
        ({"transBatchA": 1}, [S, B, HEADS, 64], [B, HEADS, 64, 32], (B, HEADS, S, 32)),
        # transBatchB: B [64, B, H, S] is read as [B, H, 64, S]
        ({"transBatchB": 1}, [B, HEADS, S, 64], [64, B, HEADS, S], (B, HEADS, S, S)),
        # transBatchA then transA: A [64, B, H, S] is read as [B, H, 64, S], then transposed to [B, H, S, 64]
        ({"transBatchA": 1, "transA": 1}, [64, B, HEADS, S], [B, HEADS, 64, 32], (B, HEADS, S, 32)),
        ({}, [B, S, 64], [64], (B, S)),  # a vector operand drops its dim
    ],
)
def test_fused_matmul(attrs, a, b, expected):
    shapes = _analyzed("FusedMatMul", [("a", "float32", a), ("b", "float32", b)], ["y"], {"alpha": 0.125, **attrs})
    assert shapes == {"y": (expected, "float32")}


def test_transpose_matmul_and_activation_forms():
    inputs = [("a", "float16", [64, S]), ("b", "float16", [64, 32])]
    assert _direct("TransposeMatMul", inputs, ["y"], {"transA": 1}) == {"y": ((S, 32), "float16")}
    attrs = {"activation": "Relu"}
    assert _direct("FusedMatMulActivation", [("a", "float16", [S, 64]), ("b", "float16", [64, 32])], ["y"], attrs) == {
        "y": ((S, 32), "float16")
    }


def test_fused_gemm():
    inputs = [("a", "float32", [64, 32]), ("b", "float32", [128, 64]), ("c", "float32", [128])]
    attrs = {"transA": 1, "transB": 1, "activation": "Relu"}
    assert _analyzed("FusedGemm", inputs, ["y"], attrs) == {"y": ((32, 128), "float32")}


def test_fused_conv():
    """conv3_x's 3×3: 56², pad 1 → 56; with kernel_shape given and a Z input."""
    inputs = [
        ("x", "float32", [B, 64, 56, 56]),
        ("w", "float32", [64, 64, 3, 3]),
        ("b", "float32", [64]),
        ("z", "float32", [B, 64, 56, 56]),
    ]
    attrs = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "activation": "Relu"}
    assert _analyzed("FusedConv", inputs, ["y"], attrs) == {"y": ((B, 64, 56, 56), "float32")}


def test_nhwc_conv_agrees_with_onnxruntime():
    """onnxruntime infers NhwcConv itself: [N, H, W, C] in, W [M, C, kH, kW] → [N, H', W', M]."""
    inputs = [("x", "float16", [B, 56, 56, 64]), ("w", "float16", [128, 64, 3, 3])]
    attrs = {"strides": [2, 2], "pads": [1, 1, 1, 1]}
    expected = {"y": ((B, 28, 28, 128), "float16")}  # ⌊(56 + 2 − 3)/2⌋ + 1 = 28
    assert _direct("NhwcConv", inputs, ["y"], attrs) == expected
    report = analyze(one_node_model("NhwcConv", inputs, ["y"], attrs, domain=MS))
    assert {t.name: (t.shape, t.dtype) for t in report.nodes[0].outputs} == expected


# --- the pass ------------------------------------------------------------------------------------------------


def test_downstream_of_a_contrib_op_is_inferred():
    """QGemm → Relu → FusedMatMul: the Relu after the first contrib op is typed by the inference
    that follows the contrib pass, then the second contrib op in the next round."""
    nodes = [
        helper.make_node("QGemm", ["a", "sa", "za", "b", "sb", "zb"], ["g"], domain=MS),
        helper.make_node("Relu", ["g"], ["r"]),
        helper.make_node("FusedMatMul", ["r", "w"], ["y"], domain=MS, transB=1),
    ]
    inputs = [helper.make_tensor_value_info(n, t, s) for n, t, s in [
        ("a", 2, [32, 64]), ("sa", 1, []), ("za", 2, []), ("b", 3, [64, 128]), ("sb", 1, []), ("zb", 3, []), ("w", 1, [16, 128]),
    ]]  # fmt: skip
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_empty_tensor_value_info("y")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(MS, 1)])
    report = analyze(model)
    assert [n.status for n in report.nodes] == ["ok", "ok", "ok"]
    assert [n.outputs[0].shape for n in report.nodes] == [(32, 128), (32, 128), (32, 16)]


def test_unknown_input_leaves_the_output_unknown():
    """A contrib op whose input is itself unknown is not guessed: it stays unknown-shape."""
    node = helper.make_node("QLinearSigmoid", ["x", "xs", "xz", "ys", "yz"], ["y"], domain=MS)
    inputs = [helper.make_tensor_value_info("x", 2, None)] + [
        helper.make_tensor_value_info(n, t, []) for n, t in [("xs", 1), ("xz", 2), ("ys", 1), ("yz", 2)]
    ]
    graph = helper.make_graph([node], "g", inputs, [helper.make_empty_tensor_value_info("y")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(MS, 1)])
    (result,) = analyze(model, partial=True).nodes
    assert result.status == "unknown-shape"


def test_a_node_no_pass_can_type_is_the_root_cause_and_does_not_stop_the_others():
    """An op of an unknown domain leaves its own output unknown and is named as the root cause
    (the first node whose inputs are known and outputs are not); a contrib op after it, reading
    only known values, is still typed."""
    nodes = [
        helper.make_node("Foo", ["x"], ["z"], domain="custom"),
        helper.make_node("BiasSoftmax", ["x", "x"], ["y"], domain=MS),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", 1, [B, S, D])],
        [helper.make_empty_tensor_value_info("y"), helper.make_empty_tensor_value_info("z")],
    )
    opsets = [helper.make_opsetid("", 21), helper.make_opsetid(MS, 1), helper.make_opsetid("custom", 1)]
    result = infer(helper.make_model(graph, opset_imports=opsets))
    assert result.values["y"].shape == (B, S, D)
    assert result.unresolved == ("z",)
    assert (result.root_cause.index, result.root_cause.op_type) == (0, "Foo")
    assert result.root_cause.reason == "no shape rule for custom::Foo"


def test_a_default_domain_op_onnx_never_defined_is_called_invalid():
    """tf2onnx writes an `Erfc` for Keras' exact GELU: no ai.onnx operator, which onnxruntime
    refuses too ("No Op registered for Erfc"); the root cause says the graph is not valid ONNX."""
    graph = helper.make_graph(
        [helper.make_node("Erfc", ["x"], ["e"]), helper.make_node("Relu", ["e"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", 1, [2, 3])],
        [helper.make_empty_tensor_value_info("y")],
    )
    result = infer(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))
    assert (
        result.root_cause.reason
        == "no shape rule for Erfc (not an ai.onnx operator at any opset: the graph is not valid ONNX at opset 13)"
    )


def test_dynamic_quantize_lstm_as_quantize_dynamic_writes_it(tmp_path):
    """An LSTM (T 5, B 2, I 6, H 8, forward, with bias) through onnxruntime's quantize_dynamic
    becomes com.microsoft::DynamicQuantizeLSTM with W [1, I, 4H] and R [1, H, 4H] in int8: its
    outputs as onnxruntime returns them, its FLOPs LSTM's count plus the dynamic quantization's."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, numpy_helper
    from onnxruntime.quantization import QuantType, quantize_dynamic

    steps, batch, inputs, hidden = 5, 2, 6, 8
    rng = np.random.default_rng(0)
    weights = [
        numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)
        for name, shape in (("W", (1, 4 * hidden, inputs)), ("R", (1, 4 * hidden, hidden)), ("B", (1, 8 * hidden)))
    ]
    node = helper.make_node("LSTM", ["x", "W", "R", "B"], ["y", "y_h", "y_c"], hidden_size=hidden)
    graph = helper.make_graph(
        [node],
        "lstm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [steps, batch, inputs])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("y", "y_h", "y_c")],
        initializer=weights,
    )
    source, quantized = tmp_path / "lstm.onnx", tmp_path / "lstm.q.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]), source)
    quantize_dynamic(str(source), str(quantized), weight_type=QuantType.QInt8)
    assert [n.op_type for n in onnx.load(str(quantized)).graph.node] == ["DynamicQuantizeLSTM"]
    observed = ort.InferenceSession(str(quantized), providers=["CPUExecutionProvider"]).run(
        None, {"x": rng.standard_normal((steps, batch, inputs)).astype(np.float32)}
    )
    (result,) = analyze(str(quantized)).nodes
    assert [t.shape for t in result.outputs] == [o.shape for o in observed] == [(5, 1, 2, 8), (1, 2, 8), (1, 2, 8)]
    # per step and batch element: GEMMs 2·(I + H)·4H, biases 2·4H, cell 3H + H, quantizing Xt and
    # Ht−1 7·(I + H), dequantizing the two GEMMs 2·4H; Sigmoid on 3H, Tanh on H and H: 5H transcendentals
    per_step = 2 * (inputs + hidden) * 4 * hidden + 2 * 4 * hidden + 4 * hidden + 7 * (inputs + hidden) + 2 * 4 * hidden
    assert result.status == "ok" and result.unit == "matrix"
    assert (result.cost.flops, result.cost.transcendentals) == (steps * batch * per_step, steps * batch * 5 * hidden)
