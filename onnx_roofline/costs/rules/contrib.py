"""onnxruntime's fused contrib ops (com.microsoft, and SimplifiedLayerNormalization, which ORT
defines in the ai.onnx domain): skip/simplified/embedding layer norms, the GELU family, bias-add
fusions, BiasSoftmax, and the fused matrix ops FusedMatMul, FusedGemm, FusedConv, GemmFastGelu.

A fused op costs what the ops it replaces cost under the same conventions (DESIGN.md; the
elementwise, normalization and reduction rules), counted on the fused op's own shapes:

    LayerNorm over n elements in L rows     5n + 2L, L sqrts; + n for gamma, + n for beta
    RMS norm (SimplifiedLayerNormalization) 4n + 2L (gamma included), L sqrts
    softmax over n elements in L rows       4n − 2L, n exps
    Gelu, erf form                          4 per element, 1 erf
    Gelu, tanh form (FastGelu)              8 per element, 1 tanh
    each add (bias, skip, residual)         1 per element

The bytes are the framework default (each distinct input read once, each output written once) —
which for a fused op is the point: the intermediates it keeps on chip are never counted — except
where an op reads only part of a tensor (EmbedLayerNormalization's table lookups), as noted."""

from __future__ import annotations

import math

from onnx_roofline.costs.cost import Cost
from onnx_roofline.costs.rules.linalg import gemm
from onnx_roofline.costs.rules.registry import MATRIX, register
from onnx_roofline.model.op_node import KnownNode

MS = "com.microsoft"

GELU_ERF = 4  # 0.5·x·(1 + erf(x/√2)): divide, add, two multiplies; 1 erf
GELU_TANH = 8  # 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))): x³ (2), 5 multiply/adds, final multiply; 1 tanh

# Activations fused into FusedConv/FusedGemm/FusedMatMulActivation: (FLOPs, transcendentals) per
# output element, as the elementwise rules count the standalone op.
ACTIVATIONS: dict[str, tuple[int, int]] = {
    "Relu": (1, 0),
    "LeakyRelu": (2, 0),
    "Tanh": (0, 1),
    "Sigmoid": (0, 1),
    "Clip": (2, 0),
    "HardSigmoid": (4, 0),
    "HardSwish": (5, 0),
    "Elu": (3, 1),
    "Selu": (4, 1),
    "Softplus": (1, 2),
    "Softsign": (3, 0),
    "ThresholdedRelu": (1, 0),
    "ScaledTanh": (2, 1),
    "ParametricSoftplus": (3, 2),
    "Gelu": (GELU_ERF, 1),
    "FastGelu": (GELU_TANH, 1),
    "QuickGelu": (2, 1),
}


def activation_cost(node: KnownNode, outputs: int) -> tuple[int, int]:
    """(FLOPs, transcendentals) of the node's `activation` attribute over `outputs` elements; no
    attribute is no activation; an activation this table lacks is an error, never zero."""
    name = node.attrs.get("activation")
    if not name:
        return 0, 0
    name = name.decode() if isinstance(name, bytes) else name
    if name not in ACTIVATIONS:
        raise ValueError(f"{node.op_type}: no cost for fused activation {name!r}")
    flops, transcendentals = ACTIVATIONS[name]
    return flops * outputs, transcendentals * outputs


def norm_rows(shape, axis: int) -> tuple[int, int]:
    """(rows, n): rows of the dims from `axis` on, and total elements."""
    axis %= len(shape)
    return math.prod(shape[:axis]), math.prod(shape)


def layer_norm(n: int, rows: int, affine: int) -> Cost:
    """Mean and variance per row, normalize, then `affine` per-element ops (gamma, beta)."""
    return Cost(flops=5 * n + 2 * rows + affine * n, transcendentals=rows)


def rms_norm(n: int, rows: int) -> Cost:
    """Mean of squares per row (2n), + ε and reciprocal (2L), one sqrt per row, x·(1/rms)·gamma (2n)."""
    return Cost(flops=4 * n + 2 * rows, transcendentals=rows)


