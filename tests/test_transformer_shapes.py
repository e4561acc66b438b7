"""Shape rules for onnxruntime's transformer-family ops (onnx_roofline/shapes/rules/transformer.py).

Each op is one node, and the shapes and dtypes its rule gives are compared with what onnxruntime
itself produces:
- `ort_run`: where the op has a CPU kernel, the node is run in onnxruntime on random inputs of
  the declared shapes and the real outputs are the expected answer;
- `ort_static`: where it has none (CUDA-only ops), the expected answer is the schema's formula,
  written as arithmetic in the test, and it is also checked against onnxruntime's own C++ shape
  inference for the outputs that inference types (read from the warning onnxruntime logs when a
  declared output shape disagrees with the inferred one);
and in both cases the whole analysis (`onnx_roofline.analyze`) must type the node the same way and
cost it (status "ok")."""

from __future__ import annotations

import os
import re
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper

from onnx_roofline import Sizing, analyze
from onnx_roofline.errors import ModelLoadError
from onnx_roofline.model.tensors import TensorInfo, dtype_name, elem_type
from onnx_roofline.shapes import rules as shape_rules
from tests.conftest import one_node_model

MS = "com.microsoft"
f32, f16, i32, i64, u8 = "float32", "float16", "int32", "int64", "uint8"
B, S, D, N = 2, 8, 64, 4  # batch, sequence, hidden, heads
H = D // N  # head size


# --- helpers ------------------------------------------------------------------------------------------


def model_of(op_type, inputs, outputs, attrs=None, initializers=None, domain=MS, opset=21):
    """The one-node model, absent optional outputs ("") not declared as graph outputs."""
    model = one_node_model(op_type, inputs, outputs, attrs, initializers, opset=opset, domain=domain)
    declared = [value for value in model.graph.output if value.name]
    del model.graph.output[:]
    model.graph.output.extend(declared)
    return model


def inferred(model: onnx.ModelProto) -> dict:
    """{output: (shape, dtype)} from the node's shape rule alone, given its declared inputs."""
    graph = model.graph
    node = graph.node[0]
    constants = {t.name: onnx.numpy_helper.to_array(t) for t in graph.initializer}
    declared = {v.name: v.type.tensor_type for v in graph.input}
    for tensor in graph.initializer:
        declared[tensor.name] = helper.make_tensor_type_proto(tensor.data_type, tensor.dims).tensor_type

    def info(name):
        if not name:
            return None
        tensor_type = declared[name]
        return TensorInfo(name, tuple(d.dim_value for d in tensor_type.shape.dim), dtype_name(tensor_type.elem_type))

    opset = next(o.version for o in model.opset_import if o.domain == node.domain)
    typed = shape_rules.infer_node(node, tuple(info(name) for name in node.input), constants.get, opset)
    return {name: (t.shape, t.dtype) for name, t in typed.items()}


def analyzed(model: onnx.ModelProto) -> dict:
    """{output: (shape, dtype)} as the whole analysis reports them; the node must be costed."""
    try:
        (node,) = analyze(model).nodes
    except ModelLoadError as exc:
        if model.graph.node[0].domain or "No Op registered" not in str(exc):
            raise
        pytest.xfail(
            f"the analysis rejects an ai.onnx op onnxruntime registers ({exc}): validation.py, not the shape rule"
        )
    assert node.status == "ok", node.reason
    return {t.name: (t.shape, t.dtype) for t in node.outputs if t is not None}


def ort_run(model: onnx.ModelProto, values: dict | None = None) -> dict:
    """{output: (shape, dtype)} of onnxruntime running the node on CPU: random floats, zero
    integers, except the inputs given in `values`."""
    rng = np.random.default_rng(0)
    feeds = {}
    for value in model.graph.input:
        tensor_type = value.type.tensor_type
        dtype = helper.tensor_dtype_to_np_dtype(tensor_type.elem_type)
        shape = [d.dim_value for d in tensor_type.shape.dim]
        if value.name in (values or {}):
            feeds[value.name] = np.asarray(values[value.name], dtype)
        elif np.issubdtype(dtype, np.floating):
            feeds[value.name] = rng.standard_normal(shape).astype(dtype)
        else:
            feeds[value.name] = np.zeros(shape, dtype)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    results = session.run(None, feeds)
    return {o.name: (tuple(a.shape), str(a.dtype)) for o, a in zip(session.get_outputs(), results, strict=False)}


_MERGE_WARNING = re.compile(r"Error merging shape info for output\. '([^']+)' source:\{([^}]*)\}")
_TYPE_ERROR = re.compile(r"Type \(tensor\((\w+)\)\) of output arg \((\w+)\)")
_SENTINEL = "ort_static_sentinel"


