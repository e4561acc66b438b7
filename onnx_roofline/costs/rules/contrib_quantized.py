"""onnxruntime's remaining contrib ops (com.microsoft): the cuBLASLt-ordered int8 family
(QuantizeWithOrder, DequantizeWithOrder, QOrderedGelu, QOrderedLayerNormalization,
QOrderedAttention, QOrderedLongformerAttention; QOrderedMatMul is in quantization.py), the int4
MatMulFpQ4, DecoderAttention, AttnLSTM, the generation helpers (NGramRepeatBlock,
BifurcationDetector, DynamicTimeWarping), the generation loops (GreedySearch, Sampling, BeamSearch,
WhisperBeamSearch) and the precompiled EP blobs (EPContext, Snpe).

Each op costs what its parts cost under the existing rules: quantize 4 FLOPs and dequantize 1 per
element (symmetric: the ordered ops have no zero points; quantization.py), LayerNorm and Gelu as
contrib.py counts them, attention as attention.py's score_cost, the LSTM cell as recurrent.py's.

A generation loop runs its decoder subgraph once per generated token, a runtime number of times:
it stops at max_length or earlier, when every sequence has emitted eos. Its cost is the upper
bound — every step up to max_length, each decoder step costed as a subgraph at that step's shapes,
plus the search's own work on each step's logits — when max_length (and num_beams) are constants;
otherwise the work is runtime data (DATA_DEPENDENT). An EP blob's work is not in the graph at all
(UNSUPPORTED)."""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper

from onnx_roofline.costs.cost import CompositeCost, Cost
from onnx_roofline.costs.rules.attention import longformer_attention, score_cost
from onnx_roofline.costs.rules.contrib import GELU_ERF, layer_norm, norm_rows
from onnx_roofline.costs.rules.control_flow import repeated
from onnx_roofline.costs.rules.quantization import dequantize, quantize
from onnx_roofline.costs.rules.recurrent import lstm_cost, sequence_steps
from onnx_roofline.costs.rules.registry import MATRIX, register
from onnx_roofline.model.op_node import KnownNode
from onnx_roofline.model.status import DATA_DEPENDENT, UNSUPPORTED, Uncostable
from onnx_roofline.model.tensors import TensorInfo, dtype_name
from onnx_roofline.shapes.input_values import value_flag
from onnx_roofline.shapes.rules.contrib_quantized import decoder_attention_keys, matmul_fpq4_sizes, vocabulary

MS = "com.microsoft"
SYMMETRIC = None  # the ordered ops have no zero point input


# --- the cuBLASLt-ordered int8 ops ----------------------------------------------------------------


@register("QuantizeWithOrder", domain=MS)
def quantize_with_order(node: KnownNode) -> Cost:
    """int8 y = saturate(round(x / scale)) per element, written in `order_output`'s cuBLASLt layout:
    4 FLOPs per element (divide, round, clamp low and high; symmetric, no zero point). The reorder
    is data movement: the default bytes (x read, y written) already hold it."""
    return Cost(flops=quantize(node, SYMMETRIC) * node.operand(0).numel)


@register("DequantizeWithOrder", domain=MS, compute_dtype=1)
def dequantize_with_order(node: KnownNode) -> Cost:
    """y = x·scale per element in the float type `to`, reordered from `order_input`'s layout: 1 FLOP
    per element (no zero point). Computes in the scale's float32, as DequantizeLinear. Bytes: the
    default."""
    return Cost(flops=dequantize(node, SYMMETRIC) * node.operand(0).numel)


@register("QOrderedGelu", domain=MS)
def q_ordered_gelu(node: KnownNode) -> Cost:
    """int8 Y = quantize(Gelu(dequantize(X))), erf form: per element 1 (dequantize) + 4 (Gelu) +
    4 (quantize) = 9 FLOPs and 1 erf."""
    n = node.operand(0).numel
    per = dequantize(node, SYMMETRIC) + GELU_ERF + quantize(node, SYMMETRIC)
    return Cost(flops=per * n, transcendentals=n)


