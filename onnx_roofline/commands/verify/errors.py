"""The checker's own input error: onnxruntime cannot load or run the model (exit 2, one line)."""

from onnx_roofline.errors import RooflineError


class VerifyError(RooflineError):
    """The model cannot be run for verification (unbound dim, onnxruntime refuses it, too large)."""
