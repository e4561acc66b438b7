"""Shape rules for the ops ONNX's shape inference does not type, one module per family, registered
by (domain, op_type) beside the cost rules (`registry.py` says how)."""

from onnx_roofline.shapes.rules import (  # noqa: F401 (registers)  # noqa: F401 (registers)  # noqa: F401 (registers)
    contrib,
    contrib_classic,
    contrib_llm,
    contrib_quantized,
    ml,
    nchwc,
    sequences,
    standard,
    transformer,
)
from onnx_roofline.shapes.rules.registry import (
    DataDependent,
    infer_node,
    lookup,
    registered,
    shape_function,
    value_inputs,
)

__all__ = ["DataDependent", "infer_node", "lookup", "registered", "shape_function", "value_inputs"]
