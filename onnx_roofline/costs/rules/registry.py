"""The cost-rule registry: one pure, shape-only formula per (domain, op_type, since_version).

Rules register with a decorator, as in torch's flop_counter; a lookup takes the newest rule whose
`since` is at most the model's opset for that domain, as ONNX's reference evaluator does.

A formula reads its node only through the OpNode it is given and keeps no state: the walk reuses
the result of one that read only tensors (and attributes) for every alike node (see OpNode.reads)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from onnx_roofline.model.schemas import normalize_domain

if TYPE_CHECKING:
    from onnx_roofline.costs.cost import Cost
    from onnx_roofline.model.op_node import KnownNode

Formula = Callable[["KnownNode"], "Cost"]
"""A cost rule: the walk calls it once every tensor present in the node is known."""

MATRIX = "matrix"  # tensor cores, AMX: MatMul, Gemm, Conv, attention
VECTOR = "vector"  # everything else


@dataclass(frozen=True)
class Rule:
    op_type: str
    domain: str
    since: int
    formula: Formula
    unit: str
    compute_dtype: int | str
    """Which dtype picks the peak: an input index (falls back to output 0), or a literal dtype name."""

    @property
    def doc(self) -> str:
        return (self.formula.__doc__ or "").strip()


_RULES: dict[tuple[str, str], list[Rule]] = {}


def register(
    *op_types: str, domain: str = "", since: int = 1, unit: str = VECTOR, compute_dtype: int | str = 0
) -> Callable[[Formula], Formula]:
    """Register `formula` for each op type; a second registration of the same key is a bug."""

    def decorate(formula: Formula) -> Formula:
        for op_type in op_types:
            key = (normalize_domain(domain), op_type)
            versions = _RULES.setdefault(key, [])
            if any(rule.since == since for rule in versions):
                raise ValueError(f"duplicate cost rule for {key} since opset {since}")
            versions.append(Rule(op_type, key[0], since, formula, unit, compute_dtype))
            versions.sort(key=lambda rule: rule.since)
        return formula

    return decorate


def lookup(domain: str, op_type: str, opset: int | None) -> Rule | None:
    """The newest rule not newer than `opset` (any version when the model does not import the domain)."""
    versions = _RULES.get((normalize_domain(domain), op_type))
    if not versions:
        return None
    if len(versions) == 1:
        return versions[0] if opset is None or versions[0].since <= opset else None
    eligible = [rule for rule in versions if opset is None or rule.since <= opset]
    return eligible[-1] if eligible else None


def all_rules() -> Iterator[Rule]:
    for key in sorted(_RULES):
        yield from _RULES[key]
