"""Output shapes for onnxruntime's transformer-family ops, the ones its Python symbolic shape
inference (onnxruntime/tools/symbolic_shape_infer.py) dispatches and ONNX has no schema for: the
fused normalizations (SkipLayerNormalization, SimplifiedLayerNormalization and LayerNormalization,
which onnxruntime registers in the ai.onnx domain at opset 1, ...), the GELU family and bias
fusions, the attention ops (Attention, MultiHeadAttention, GroupQueryAttention, the packed, paged
and sparse forms), rotary embeddings, position biases, padding removal, mixture-of-experts, and the
weight-only matmul fusions onnxruntime-genai's model builder writes.

Each rule follows the op's schema and inference function (onnxruntime/core/graph/contrib_ops/
bert_defs.cc, contrib_defs.cc, diffusion_defs.cc) and, where that inference leaves a dim unknown,
what onnxruntime's kernels really return (tests/test_transformer_shapes.py runs them). A dim that
depends on the values of a tensor comes from its constant value when the graph holds one (the
folded total_sequence_length, RelativePositionBias's lengths); otherwise the output is left
untyped, never guessed."""

from __future__ import annotations

from onnx_roofline.model.op_node import KnownNode
from onnx_roofline.model.tensors import dtype_name
from onnx_roofline.shapes.rules.arithmetic import gemm, matmul, merged_present, merged_qkv_width, same, text
from onnx_roofline.shapes.rules.registry import Output, Shape, shape_function

FLOAT = 1  # TensorProto.FLOAT: the default stash_type


def divide_exactly(total: int, parts: int, what: str) -> int:
    if parts <= 0 or total % parts:
        raise ValueError(f"{what}: {total} is not a multiple of {parts}")
    return total // parts


def _scalar(node: KnownNode, index: int) -> int | None:
    """The value of a one-element integer constant at input `index`, else None."""
    value = node.input_value(index)
    if value is None or value.size != 1:
        return None
    return int(value.reshape(-1)[0])


def _statistics(shape: Shape, axis: int) -> Shape:
    """The shape of a normalization's saved mean / inv_std_var: the dims before `axis`, then 1s."""
    axis %= len(shape)
    return (*shape[:axis], *(1,) * (len(shape) - axis))


def with_last_dim(shape: Shape, width: int) -> Shape:
    """`shape` with its last dim replaced by `width`."""
    return (*shape[:-1], width)


# --- normalizations ------------------------------------------------------------------------------


@shape_function("SimplifiedLayerNormalization", "LayerNormalization", domain="")
def layer_normalization(node: KnownNode) -> list[Output]:
    """onnxruntime's opset-1 forms in the ai.onnx domain (RMSNorm; LayerNorm before ONNX's opset 17):
    Y has X's shape in the scale's dtype (onnxruntime's V: float16 X with a float32 scale gives a
    float32 Y); each saved statistic (Mean, InvStdDev / inv_std_var) is X[:axis] + [1]·(rank − axis)
    in stash_type's dtype (default float32). (onnxruntime's static inference gives inv_std_var
    X[:axis] + X[axis + 1:] for axis ≠ −1; its kernel returns the shape here.)"""
    x, scale = node.operand(0), node.operand(1)
    statistics = (_statistics(x.shape, node.attrs.get("axis", -1)), dtype_name(node.attrs.get("stash_type", FLOAT)))
    return [(x.shape, scale.dtype), statistics, statistics]


@shape_function("SkipLayerNormalization", "SkipSimplifiedLayerNormalization")
def skip_layer_normalization(node: KnownNode) -> list[Output]:
    """input [..., D] (3-D, or 2-D token-major): output and input_skip_bias_sum (output 3) have its
    shape and dtype; mean and inv_std_var are [..., 1] float32."""
    x = node.operand(0)
    statistics = (with_last_dim(x.shape, 1), "float32")
    return [(x.shape, x.dtype), statistics, statistics, (x.shape, x.dtype)]


