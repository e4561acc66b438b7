"""Losses (onnx_roofline/costs/rules/losses.py). f32 = 4 bytes, int64 = 8 bytes."""

from __future__ import annotations

from tests.conftest import analyze_node


def test_nll_none_reads_only_the_picked_log_probabilities():
    # input [N=4, C=5, d=3], target [4, 3]: S = 12 samples
    node = analyze_node(
        "NegativeLogLikelihoodLoss",
        [("x", "float32", [4, 5, 3]), ("t", "int64", [4, 3])],
        [("loss", "float32", [4, 3])],
        attrs={"reduction": "none"},
        opset=13,
    )
    assert node.cost.flops == 12  # one negation per sample
    assert node.cost.bytes_read == 12 * 8 + 12 * 4  # the target, and one of the 5 classes per sample
    assert node.cost.bytes_written == 12 * 4


def test_nll_weighted_mean_with_ignore_index():
    node = analyze_node(
        "NegativeLogLikelihoodLoss",
        [("x", "float32", [4, 5, 3]), ("t", "int64", [4, 3]), ("w", "float32", [5])],
        [("loss", "float32", [])],
        attrs={"reduction": "mean", "ignore_index": 0},
        opset=13,
    )
    per_sample = 3  # negate, weight multiply, ignore_index compare-select
    mean = 11 + 1 + 11  # Σ loss (S − 1), one divide, Σ picked weights (S − 1)
    assert node.cost.flops == 12 * per_sample + mean
    assert node.cost.bytes_read == 12 * 8 + 12 * 4 + 5 * 4  # 12 picks of 5 weights: the whole weight


def test_nll_sum():
    node = analyze_node(
        "NegativeLogLikelihoodLoss",
        [("x", "float32", [6, 3]), ("t", "int64", [6])],
        [("loss", "float32", [])],
        attrs={"reduction": "sum"},
        opset=13,
    )
    assert node.cost.flops == 6 + 5


def test_softmax_cross_entropy_mean_with_log_prob():
    # scores [N=2, C=3, d=4]: 8 lines of 3 classes
    node = analyze_node(
        "SoftmaxCrossEntropyLoss",
        [("scores", "float32", [2, 3, 4]), ("labels", "int64", [2, 4])],
        [("loss", "float32", []), ("log_prob", "float32", [2, 3, 4])],
        opset=13,
    )
    log_softmax = 4 * 24 - 2 * 8  # per line 4C − 2
    nll = 8 + 7 + 1  # a negation per sample; mean: 7 adds, 1 divide
    assert node.cost.flops == log_softmax + nll
    assert node.cost.transcendentals == 24 + 8  # an exp per score, a log per line
    assert node.cost.bytes_read == 24 * 4 + 8 * 8  # all scores, the labels
    assert node.cost.bytes_written == 4 + 24 * 4  # the loss, log_prob
