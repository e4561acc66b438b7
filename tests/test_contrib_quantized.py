"""The contrib ops of rules/contrib_quantized.py and shape_rules/contrib_quantized.py. Ops with a
CPU kernel run as one-node models in onnxruntime: the analysis's output shapes and dtypes must equal
the real outputs, and `verify` must pass; the others are checked against their schema's formula.
FLOPs are written as the spec's arithmetic."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnx_roofline import Sizing, analyze
from onnx_roofline.commands.verify import verify
from tests.conftest import one_node_model
from tests.test_transformer_shapes import ort_run

MS = "com.microsoft"


def _model(op_type, inputs, outputs, attrs=None, initializers=None):
    return one_node_model(op_type, inputs, outputs, attrs, initializers, domain=MS)


def _node(model, values=None):
    (node,) = analyze(model, sizing=Sizing(values=values)).nodes
    return node


def _shapes(node) -> dict:
    return {t.name: (t.shape, t.dtype) for t in node.outputs if t is not None and t.shape is not None}


def _check_ort(model, values=None):
    """Costed, typed as onnxruntime's run, and verified; returns the node."""
    node = _node(model, values)
    assert node.status == "ok", node.reason
    assert _shapes(node) == ort_run(model, values)
    assert verify(model, values=values).passed
    return node


# --- the cuBLASLt-ordered int8 ops (CUDA only: the schema's shapes) ----------------------------------

B, S, D, HEADS = 2, 8, 32, 4


def test_quantize_and_dequantize_with_order():
    node = _node(
        _model(
            "QuantizeWithOrder",
            [("x", "float16", [B, S, D]), ("s", "float32", [])],
            ["y"],
            {"order_input": 1, "order_output": 2},
        )
    )
    assert _shapes(node) == {"y": ((B, S, D), "int8")}
    assert node.cost.flops == 4 * B * S * D  # divide, round, clamp low and high per element
    node = _node(
        _model(
            "DequantizeWithOrder",
            [("x", "int8", [B, S, D]), ("s", "float32", [])],
            ["y"],
            {"order_input": 2, "order_output": 1, "to": 10},
        )
    )
    assert _shapes(node) == {"y": ((B, S, D), "float16")}
    assert node.cost.flops == B * S * D  # one multiply by the scale per element


def test_q_ordered_gelu_and_layer_norm():
    node = _node(
        _model("QOrderedGelu", [("x", "int8", [B, S, D]), ("sx", "float32", []), ("sy", "float32", [])], ["y"])
    )
    n = B * S * D
    assert _shapes(node) == {"y": ((B, S, D), "int8")}
    assert (node.cost.flops, node.cost.transcendentals) == ((1 + 4 + 4) * n, n)  # dequantize, erf Gelu, quantize
    inputs = [
        ("x", "int8", [B, S, D]),
        ("sx", "float32", []),
        ("g", "float16", [D]),
        ("b", "float16", [D]),
        ("sy", "float32", []),
    ]
    node = _node(_model("QOrderedLayerNormalization", inputs, ["y"]))
    rows = B * S
    assert _shapes(node) == {"y": ((B, S, D), "int8")}
    assert (node.cost.flops, node.cost.transcendentals) == (
        n + (5 * n + 2 * rows + 2 * n) + 4 * n,
        rows,
    )  # dequantize, LayerNorm with gamma and beta, quantize


def test_q_ordered_attention():
    f = "float32"
    inputs = [("x", "int8", [B, S, D]), ("s_in", f, []), ("sq", f, []), ("sk", f, []), ("sv", f, [])]
    inputs += [(w, "int8", [D, D]) for w in ("wq", "wk", "wv")] + [(s, f, []) for s in ("swq", "swk", "swv")]
    inputs += [(b, f, [D]) for b in ("bq", "bk", "bv")] + [
        ("sqkt", f, []),
        ("ssoft", f, []),
        ("sout", f, []),
        ("mask", "int32", [B, S]),
    ]
    node = _node(
        _model(
            "QOrderedAttention",
            inputs,
            ["y"],
            {"num_heads": HEADS, "order_input": 1, "order_weight": 0, "order_output": 1},
        )
    )
    assert _shapes(node) == {"y": ((B, S, D), "int8")}
    projected, dh = B * S * 3 * D, D // HEADS
    scores, rows = B * HEADS * S * S, B * HEADS * S
    expected = 2 * projected * D + 6 * projected  # integer projection; dequantize, bias, requantize
    expected += (
        2 * scores * dh + scores + scores + 4 * scores - 2 * rows + 2 * scores * dh
    )  # QKᵀ, scale, mask, softmax, PV
    expected += 4 * scores + 4 * B * S * D  # the softmax quantized (scale_QKT_softmax), Y requantized
    assert node.cost.flops == expected


