"""Output shapes for the com.microsoft ops of recent LLM architectures (onnxruntime 1.32): the
stateful causal convolutions and linear-attention recurrences of LFM2, Qwen3.5/Qwen3-Next and
Mamba-like models (CausalConvWithState, VarlenCausalConvWithState, GatedDeltaNet,
LinearAttention, LinearAttentionGate, Mamba2Verify, the replay ops), the MoE router and packed
experts (MoEGroupRouter, MoEPacked, RouterGateUpProj), block-quantized and packed weights
(MatMulBlockQuantizedFp4Weight / Fp8Weight, MatMulNBitsQLoRA, MatMulPacked, GatherPacked),
Engram's n-gram hashing and gate, RMSNormRotary, GatedAdd, the sparse attention ops and their
indexers, and SpeculativePrefixCommit. Each follows the op's schema text in onnxruntime
(`get_all_operator_schema()`); where a CPU kernel exists, tests/test_contrib_llm.py runs it."""

from __future__ import annotations

import math

from onnx_roofline.model.op_node import KnownNode
from onnx_roofline.model.tensors import dtype_name
from onnx_roofline.shapes.rules.arithmetic import same, text
from onnx_roofline.shapes.rules.registry import Output, Shape, shape_function
from onnx_roofline.shapes.rules.transformer import divide_exactly, with_last_dim

FLOAT, FLOAT16, BFLOAT16 = "float32", "float16", "bfloat16"


def _windowed(node: KnownNode, shape: Shape) -> Shape:
    """A carry state with state_window = W > 0 gains a leading axis of W slots."""
    window = node.attrs.get("state_window", 0)
    return (window, *shape) if window else shape


# --- stateful causal convolutions ----------------------------------------------------------------


def conv_state_length(node: KnownNode, weight: Shape) -> int:
    """(k − 1)·dilation positions of carry history along the causal axis (state_length overrides)."""
    return node.attrs.get("state_length", 0) or (weight[-1] - 1) * node.attrs.get("dilation", 1)


@shape_function("CausalConvWithState")
def causal_conv_with_state(node: KnownNode) -> list[Output]:
    """output: the input's shape (channels-first [B, C, spatial…], or channels_last [B, L, d…]);
    with input_channels > 0 (CUDA channel slice) its last dim is input_channels. present_state:
    past_state's shape when given, else [B, C, (k − 1)·dilation] (channels_last: [B, L, d…]; ndim
    > 1: the input's with its causal dim replaced by the state length), with a leading W under
    state_window = W. state_update: [B, state_update_capacity, C]."""
    x, weight, past = node.operand(0), node.operand(1), node.input(3)
    output = (
        x.shape if not node.attrs.get("input_channels", 0) else with_last_dim(x.shape, node.attrs["input_channels"])
    )
    length = conv_state_length(node, weight.shape)
    if past is not None:
        state = past.shape
    elif node.attrs.get("channels_last", 0):
        state = _windowed(node, (x.shape[0], length, *x.shape[2:]))
    else:
        state = _windowed(node, with_last_dim(x.shape, length))
    capacity = node.attrs.get("state_update_capacity", 0)
    update = ((x.shape[0], capacity, weight.shape[0]), x.dtype) if capacity else None
    return [(output, x.dtype), (state, x.dtype), update]


@shape_function("VarlenCausalConvWithState")
def varlen_causal_conv_with_state(node: KnownNode) -> list[Output]:
    """Packed tokens [N, C]: output [N, C]; final_state initial_state's [B, C, (k − 1)·dilation];
    state_update [B, state_update_capacity, C]."""
    x, state = node.operand(0), node.operand(4)
    capacity = node.attrs.get("state_update_capacity", 0)
    update = ((state.shape[0], capacity, x.shape[-1]), x.dtype) if capacity else None
    return [(x.shape, x.dtype), (state.shape, state.dtype), update]


# --- linear-attention recurrences ----------------------------------------------------------------


