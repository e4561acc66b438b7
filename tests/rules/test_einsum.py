"""Einsum: contracted pairwise, left to right; a one-operand Einsum is vector work. Each expected
count is the arithmetic in the comment; the output shape is checked against onnxruntime."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from onnx_roofline import analyze
from tests.conftest import one_node_model

CASES = [
    # (equation, operand shapes, FLOPs, unit)
    (
        "ij,jk,kl->il",
        [[32, 64], [64, 128], [128, 16]],
        2 * 32 * 64 * 128 + 2 * 32 * 128 * 16,
        "matrix",
    ),  # (AB)C: 655,360
    ("ij,jk->ik", [[32, 64], [64, 16]], 2 * 32 * 64 * 16, "matrix"),  # a MatMul: 2·M·K·N
    ("bij,bjk->bik", [[2, 32, 64], [2, 64, 16]], 2 * 2 * 32 * 64 * 16, "matrix"),  # batched
    ("...ij,...jk->...ik", [[2, 32, 64], [1, 64, 16]], 2 * 2 * 32 * 64 * 16, "matrix"),  # ellipsis broadcasts 1 → 2
    ("i,j->ij", [[3], [4]], 3 * 4, "matrix"),  # outer product: one multiply per output, nothing summed
    ("ij,ij->", [[3, 4], [3, 4]], 2 * 3 * 4, "matrix"),  # a dot product: 12 multiplies, 12 adds
    ("bhqd,bhkd->bhqk", [[1, 2, 8, 16], [1, 2, 4, 16]], 2 * 2 * 8 * 4 * 16, "matrix"),  # attention scores
    ("ij->i", [[32, 64]], 32 * 64 - 32, "vector"),  # row sums: 63 adds per row
    ("ij->ji", [[32, 64]], 0, "vector"),  # a transpose: no arithmetic
    ("ii->i", [[5, 5]], 0, "vector"),  # the diagonal
    ("ij,jk", [[4, 6], [6, 3]], 2 * 4 * 6 * 3, "matrix"),  # implicit output "ik"
    ("ijk,jl->il", [[4, 6, 5], [6, 3]], (4 * 6 * 5 - 4 * 6) + 2 * 4 * 6 * 3, "matrix"),  # k summed first, then j
]


@pytest.mark.parametrize(("equation", "shapes", "flops", "unit"), CASES, ids=[c[0] for c in CASES])
def test_einsum(equation, shapes, flops, unit):
    inputs = [(f"x{i}", "float32", shape) for i, shape in enumerate(shapes)]
    model = one_node_model("Einsum", inputs, ["y"], {"equation": equation}, opset=17)
    (node,) = analyze(model).nodes
    assert node.status == "ok", node.reason
    assert (node.cost.flops, node.unit) == (flops, unit)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {f"x{i}": np.ones(shape, np.float32) for i, shape in enumerate(shapes)}
    assert node.outputs[0].shape == session.run(None, feeds)[0].shape
