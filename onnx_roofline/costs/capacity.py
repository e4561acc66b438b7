"""What "fits" means, and the largest batch that fits: the one memory model every command judges by.

A footprint (costs/memory.py: weights + resident KV cache + peak activations) fits when it is at most
the **usable** memory: the accelerator's `memory_capacity` × a memory utilization. Serving engines
name that fraction and leave the rest to the runtime's workspace (cuBLAS and attention workspaces,
CUDA graphs, NCCL buffers, the allocator's fragmentation): vLLM's `gpu_memory_utilization`, "the
fraction of GPU memory to be used for the model executor, which can range from 0 to 1", default 0.9
(https://docs.vllm.ai/en/latest/configuration/engine_args.html, `--gpu-memory-utilization`).
The default here is vLLM's; `--memory-utilization F` sets it.

The largest batch is found exactly: B fits and B + 1 does not, each judged on the footprint
analysis gives at that batch. The footprint is nearly a line in the batch (weights constant, the
KV cache and activations per sequence), so a line through two probes places the answer, a secant
step refines it, and a bisection between the largest value known to fit and the smallest known not
to guarantees the answer where the peak moves and the line misleads."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

DEFAULT_MEMORY_UTILIZATION = 0.9
"""vLLM's `gpu_memory_utilization` default (see the module docstring)."""

MAX_BATCH = 1 << 40
"""Where the search gives up: a footprint that still fits here does not grow with the dim."""
PROBES = (1, 2)
"""The line's two first values: every footprint is analysed at batch 1 anyway."""
SECANT_STEPS = 4
"""Secant steps before the search bisects: the footprint is nearly a line, so two or three suffice."""


def checked_utilization(value: float) -> float:
    """`value` if it is a fraction in (0, 1]; a one-line ValueError otherwise."""
    if not (isinstance(value, (int, float)) and 0 < value <= 1):
        raise ValueError(
            f"the memory utilization must be a fraction in (0, 1], e.g. 0.9 (vLLM's default); got {value!r}"
        )
    return float(value)


@dataclass(frozen=True)
class MemoryBudget:
    """The memory a model may hold on one device: capacity × utilization (None: no capacity given)."""

    capacity: float | None
    utilization: float = DEFAULT_MEMORY_UTILIZATION

    @property
    def usable(self) -> Fraction | None:
        """Exact: 80 GB × 0.9 is 72e9 bytes, not a float's neighbour of it."""
        return None if self.capacity is None else Fraction(self.capacity) * Fraction(str(self.utilization))

    def fits(self, total: float | Fraction) -> bool | None:
        usable = self.usable
        return None if usable is None else total <= usable

    def to_dict(self) -> dict[str, Any]:
        usable = self.usable
        return {
            "memory_capacity": self.capacity,
            "memory_utilization": self.utilization,
            "usable_memory_bytes": None if usable is None else float(usable),
        }


@dataclass(frozen=True)
class LargestFit:
    """The largest value of a dim whose footprint fits the budget, and the footprint around it."""

    budget: MemoryBudget
    largest: int | None  # None: nothing fits at 1, the footprint does not grow, or no capacity is given
    intercept: Fraction | None  # the footprint's line through the probes: intercept + per_unit × value
    per_unit: Fraction | None  # (None, None): no capacity given, nothing analysed
    bytes_at_largest: Fraction | None  # the footprint analysed at `largest` (≤ usable) ...
    bytes_above_largest: Fraction | None  # ... and at `largest` + 1 (> usable)

    def to_dict(self, dim: str | None = None) -> dict[str, Any]:
        return {
            "dim": dim,
            "largest_that_fits": self.largest,
            **self.budget.to_dict(),
            "bytes_at_largest": _number(self.bytes_at_largest),
            "bytes_above_largest": _number(self.bytes_above_largest),
            "intercept_bytes": _number(self.intercept),
            "bytes_per_unit": _number(self.per_unit),
        }


def largest_fitting(total: Callable[[int], float | Fraction], budget: MemoryBudget) -> LargestFit:
    """The largest x ≥ 1 with total(x) ≤ budget.usable, where `total` (the footprint analysed at x)
    grows with x; exact, each value tried analysed once (see the module docstring)."""
    usable = budget.usable
    if usable is None:
        return LargestFit(budget, None, None, None, None, None)  # nothing to judge against: nothing analysed
    seen: dict[int, Fraction] = {}

    def at(x: int) -> Fraction:
        if x not in seen:
            seen[x] = Fraction(total(x))
        return seen[x]

    a, b = PROBES
    per_unit = (at(b) - at(a)) / (b - a)
    intercept = at(a) - per_unit * a
    if at(1) > usable:
        return LargestFit(budget, None, intercept, per_unit, None, at(1))
    if per_unit <= 0:
        return LargestFit(budget, None, intercept, per_unit, None, None)  # it does not grow with the dim
    fits = max(x for x in seen if seen[x] <= usable)  # the largest value known to fit ...
    over = min((x for x in seen if seen[x] > usable), default=None)  # ... and the smallest known not to
    guess, tried = _solve(intercept, per_unit, usable), [a, b]
    while over is None or over - fits > 1:
        if guess is None or not fits < guess < (over or MAX_BATCH + 1) or len(tried) - len(PROBES) >= SECANT_STEPS:
            guess = fits * 2 if over is None else (fits + over) // 2  # the line misled: gallop, then bisect
            if guess > MAX_BATCH:
                return LargestFit(budget, None, intercept, per_unit, None, None)  # it does not grow
        tried.append(guess)
        if at(guess) <= usable:
            fits, beside = guess, guess + 1  # the next value up decides it
        else:
            over, beside = guess, guess - 1
        x0, x1 = tried[-2:]  # the line redrawn through the last two values tried (a secant step)
        slope = (at(x1) - at(x0)) / (x1 - x0) if x1 != x0 else per_unit
        solved = _solve(at(x1) - slope * x1, slope, usable)
        guess = (
            solved if solved is not None and fits < solved < (over or MAX_BATCH + 1) and solved not in seen else beside
        )
    return LargestFit(budget, fits, intercept, per_unit, at(fits), at(over))


def _solve(intercept: Fraction, slope: Fraction, usable: Fraction) -> int | None:
    """The largest x on the line at or under `usable`; None where the line does not grow."""
    return None if slope <= 0 else int((usable - intercept) // slope)


def _number(value: Fraction | None) -> float | int | None:
    return None if value is None else int(value) if value.denominator == 1 else float(value)
