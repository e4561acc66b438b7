"""onnx-roofline: which node of an ONNX model is compute-bound and which memory-bound on a target accelerator.

`analyze` and `Report` load on first use: importing the package (as the command line does first)
loads neither onnx nor numpy, so a Ctrl-C during start-up reaches the command line's handler."""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant, without importing typing at start-up
__all__ = ["Report", "analyze"]
__version__ = "0.1.0"

if TYPE_CHECKING:
    from onnx_roofline.analysis import analyze
    from onnx_roofline.report.model import Report


def __getattr__(name: str):
    if name == "analyze":
        from onnx_roofline.analysis import analyze

        return analyze
    if name == "Report":
        from onnx_roofline.report.model import Report

        return Report
    raise AttributeError(f"module 'onnx_roofline' has no attribute {name!r}")
