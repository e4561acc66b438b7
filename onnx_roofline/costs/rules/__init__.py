"""Cost rules, one module per op family; importing this package registers them all."""

from onnx_roofline.costs.rules import (  # noqa: F401  (registration side effects)  # noqa: F401  (registration side effects)
    attention,
    contrib,
    contrib_classic,
    contrib_llm,
    contrib_quantized,
    control_flow,
    conv,
    elementwise,
    linalg,
    losses,
    misc,
    ml,
    movement,
    nchwc,
    normalization,
    pooling,
    quantization,
    recurrent,
    reduction,
    signal,
    training,
)
from onnx_roofline.costs.rules.registry import Rule, all_rules, lookup, register

__all__ = ["Rule", "all_rules", "lookup", "register"]
