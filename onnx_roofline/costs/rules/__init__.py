"""Cost rules, one module per op family; importing this package registers them all."""

from onnx_roofline.costs.rules import attention, contrib, control_flow, conv, elementwise, linalg, losses, misc, ml, movement, normalization, pooling, quantization, recurrent, reduction, signal, training  # noqa: F401  (registration side effects)
from onnx_roofline.costs.rules import contrib_classic, contrib_llm, contrib_quantized, nchwc  # noqa: F401  (registration side effects)
from onnx_roofline.costs.rules.registry import Rule, all_rules, lookup, register

__all__ = ["Rule", "all_rules", "lookup", "register"]
