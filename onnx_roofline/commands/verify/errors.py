"""The checker's own input error: onnxruntime cannot load or run the model (exit 2, one line)."""

from onnx_roofline.errors import RooflineError


class VerifyError(RooflineError):
    """The model cannot be run for verification (unbound dim, onnxruntime refuses it, too large)."""


class RunFailed(VerifyError):
    """onnxruntime loaded the model and failed while running it on the synthesized inputs and
    weights: other values may run (retries.py), where a refusal to load never will."""
