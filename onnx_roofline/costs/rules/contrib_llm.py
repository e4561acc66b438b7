"""onnxruntime's com.microsoft ops for recent LLM architectures (1.32): stateful causal
convolutions (LFM2's short conv, Qwen3.5's and Mamba's conv1d), the linear-attention recurrences
(GatedDeltaNet, LinearAttention, their gates, Mamba2Verify and the replay ops), MoE routing and
packed experts, block-quantized and packed weight matmuls, Engram's n-gram hashing and gate,
RMSNormRotary, GatedAdd and selected-index sparse attention.

A recurrent op is counted as the recurrence its schema defines, token by token, per head with a
[dk, dv] state S (dk the key/query head size, dv the value head size):

    decay      exp(g)·S                       dk·dv multiplies, 1 exp per decay element
    retrieval  Sᵀk                            2·dk·dv (delta rules)
    delta      β·(v − Sᵀk)                    2·dv (delta rules)
    update     S + k ⊗ δ                      2·dk·dv
    readout    scale·Sᵀq                      2·dk·dv, + dv for a scale ≠ 1

a gated delta rule is 7·dk·dv + 3·dv per head and token. A chunk-parallel kernel (`chunk_size`)
does more arithmetic for tensor-core speed; this is the recurrence's minimum. The state is read
and written once per call (the default bytes: the recurrence keeps it on chip between tokens).

Fused gate arithmetic counts as the elementwise rules count the standalone ops (Softplus 1 FLOP
and 2 transcendentals, Sigmoid 1 transcendental); quantized weights as MatMulNBits: the product
2·M·K·N in `flops`, each weight dequantized once in `dequantize_flops`, the logical weights as
`parameters`."""

from __future__ import annotations

import math

from onnx_roofline.costs.cost import Cost
from onnx_roofline.costs.rules.attention import (
    ROTARY_FLOPS,
    partial_bytes,
    plus_work,
    qk_norm,
    rotary_caches,
    rows_bytes,
    score_cost,
)
from onnx_roofline.costs.rules.contrib import ACTIVATIONS, SWIGLU, expert_reads, rms_norm, text_attr
from onnx_roofline.costs.rules.registry import MATRIX, register
from onnx_roofline.model.op_node import KnownNode
from onnx_roofline.model.status import DATA_DEPENDENT, Uncostable
from onnx_roofline.shapes.rules.contrib_llm import delta_net_heads, ngram_heads, rms_rotary_width

MS = "com.microsoft"
SOFTPLUS, SIGMOID = ACTIVATIONS["Softplus"], ACTIVATIONS["Sigmoid"]


def _silu(node: KnownNode, elements: int) -> tuple[int, int]:
    """(FLOPs, transcendentals) of activation 'silu'/'swish' (x·sigmoid(x): 1 and 1), 'none' 0."""
    name = text_attr(node, "activation", "none").lower()
    if name not in ("none", "silu", "swish"):
        raise ValueError(f"{node.op_type}: no cost for activation {name!r}")
    return (elements, elements) if name != "none" else (0, 0)