@shape_function("EmbedLayerNormalization")
def embed_layer_normalization(node: KnownNode) -> list[Output]:
    """input_ids [B, S], word_embedding [V, D] → output and embedding_sum [B, S, D] in the table's
    dtype; mask_index [B] int32."""
    ids, word = node.operand(0), node.operand(2)
    output = ((*ids.shape, word.shape[1]), word.dtype)
    return [output, ((ids.shape[0],), "int32"), output]


shape_function("GroupNorm", "BranchwiseRMSNorm", "GatedRMSNorm")(same(0))


@shape_function("SkipGroupNorm")
def skip_group_norm(node: KnownNode) -> list[Output]:
    """Y and the sum S (output 1) have X's shape and dtype (NHWC by default, or NCHW)."""
    x = node.operand(0)
    return [(x.shape, x.dtype), (x.shape, x.dtype)]


# --- activations, bias and dropout fusions -------------------------------------------------------


shape_function("Gelu", "BiasGelu", "FastGelu", "QuickGelu", "ScaledSiLU", "BiasAdd")(same(0))


@shape_function("BiasSplitGelu")
def bias_split_gelu(node: KnownNode) -> list[Output]:
    """X [N, S, D] + bias [D], split in halves along D, left·Gelu(right): [N, S, D/2]."""
    x = node.operand(0)
    return [(with_last_dim(x.shape, divide_exactly(x.shape[-1], 2, "BiasSplitGelu: hidden size")), x.dtype)]


@shape_function("SwiGLU")
def swiglu(node: KnownNode) -> list[Output]:
    """gate·sigmoid(alpha·gate)·(up + beta): the gate's shape when `up` is given, else gate holds
    both halves [..., 2I] and the output is [..., I]."""
    gate = node.operand(0)
    if node.input(1) is not None:
        return [(gate.shape, gate.dtype)]
    return [(with_last_dim(gate.shape, divide_exactly(gate.shape[-1], 2, "SwiGLU: packed gate width")), gate.dtype)]


@shape_function("BiasDropout")
def bias_dropout(node: KnownNode) -> list[Output]:
    """Dropout(data + bias) + residual: output has data's shape and dtype, mask its shape in bool."""
    data = node.operand(0)
    return [(data.shape, data.dtype), (data.shape, "bool")]


@shape_function("UnfoldTensor")
def unfold_tensor(node: KnownNode) -> list[Output]:
    """torch's Tensor.unfold: along `dim` (default −1) windows of `size` every `step` (default 1):
    that dim becomes ⌊(d − size)/step⌋ + 1 and a last dim of `size` is appended."""
    x = node.operand(0)
    dim = node.attrs.get("dim", -1) % x.rank
    size, step = node.attrs["size"], node.attrs.get("step", 1)
    if size > x.shape[dim] or step <= 0:
        raise ValueError(f"UnfoldTensor: size {size} / step {step} do not fit dim {x.shape[dim]}")
    shape = list(x.shape)
    shape[dim] = (x.shape[dim] - size) // step + 1
    return [((*shape, size), x.dtype)]


# --- matrix fusions ------------------------------------------------------------------------------


@shape_function("GemmFastGelu")
def gemm_fast_gelu(node: KnownNode) -> list[Output]:
    """FastGelu(X·W + bias): numpy matmul shapes of X and W; Y in X's dtype."""
    x, w = node.operand(0), node.operand(1)
    return [(matmul(x.shape, w.shape), x.dtype)]


@shape_function("GemmFloat8")
def gemm_float8(node: KnownNode) -> list[Output]:
    """Gemm's [M, N] from A and B (transA/transB); Y in the dtype the `dtype` attribute names
    (a TensorProto element type, default 1: float32)."""
    a, b = node.operand(0), node.operand(1)
    return [(gemm(node, a.shape, b.shape), dtype_name(node.attrs.get("dtype", FLOAT)))]