def delta_net_heads(node: KnownNode) -> tuple[int, int, int, int]:
    """GatedDeltaNet's (Hq, Hv, dk, dv): from query [.., Hq, dk] and value [.., Hv, dv], or, for
    packed QKV [.., 2·Hq·dk + Hv·dv], from initial_state [B, Hv, dv, dk]."""
    query, value, state = node.operand(0), node.input(2), node.input(6)
    if value is not None:
        return query.shape[-2], value.shape[-2], query.shape[-1], value.shape[-1]
    if state is None:
        raise ValueError("GatedDeltaNet: packed QKV needs initial_state for the head counts")
    _, heads_v, dv, dk = state.shape
    return (
        divide_exactly(query.shape[-1] - heads_v * dv, 2 * dk, "GatedDeltaNet: packed QK width / 2·dk"),
        heads_v,
        dk,
        dv,
    )


@shape_function("GatedDeltaNet")
def gated_delta_net(node: KnownNode) -> list[Output]:
    """output [tokens…, max(Hq, Hv), dv] in the query's dtype (tokens… = [N] or [B, S]; packed QKV
    [N, width] gives [N, Hv, dv]); final_state [B, Hv, dv, dk] float32 (initial_state's shape; B =
    len(cu_seqlens) − 1 without it); state_update [B, C·(decay_width + Hq·dk + Hv·dv)] float32,
    decay_width Hv (scalar decay) or Hv·dk (per-key-dimension decay)."""
    query, decay, state = node.operand(0), node.input(4), node.input(6)
    heads_q, heads_v, dk, dv = delta_net_heads(node)
    tokens = query.shape[:-2] if node.input(2) is not None else query.shape[:-1]
    batch = state.shape[0] if state is not None else node.operand(3).shape[0] - 1
    final = (batch, heads_v, dv, dk)
    capacity = node.attrs.get("state_update_capacity", 0)
    update = None
    if capacity:
        decay_width = heads_v * dk if decay is not None and decay.rank == len(tokens) + 2 else heads_v
        update = ((batch, capacity * (decay_width + heads_q * dk + heads_v * dv)), FLOAT)
    return [((*tokens, max(heads_q, heads_v), dv), query.dtype), (final, FLOAT), update]


@shape_function("LinearAttention")
def linear_attention(node: KnownNode) -> list[Output]:
    """query [B, T, Hq·dk], value [B, T, Hkv·dv] → output [B, T, max(Hq, Hkv)·dv] in the query's
    dtype; present_state past_state's shape and dtype, else [B, Hkv, dk, dv] ([W, B, Hkv, dk, dv]
    under state_window = W) in the query's dtype."""
    query, value, past = node.operand(0), node.operand(2), node.input(3)
    heads_q, heads_kv = node.attrs["q_num_heads"], node.attrs["kv_num_heads"]
    dk = divide_exactly(query.shape[-1], heads_q, "LinearAttention: query width / q_num_heads")
    dv = divide_exactly(value.shape[-1], heads_kv, "LinearAttention: value width / kv_num_heads")
    output = ((*query.shape[:2], max(heads_q, heads_kv) * dv), query.dtype)
    if past is not None:
        return [output, (past.shape, past.dtype)]
    return [output, (_windowed(node, (query.shape[0], heads_kv, dk, dv)), query.dtype)]


@shape_function("LinearAttentionGate")
def linear_attention_gate(node: KnownNode) -> list[Output]:
    """decay has a's shape [B, T, H] and dtype; beta b's (when given)."""
    a, b = node.operand(0), node.input(3)
    return [(a.shape, a.dtype), (b.shape, b.dtype) if b is not None else None]


@shape_function("Mamba2Verify")
def mamba2_verify(node: KnownNode) -> list[Output]:
    """projection [R, width] → Y [R, di] (di = heads·head_dim) in its bfloat16; conv_snapshots and
    ssm_snapshots: conv_state's and ssm_state's shapes and dtypes; xbc [R, channels] (conv_state's
    channels); readout [R, di] float32."""
    projection, conv_state, ssm_state = node.operand(0), node.operand(1), node.operand(2)
    rows, inner = projection.shape[0], node.attrs["heads"] * node.attrs.get("head_dim", 64)
    return [
        ((rows, inner), projection.dtype),
        (conv_state.shape, conv_state.dtype),
        (ssm_state.shape, ssm_state.dtype),
        ((rows, conv_state.shape[1]), projection.dtype),
        ((rows, inner), FLOAT),
    ]


