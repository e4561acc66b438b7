"""Output shapes for the contrib ops of rules/contrib_quantized.py: the cuBLASLt-ordered int8 ops,
MatMulFpQ4, DecoderAttention, AttnLSTM, the generation helpers and the generation loops. Each
follows the op's schema in onnxruntime (ContribOperators.md); the ops with a CPU kernel are checked
against what it returns (tests/test_contrib_quantized.py). A dim sized by a value (max_length, a
DecoderAttention flag, a DTW path's length) comes from that value when it is a constant, and is
otherwise left untyped, never guessed. EPContext and Snpe outputs are what the graph declares for
them, which no rule can compute: where it declares none (or its inputs were re-bound), the rule
says so."""

from __future__ import annotations

import onnx
from onnx import TensorProto

from onnx_roofline.model.op_node import KnownNode
from onnx_roofline.model.status import DATA_DEPENDENT, Uncostable
from onnx_roofline.model.tensors import dtype_name
from onnx_roofline.shapes.rules.arithmetic import same
from onnx_roofline.shapes.rules.registry import DataDependent, Output, shape_function

shape_function("QOrderedGelu", "QOrderedLayerNormalization", "QOrderedLongformerAttention")(same(0))
shape_function("NGramRepeatBlock")(same(1))


@shape_function("QuantizeWithOrder")
def quantize_with_order(node: KnownNode) -> list[Output]:
    """The input's shape, int8 (the reorder keeps the logical shape)."""
    return [(node.operand(0).shape, "int8")]


@shape_function("DequantizeWithOrder")
def dequantize_with_order(node: KnownNode) -> list[Output]:
    """The input's shape, in the float type `to` (1 float32, 10 float16)."""
    return [(node.operand(0).shape, dtype_name(node.attrs["to"]))]


@shape_function("QOrderedAttention")
def q_ordered_attention(node: KnownNode) -> list[Output]:
    """input [B, S, Din] → [B, S, Dv] int8, Dv = qkv_hidden_sizes[2], else V_weight's width."""
    sizes = node.attrs.get("qkv_hidden_sizes")
    width = sizes[2] if sizes else node.operand(7).shape[1]
    return [((*node.operand(0).shape[:2], width), "int8")]


@shape_function("MatMulFpQ4")
def matmul_fpq4(node: KnownNode) -> list[Output]:
    """A [..., K] → [..., N] in A's dtype, [K, N] the constant B_shape."""
    try:
        k, n = matmul_fpq4_sizes(node)
    except Uncostable:
        return [None]
    a = node.operand(0)
    if a.shape[-1] != k:
        raise ValueError(f"A's last dim {a.shape[-1]} is not B_shape's K = {k}")
    return [((*a.shape[:-1], n), a.dtype)]