def test_q_ordered_longformer_attention():
    f, window = "float32", 2
    inputs = [("x", "int8", [B, S, D]), ("sx", f, []), ("w", "int8", [D, 3 * D]), ("sw", f, []), ("b", f, [3 * D]), ("sb", f, []),
              ("sqkv", f, []), ("mask", "float16", [B, S]), ("gw", "int8", [D, 3 * D]), ("sgw", f, []), ("gb", f, [3 * D]),
              ("sg", f, []), ("global", "int32", [B, S]), ("so", f, [])]  # fmt: skip
    node = _node(
        _model(
            "QOrderedLongformerAttention",
            inputs,
            ["y"],
            {
                "num_heads": HEADS,
                "window": window,
                "order_input": 1,
                "order_weight": 0,
                "order_global_weight": 0,
                "order_output": 1,
            },
        )
    )
    assert _shapes(node) == {"y": ((B, S, D), "int8")}
    projected, band, dh = B * S * 3 * D, 2 * window + 1, D // HEADS
    scores, rows = B * HEADS * S * band, B * HEADS * S
    expected = 2 * (2 * projected * D + projected)  # both projections with their biases
    expected += 2 * scores * 2 * dh + scores + scores + 4 * scores - 2 * rows  # banded attention
    expected += 2 * projected * 5 + 4 * B * S * D  # dequantize + requantize each projection, requantize Y
    assert node.cost.flops == expected


# --- MatMulFpQ4, DecoderAttention, AttnLSTM --------------------------------------------------------


