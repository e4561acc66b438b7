"""Matrix products: MatMul, Gemm, Einsum. They run on the matrix unit (tensor cores)."""

from __future__ import annotations

import math
import re

from onnx_roofline.costs.cost import Cost
from onnx_roofline.costs.rules.registry import MATRIX, VECTOR, register
from onnx_roofline.model.op_node import KnownNode


@register("MatMul", unit=MATRIX)
def matmul(node: KnownNode) -> Cost:
    """[..., M, K] × [..., K, N]: 2·M·K·N per (broadcast) batch element, i.e. 2·K per output element.
    1-D operands follow numpy (K-vector). Bytes: the default (A, B read once; Y written once)."""
    k = node.operand(0).shape[-1]
    return Cost(flops=2 * k * node.result(0).numel)


@register("Gemm", unit=MATRIX)
def gemm(node: KnownNode) -> Cost:
    """Y = alpha·A'·B' + beta·C: 2·M·K·N, plus M·N for adding C (a bias), plus M·N for each
    scaling by alpha or beta that is not 1."""
    a = node.operand(0).shape
    k = a[0] if node.attrs.get("transA", 0) else a[1]
    outputs = node.result(0).numel
    flops = 2 * k * outputs
    if node.attrs.get("alpha", 1.0) != 1.0:
        flops += outputs
    if node.input(2) is not None:
        flops += outputs * (2 if node.attrs.get("beta", 1.0) != 1.0 else 1)
    return Cost(flops=flops)


_EINSUM_TERM = re.compile(r"[A-Za-z]|\.\.\.")


@register("Einsum", unit=MATRIX)
def einsum(node: KnownNode) -> Cost:
    """Contracted pairwise, left to right (torch.einsum's order; onnxruntime's kernel also takes
    the operands in order), each index summed away as soon as no later operand and not the output
    needs it. First, each operand's own indices that appear nowhere else are summed: numel(in) −
    numel(out) adds. Then each pairwise step over the index space P of its two operands costs
    2·P when it contracts an index (a multiply and an add: the MatMul convention) and P when it
    only multiplies (an outer or elementwise product). `ij,jk,kl->il` with 32×64, 64×128, 128×16:
    2·32·64·128 + 2·32·128·16 = 655,360. A one-operand Einsum (a transpose, a sum, a trace) is
    vector work; one with two or more operands runs on the matrix unit."""
    equation = node.attrs["equation"]
    equation = (equation.decode() if isinstance(equation, bytes) else equation).replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    terms = [_EINSUM_TERM.findall(term) for term in lhs.split(",")]
    sizes = _einsum_sizes(terms, node.present_inputs)
    operands = [_expand_ellipsis(labels, sizes) for labels in terms]
    every = [label for labels in operands for label in labels]
    output = (
        set(_expand_ellipsis(_EINSUM_TERM.findall(rhs), sizes))
        if arrow
        else {label for label in every if every.count(label) == 1 or label.startswith("...")}
    )
    flops, current = 0, None
    for position, term in enumerate(operands):
        labels = set(term)
        later = {label for rest in operands[position + 1 :] for label in rest} | output
        own = set(labels) - later - (set(current) if current is not None else set())
        if own:  # summed within this operand before it meets the others
            kept = set(labels) - own
            flops += _points(labels, sizes) - _points(kept, sizes)
            labels = kept
        if current is None:
            current = set(labels)
            continue
        joined = current | set(labels)
        contracted = joined - later
        flops += _points(joined, sizes) * (2 if contracted else 1)
        current = joined - contracted
    return Cost(flops=flops, unit=None if len(operands) > 1 else VECTOR)


def _einsum_sizes(terms: list[list[str]], tensors) -> dict[str, int]:
    """Each index's size; the dims under an ellipsis are indices `...1`, `...2` counted from the
    right, as broadcasting aligns them (the largest size wins)."""
    sizes: dict[str, int] = {}
    for labels, tensor in zip(terms, tensors, strict=False):
        ellipsis_rank = tensor.rank - (len(labels) - labels.count("..."))
        dims = iter(tensor.shape)
        for label in labels:
            if label == "...":
                for position in range(ellipsis_rank):
                    key = f"...{ellipsis_rank - position}"
                    sizes[key] = max(sizes.get(key, 1), next(dims))
            else:
                sizes[label] = next(dims)
    return sizes


def _expand_ellipsis(labels: list[str], sizes: dict[str, int]) -> list[str]:
    broadcast = sorted((key for key in sizes if key.startswith("...")), reverse=True)
    return [name for label in labels for name in (broadcast if label == "..." else [label])]


def _points(labels, sizes: dict[str, int]) -> int:
    return math.prod(sizes[label] for label in set(labels))