def _plus(cost: Cost, flops: int) -> Cost:
    return Cost(flops=cost.flops + flops, transcendentals=cost.transcendentals)


# --- normalizations ------------------------------------------------------------------------------


@register("SkipLayerNormalization", domain=MS)
def skip_layer_normalization(node: KnownNode) -> Cost:
    """LayerNorm(input + skip + bias) over the last dim D, n elements in L = n/D rows: n adds for the
    skip, n for the bias when given, 5n + 2L for the statistics and normalize, n for gamma, n for
    beta when given — 7n + 2L with neither, 9n + 2L with both (BERT's form); L sqrts. The optional
    mean / inv_std_var / input_skip_bias_sum outputs are written (default bytes)."""
    x = node.operand(0)
    rows, n = norm_rows(x.shape, -1)
    adds = n * (1 + (node.input(4) is not None))
    return _plus(layer_norm(n, rows, affine=1 + (node.input(3) is not None)), adds)


@register("SkipSimplifiedLayerNormalization", domain=MS)
def skip_simplified_layer_normalization(node: KnownNode) -> Cost:
    """RMSNorm(input + skip + bias) over the last dim: n adds for the skip, n for the bias when
    given, then 4n + 2L (mean of squares, + ε, reciprocal, scale by 1/rms and gamma): 5n + 2L FLOPs
    without bias, 6n + 2L with; L sqrts."""
    x = node.operand(0)
    rows, n = norm_rows(x.shape, -1)
    adds = n * (1 + (node.input(3) is not None))
    return _plus(rms_norm(n, rows), adds)


@register("SimplifiedLayerNormalization")
def simplified_layer_normalization(node: KnownNode) -> Cost:
    """onnxruntime's RMSNorm in the ai.onnx domain: X·gamma / sqrt(mean(X²) + ε) over the dims from
    `axis` (default −1) on: 4n + 2L FLOPs, L sqrts (ai.onnx RMSNormalization's count). The optional
    inv_std_var output is written."""
    x = node.operand(0)
    rows, n = norm_rows(x.shape, node.attrs.get("axis", -1))
    return rms_norm(n, rows)


def _lookup_rows(table, lookups: int) -> int:
    """Bytes of `lookups` rows looked up in a [rows, D] table: a repeated row is read once, so at
    most the whole table (the Gather rule's convention)."""
    if table.shape[0] == 0:
        return 0
    return table.nbytes * min(lookups, table.shape[0]) // table.shape[0]


def _embed_layer_norm(node: KnownNode, tables: dict[int, int], dequantize: bool) -> Cost:
    """EmbedLayerNormalization and its quantized form. `tables` maps each embedding input index to
    the number of rows it looks up."""
    out = node.result(0)
    rows, n = norm_rows(out.shape, -1)
    adds = n * (len([i for i in tables if node.input(i) is not None]) - 1)
    cost = _plus(layer_norm(n, rows, affine=2), adds)
    mask = node.input(7)
    if mask is not None:
        batch = mask.shape[0]
        cost = _plus(cost, mask.numel - batch)  # mask_index: a sum per row of the mask
    if dequantize:  # (q − zero point)·scale for every looked-up element, gamma and beta
        hidden = out.shape[-1]
        cost = _plus(cost, 2 * (n * len([i for i in tables if node.input(i) is not None]) + 2 * hidden))
    reads = {t.name: _lookup_rows(t, lookups) for i, lookups in tables.items() if (t := node.input(i)) is not None}
    read = sum({t.name: reads.get(t.name, t.nbytes) for t in node.present_inputs}.values())
    return Cost(cost.flops, cost.transcendentals, bytes_read=read, useful_flops=cost.useful_flops)


def _embedding_lookups(node: KnownNode, position_ids_index: int | None) -> dict[int, int]:
    ids = node.operand(0)
    batch, seq = ids.shape
    positions = node.input(position_ids_index) if position_ids_index is not None else None
    return {2: ids.numel, 3: positions.numel if positions is not None else seq, 4: batch * seq}