def _slot_read(node: KnownNode, index: int) -> dict[str, int]:
    """A windowed carry state (state_window = W > 0, [W, …]) is read for its last slot only."""
    window, state = node.attrs.get("state_window", 0), node.input(index)
    return {state.name: state.nbytes // window} if window and state is not None else {}


# --- stateful causal convolutions ----------------------------------------------------------------


def _causal_conv(node: KnownNode, bias_index: int) -> Cost:
    """Depthwise causal conv, W [C, 1, k…]: 2·∏k per output element (the Conv convention), + 1
    for the bias, + SiLU; the carry state is a copy (no arithmetic)."""
    y = node.result(0)
    taps = math.prod(node.operand(1).shape[2:])
    silu, sigmoids = _silu(node, y.numel)
    bias = y.numel if node.input(bias_index) is not None else 0
    return Cost(flops=2 * taps * y.numel + bias + silu, transcendentals=sigmoids)


@register("CausalConvWithState")
@register("CausalConvWithState", domain=MS)
def causal_conv_with_state(node: KnownNode) -> Cost:
    """Depthwise causal conv over [past_state ‖ input] (any layout, ndim 1–3), W [C, 1, k…]: 2·∏k
    FLOPs per output element (the Conv convention), + 1 for the bias, + 1 FLOP and 1 sigmoid for
    activation silu/swish (x·sigmoid(x)); present_state copies the last (k − 1)·dilation positions.
    Vector unit: depthwise, no channel contraction for a tensor core (the causal-conv1d kernels run
    on CUDA cores). Bytes: the default, except a windowed past_state (com.microsoft's state_window
    = W), read for its last slot only."""
    cost = _causal_conv(node, 2)
    return (
        plus_work(cost, io=partial_bytes(node, _slot_read(node, 3), {})) if node.attrs.get("state_window", 0) else cost
    )


@register("VarlenCausalConvWithState", domain=MS)
def varlen_causal_conv_with_state(node: KnownNode) -> Cost:
    """CausalConvWithState over packed tokens [N, C] (bias at input 3): 2·k FLOPs per output, + 1
    for the bias, + SiLU (1 and 1 sigmoid); CUDA's dynamic two-tap mode (kernel_delta and
    previous_mask) adds 3 per output (the two coefficient adds, the mask multiply). Bytes: default."""
    cost = _causal_conv(node, 3)
    dynamic = node.result(0).numel * 3 if node.input(6) is not None and node.input(7) is not None else 0
    return Cost(flops=cost.flops + dynamic, transcendentals=cost.transcendentals)


# --- linear-attention recurrences ----------------------------------------------------------------


def recurrence_flops(rule: str, dk: int, dv: int, state_heads: int, read_heads: int, scaled: bool) -> int:
    """FLOPs of one token (module docstring): per state head the update (2·dk·dv), the decay
    (dk·dv, gated rules), the retrieval and delta (2·dk·dv + 2·dv, delta rules); per read head
    the readout 2·dk·dv, + dv when `scaled`."""
    if rule not in ("linear", "gated", "delta", "gated_delta"):
        raise ValueError(f"no cost for update_rule {rule!r}")
    update = 2 * dk * dv + (dk * dv if "gated" in rule else 0) + (2 * dk * dv + 2 * dv if "delta" in rule else 0)
    return state_heads * update + read_heads * (2 * dk * dv + (dv if scaled else 0))


def _scaled(node: KnownNode) -> bool:
    """scale 0 (the default, 1/√dk) or any value but 1 is a multiply per output."""
    return node.attrs.get("scale", 0.0) != 1.0


@register("GatedDeltaNet", domain=MS, unit=MATRIX)
def gated_delta_net(node: KnownNode) -> Cost:
    """Token-major query [N, Hq, dk] (or [B, S, Hq, dk], or packed QKV), value [.., Hv, dv], state
    [B, Hv, dv, dk]: per token the recurrence over Hv state heads, read by max(Hq, Hv) heads
    (module docstring: 7·dk·dv + 3·dv per head for gated_delta). Per decay element: 1 exp (gated
    rules); gate_activation softplus/qwen, −exp(a_log)·Softplus(decay + dt_bias), 3 FLOPs and 3
    transcendentals; sigmoid/kda, bound·Sigmoid(exp(a_log)·(decay + dt_bias)), 3 and 2. Per beta
    element: 1 sigmoid with beta_activation sigmoid. qk_l2_norm: each query and key head vector
    L2-normalized, 3·dk + 2 FLOPs and 1 sqrt. Bytes: the default (the state read and written)."""
    query, decay, beta = node.operand(0), node.input(4), node.input(5)
    heads_q, heads_v, dk, dv = delta_net_heads(node)
    tokens = math.prod(query.shape[:-2] if node.input(2) is not None else query.shape[:-1])
    rule = text_attr(node, "update_rule", "gated_delta")
    flops = tokens * recurrence_flops(rule, dk, dv, heads_v, max(heads_q, heads_v), _scaled(node))
    transcendentals = 0
    if decay is not None and "gated" in rule:
        gate = text_attr(node, "gate_activation", "none").lower()
        extra = {"none": (0, 0), "softplus": (3, 3), "qwen": (3, 3), "sigmoid": (3, 2), "kda": (3, 2)}.get(gate)
        if extra is None:
            raise ValueError(f"GatedDeltaNet: no cost for gate_activation {gate!r}")
        flops += extra[0] * decay.numel
        transcendentals += (1 + extra[1]) * decay.numel
    if beta is not None and text_attr(node, "beta_activation", "none").lower() == "sigmoid":
        transcendentals += beta.numel
    if node.attrs.get("qk_l2_norm", 0):
        vectors = 2 * tokens * heads_q
        flops += vectors * (3 * dk + 2)
        transcendentals += vectors
    return Cost(flops=flops, transcendentals=transcendentals)


@register("LinearAttention", unit=MATRIX)
@register("LinearAttention", domain=MS, unit=MATRIX)
def linear_attention(node: KnownNode) -> Cost:
    """query [B, T, Hq·dk], key [B, T, ·dk], value [B, T, Hkv·dv], state [B, Hkv, dk, dv]: per
    token the recurrence (module docstring) over Hkv state heads read by max(Hq, Hkv) heads —
    inverse GQA (Hkv > Hq, Qwen3.5's linear layers) reads every value head; a scale of exactly 1
    (a pre-scaled query) multiplies nothing; 1 exp per decay element for the gated rules. Bytes:
    the default, except a windowed past_state (state_window = W), read for its last slot only."""
    query, value, decay = node.operand(0), node.operand(2), node.input(4)
    heads_q, heads_kv = node.attrs["q_num_heads"], node.attrs["kv_num_heads"]
    dk, dv = query.shape[-1] // heads_q, value.shape[-1] // heads_kv
    rule = text_attr(node, "update_rule", "gated_delta")
    tokens = query.shape[0] * query.shape[1]
    flops = tokens * recurrence_flops(rule, dk, dv, heads_kv, max(heads_q, heads_kv), _scaled(node))
    cost = Cost(flops=flops, transcendentals=decay.numel if decay is not None and "gated" in rule else 0)
    return (
        plus_work(cost, io=partial_bytes(node, _slot_read(node, 3), {})) if node.attrs.get("state_window", 0) else cost
    )


@register("LinearAttentionGate", domain=MS)
def linear_attention_gate(node: KnownNode) -> Cost:
    """decay = decay_scale·Softplus(a + dt_bias): per element an add, Softplus (1 FLOP, exp and
    log), a multiply: 3 FLOPs and 2 transcendentals; beta = Sigmoid(b): 1 sigmoid per element."""
    a, b = node.operand(0), node.input(3)
    flops = (2 + SOFTPLUS[0]) * a.numel
    return Cost(flops=flops, transcendentals=SOFTPLUS[1] * a.numel + (SIGMOID[1] * b.numel if b is not None else 0))


@register("GatedDeltaNetStateReplay", domain=MS)
def gated_delta_net_state_replay(node: KnownNode) -> Cost:
    """Replays kept_count captured transitions into one state row of Hv·Dv·Dk elements: per
    element and transition s·decay + key·delta, 3 FLOPs. The geometry is in the metadata input
    [11] (…, Hv, Dv, Dk, Hk, capacity, kept_count): costed when it is a constant, else data-dependent.
    Bytes: the source row, the kept transitions' decay, key and delta read, the row written."""
    meta = _metadata(node, 11)
    heads_v, dv, dk, heads_k, _, kept = (int(v) for v in meta[5:11])
    state = heads_v * dv * dk
    read = 4 * (state + kept * (heads_v * dk + heads_k * dk + heads_v * dv)) + node.operand(3).nbytes
    return Cost(flops=3 * kept * state, bytes_read=read, bytes_written=4 * state)


@register("ConvStateReplay", domain=MS)
def conv_state_replay(node: KnownNode) -> Cost:
    """Rebuilds a rolling conv history of batch·channels·history elements from the source history
    and kept captured inputs: a copy, 0 FLOPs. The geometry is in the metadata input [8] (…, batch,
    channels, history_width, capacity, kept_count): costed when it is a constant, else
    data-dependent. Bytes: each destination element read once from source or capture, and written."""
    meta = _metadata(node, 8)
    batch, channels, history = (int(v) for v in meta[3:6])
    state = batch * channels * history * node.result(0).bits // 8
    return Cost(bytes_read=state + node.operand(3).nbytes, bytes_written=state)


def _metadata(node: KnownNode, length: int):
    value = node.input_value(3)
    if value is None or value.size != length:
        raise Uncostable(DATA_DEPENDENT, f"{node.op_type}: the replayed geometry is in the metadata input's values")
    return value.reshape(-1)


@register("Mamba2Verify", domain=MS)
def mamba2_verify(node: KnownNode) -> Cost:
    """Per row of R: the 4-tap depthwise conv over the ch = di + 2·G·N channels (2·4 + 1 bias per
    channel, SiLU 1 and 1 sigmoid); per head dt = max(Softplus(dt + dt_bias), min) (3 FLOPs, 2
    transcendentals) and exp(A·dt) (1 and 1); the SSM state [N, P] per head (N = d_state, P =
    head_dim): dt·x (P), S = decay·S + (dt·x)·B (3 per state element), readout D·x + Σ C·S (2·N·P +
    2·P); SiLU(gate) and the gating multiply (2 per di, di sigmoids); the grouped RMS norm with
    weight, 4·di + 2·G, G sqrts. Bytes: the default."""
    rows, channels = node.operand(0).shape[0], node.operand(1).shape[1]
    heads, groups = node.attrs["heads"], node.attrs["n_groups"]
    state, head_dim = node.attrs.get("d_state", 128), node.attrs.get("head_dim", 64)
    inner = heads * head_dim
    norm = rms_norm(inner, groups)
    per_head = 3 + 1 + head_dim + 3 * state * head_dim + 2 * state * head_dim + 2 * head_dim
    flops = channels * (2 * 4 + 1 + 1) + heads * per_head + 2 * inner + norm.flops
    return Cost(flops=rows * flops, transcendentals=rows * (channels + 3 * heads + inner + norm.transcendentals))


# --- mixture of experts ---------------------------------------------------------------------------


@register("MoEGroupRouter", domain=MS)
def moe_group_router(node: KnownNode) -> Cost:
    """Per token over E experts in G = n_group groups of g = E/G: with projection_weight [E, width],
    2·width·E to project; a sigmoid per expert (E) and + expert_bias (E). Legacy routing then ranks
    the groups — top group_topk of each (group_topk·(g − 1) compares, group_topk − 1 adds), the
    topk_group best groups (topk_group·(G − 1)) — and the experts in them (top_k·(topk_group·g −
    1)), and writes log(max(s, 1e-20)) for the top_k chosen (1 FLOP and 1 log each); full-score
    outputs stop after the bias add. Bytes: the default."""
    logits, bias, projection = node.operand(0), node.operand(1), node.input(2)
    experts = bias.shape[0]
    tokens = logits.shape[0] if projection is not None else logits.numel // experts
    per_token = 2 * logits.shape[-1] * experts if projection is not None else 0
    per_token += experts  # the bias add; the sigmoids are transcendentals
    transcendentals = experts
    if node.output(0) is not None:
        groups, top_k = node.attrs.get("n_group", 1), node.attrs["top_k"]
        size = experts // groups
        group_topk, topk_group = min(node.attrs.get("group_topk", 2), size), node.attrs.get("topk_group", 1)
        per_token += groups * (group_topk * (size - 1) + group_topk - 1) + topk_group * (groups - 1)
        per_token += top_k * (topk_group * size - 1) + top_k
        transcendentals += top_k
    return Cost(flops=tokens * per_token, transcendentals=tokens * transcendentals)


@register("MoEPacked", domain=MS, unit=MATRIX)
def moe_packed(node: KnownNode) -> Cost:
    """MoE over T tokens of width D with block-packed experts (gate and up [E, I, ·], down [E, D,
    ·]), top-k routing. Per token: legacy softmax over E (4E − 2, E exps) when router_weights is
    absent, top-k k·(E − 1) compares, 2k − 1 to renormalize (normalize_routing_weights, the
    default), + k with routed_scaling_factor ≠ 1. Per routed pair: gate 2·D·I, up 2·D·I (swiglu),
    down 2·I·D, the activation (swiglu 4 and 1 sigmoid per I; relu2 2 per I), 2·D to weight and
    accumulate. `dequantize_flops`: 2 per weight element of each used expert (min(E, T·k)). Bytes:
    the used experts' blobs, the rest default. Parameters: every expert's logical weights."""
    x, router, gate, up = node.operand(0), node.operand(1), node.operand(2), node.input(3)
    hidden, experts, inter = x.shape[-1], router.shape[-1], gate.shape[1]
    tokens, k = x.numel // hidden, node.attrs.get("k", 1)
    activation = text_attr(node, "activation_type", "swiglu").lower()
    if activation not in ("swiglu", "relu2", "relu_squared"):
        raise ValueError(f"MoEPacked: no cost for activation_type {activation!r}")
    projections = 2 if up is not None else 1
    pair = 2 * hidden * inter * (projections + 1) + 2 * hidden + (SWIGLU if activation == "swiglu" else 2) * inter
    routing = k * (experts - 1)
    transcendentals = 0
    if node.input(5) is None:
        routing += 4 * experts - 2
        transcendentals = tokens * experts
    routing += (2 * k - 1) * node.attrs.get("normalize_routing_weights", 1) + k * (
        node.attrs.get("routed_scaling_factor", 1.0) != 1.0
    )
    routed = tokens * k
    used = min(routed, experts)
    transcendentals += routed * inter * (activation == "swiglu")
    reads = expert_reads(node, experts, used, (2, 3, 4))
    read = sum({t.name: reads.get(t.name, t.nbytes) for t in node.present_inputs}.values())
    logical = experts * hidden * inter
    parameters = ((2, logical), (4, logical)) + (((3, logical),) if up is not None else ())
    return Cost(
        flops=routed * pair + tokens * routing,
        transcendentals=transcendentals,
        bytes_read=read,
        dequantize_flops=2 * used * hidden * inter * (projections + 1),
        parameters=parameters,
    )


@register("RouterGateUpProj", domain=MS, unit=MATRIX)
def router_gate_up_proj(node: KnownNode) -> Cost:
    """One GEMM X [M, K] × W [K, R + 2·I] (2·K per column per row), then SwiGLU on the gate and up
    halves: 4 FLOPs and 1 sigmoid per activated element, + 3 clamps when limit > 0."""
    x, weight = node.operand(0), node.operand(1)
    rows = x.numel // x.shape[-1]
    activated = (
        node.result(1).numel
        if node.output(1) is not None
        else rows * (weight.shape[1] - node.attrs["router_size"]) // 2
    )
    clamps = 3 if node.attrs.get("limit", 0.0) > 0 else 0
    return Cost(
        flops=2 * x.shape[-1] * weight.shape[1] * rows + (SWIGLU + clamps) * activated, transcendentals=activated
    )


# --- block-quantized and packed weights ----------------------------------------------------------


def _weight_only(node: KnownNode, k: int, n: int, per_weight: int, bias_index: int | None, slot: int = 1) -> Cost:
    """A [M, K] × an N×K quantized weight: 2·M·K·N + M·N for the bias; `dequantize_flops`
    per_weight·K·N; parameters K·N for the weight, 0 for the scales at the next slot."""
    outputs = node.result(0).numel
    bias = outputs if bias_index is not None and node.input(bias_index) is not None else 0
    return Cost(
        flops=2 * k * outputs + bias, dequantize_flops=per_weight * k * n, parameters=((slot, k * n), (slot + 1, 0))
    )


@register("MatMulBlockQuantizedFp8Weight", domain=MS, unit=MATRIX)
def matmul_fp8_weight(node: KnownNode) -> Cost:
    """A [..., K] × B [N, K] float8 e4m3 with one float scale per block of K: 2·M·K·N, + M·N for
    the bias; `dequantize_flops` K·N (a scale multiply per weight); with a_scale (W8A8) A is
    fake-quantized, fp8(A / a_scale)·a_scale: 5 FLOPs per element of A (divide, round, two clamps,
    multiply). Runs in A's dtype. Parameters: K·N for B, 0 for its scales."""
    n, k = node.operand(1).shape
    cost = _weight_only(node, k, n, 1, 4)
    a_quant = 5 * node.operand(0).numel if node.input(3) is not None else 0
    return Cost(flops=cost.flops + a_quant, dequantize_flops=cost.dequantize_flops, parameters=cost.parameters)


@register("MatMulBlockQuantizedFp4Weight", domain=MS, unit=MATRIX)
def matmul_fp4_weight(node: KnownNode) -> Cost:
    """A [..., K] × NVFP4 B (uint8 [N, K/2], two E2M1 values a byte): 2·M·K·N, + M·N for the bias;
    `dequantize_flops` 2·K·N (e2m1·weight_scale_2·e4m3 block scale). Bytes: the default (B is its
    packed bytes). Parameters: K·N for B, 0 for the block scales."""
    n, half = node.operand(1).shape
    return _weight_only(node, 2 * half, n, 2, 5)


@register("MatMulNBitsQLoRA", domain=MS, unit=MATRIX)
def matmul_nbits_qlora(node: KnownNode) -> Cost:
    """MatMulNBits(X, W) + MatMulNBits(MatMulNBits(X, lora_A), lora_B), M rows, rank R (lora_A's
    scales' rows): the base 2·M·K·N, the down projection 2·M·K·R (none when lora_A is empty), the up
    2·M·R·N (none when lora_B is empty) and the final add M·N; `dequantize_flops` 2 per weight
    element of each (implicit zero points). Parameters: K·N, R·K, N·R; scales 0."""
    k, n = node.attrs["K"], node.attrs["N"]
    x, lora_a, lora_b = node.operand(0), node.operand(3), node.operand(5)
    rows, rank = x.numel // k, node.operand(4).shape[0]
    down, up = (rank if lora_a.numel else 0), (rank if lora_b.numel else 0)
    weights = k * n + down * k + up * n
    flops = 2 * rows * weights + rows * n * bool(up)
    parameters = ((1, k * n), (2, 0), (3, down * k), (4, 0), (5, up * n), (6, 0))
    return Cost(flops=flops, dequantize_flops=2 * weights, parameters=parameters)


@register("MatMulPacked", domain=MS, unit=MATRIX)
def matmul_packed(node: KnownNode) -> Cost:
    """A [..., K] × a block-packed weight [N, row_bytes]ᵀ: 2·M·K·N; `dequantize_flops` 2·K·N (each
    weight scaled and offset once); + M·N for global_scale; activation_type relu2 (relu, square) 2
    per output, silu 1 and 1 sigmoid. Parameters: K·N for B."""
    k, n = node.attrs["K"], node.attrs["N"]
    outputs = node.result(0).numel
    activation = text_attr(node, "activation_type", "none").lower()
    extra, transcendentals = {"none": (0, 0), "relu2": (2, 0), "relu_squared": (2, 0), "silu": (1, 1)}[activation]
    flops = 2 * k * outputs + (outputs if node.input(2) is not None else 0) + extra * outputs
    return Cost(
        flops=flops, transcendentals=transcendentals * outputs, dequantize_flops=2 * k * n, parameters=((1, k * n),)
    )


@register("GatherPacked", domain=MS)
def gather_packed(node: KnownNode) -> Cost:
    """Gather rows of a packed table [V, row_bytes] and dequantize them: 2 FLOPs per output element
    (block scale and offset). Bytes: the rows gathered (numel(indices), at most V: a repeated row is
    read once — the Gather convention) and the indices; the output written. Parameters: V·K."""
    data, indices = node.operand(0), node.operand(1)
    read = rows_bytes(data, 0, indices.numel) + indices.nbytes
    return Cost(flops=2 * node.result(0).numel, bytes_read=read, parameters=((0, data.shape[0] * node.attrs["K"]),))


# --- normalization, gating, Engram ---------------------------------------------------------------


@register("RMSNormRotary", domain=MS)
def rms_norm_rotary(node: KnownNode) -> Cost:
    """X [B, S, heads, stride], L = B·S·heads rows of the normalized width w: the RMS norm with
    scale, 4·L·w + 2L and L sqrts, then the rotary on rotary_embedding_dim channels of each row, 3
    FLOPs per rotated element. Bytes: X read and Y written; the cos/sin caches read for the B·S
    positions looked up (at most the whole cache); the rest default."""
    batch, seq, heads, _ = node.operand(0).shape
    rows = batch * seq * heads
    norm = rms_norm(rows * rms_rotary_width(node), rows)
    cost = Cost(
        flops=norm.flops + ROTARY_FLOPS * rows * node.attrs["rotary_embedding_dim"],
        transcendentals=norm.transcendentals,
    )
    return plus_work(cost, io=partial_bytes(node, rotary_caches([node.operand(3), node.operand(4)], batch * seq), {}))


@register("EngramGate", domain=MS)
def engram_gate(node: KnownNode) -> Cost:
    """key, query [B, S, hc, H], n elements in L = n/H rows: an RMS norm with scale of each (4n +
    2L, L sqrts each), the row dot 2n, / √H (L), sign·sqrt(max(|dot|, ε)) (3L, L sqrts), the
    sigmoid (L), gate·value (n); gated_value_normed another RMS norm with scale (4n + 2L, L sqrts)."""
    key = node.operand(0)
    n, rows = key.numel, key.numel // key.shape[-1]
    norms = 2 + (node.output(1) is not None)
    norm = rms_norm(n, rows)
    return Cost(
        flops=norms * norm.flops + 2 * n + 4 * rows + n, transcendentals=norms * norm.transcendentals + 2 * rows
    )


@register("GatedAdd", domain=MS)
def gated_add(node: KnownNode) -> Cost:
    """X + Y·gate: 2 FLOPs per output (a multiply, an add). With gate_weight [K, 1] (projected mode)
    each row's gate is sigmoid(gate·gate_weight) first: 2·K per row and 1 sigmoid."""
    outputs, gate = node.result(0).numel, node.operand(2)
    if node.input(3) is None:
        return Cost(flops=2 * outputs)
    rows = gate.numel // gate.shape[-1]
    return Cost(flops=2 * outputs + 2 * gate.numel, transcendentals=rows)


def _ngram_ops(node: KnownNode) -> int:
    """Per token: each n-gram order n in 2…max_ngram_size mixes n shifted ids (n multiplies, n − 1
    xors: Σ(2n − 1) = max² − 1), then one modulo per output head, + 1 add with head_offsets."""
    heads, history = ngram_heads(node)
    offsets = 1 if node.input(5 if node.op_type.startswith("Varlen") else 4) is not None else 0
    return (history + 1) ** 2 - 1 + heads * (1 + offsets)


@register("NGramHashMapping", "VarlenNGramHashMapping", domain=MS)
def ngram_hash_mapping(node: KnownNode) -> Cost:
    """Engram's n-gram hash ids: per token (max_ngram_size² − 1) integer multiplies and xors for the
    orders 2…max_ngram_size, one modulo per output head ((max − 1)·n_head_per_ngram), + 1 add per
    head with head_offsets; counted as FLOPs (one per basic arithmetic op, integer here). Bytes: the
    default."""
    return Cost(flops=node.operand(0).numel * _ngram_ops(node))


# --- selected-index sparse attention --------------------------------------------------------------


def _sparse_keys(node: KnownNode, selected: int, visible: int) -> int:
    """Keys each query attends: its selected entries (the index row's width — the counts are
    runtime values, so an upper bound), + the local window in local_plus_selected mode (−1: all
    `visible` keys)."""
    if text_attr(node, "attention_mode", "selected_only") != "local_plus_selected":
        return selected
    window = node.attrs.get("local_window_size", -1)
    return selected + (visible if window < 0 else min(window, visible))


def _rotary_and_norm(
    node: KnownNode, rows_q: int, rows_k: int, head: int, cos: int, norms: tuple[int, int]
) -> tuple[int, int]:
    """(FLOPs, transcendentals) of do_rotary (3 per rotated element of Q and new K, rot = 2·cos's
    last dim) and of the per-head Q/K RMS norms when both weights (inputs `norms`) are given."""
    flops, transcendentals = 0, 0
    if node.attrs.get("do_rotary", 0) and node.input(cos) is not None:
        flops += ROTARY_FLOPS * (rows_q + rows_k) * 2 * node.operand(cos).shape[-1]
    if node.input(norms[0]) is not None and node.input(norms[1]) is not None:
        for rows in (rows_q, rows_k):
            norm, sqrts = qk_norm(rows, head)
            flops, transcendentals = flops + norm, transcendentals + sqrts
    return flops, transcendentals


@register("DynamicSparseAttention", domain=MS, unit=MATRIX)
def dynamic_sparse_attention(node: KnownNode) -> Cost:
    """GQA over selected entries: query [B, S, H·dh], selected_indices [B·S, max_selected]; each
    query attends max_selected entries (+ local_window_size main-cache keys in local_plus_selected
    mode), an upper bound: score_cost with T = those keys (2·E·2dh + E scale + 4E − 2L, E exps;
    head_sink or smooth_softmax 2L and L exps); do_rotary, Q/K norms as GroupQueryAttention. Bytes:
    the default, except the main caches (BNSH, appended in place): read for the rows selected (S·T
    per batch and head, at most the cache), written for the S new rows."""
    query, past_key, selected = node.operand(0), node.input(3), node.operand(7)
    heads, kv_heads = node.attrs["num_heads"], node.attrs["kv_num_heads"]
    batch, seq, _ = query.shape
    head = node.result(0).shape[-1] // heads
    visible = past_key.shape[2] if past_key is not None else seq
    keys = _sparse_keys(node, selected.shape[-1], visible)
    sink = node.input(16) is not None or bool(node.attrs.get("smooth_softmax", 0))
    cost = score_cost(batch, heads, seq, keys, head, head, sink=sink)
    flops, transcendentals = _rotary_and_norm(node, batch * seq * heads, batch * seq * kv_heads, head, 11, (14, 15))
    if past_key is None:
        return plus_work(cost, flops, transcendentals)
    caches, presents = [past_key, node.input(4)], [node.output(1), node.output(2)]
    reads = {c.name: rows_bytes(c, 2, seq * keys) for c in caches if c is not None}
    writes = {c.name: rows_bytes(c, 2, seq) for c in presents if c is not None}
    return plus_work(cost, flops, transcendentals, io=partial_bytes(node, reads, writes))


@register("SparsePagedAttention", domain=MS, unit=MATRIX)
def sparse_paged_attention(node: KnownNode) -> Cost:
    """PagedAttention over selected entries: query [N, H·dh], selected_indices [N, max_selected];
    each of the N tokens attends max_selected entries (+ the local window of the main cache in
    local_plus_selected mode; −1: the most keys a sequence holds, max_blocks·block_size), an upper
    bound: score_cost with T = those keys (softcap 2E and E tanh, head_sink 2L and L exps);
    do_rotary, Q/K norms as PagedAttention. Bytes: the default, except the block caches, updated in
    place: read for N·T rows (at most the whole cache), written for the N new rows."""
    query, key_cache, table, selected = node.operand(0), node.operand(3), node.operand(7), node.operand(9)
    heads, kv_heads = node.attrs["num_heads"], node.attrs["kv_num_heads"]
    tokens = query.shape[0]
    head = node.result(0).shape[-1] // heads
    blocks, block_size = key_cache.shape[:2]
    keys = _sparse_keys(node, selected.shape[-1], table.shape[1] * block_size)
    softcap = bool(node.attrs.get("softcap", 0.0))
    cost = score_cost(1, heads, tokens, keys, head, head, softcap=softcap, sink=node.input(16) is not None)
    flops, transcendentals = _rotary_and_norm(node, tokens * heads, tokens * kv_heads, head, 14, (17, 18))
    caches = [node.operand(3), node.operand(4)]
    slots = blocks * block_size
    reads = {c.name: c.nbytes * min(tokens * keys, slots) // slots for c in caches}
    writes = {c.name: c.nbytes * min(tokens, slots) // slots for c in (node.output(1), node.output(2)) if c is not None}
    return plus_work(cost, flops, transcendentals, io=partial_bytes(node, reads, writes))


@register("SpeculativePrefixCommit", domain=MS)
def speculative_prefix_commit(node: KnownNode) -> Cost:
    """Accept the longest matching draft prefix: one compare per verifier prediction (next_tokens'
    elements); the commit is copies. Bytes: the default (the result-ring record, written through a
    pointer in ptrs, is 64 bytes a request and not counted)."""
    return Cost(flops=node.operand(0).numel)


@register("SparseAttentionIndexer", "PackedSparseAttentionIndexer", "PackedSparseAttentionIndexerMerge", domain=MS)
def sparse_attention_indexer(node: KnownNode) -> Cost:
    """Never costed (data-dependent): which blocks are pooled, scored and kept depends on the window
    plans and visible-token counts the inputs hold as values (qsa's complete blocks, csa's
    compressed entries), so no count follows from the shapes. The outputs are typed (the shape
    rules), so what follows is costed."""
    raise Uncostable(
        DATA_DEPENDENT,
        f"{node.op_type}: its pooling, scoring and top-k run over the blocks its window plans and counts select, values only the run knows",
    )