# ConvStateReplay, GatedDeltaNetStateReplay: destination_out is destination_backing's allocation.
shape_function("ConvStateReplay", "GatedDeltaNetStateReplay")(same(2))


# --- mixture of experts ---------------------------------------------------------------------------


@shape_function("MoEGroupRouter")
def moe_group_router(node: KnownNode) -> list[Output]:
    """router_probs [T, E] in the logits' dtype (T = numel(logits)/E; with projection_weight,
    logits are [T, width]); selection_scores and router_weights [T, E] float32. E = len(expert_bias)."""
    logits, bias, projection = node.operand(0), node.operand(1), node.input(2)
    experts = bias.shape[0]
    tokens = logits.shape[0] if projection is not None else logits.numel // experts
    return [((tokens, experts), logits.dtype), ((tokens, experts), FLOAT), ((tokens, experts), FLOAT)]


shape_function("MoEPacked")(same(0))


@shape_function("RouterGateUpProj")
def router_gate_up_proj(node: KnownNode) -> list[Output]:
    """X [.., K], W [K, R + 2·I] → router [.., R] (R = router_size) and activated [.., I]."""
    x, weight = node.operand(0), node.operand(1)
    router = node.attrs["router_size"]
    inter = divide_exactly(weight.shape[1] - router, 2, "RouterGateUpProj: W width − router_size")
    return [(with_last_dim(x.shape, router), x.dtype), (with_last_dim(x.shape, inter), x.dtype)]


# --- block-quantized and packed weights ----------------------------------------------------------


@shape_function("MatMulBlockQuantizedFp8Weight")
def matmul_fp8_weight(node: KnownNode) -> list[Output]:
    """A [..., K] × B [N, K]ᵀ → [..., N] in A's dtype."""
    a, b = node.operand(0), node.operand(1)
    if a.shape[-1] != b.shape[1]:
        raise ValueError(f"{node.op_type}: A's K {a.shape[-1]} is not B's {b.shape[1]}")
    return [(with_last_dim(a.shape, b.shape[0]), a.dtype)]


@shape_function("MatMulBlockQuantizedFp4Weight")
def matmul_fp4_weight(node: KnownNode) -> list[Output]:
    """A [..., K] × B (uint8 [N, K/2], two E2M1 values a byte) → [..., N] in A's dtype."""
    a, b = node.operand(0), node.operand(1)
    if a.shape[-1] != 2 * b.shape[1]:
        raise ValueError(f"{node.op_type}: A's K {a.shape[-1]} is not 2·{b.shape[1]}")
    return [(with_last_dim(a.shape, b.shape[0]), a.dtype)]


@shape_function("MatMulNBitsQLoRA", "MatMulPacked")
def matmul_n_attribute(node: KnownNode) -> list[Output]:
    """A [..., K] → [..., N] in A's dtype (K and N are attributes)."""
    a = node.operand(0)
    if a.shape[-1] != node.attrs["K"]:
        raise ValueError(f"{node.op_type}: A's last dim {a.shape[-1]} is not K = {node.attrs['K']}")
    return [(with_last_dim(a.shape, node.attrs["N"]), a.dtype)]


@shape_function("GatherPacked")
def gather_packed(node: KnownNode) -> list[Output]:
    """indices [...] → [..., K] in output_dtype (a TensorProto type, default 16: bfloat16)."""
    indices = node.operand(1)
    return [((*indices.shape, node.attrs["K"]), dtype_name(node.attrs.get("output_dtype", 16)))]


# --- normalization, gating, Engram ---------------------------------------------------------------


def rms_rotary_width(node: KnownNode) -> int:
    """RMSNormRotary's normalized width: input_width, else the last dim from input_start on."""
    return node.attrs.get("input_width", 0) or node.operand(0).shape[-1] - node.attrs.get("input_start", 0)