def test_matmul_fpq4_against_onnxruntime():
    """Against onnxruntime where its CPU build runs the op: MLAS's 4-bit kernels refuse a CPU
    without the instructions they need ("not yet supported on this hardware platform"); the
    costs and the schema's shapes are checked there all the same."""
    k, n, m = 64, 16, 3
    refused = None
    for quant_type, bytes_per_block in ((0, 20), (1, 21)):  # 32 values: 16 bytes, a float scale (+ a zero point)
        size = n * (k // 32) * bytes_per_block
        blob = np.random.default_rng(0).integers(0, 255, size).astype(np.uint8)
        model = _model("MatMulFpQ4", [("a", "float32", [m, k]), ("b", "uint8", [size]), ("b_shape", "int64", [2])], ["y"],
                       {"blk_quant_type": quant_type}, {"b": blob, "b_shape": np.array([k, n], np.int64)})  # fmt: skip
        node = _node(model)
        assert node.status == "ok" and _shapes(node) == {"y": ((m, n), "float32")}
        assert node.cost.flops == 2 * m * k * n
        assert node.cost.dequantize_flops == 2 * k * n  # (q − zero point)·scale per weight
        assert node.parameters == k * n  # the logical weights, not the blob's bytes
        try:
            _check_ort(model)
        except Exception as exc:  # onnxruntime's Fail, raised at the session's creation
            if "not yet supported on this hardware platform" not in str(exc):
                raise
            refused = str(exc).splitlines()[0]
    if refused:
        pytest.skip(f"costs checked; onnxruntime refuses to run the op on this CPU: {refused}")


def _decoder_attention(static_kv, use_past, constant=True):
    L, P = 6, 5
    flags = {"static_kv": static_kv, "use_past": use_past, "has_layer_state": True, "has_mask": False}
    inputs = [("q", "float16", [S, B, D]), ("k", "float16", [L, B, D]), ("qw", "float16", [D, D]), ("kvw", "float16", [D, 2 * D]),
              ("bias", "float16", [3 * D]), "", ("kc", "float16", [B, HEADS, P, D // HEADS]), ("vc", "float16", [B, HEADS, P, D // HEADS])]  # fmt: skip
    inputs += [(name, "bool", []) for name in flags]
    initializers = {name: np.array(value) for name, value in flags.items()} if constant else {}
    return _node(_model("DecoderAttention", inputs, ["y", "new_k", "new_v"], {"num_heads": HEADS}, initializers))


def test_decoder_attention_self_and_cross():
    L, P, dh = 6, 5, D // HEADS
    q_projection = 2 * S * B * D * D + S * B * D

    def attention(keys):
        scores, rows = B * HEADS * S * keys, B * HEADS * S
        return 2 * scores * 2 * dh + scores + 4 * scores - 2 * rows

    node = _decoder_attention(static_kv=False, use_past=True)  # self attention: L new keys after the P cached
    assert _shapes(node)["new_k"] == ((B, HEADS, P + L, dh), "float16")
    assert node.cost.flops == q_projection + 2 * L * B * D * 2 * D + L * B * 2 * D + attention(P + L)
    node = _decoder_attention(static_kv=True, use_past=True)  # cross attention from the caches: no K/V projection
    assert _shapes(node)["new_k"] == ((B, HEADS, P, dh), "float16")
    assert node.cost.flops == q_projection + attention(P)
    node = _decoder_attention(static_kv=False, use_past=True, constant=False)
    assert node.status == "unknown-shape" and _shapes(node) == {
        "y": ((S, B, D), "float16")
    }  # the caches' length is the flags'


def test_attn_lstm_against_onnxruntime():
    t, b, i, h, a, tm, dm, aw = 3, 2, 5, 4, 6, 7, 8, 9
    f = "float32"
    inputs = [("X", f, [t, b, i]), ("W", f, [1, 4 * h, i + aw]), ("R", f, [1, 4 * h, h]), ("B", f, [1, 8 * h]), "", "", "", "",
              ("QW", f, [1, h, a]), ("MW", f, [1, dm, a]), ("V", f, [1, a]), ("M", f, [b, tm, dm]), ("memory_lens", "int32", [b]),
              ("AW", f, [1, dm + h, aw])]  # fmt: skip
    node = _check_ort(
        _model("AttnLSTM", inputs, ["Y", "Y_h", "Y_c"], {"hidden_size": h}), values={"memory_lens": [tm] * b}
    )
    lstm = (
        2 * (i + aw + h) * 4 * h + 2 * 4 * h + 3 * h + h
    )  # gates' GEMMs on concat(X, ATTN), biases, cell and hidden updates
    attention = (
        2 * h * a + tm * a + 2 * tm * a + 4 * tm - 2 + 2 * tm * dm + 2 * (h + dm) * aw
    )  # query layer, tanh(keys + pq), · V, softmax, context, AW
    assert node.cost.flops == 2 * b * tm * dm * a + t * b * (lstm + attention)  # the memory layer once
    assert node.cost.transcendentals == t * b * (
        5 * h + tm * a + tm
    )  # LSTM's sigmoids and tanhs, the attention's tanh and exps


# --- generation helpers ------------------------------------------------------------------------------


def test_ngram_repeat_block_against_onnxruntime():
    node = _check_ort(
        _model(
            "NGramRepeatBlock", [("ids", "int64", [2, 6]), ("scores", "float32", [2, 10])], ["out"], {"ngram_size": 3}
        )
    )
    assert node.cost.flops == 2 * (6 - 3 + 1) * (3 - 1)  # each earlier 3-gram start against the last 2 tokens


def test_bifurcation_detector_against_onnxruntime():
    inputs = [("src", "int64", [10]), ("cur", "int64", [4]), ("prev", "int64", [])]
    node = _check_ort(
        _model("BifurcationDetector", inputs, ["tokens", "idx"], {"min_ngram_size": 1, "max_ngram_size": 3})
    )
    assert node.cost.flops == sum(n * (10 - n + 1) for n in (1, 2, 3))  # the last n tokens against each window of src
    with_pred = _model(
        "BifurcationDetector",
        [*inputs, ("pred", "int64", [11])],
        ["tokens", "idx"],
        {"min_ngram_size": 1, "max_ngram_size": 3},
    )
    node = _node(with_pred)
    assert node.status == "unknown-shape" and "tokens" not in _shapes(node)  # the merged length is data
    assert ort_run(with_pred, {"prev": 0})["idx"] == _shapes(node)["idx"] == ((), "int64")


def test_dynamic_time_warping_against_onnxruntime():
    node = _check_ort(_model("DynamicTimeWarping", [("cost", "float32", [1, 1, 7])], ["path"]))
    assert node.cost.flops == 3 * 1 * 7 + 2 * (1 + 7 - 1)  # min of 3 neighbours + the cost per cell; the backtrace
    square = _model("DynamicTimeWarping", [("cost", "float32", [5, 7])], ["path"])
    assert _node(square).status == "unknown-shape"  # a path of 7 to 11 points: its length is data
    assert ort_run(square)["path"][0][0] == 2


# --- generation loops ----------------------------------------------------------------------------

V, E, HEADS_G, HEAD, ROWS_B, PROMPT = 11, 8, 2, 4, 2, 3


def _decoder() -> onnx.GraphProto:
    """A one-layer GPT-style decoder (onnxruntime's subgraph_gpt layout): logits = emb[ids]·head, the
    new K/V emb[ids]·wkv appended to past_0 [2, B, N, P, H]."""
    rng = np.random.default_rng(0)
    weights = {"emb": (V, E), "head": (E, V), "wkv": (E, 2 * HEADS_G * HEAD)}
    initializers = [
        numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name) for name, shape in weights.items()
    ]
    initializers.append(numpy_helper.from_array(np.array([0, 0, 2, HEADS_G, HEAD], np.int64), "kv_shape"))
    nodes = [
        helper.make_node("Gather", ["emb", "input_ids"], ["x"]),
        helper.make_node("MatMul", ["x", "head"], ["logits"]),
        helper.make_node("MatMul", ["x", "wkv"], ["kv"]),
        helper.make_node("Reshape", ["kv", "kv_shape"], ["kv5"]),
        helper.make_node("Transpose", ["kv5"], ["kv_t"], perm=[2, 0, 3, 1, 4]),
        helper.make_node("Concat", ["past_0", "kv_t"], ["present_0"], axis=3),
    ]
    value = helper.make_tensor_value_info
    inputs = [value("input_ids", TensorProto.INT32, ["b", "s"]), value("position_ids", TensorProto.INT32, ["b", "s"]),
              value("attention_mask", TensorProto.INT32, ["b", "t"]), value("past_0", TensorProto.FLOAT, [2, "b", HEADS_G, "p", HEAD])]  # fmt: skip
    outputs = [
        value("logits", TensorProto.FLOAT, ["b", "s", V]),
        value("present_0", TensorProto.FLOAT, [2, "b", HEADS_G, "t", HEAD]),
    ]
    return helper.make_graph(nodes, "decoder", inputs, outputs, initializer=initializers)


def _generation(op_type, max_length=7, beams=3, constant_length=True, constant_beams=True, **attrs) -> onnx.ModelProto:
    scalars = {"max_length": np.array([max_length], np.int32)}
    if op_type == "BeamSearch":
        scalars |= {"min_length": np.array([1], np.int32), "num_beams": np.array([beams], np.int32), "num_return_sequences": np.array([beams], np.int32),
                    "length_penalty": np.array([1.0], np.float32), "repetition_penalty": np.array([1.0], np.float32)}  # fmt: skip
    runtime = {name for name, keep in (("max_length", constant_length), ("num_beams", constant_beams)) if not keep}
    graph_inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT32, [ROWS_B, PROMPT])]
    graph_inputs += [helper.make_tensor_value_info(name, TensorProto.INT32, [1]) for name in sorted(runtime)]
    outputs = (
        ["sequences", "sequences_scores", "scores"][: 3 if constant_beams else 2]
        if op_type == "BeamSearch"
        else ["sequences"]
    )
    node = helper.make_node(
        op_type,
        ["input_ids", *scalars],
        outputs,
        domain=MS,
        decoder=_decoder(),
        eos_token_id=V - 1,
        pad_token_id=0,
        **attrs,
    )
    initializers = [numpy_helper.from_array(v, k) for k, v in scalars.items() if k not in runtime]
    graph = helper.make_graph(
        [node], "g", graph_inputs, [helper.make_empty_tensor_value_info(o) for o in outputs], initializer=initializers
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])


