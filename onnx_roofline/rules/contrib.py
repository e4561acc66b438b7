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

from onnx_roofline.costs import Cost
from onnx_roofline.rules.context import OpNode
from onnx_roofline.rules.linalg import gemm
from onnx_roofline.rules.registry import MATRIX, register

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


def activation_cost(node: OpNode, outputs: int) -> tuple[int, int]:
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


def _rows(shape, axis: int) -> tuple[int, int]:
    """(rows, n): rows of the dims from `axis` on, and total elements."""
    axis %= len(shape)
    return math.prod(shape[:axis]), math.prod(shape)


def _layer_norm(n: int, rows: int, affine: int) -> Cost:
    """Mean and variance per row, normalize, then `affine` per-element ops (gamma, beta)."""
    return Cost(flops=5 * n + 2 * rows + affine * n, transcendentals=rows)


def _rms_norm(n: int, rows: int) -> Cost:
    """Mean of squares per row (2n), + ε and reciprocal (2L), one sqrt per row, x·(1/rms)·gamma (2n)."""
    return Cost(flops=4 * n + 2 * rows, transcendentals=rows)


def _plus(cost: Cost, flops: int) -> Cost:
    return Cost(flops=cost.flops + flops, transcendentals=cost.transcendentals)


# --- normalizations ------------------------------------------------------------------------------


@register("SkipLayerNormalization", domain=MS)
def skip_layer_normalization(node: OpNode) -> Cost:
    """LayerNorm(input + skip + bias) over the last dim D, n elements in L = n/D rows: n adds for the
    skip, n for the bias when given, 5n + 2L for the statistics and normalize, n for gamma, n for
    beta when given — 7n + 2L with neither, 9n + 2L with both (BERT's form); L sqrts. The optional
    mean / inv_std_var / input_skip_bias_sum outputs are written (default bytes)."""
    x = node.inputs[0]
    rows, n = _rows(x.shape, -1)
    adds = n * (1 + (node.input(4) is not None))
    return _plus(_layer_norm(n, rows, affine=1 + (node.input(3) is not None)), adds)


@register("SkipSimplifiedLayerNormalization", domain=MS)
def skip_simplified_layer_normalization(node: OpNode) -> Cost:
    """RMSNorm(input + skip + bias) over the last dim: n adds for the skip, n for the bias when
    given, then 4n + 2L (mean of squares, + ε, reciprocal, scale by 1/rms and gamma): 5n + 2L FLOPs
    without bias, 6n + 2L with; L sqrts."""
    x = node.inputs[0]
    rows, n = _rows(x.shape, -1)
    adds = n * (1 + (node.input(3) is not None))
    return _plus(_rms_norm(n, rows), adds)


@register("SimplifiedLayerNormalization")
def simplified_layer_normalization(node: OpNode) -> Cost:
    """onnxruntime's RMSNorm in the ai.onnx domain: X·gamma / sqrt(mean(X²) + ε) over the dims from
    `axis` (default −1) on: 4n + 2L FLOPs, L sqrts (ai.onnx RMSNormalization's count). The optional
    inv_std_var output is written."""
    x = node.inputs[0]
    rows, n = _rows(x.shape, node.attrs.get("axis", -1))
    return _rms_norm(n, rows)


def _lookup_rows(table, lookups: int) -> int:
    """Bytes of `lookups` rows looked up in a [rows, D] table: a repeated row is read once, so at
    most the whole table (the Gather rule's convention)."""
    if table.shape[0] == 0:
        return 0
    return table.nbytes * min(lookups, table.shape[0]) // table.shape[0]


def _embed_layer_norm(node: OpNode, tables: dict[int, int], dequantize: bool) -> Cost:
    """EmbedLayerNormalization and its quantized form. `tables` maps each embedding input index to
    the number of rows it looks up."""
    out = node.outputs[0]
    rows, n = _rows(out.shape, -1)
    adds = n * (len([i for i in tables if node.input(i) is not None]) - 1)
    cost = _plus(_layer_norm(n, rows, affine=2), adds)
    mask = node.input(7)
    if mask is not None:
        batch = mask.shape[0]
        cost = _plus(cost, mask.numel - batch)  # mask_index: a sum per row of the mask
    if dequantize:  # (q − zero point)·scale for every looked-up element, gamma and beta
        hidden = out.shape[-1]
        cost = _plus(cost, 2 * (n * len([i for i in tables if node.input(i) is not None]) + 2 * hidden))
    reads = {node.inputs[i].name: _lookup_rows(node.inputs[i], lookups) for i, lookups in tables.items() if node.input(i) is not None}
    read = sum({t.name: reads.get(t.name, t.nbytes) for t in node.present_inputs}.values())
    return Cost(cost.flops, cost.transcendentals, bytes_read=read, useful_flops=cost.useful_flops)


