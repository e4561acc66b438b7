"""The checker: run a model in onnxruntime and prove the analysis against the real tensors.

`verify(model, dims=...)` returns a `Verification`: every value's runtime shape and dtype against
the inferred one, every costed node's bytes recomputed from the real tensors, and optionally each
node's measured time against its roofline lower bound. See docs/verify.md."""

from onnx_roofline.verify.errors import VerifyError
from onnx_roofline.verify.pipeline import Verification, verify

__all__ = ["Verification", "VerifyError", "verify"]