def _decoder_flops(rows: int, tokens: int) -> int:
    """The toy decoder on `tokens` new tokens of `rows` rows: the two MatMuls (Gather, Reshape,
    Transpose and Concat move data)."""
    return 2 * rows * tokens * E * V + 2 * rows * tokens * E * 2 * HEADS_G * HEAD


def test_greedy_search_is_the_bound_over_max_length_steps():
    node = _check_ort(_generation("GreedySearch"))
    steps = 7 - PROMPT  # the prompt step, then one token a step up to max_length
    decoder = _decoder_flops(ROWS_B, PROMPT) + (steps - 1) * _decoder_flops(ROWS_B, 1)
    assert node.cost.flops == decoder + steps * (ROWS_B * V - ROWS_B)  # ArgMax over the [B, V] logits each step


def test_beam_search_runs_every_beam():
    beams = 3
    node = _check_ort(_generation("BeamSearch", beams=beams))
    rows, steps = ROWS_B * beams, 7 - PROMPT
    decoder = _decoder_flops(rows, PROMPT) + (steps - 1) * _decoder_flops(rows, 1)
    n = rows * V
    search = (
        (4 * n - 2 * rows) + n + 2 * beams * V * 3
    )  # LogSoftmax, + beam scores, TopK of 6 over 3·V (⌈log2 6⌉ = 3 compares each)
    assert (node.cost.flops, node.cost.transcendentals) == (decoder + steps * search, steps * (n + rows))


