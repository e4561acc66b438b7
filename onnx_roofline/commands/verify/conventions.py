"""DESIGN.md's byte conventions for the ops whose rules read less than every input or write less
than every output, restated here on the tensors the runtime produced. A rule for one of these ops
is checked against this table, not against its own formula: a Slice rule that read the whole
input, or a view that wrote its output, disagrees.

Each observer returns (bytes_read, bytes_written); None means the framework default (each
distinct input read once, each output written once)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from onnx_roofline.model.tensors import TensorInfo

Observer = Callable[[Sequence[TensorInfo | None], Sequence[TensorInfo | None]], tuple[int | None, int | None]]


def distinct_bytes(tensors: Sequence[TensorInfo | None], exclude: str | None = None) -> int:
    """Each distinct present tensor once (a tensor fed twice is read once), leaving out `exclude`."""
    return sum({t.name: t.nbytes for t in tensors if t is not None and t.name != exclude}.values())


def _side_inputs(inputs: Sequence[TensorInfo | None]) -> int:
    """Shape-only and index inputs (everything after the data input), tiny but real."""
    data = inputs[0] if inputs else None
    return distinct_bytes(inputs[1:], exclude=None if data is None else data.name)


def view(inputs, outputs):
    """Reshape, Squeeze, Unsqueeze, Flatten, Identity, BitCast: no data moved; the shape-only inputs are read."""
    return _side_inputs(inputs), 0


def metadata(inputs, outputs):
    """Shape, Size: read the input's metadata, none of its data; the small output is written."""
    return 0, None


def partial_read(inputs, outputs):
    """Gather*, Slice: the data input's kept elements (the output's count, at most the whole input),
    plus the index/shape inputs."""
    data, out = inputs[0], outputs[0]
    kept = min(data.nbytes, (out.numel * data.bits + 7) // 8)
    return kept + _side_inputs(inputs), None


def dtype_only_second_input(inputs, outputs):
    """CastLike: `target_type` lends only its dtype; its data is not read."""
    return inputs[0].nbytes, None


def baked_in(inputs, outputs):
    """Constant: the value is part of the program, like a weight; its consumers count the read."""
    return 0, 0


OBSERVERS: dict[str, tuple[str, Observer]] = {
    **{op: ("view", view) for op in ("Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity", "BitCast")},
    **{op: ("metadata", metadata) for op in ("Shape", "Size")},
    **{op: ("partial read", partial_read) for op in ("Gather", "GatherElements", "GatherND", "Slice")},
    "CastLike": ("dtype-only input", dtype_only_second_input),
    "Constant": ("baked in", baked_in),
}
"""op_type (default domain) → (convention name, observer)."""

DEFAULT_OPS: frozenset[str] = frozenset(
    # DESIGN.md: these read every input in full and write every output, whatever their rule returns.
    # elementwise arithmetic, comparisons, logic, activations
    "Abs Acos Acosh Add And Asin Asinh Atan Atanh BitShift BitwiseAnd BitwiseNot BitwiseOr BitwiseXor "  # noqa: SIM905 (a table of names)
    "Cast Ceil Celu Clip Cos Cosh Div Elu Equal Erf Exp Floor Gelu Greater GreaterOrEqual HardSigmoid "
    "HardSwish IsInf IsNaN LeakyRelu Less LessOrEqual Log Max Mean Min Mish Mod Mul Neg Not Or PRelu "
    "Pow Reciprocal Relu Round Selu Shrink Sigmoid Sign Sin Sinh Softplus Softsign Sqrt Sub Sum Tan "
    "Tanh ThresholdedRelu Where Xor "
    # matrix and convolution
    "Conv ConvInteger ConvTranspose Einsum Gemm MatMul MatMulInteger "
    # normalization and softmax
    "BatchNormalization GroupNormalization InstanceNormalization LayerNormalization LpNormalization "
    "MeanVarianceNormalization RMSNormalization LRN Softmax LogSoftmax Hardmax "
    # reductions and pooling
    "ArgMax ArgMin CumSum ReduceL1 ReduceL2 ReduceLogSum ReduceLogSumExp ReduceMax ReduceMean ReduceMin "
    "ReduceProd ReduceSum ReduceSumSquare AveragePool GlobalAveragePool GlobalLpPool GlobalMaxPool "
    "LpPool MaxPool TopK "
    # copies (DESIGN.md: the default)
    "Concat DepthToSpace Expand Pad SpaceToDepth Split Tile Transpose".split()
)
"""Default-domain ops that must match the framework default exactly: an override in their rule is
checked against the real tensors like any default (a rule that forgets an input disagrees)."""


def attribute_bytes(proto) -> int:
    """Bytes of a node's numeric list and tensor attributes: weights some ops (ai.onnx.ml trees,
    TfIdfVectorizer) carry as attributes; a rule may count them as read."""
    from onnx import AttributeProto

    from onnx_roofline.model.tensors import DTYPE_BITS, dtype_name

    total = 0
    for attr in proto.attribute:
        if attr.type == AttributeProto.FLOATS:
            total += 4 * len(attr.floats)
        elif attr.type == AttributeProto.INTS:
            total += 8 * len(attr.ints)
        elif attr.type in (AttributeProto.TENSOR, AttributeProto.TENSORS):
            for tensor in [attr.t] if attr.type == AttributeProto.TENSOR else attr.tensors:
                count = 1
                for dim in tensor.dims:
                    count *= dim
                total += (count * DTYPE_BITS.get(dtype_name(tensor.data_type) or "", 0) + 7) // 8
    return total
