"""Attention: ai.onnx Attention (opset 23+) and RotaryEmbedding (23), and onnxruntime's contrib
attention family in com.microsoft — Attention, MultiHeadAttention, GroupQueryAttention,
PackedAttention, PackedMultiHeadAttention, DecoderMaskedMultiHeadAttention,
DecoderMaskedSelfAttention, QAttention, SparseAttention, PagedAttention, LongformerAttention, the
rotary embeddings (RotaryEmbedding, MRotaryEmbedding, GemmaRotaryEmbedding) and the position biases
(RelativePositionBias, GatedRelativePositionBias).

Counting, with B the batch, H the query heads, S the query length, T the keys attended (past plus
new), dh the Q/K head size, dv the V head size, E = B·H·S·T score elements and L = B·H·S softmax rows:

    Q·Kᵀ                       2·E·dh      (a multiply-add per score per head dim)
    scale                      E           (one multiply per score, as the unfused graph's Div or Mul)
    each mask source           E           (an additive mask/bias, a key padding mask, a causal select)
    softcap (when set)         2·E + E tanh
    softmax                    4·E − 2·L + E exps   (the Softmax rule's count)
    P·V                        2·E·dv

Grouped/multi-query attention changes which K/V head a query head reads, not the work: every query
head still scores all T keys. Ops that hold the QKV weights (contrib Attention, PackedAttention,
DecoderMaskedSelfAttention, QAttention) add the projection 2·tokens·Din·(Dq+Dk+Dv) plus one add per
projected element for the bias; ops that take projected Q/K/V and a bias input add one per element of
the tensors the bias applies to. Rotary embedding inside an op costs 3 FLOPs per rotated element (see
RotaryEmbedding).

Causality: `flops` is the raw count over the full S×T rectangle — what an unfused graph executes and
what the roofline uses. Where the op is causal (ai.onnx is_causal=1, contrib unidirectional=1,
GroupQueryAttention's causal=1 default) only the lower triangle is useful: `useful_flops` (in the
report per node and in the totals) counts the scores on or below the diagonal — about half of the
score and value work when S = T, all of it when S = 1 (decode).

Bytes: the default — Q, K, V (or the input and weights), masks and past K/V read once, Y, present K/V
and any qk output written once. The S×T score matrix never reaches memory: this is the fused-kernel
(FlashAttention-style) view, which is what makes long-sequence prefill attention compute-bound. One
override: a KV cache updated in place (past and present share one max-length buffer) reads only the
attended past rows and writes only the new rows, not the whole buffer twice.

Where the attended length is a runtime value (a shared buffer's past_sequence_length, GQA's
total_sequence_length) it is used when the graph holds it as a constant; otherwise T is the buffer
length, an upper bound."""

from __future__ import annotations

from onnx_roofline.costs.cost import Cost
from onnx_roofline.costs.rules.contrib import text_attr
from onnx_roofline.costs.rules.registry import MATRIX, register
from onnx_roofline.model.op_node import KnownNode
from onnx_roofline.model.tensors import KnownTensor

ROTARY_FLOPS = 3
"""Per rotated element: real = cos·x1 − sin·x2 and imag = sin·x1 + cos·x2 — each output element
is two multiplies and one add or subtract."""


def _divide(total: int, parts: int, what: str) -> int:
    if parts <= 0 or total % parts:
        raise ValueError(f"{what}: {total} is not a multiple of {parts}")
    return total // parts


