"""Matrix products: MatMul, Gemm, Einsum. They run on the matrix unit (tensor cores)."""

from __future__ import annotations

import math
import re

from onnx_roofline.costs import Cost
from onnx_roofline.rules.context import OpNode
from onnx_roofline.rules.registry import MATRIX, register


@register("MatMul", unit=MATRIX)
def matmul(node: OpNode) -> Cost:
    """[..., M, K] × [..., K, N]: 2·M·K·N per (broadcast) batch element, i.e. 2·K per output element.
    1-D operands follow numpy (K-vector). Bytes: the default (A, B read once; Y written once)."""
    k = node.inputs[0].shape[-1]
    return Cost(flops=2 * k * node.outputs[0].numel)


@register("Gemm", unit=MATRIX)
def gemm(node: OpNode) -> Cost:
    """Y = alpha·A'·B' + beta·C: 2·M·K·N, plus M·N for adding C (a bias), plus M·N for each
    scaling by alpha or beta that is not 1."""
    a = node.inputs[0].shape
    k = a[0] if node.attrs.get("transA", 0) else a[1]
    outputs = node.outputs[0].numel
    flops = 2 * k * outputs
    if node.attrs.get("alpha", 1.0) != 1.0:
        flops += outputs
    if node.input(2) is not None:
        flops += outputs * (2 if node.attrs.get("beta", 1.0) != 1.0 else 1)
    return Cost(flops=flops)


_EINSUM_TERM = re.compile(r"[A-Za-z]|\.\.\.")


@register("Einsum", unit=MATRIX)
def einsum(node: OpNode) -> Cost:
    """P = the product of the sizes of every distinct index. Each term of the sum costs
    (operands − 1) multiplies, plus one add when some index is contracted (summed away):
    a two-operand contraction is 2·P, the MatMul convention (2·M·K·N)."""
    equation = node.attrs["equation"].decode() if isinstance(node.attrs["equation"], bytes) else node.attrs["equation"]
    lhs, _, rhs = equation.replace(" ", "").partition("->")
    terms = lhs.split(",")
    sizes: dict[str, int] = {}
    for term, tensor in zip(terms, node.present_inputs):
        labels = _EINSUM_TERM.findall(term)
        ellipsis_rank = tensor.rank - (len(labels) - labels.count("..."))
        dims = iter(tensor.shape)
        for label in labels:
            if label == "...":
                for position in range(ellipsis_rank):
                    size = next(dims)
                    key = f"...{ellipsis_rank - position}"  # align ellipsis dims from the right, as broadcasting does
                    sizes[key] = max(sizes.get(key, 1), size)
            else:
                sizes[label] = next(dims)
    output_labels = set(_EINSUM_TERM.findall(rhs)) if "->" in equation else {
        label for label in sizes if "".join(terms).count(label) == 1 or label.startswith("...")
    }
    contracted = any(label not in output_labels and not label.startswith("...") for label in sizes)
    points = math.prod(sizes.values())
    multiplies = points * (len(terms) - 1)
    return Cost(flops=multiplies + (points if contracted else 0))
