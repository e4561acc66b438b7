"""Placing a cost on a roofline: a pure function of FLOPs, bytes, peak and bandwidth."""

from __future__ import annotations

from dataclasses import dataclass

COMPUTE = "compute"
MEMORY = "memory"
UNKNOWN = "unknown"


@dataclass(frozen=True)
class Placement:
    intensity: float | None  # FLOP/byte; None when no bytes move (pure arithmetic on registers)
    ridge: float  # FLOP/byte where the compute ceiling meets the memory diagonal
    bound: str
    time_s: float  # lower bound: max(FLOPs / peak, bytes / bandwidth)
    compute_time_s: float
    memory_time_s: float


def place(flops: int, bytes_moved: int, peak: float, bandwidth: float) -> Placement:
    """Compute-bound when intensity ≥ ridge; a node that moves no bytes but computes is compute-bound,
    one that does neither (a view) counts as memory-bound with zero time."""
    ridge = peak / bandwidth
    compute_time, memory_time = flops / peak, bytes_moved / bandwidth
    if bytes_moved == 0:
        intensity, bound = None, COMPUTE if flops else MEMORY
    else:
        intensity = flops / bytes_moved
        bound = COMPUTE if intensity >= ridge else MEMORY
    return Placement(intensity, ridge, bound, max(compute_time, memory_time), compute_time, memory_time)