def _embedding_lookups(node: OpNode, position_ids_index: int | None) -> dict[int, int]:
    ids = node.inputs[0]
    batch, seq = ids.shape
    positions = node.input(position_ids_index) if position_ids_index is not None else None
    return {2: ids.numel, 3: positions.numel if positions is not None else seq, 4: batch * seq}


@register("EmbedLayerNormalization", domain=MS, compute_dtype=2)
def embed_layer_normalization(node: OpNode) -> Cost:
    """LayerNorm(word[input_ids] + position[position_ids] + segment[segment_ids]) over D, n = B·S·D
    elements in L = B·S rows: one add per element per table after the first (n or 2n), 7n + 2L
    (LayerNorm with gamma and beta), L sqrts; with a mask, mask_index sums each row: B·S − B adds.
    Bytes: the tables are looked up, not read whole: word and segment B·S rows, position S rows
    (B·S with position_ids), each at most the whole table (the Gather convention); the rest default."""
    return _embed_layer_norm(node, _embedding_lookups(node, 8), dequantize=False)


@register("QEmbedLayerNormalization", domain=MS, compute_dtype=8)
def q_embed_layer_normalization(node: OpNode) -> Cost:
    """EmbedLayerNormalization with 8-bit tables, gamma and beta: the same count plus 2 FLOPs
    ((q − zero point)·scale) per looked-up element of each table and per element of gamma and beta.
    Bytes as EmbedLayerNormalization: the tables read for the rows looked up."""
    return _embed_layer_norm(node, _embedding_lookups(node, None), dequantize=True)


# --- activations and bias fusions -----------------------------------------------------------------


@register("Gelu", domain=MS)
def contrib_gelu(node: OpNode) -> Cost:
    """0.5·x·(1 + erf(x/√2)): 4 FLOPs (divide, add, two multiplies) and 1 erf per element."""
    n = node.outputs[0].numel
    return Cost(flops=GELU_ERF * n, transcendentals=n)


@register("BiasGelu", domain=MS)
def bias_gelu(node: OpNode) -> Cost:
    """Gelu(A + bias), erf form: 1 add + 4 = 5 FLOPs and 1 erf per element."""
    n = node.outputs[0].numel
    return Cost(flops=(1 + GELU_ERF) * n, transcendentals=n)


@register("FastGelu", domain=MS)
def fast_gelu(node: OpNode) -> Cost:
    """0.5·x·(1 + tanh(0.797885·x + 0.035677·x³)) of X (+ bias): 8 FLOPs (x³ two multiplies, two
    scalings, add, 1 +, two multiplies) and 1 tanh per element, +1 FLOP for the bias when given."""
    n = node.outputs[0].numel
    return Cost(flops=(GELU_TANH + (node.input(1) is not None)) * n, transcendentals=n)


@register("QuickGelu", domain=MS)
def quick_gelu(node: OpNode) -> Cost:
    """x·sigmoid(alpha·x): 2 FLOPs (scale, multiply) and 1 sigmoid per element."""
    n = node.outputs[0].numel
    return Cost(flops=2 * n, transcendentals=n)


@register("BiasAdd", domain=MS)
def bias_add(node: OpNode) -> Cost:
    """X + bias + skip: 2 adds per output element."""
    return Cost(flops=2 * node.outputs[0].numel)


@register("BiasSplitGelu", domain=MS)
def bias_split_gelu(node: OpNode) -> Cost:
    """X [N, S, 2D] + bias, split in halves, left·Gelu(right) → [N, S, D]: per output element 2 bias
    adds (one per half), 4 for the erf Gelu and 1 multiply = 7 FLOPs, 1 erf."""
    n = node.outputs[0].numel
    return Cost(flops=(2 + GELU_ERF + 1) * n, transcendentals=n)