@register("EmbedLayerNormalization", domain=MS, compute_dtype=2)
def embed_layer_normalization(node: KnownNode) -> Cost:
    """LayerNorm(word[input_ids] + position[position_ids] + segment[segment_ids]) over D, n = B·S·D
    elements in L = B·S rows: one add per element per table after the first (n or 2n), 7n + 2L
    (LayerNorm with gamma and beta), L sqrts; with a mask, mask_index sums each row: B·S − B adds.
    Bytes: the tables are looked up, not read whole: word and segment B·S rows, position S rows
    (B·S with position_ids), each at most the whole table (the Gather convention); the rest default."""
    return _embed_layer_norm(node, _embedding_lookups(node, 8), dequantize=False)


@register("QEmbedLayerNormalization", domain=MS, compute_dtype=8)
def q_embed_layer_normalization(node: KnownNode) -> Cost:
    """EmbedLayerNormalization with 8-bit tables, gamma and beta: the same count plus 2 FLOPs
    ((q − zero point)·scale) per looked-up element of each table and per element of gamma and beta.
    Bytes as EmbedLayerNormalization: the tables read for the rows looked up."""
    return _embed_layer_norm(node, _embedding_lookups(node, None), dequantize=True)


# --- activations and bias fusions -----------------------------------------------------------------


@register("Gelu", domain=MS)
def contrib_gelu(node: KnownNode) -> Cost:
    """0.5·x·(1 + erf(x/√2)): 4 FLOPs (divide, add, two multiplies) and 1 erf per element."""
    n = node.result(0).numel
    return Cost(flops=GELU_ERF * n, transcendentals=n)


@register("BiasGelu", domain=MS)
def bias_gelu(node: KnownNode) -> Cost:
    """Gelu(A + bias), erf form: 1 add + 4 = 5 FLOPs and 1 erf per element."""
    n = node.result(0).numel
    return Cost(flops=(1 + GELU_ERF) * n, transcendentals=n)


@register("FastGelu", domain=MS)
def fast_gelu(node: KnownNode) -> Cost:
    """0.5·x·(1 + tanh(0.797885·x + 0.035677·x³)) of X (+ bias): 8 FLOPs (x³ two multiplies, two
    scalings, add, 1 +, two multiplies) and 1 tanh per element, +1 FLOP for the bias when given."""
    n = node.result(0).numel
    return Cost(flops=(GELU_TANH + (node.input(1) is not None)) * n, transcendentals=n)


@register("QuickGelu", domain=MS)
def quick_gelu(node: KnownNode) -> Cost:
    """x·sigmoid(alpha·x): 2 FLOPs (scale, multiply) and 1 sigmoid per element."""
    n = node.result(0).numel
    return Cost(flops=2 * n, transcendentals=n)


@register("BiasAdd", domain=MS)
def bias_add(node: KnownNode) -> Cost:
    """X + bias + skip: 2 adds per output element."""
    return Cost(flops=2 * node.result(0).numel)


@register("BiasSplitGelu", domain=MS)
def bias_split_gelu(node: KnownNode) -> Cost:
    """X [N, S, 2D] + bias, split in halves, left·Gelu(right) → [N, S, D]: per output element 2 bias
    adds (one per half), 4 for the erf Gelu and 1 multiply = 7 FLOPs, 1 erf."""
    n = node.result(0).numel
    return Cost(flops=(2 + GELU_ERF + 1) * n, transcendentals=n)


@register("BiasSoftmax", domain=MS)
def bias_softmax(node: KnownNode) -> Cost:
    """softmax(data + bias) over the dims from `axis` (default 1) on, n elements in L rows: n adds
    plus the softmax's 4n − 2L FLOPs; n exps."""
    rows, n = norm_rows(node.operand(0).shape, node.attrs.get("axis", 1))
    return Cost(flops=n + max(4 * n - 2 * rows, 0), transcendentals=n)