def score_cost(
    batch: int,
    heads: int,
    q_len: int,
    kv_len: int,
    qk_dim: int,
    v_dim: int,
    masks: int = 0,
    softcap: bool = False,
    sink: bool = False,
    causal: bool = False,
) -> Cost:
    """Scaled dot-product attention over E = B·H·S·T scores and L = B·H·S rows (module docstring):
    2·E·dh + E (scale) + masks·E + 4·E − 2·L (softmax) + 2·E·dv FLOPs and E exps; softcap adds 2·E
    FLOPs and E tanh; an attention sink (GQA's smooth softmax or head_sink) adds one term to each
    row's sum: 2·L FLOPs (subtract, add) and L exps. `causal`: the useful FLOPs are the same count
    over the scores on or below the diagonal, bottom-right aligned as a KV cache is: query i of S
    sees the P = T − S past keys and i + 1 new ones, B·H·(S·P + S·(S+1)/2) scores in all."""
    rows = batch * heads * q_len
    flops, transcendentals = _score_flops(batch * heads * q_len * kv_len, rows, qk_dim, v_dim, masks, softcap, sink)
    if not causal:
        return Cost(flops=flops, transcendentals=transcendentals)
    past = max(kv_len - q_len, 0)
    useful_scores = batch * heads * (q_len * past + q_len * (q_len + 1) // 2)
    useful, _ = _score_flops(
        min(useful_scores, batch * heads * q_len * kv_len), rows, qk_dim, v_dim, masks, softcap, sink
    )
    return Cost(flops=flops, transcendentals=transcendentals, useful_flops=useful)


def _score_flops(
    scores: int, rows: int, qk_dim: int, v_dim: int, masks: int, softcap: bool, sink: bool
) -> tuple[int, int]:
    """(FLOPs, transcendentals) of `scores` scores in `rows` softmax rows (score_cost's count)."""
    flops = 2 * scores * qk_dim + scores * (1 + masks) + 4 * scores - 2 * rows + 2 * scores * v_dim
    transcendentals = scores
    if softcap:
        flops += 2 * scores
        transcendentals += scores
    if sink:
        flops += 2 * rows
        transcendentals += rows
    return max(flops, 0), transcendentals


def _present(node: KnownNode, *indices: int) -> int:
    """How many of the optional inputs at `indices` are present."""
    return sum(node.input(i) is not None for i in indices)


def _constant_int(node: KnownNode, index: int) -> int | None:
    """A scalar (or one-element) integer constant at input `index`, else None."""
    value = node.input_value(index)
    if value is None or value.size != 1:
        return None
    return int(value.reshape(-1)[0])


def rows_bytes(tensor: KnownTensor, axis: int, rows: int) -> int:
    """Bytes of `rows` entries along `axis` of `tensor` (sub-byte types by bits, rounded up)."""
    length = tensor.shape[axis]
    if length == 0:
        return 0
    rows = max(0, min(rows, length))
    return (tensor.numel // length * rows * tensor.bits + 7) // 8


def partial_bytes(node: KnownNode, reads: dict[str, int], writes: dict[str, int]) -> Cost:
    """Default bytes except for the tensors named in `reads`/`writes`, which move the given bytes."""
    read = sum({t.name: reads.get(t.name, t.nbytes) for t in node.present_inputs}.values())
    written = sum(writes.get(t.name, t.nbytes) for t in node.present_outputs)
    return Cost(bytes_read=read, bytes_written=written)


def _in_place_cache(
    pasts: list[KnownTensor | None], presents: list[KnownTensor | None], axis: int, read_rows: int, new_rows: int
) -> tuple[dict[str, int], dict[str, int]]:
    """Reads and writes of a KV cache updated in place (past and present one buffer): each past read
    for its `read_rows` valid rows, each present written for its `new_rows` appended rows."""
    reads = {t.name: rows_bytes(t, axis, read_rows) for t in pasts if t is not None}
    writes = {t.name: rows_bytes(t, axis, new_rows) for t in presents if t is not None}
    return reads, writes


def rotary_caches(caches: list[KnownTensor | None], selected_rows: int) -> dict[str, int]:
    """Reads of cos/sin caches [max_position, rot/2] when `selected_rows` positions are looked up
    (at most the whole cache)."""
    return {t.name: rows_bytes(t, 0, selected_rows) for t in caches if t is not None}


def plus_work(cost: Cost, flops: int = 0, transcendentals: int = 0, io: Cost | None = None) -> Cost:
    """`cost` plus extra FLOPs/transcendentals (all useful), with the bytes of `io` (None: the default)."""
    return Cost(
        flops=cost.flops + flops,
        transcendentals=cost.transcendentals + transcendentals,
        bytes_read=None if io is None else io.bytes_read,
        bytes_written=None if io is None else io.bytes_written,
        useful_flops=None if cost.useful_flops is None else cost.useful_flops + flops,
    )


def _separate_qkv_total(
    node: KnownNode,
    cost: Cost,
    dims: tuple[int, int, int, int, int],
    bias_index: int,
    past_index: int,
    shared: bool,
    total: int,
    kv_len: int,
    new: bool,
) -> Cost:
    """The tail of the ops that take Q, K, V separately (MultiHeadAttention, its decoder-masked
    form): one add per Q element for the bias at `bias_index`, and per K/V element when new keys
    come in; with a shared past/present buffer (past K, V at `past_index`, `past_index` + 1), the
    in-place cache bytes. `dims` = (B, H, S, dh, dv)."""
    batch, heads, q_len, qk_dim, v_dim = dims
    bias = 0
    if node.input(bias_index) is not None:
        bias = batch * heads * (q_len * qk_dim + (kv_len * (qk_dim + v_dim) if new else 0))
    io = None
    if shared:
        pasts = [node.input(past_index), node.input(past_index + 1)]
        reads, writes = _in_place_cache(pasts, [node.output(1), node.output(2)], 2, total - kv_len, kv_len)
        io = partial_bytes(node, reads, writes)
    return plus_work(cost, bias, io=io)


def qk_norm(rows: int, head: int) -> tuple[int, int]:
    """A per-head RMS norm with weight of `rows` rows of `head` elements: 4n + 2·rows, rows sqrts."""
    return 4 * rows * head + 2 * rows, rows


# --- ai.onnx ------------------------------------------------------------------------------------


@register("Attention", since=23, unit=MATRIX)
def attention(node: KnownNode) -> Cost:
    """Q [B, Hq, S, dh] (or 3-D [B, S, Hq·dh] with q_num_heads), K [B, Hkv, L, dh], V [B, Hkv, L, dv]
    (or 3-D with kv_num_heads), past_key [B, Hkv, P, dh]: T = P + L keys. The score cost of the
    module docstring with H = Hq (GQA/MQA: each query head scores all keys): 2·E·(dh + dv) + E (scale)
    + E per mask source (attn_mask, is_causal=1, nonpad_kv_seqlen's padding mask) + 4E − 2L
    (softmax) FLOPs, E exps; softcap ≠ 0 adds 2E FLOPs and E tanh. is_causal=1: only about half the
    rectangle is useful when S = T (flops stay the raw count). Bytes: the default — no S×T matrix in
    memory (a requested qk_matmul_output is an output and is written)."""
    q, k, v = node.operand(0), node.operand(1), node.operand(2)
    if q.rank == 4:
        batch, heads, q_len, qk_dim = q.shape
    else:
        heads = node.attrs.get("q_num_heads") or 0
        batch, q_len, hidden = q.shape
        qk_dim = _divide(hidden, heads, "Attention: Q hidden size / q_num_heads")
    if k.rank == 4:
        kv_len, v_dim = k.shape[2], v.shape[3]
    else:
        kv_len = k.shape[1]
        v_dim = _divide(v.shape[2], node.attrs.get("kv_num_heads") or 0, "Attention: V hidden size / kv_num_heads")
    past = node.input(4)
    total = kv_len + (past.shape[2] if past is not None else 0)
    masks = _present(node, 3, 6) + bool(node.attrs.get("is_causal", 0))
    softcap = bool(node.attrs.get("softcap", 0.0))
    causal = bool(node.attrs.get("is_causal", 0))
    return score_cost(batch, heads, q_len, total, qk_dim, v_dim, masks=masks, softcap=softcap, causal=causal)


@register("RotaryEmbedding", since=23)
def rotary_embedding(node: KnownNode) -> Cost:
    """X [B, H, S, dh] (or 3-D [B, S, H·dh] with num_heads), cos/sin caches whose last dim is rot/2:
    the first rot of each head's dh elements are rotated at 3 FLOPs per rotated element (real =
    cos·x1 − sin·x2, imag = sin·x1 + cos·x2: two multiplies and an add per output), the rest pass
    through: 3·numel(X)·rot/dh FLOPs. Bytes: X read and Y written; with position_ids each cache is a
    table looked up, read for the rows selected (B·S, at most the whole cache); without, the caches
    are already [B, S, rot/2] and are read whole."""
    x = node.operand(0)
    rotated = 2 * node.operand(1).shape[-1]
    if x.rank == 4:
        head = x.shape[3]
    else:
        heads = node.attrs.get("num_heads") or 0
        head = _divide(x.shape[-1], heads, "RotaryEmbedding: hidden size / num_heads") if heads else rotated
    cost = Cost(flops=ROTARY_FLOPS * x.numel * rotated // head)
    positions = node.input(3)
    if positions is None:
        return cost
    return plus_work(
        cost, io=partial_bytes(node, rotary_caches([node.operand(1), node.operand(2)], positions.numel), {})
    )


# --- com.microsoft --------------------------------------------------------------------------------


def _qkv_sizes(node: KnownNode, total: int) -> tuple[int, int, int]:
    sizes = list(node.attrs.get("qkv_hidden_sizes") or [])
    if not sizes:
        third = _divide(total, 3, f"{node.op_type}: QKV weight width / 3")
        return third, third, third
    if len(sizes) != 3 or sum(sizes) != total:
        raise ValueError(f"{node.op_type}: qkv_hidden_sizes {sizes} do not sum to the weight width {total}")
    return sizes[0], sizes[1], sizes[2]


def _attended(node: KnownNode, past_len: int, new: int, shared: bool, past_length_index: int | None) -> int:
    """Keys attended: past + new; for a shared buffer (past_len is its max length) the constant
    past_sequence_length + new where the graph holds it, else the buffer length (an upper bound)."""
    if not shared:
        return past_len + new
    valid = _constant_int(node, past_length_index) if past_length_index is not None else None
    return past_len if valid is None else min(past_len, valid + new)


def _projected_attention(
    node: KnownNode, *, masks: tuple[int, ...], past_index: int, past_length_index: int | None
) -> tuple[Cost, int]:
    """Contrib Attention, DecoderMaskedSelfAttention and QAttention: input [B, S, Din], merged
    weights [Din, Dq + Dk + Dv], optional past [2, B, H, P, dh]. Returns the cost and the number of
    projected elements B·S·(Dq + Dk + Dv)."""
    x, weights = node.operand(0), node.operand(1)
    batch, q_len, d_in = x.shape
    heads = node.attrs["num_heads"]
    dq, dk, dv = _qkv_sizes(node, weights.shape[1])
    qk_dim = _divide(dq, heads, f"{node.op_type}: Q hidden size / num_heads")
    v_dim = _divide(dv, heads, f"{node.op_type}: V hidden size / num_heads")
    projected = batch * q_len * (dq + dk + dv)
    flops = 2 * projected * d_in + (projected if node.input(2) is not None else 0)
    past, present = node.input(past_index), node.output(1)
    shared = bool(node.attrs.get("past_present_share_buffer", 0)) and past is not None
    total = q_len if past is None else _attended(node, past.shape[3], q_len, shared, past_length_index)
    mask_count = _present(node, *masks) + bool(node.attrs.get("unidirectional", 0))
    causal = bool(node.attrs.get("unidirectional", 0))
    cost = score_cost(batch, heads, q_len, total, qk_dim, v_dim, masks=mask_count, causal=causal)
    if node.attrs.get("do_rotary", 0):
        rot = node.attrs.get("rotary_embedding_dim", 0) or qk_dim
        flops += ROTARY_FLOPS * 2 * batch * q_len * heads * rot  # Q and K
    io = None
    if shared and present is not None:
        io = partial_bytes(node, *_in_place_cache([past], [present], axis=3, read_rows=total - q_len, new_rows=q_len))
    return plus_work(cost, flops, io=io), projected


@register("Attention", domain="com.microsoft", unit=MATRIX)
def contrib_attention(node: KnownNode) -> Cost:
    """input [B, S, Din] × merged weights [Din, Dq + Dk + Dv]: 2·B·S·Din·(Dq+Dk+Dv) FLOPs, plus
    B·S·(Dq+Dk+Dv) adds for the bias; then attention over T = P + S keys (past [2, B, H, P, dh]):
    2·E·(dh + dv) + E (scale) + E per mask source (mask_index, attention_bias, unidirectional=1) +
    4E − 2L (softmax) FLOPs and E exps; do_rotary adds 3 per rotated element of Q and K.
    unidirectional=1 (GPT-2) is causal: about half the score/value work is useful at S = T.
    past_present_share_buffer=1: T = past_sequence_length + S when that input is a constant, else the
    buffer's max length (an upper bound); the buffer is read for its past rows and written for the S
    new rows only. Otherwise the bytes are the default."""
    return _projected_attention(node, masks=(3, 5), past_index=4, past_length_index=6)[0]


@register("DecoderMaskedSelfAttention", domain="com.microsoft", unit=MATRIX)
def decoder_masked_self_attention(node: KnownNode) -> Cost:
    """Contrib Attention for one decoding step (S = 1), past [2, B, H, P, dh] required: the same
    count — projection 2·B·Din·(Dq+Dk+Dv) plus bias, attention over T keys, E per mask source
    (mask_index, attention_bias) — and the same in-place cache bytes under past_present_share_buffer."""
    return _projected_attention(node, masks=(3, 5), past_index=4, past_length_index=6)[0]


@register("QAttention", domain="com.microsoft", unit=MATRIX)
def q_attention(node: KnownNode) -> Cost:
    """Contrib Attention with a quantized projection: 8-bit input [B, S, Din] × int8 weight
    [Din, Dq + Dk + Dv] accumulated in integers: 2·B·S·Din·(Dq+Dk+Dv) FLOPs, one subtract per element
    of input and of weight for a zero point that is not a constant 0, one multiply per projected
    element to dequantize (input_scale·weight_scale) and one add for the bias; then float attention
    as contrib Attention (mask_index, unidirectional=1). Compute dtype: the input's (int8) — the
    projection is the bulk of the work at BERT-like lengths."""
    from onnx_roofline.costs.rules.quantization import nonzero_zero_point

    cost, projected = _projected_attention(node, masks=(5,), past_index=8, past_length_index=None)
    extra = projected  # dequantize the integer projection
    if nonzero_zero_point(node, 6):
        extra += node.operand(0).numel
    if nonzero_zero_point(node, 7):
        extra += node.operand(1).numel
    return plus_work(cost, extra, io=cost)


def _kv_from_key(key: KnownTensor | None, q_len: int) -> tuple[int, bool]:
    """(kv_len, new): the new K/V length, and whether the key is projected input (a bias applies and
    it is appended to past K/V) rather than a BNSH [B, H, L, dh] cache used as is (cross attention)."""
    if key is None:
        return q_len, True  # packed QKV in the query
    if key.rank == 4:
        return key.shape[2], False
    return key.shape[1], True  # [B, L, D] or packed KV [B, L, H, 2, dh]


@register("MultiHeadAttention", domain="com.microsoft", unit=MATRIX)
def multi_head_attention(node: KnownNode) -> Cost:
    """Projected query [B, S, D] (or packed QKV [B, S, H, 3, dh]), key/value [B, L, D] (or packed KV
    [B, L, H, 2, dh], or BNSH [B, H, L, dh] caches for cross attention), past_key [B, H, P, dh]:
    T = P + L. 2·E·(dh + dv) + E (scale) + E per mask source (key_padding_mask, attention_bias,
    unidirectional=1) + 4E − 2L (softmax) FLOPs, E exps; a bias adds one per element of Q and of the
    new K and V. With past_sequence_length given the past/present buffers are shared: T =
    past_sequence_length + L when it is a constant, else the buffer length (an upper bound), and the
    buffers are read for the past rows and written for the new rows only."""
    query = node.operand(0)
    heads = node.attrs["num_heads"]
    if query.rank == 5:
        batch, q_len, _, _, qk_dim = query.shape
    else:
        batch, q_len, hidden = query.shape
        qk_dim = _divide(hidden, heads, "MultiHeadAttention: query hidden size / num_heads")
    v_dim = _divide(node.result(0).shape[-1], heads, "MultiHeadAttention: output hidden size / num_heads")
    kv_len, new = _kv_from_key(node.input(1), q_len)
    past = node.input(6)
    shared = past is not None and new and node.input(8) is not None
    total = _attended(node, past.shape[2], kv_len, shared, 8) if past is not None and new else kv_len
    masks = _present(node, 4, 5) + bool(node.attrs.get("unidirectional", 0))
    cost = score_cost(batch, heads, q_len, total, qk_dim, v_dim, masks=masks)
    return _separate_qkv_total(node, cost, (batch, heads, q_len, qk_dim, v_dim), 3, 6, shared, total, kv_len, new)


@register("GroupQueryAttention", domain="com.microsoft", unit=MATRIX)
def group_query_attention(node: KnownNode) -> Cost:
    """query [B, S, H·dh] (or packed QKV [B, S, (H + 2·Hkv)·dh]), key/value [B, S, Hkv·dh], past K/V
    [B, Hkv, P, dh]. T = total_sequence_length when it is a constant, else present_key's length
    (P + S, or the buffer length when shared: an upper bound), else P + S. The score cost with H
    query heads: 2·E·(dh + dv) + E (scale) + E per mask source (causal=1 — the default: GQA is causal
    unless told otherwise — and attention_bias) + 4E − 2L (softmax) FLOPs, E exps; softcap adds 2E
    and E tanh, smooth_softmax/head_sink 2L and L exps; do_rotary 3 FLOPs per rotated element of Q
    and new K (rot = 2·cos_cache's last dim); q/k_norm_weight an RMS norm per head (4n + 2·rows, one
    sqrt per row); an integer (quantized) cache one multiply per K/V element dequantized (T rows) and
    4 per new element quantized (divide, round, two-sided clamp). local_window_size limits the useful
    keys, not the rectangle counted. Bytes: the default, except that past and present of the same
    length are one buffer updated in place — read for its T − S past rows, written for the S new
    rows — and that the cos/sin caches are read for the rows looked up (B·S)."""
    query = node.operand(0)
    heads, kv_heads = node.attrs["num_heads"], node.attrs["kv_num_heads"]
    batch, q_len, _ = query.shape
    head = _divide(node.result(0).shape[-1], heads, "GroupQueryAttention: output hidden size / num_heads")
    past_key, present_key = node.input(3), node.output(1)
    total = _constant_int(node, 6)
    if total is None:
        if present_key is not None:
            total = present_key.shape[2]
        else:
            total = (past_key.shape[2] if past_key is not None else 0) + q_len
    masks = bool(node.attrs.get("causal", 1)) + _present(node, 10)
    softcap = bool(node.attrs.get("softcap", 0.0))
    sink = bool(node.attrs.get("smooth_softmax", 0)) or node.input(11) is not None
    causal = bool(node.attrs.get("causal", 1))
    cost = score_cost(batch, heads, q_len, total, head, head, masks=masks, softcap=softcap, sink=sink, causal=causal)
    flops, transcendentals = 0, 0
    q_rows, k_rows = batch * q_len * heads, batch * q_len * kv_heads
    reads: dict[str, int] = {}
    writes: dict[str, int] = {}
    if node.attrs.get("do_rotary", 0) and node.input(7) is not None:
        flops += ROTARY_FLOPS * (q_rows + k_rows) * 2 * node.operand(7).shape[-1]
        positions = node.input(9)
        reads |= rotary_caches(
            [node.input(7), node.input(8)], positions.numel if positions is not None else batch * q_len
        )
    if node.input(14) is not None and node.input(15) is not None:
        for rows in (q_rows, k_rows):
            norm, sqrts = qk_norm(rows, head)
            flops, transcendentals = flops + norm, transcendentals + sqrts
    if past_key is not None and not (past_key.dtype or "float").startswith(("float", "bfloat")):
        flops += 2 * batch * kv_heads * total * head  # dequantize the K and V rows attended
        flops += 2 * 4 * k_rows * head  # quantize the new K and V rows
    if past_key is not None and present_key is not None and past_key.shape[2] == present_key.shape[2]:
        cache_reads, cache_writes = _in_place_cache(
            [past_key, node.input(4)], [present_key, node.output(2)], 2, total - q_len, q_len
        )
        reads |= cache_reads
        writes |= cache_writes
    io = partial_bytes(node, reads, writes) if reads or writes else None
    return plus_work(cost, flops, transcendentals, io=io)


@register("PackedAttention", domain="com.microsoft", unit=MATRIX)
def packed_attention(node: KnownNode) -> Cost:
    """input [N, Din] holds the N real tokens of B sequences padded to S (token_offset [B, S]):
    projection 2·N·Din·(Dq+Dk+Dv) + N·(Dq+Dk+Dv) bias adds, then attention per sequence counted over
    the padded B×S×S rectangle — the real lengths are runtime values, so an upper bound:
    2·E·(dh + dv) + E (scale) + E for attention_bias + 4E − 2L FLOPs, E exps, E = B·H·S²."""
    x, weights = node.operand(0), node.operand(1)
    tokens, d_in = x.shape
    heads = node.attrs["num_heads"]
    dq, dk, dv = _qkv_sizes(node, weights.shape[1])
    batch, seq = node.operand(3).shape
    qk_dim = _divide(dq, heads, "PackedAttention: Q hidden size / num_heads")
    v_dim = _divide(dv, heads, "PackedAttention: V hidden size / num_heads")
    cost = score_cost(batch, heads, seq, seq, qk_dim, v_dim, masks=_present(node, 5))
    projected = tokens * (dq + dk + dv)
    return plus_work(cost, 2 * projected * d_in + projected)


@register("PackedMultiHeadAttention", domain="com.microsoft", unit=MATRIX)
def packed_multi_head_attention(node: KnownNode) -> Cost:
    """Projected query [N, D] (or packed QKV [N, H, 3, dh]), key [N, D], value [N, Dv] for the N real
    tokens of B sequences padded to S (token_offset [B, S]): attention counted over the padded
    B×S×S rectangle (an upper bound; the real lengths are runtime values): 2·E·(dh + dv) + E (scale)
    + E for attention_bias + 4E − 2L FLOPs, E exps; a bias adds one per element of Q, K and V."""
    query = node.operand(0)
    heads = node.attrs["num_heads"]
    tokens = query.shape[0]
    if query.rank == 4:
        qk_dim = query.shape[3]
    else:
        qk_dim = _divide(query.shape[1], heads, "PackedMultiHeadAttention: query hidden size / num_heads")
    v_dim = _divide(node.result(0).shape[-1], heads, "PackedMultiHeadAttention: output hidden size / num_heads")
    batch, seq = node.operand(4).shape
    cost = score_cost(batch, heads, seq, seq, qk_dim, v_dim, masks=_present(node, 6))
    bias = tokens * heads * (2 * qk_dim + v_dim) if node.input(3) is not None else 0
    return plus_work(cost, bias)


@register("DecoderMaskedMultiHeadAttention", domain="com.microsoft", unit=MATRIX)
def decoder_masked_multi_head_attention(node: KnownNode) -> Cost:
    """One decoding step: query [B, 1, D] (or packed QKV [B, 1, 2D + Dv]). Self attention appends the
    new key [B, 1, D] to past_key [B, H, P, dh]: T = P + 1; cross attention takes key/value as BNSH
    [B, H, L, dh]: T = L. 2·E·(dh + dv) + E (scale) + E per mask source (mask_index, attention_bias)
    + 4E − 2L FLOPs, E exps; a bias adds one per element of Q (and of the new K and V). With
    past_present_share_buffer=1: T = past_sequence_length + 1 when it is a constant, else the buffer
    length (an upper bound), and the buffers are read for the past rows and written for the new row."""
    query = node.operand(0)
    heads = node.attrs["num_heads"]
    batch, q_len, q_width = query.shape
    v_total = node.result(0).shape[-1]
    key = node.input(1)
    hidden = (q_width - v_total) // 2 if key is None else q_width
    qk_dim = _divide(hidden, heads, "DecoderMaskedMultiHeadAttention: Q hidden size / num_heads")
    v_dim = _divide(v_total, heads, "DecoderMaskedMultiHeadAttention: output hidden size / num_heads")
    kv_len, new = _kv_from_key(key, q_len)
    past = node.input(5)
    shared = bool(node.attrs.get("past_present_share_buffer", 0)) and past is not None and new
    total = _attended(node, past.shape[2], kv_len, shared, 7) if past is not None and new else kv_len
    cost = score_cost(batch, heads, q_len, total, qk_dim, v_dim, masks=_present(node, 3, 4))
    return _separate_qkv_total(node, cost, (batch, heads, q_len, qk_dim, v_dim), 10, 5, shared, total, kv_len, new)


@register("RotaryEmbedding", "MRotaryEmbedding", domain="com.microsoft")
def contrib_rotary_embedding(node: KnownNode) -> Cost:
    """input [B, S, D] (or [B, H, S, dh], or packed [N, D]), position_ids, cos/sin caches
    [max_position, rot/2]: the first rot of each head's dh elements rotated at 3 FLOPs per rotated
    element (two multiplies and an add per output): 3·numel·rot/dh, where dh = D / num_heads when
    num_heads is set, else rot (full rotation). Bytes: the input read and output written, each cache
    read for the rows its positions select (position_ids [B, S]: B·S; a start offset [1]: S;
    MRotaryEmbedding's three position streams [3, B, S]: 3·B·S, each section of the rotation
    looked up with its own stream; at most the whole cache)."""
    x = node.operand(0)
    rotated = 2 * node.operand(2).shape[-1]
    heads = node.attrs.get("num_heads", 0)
    if x.rank == 4:
        head, seq = x.shape[3], x.shape[2]
    else:
        head = _divide(x.shape[-1], heads, "RotaryEmbedding: hidden size / num_heads") if heads else rotated
        seq = x.shape[-2]
    positions = node.operand(1)
    rows = positions.numel if positions.numel > 1 else seq
    cost = Cost(flops=ROTARY_FLOPS * x.numel * rotated // head)
    return plus_work(cost, io=partial_bytes(node, rotary_caches([node.operand(2), node.operand(3)], rows), {}))


@register("SparseAttention", domain="com.microsoft", unit=MATRIX)
def sparse_attention(node: KnownNode) -> Cost:
    """Phi-3-small's block-sparse GQA: query [B, S, H·dh] (or packed QKV), past K/V buffers
    [B, Hkv, Lmax, dh] shared with present. T = total_sequence_length (input 7) when it is a
    constant, else Lmax. The score cost over the causal S×T rectangle with H query heads: 2·E·2dh +
    E (scale) + E (the causal block mask) + 4E − 2L FLOPs, E exps — an upper bound, as the block
    mask's zero blocks are skipped by the kernel (causal: the useful FLOPs are the lower triangle);
    do_rotary 3 FLOPs per rotated element of Q and new K (rot = 2·cos_cache's last dim). Bytes: the
    default, except the shared buffers (read for their T − S past rows, written for the S new rows)
    and the cos/sin caches (read for the B·S rows looked up)."""
    query, past_key = node.operand(0), node.operand(3)
    heads, kv_heads = node.attrs["num_heads"], node.attrs["kv_num_heads"]
    batch, q_len, _ = query.shape
    head, length = past_key.shape[3], past_key.shape[2]
    total = _constant_int(node, 7)
    total = length if total is None else min(max(total, q_len), length)
    cost = score_cost(batch, heads, q_len, total, head, head, masks=1, causal=True)
    flops = 0
    reads: dict[str, int] = {}
    if node.attrs.get("do_rotary", 0) and node.input(9) is not None:
        flops += ROTARY_FLOPS * batch * q_len * (heads + kv_heads) * 2 * node.operand(9).shape[-1]
        reads |= rotary_caches([node.input(9), node.input(10)], batch * q_len)
    cache_reads, writes = _in_place_cache(
        [past_key, node.operand(4)], [node.output(1), node.output(2)], 2, total - q_len, q_len
    )
    return plus_work(cost, flops, io=partial_bytes(node, reads | cache_reads, writes))


@register("PagedAttention", domain="com.microsoft", unit=MATRIX)
def paged_attention(node: KnownNode) -> Cost:
    """vLLM-style paged attention over packed tokens: query [N, H·dh] (or packed QKV), block caches
    [blocks, block_size, Hkv, dh], block_table [B, max_blocks]. The per-sequence lengths are runtime
    values, so each of the N tokens is counted against the most keys a sequence can hold, T =
    max_blocks·block_size (an upper bound): E = N·H·T scores, 2·E·(dh + dv) + E (scale) + E for
    is_causal=1 (the default) + 4E − 2L FLOPs, E exps (LATENT layout: dv = v_head_size, K and V one
    cache); softcap 2E and E tanh, head_sink 2L and L exps; do_rotary 3 FLOPs per rotated element
    of Q and new K; q/k_norm_weight an RMS norm per head (4n + 2·rows, a sqrt per row). Bytes: the
    default, except the caches, updated in place: read for the blocks the block table names (B·max
    blocks, at most all of them), written for the N new rows; the cos/sin caches for N rows."""
    query, key_cache, table = node.operand(0), node.operand(3), node.operand(7)
    heads, kv_heads = node.attrs["num_heads"], node.attrs["kv_num_heads"]
    tokens, width = query.shape
    packed = node.input(1) is None and node.input(2) is None
    head = _divide(width, heads + 2 * kv_heads if packed else heads, "PagedAttention: query width / heads")
    latent = text_attr(node, "kv_cache_layout", "SEPARATE") == "LATENT"
    v_head = (node.attrs.get("v_head_size", 0) or head) if latent else head
    blocks, block_size = key_cache.shape[:2]
    keys = table.shape[1] * block_size
    causal = bool(node.attrs.get("is_causal", 1))
    softcap = bool(node.attrs.get("softcap", 0.0))
    cost = score_cost(
        1, heads, tokens, keys, head, v_head, masks=int(causal), softcap=softcap, sink=node.input(11) is not None
    )
    flops, transcendentals = 0, 0
    reads: dict[str, int] = {}
    if node.attrs.get("do_rotary", 0) and node.input(8) is not None:
        flops += ROTARY_FLOPS * tokens * (heads + kv_heads) * 2 * node.operand(8).shape[-1]
        reads |= rotary_caches([node.input(8), node.input(9)], tokens)
    if node.input(12) is not None and node.input(13) is not None:
        for rows in (tokens * heads, tokens * kv_heads):
            norm, sqrts = qk_norm(rows, head)
            flops, transcendentals = flops + norm, transcendentals + sqrts
    caches = [node.input(3), node.input(4)]
    referenced = min(table.numel, blocks)
    reads |= {c.name: rows_bytes(c, 0, referenced) for c in caches if c is not None}
    writes = {
        c.name: min(c.nbytes, c.nbytes * tokens // (blocks * block_size))
        for c in (node.output(1), node.output(2))
        if c is not None
    }
    return plus_work(cost, flops, transcendentals, io=partial_bytes(node, reads, writes))


@register("LongformerAttention", domain="com.microsoft", unit=MATRIX)
def longformer_attention(node: KnownNode) -> Cost:
    """input [B, S, D], weight and global_weight [D, 3D], window W (each side): both projections for
    every token, 2·(2·B·S·D·3D + B·S·3D) with their biases; then banded attention, each query over
    its 2W + 1 neighbours (at most S): E = B·H·S·(2W + 1) scores, 2·E·2dh + E (scale) + E (mask) +
    4E − 2L FLOPs, E exps. The global tokens' rows and columns (flagged at runtime by `global`)
    are a runtime count and are not added. Bytes: the default."""
    x = node.operand(0)
    batch, q_len, hidden = x.shape
    heads = node.attrs["num_heads"]
    head = _divide(hidden, heads, "LongformerAttention: hidden size / num_heads")
    band = min(2 * node.attrs["window"] + 1, q_len)
    projected = batch * q_len * 3 * hidden
    return plus_work(
        score_cost(batch, heads, q_len, band, head, head, masks=1), 2 * (2 * projected * hidden + projected)
    )


@register("GemmaRotaryEmbedding", domain="com.microsoft")
def gemma_rotary_embedding(node: KnownNode) -> Cost:
    """q·cos + q_rot·sin and k·cos + k_rot·sin: 3 FLOPs (two multiplies, an add) per element of each
    output; sin and cos of emb: 2 transcendentals per emb element. Bytes: the default."""
    outputs = sum(t.numel for t in node.present_outputs)
    return Cost(flops=ROTARY_FLOPS * outputs, transcendentals=2 * node.operand(0).numel)


RELATIVE_BUCKET = 7
"""FLOPs of T5's relative-position bucket for one (query, key) pair: k − q, the is-small compare,
max_exact + log(n/max_exact)/log(max_distance/max_exact)·(buckets − max_exact) (a divide, a
multiply, an add, and the log: a transcendental), the min with buckets − 1, the select; a
bidirectional bucket adds the sign's offset and |·| (2 more)."""


@register("RelativePositionBias", domain="com.microsoft")
def relative_position_bias(node: KnownNode) -> Cost:
    """T5's bias [1, N, q, k]: the bucket of each of the q·k (query, key) pairs, shared by the N
    heads: 7 FLOPs (9 when is_bidirectional) and 1 log per pair (RELATIVE_BUCKET); then one table
    lookup per output element, no FLOPs. Bytes: the default (the small table read whole)."""
    _, _, q_len, k_len = node.result(0).shape
    pairs = q_len * k_len
    return Cost(
        flops=pairs * (RELATIVE_BUCKET + 2 * bool(node.attrs.get("is_bidirectional", 0))), transcendentals=pairs
    )


@register("GatedRelativePositionBias", domain="com.microsoft")
def gated_relative_position_bias(node: KnownNode) -> Cost:
    """WavLM's gate over rel_pos [1, N, S, S], query_layer of R = tokens·N head rows of dh, gate
    weight [dh, G]: query + bias (one add per query element), the gate projection per row (2·dh·G +
    G for its bias), the pairwise sum of its halves (G − 2 adds), two sigmoids and
    gate_u·(gate_r·eco_a − 1) + 2 (4 FLOPs) per row, then one multiply per output element [B, N,
    S, S]. Bytes: the default."""
    query, weight = node.operand(0), node.operand(3)
    head, gate = weight.shape
    rows = query.numel // head
    flops = query.numel + rows * (2 * head * gate + gate + (gate - 2) + 4) + node.result(0).numel
    return Cost(flops=flops, transcendentals=2 * rows)