@register("BiasSoftmax", domain=MS)
def bias_softmax(node: OpNode) -> Cost:
    """softmax(data + bias) over the dims from `axis` (default 1) on, n elements in L rows: n adds
    plus the softmax's 4n − 2L FLOPs; n exps."""
    rows, n = _rows(node.inputs[0].shape, node.attrs.get("axis", 1))
    return Cost(flops=n + max(4 * n - 2 * rows, 0), transcendentals=n)


# --- fused matrix ops ------------------------------------------------------------------------------


def _fused_matmul_k(node: OpNode) -> int:
    """The contracted size of A. transBatchA moves A's first dim next to the last (the batch dims
    shift left); transA swaps the last two: K is A's last dim without transA, else the dim that
    lands second to last — A's first under transBatchA, A's second-to-last otherwise."""
    a = node.inputs[0].shape
    if not node.attrs.get("transA", 0):
        return a[-1]
    if node.attrs.get("transBatchA", 0) and len(a) > 2:
        return a[0]
    return a[-2]


@register("FusedMatMul", "TransposeMatMul", domain=MS, unit=MATRIX)
def fused_matmul(node: OpNode) -> Cost:
    """alpha·op(A)·op(B), op a transpose of the last two (transA/B) and/or batch dims (transBatchA/B):
    2·K per output element, plus one multiply per output when alpha ≠ 1."""
    outputs = node.outputs[0].numel
    alpha = node.attrs.get("alpha", 1.0) != 1.0
    return Cost(flops=2 * _fused_matmul_k(node) * outputs + (outputs if alpha else 0))


@register("FusedMatMulActivation", domain=MS, unit=MATRIX)
def fused_matmul_activation(node: OpNode) -> Cost:
    """FusedMatMul followed by `activation` per output element (the activation's elementwise count)."""
    cost = fused_matmul(node)
    flops, transcendentals = activation_cost(node, node.outputs[0].numel)
    return Cost(flops=cost.flops + flops, transcendentals=transcendentals)


@register("FusedGemm", domain=MS, unit=MATRIX)
def fused_gemm(node: OpNode) -> Cost:
    """Gemm (2·M·K·N, + M·N for alpha ≠ 1, + M·N for C, doubled when beta ≠ 1) followed by
    `activation` per output element."""
    flops, transcendentals = activation_cost(node, node.outputs[0].numel)
    return Cost(flops=gemm(node).flops + flops, transcendentals=transcendentals)


@register("GemmFastGelu", domain=MS, unit=MATRIX)
def gemm_fast_gelu(node: OpNode) -> Cost:
    """X [..., K] × W [K, N] (+ bias) then FastGelu: 2·K per output element, +1 for the bias, +8 and
    1 tanh for the tanh-form Gelu."""
    outputs = node.outputs[0].numel
    k = node.inputs[0].shape[-1]
    bias = outputs if node.input(2) is not None else 0
    return Cost(flops=2 * k * outputs + bias + GELU_TANH * outputs, transcendentals=outputs)


def _conv_flops(node: OpNode) -> int:
    """Conv's count: 2·taps per output (taps = (Cin/group)·kH·kW from W), + one per output for B."""
    taps = math.prod(node.inputs[1].shape[1:])
    outputs = node.outputs[0].numel
    return 2 * taps * outputs + (outputs if node.input(2) is not None else 0)


@register("FusedConv", domain=MS, unit=MATRIX)
def fused_conv(node: OpNode) -> Cost:
    """Conv (2·N·Cout·Hout·Wout·(Cin/group)·kH·kW, + one per output for the bias), + one add per
    output for the sum input Z, then `activation` per output element."""
    outputs = node.outputs[0].numel
    flops, transcendentals = activation_cost(node, outputs)
    z = outputs if node.input(3) is not None else 0
    return Cost(flops=_conv_flops(node) + z + flops, transcendentals=transcendentals)


@register("NhwcConv", domain=MS, unit=MATRIX)
def nhwc_conv(node: OpNode) -> Cost:
    """Conv in NHWC layout: the same count, 2·taps per output (taps = (Cin/group)·kH·kW from W
    [M, C/group, kH, kW]) + one per output for the bias."""
    return Cost(flops=_conv_flops(node))