@shape_function("DecoderAttention")
def decoder_attention(node: KnownNode) -> list[Output]:
    """output: query's [S, B, D]; new_key_cache and new_value_cache [B, N, T, D/N] when the flags
    are constants (T: the keys attended, rules/contrib_quantized.py), else untyped."""
    query = node.operand(0)
    heads = node.attrs["num_heads"]
    try:
        _, attended = decoder_attention_keys(node)
    except Uncostable:
        return [(query.shape, query.dtype), None, None]
    cache = ((query.shape[1], heads, attended, query.shape[2] // heads), query.dtype)
    return [(query.shape, query.dtype), cache, cache]


@shape_function("AttnLSTM")
def attn_lstm(node: KnownNode) -> list[Output]:
    """X [T, B, I], W [D, 4H, ·] → Y [T, D, B, H], Y_h and Y_c [D, B, H] in X's dtype; H the
    hidden_size attribute, else R's last dim."""
    x, w, r = node.operand(0), node.operand(1), node.operand(2)
    hidden = node.attrs.get("hidden_size") or r.shape[2]
    state = ((w.shape[0], x.shape[1], hidden), x.dtype)
    return [((x.shape[0], w.shape[0], x.shape[1], hidden), x.dtype), state, state]


@shape_function("BifurcationDetector")
def bifurcation_detector(node: KnownNode) -> list[Output]:
    """tokens: cur_tokens' shape without pred_tokens (nothing to merge), else cur_tokens + the
    predicted tail from the bifurcation on, a length only the run knows (untyped);
    suffix_match_idx: prev_suffix_match_idx's shape, int64."""
    current, previous = node.operand(1), node.operand(2)
    tail = DataDependent(
        "BifurcationDetector's tokens end with the predicted tokens from the bifurcation on: a length only the run knows"
    )
    tokens = (current.shape, current.dtype) if node.input(3) is None else tail
    return [tokens, (previous.shape, previous.dtype)]


@shape_function("DynamicTimeWarping")
def dynamic_time_warping(node: KnownNode) -> list[Output]:
    """A [2, x] int32 path, max(M, N) ≤ x < M + N: x is the path's length, data, except for a
    1×N or M×1 cost matrix, where x = max(M, N)."""
    m, n = node.operand(0).shape[-2:]
    if min(m, n) != 1:
        raise DataDependent(
            f"DynamicTimeWarping's path through a {m}×{n} cost matrix has a length between {max(m, n)} and {m + n - 1}: the costs' values"
        )
    return [((2, max(m, n)), "int32")]


def _max_length(node: KnownNode) -> int | None:
    return _constant_int(node, 1)


def _constant_int(node: KnownNode, index: int) -> int | None:
    """The value of a one-element constant at input `index`, else None."""
    value = node.input_value(index)
    return int(value.reshape(-1)[0]) if value is not None and value.size == 1 else None


@shape_function("GreedySearch", "Sampling", "BeamSearch", "WhisperBeamSearch", value_inputs=(1, 3, 4))
def generation(node: KnownNode) -> list[Output]:
    """input_ids [B, S], constant max_length: sequences [B, max_length] int32 (the beam searches:
    [B, num_return_sequences, max_length]); Sampling's filtered_logits [B, V]; sequences_scores
    [B, num_return_sequences] and scores [max_length − S, B, num_beams, V] in the decoder logits'
    dtype; WhisperBeamSearch's non_speech_probs [B] (its cross_qk spans the decoded length: data).
    A dim whose input is not a constant leaves its outputs untyped."""
    batch, prompt = node.operand(0).shape
    length = _max_length(node)
    decoder = node.attrs["decoder"]
    logits = dtype_name(decoder.output[0].type.tensor_type.elem_type or TensorProto.FLOAT)
    vocab = vocabulary(node, decoder)
    if not node.op_type.endswith("BeamSearch"):
        sequences: Output = ((batch, length), "int32") if length is not None else None
        return [sequences, ((batch, vocab), logits)]
    beams, returned = _constant_int(node, 3), _constant_int(node, 4)
    sequences = ((batch, returned, length), "int32") if returned is not None and length is not None else None
    scores = ((length - prompt, batch, beams, vocab), logits) if beams is not None and length is not None else None
    sequence_scores = ((batch, returned), logits) if returned is not None else None
    return [sequences, sequence_scores, scores, None, ((batch,), logits)]


@shape_function("EPContext", "Snpe")
def ep_blob(node: KnownNode) -> list[Output]:
    """Never typed: the blob's shapes are in the blob (what the graph declares for the outputs is kept
    where it has all its inputs fixed)."""
    raise DataDependent(
        f"{node.op_type}: a precompiled EP blob, whose output shapes are in the blob, not the graph: fix the graph's input shapes to keep its declared outputs"
    )


def matmul_fpq4_sizes(node: KnownNode) -> tuple[int, int]:
    """(K, N) of MatMulFpQ4's weight, from its B_shape input (a constant [K, N])."""
    shape = node.input_value(2)
    if shape is None or shape.size != 2:
        raise Uncostable(DATA_DEPENDENT, f"MatMulFpQ4: B_shape {node.operand(2).name!r} is not a constant [K, N]")
    k, n = (int(d) for d in shape.reshape(-1))
    return k, n


def decoder_attention_flags(node: KnownNode) -> tuple[bool, bool]:
    """(static_kv, cached): cross attention, and whether the caches hold K and V (use_past and
    has_layer_state); the flags are runtime inputs, so they must be constants."""
    flags = {}
    for index, name in ((8, "static_kv"), (9, "use_past"), (10, "has_layer_state")):
        value = node.input_value(index)
        if value is None or value.size != 1:
            raise Uncostable(
                DATA_DEPENDENT,
                f"DecoderAttention: {name} {node.operand(index).name!r} is runtime data; which projections run depends on it",
            )
        flags[name] = bool(value.reshape(-1)[0])
    return flags["static_kv"], flags["use_past"] and flags["has_layer_state"]


def decoder_attention_keys(node: KnownNode) -> tuple[int, int]:
    """(new, attended): the keys projected from `key` and the keys attended, T."""
    static_kv, cached = decoder_attention_flags(node)
    cache = node.input(6)
    past = cache.shape[2] if cached and cache is not None else 0
    new = 0 if static_kv and cached else node.operand(1).shape[0]
    return new, (past if static_kv else past + new) if cached else new


def vocabulary(node: KnownNode, graph: onnx.GraphProto) -> int:
    """vocab_size, else the decoder's logits output's last dim (as onnxruntime infers it)."""
    size = node.attrs.get("vocab_size", -1)
    if size is not None and size > 0:
        return size
    dims = graph.output[0].type.tensor_type.shape.dim
    if not dims or not dims[-1].HasField("dim_value"):
        raise ValueError(f"{node.op_type}: no vocab_size attribute and the decoder's logits do not declare it")
    return dims[-1].dim_value