def ort_static(model: onnx.ModelProto, expected: dict) -> dict:
    """{output: shape} for the outputs onnxruntime's own (C++) shape inference types fully, read
    from the warning it logs when a declared output shape disagrees: each output is declared with
    the expected dtype and rank and dims of 99991. Works without a kernel for the op (the session
    fails after inference). A differing dtype fails the test; an unreadable log (the warning of an
    Identity node declared the same way is missing) skips the check."""
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    del probe.graph.output[:]
    expected = {**expected, _SENTINEL: ((99991,), dtype_name(probe.graph.input[0].type.tensor_type.elem_type))}
    probe.graph.node.append(helper.make_node("Identity", [probe.graph.input[0].name], [_SENTINEL]))
    for name, (shape, dtype) in expected.items():
        probe.graph.output.append(helper.make_tensor_value_info(name, elem_type(dtype), [99991] * len(shape)))
    options = ort.SessionOptions()
    options.log_severity_level = 2  # warnings
    error = ""
    with tempfile.TemporaryFile(mode="w+") as log:
        saved = os.dup(2)
        os.dup2(log.fileno(), 2)
        try:
            ort.InferenceSession(probe.SerializeToString(), options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # no kernel: expected for CUDA-only ops
            error = str(exc)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        log.seek(0)
        text = log.read()
    mismatch = _TYPE_ERROR.search(error)
    assert mismatch is None, f"onnxruntime infers {mismatch.group(2)} as {mismatch.group(1)}"
    found = {name: tuple(int(d) for d in dims.split(",") if d) for name, dims in _MERGE_WARNING.findall(text)}
    if found.pop(_SENTINEL, None) is None:
        pytest.skip("onnxruntime logged no shape-merge warning to read its inference from")
    return {name: shape for name, shape in found.items() if all(d >= 0 for d in shape)}


def check_ort_run(op_type, inputs, outputs, attrs=None, initializers=None, values=None, domain=MS, opset=21) -> dict:
    """The rule, and the analysis, give what onnxruntime's CPU kernel returns."""
    model = model_of(op_type, inputs, outputs, attrs, initializers, domain, opset)
    expected = ort_run(model, values)
    assert inferred(model) == expected
    assert analyzed(model) == expected
    return expected


def check_formula(op_type, inputs, outputs, expected, attrs=None, initializers=None, domain=MS, opset=21):
    """The rule, and the analysis, give `expected` (the schema's formula, written in the test), and
    onnxruntime's static inference agrees on every output it types."""
    model = model_of(op_type, inputs, outputs, attrs, initializers, domain, opset)
    assert inferred(model) == expected
    assert analyzed(model) == expected
    static = ort_static(model, expected)
    assert static == {name: expected[name][0] for name in static}


# --- normalizations -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "x, scale, attrs, expected",
    [
        ([B, S, D], (f32, [D]), {}, {"y": ((B, S, D), f32), "inv_std_var": ((B, S, 1), f32)}),
        # float16 X with a float32 scale: Y comes out in the scale's float32 (onnxruntime's type V)
        ([B, S, D], (f32, [D]), {"x_dtype": f16}, {"y": ((B, S, D), f32), "inv_std_var": ((B, S, 1), f32)}),
        ([B, S, D], (f16, [D]), {}, {"y": ((B, S, D), f16), "inv_std_var": ((B, S, 1), f32)}),
        # axis 1: statistics over [S, D], one per batch row: [B, 1, 1] (the kernel's shape; onnxruntime's
        # static inference says [B, 1, D])
        ([B, S, D], (f32, [S, D]), {"axis": 1}, {"y": ((B, S, D), f32), "inv_std_var": ((B, 1, 1), f32)}),
    ],
)
def test_simplified_layer_normalization(x, scale, attrs, expected):
    attrs = dict(attrs)
    x_dtype = attrs.pop("x_dtype", f32)
    inputs = [("x", x_dtype, x), ("scale", *scale)]
    assert (
        check_ort_run("SimplifiedLayerNormalization", inputs, ["y", "inv_std_var"], attrs, domain="", opset=17)
        == expected
    )


def test_simplified_layer_normalization_stash_type():
    """stash_type 11 (double) types inv_std_var as float64 (no CPU kernel for it)."""
    inputs = [("x", f16, [B, S, D]), ("scale", f16, [D])]
    expected = {"y": ((B, S, D), f16), "inv_std_var": ((B, S, 1), "float64")}
    check_formula(
        "SimplifiedLayerNormalization", inputs, ["y", "inv_std_var"], expected, {"stash_type": 11}, domain="", opset=17
    )


@pytest.mark.parametrize(
    "inputs, attrs, expected",
    [
        (
            [("x", f32, [B, S, D]), ("scale", f32, [D]), ("bias", f32, [D])],
            {},
            {"y": ((B, S, D), f32), "mean": ((B, S, 1), f32), "inv_std": ((B, S, 1), f32)},
        ),
        (
            [("x", f16, [B, S, D]), ("scale", f16, [S, D]), ("bias", f16, [S, D])],
            {"axis": 1},
            {"y": ((B, S, D), f16), "mean": ((B, 1, 1), f32), "inv_std": ((B, 1, 1), f32)},
        ),
        (  # a float32 scale makes Y float32, as for SimplifiedLayerNormalization
            [("x", f16, [B, S, D]), ("scale", f32, [D])],
            {},
            {"y": ((B, S, D), f32), "mean": ((B, S, 1), f32), "inv_std": ((B, S, 1), f32)},
        ),
    ],
)
def test_layer_normalization_before_opset_17(inputs, attrs, expected):
    """onnxruntime's LayerNormalization-1 in the ai.onnx domain, which its optimizer writes into
    graphs of opset < 17, where ONNX has no LayerNormalization to infer it."""
    assert check_ort_run("LayerNormalization", inputs, ["y", "mean", "inv_std"], attrs, domain="", opset=13) == expected


def test_layer_normalization_opset_17_agrees_with_onnx():
    """At opset 17 the rule gives what ONNX's own inference gives."""
    model = model_of(
        "LayerNormalization",
        [("x", f16, [B, S, D]), ("scale", f16, [D])],
        ["y", "mean", "inv_std"],
        domain="",
        opset=17,
    )
    onnx_inferred = onnx.shape_inference.infer_shapes(model).graph.output
    onnx_types = {
        v.name: (tuple(d.dim_value for d in v.type.tensor_type.shape.dim), dtype_name(v.type.tensor_type.elem_type))
        for v in onnx_inferred
    }
    assert inferred(model) == onnx_types == ort_run(model)


def test_skip_layer_normalization_all_inputs_and_outputs():
    inputs = [
        ("x", f32, [B, S, D]),
        ("skip", f32, [B, S, D]),
        ("gamma", f32, [D]),
        ("beta", f32, [D]),
        ("bias", f32, [D]),
    ]
    expected = check_ort_run("SkipLayerNormalization", inputs, ["y", "mean", "inv_std_var", "sum"])
    assert expected == {
        "y": ((B, S, D), f32),
        "mean": ((B, S, 1), f32),
        "inv_std_var": ((B, S, 1), f32),
        "sum": ((B, S, D), f32),
    }


def test_skip_layer_normalization_broadcast_skip_float16():
    inputs = [("x", f16, [B, S, D]), ("skip", f16, [S, D]), ("gamma", f16, [D])]
    expected = check_ort_run("SkipLayerNormalization", inputs, ["y", "mean", "inv_std_var", "sum"])
    assert expected["mean"] == ((B, S, 1), f32)  # the statistics are float32 whatever T is
    assert expected["sum"] == ((B, S, D), f16)


def test_skip_layer_normalization_token_major_with_only_the_sum():
    inputs = [("x", f32, [B * S, D]), ("skip", f32, [B * S, D]), ("gamma", f32, [D])]
    assert check_ort_run("SkipLayerNormalization", inputs, ["y", "", "", "sum"]) == {
        "y": ((B * S, D), f32),
        "sum": ((B * S, D), f32),
    }