def _projection(node: KnownNode, width: int) -> Shape:
    """A [..., K] projected to [..., width]; A's last dim must be the K attribute."""
    a = node.operand(0)
    if a.shape[-1] != node.attrs["K"]:
        raise ValueError(f"{node.op_type}: A's last dim {a.shape[-1]} is not K = {node.attrs['K']}")
    return with_last_dim(a.shape, width)


@shape_function("MatMulNBitsQkv")
def matmul_nbits_qkv(node: KnownNode) -> list[Output]:
    """RMSNorm (with skip: SkipSimplifiedLayerNorm) of A [..., K], then three 4-bit projections:
    Q [..., Nq], K and V [..., Nkv]; input_skip_bias_sum (output 3) has A's shape. All in A's dtype."""
    a = node.operand(0)
    q, kv = _projection(node, node.attrs["Nq"]), _projection(node, node.attrs["Nkv"])
    return [(q, a.dtype), (kv, a.dtype), (kv, a.dtype), (a.shape, a.dtype)]


@shape_function("MatMulNBitsMlp")
def matmul_nbits_mlp(node: KnownNode) -> list[Output]:
    """activation(A·gate) · (A·up), optionally after an RMSNorm of A (+ skip): Y [..., N] in A's
    dtype; input_skip_bias_sum (output 1, only with skip) has A's shape."""
    a = node.operand(0)
    if len(node.proto.output) > 1 and node.proto.output[1] and node.input(1) is None:
        raise ValueError("MatMulNBitsMlp: input_skip_bias_sum needs the skip input")
    return [(_projection(node, node.attrs["N"]), a.dtype), (a.shape, a.dtype)]


shape_function("MoE", "QMoE")(same(0))


# --- attention -----------------------------------------------------------------------------------


@shape_function("Attention")
def attention(node: KnownNode) -> list[Output]:
    """input [B, S, Din] → output [B, S, Dv] in its dtype, Dv = qkv_hidden_sizes[2], else a third of
    the bias (of the weights' width without one); present [2, B, N, P + S, H] (past at input 4; the
    past's shape under past_present_share_buffer; P = 0 without past)."""
    x, weights, bias = node.operand(0), node.operand(1), node.input(2)
    hidden = merged_qkv_width(node, bias.shape[0] if bias is not None else weights.shape[1])
    return [((*x.shape[:2], hidden), x.dtype), merged_present(node, 4, hidden, x.dtype)]


def _kv_length(key, q_len: int) -> int:
    """New keys: key [B, L, D] or packed KV [B, L, N, 2, H]: L; BNSH [B, N, L, H]: L; none: S."""
    if key is None:
        return q_len
    return key.shape[2] if key.rank == 4 else key.shape[1]


@shape_function("MultiHeadAttention")
def multi_head_attention(node: KnownNode) -> list[Output]:
    """query [B, S, D] (or packed QKV [B, S, N, 3, H]) → output [B, S, Dv]: Dv = value's last dim
    (N·H for a BNSH value, N·H for packed QKV, D for packed KV). present_key/value [B, N, T, H]: the
    past's own shape when the buffer is shared (past_sequence_length given), else T = P + L (P = 0
    without past; a BNSH cross-attention key is its own present). qk (output 3) [B, N, S, T] in the
    query's dtype; with a shared buffer T = past_sequence_length + L when that is a constant, else
    the buffer length."""
    query, key, value = node.operand(0), node.input(1), node.input(2)
    heads = node.attrs["num_heads"]
    batch, q_len = query.shape[:2]
    if query.rank == 5:
        qk_head = query.shape[4]
        width = query.shape[2] * qk_head
    else:
        qk_head = divide_exactly(query.shape[2], heads, "MultiHeadAttention: query hidden size / num_heads")
        width = (
            query.shape[2] if value is None else value.shape[2] if value.rank == 3 else value.shape[1] * value.shape[3]
        )
    v_head = divide_exactly(width, heads, "MultiHeadAttention: output hidden size / num_heads")
    kv_len, past_key = _kv_length(key, q_len), node.input(6)
    if past_key is not None and node.input(8) is not None:
        past_length = _scalar(node, 8)
        total = past_key.shape[2] if past_length is None else min(past_length + kv_len, past_key.shape[2])
        presents = [(past.shape, past.dtype) for past in (past_key, node.operand(7))]
    else:
        total = kv_len + (past_key.shape[2] if past_key is not None else 0)
        presents = [((batch, heads, total, head), query.dtype) for head in (qk_head, v_head)]
    return [((batch, q_len, width), query.dtype), *presents, ((batch, heads, q_len, total), query.dtype)]