@shape_function("RMSNormRotary")
def rms_norm_rotary(node: KnownNode) -> list[Output]:
    """X [B, S, heads, stride] → Y [B, S, heads·width] ([1, B·S, heads·width] with flatten_batch) in
    float16 (output_fp16) or bfloat16; normalized_fp32 [B, S, heads, width] float32."""
    batch, seq, heads, _ = node.operand(0).shape
    width = rms_rotary_width(node)
    rows = (1, batch * seq) if node.attrs.get("flatten_batch", 0) else (batch, seq)
    dtype = FLOAT16 if node.attrs.get("output_fp16", 0) else BFLOAT16
    return [((*rows, heads * width), dtype), ((batch, seq, heads, width), FLOAT)]


@shape_function("EngramGate")
def engram_gate(node: KnownNode) -> list[Output]:
    """output and gated_value_normed: the key's [B, S, hc, H] in its dtype."""
    key = node.operand(0)
    return [(key.shape, key.dtype), (key.shape, key.dtype)]


shape_function("GatedAdd")(same(0))


def ngram_heads(node: KnownNode) -> tuple[int, int]:
    """((max_ngram_size − 1)·n_head_per_ngram output heads, max_ngram_size − 1 history ids)."""
    history = node.attrs["max_ngram_size"] - 1
    return history * node.attrs["n_head_per_ngram"], history


@shape_function("NGramHashMapping")
def ngram_hash_mapping(node: KnownNode) -> list[Output]:
    """input_ids [B, S] → hash_ids [B, S, (n − 1)·heads], present_ids [B, n − 1], in the ids' dtype."""
    ids = node.operand(0)
    heads, history = ngram_heads(node)
    return [((*ids.shape, heads), ids.dtype), ((ids.shape[0], history), ids.dtype)]


@shape_function("VarlenNGramHashMapping")
def varlen_ngram_hash_mapping(node: KnownNode) -> list[Output]:
    """input_ids [N], cumulative_sequence_length [B + 1] → hash_ids [N, (n − 1)·heads] and
    present_ids [B, n − 1] in the ids' dtype; present_segment_ids [B, n − 1] int32; state_update
    [B, state_update_capacity, n − 1] in the ids' dtype."""
    ids, lengths = node.operand(0), node.operand(3)
    heads, history = ngram_heads(node)
    batch = lengths.shape[0] - 1
    capacity = node.attrs.get("state_update_capacity", 0)
    return [
        ((ids.shape[0], heads), ids.dtype),
        ((batch, history), ids.dtype),
        ((batch, history), lengths.dtype),
        ((batch, capacity, history), ids.dtype) if capacity else None,
    ]


# --- sparse attention and its indexers -----------------------------------------------------------


def sparse_head_size(node: KnownNode) -> int:
    """Query [.., H·dh], or packed QKV [.., (H + 2·Hkv)·dh] when key and value are absent."""
    query = node.operand(0)
    heads, kv_heads = node.attrs["num_heads"], node.attrs["kv_num_heads"]
    packed = node.input(1) is None and node.input(2) is None
    return divide_exactly(
        query.shape[-1], heads + 2 * kv_heads if packed else heads, f"{node.op_type}: query width / heads"
    )


@shape_function("SparsePagedAttention")
def sparse_paged_attention(node: KnownNode) -> list[Output]:
    """query [N, ..] → output [N, H·dh] in its dtype; key_cache_out / value_cache_out alias the
    paged caches (their shapes and dtypes)."""
    query = node.operand(0)
    caches = [node.operand(3), node.operand(4)]
    output = ((query.shape[0], node.attrs["num_heads"] * sparse_head_size(node)), query.dtype)
    return [output, *[(c.shape, c.dtype) for c in caches]]


