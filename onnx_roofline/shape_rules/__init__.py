"""Shape rules for the ops ONNX's shape inference does not type, one module per family, registered
by (domain, op_type) beside the cost rules (`registry.py` says how)."""

from onnx_roofline.shape_rules import contrib, transformer  # noqa: F401 (registers)
from onnx_roofline.shape_rules import ml, nchwc, sequences  # noqa: F401 (registers)
from onnx_roofline.shape_rules.registry import infer_node, lookup, registered, shape_function

__all__ = ["infer_node", "lookup", "registered", "shape_function"]
