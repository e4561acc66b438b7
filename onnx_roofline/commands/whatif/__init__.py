"""What-if studies over one model: dim sweeps, critical batch sizes, hardware comparison, a fused
view of bytes, decode over context length, and the serving envelope (`serve`: batch × tensor
parallelism). Each study reuses one loaded model (`Session`)."""

from onnx_roofline.commands.whatif.compare import compare
from onnx_roofline.commands.whatif.context import context_study
from onnx_roofline.commands.whatif.critical import critical
from onnx_roofline.commands.whatif.session import Session
from onnx_roofline.commands.whatif.sweep import sweep

__all__ = ["Session", "compare", "context_study", "critical", "fuse", "plan_fusion", "sweep"]


def __getattr__(name: str):
    """`fuse` and `plan_fusion` on first use: every command would otherwise load the fusion
    planner (and the attention matcher) while the command line builds its parser (whatif.command
    is a submodule of this package)."""
    if name in ("fuse", "plan_fusion"):
        from onnx_roofline.views import fusion

        return getattr(fusion, name)
    raise AttributeError(f"module 'onnx_roofline.commands.whatif' has no attribute {name!r}")
