"""onnx-roofline: which node of an ONNX model is compute-bound and which memory-bound on a target accelerator."""

from onnx_roofline.analysis import analyze
from onnx_roofline.report.model import Report

__all__ = ["Report", "analyze"]
__version__ = "0.1.0"
