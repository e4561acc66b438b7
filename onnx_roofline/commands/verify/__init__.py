"""The checker: run a model in onnxruntime and prove the analysis against the real tensors.

`verify(model, dims=...)` returns a `Verification`: every value's runtime shape and dtype against
the inferred one, every costed node's bytes recomputed from the real tensors, and optionally each
node's measured time against its roofline lower bound. See docs/verify.md."""

from onnx_roofline.commands.verify.errors import VerifyError

__all__ = ["Verification", "VerifyError", "verify"]


def __getattr__(name: str):
    """`verify` and `Verification` load on first use: the command line imports this package to
    register its subcommands, and a plain analysis needs none of the checker."""
    if name in ("Verification", "verify"):
        from onnx_roofline.commands.verify import pipeline

        return getattr(pipeline, name)
    raise AttributeError(f"module 'onnx_roofline.commands.verify' has no attribute {name!r}")
