"""Shape rules for the ops ONNX's shape inference does not type, one module per family, registered
by (domain, op_type) beside the cost rules (`registry.py` says how)."""

from onnx_roofline.shapes.rules import contrib, transformer  # noqa: F401 (registers)
from onnx_roofline.shapes.rules import ml, nchwc, sequences, standard  # noqa: F401 (registers)
from onnx_roofline.shapes.rules import contrib_classic, contrib_llm, contrib_quantized  # noqa: F401 (registers)
from onnx_roofline.shapes.rules.registry import DataDependent, infer_node, lookup, registered, shape_function, value_inputs

__all__ = ["DataDependent", "infer_node", "lookup", "registered", "shape_function", "value_inputs"]