@register("QOrderedLayerNormalization", domain=MS)
def q_ordered_layer_normalization(node: KnownNode) -> Cost:
    """int8 Y = quantize(LayerNorm(dequantize(X))) over the dims from `axis` (default −1), n
    elements in L rows: 1 per element to dequantize, LayerNorm's 5n + 2L + n (gamma) + n (beta, when
    B is given), 4 per element to quantize; L sqrts."""
    rows, n = norm_rows(node.operand(0).shape, node.attrs.get("axis", -1))
    norm = layer_norm(n, rows, affine=1 + (node.input(3) is not None))
    per = dequantize(node, SYMMETRIC) + quantize(node, SYMMETRIC)
    return Cost(flops=norm.flops + per * n, transcendentals=norm.transcendentals)


@register("QOrderedAttention", domain=MS, unit=MATRIX)
def q_ordered_attention(node: KnownNode) -> Cost:
    """int8 input [B, S, Din] × int8 Q, K, V weights [Din, D·] accumulated in integers:
    2·B·S·Din·(Dq + Dk + Dv), then per projected element 1 to dequantize, 1 for the bias, 4 to
    requantize; attention over T = S keys (past is not supported by the op) as contrib Attention —
    2·E·(dh + dv) + E (scale) + E per mask source (mask_index, unidirectional=1) + 4E − 2L, E exps —
    plus 4E to quantize the softmax output when scale_QKT_softmax is given, and 4 per output
    element to requantize Y [B, S, Dv]."""
    x = node.operand(0)
    batch, seq, d_in = x.shape
    heads = node.attrs["num_heads"]
    widths = [node.operand(i).shape[1] for i in (5, 6, 7)]
    projected = batch * seq * sum(widths)
    flops = 2 * projected * d_in + (1 + 1 + 4) * projected
    masks = (node.input(17) is not None) + bool(node.attrs.get("unidirectional", 0))
    causal = bool(node.attrs.get("unidirectional", 0))
    cost = score_cost(batch, heads, seq, seq, widths[0] // heads, widths[2] // heads, masks=masks, causal=causal)
    scores = batch * heads * seq * seq
    flops += 4 * scores * (node.input(15) is not None) + 4 * node.result(0).numel
    useful = None if cost.useful_flops is None else cost.useful_flops + flops
    return Cost(flops=cost.flops + flops, transcendentals=cost.transcendentals, useful_flops=useful)


@register("QOrderedLongformerAttention", domain=MS, unit=MATRIX)
def q_ordered_longformer_attention(node: KnownNode) -> Cost:
    """LongformerAttention's count (both projections for every token, banded attention over
    2W + 1 keys) on int8 input and weights, plus per projected element of each projection 1 to
    dequantize and 4 to requantize (2·B·S·3D·5), and 4 per output element to requantize Y."""
    batch, seq, hidden = node.operand(0).shape
    cost = longformer_attention(node)
    extra = 2 * batch * seq * 3 * hidden * (1 + 4) + 4 * node.result(0).numel
    return Cost(flops=cost.flops + extra, transcendentals=cost.transcendentals)


# --- int4 and sparse matmuls, DecoderAttention, AttnLSTM -------------------------------------------


@register("MatMulFpQ4", domain=MS, unit=MATRIX)
def matmul_fpq4(node: KnownNode) -> Cost:
    """A [..., K] × B, B a K×N weight packed by MLAS in blocks of 32 (blk_quant_type 0, 1) or 64 (2)
    4-bit values with a float scale (and a zero point, type 1): 2·M·K·N for the product, and in
    `dequantize_flops` 2·K·N, each weight dequantized once ((q − zero point)·scale; symmetric
    blocks subtract 8). Bytes: the default (B is its packed blob). Parameters: K·N for B, 0 for
    B_shape (metadata)."""
    k, n = matmul_fpq4_sizes(node)
    return Cost(flops=2 * k * node.result(0).numel, dequantize_flops=2 * k * n, parameters=((1, k * n), (2, 0)))


@register("DecoderAttention", domain=MS, unit=MATRIX)
def decoder_attention(node: KnownNode) -> Cost:
    """BART's decoder attention, query [S, B, D], key [L, B, D]: Q = query·q_weight + bias
    (2·S·B·D² + S·B·D); K and V projected from key (2·L·B·D·2D + L·B·2D) unless cross attention
    (static_kv) reads them from the caches (use_past and has_layer_state); T = L, the cache length
    for cached cross attention, cache + L for cached self attention. Then the score cost, 2·E·2dh +
    E (scale) + E for key_padding_mask + 4E − 2L, E exps. The three flags are runtime inputs: not
    constant, the cost is DATA_DEPENDENT."""
    seq, batch, hidden = node.operand(0).shape
    heads = node.attrs["num_heads"]
    new, attended = decoder_attention_keys(node)
    flops = 2 * seq * batch * hidden * hidden + seq * batch * hidden
    flops += 2 * new * batch * hidden * 2 * hidden + new * batch * 2 * hidden
    cost = score_cost(
        batch, heads, seq, attended, hidden // heads, hidden // heads, masks=int(node.input(5) is not None)
    )
    return Cost(flops=cost.flops + flops, transcendentals=cost.transcendentals)


@register("AttnLSTM", domain=MS, unit=MATRIX)
def attn_lstm(node: KnownNode) -> Cost:
    """An LSTM whose input is concat(Xt, ATTNt−1), W [D, 4H, I + Aw], with a Bahdanau attention over
    memory M [B, Tm, Dm]: once per direction, KEYS = M·MW (2·B·Tm·Dm·A, A = am_attn_size); per
    step, batch element and direction, LSTM's count on the I + Aw wide input (Aw = aw_attn_size
    with AW, else Dm), then the query layer Ht·QW (2·H·A), tanh(KEYS + PQ) (Tm·A adds and tanh),
    its dot with V (2·Tm·A), the softmax over Tm (4·Tm − 2, Tm exps), the context ALIGN·VALUES
    (2·Tm·Dm) and, with AW, concat(Ht, CONTEXTt)·AW (2·(H + Dm)·Aw). Steps as LSTM's (a constant
    sequence_lens, else T for every batch element)."""
    batch, memory_steps, depth = node.operand(11).shape
    directions, hidden, attn = node.operand(8).shape
    aw = node.input(13)
    per_step = 2 * hidden * attn + 3 * memory_steps * attn + 4 * memory_steps - 2 + 2 * memory_steps * depth
    per_step += 2 * (hidden + depth) * aw.shape[2] if aw is not None else 0
    batch_steps = sequence_steps(node)
    cell = lstm_cost(node)
    flops = cell.flops + directions * (2 * batch * memory_steps * depth * attn + batch_steps * per_step)
    transcendentals = cell.transcendentals + directions * batch_steps * memory_steps * (attn + 1)
    return Cost(flops=flops, transcendentals=transcendentals)


# --- generation helpers ----------------------------------------------------------------------------


@register("NGramRepeatBlock", domain=MS)
def ngram_repeat_block(node: KnownNode) -> Cost:
    """For each of the B rows of input_ids [B, S], each earlier n-gram start (S − n + 1 of them) is
    compared with the last n − 1 tokens: B·(S − n + 1)·(n − 1) compares; a match sets one score to
    −inf (a store, no arithmetic). Bytes: the default (scores copied to scores_out)."""
    batch, seq = node.operand(0).shape
    n = node.attrs["ngram_size"]
    return Cost(flops=batch * max(seq - n + 1, 0) * max(n - 1, 0))


@register("BifurcationDetector", domain=MS)
def bifurcation_detector(node: KnownNode) -> Cost:
    """Aggressive decoding's merge: with pred_tokens [P], up to P compares against src_tokens to
    find the bifurcation; then the suffix search, for each n-gram size n in [min_ngram_size,
    max_ngram_size], compares the last n output tokens with each of the src_len − n + 1 windows:
    n·(src_len − n + 1) compares. An upper bound: the kernel stops at the first size with one match."""
    src = node.operand(0).numel
    pred = node.input(3)
    flops = pred.numel if pred is not None else 0
    low, high = node.attrs.get("min_ngram_size", 1), node.attrs.get("max_ngram_size", 3)
    flops += sum(n * max(src - n + 1, 0) for n in range(low, high + 1))
    return Cost(flops=flops)


@register("DynamicTimeWarping", domain=MS)
def dynamic_time_warping(node: KnownNode) -> Cost:
    """The DTW recurrence over the M×N cost matrix: per cell the cost plus the minimum of three
    neighbours, 3 FLOPs (2 compares, 1 add): 3·M·N; the backtrace walks at most M + N − 1 cells at
    2 compares each."""
    m, n = node.operand(0).shape[-2:]
    return Cost(flops=3 * m * n + 2 * (m + n - 1))


# --- generation loops ----------------------------------------------------------------------------


def constant_scalar(node: KnownNode, index: int, what: str) -> int:
    """The value of a one-element constant input; runtime data otherwise (DATA_DEPENDENT)."""
    value = node.input_value(index)
    if value is None or value.size != 1:
        tensor = node.input(index)
        name = what if tensor is None else tensor.name
        raise Uncostable(
            DATA_DEPENDENT,
            f"{node.op_type}: {what} {name!r} is runtime data; the decoder runs up to max_length − sequence_length times (give it a value: {value_flag(name)})",
        )
    return int(value.reshape(-1)[0])


def _decoder_inputs(node: KnownNode, graph: onnx.GraphProto, rows: int, new: int, past: int) -> list[TensorInfo]:
    """The GPT-style decoder's inputs at one step (onnxruntime's subgraph_gpt layout): input_ids and
    position_ids [rows, new], attention_mask [rows, past + new], each past state [2, rows, N, past, H]
    with N and H as the subgraph declares them."""
    declared = list(graph.input)
    if len(declared) < 4 or any(len(v.type.tensor_type.shape.dim) != 5 for v in declared[3:]):
        raise Uncostable(
            UNSUPPORTED,
            f"{node.op_type}: decoder subgraph {graph.name!r} is not the GPT layout (input_ids, position_ids, attention_mask, past_i [2, B, N, P, H])",
        )
    typed = [
        TensorInfo(v.name, shape, dtype_name(v.type.tensor_type.elem_type))
        for v, shape in zip(declared, ((rows, new), (rows, new), (rows, past + new)), strict=False)
    ]
    for value in declared[3:]:
        dims = value.type.tensor_type.shape.dim
        fixed = [dims[i].dim_value if dims[i].HasField("dim_value") else None for i in (0, 2, 4)]
        if None in fixed:
            raise Uncostable(
                UNSUPPORTED,
                f"{node.op_type}: decoder input {value.name!r} does not declare its head count and head size",
            )
        typed.append(
            TensorInfo(
                value.name, (fixed[0], rows, fixed[1], past, fixed[2]), dtype_name(value.type.tensor_type.elem_type)
            )
        )
    return typed


def _search_graph(
    op_type: str, rows: int, vocab: int, beams: int, dtype: int, top_p: bool
) -> tuple[onnx.GraphProto, list[TensorInfo]]:
    """One step of the search on the last position's logits [rows, V], as the ops that compute it:
    greedy ArgMax; beam LogSoftmax, + the beam scores, TopK of 2·beams over each batch's beams·V;
    sampling the temperature Div, (0 < top_p < 1: a full sort, TopK k = V) and one Multinomial
    draw, whose exp and running sum are the softmax's CDF that top_p cuts."""
    value = helper.make_tensor_value_info
    inputs = [TensorInfo("logits", (rows, vocab), dtype_name(dtype))]
    constants = []
    if op_type == "GreedySearch":
        nodes = [helper.make_node("ArgMax", ["logits"], ["next"], axis=-1)]
    elif op_type == "Sampling":
        inputs.append(TensorInfo("temperature", (), dtype_name(dtype)))
        nodes = [helper.make_node("Div", ["logits", "temperature"], ["scaled"])]
        if top_p:
            constants.append(helper.make_tensor("k", TensorProto.INT64, [1], [vocab]))
            nodes.append(helper.make_node("TopK", ["scaled", "k"], ["sorted", "order"]))
        nodes.append(helper.make_node("Multinomial", ["sorted" if top_p else "scaled"], ["next"], sample_size=1))
    else:
        inputs.append(TensorInfo("beam_scores", (rows, 1), dtype_name(dtype)))
        constants.append(helper.make_tensor("per_batch", TensorProto.INT64, [2], [rows // beams, beams * vocab]))
        constants.append(helper.make_tensor("k", TensorProto.INT64, [1], [2 * beams]))
        nodes = [
            helper.make_node("LogSoftmax", ["logits"], ["log_probs"], axis=-1),
            helper.make_node("Add", ["log_probs", "beam_scores"], ["scores"]),
            helper.make_node("Reshape", ["scores", "per_batch"], ["candidates"]),
            helper.make_node("TopK", ["candidates", "k"], ["best", "next"]),
        ]
    declared = [t.value_info() for t in inputs]
    graph = helper.make_graph(
        nodes, f"{op_type}_step", declared, [value("next", TensorProto.UNDEFINED, None)], initializer=constants
    )
    return graph, inputs


@register("GreedySearch", "Sampling", "BeamSearch", "WhisperBeamSearch", domain=MS)
def generation(node: KnownNode) -> CompositeCost:
    """An upper bound over the decoding loop of a decoder-only model (model_type 0, GPT-2's
    convert_generation output): input_ids [B, S], R = B·num_beams rows (num_beams 1 but for the
    beam searches), max_length and num_beams constants. The decoder runs max_length − S times: the
    first step (init_decoder where given) on the S prompt tokens with no past, step t on one token
    with S + t − 1 past; each step is its subgraph costed at those shapes, and each adds the
    search's work on the [R, V] logits (greedy: ArgMax; beam: LogSoftmax, + beam scores, TopK of
    2·num_beams; sampling: the temperature, a sort when 0 < top_p < 1, a Multinomial draw).
    The loop stops earlier when every sequence has emitted eos, which only the run knows.
    max_length or num_beams not constants: DATA_DEPENDENT. Encoder-decoder models (model_type 1,
    2: an encoder subgraph and cross-attention caches): UNSUPPORTED."""
    if node.attrs.get("model_type", 0) != 0 or "encoder" in node.attrs:
        raise Uncostable(
            UNSUPPORTED,
            f"{node.op_type}: an encoder-decoder model (model_type {node.attrs.get('model_type', 0)}); only the decoder-only loop (model_type 0) is costed",
        )
    batch, prompt = node.operand(0).shape
    max_length = constant_scalar(node, 1, "max_length")
    beams = constant_scalar(node, 3, "num_beams") if node.op_type.endswith("BeamSearch") else 1
    rows = batch * beams
    decoder = node.attrs["decoder"]
    steps = max(max_length - prompt, 0)
    parts = []
    for step in range(steps):
        graph = node.attrs.get("init_decoder", decoder) if step == 0 else decoder
        new, past = (prompt, 0) if step == 0 else (1, prompt + step - 1)
        parts.append((node.subgraph(graph, _decoder_inputs(node, graph, rows, new, past)), 1))
    top_p = node.attrs.get("top_p", 0.0)
    search, inputs = _search_graph(
        node.op_type,
        rows,
        vocabulary(node, decoder),
        beams,
        decoder.output[0].type.tensor_type.elem_type,
        0.0 < top_p < 1.0,
    )
    parts.append((node.subgraph(search, inputs), steps))
    return repeated(parts)


# --- precompiled EP blobs --------------------------------------------------------------------------


@register("EPContext", "Snpe", domain=MS)
def ep_blob(node: KnownNode) -> Cost:
    """A precompiled execution-provider blob (EPContext: a QNN, TensorRT, OpenVINO... context
    cache; Snpe: a SNPE DLC): its work is not in the graph, so it is never costed: UNSUPPORTED,
    with that reason."""
    raise Uncostable(UNSUPPORTED, f"{node.op_type}: a precompiled EP blob: its work is not in the graph")