@shape_function("DecoderMaskedMultiHeadAttention")
def decoder_masked_multi_head_attention(node: KnownNode) -> list[Output]:
    """One decoding step, query [B, 1, D]: output [B, 1, Dv], Dv = value's last dim (N·H for a BNSH
    cross-attention value; a third of the query for packed QKV [B, 1, 3D], which needs D = Dv).
    present_key/value (with past_key at input 5): the past's shape under past_present_share_buffer,
    else [B, N, P + 1, H]. qk (output 3) [B, N, 1, T] in the query's dtype: T = past_sequence_length
    + 1 when shared and constant, else the present length (cross attention: the key's length)."""
    query, key, value = node.operand(0), node.input(1), node.input(2)
    heads = node.attrs["num_heads"]
    batch, q_len, q_width = query.shape
    if value is None:
        width = divide_exactly(q_width, 3, "DecoderMaskedMultiHeadAttention: packed QKV width")
    else:
        width = value.shape[2] if value.rank == 3 else value.shape[1] * value.shape[3]
    output = ((batch, q_len, width), query.dtype)
    past_key = node.input(5)
    if past_key is None:
        total = key.shape[2] if key is not None and key.rank == 4 else q_len
        return [output, None, None, ((batch, heads, q_len, total), query.dtype)]
    past_value = node.operand(6)  # given with past_key
    if node.attrs.get("past_present_share_buffer", 0):
        presents = [(past_key.shape, past_key.dtype), (past_value.shape, past_value.dtype)]
        past_length = _scalar(node, 7)
        total = past_key.shape[2] if past_length is None else min(past_length + q_len, past_key.shape[2])
    else:
        total = past_key.shape[2] + q_len
        presents = [((*past.shape[:2], total, past.shape[3]), past.dtype) for past in (past_key, past_value)]
    return [output, *presents, ((batch, heads, q_len, total), query.dtype)]


def _grouped_width(node: KnownNode) -> tuple[int, int]:
    """(output width H·dh, head size dh) of GQA-style ops: query [B, S, H·dh], or packed QKV
    [B, S, (H + 2·Hkv)·dh] when key and value are absent."""
    query = node.operand(0)
    heads, kv_heads = node.attrs["num_heads"], node.attrs["kv_num_heads"]
    packed = node.input(1) is None and node.input(2) is None
    head = divide_exactly(
        query.shape[-1], heads + 2 * kv_heads if packed else heads, f"{node.op_type}: query width / heads"
    )
    return heads * head, head


@shape_function("GroupQueryAttention")
def group_query_attention(node: KnownNode) -> list[Output]:
    """query [B, S, H·dh] (or packed QKV) → output [B, S, H·dh] in its dtype. present_key/value with
    past [B, Hkv, P, dh]: [B, Hkv, max(P, T), dh] in the past's dtype, T = total_sequence_length
    (input 6) when the graph holds it as a constant, else P + L (a growing cache: onnxruntime returns
    [1, 8, 1024, 128] for past [1, 8, 1023, 128] and one new token, its static inference leaves the
    dim unknown); the past's own shape under sliding_window_cache. Without past: [B, Hkv, T or L, dh]
    in the query's dtype. output_qk (output 3) [B, H, S, T] in the query's dtype."""
    query, value, past = node.operand(0), node.input(2), node.input(3)
    batch, q_len = query.shape[:2]
    width, head = _grouped_width(node)
    kv_len = value.shape[1] if value is not None else q_len
    total = _scalar(node, 6) or None
    if past is None:
        length = total or kv_len
        presents: list[Output] = [((batch, node.attrs["kv_num_heads"], length, head), query.dtype)] * 2
    else:
        total = total or past.shape[2] + kv_len
        length = past.shape[2] if node.attrs.get("sliding_window_cache", 0) else max(past.shape[2], total)
        presents = [((*cache.shape[:2], length, cache.shape[3]), cache.dtype) for cache in (past, node.operand(4))]
    qk = ((batch, node.attrs["num_heads"], q_len, total or kv_len), query.dtype)
    return [((batch, q_len, width), query.dtype), *presents, qk]