# --- fused matrix ops ------------------------------------------------------------------------------


def _fused_matmul_k(node: KnownNode) -> int:
    """The contracted size of A. transBatchA moves A's first dim next to the last (the batch dims
    shift left); transA swaps the last two: K is A's last dim without transA, else the dim that
    lands second to last — A's first under transBatchA, A's second-to-last otherwise."""
    a = node.operand(0).shape
    if not node.attrs.get("transA", 0):
        return a[-1]
    if node.attrs.get("transBatchA", 0) and len(a) > 2:
        return a[0]
    return a[-2]


@register("FusedMatMul", "TransposeMatMul", domain=MS, unit=MATRIX)
def fused_matmul(node: KnownNode) -> Cost:
    """alpha·op(A)·op(B), op a transpose of the last two (transA/B) and/or batch dims (transBatchA/B):
    2·K per output element, plus one multiply per output when alpha ≠ 1."""
    outputs = node.result(0).numel
    alpha = node.attrs.get("alpha", 1.0) != 1.0
    return Cost(flops=2 * _fused_matmul_k(node) * outputs + (outputs if alpha else 0))


@register("FusedMatMulActivation", domain=MS, unit=MATRIX)
def fused_matmul_activation(node: KnownNode) -> Cost:
    """FusedMatMul followed by `activation` per output element (the activation's elementwise count)."""
    cost = fused_matmul(node)
    flops, transcendentals = activation_cost(node, node.result(0).numel)
    return Cost(flops=cost.flops + flops, transcendentals=transcendentals)


@register("FusedGemm", domain=MS, unit=MATRIX)
def fused_gemm(node: KnownNode) -> Cost:
    """Gemm (2·M·K·N, + M·N for alpha ≠ 1, + M·N for C, doubled when beta ≠ 1) followed by
    `activation` per output element."""
    flops, transcendentals = activation_cost(node, node.result(0).numel)
    return Cost(flops=gemm(node).flops + flops, transcendentals=transcendentals)


@register("GemmFastGelu", domain=MS, unit=MATRIX)
def gemm_fast_gelu(node: KnownNode) -> Cost:
    """X [..., K] × W [K, N] (+ bias) then FastGelu: 2·K per output element, +1 for the bias, +8 and
    1 tanh for the tanh-form Gelu."""
    outputs = node.result(0).numel
    k = node.operand(0).shape[-1]
    bias = outputs if node.input(2) is not None else 0
    return Cost(flops=2 * k * outputs + bias + GELU_TANH * outputs, transcendentals=outputs)


def _conv_flops(node: KnownNode) -> int:
    """Conv's count: 2·taps per output (taps = (Cin/group)·kH·kW from W), + one per output for B."""
    taps = math.prod(node.operand(1).shape[1:])
    outputs = node.result(0).numel
    return 2 * taps * outputs + (outputs if node.input(2) is not None else 0)


@register("FusedConv", domain=MS, unit=MATRIX)
def fused_conv(node: KnownNode) -> Cost:
    """Conv (2·N·Cout·Hout·Wout·(Cin/group)·kH·kW, + one per output for the bias), + one add per
    output for the sum input Z, then `activation` per output element."""
    outputs = node.result(0).numel
    flops, transcendentals = activation_cost(node, outputs)
    z = outputs if node.input(3) is not None else 0
    return Cost(flops=_conv_flops(node) + z + flops, transcendentals=transcendentals)


@register("NhwcConv", domain=MS, unit=MATRIX)
def nhwc_conv(node: KnownNode) -> Cost:
    """Conv in NHWC layout: the same count, 2·taps per output (taps = (Cin/group)·kH·kW from W
    [M, C/group, kH, kW]) + one per output for the bias."""
    return Cost(flops=_conv_flops(node))


# --- onnxruntime's newer fusions: group norms, gated norms and activations -------------------------