def test_sampling_against_onnxruntime():
    for top_p, sort in ((0.0, 0), (0.9, ROWS_B * V * 4)):  # 0 < top_p < 1 sorts each row: V·⌈log2 V⌉ compares
        node = _check_ort(_generation("Sampling", top_p=top_p))
        steps, n = 7 - PROMPT, ROWS_B * V
        decoder = _decoder_flops(ROWS_B, PROMPT) + (steps - 1) * _decoder_flops(ROWS_B, 1)
        draw = n + ROWS_B * (1 + 4)  # the CDF's running sum, then a scale and ⌈log2 11⌉ = 4 compares per draw
        assert (node.cost.flops, node.cost.transcendentals) == (
            decoder + steps * (n + sort + draw),
            steps * n,
        )  # temperature Div; exps


def test_runtime_max_length_or_beams_is_data():
    greedy = _generation("GreedySearch", constant_length=False)
    assert _node(greedy).status == "unknown-shape"  # sequences [B, max_length]: sized by the value
    assert _node(greedy, values={"max_length": 7}).status == "ok"
    node = _node(
        _generation("BeamSearch", constant_beams=False)
    )  # scores [max_length − S, B, num_beams, V] not asked for
    assert node.status == "data-dependent" and "num_beams" in node.reason


def test_encoder_decoder_generation_is_unsupported():
    for op_type, model_type in (
        ("GreedySearch", 1),
        ("BeamSearch", 2),
    ):  # T5-like; Whisper's (WhisperBeamSearch shares the rule)
        node = _node(_generation(op_type, model_type=model_type))
        assert node.status == "unsupported" and "encoder-decoder" in node.reason


# --- precompiled EP blobs ----------------------------------------------------------------------------


def test_ep_context_is_an_opaque_blob():
    for op_type, attrs in (("EPContext", {"ep_cache_context": "ctx.bin", "embed_mode": 0}), ("Snpe", {"DLC": "blob"})):
        node = _node(_model(op_type, [("x", "float32", [1, 8])], [("y", "float32", [1, 4])], attrs))
        assert node.status == "unsupported"
        assert "precompiled EP blob" in node.reason and "not in the graph" in node.reason
    symbolic = _model(
        "EPContext", [("x", "float32", ["batch", 8])], [("y", "float32", ["batch", 4])], {"embed_mode": 0}
    )
    cause = analyze(
        symbolic, sizing=Sizing(dims={"batch": 2})
    ).model.shape_root_cause  # re-bound: the declaration is cleared
    assert cause.op_type == "EPContext" and "output shapes are in the blob" in cause.reason
