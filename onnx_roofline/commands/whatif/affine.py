"""Exact lines through probe points, and where a ratio of two lines crosses a ridge.

FLOPs and bytes of a matrix node are affine in a batch-like dim (a weight read once, activations
that scale with the dim), so two probes fix each line and a third checks it; the crossing is then
solved in closed form rather than scanned. Arithmetic is in Fractions: the counts are exact ints."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import cast

PROBES = (1, 2, 64)
"""Dim values the lines are fitted at (first two) and checked at (the third)."""


@dataclass(frozen=True)
class Line:
    intercept: Fraction
    slope: Fraction

    def __call__(self, x: float | Fraction) -> Fraction:
        return self.intercept + self.slope * Fraction(x)

    def __add__(self, other: Line) -> Line:
        return Line(self.intercept + other.intercept, self.slope + other.slope)

    def __sub__(self, other: Line) -> Line:
        return Line(self.intercept - other.intercept, self.slope - other.slope)

    def scaled(self, factor: float | Fraction) -> Line:
        return Line(self.intercept * Fraction(factor), self.slope * Fraction(factor))

    def root(self) -> Fraction | None:
        return None if self.slope == 0 else -self.intercept / self.slope

    @classmethod
    def fit(cls, xs: tuple[int, ...], ys: tuple[int | Fraction, ...]) -> Line | None:
        """The line through the first two points, or None when any other point is off it."""
        (x0, x1, *rest), (y0, y1, *checks) = xs, ys
        slope = Fraction(y1 - y0, x1 - x0)
        line = cls(Fraction(y0) - slope * x0, slope)
        return line if all(line(x) == y for x, y in zip(rest, checks, strict=False)) else None


ZERO = Line(Fraction(0), Fraction(0))


def ridge_crossing(flops: Line, bytes_moved: Line, ridge: Fraction | float, lowest: int = 1) -> Fraction | None:
    """The smallest x ≥ `lowest` with flops(x) / bytes(x) ≥ ridge, where intensity grows with x.

    flops(x) ≥ R·bytes(x)  ⇔  (f1 − R·m1)·x ≥ R·m0 − f0. None when the asymptote f1/m1 is at or
    below the ridge (the node never becomes compute-bound however large x grows). Pass the ridge as
    Fraction(peak) / Fraction(bandwidth) for an exact answer."""
    excess = flops - bytes_moved.scaled(Fraction(ridge))
    if excess.slope <= 0:
        return None
    return max(Fraction(lowest), cast(Fraction, excess.root()))  # a positive slope has a root


def ceil(x: Fraction | None) -> int | None:
    return None if x is None else math.ceil(x)
