"""Operators of no other family: DeformConv, TfIdfVectorizer, and the newer sequence-model ops
TensorScatter and ai.onnx.preview's FlexAttention (CausalConvWithState and LinearAttention are
costed with their com.microsoft versions, in contrib_llm.py)."""

from __future__ import annotations

import math

import onnx
from onnx import TensorProto

from onnx_roofline.costs.cost import Cost
from onnx_roofline.costs.rules.ml import attribute_bytes, no_strings
from onnx_roofline.costs.rules.registry import MATRIX, register
from onnx_roofline.model.op_node import KnownNode
from onnx_roofline.model.status import Uncostable
from onnx_roofline.model.tensors import TensorInfo, dtype_name


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@register("DeformConv", since=19, unit=MATRIX)
def deform_conv(node: KnownNode) -> Cost:
    """The convolution, as Conv: 2·N·oC·∏out·(C/group)·∏k (W is [oC, C/group, k…]), + one per
    output for the bias B. Plus the deformable sampling, done per input channel, kernel tap and
    output position (N·C·∏k·∏out values): a bilinear (N-D: multilinear) interpolation of 2^d
    neighbours, 2 FLOPs (a multiply-add) per neighbour — the movement rules' GridSample count — and
    one multiply per value for the modulation `mask` when given. The sampling positions and weights
    are shared by the C/offset_group channels of an offset group and are not counted, as for
    GridSample. Bytes: the default (X read once, not once per tap)."""
    x, w, y = node.operand(0), node.operand(1), node.result(0)
    spatial = w.shape[2:]
    conv = 2 * math.prod(w.shape[1:]) * y.numel
    bias = y.numel if node.input(3) is not None else 0
    sampled = x.shape[0] * x.shape[1] * math.prod(spatial) * math.prod(y.shape[2:])
    interpolation = 2 * 2 ** len(spatial) * sampled
    mask = sampled if node.input(4) is not None else 0
    return Cost(flops=conv + bias + interpolation + mask)


def _ngram_candidates(length: int, min_gram: int, max_gram: int, max_skip: int) -> int:
    """N-grams a row of `length` items offers: unigrams once, each longer n-gram for every skip."""
    total = 0
    for n in range(max(min_gram, 1), max_gram + 1):
        distances = range(1, 2) if n == 1 else range(1, max_skip + 2)
        total += sum(max(0, length - d * (n - 1)) for d in distances)
    return total


@register("TfIdfVectorizer", since=9)
def tfidf_vectorizer(node: KnownNode) -> Cost:
    """Per row of C items, one lookup (1 FLOP) of every candidate n-gram: for each length n in
    [min_gram_length, max_gram_length], C unigrams, or Σ over skip distances d = 1…max_skip_count+1
    of C − d·(n − 1) n-grams. The count increments follow only the hits (data-dependent, not
    counted). Weighting: IDF one select per output element, TFIDF with `weights` one multiply; TF
    none. Bytes: the default plus the pool, weights and index attributes. String input (tokens):
    each token one lookup as an integer is, its bytes at the length assumed."""
    no_strings(node)
    x, y = node.operand(0), node.result(0)
    rows = x.shape[0] if x.rank == 2 else 1
    length = x.shape[-1] if x.rank else 1
    attrs = node.attrs
    candidates = _ngram_candidates(length, attrs["min_gram_length"], attrs["max_gram_length"], attrs["max_skip_count"])
    mode = _text(attrs.get("mode", "TF"))
    weighting = y.numel if mode == "IDF" or (mode == "TFIDF" and attrs.get("weights")) else 0
    return Cost(flops=rows * candidates + weighting, bytes_read=node.distinct_input_bytes() + attribute_bytes(node))


@register("TensorScatter", since=24)
def tensor_scatter(node: KnownNode) -> Cost:
    """0 FLOPs: the update rows are stored into the cache (circular mode's modulo is index
    arithmetic). Bytes: the default, as ScatterND's — past_cache, update and write_indices read,
    present_cache written whole — the graph as written, where present is a new tensor. A runtime
    that aliases past and present (the op's intended in-place KV-cache update) moves only the
    update: read once, written once, plus write_indices."""
    return Cost()


PREVIEW = "ai.onnx.preview"


def _modifier_cost(node: KnownNode, name: str, shape: tuple[int, ...], elem_type: int) -> tuple[int, int]:
    """(FLOPs, transcendentals) of the `name` subgraph run once on a tensor of `shape`, costed by
    the walk in this node's scope (its first input typed as `shape`, the others as declared)."""
    graph = next((a.g for a in node.proto.attribute if a.name == name and a.type == onnx.AttributeProto.GRAPH), None)
    if graph is None:
        return 0, 0
    inputs = [TensorInfo(graph.input[0].name, shape, dtype_name(elem_type)), *[None] * (len(graph.input) - 1)]
    try:
        cost = node.subgraph(graph, inputs)
    except Uncostable as exc:
        raise ValueError(f"{name} subgraph: {exc}") from exc
    return cost.flops, cost.transcendentals


@register("FlexAttention", domain=PREVIEW, since=1, unit=MATRIX)
def flex_attention(node: KnownNode) -> Cost:
    """Q [B, Hq, L, E], K [B, Hkv, S, E], V [B, Hkv, S, Ev]: Q·Kᵀ 2·B·Hq·L·S·E, the scale B·Hq·L·S,
    Softmax over S (the Softmax rule: 4S − 2 FLOPs and S transcendentals per line, B·Hq·L lines),
    P·V 2·B·Hq·L·S·Ev; GQA shares K/V heads, not work. The score_mod and prob_mod subgraphs add
    their own FLOPs and transcendentals, costed by the same rules on a [B, Hq, L, S] tensor (a
    subgraph that cannot be costed leaves the node uncosted). Bytes: the default (Q, K, V read, Y
    written): the score matrix exists only inside the op — it is the fused view by definition."""
    q, k, v = node.operand(0), node.operand(1), node.operand(2)
    batch, heads, queries, head_size = q.shape
    keys, value_size = k.shape[2], v.shape[3]
    lines = batch * heads * queries
    scores = lines * keys
    flops = 2 * scores * head_size + scores + max(4 * scores - 2 * lines, 0) + 2 * scores * value_size
    transcendentals = scores
    precision = node.attrs.get("softmax_precision")
    if precision is None:
        precision = TensorProto.DOUBLE if q.dtype == "float64" else TensorProto.FLOAT
    for name in ("score_mod", "prob_mod"):
        extra_flops, extra_transcendentals = _modifier_cost(node, name, (batch, heads, queries, keys), precision)
        flops += extra_flops
        transcendentals += extra_transcendentals
    return Cost(flops=flops, transcendentals=transcendentals)
