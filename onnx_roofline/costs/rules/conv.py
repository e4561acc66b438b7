"""Convolutions: Conv and ConvTranspose (groups, dilations, any spatial rank), on the matrix unit."""

from __future__ import annotations

import math

from onnx_roofline.costs.cost import Cost
from onnx_roofline.costs.rules.registry import MATRIX, register
from onnx_roofline.model.op_node import KnownNode


@register("Conv", unit=MATRIX)
def conv(node: KnownNode) -> Cost:
    """2·N·Cout·Hout·Wout·(Cin/group)·kH·kW — every output element is a dot product over the
    weight's (Cin/group)·kH·kW taps, W being [Cout, Cin/group, kH, kW] — plus one FLOP per output
    for the bias B. Dilation and stride change which inputs are read, not how many taps."""
    taps = math.prod(node.operand(1).shape[1:])
    outputs = node.result(0).numel
    bias = outputs if node.input(2) is not None else 0
    return Cost(flops=2 * taps * outputs + bias)


@register("ConvTranspose", unit=MATRIX)
def conv_transpose(node: KnownNode) -> Cost:
    """Every input element scatters into (Cout/group)·kH·kW outputs, W being [Cin, Cout/group, kH, kW]:
    2·N·Cin·Hin·Win·(Cout/group)·kH·kW, plus one FLOP per output for the bias."""
    taps = math.prod(node.operand(1).shape[1:])
    bias = node.result(0).numel if node.input(2) is not None else 0
    return Cost(flops=2 * taps * node.operand(0).numel + bias)
