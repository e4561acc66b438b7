"""Output shapes for ai.onnx ops whose ONNX inference gives a type but no shape: a schema with no
shape function (GroupNormalization, the signal windows, MelWeightMatrix), a function op typed by
its body only (MeanVarianceNormalization), MaxUnpool with an `output_shape` input. Found by ONNX's
node test suite with the graphs' declared output shapes cleared; each rule follows the op's spec
and is checked against onnxruntime's run (tests/test_standard_shapes.py). MaxPool and AveragePool
are ONNX's to type, except under ceil_mode, where its inference keeps a last window that would
start in the end padding: the engine re-types those with the rule here (shapes.py)."""

from __future__ import annotations

from onnx import TensorProto

from onnx_roofline.model.op_node import KnownNode
from onnx_roofline.model.tensors import dtype_name
from onnx_roofline.shapes.rules.arithmetic import constant_values, same, window
from onnx_roofline.shapes.rules.registry import Output, shape_function

shape_function("GroupNormalization", "MeanVarianceNormalization", domain="")(same(0))


@shape_function("HannWindow", "HammingWindow", "BlackmanWindow", domain="", value_inputs=(0,))
def signal_window(node: KnownNode) -> list[Output]:
    """[size] (periodic or symmetric alike) in output_datatype (float32 by default), `size` the
    constant scalar input."""
    size = constant_values(node, 0)
    if size is None:
        return [None]
    return [((int(size[0]),), dtype_name(node.attrs.get("output_datatype", TensorProto.FLOAT)))]


@shape_function("MelWeightMatrix", domain="", value_inputs=(0, 1))
def mel_weight_matrix(node: KnownNode) -> list[Output]:
    """[dft_length // 2 + 1, num_mel_bins] in output_datatype (float32 by default), from the
    constant num_mel_bins (input 0) and dft_length (input 1)."""
    bins, length = constant_values(node, 0), constant_values(node, 1)
    if bins is None or length is None:
        return [None]
    return [((int(length[0]) // 2 + 1, int(bins[0])), dtype_name(node.attrs.get("output_datatype", TensorProto.FLOAT)))]


@shape_function("MaxUnpool", domain="", value_inputs=(2,))
def max_unpool(node: KnownNode) -> list[Output]:
    """The constant `output_shape` (input 2) where there is one; else each spatial dim is
    (in − 1)·stride − pad_begin − pad_end + kernel, batch and channels as X's."""
    x = node.operand(0)
    if node.input(2) is not None:
        shape = constant_values(node, 2)
        return [None] if shape is None else [(tuple(int(d) for d in shape), x.dtype)]
    kernel = node.attrs["kernel_shape"]
    n = len(kernel)
    strides = node.attrs.get("strides") or [1] * n
    pads = node.attrs.get("pads") or [0] * (2 * n)
    spatial = tuple((size - 1) * strides[i] - pads[i] - pads[i + n] + kernel[i] for i, size in enumerate(x.shape[2:]))
    return [((*x.shape[:2], *spatial), x.dtype)]


@shape_function("MaxPool", "AveragePool", domain="")
def pool(node: KnownNode) -> list[Output]:
    """[N, C, out…] by the window arithmetic (arithmetic.window: a last window that would start in
    the end padding dropped under ceil_mode, as onnxruntime and PyTorch do); MaxPool's Indices
    alike, int64."""
    x = node.operand(0)
    shape = (*x.shape[:2], *window(node, x.shape[2:], node.attrs["kernel_shape"], dilation=True))
    return [(shape, x.dtype), (shape, "int64")]
