"""Losses: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss, on the vector unit.

S = the number of samples (the target's elements, N·d1·…·dk). Per sample: the negation of the
picked log-probability (1 FLOP), the class weight's multiply when `weight` is given (1), and the
compare-select against `ignore_index` when that attribute is set (1). Reductions follow the
reduction rules (r elements to one: r − 1 adds): 'none' 0; 'sum' S − 1; 'mean' S − 1 adds and one
divide, plus S − 1 more adds for the denominator when it is not simply S (the weights picked, or
the samples not ignored)."""

from __future__ import annotations

from onnx_roofline.costs.cost import Cost
from onnx_roofline.costs.rules.registry import register
from onnx_roofline.model.op_node import KnownNode


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def nll_flops(node: KnownNode, samples: int, weighted: bool) -> int:
    """The per-sample pick-and-weight arithmetic and the reduction, for S = `samples`."""
    ignored = node.attrs.get("ignore_index") is not None
    per_sample = 1 + (1 if weighted else 0) + (1 if ignored else 0)
    reduction = _text(node.attrs.get("reduction", "mean"))
    adds = max(samples - 1, 0)
    if reduction == "none":
        total = 0
    elif reduction == "sum":
        total = adds
    else:  # mean
        total = adds + 1 + (adds if weighted or ignored else 0)
    return samples * per_sample + total


@register("NegativeLogLikelihoodLoss", since=12)
def negative_log_likelihood_loss(node: KnownNode) -> Cost:
    """loss = −input[n, target, d…] (· weight[target]): per sample 1 FLOP, +1 with `weight`, +1
    with `ignore_index`; then the reduction ('sum' S − 1, 'mean' S adds-and-divide, + S − 1 for a
    weight or ignore_index denominator). Bytes (overridden, a gather): the op reads one element of
    `input` per sample — S elements, at most the whole input — not the C-wide class rows; the
    target whole; and S picked weights, at most the whole `weight`."""
    x, target, weight = node.operand(0), node.operand(1), node.input(2)
    samples = target.numel
    read = target.nbytes + min(x.nbytes, (samples * x.bits + 7) // 8)
    if weight is not None and weight.name not in (x.name, target.name):
        read += min(weight.nbytes, (samples * weight.bits + 7) // 8)
    return Cost(flops=nll_flops(node, samples, weight is not None), bytes_read=read)


@register("SoftmaxCrossEntropyLoss", since=12)
def softmax_cross_entropy_loss(node: KnownNode) -> Cost:
    """LogSoftmax over the class axis, then NegativeLogLikelihoodLoss. LogSoftmax as its own rule:
    per line of C classes 4C − 2 FLOPs and C + 1 transcendentals (C exps, one log), S = N·d1·…·dk
    lines. Then the NLL arithmetic per sample and the reduction (see NegativeLogLikelihoodLoss).
    Bytes: the default — every score is read (the softmax needs them all), labels and weights
    once, the loss and the optional log_prob written."""
    scores, labels = node.operand(0), node.operand(1)
    samples, classes = labels.numel, scores.shape[1]
    elements = samples * classes
    log_softmax_flops = max(4 * elements - 2 * samples, 0)
    transcendentals = elements + samples if elements else 0
    return Cost(
        flops=log_softmax_flops + nll_flops(node, samples, node.input(2) is not None),
        transcendentals=transcendentals,
    )