@pytest.mark.parametrize("shape", [[B, S, D], [B * S, D]])
def test_skip_simplified_layer_normalization(shape):
    inputs = [("x", f16, shape), ("skip", f16, shape), ("gamma", f16, [D]), ("bias", f16, [D])]
    expected = check_ort_run("SkipSimplifiedLayerNormalization", inputs, ["y", "mean", "inv_std_var", "sum"])
    assert expected["inv_std_var"] == ((*shape[:-1], 1), f32)


def test_embed_layer_normalization_bert():
    inputs = [
        ("ids", i32, [B, S]),
        ("segment_ids", i32, [B, S]),
        ("word", f32, [100, D]),
        ("position", f32, [S, D]),
        ("segment", f32, [2, D]),
        ("gamma", f32, [D]),
        ("beta", f32, [D]),
        ("mask", i32, [B, S]),
    ]
    expected = check_ort_run("EmbedLayerNormalization", inputs, ["y", "mask_index", "embedding_sum"])
    assert expected == {"y": ((B, S, D), f32), "mask_index": ((B,), i32), "embedding_sum": ((B, S, D), f32)}


def test_embed_layer_normalization_without_segment_with_position_ids():
    inputs = [("ids", i32, [B, S]), "", ("word", f16, [100, D]), ("position", f16, [S, D]), "", ("gamma", f16, [D]),
              ("beta", f16, [D]), "", ("position_ids", i32, [1, S])]  # fmt: skip
    assert check_ort_run("EmbedLayerNormalization", inputs, ["y", "", "embedding_sum"]) == {
        "y": ((B, S, D), f16),
        "embedding_sum": ((B, S, D), f16),
    }


def test_group_norm_and_skip_group_norm():
    """Stable Diffusion's NHWC GroupNorm (CUDA-only): Y, and SkipGroupNorm's sum, have X's shape."""
    x = [B, 8, 8, 32]
    attrs = {"groups": 4, "activation": 1}
    check_formula(
        "GroupNorm",
        [("x", f16, x), ("gamma", f32, [32]), ("beta", f32, [32])],
        ["y"],
        {"y": ((B, 8, 8, 32), f16)},
        attrs,
    )
    inputs = [("x", f16, x), ("gamma", f32, [32]), ("beta", f32, [32]), ("skip", f16, [B, 32]), ("bias", f16, [32])]
    check_formula(
        "SkipGroupNorm", inputs, ["y", "sum"], {"y": ((B, 8, 8, 32), f16), "sum": ((B, 8, 8, 32), f16)}, attrs
    )


def test_branchwise_and_gated_rms_norm():
    check_ort_run("BranchwiseRMSNorm", [("x", f32, [B, S, 4, D])], ["y"])
    check_ort_run("GatedRMSNorm", [("x", f32, [B, S, 4 * D]), ("scale", f32, [D]), ("gate", f32, [B, S, 4 * D])], ["y"])


# --- activations and bias fusions --------------------------------------------------------------------


@pytest.mark.parametrize(
    "op_type, inputs",
    [
        ("Gelu", [("x", f32, [B, S, D])]),
        ("BiasGelu", [("x", f32, [B, S, D]), ("bias", f32, [D])]),
        ("FastGelu", [("x", f16, [B, S, D]), ("bias", f16, [D])]),
        ("FastGelu", [("x", f32, [B, S, D])]),
        ("QuickGelu", [("x", f32, [B, S, D])]),
        ("ScaledSiLU", [("x", f32, [B, S, D])]),
    ],
)
def test_activations_keep_the_input_shape(op_type, inputs):
    assert check_ort_run(op_type, inputs, ["y"]) == {"y": (tuple(inputs[0][2]), inputs[0][1])}


def test_bias_add():
    inputs = [("x", f16, [B, 64, 32]), ("bias", f16, [32]), ("skip", f16, [B, 64, 32])]
    check_formula("BiasAdd", inputs, ["y"], {"y": ((B, 64, 32), f16)})


