"""How the distinct experts a step touches move an MoE layer's bound as the batch grows.

Deployed, each MoE layer is one grouped-GEMM kernel (views/experts.py) reading the weights of the
E·(1 − (1 − k/E)^T) distinct experts T tokens touch: k at one token, all E soon after. Its FLOPs
grow with T while its weight bytes saturate at E experts', so it turns compute-bound where its
compute time reaches its memory time. `sweep` shows, per point, the experts read, their weight
bytes and the kernels' bound; `critical` solves that crossing. The kernel's bytes are not a line
in the dim (the distinct count is not), so `critical` fits what is — its FLOPs' compute time, its
bytes other than expert weights, the tokens — and adds the weights from the load's formula at
each integer value, searching (doubling, then bisecting) for the first that is compute-bound."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import cast

from onnx_roofline.commands.whatif.affine import PROBES, Line
from onnx_roofline.costs.cost import Cost
from onnx_roofline.costs.roofline import Placement
from onnx_roofline.report.units import si
from onnx_roofline.views.experts import GroupedGemm

SEARCH_LIMIT = 1 << 24  # the largest dim value searched for a crossing


@dataclass(frozen=True)
class MoePoint:
    """A sweep point's MoE kernels: the distinct experts each reads (their mean), of how many,
    the bytes of expert weights they read together, and their bound (or "mixed")."""

    distinct_experts: float
    experts: int
    weight_bytes: int
    bound: str

    def to_dict(self) -> dict:
        return {
            "distinct_experts": self.distinct_experts,
            "experts": self.experts,
            "expert_weight_bytes": self.weight_bytes,
            "bound": self.bound,
        }


def moe_point(view) -> MoePoint | None:
    """The MoE kernels of a deployed view; None in a view without one (the written view, a dense model)."""
    kernels = [k for k in view.nodes if isinstance(k, GroupedGemm)]
    if not kernels:
        return None
    bounds = {k.bound for k in kernels}  # each grouped kernel is placed
    return MoePoint(sum(k.distinct_experts for k in kernels) / len(kernels), kernels[0].experts,
                    sum(k.expert_weight_bytes for k in kernels), bounds.pop() if len(bounds) == 1 else "mixed")  # fmt: skip


def moe_columns(points: Sequence) -> list[tuple[str, list[str]]]:
    """The sweep table's MoE columns, where its points have MoE kernels."""
    found = [p.experts for p in points]
    if not any(found):
        return []
    return [
        ("experts read", [f"{m.distinct_experts:.2f}/{m.experts}" if m else "" for m in found]),
        ("expert weights", [si(m.weight_bytes, "B") if m else "" for m in found]),
        ("MoE bound", [m.bound if m else "" for m in found]),
    ]


@dataclass(frozen=True)
class MoeCrossing:
    """One MoE kernel: the distinct experts it reads at each probe, and the smallest dim value at
    which it is compute-bound (None: not up to SEARCH_LIMIT)."""

    kernel: str
    experts: int
    distinct: tuple[float, ...]
    critical: int | None

    def to_dict(self) -> dict:
        return {"kernel": self.kernel, "experts": self.experts, "distinct_experts": dict(zip(map(str, PROBES), self.distinct, strict=False)),
                "critical": self.critical}  # fmt: skip


def moe_crossings(views: Sequence, load, bandwidth: float) -> tuple[MoeCrossing, ...]:
    """Each MoE kernel's crossing over the probes' deployed `views` (kernels matched by name), under `load`."""
    by_name = [{k.name: k for k in view.nodes if isinstance(k, GroupedGemm)} for view in views]
    return tuple(
        _crossing([found[name] for found in by_name], load, bandwidth)
        for name in by_name[0]
        if all(name in f for f in by_name)
    )


def _crossing(kernels: list[GroupedGemm], load, bandwidth: float) -> MoeCrossing:
    first = kernels[0]
    distinct = tuple(k.distinct_experts for k in kernels)
    # Each grouped kernel is costed and placed; two points always fit a line (compute's).
    tokens = Line.fit(PROBES, tuple(k.tokens for k in kernels))
    compute = cast(
        Line, Line.fit(PROBES[:2], tuple(Fraction(cast(Placement, k.placement).compute_time_s) for k in kernels[:2]))
    )
    other = Line.fit(PROBES, tuple(cast(Cost, k.cost).bytes - k.expert_weight_bytes for k in kernels))
    per_expert = (
        Fraction(first.expert_weight_bytes) / Fraction(first.distinct_experts)
        if first.distinct_experts
        else Fraction(0)
    )
    if tokens is None or other is None:
        return MoeCrossing(first.name, first.experts, distinct, None)

    def compute_bound(x: int) -> bool:
        weights = per_expert * Fraction(load.distinct(first.experts, first.top_k, int(tokens(x))))
        return compute(x) * Fraction(bandwidth) >= other(x) + weights

    return MoeCrossing(first.name, first.experts, distinct, _first(compute_bound))


def _first(holds) -> int | None:
    """The smallest x ≥ 1 where `holds` (monotone: false, then true), or None up to SEARCH_LIMIT."""
    if holds(1):
        return 1
    low, high = 1, 2
    while not holds(high):
        low, high = high, high * 2
        if high > SEARCH_LIMIT:
            return None
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if holds(middle) else (middle, high)
    return high
