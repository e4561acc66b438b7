"""ai.onnx.preview.training: the optimizer updates Adagrad, Adam, Momentum, and Gradient.

The optimizers are elementwise over the optimized tensors X1…Xn (inputs R, T, then the groups
X…, G…, and the state tensors), on the vector unit. Each counts one FLOP per basic operation of
its spec's pseudo code per element of the Xs, plus the scalar learning-rate arithmetic once. The
L2 term G + norm_coefficient·X (2 FLOPs) is counted only when norm_coefficient ≠ 0, as Gemm counts
alpha only when it is not 1. Bytes: the default (R, T and every tensor read once; every new
tensor written once)."""

from __future__ import annotations

from onnx_roofline.costs.cost import Cost
from onnx_roofline.costs.rules.registry import register
from onnx_roofline.model.op_node import KnownNode

DOMAIN = "ai.onnx.preview.training"


def _optimized_elements(node: KnownNode, groups: int) -> int:
    """Elements of X1…Xn, the inputs after R and T split into `groups` equal groups."""
    tensors = node.operands[2:]
    if len(tensors) % groups:
        raise ValueError(f"{node.op_type} expects {groups} tensors per optimized variable, got {len(tensors)} inputs")
    count = len(tensors) // groups
    return sum(t.numel for t in tensors[:count])


def _regularized(node: KnownNode, name: str = "norm_coefficient") -> int:
    return 2 if node.attrs.get(name, 0.0) else 0


@register("Adagrad", domain=DOMAIN)
def adagrad(node: KnownNode) -> Cost:
    """Per element: H_new = H + G²  (2), sqrt(H_new) + ε (1 and 1 transcendental),
    X_new = X − r·G/H_adaptive (3): 6 FLOPs, +2 for G + norm_coefficient·X. Once: the scalar
    r = R / (1 + T·decay_factor), 3 FLOPs."""
    n = _optimized_elements(node, 3)
    return Cost(flops=(6 + _regularized(node)) * n + 3, transcendentals=n)


@register("Adam", domain=DOMAIN)
def adam(node: KnownNode) -> Cost:
    """Per element: V_new = α·V + (1 − α)·G (3), H_new = β·H + (1 − β)·G² (4), sqrt(H_new) + ε (1 and
    1 transcendental), X_new = X − R_adjusted·V_new/H_sqrt (3): 11 FLOPs, +2 for G +
    norm_coefficient·X, +1 for (1 − norm_coefficient_post)·X_new when that is not 0. Once:
    R_adjusted = R·sqrt(1 − β^T)/(1 − α^T): 4 FLOPs, 3 transcendentals (two powers, a sqrt)."""
    n = _optimized_elements(node, 4)
    post = 1 if node.attrs.get("norm_coefficient_post", 0.0) else 0
    return Cost(flops=(11 + _regularized(node) + post) * n + 4, transcendentals=n + 3)


@register("Momentum", domain=DOMAIN)
def momentum(node: KnownNode) -> Cost:
    """Per element: V_new = α·V + β_adjusted·G (3); standard X_new = X − R·V_new (2), Nesterov
    X_new = X − R·(G + α·V_new) (4): 5 or 7 FLOPs, +2 for G + norm_coefficient·X. Once: the
    select β_adjusted = T > 0 ? β : 1, 1 FLOP."""
    n = _optimized_elements(node, 3)
    mode = node.attrs.get("mode", "standard")
    nesterov = (mode.decode() if isinstance(mode, bytes) else mode) == "nesterov"
    return Cost(flops=((7 if nesterov else 5) + _regularized(node)) * n + 1)


@register("Gradient", domain=DOMAIN)
def gradient(node: KnownNode) -> Cost:
    """Not costed: the op stands for the backward pass of the subgraph between its `xs`/`zs` and
    `y`, which only exists once a training framework differentiates the graph; its cost is that
    generated graph's, which this static pass does not build. Reported with this reason, not 0."""
    raise ValueError("Gradient needs the graph differentiated first (a training runtime's job); not costed")
