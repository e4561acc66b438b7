"""Convolutions whose window does not fit their input: the kernel, dilated, larger than the input
padded. ONNX's inference divides the negative remainder toward zero and gives one output where
there is none (a 2×2 kernel, stride 2, on a 1×1 input: [N, C, 1, 1]), or an empty one; onnxruntime
refuses to run either ("Invalid input shape"). It happens at dims too small for the model (a
ConvNeXt at 7×7 pixels, whose stem divides by 4 and whose stages by 2): a result there would cost
a model that cannot run, so it is an error naming the node, the sizes and the dims. (Pools in the
same case run, with the output ONNX's inference gives them, and are costed so.)"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import onnx

from onnx_roofline.errors import DimensionError
from onnx_roofline.nodes import Node
from onnx_roofline.tensors import TensorInfo

WINDOW_OPS = {"Conv": 1, "ConvInteger": 1, "QLinearConv": 3}
"""The default-domain convolutions over NCHW… spatial dims: the input slot of the weight whose dims
past the second give the kernel where no kernel_shape says it."""


def check_windows(nodes: Iterable[Node], values: Mapping[str, TensorInfo], dims: Mapping[str, int]) -> None:
    """Raises DimensionError at the first convolution whose dilated kernel exceeds its padded input
    along a spatial axis (explicit pads; auto_pad SAME pads as needed)."""
    for node in nodes:
        if node.domain or node.op_type not in WINDOW_OPS or not node.inputs:
            continue
        data = values.get(node.inputs[0])
        if data is None or not data.is_known or len(data.shape) < 3:
            continue
        attrs = {a.name: a for a in node.attributes}
        if _attribute(attrs, "auto_pad", b"NOTSET") in (b"SAME_UPPER", b"SAME_LOWER"):
            continue
        spatial = data.shape[2:]
        kernel = _kernel(node, attrs, values, len(spatial))
        if kernel is None:
            continue
        valid = _attribute(attrs, "auto_pad", b"NOTSET") == b"VALID"
        pads = [0] * 2 * len(spatial) if valid else list(_attribute(attrs, "pads", [0] * 2 * len(spatial)))
        dilations = list(_attribute(attrs, "dilations", [1] * len(spatial)))
        if len(pads) != 2 * len(spatial) or len(dilations) != len(spatial):
            continue  # ONNX's inference refuses these: not this check's to word
        padded = [size + pads[axis] + pads[axis + len(spatial)] for axis, size in enumerate(spatial)]
        extent = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
        if all(p >= e for p, e in zip(padded, extent)):
            continue
        name = f"{node.name!r} ({node.op_type})" if node.name else f"of type {node.op_type}"
        at = ", ".join(f"{k}={v}" for k, v in sorted(dims.items())) or "its declared shapes"
        raise DimensionError(
            f"node {name} cannot run at {at}: its input {data.name!r} is {'×'.join(map(str, spatial))} "
            f"(padded {'×'.join(map(str, padded))}), smaller than its {'×'.join(map(str, extent))} window "
            f"(kernel {'×'.join(map(str, kernel))}, dilations {dilations}); larger dims give it an output"
        )


def _kernel(node: Node, attrs: Mapping[str, onnx.AttributeProto], values: Mapping[str, TensorInfo], rank: int) -> list[int] | None:
    """kernel_shape, else the weight's spatial dims; None where neither is known."""
    kernel = list(_attribute(attrs, "kernel_shape", []))
    if not kernel:
        slot = WINDOW_OPS[node.op_type]
        weight = values.get(node.inputs[slot]) if slot < len(node.inputs) else None
        if weight is None or not weight.is_known:
            return None
        kernel = list(weight.shape[2:])
    return kernel if len(kernel) == rank else None


def _attribute(attrs: Mapping[str, onnx.AttributeProto], name: str, default):
    attr = attrs.get(name)
    if attr is None:
        return default
    return {onnx.AttributeProto.INT: attr.i, onnx.AttributeProto.INTS: attr.ints, onnx.AttributeProto.STRING: attr.s}.get(attr.type, default)