# Named activations of MoE's activation_type and MatMulNBitsMlp's activation: (FLOPs,
# transcendentals) per element, as the elementwise rules count the standalone op.
NAMED_ACTIVATIONS: dict[str, tuple[int, int]] = {
    "identity": (0, 0),
    "relu": (1, 0),
    "sigmoid": (0, 1),
    "silu": (1, 1),  # x·sigmoid(x)
    "swish": (1, 1),
    "gelu": (GELU_ERF, 1),
    "gelu_tanh": (GELU_TANH, 1),
}
SWIGLU = 4  # G·sigmoid(alpha·G)·(L + beta): alpha·G, G·σ, L + beta, the product; 1 sigmoid


def named_activation(node: KnownNode, name: str, elements: int) -> tuple[int, int]:
    """(FLOPs, transcendentals) of activation `name` over `elements`; an unknown name is an error."""
    key = (name.decode() if isinstance(name, bytes) else name).lower()
    if key not in NAMED_ACTIVATIONS:
        raise ValueError(f"{node.op_type}: no cost for activation {name!r}")
    flops, transcendentals = NAMED_ACTIVATIONS[key]
    return flops * elements, transcendentals * elements


def _group_norm(node: KnownNode, adds: int) -> Cost:
    """GroupNorm's count over X (n elements, L = N·groups) after `adds` elementwise adds per element."""
    x = node.operand(0)
    n = x.numel
    cost = _plus(layer_norm(n, x.shape[0] * node.attrs["groups"], affine=2), adds * n)
    if node.attrs.get("activation", 0):  # SiLU: x·sigmoid(x)
        return Cost(flops=cost.flops + n, transcendentals=cost.transcendentals + n)
    return cost


@register("GroupNorm", domain=MS)
def group_norm(node: KnownNode) -> Cost:
    """X [N, H, W, C] (channels_last=1, the default) or [N, C, H, W], C channels in `groups` groups,
    n elements in L = N·groups groups: 5n + 2L to standardize, n for gamma, n for beta (7n + 2L),
    L sqrts; activation=1 (SiLU, x·sigmoid(x)) adds n FLOPs and n sigmoids."""
    return _group_norm(node, adds=0)


@register("SkipGroupNorm", domain=MS)
def skip_group_norm(node: KnownNode) -> Cost:
    """GroupNorm(X + skip + bias): n adds for the skip (broadcast from [N, C] or [N, 1, 1, C] or
    whole), n for the bias when given, then GroupNorm's 7n + 2L (+ n and n sigmoids for SiLU); L
    sqrts. The sum S (output 1), when asked for, is written."""
    return _group_norm(node, adds=1 + (node.input(4) is not None))


@register("BranchwiseRMSNorm", domain=MS)
def branchwise_rms_norm(node: KnownNode) -> Cost:
    """An RMS norm of each branch's H features: X grouped [..., C, H] (or flattened [..., C·H] with
    num_branches = C), n elements in L = n/H rows: 4n + 2L with the optional scale, 3n + 2L without
    (no scale multiply); L sqrts."""
    x = node.operand(0)
    branches = node.attrs.get("num_branches", 0)
    width = x.shape[-1] // branches if branches else x.shape[-1]
    rows = x.numel // width
    cost = rms_norm(x.numel, rows)
    return cost if node.input(1) is not None else _plus(cost, -x.numel)