@shape_function("DynamicSparseAttention")
def dynamic_sparse_attention(node: KnownNode) -> list[Output]:
    """query [B, S, ..] → output [B, S, H·dh] in its dtype (bfloat16 with output_bf16); present
    K/V: the past caches' shapes and dtypes (BNSH, a contiguous buffer appended in place);
    validation_status [B·S] int32."""
    query, past_key, past_value = node.operand(0), node.input(3), node.input(4)
    batch, seq = query.shape[:2]
    dtype = BFLOAT16 if node.attrs.get("output_bf16", 0) else query.dtype
    presents = [(c.shape, c.dtype) if c is not None else None for c in (past_key, past_value)]
    return [
        ((batch, seq, node.attrs["num_heads"] * sparse_head_size(node)), dtype),
        *presents,
        ((batch * seq,), "int32"),
    ]


def indexer_capacity(node: KnownNode) -> int:
    """Selected entries per query: token_budget + compress_ratio − 1 ('qsa') or index_topk ('csa')."""
    if text(node.attrs["policy_mode"]) == "qsa":
        return node.attrs["token_budget"] + node.attrs["compress_ratio"] - 1
    return node.attrs["index_topk"]


@shape_function("SparseAttentionIndexer")
def sparse_attention_indexer(node: KnownNode) -> list[Output]:
    """query [B, S, ..] → selected_indices [B, S, capacity] int32 (capacity as for the packed
    indexer). present_key: past_key's shape with past_sequence_length (a shared max-capacity
    buffer); else 'qsa' appends the raw keys, [B, P + S, dh], and 'csa' grows by a window count
    this rule does not derive (untyped). present_proj_buffer: untyped."""
    query, past_key, shared = node.operand(0), node.operand(7), node.input(12) is not None
    batch, seq = query.shape[:2]
    if shared:
        present = (past_key.shape, past_key.dtype)
    elif text(node.attrs["policy_mode"]) == "qsa":
        present = ((batch, past_key.shape[1] + seq, past_key.shape[2]), past_key.dtype)
    else:
        present = None
    return [((batch, seq, indexer_capacity(node)), "int32"), present, None]


@shape_function("PackedSparseAttentionIndexer")
def packed_sparse_attention_indexer(node: KnownNode) -> list[Output]:
    """query [N, ..] → selected_indices [N, capacity] and selected_counts [N] int32; the fixed-shape
    state outputs (key state, kv buffer, gate buffer, state lengths) their inputs' shapes and
    dtypes; state_update [B, state_update_capacity, dh]; indexshare_status [N] and state_status
    [B] int32. capacity: token_budget + compress_ratio − 1 ('qsa') or index_topk ('csa')."""
    query, key_state, buffer, gate, lengths = (
        node.operand(0),
        node.operand(12),
        node.operand(13),
        node.input(14),
        node.operand(15),
    )
    tokens, batch, head = query.shape[0], key_state.shape[0], key_state.shape[-1]
    capacity = node.attrs.get("state_update_capacity", 0)
    return [
        ((tokens, indexer_capacity(node)), "int32"),
        ((tokens,), "int32"),
        (key_state.shape, key_state.dtype),
        (buffer.shape, buffer.dtype),
        (gate.shape, gate.dtype) if gate is not None else None,
        (lengths.shape, lengths.dtype),
        ((batch, capacity, head), query.dtype) if capacity else None,
        ((tokens,), "int32"),
        ((batch,), "int32"),
    ]


@shape_function("PackedSparseAttentionIndexerMerge")
def packed_sparse_attention_indexer_merge(node: KnownNode) -> list[Output]:
    """base_row_indices [N] → selected_indices [N, max_output_entries], selected_counts and status
    [N], int32."""
    rows = node.operand(2).shape[0]
    return [((rows, node.attrs["max_output_entries"]), "int32"), ((rows,), "int32"), ((rows,), "int32")]


@shape_function("SpeculativePrefixCommit")
def speculative_prefix_commit(node: KnownNode) -> list[Output]:
    """head_c [B] int32 (B = numel(ctl)/16: 16 control words per request); updated_ctl and
    updated_ctx_commit: ctl's and ctx_commit's shapes, int64."""
    ctl, commit = node.operand(3), node.operand(4)
    return [((math.prod(ctl.shape) // 16,), "int32"), (ctl.shape, ctl.dtype), (commit.shape, commit.dtype)]