@shape_function("SparseAttention")
def sparse_attention(node: KnownNode) -> list[Output]:
    """GroupQueryAttention's output [B, S, H·dh] (query or packed QKV); present_key/value share the
    past buffers [B, Hkv, max length, dh]: the past's shapes and dtypes."""
    query, past_key, past_value = node.operand(0), node.operand(3), node.operand(4)
    width, _ = _grouped_width(node)
    return [
        ((*query.shape[:2], width), query.dtype),
        (past_key.shape, past_key.dtype),
        (past_value.shape, past_value.dtype),
    ]


@shape_function("PagedAttention")
def paged_attention(node: KnownNode) -> list[Output]:
    """query [tokens, H·dh] (or packed QKV) → output [tokens, H·dh]; kv_cache_layout LATENT with
    v_head_size: [tokens, H·v_head_size]. key_cache_out / value_cache_out alias the block caches:
    their shapes and dtypes."""
    query = node.operand(0)
    tokens = query.shape[0]
    if text(node.attrs.get("kv_cache_layout", "SEPARATE")) == "LATENT":
        v_head = node.attrs.get("v_head_size", 0)
        output = query.shape if not v_head else (tokens, node.attrs["num_heads"] * v_head)
    elif node.input(2) is not None:
        output = query.shape
    else:
        output = (tokens, _grouped_width(node)[0])
    caches = [node.input(3), node.input(4)]
    return [(output, query.dtype), *[(c.shape, c.dtype) if c is not None else None for c in caches]]


@shape_function("PackedAttention")
def packed_attention(node: KnownNode) -> list[Output]:
    """input [tokens, Din] → output [tokens, Dv] in its dtype: Dv = qkv_hidden_sizes[2], else a third
    of the bias."""
    x, bias = node.operand(0), node.operand(2)
    return [((x.shape[0], merged_qkv_width(node, bias.shape[0])), x.dtype)]


@shape_function("PackedMultiHeadAttention")
def packed_multi_head_attention(node: KnownNode) -> list[Output]:
    """query [tokens, D] with value [tokens, Dv] → [tokens, Dv]; packed QKV [tokens, N, 3, H] →
    [tokens, N·H]. In the query's dtype."""
    query, value = node.operand(0), node.input(2)
    if query.rank == 4:
        return [((query.shape[0], query.shape[1] * query.shape[3]), query.dtype)]
    if value is None:
        raise ValueError("PackedMultiHeadAttention: an unpacked query needs a value")
    return [((query.shape[0], value.shape[1]), query.dtype)]


shape_function("LongformerAttention", "RotaryEmbedding", "MRotaryEmbedding")(same(0))


@shape_function("GemmaRotaryEmbedding")
def gemma_rotary_embedding(node: KnownNode) -> list[Output]:
    """q·cos + q_rot·sin and k·cos + k_rot·sin: both outputs have q's shape [B, N, S, dh] and dtype."""
    q = node.operand(1)
    return [(q.shape, q.dtype), (q.shape, q.dtype)]


@shape_function("RelativePositionBias")
def relative_position_bias(node: KnownNode) -> list[Output]:
    """T5's bucketed bias: bias_table [buckets, N] → [1, N, query_length, key_length] in the table's
    dtype, the lengths being the values of inputs 1 and 2 (typed only when they are constants)."""
    table = node.operand(0)
    q_len, k_len = _scalar(node, 1), _scalar(node, 2)
    if q_len is None or k_len is None:
        raise ValueError("RelativePositionBias: query_length and key_length are not constants")
    return [((1, table.shape[1], q_len, k_len), table.dtype)]