def test_bias_split_gelu_halves_the_hidden_dim():
    inputs = [("x", f16, [B, 64, 2 * D]), ("bias", f16, [2 * D])]
    check_formula("BiasSplitGelu", inputs, ["y"], {"y": ((B, 64, 2 * D // 2), f16)})


def test_swiglu_with_and_without_up():
    check_formula(
        "SwiGLU", [("gate", f16, [B, S, 2 * D])], ["y"], {"y": ((B, S, 2 * D // 2), f16)}
    )  # both halves in gate
    check_formula("SwiGLU", [("gate", f16, [B, S, D]), ("up", f16, [B, S, D])], ["y"], {"y": ((B, S, D), f16)})


def test_bias_dropout():
    inputs = [("x", f16, [B, S, D]), ("bias", f16, [D]), ("residual", f16, [B, S, D])]
    check_formula("BiasDropout", inputs, ["y", "mask"], {"y": ((B, S, D), f16), "mask": ((B, S, D), "bool")})


@pytest.mark.parametrize(
    "attrs, expected",
    [
        ({"dim": 1, "size": 4, "step": 3}, (B, (S - 4) // 3 + 1, D, 4)),  # (8 − 4)/3 + 1 = 2 windows
        ({"size": 5}, (B, S, D - 5 + 1, 5)),  # dim −1, step 1
    ],
)
def test_unfold_tensor(attrs, expected):
    assert check_ort_run("UnfoldTensor", [("x", f32, [B, S, D])], ["y"], attrs) == {"y": (expected, f32)}


# --- matrix fusions ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "x, w, expected",
    [([B, S, D], [D, 4 * D], (B, S, 4 * D)), ([D], [D, 4 * D], (4 * D,))],  # a vector X drops its dim
)
def test_gemm_fast_gelu(x, w, expected):
    check_formula("GemmFastGelu", [("x", f16, x), ("w", f16, w), ("bias", f16, [4 * D])], ["y"], {"y": (expected, f16)})


@pytest.mark.parametrize(
    "a, b, attrs, expected",
    [
        ([S, D], [4 * D, D], {"transB": 1, "dtype": 10}, ((S, 4 * D), f16)),  # dtype 10: float16
        ([D, S], [D, 4 * D], {"transA": 1}, ((S, 4 * D), f32)),  # default dtype 1: float32
    ],
)
def test_gemm_float8(a, b, attrs, expected):
    check_formula("GemmFloat8", [("a", f32, a), ("b", f32, b)], ["y"], {"y": expected}, attrs)


def test_matmul_nbits_qkv():
    """RMSNorm + three 4-bit projections (onnxruntime-genai): Q [.., Nq], K and V [.., Nkv]."""
    blocks = D // 32
    inputs = [("a", f16, [B, S, D]), ("skip", f16, [B, S, D]), ("norm", f16, [D]),
              ("qb", u8, [128, blocks, 16]), ("qs", f16, [128 * blocks]), "",
              ("kb", u8, [32, blocks, 16]), ("ks", f16, [32 * blocks]), "",
              ("vb", u8, [32, blocks, 16]), ("vs", f16, [32 * blocks])]  # fmt: skip
    expected = {"q": ((B, S, 128), f16), "k": ((B, S, 32), f16), "v": ((B, S, 32), f16), "sum": ((B, S, D), f16)}
    check_formula(
        "MatMulNBitsQkv", inputs, ["q", "k", "v", "sum"], expected, {"K": D, "Nq": 128, "Nkv": 32, "block_size": 32}
    )


def _mlp_inputs(skip: bool):
    blocks = D // 32
    return [("a", f16, [B, S, D]), ("skip", f16, [B, S, D]) if skip else "", ("norm", f16, [D]),
            ("gb", u8, [128, blocks, 16]), ("gs", f16, [128 * blocks]), "",
            ("ub", u8, [128, blocks, 16]), ("us", f16, [128 * blocks])]  # fmt: skip


def test_matmul_nbits_mlp():
    attrs = {"K": D, "N": 128, "block_size": 32, "activation": "silu"}
    check_formula(
        "MatMulNBitsMlp",
        _mlp_inputs(skip=True),
        ["y", "sum"],
        {"y": ((B, S, 128), f16), "sum": ((B, S, D), f16)},
        attrs,
    )


def test_matmul_nbits_mlp_sum_without_skip_is_malformed():
    """onnxruntime rejects input_skip_bias_sum without a skip input; so does the rule."""
    attrs = {"K": D, "N": 128, "block_size": 32, "activation": "silu"}
    assert inferred(model_of("MatMulNBitsMlp", _mlp_inputs(skip=False), ["y", "sum"], attrs)) == {}


def test_moe_packed_and_padded():
    experts, inter = 4, 128
    weights = [("w1", f32, [experts, inter, D]), "", ("w2", f32, [experts, D, inter])]
    check_ort_run("MoE", [("x", f32, [B * S, D]), ("router", f32, [B * S, experts]), *weights], ["y"], {"k": 2})
    check_ort_run("MoE", [("x", f32, [B, S, D]), ("router", f32, [B * S, experts]), *weights], ["y"], {"k": 2})


def test_qmoe():
    experts, inter = 4, 128
    inputs = [("x", f16, [B * S, D]), ("router", f16, [B * S, experts]), ("w1", u8, [experts, inter, D // 2]),
              ("s1", f16, [experts, inter]), "", ("w2", u8, [experts, D, inter // 2]), ("s2", f16, [experts, D])]  # fmt: skip
    assert check_ort_run("QMoE", inputs, ["y"], {"k": 2, "expert_weight_bits": 4}) == {"y": ((B * S, D), f16)}


# --- attention -----------------------------------------------------------------------------------------


def test_attention_without_past_has_a_present_of_the_new_tokens():
    """onnxruntime's static inference leaves present unknown without past; the kernel returns
    [2, B, N, S, H]."""
    inputs = [("x", f32, [B, S, D]), ("w", f32, [D, 3 * D]), ("bias", f32, [3 * D])]
    expected = check_ort_run("Attention", inputs, ["y", "present"], {"num_heads": N})
    assert expected == {"y": ((B, S, D), f32), "present": ((2, B, N, S, H), f32)}


def test_attention_with_past_grows_it():
    inputs = [("x", f32, [B, S, D]), ("w", f32, [D, 3 * D]), ("bias", f32, [3 * D]), ("mask", i32, [B, 5 + S]),
              ("past", f32, [2, B, N, 5, H])]  # fmt: skip
    expected = check_ort_run("Attention", inputs, ["y", "present"], {"num_heads": N, "unidirectional": 1})
    assert expected["present"] == ((2, B, N, 5 + S, H), f32)


def test_attention_qkv_hidden_sizes_and_no_bias():
    inputs = [("x", f32, [B, S, D]), ("w", f32, [D, 64 + 64 + 32]), ("bias", f32, [160])]
    assert check_ort_run("Attention", inputs, ["y"], {"num_heads": N, "qkv_hidden_sizes": [64, 64, 32]}) == {
        "y": ((B, S, 32), f32)
    }
    # without bias the width is a third of the weights' (onnxruntime's static inference leaves it unknown)
    assert check_ort_run("Attention", [("x", f32, [B, S, D]), ("w", f32, [D, 3 * D])], ["y"], {"num_heads": N}) == {
        "y": ((B, S, D), f32)
    }


def test_attention_shared_buffer_keeps_the_past_shape():
    inputs = [("x", f16, [B, 1, D]), ("w", f16, [D, 3 * D]), ("bias", f16, [3 * D]), ("mask", i32, [B, 32]),
              ("past", f16, [2, B, N, 32, H]), "", ("past_sequence_length", i32, [1])]  # fmt: skip
    expected = {"y": ((B, 1, D), f16), "present": ((2, B, N, 32, H), f16)}
    check_formula("Attention", inputs, ["y", "present"], expected, {"num_heads": N, "past_present_share_buffer": 1})


def _qkv(q_len, kv_len, v_width=D, dtype=f32):
    return [("q", dtype, [B, q_len, D]), ("k", dtype, [B, kv_len, D]), ("v", dtype, [B, kv_len, v_width])]


def test_multi_head_attention_value_width():
    assert check_ort_run("MultiHeadAttention", _qkv(S, 6, v_width=32), ["y"], {"num_heads": N}) == {
        "y": ((B, S, 32), f32)
    }


def test_multi_head_attention_past_grows_by_the_new_keys():
    inputs = [
        *_qkv(S, S),
        ("bias", f32, [3 * D]),
        "",
        "",
        ("past_key", f32, [B, N, 5, H]),
        ("past_value", f32, [B, N, 5, H]),
    ]
    expected = check_ort_run("MultiHeadAttention", inputs, ["y", "present_key", "present_value"], {"num_heads": N})
    assert expected["present_key"] == ((B, N, 5 + S, H), f32)


def test_multi_head_attention_without_past_and_narrow_value():
    """No past: present holds the new keys [B, N, L, H] (onnxruntime's static inference leaves it
    unknown); a narrower value gives present_value its own head size."""
    expected = check_ort_run(
        "MultiHeadAttention", _qkv(S, 6, v_width=32), ["y", "present_key", "present_value"], {"num_heads": N}
    )
    assert expected == {
        "y": ((B, S, 32), f32),
        "present_key": ((B, N, 6, H), f32),
        "present_value": ((B, N, 6, 32 // N), f32),
    }


def test_multi_head_attention_cross_attention_bnsh_key_is_its_own_present():
    inputs = [("q", f32, [B, S, D]), ("k", f32, [B, N, 6, H]), ("v", f32, [B, N, 6, H])]
    expected = check_ort_run("MultiHeadAttention", inputs, ["y", "present_key", "present_value"], {"num_heads": N})
    assert expected["present_key"] == ((B, N, 6, H), f32)


def test_multi_head_attention_shared_buffer_and_qk():
    """past_sequence_length given: past and present share one buffer of the max length."""
    caches = [("past_key", f32, [B, N, 32, H]), ("past_value", f32, [B, N, 32, H]), ("past_sequence_length", i32, [1])]
    outputs = ["y", "present_key", "present_value"]
    inputs = [*_qkv(1, 1), "", "", "", *caches]
    expected = check_ort_run(
        "MultiHeadAttention", inputs, outputs, {"num_heads": N}, values={"past_sequence_length": [5]}
    )
    assert expected["present_key"] == ((B, N, 32, H), f32)


def test_multi_head_attention_qk_output():
    """qk [B, N, S, P + L]. onnxruntime does not infer its type (QK is a free type parameter): the
    graph declares it, and its CPU kernel writes it in the query's dtype, as the rule does."""
    inputs = [*_qkv(S, S), "", "", "", ("past_key", f32, [B, N, 5, H]), ("past_value", f32, [B, N, 5, H])]
    outputs = ["y", "present_key", "present_value", ("qk", f32, None)]
    model = model_of("MultiHeadAttention", inputs, outputs, {"num_heads": N})
    expected = ort_run(model)
    assert expected["qk"] == ((B, N, S, 5 + S), f32)
    assert inferred(model) == expected == analyzed(model)


@pytest.mark.parametrize(
    "inputs, expected",
    [
        ([("q", f16, [B, S, D]), ("kv", f16, [B, 6, N, 2, H])], (B, S, D)),  # packed KV: the query's width
        ([("q", f16, [B, S, N, 3, H])], (B, S, N * H)),  # packed QKV
    ],
)
def test_multi_head_attention_packed(inputs, expected):
    """onnxruntime's CPU kernel implements neither packing."""
    check_formula("MultiHeadAttention", inputs, ["y"], {"y": (expected, f16)}, {"num_heads": N})


def _dmmha(query, key=None, value=None, past=None, attrs=None):
    inputs = [("q", f16, query), ("k", f16, key) if key else "", ("v", f16, value) if value else "", "", ""]
    if past:
        inputs += [("past_key", f16, past), ("past_value", f16, past), ("past_sequence_length", i32, [1])]
    return inputs


def test_decoder_masked_multi_head_attention_shared_buffer():
    """onnxruntime's CPU kernel needs past_present_share_buffer: present is the past buffer."""
    inputs = _dmmha([B, 1, D], [B, 1, D], [B, 1, D], past=[B, N, 32, H])
    expected = check_ort_run("DecoderMaskedMultiHeadAttention", inputs, ["y", "present_key", "present_value"],
                             {"num_heads": N, "past_present_share_buffer": 1}, values={"past_sequence_length": [5]})  # fmt: skip
    assert expected["present_key"] == ((B, N, 32, H), f16)


def test_decoder_masked_multi_head_attention_growing_and_packed():
    inputs = _dmmha([B, 1, D], [B, 1, D], [B, 1, D], past=[B, N, 5, H])[:7]
    expected = {"y": ((B, 1, D), f16), "present_key": ((B, N, 5 + 1, H), f16), "present_value": ((B, N, 5 + 1, H), f16)}
    check_formula(
        "DecoderMaskedMultiHeadAttention", inputs, ["y", "present_key", "present_value"], expected, {"num_heads": N}
    )
    packed = _dmmha([B, 1, 3 * D], past=[B, N, 5, H])[:7]
    expected["y"] = ((B, 1, 3 * D // 3), f16)  # packed QKV [B, 1, 2·D + Dv] with Dv = D
    check_formula(
        "DecoderMaskedMultiHeadAttention", packed, ["y", "present_key", "present_value"], expected, {"num_heads": N}
    )


def test_decoder_masked_multi_head_attention_cross_attention_qk():
    """Whisper's cross attention: key/value are the encoder's BNSH caches, qk [B, N, 1, L]."""
    inputs = _dmmha([B, 1, D], [B, N, 6, H], [B, N, 6, H])
    expected = {"y": ((B, 1, N * H), f16), "qk": ((B, N, 1, 6), f16)}
    check_formula(
        "DecoderMaskedMultiHeadAttention", inputs, ["y", "", "", "qk"], expected, {"num_heads": N, "output_qk": 1}
    )


GQA_HEADS, GQA_KV_HEADS, GQA_HEAD = 8, 2, 16


def _gqa(past_len, new, packed=False, past=True, total=None):
    """GroupQueryAttention's inputs for one batch row; total_sequence_length a constant when `total`."""
    width = (GQA_HEADS + 2 * GQA_KV_HEADS if packed else GQA_HEADS) * GQA_HEAD
    kv = [("k", f32, [1, new, GQA_KV_HEADS * GQA_HEAD]), ("v", f32, [1, new, GQA_KV_HEADS * GQA_HEAD])]
    caches = [
        ("past_key", f32, [1, GQA_KV_HEADS, past_len, GQA_HEAD]),
        ("past_value", f32, [1, GQA_KV_HEADS, past_len, GQA_HEAD]),
    ]
    inputs = [("q", f32, [1, new, width]), *(["", ""] if packed else kv), *(caches if past else ["", ""]),
              ("seqlens_k", i32, [1]), ("total_sequence_length", i32, [])]  # fmt: skip
    initializers = {"total_sequence_length": np.array(total, np.int32)} if total is not None else None
    values = {"seqlens_k": [past_len + new - 1], "total_sequence_length": past_len + new}
    return inputs, initializers, values


def _check_gqa(inputs, initializers, values, attrs=None, outputs=("y", "present_key", "present_value")):
    attrs = {"num_heads": GQA_HEADS, "kv_num_heads": GQA_KV_HEADS, **(attrs or {})}
    return check_ort_run("GroupQueryAttention", inputs, list(outputs), attrs, initializers, values)


def test_group_query_attention_decode_present_is_the_total_length():
    """The issue's case: past [1, 8, 1023, 128] and one new token. onnxruntime returns present
    [1, 8, 1024, 128] (its Python inference copied the past's 1023; its C++ inference leaves the
    dim unknown when total_sequence_length is not a constant)."""
    inputs = [("q", f16, [1, 1, 32 * 128]), ("k", f16, [1, 1, 8 * 128]), ("v", f16, [1, 1, 8 * 128]),
              ("past_key", f16, [1, 8, 1023, 128]), ("past_value", f16, [1, 8, 1023, 128]),
              ("seqlens_k", i32, [1]), ("total_sequence_length", i32, [])]  # fmt: skip
    expected = check_ort_run("GroupQueryAttention", inputs, ["y", "present_key", "present_value"], {"num_heads": 32, "kv_num_heads": 8},
                             values={"seqlens_k": [1023], "total_sequence_length": 1024})  # fmt: skip
    assert expected["present_key"] == ((1, 8, 1023 + 1, 128), f16)


@pytest.mark.parametrize("total", [None, 10 + 1], ids=["runtime-total", "constant-total"])
def test_group_query_attention_decode(total):
    expected = _check_gqa(*_gqa(10, 1, total=total))
    assert expected["present_key"] == ((1, GQA_KV_HEADS, 10 + 1, GQA_HEAD), f32)


def test_group_query_attention_packed_qkv():
    expected = _check_gqa(*_gqa(10, 1, packed=True))
    assert expected["y"] == ((1, 1, GQA_HEADS * GQA_HEAD), f32)  # (H + 2·Hkv)·dh in, H·dh out


@pytest.mark.parametrize("past", [True, False])
def test_group_query_attention_prefill(past):
    """An empty past [1, 2, 0, 16] or none at all: present holds the S new rows."""
    expected = _check_gqa(*_gqa(0, S, past=past))
    assert expected["present_key"] == ((1, GQA_KV_HEADS, S, GQA_HEAD), f32)


def test_group_query_attention_static_cache():
    """A max-length buffer (past 10 rows, total_sequence_length 6 ≤ 10): present keeps the buffer's
    length, max(P, T)."""
    inputs, initializers, values = _gqa(10, 1, total=6)
    values["seqlens_k"] = [5]
    expected = _check_gqa(inputs, initializers, values)
    assert expected["present_key"] == ((1, GQA_KV_HEADS, 10, GQA_HEAD), f32)


@pytest.mark.parametrize("total", [None, 11])
def test_group_query_attention_qk_output(total):
    expected = _check_gqa(
        *_gqa(10, 1, total=total), {"qk_output": 1}, outputs=("y", "present_key", "present_value", "qk")
    )
    assert expected["qk"] == ((1, GQA_HEADS, 1, 10 + 1), f32)


def test_group_query_attention_sliding_window_cache():
    """sliding_window_cache: the past buffer is the window's capacity; present keeps its shape."""
    inputs, initializers, values = _gqa(10, 1, total=8)
    values["seqlens_k"] = [7]
    expected = _check_gqa(inputs, initializers, values, {"sliding_window_cache": 1, "local_window_size": 8})
    assert expected["present_key"] == ((1, GQA_KV_HEADS, 10, GQA_HEAD), f32)


def test_group_query_attention_quantized_cache_keeps_its_dtype():
    """An int8 KV cache (CUDA): present_key/value are int8 like the past, the output float16."""
    inputs = [("q", f16, [1, 1, 128]), ("k", f16, [1, 1, 32]), ("v", f16, [1, 1, 32]), ("past_key", "int8", [1, 2, 10, 16]),
              ("past_value", "int8", [1, 2, 10, 16]), ("seqlens_k", i32, [1]), ("total_sequence_length", i32, []),
              "", "", "", "", "", ("k_scale", f32, [1]), ("v_scale", f32, [1])]  # fmt: skip
    expected = {
        "y": ((1, 1, 128), f16),
        "present_key": ((1, 2, 10 + 1, 16), "int8"),
        "present_value": ((1, 2, 10 + 1, 16), "int8"),
    }
    attrs = {
        "num_heads": 8,
        "kv_num_heads": 2,
        "k_quant_type": "PER_TENSOR",
        "v_quant_type": "PER_TENSOR",
        "kv_cache_bit_width": 8,
    }
    check_formula("GroupQueryAttention", inputs, ["y", "present_key", "present_value"], expected, attrs)


@pytest.mark.parametrize("packed", [False, True])
def test_sparse_attention_present_is_the_past_buffer(packed):
    """Phi-3-small's block-sparse attention: past and present share one max-length buffer (its CPU
    kernel runs only with the buffers bound to the same memory, which a plain session cannot do)."""
    kv = [] if packed else [("k", f16, [1, S, 2 * H]), ("v", f16, [1, S, 2 * H])]
    inputs = [("q", f16, [1, S, (8 + 2 * 2 if packed else 8) * H]), *(["", ""] if packed else kv),
              ("past_key", f16, [1, 2, 128, H]), ("past_value", f16, [1, 2, 128, H]), ("rows", i32, [1, 9]),
              ("cols", i32, [1, 36]), ("total", i32, []), ("key_totals", i32, [1])]  # fmt: skip
    expected = {"y": ((1, S, 8 * H), f16), "present_key": ((1, 2, 128, H), f16), "present_value": ((1, 2, 128, H), f16)}
    attrs = {"num_heads": 8, "kv_num_heads": 2, "sparse_block_size": 16}
    check_formula("SparseAttention", inputs, ["y", "present_key", "present_value"], expected, attrs)


def _paged(query, key=None, value=None, cache=(10, 16, 2, H)):
    return [("q", f16, query), ("k", f16, key) if key else "", ("v", f16, value) if value else "", ("key_cache", f16, list(cache)),
            ("value_cache", f16, list(cache)) if value or not key else "", ("cumulative", i32, [B + 1]), ("past_seqlens", i32, [B]),
            ("block_table", i32, [B, 5])]  # fmt: skip


def test_paged_attention():
    """CUDA-only: the caches are aliased in place (key_cache_out = key_cache)."""
    tokens, cache = 12, ((10, 16, 2, H), f16)
    attrs = {"num_heads": 8, "kv_num_heads": 2}
    expected = {"y": ((tokens, 8 * H), f16), "key_cache_out": cache, "value_cache_out": cache}
    outputs = ["y", "key_cache_out", "value_cache_out"]
    check_formula("PagedAttention", _paged([tokens, 8 * H], [tokens, 2 * H], [tokens, 2 * H]), outputs, expected, attrs)
    check_formula("PagedAttention", _paged([tokens, (8 + 2 * 2) * H]), outputs, expected, attrs)  # packed QKV


def test_paged_attention_latent():
    """DeepSeek's absorbed MLA: one cache of 96-wide rows, V its first v_head_size = 64 channels."""
    tokens = 12
    inputs = _paged([tokens, 8 * 96], [tokens, 96], cache=(10, 16, 1, 96))
    attrs = {"num_heads": 8, "kv_num_heads": 1, "kv_cache_layout": "LATENT", "v_head_size": 64, "scale": 0.1}
    expected = {"y": ((tokens, 8 * 64), f16), "key_cache_out": ((10, 16, 1, 96), f16)}
    check_formula("PagedAttention", inputs, ["y", "key_cache_out"], expected, attrs)


@pytest.mark.parametrize(
    "qkv_hidden_sizes, bias, width",
    [(None, 3 * D, D), ([64, 64, 32], 160, 32)],
)
def test_packed_attention(qkv_hidden_sizes, bias, width):
    tokens = 12
    inputs = [("x", f16, [tokens, D]), ("w", f16, [D, bias]), ("bias", f16, [bias]), ("token_offset", i32, [B, S]),
              ("cumulative", i32, [B + 1])]  # fmt: skip
    attrs = {"num_heads": N, **({"qkv_hidden_sizes": qkv_hidden_sizes} if qkv_hidden_sizes else {})}
    check_formula("PackedAttention", inputs, ["y"], {"y": ((tokens, width), f16)}, attrs)


@pytest.mark.parametrize(
    "qkv, width",
    [
        ([("q", f16, [12, D]), ("k", f16, [12, D]), ("v", f16, [12, 32])], 32),
        ([("q", f16, [12, N, 3, H]), "", ""], N * H),
    ],
)
def test_packed_multi_head_attention(qkv, width):
    inputs = [*qkv, "", ("token_offset", i32, [B, S]), ("cumulative", i32, [B + 1])]
    check_formula("PackedMultiHeadAttention", inputs, ["y"], {"y": ((12, width), f16)}, {"num_heads": N})


def test_longformer_attention():
    inputs = [("x", f16, [B, S, D]), ("w", f16, [D, 3 * D]), ("bias", f16, [3 * D]), ("mask", f16, [B, S]),
              ("global_w", f16, [D, 3 * D]), ("global_bias", f16, [3 * D]), ("global", i32, [B, S])]  # fmt: skip
    check_formula("LongformerAttention", inputs, ["y"], {"y": ((B, S, D), f16)}, {"num_heads": N, "window": 2})


@pytest.mark.parametrize(
    "op_type, x, positions, attrs",
    [
        ("RotaryEmbedding", [B, S, D], [B, S], {"num_heads": N}),
        ("RotaryEmbedding", [B, N, S, H], [1], {}),  # 4-D input, a start offset
        ("MRotaryEmbedding", [B, S, D], [3, B, S], {"num_heads": N, "mrope_section": [2, 3, 3]}),
    ],
)
def test_rotary_embeddings_keep_the_input_shape(op_type, x, positions, attrs):
    inputs = [("x", f32, x), ("positions", i64, positions), ("cos", f32, [32, H // 2]), ("sin", f32, [32, H // 2])]
    assert check_ort_run(op_type, inputs, ["y"], attrs) == {"y": (tuple(x), f32)}


def test_gemma_rotary_embedding():
    q = [B, N, S, H]
    inputs = [("emb", f32, [B, S, H]), ("q", f16, q), ("q_rot", f16, q), ("k", f16, q), ("k_rot", f16, q)]
    check_formula(
        "GemmaRotaryEmbedding", inputs, ["q_embed", "k_embed"], {"q_embed": (tuple(q), f16), "k_embed": (tuple(q), f16)}
    )


def test_relative_position_bias_from_constant_lengths():
    """T5: [1, N, query_length, key_length]; onnxruntime's static inference leaves the lengths unknown."""
    lengths = {"query_length": np.array([S], np.int64), "key_length": np.array([S + 3], np.int64)}
    inputs = [("table", f32, [32, N]), ("query_length", i64, [1]), ("key_length", i64, [1])]
    check_formula("RelativePositionBias", inputs, ["y"], {"y": ((1, N, S, S + 3), f32)}, {"max_distance": 128}, lengths)


def test_relative_position_bias_with_runtime_lengths_stays_untyped():
    inputs = [("table", f32, [32, N]), ("query_length", i64, [1]), ("key_length", i64, [1])]
    assert inferred(model_of("RelativePositionBias", inputs, ["y"], {"max_distance": 128})) == {}


@pytest.mark.parametrize(
    "query, offsets",
    [([B, S, D], None), ([12, D], [B, S])],  # padded; padding removed (token-major query, token_offset)
)
def test_gated_relative_position_bias(query, offsets):
    inputs = [("query", f16, query), ("query_bias", f16, [D]), ("rel_pos", f16, [1, N, S, S]), ("weight", f16, [H, 8]),
              ("bias", f16, [8]), ("eco_a", f16, [1, N, 1, 1])] + ([("token_offset", i32, offsets)] if offsets else [])  # fmt: skip
    check_formula("GatedRelativePositionBias", inputs, ["y"], {"y": ((B, N, S, S), f16)}, {"num_heads": N})


def test_remove_and_restore_padding():
    """RemovePadding's token count is the sum of sequence_token_count: typed when it is a constant."""
    counts = {"counts": np.array([3, 5], np.int32)}
    inputs = [("x", f16, [B, S, D]), ("counts", i32, [B])]
    expected = {
        "y": ((3 + 5, D), f16),
        "token_offset": ((B, S), i32),
        "cumulated": ((B + 1,), i32),
        "max_len": ((1,), i32),
    }
    check_formula("RemovePadding", inputs, ["y", "token_offset", "cumulated", "max_len"], expected, initializers=counts)
    check_formula(
        "RestorePadding", [("x", f16, [12, D]), ("token_offset", i32, [B, S])], ["y"], {"y": ((B, S, D), f16)}
    )


def test_remove_padding_with_runtime_counts_leaves_the_tokens_unknown():
    model = model_of(
        "RemovePadding", [("x", f16, [B, S, D]), ("counts", i32, [B])], ["y", "token_offset", "cumulated", "max_len"]
    )
    assert inferred(model) == {"token_offset": ((B, S), i32), "cumulated": ((B + 1,), i32), "max_len": ((1,), i32)}


# --- hyper-connections and onnxruntime's QuantizeLinear ------------------------------------------------


@pytest.mark.parametrize(
    "streams, attrs",
    [([B, S, 4, D], {}), ([B, S, 4 * D], {"num_branches": 4})],  # grouped; flattened
)
def test_hyper_connection_pre_mix(streams, attrs):
    inputs = [("streams", f32, streams), ("pre_mix", f32, [B, S, 4])]
    assert check_ort_run("HyperConnectionPreMix", inputs, ["y"], attrs) == {"y": ((B, S, D), f32)}


def test_hyper_connection_post_mix():
    inputs = [("streams", f32, [B, S, 4, D]), ("block_output", f32, [B, S, D]), ("post_mix", f32, [B, S, 4])]
    assert check_ort_run("HyperConnectionPostMix", inputs, ["y"]) == {"y": ((B, S, 4, D), f32)}


def test_hyper_connection_low_rank_mix():
    c, rank = 4, 8
    inputs = [("streams", f32, [B, S, c * D]), ("norm_scale", f32, [c * D]), ("down", f32, [c * D, rank]), ("up", f32, [rank, c * D]),
              ("inject", f32, [c * D, c])]  # fmt: skip
    expected = {"pre_output": ((B, S, D), f32), "post_gate": ((B, S, c), f32), "streams_out": ((B, S, c * D), f32)}
    check_formula(
        "HyperConnectionLowRankMix", inputs, ["pre_output", "post_gate", "streams_out"], expected, {"num_branches": c}
    )


@pytest.mark.parametrize(
    "op_type, inputs, dtype",
    [
        ("QuantizeLinear", [("x", f32, [B, S, D]), ("scale", f32, []), ("zero_point", "int8", [])], "int8"),
        ("QuantizeLinear", [("x", f32, [B, S, D]), ("scale", f32, [])], "uint8"),  # no zero point: uint8
        ("DequantizeLinear", [("x", "int8", [B, S, D]), ("scale", f16, []), ("zero_point", "int8", [])], f16),
    ],
)
def test_contrib_quantize_linear(op_type, inputs, dtype):
    assert check_ort_run(op_type, inputs, ["y"]) == {"y": ((B, S, D), dtype)}


# --- in a graph: the values the rules read come from folding ---------------------------------------


def _genai_decode_graph():
    """onnxruntime-genai's GQA wiring: total_sequence_length = Shape(attention_mask)[1] and
    seqlens_k = ReduceSum(attention_mask) − 1, both cast to int32; symbolic batch and lengths."""
    nodes = [
        helper.make_node("Shape", ["attention_mask"], ["mask_shape"]),
        helper.make_node("Gather", ["mask_shape", "one"], ["total64"], axis=0),
        helper.make_node("Cast", ["total64"], ["total"], to=onnx.TensorProto.INT32),
        helper.make_node("ReduceSum", ["attention_mask", "one_axis"], ["lengths"], keepdims=0),
        helper.make_node("Sub", ["lengths", "one"], ["lengths_minus_one"]),
        helper.make_node("Cast", ["lengths_minus_one"], ["seqlens_k"], to=onnx.TensorProto.INT32),
        helper.make_node(
            "GroupQueryAttention",
            ["q", "k", "v", "past_key", "past_value", "seqlens_k", "total"],
            ["y", "present_key", "present_value"],
            domain=MS,
            num_heads=32,
            kv_num_heads=8,
        ),  # fmt: skip
    ]
    cache = ["batch", 8, "past_sequence_length", 128]
    inputs = [
        helper.make_tensor_value_info("q", onnx.TensorProto.FLOAT16, ["batch", 1, 32 * 128]),
        helper.make_tensor_value_info("k", onnx.TensorProto.FLOAT16, ["batch", 1, 8 * 128]),
        helper.make_tensor_value_info("v", onnx.TensorProto.FLOAT16, ["batch", 1, 8 * 128]),
        helper.make_tensor_value_info("past_key", onnx.TensorProto.FLOAT16, cache),
        helper.make_tensor_value_info("past_value", onnx.TensorProto.FLOAT16, cache),
        helper.make_tensor_value_info("attention_mask", onnx.TensorProto.INT64, ["batch", "total_sequence_length"]),
    ]
    constants = [
        onnx.numpy_helper.from_array(np.array(v, np.int64), name) for name, v in (("one", 1), ("one_axis", [1]))
    ]
    outputs = [helper.make_empty_tensor_value_info(name) for name in ("y", "present_key", "present_value")]
    graph = helper.make_graph(nodes, "decode", inputs, outputs, initializer=constants)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(MS, 1)])


def test_group_query_attention_total_length_folded_from_the_mask():
    """The rule reads total_sequence_length folded from the mask's shape: present [1, 8, 1024, 128]
    for 1,023 cached tokens, and the node is costed as a growing cache (present written whole),
    not as an in-place one."""
    report = analyze(
        _genai_decode_graph(),
        sizing=Sizing(dims={"batch": 1, "past_sequence_length": 1023, "total_sequence_length": 1024}),
    )
    gqa = report.nodes[-1]
    assert gqa.status == "ok", gqa.reason
    present = (1, 8, 1023 + 1, 128)
    assert {t.name: t.shape for t in gqa.outputs} == {
        "y": (1, 1, 4096),
        "present_key": present,
        "present_value": present,
    }
    assert gqa.cost.bytes_written == 4096 * 2 + 2 * 8 * 1024 * 128 * 2 == 4_202_496  # y and both presents, fp16


def test_group_query_attention_static_cache_from_the_mask():
    """A max-length buffer of 4,096 with 1,024 valid tokens: present is the buffer, costed in place."""
    report = analyze(
        _genai_decode_graph(),
        sizing=Sizing(dims={"batch": 1, "past_sequence_length": 4096, "total_sequence_length": 1024}),
    )
    gqa = report.nodes[-1]
    assert gqa.outputs[1].shape == (1, 8, 4096, 128)
    assert gqa.cost.bytes_written == 4096 * 2 + 2 * 8 * 1 * 128 * 2  # y and the one new row of each buffer
