"""The largest value of a dim whose memory footprint fits the accelerator.

Weights are constant and the KV cache a line in the batch, but the activation peak may move to
another node as the batch grows, so a line through two probes gives a first answer that analysis
checks there: while it does not fit (or the next value does), the line is redrawn through the last
two values tried (a secant step), then the answer is confirmed on both sides."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from math import floor

from onnx_roofline.commands.whatif.affine import Line

FIT_PROBES = (2, 64)


def largest_fitting(total: Callable[[int], float], capacity: float | None, probes: tuple[int, int] = FIT_PROBES) -> tuple[int | None, Line | None]:
    """(the largest x ≥ probes[0] with total(x) ≤ capacity, the footprint's line through the
    probes); None where nothing fits at the first probe or the footprint does not grow."""
    seen: dict[int, Fraction] = {}

    def at(x: int) -> Fraction:
        if x not in seen:
            seen[x] = Fraction(total(x))
        return seen[x]

    a, b = probes
    line = Line(at(a) - (at(b) - at(a)) / (b - a) * a, (at(b) - at(a)) / (b - a))
    if capacity is None or line.slope <= 0 or at(a) > capacity:
        return None, line
    room = Fraction(capacity)
    guess = floor((room - line.intercept) / line.slope)
    for _ in range(6):
        if at(guess) <= room < at(guess + 1):
            break
        a, b = b, guess
        slope = (at(b) - at(a)) / (b - a) if b != a else line.slope
        if slope <= 0:
            break
        guess = max(probes[0], floor(b + (room - at(b)) / slope))
    return (guess if at(guess) <= room < at(guess + 1) else None), line