@shape_function("GatedRelativePositionBias")
def gated_relative_position_bias(node: KnownNode) -> list[Output]:
    """[B, N, S, S] in query_layer's dtype: B and S from token_offset [B, S] (input 6) when the
    padding is removed, else from query_layer [B, S, N·H]."""
    query, offsets = node.operand(0), node.input(6)
    if offsets is None and query.rank != 3:
        raise ValueError("GatedRelativePositionBias: a token-major query_layer needs token_offset")
    batch, seq = (offsets if offsets is not None else query).shape[:2]
    return [((batch, node.attrs["num_heads"], seq, seq), query.dtype)]


@shape_function("RemovePadding")
def remove_padding(node: KnownNode) -> list[Output]:
    """input [B, S, D], sequence_token_count [B] → output [total tokens, D] (the sum of the counts:
    typed only when they are a constant), token_offset [B, S], cumulated_seq_len [B + 1],
    max_seq_len [1], the last three in the counts' int32."""
    x, counts = node.operand(0), node.operand(1)
    batch, seq, hidden = x.shape
    values = node.input_value(1)
    output = None if values is None else ((int(values.sum()), hidden), x.dtype)
    return [output, ((batch, seq), counts.dtype), ((batch + 1,), counts.dtype), ((1,), counts.dtype)]


@shape_function("RestorePadding")
def restore_padding(node: KnownNode) -> list[Output]:
    """input [tokens, D], token_offset [B, S] → [B, S, D] in the input's dtype."""
    x, offsets = node.operand(0), node.operand(1)
    return [((*offsets.shape[:2], x.shape[1]), x.dtype)]


# --- hyper-connections -----------------------------------------------------------------------------


def _branch_width(node: KnownNode, streams: Shape) -> Shape:
    """The feature shape [..., H] of C streams: grouped [..., C, H], or flattened [..., C·H] when
    num_branches = C is set."""
    branches = node.attrs.get("num_branches", 0)
    if branches:
        return with_last_dim(
            streams, divide_exactly(streams[-1], branches, f"{node.op_type}: stream width / num_branches")
        )
    if len(streams) < 2:
        raise ValueError(f"{node.op_type}: grouped streams need rank ≥ 2")
    return (*streams[:-2], streams[-1])


@shape_function("HyperConnectionPreMix")
def hyper_connection_pre_mix(node: KnownNode) -> list[Output]:
    """Σ_c pre_mix·streams over the C streams: [..., H] in the streams' dtype."""
    x = node.operand(0)
    return [(_branch_width(node, x.shape), x.dtype)]


shape_function("HyperConnectionPostMix")(same(0))


@shape_function("HyperConnectionLowRankMix")
def hyper_connection_low_rank_mix(node: KnownNode) -> list[Output]:
    """Flattened streams [..., C·H] (C = num_branches): pre_output [..., H], post_gate [..., C],
    streams_out the streams' shape; all in their dtype."""
    x = node.operand(0)
    branches = node.attrs["num_branches"]
    return [(_branch_width(node, x.shape), x.dtype), (with_last_dim(x.shape, branches), x.dtype), (x.shape, x.dtype)]


# --- onnxruntime's own QuantizeLinear / DequantizeLinear ------------------------------------------


@shape_function("QuantizeLinear")
def quantize_linear(node: KnownNode) -> list[Output]:
    """x's shape, in y_zero_point's dtype (uint8 without one)."""
    x, zero_point = node.operand(0), node.input(2)
    return [(x.shape, zero_point.dtype if zero_point is not None else "uint8")]


@shape_function("DequantizeLinear")
def dequantize_linear(node: KnownNode) -> list[Output]:
    """x's shape, in x_scale's float dtype."""
    return [(node.operand(0).shape, node.operand(1).dtype)]