@register("GatedRMSNorm", domain=MS)
def gated_rms_norm(node: KnownNode) -> Cost:
    """Y = X·rsqrt(mean(X²) + ε)·scale·act(gate), the mean over each group of C = len(scale)
    elements (L = n/C rows): 4n + 2L and L sqrts for the RMS norm with scale, n for the gating
    multiply, and the gate's activation per element: silu/swish z·sigmoid(z) 1 FLOP and 1 sigmoid,
    sigmoid 1 sigmoid."""
    x, scale = node.operand(0), node.operand(1)
    n = x.numel
    flops, transcendentals = named_activation(node, node.attrs.get("activation", "silu"), n)
    cost = rms_norm(n, n // scale.numel)
    return Cost(flops=cost.flops + n + flops, transcendentals=cost.transcendentals + transcendentals)


@register("ScaledSiLU", domain=MS)
def scaled_silu(node: KnownNode) -> Cost:
    """z = scale·x, y = z·sigmoid(z): 2 FLOPs (scale, multiply) and 1 sigmoid per element
    (QuickGelu's count)."""
    n = node.result(0).numel
    return Cost(flops=2 * n, transcendentals=n)


@register("SwiGLU", domain=MS)
def swiglu(node: KnownNode) -> Cost:
    """G·sigmoid(alpha·G)·(L + beta) per output element (G the gate, L the up half): alpha·G, G·σ,
    L + beta and the product, 4 FLOPs, and 1 sigmoid; a limit > 0 clamps G above and L on both
    sides: 3 more."""
    n = node.result(0).numel
    clamps = 3 if node.attrs.get("limit", 0.0) > 0 else 0
    return Cost(flops=(SWIGLU + clamps) * n, transcendentals=n)


@register("BiasDropout", domain=MS)
def bias_dropout(node: KnownNode) -> Cost:
    """Dropout(data + bias) + residual: per element 1 add for the bias and 1 for the residual when
    given; in training (training_mode a constant true) 2 more (compare a draw with the ratio, scale
    the kept value: the Dropout rule's count). The bool mask, when asked for, is written."""
    n = node.result(0).numel
    flag = node.input_value(4)
    training = flag is not None and flag.size > 0 and bool(flag.reshape(-1)[0])
    return Cost(flops=n * (1 + (node.input(2) is not None) + 2 * training))


# --- GemmFloat8, mixture of experts --------------------------------------------------------------


def text_attr(node: KnownNode, name: str, default: str) -> str:
    value = node.attrs.get(name, default)
    return value.decode() if isinstance(value, bytes) else value


@register("GemmFloat8", domain=MS, unit=MATRIX)
def gemm_float8(node: KnownNode) -> Cost:
    """Y = activation(alpha·A'·B' + beta·C), A and B in float8 (or float): 2·M·K·N, + M·N for
    alpha ≠ 1, + M·N for C when beta ≠ 0 (the default; 2·M·N when beta ∉ {0, 1}), + M·N to apply
    scaleA·scaleB/scaleY when any scale is given, + the activation per output (RELU 1; GELU, the
    tanh form cuBLASLt applies, 8 and 1 tanh). Computes in A's dtype (float8: the fp8 peak)."""
    a = node.operand(0).shape
    outputs = node.result(0).numel
    flops = 2 * (a[0] if node.attrs.get("transA", 0) else a[1]) * outputs
    flops += outputs * (node.attrs.get("alpha", 1.0) != 1.0)
    beta = node.attrs.get("beta", 0.0)
    if node.input(2) is not None and beta != 0.0:
        flops += outputs * (2 if beta != 1.0 else 1)
    flops += outputs * any(node.input(i) is not None for i in (3, 4, 5))
    activation = text_attr(node, "activation", "NONE").upper()
    extra, transcendentals = {"NONE": (0, 0), "RELU": (1, 0), "GELU": (GELU_TANH, 1)}[activation]
    return Cost(flops=flops + extra * outputs, transcendentals=transcendentals * outputs)


def expert_reads(node: KnownNode, experts: int, used: int, indices: tuple[int, ...]) -> dict[str, int]:
    """Bytes of the per-expert tensors at `indices` ([E, ...] weights, scales, biases, zero points)
    when `used` of the `experts` are routed to: each used expert's slice is read once."""
    reads = {}
    for index in indices:
        tensor = node.input(index)
        if tensor is not None:
            reads[tensor.name] = tensor.nbytes * min(used, experts) // experts
    return reads


def _moe(node: KnownNode, weights: dict[str, int], biases: tuple[int, int, int], fc3: bool) -> tuple[int, int, int]:
    """(FLOPs, transcendentals, used experts) of a mixture of experts over T tokens of width D, E
    experts, top-k routing. `weights`: {"fused": f·I (fc1's output width), "inter": I}."""
    x, router = node.operand(0), node.operand(1)
    hidden, experts = x.shape[-1], router.shape[-1]
    tokens, k = x.numel // hidden, node.attrs.get("k", 1)
    fused, inter = weights["fused"], weights["inter"]
    routed = tokens * k
    activation = text_attr(node, "activation_type", "relu").lower()
    pair = 2 * hidden * fused + 2 * inter * hidden + 2 * hidden  # fc1, fc2, weight and accumulate
    pair += fused * (node.input(biases[0]) is not None) + hidden * (node.input(biases[1]) is not None)
    if fc3:
        pair += 2 * hidden * inter + inter * (node.input(biases[2]) is not None) + inter  # fc3 and the gating multiply
    if activation == "swiglu":
        pair_flops, pair_transcendentals = SWIGLU * inter, inter
    else:
        pair_flops, pair_transcendentals = named_activation(node, activation, inter if fc3 else fused)
    routing = tokens * (4 * experts - 2 + k * (experts - 1))  # softmax over E, k arg-max passes
    if node.attrs.get("normalize_routing_weights", 0):
        routing += tokens * (2 * k - 1)
    flops = routed * (pair + pair_flops) + routing
    return flops, routed * pair_transcendentals + tokens * experts, min(routed, experts)


@register("MoE", domain=MS, unit=MATRIX)
def moe(node: KnownNode) -> Cost:
    """Mixture of experts, input [T, D] (or [B, S, D]), router logits [T, E], fc1 [E, f·I, D]
    (f = 2 when the gate and up projections are fused), fc2 [E, D, I], optional fc3 [E, I, D]. Per
    token: softmax over E (4E − 2 FLOPs, E exps), top-k (k·(E − 1) compares), 2k − 1 to renormalize
    when normalize_routing_weights; per routed (token, expert) pair: fc1 2·D·f·I, fc2 2·I·D, fc3
    2·D·I + I gating multiplies when given, one add per bias element, the activation per element
    (swiglu 4 FLOPs and 1 sigmoid per I; relu, gelu, silu as their elementwise counts), and 2·D to
    weight and accumulate the expert's output. Bytes: each expert's weights and biases are read once
    when any token is routed to it (min(E, T·k) experts), the rest default."""
    fc3 = node.input(6) is not None
    flops, transcendentals, used = _moe(
        node, {"fused": node.operand(2).shape[1], "inter": node.operand(4).shape[2]}, (3, 5, 7), fc3
    )
    reads = expert_reads(node, node.operand(1).shape[-1], used, (2, 3, 4, 5, 6, 7))
    read = sum({t.name: reads.get(t.name, t.nbytes) for t in node.present_inputs}.values())
    return Cost(flops=flops, transcendentals=transcendentals, bytes_read=read)


@register("QMoE", domain=MS, unit=MATRIX)
def qmoe(node: KnownNode) -> Cost:
    """MoE with block- or channel-quantized expert weights (uint8 packing 8/bits values per byte,
    bits from expert_weight_bits, default 4): MoE's count; `dequantize_flops` each weight element of
    each used expert dequantized once ((q − zero point)·scale: 2 FLOPs, 1 without zero points). f·I from fc1's
    rows, I = f·I / 2 under swiglu_fusion, D from the input. Bytes: the used experts' quantized
    weights, scales, biases and zero points (min(E, T·k) of E), the rest default. Parameters: every
    expert's weights as their logical elements (f·I·D, D·I, I·D), scales and zero points 0."""
    hidden = node.operand(0).shape[-1]
    fused = node.operand(2).shape[1]
    inter = fused // 2 if node.attrs.get("swiglu_fusion", 0) else fused
    fc3 = node.input(8) is not None
    flops, transcendentals, used = _moe(node, {"fused": fused, "inter": inter}, (4, 7, 10), fc3)
    weight_elements = used * (fused * hidden + hidden * inter + (inter * hidden if fc3 else 0))
    zero_points = any(node.input(i) is not None for i in (11, 12, 13))
    dequantize = weight_elements * (2 if zero_points else 1)
    reads = expert_reads(node, node.operand(1).shape[-1], used, (2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13))
    read = sum({t.name: reads.get(t.name, t.nbytes) for t in node.present_inputs}.values())
    experts = node.operand(1).shape[-1]
    logical = {
        2: experts * fused * hidden,
        5: experts * hidden * inter,
        8: experts * inter * hidden,
    }  # all experts' weights
    metadata = ((3, 0), (6, 0), (9, 0), (11, 0), (12, 0), (13, 0))  # scales and zero points
    parameters = tuple(logical.items()) + metadata
    return Cost(
        flops=flops,
        transcendentals=transcendentals,
        bytes_read=read,
        dequantize_flops=dequantize,
        parameters=parameters,
    )


# --- hyper-connections -----------------------------------------------------------------------------


def _branches(node: KnownNode) -> tuple[int, int]:
    """(C, H): streams grouped [..., C, H], or flattened [..., C·H] with num_branches = C."""
    streams = node.operand(0).shape
    branches = node.attrs.get("num_branches", 0)
    return (branches, streams[-1] // branches) if branches else (streams[-2], streams[-1])


@register("HyperConnectionPreMix", domain=MS)
def hyper_connection_pre_mix(node: KnownNode) -> Cost:
    """Y[..., h] = reduction_scale·Σ_c X[..., c, h]·pre_mix[..., c, h] over C streams: C
    multiply-adds, 2·C FLOPs, per output element, + 1 for a reduction_scale ≠ 1."""
    branches, _ = _branches(node)
    outputs = node.result(0).numel
    return Cost(flops=outputs * (2 * branches + (node.attrs.get("reduction_scale", 1.0) != 1.0)))


@register("HyperConnectionPostMix", domain=MS)
def hyper_connection_post_mix(node: KnownNode) -> Cost:
    """Y[..., k, h] = Σ_c stream_mix[..., c, k]·X[..., c, h] + post_mix[..., k, h]·block_output[..., h]:
    per output element 2·C FLOPs for the stream mix when given (the identity otherwise: none) and
    2 for the injection (a multiply-add)."""
    branches, _ = _branches(node)
    mix = 2 * branches if node.input(3) is not None else 0
    return Cost(flops=node.result(0).numel * (mix + 2))


@register("HyperConnectionLowRankMix", domain=MS, unit=MATRIX)
def hyper_connection_low_rank_mix(node: KnownNode) -> Cost:
    """One hyper-connection block over T rows of C streams × H features (n = T·C·H), rank R: the
    prologue S = streams + prev_post_gate·prev_block_output (2n, when given); an RMS norm per branch
    with norm_scale (4n + 2·T·C, T·C sqrts); hn·down (2·n·R) and ScaledSiLU on it (2·T·R, T·R
    sigmoids); ·up (2·n·R) and a sigmoid per stream feature (n); pre_output Σ_c hn·g (2n, + T·H for
    a reduction_scale ≠ 1); hn·inject (2·n·C), / gate_div and · gate_mul (2·T·C), T·C sigmoids."""
    branches, width = _branches(node)
    n = node.operand(0).numel
    rows = n // (branches * width)
    rank = node.operand(2).shape[1]
    prologue = 2 * n if node.input(5) is not None and node.input(6) is not None else 0
    scale = rows * width * (node.attrs.get("reduction_scale", 1.0) != 1.0)
    flops = (
        prologue
        + 4 * n
        + 2 * rows * branches
        + 4 * n * rank
        + 2 * rows * rank
        + 2 * n
        + scale
        + 2 * n * branches
        + 2 * rows * branches
    )
    return Cost(flops=flops, transcendentals=rows * branches + rows * rank + n + rows * branches)
