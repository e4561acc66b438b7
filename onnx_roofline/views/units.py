"""A fused kernel's compute time: each unit at its own peak, the busiest one setting the time.

A kernel that fuses a matrix op with its epilogue runs its FLOPs on two units (tensor cores and
the vector ALUs) and its transcendentals on a third (the special-function units). They work in
parallel, so the kernel's compute time is the largest of their times, each unit's work over its
own peak from the hardware table (work on one unit in two dtypes adds up: it is one unit). No
blended figure is made: dividing all the kernel's FLOPs by the busiest unit's time gave a "peak"
above the datasheet (1016.9 TFLOP/s for GPT-2's attention kernel on an H100, whose fp16 tensor
cores give 989.4). The kernel reports the busiest unit's peak and ridge, and every unit's share."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from onnx_roofline.costs.roofline import COMPUTE, MEMORY, Placement

SPECIAL = "special"
"""The special-function units: transcendentals (exp, tanh, erf, …) at the hardware's rate."""


@dataclass(frozen=True)
class UnitShare:
    """One unit's part of a kernel: the work it does (FLOPs, or transcendentals on SPECIAL), the
    table's peak for it (op/s) and the time it takes at that peak."""

    unit: str
    dtype: str | None
    work: float
    peak: float
    time_s: float

    def to_dict(self) -> dict:
        return {"unit": self.unit, "dtype": self.dtype, "work": self.work, "peak": self.peak, "time_s": self.time_s}


def unit_shares(nodes, scale: float = 1.0, special_rate: float | None = None) -> tuple[UnitShare, ...]:
    """Each (unit, dtype)'s FLOPs over its peak across `nodes` (costed NodeResults), then the
    transcendentals on the special-function units where a rate is given. `scale`: the share of
    the work a kernel does (a causal kernel's useful part), applied to every unit alike."""
    work: dict[tuple[str, str | None, float], float] = {}
    transcendentals = 0
    for node in nodes:
        if node.cost.flops and node.peak:
            key = (node.unit, node.dtype, node.peak)
            work[key] = work.get(key, 0) + node.cost.flops * scale
        transcendentals += node.cost.transcendentals
    shares = [UnitShare(unit, dtype, flops, peak, flops / peak) for (unit, dtype, peak), flops in work.items()]
    if special_rate and transcendentals:
        shares.append(
            UnitShare(SPECIAL, None, transcendentals * scale, special_rate, transcendentals * scale / special_rate)
        )
    return tuple(shares)


def busiest(shares: Iterable[UnitShare]) -> tuple[float, UnitShare | None]:
    """The kernel's compute time (the largest of its units' times, one unit's dtypes summed) and
    the FLOP unit whose roof it is placed against: the busiest unit's largest share."""
    per_unit: dict[str, float] = {}
    for share in shares:
        per_unit[share.unit] = per_unit.get(share.unit, 0.0) + share.time_s
    flop_shares = [s for s in shares if s.unit != SPECIAL]
    roof = max(flop_shares, key=lambda s: (per_unit[s.unit], s.time_s), default=None)
    return max(per_unit.values(), default=0.0), roof


def single_shares(node, scale: float = 1.0, special_rate: float | None = None) -> tuple[UnitShare, ...]:
    """A lone node's shares: its own compute time (a control-flow node's is its body's sum) on its
    unit, scaled, beside its transcendentals on the special-function units."""
    shares = [
        UnitShare(node.unit, node.dtype, node.cost.flops * scale, node.peak, node.placement.compute_time_s * scale)
    ]
    if special_rate and node.cost.transcendentals:
        work = node.cost.transcendentals * scale
        shares.append(UnitShare(SPECIAL, None, work, special_rate, work / special_rate))
    return tuple(shares)


def kernel_placement(
    flops: int, bytes_moved: int, memory: float, shares: tuple[UnitShare, ...], ridge: float
) -> Placement:
    """The roofline placement of a kernel doing `flops` (the FLOPs its intensity is about) over
    `shares` in `memory` seconds of traffic: compute time the busiest unit's, `ridge` the roof's
    own (the table's peak for the busiest FLOP unit over bandwidth), bound by the larger time."""
    compute, _ = busiest(shares)
    intensity = flops / bytes_moved if bytes_moved else None
    if bytes_moved == 0:
        bound = COMPUTE if compute else MEMORY
    else:
        bound = COMPUTE if compute >= memory and compute > 0 else MEMORY
    return Placement(intensity, ridge, bound, max(compute, memory), compute, memory)
