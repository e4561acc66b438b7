"""Which ops a runtime fuses: the classes the fused view is built from.

Elementwise ops are taken from the elementwise rule family itself (one list, not a second copy);
views are the zero-byte reshapes of DESIGN.md; matrix ops are those whose rule runs on the matrix unit."""

from __future__ import annotations

from functools import lru_cache

from onnx_roofline.costs import rules
from onnx_roofline.costs.rules import elementwise
from onnx_roofline.costs.rules.registry import MATRIX

VIEWS = frozenset({"Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity", "BitCast"})
"""Pure views: no data moves, so a fused kernel sees through them."""

LAYOUT = VIEWS | {"Transpose"}
"""Views plus Transpose: an attention kernel reads Q/K/V and writes O in whatever layout, by strides."""

SCALES = frozenset({"Mul", "Div"})
"""With a scalar operand, a scale an attention kernel applies in registers."""


@lru_cache(maxsize=1)
def elementwise_ops() -> frozenset[str]:
    """ai.onnx ops costed by the elementwise rule family, less its views: one output element per
    input element position (with broadcasting), so a chain of them never needs its intermediates."""
    return frozenset(
        rule.op_type
        for rule in rules.all_rules()
        if rule.domain == "" and rule.formula.__module__ == elementwise.__name__ and rule.op_type not in VIEWS
    )


def is_matrix(domain: str, op_type: str) -> bool:
    """MatMul, Gemm, Conv, attention ops…: their rule runs on the matrix unit."""
    rule = rules.lookup(domain, op_type, None)
    return rule is not None and rule.unit == MATRIX
