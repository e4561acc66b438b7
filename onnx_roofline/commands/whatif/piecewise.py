"""Predicted time as a function of one dim, exactly: each kernel's compute time per unit and its
bytes are lines in the dim, its time is the largest of them, so the model's compute-bound share of
time is a ratio of lines between the points where some kernel changes regime. Solving segment by
segment gives the exact smallest value of the dim at which that share reaches a target."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from fractions import Fraction
from itertools import combinations

from onnx_roofline.commands.whatif.affine import ZERO, Line


@dataclass(frozen=True)
class KernelLines:
    name: str
    flops: Line
    bytes: Line
    unit_times: tuple[Line, ...]  # seconds of compute per unit (units overlap: the largest counts)

    def memory_time(self, bandwidth: float) -> Line:
        return self.bytes.scaled(1 / Fraction(bandwidth))

    def compute_time_at(self, x: Fraction) -> tuple[Fraction, Line]:
        line = max(self.unit_times, key=lambda u: u(x), default=ZERO)
        return line(x), line

    def breakpoints(self, bandwidth: float) -> set[Fraction]:
        """Where the busiest unit changes, or compute and memory time cross."""
        pieces = [*self.unit_times, self.memory_time(bandwidth)]
        return {root for a, b in combinations(pieces, 2) if (root := (a - b).root()) is not None}


def share_crossing(
    kernels: list[KernelLines], bandwidth: float, share: Fraction = Fraction(1, 2), lowest: int = 1
) -> Fraction | None:
    """Smallest x ≥ `lowest` at which compute-bound kernels take at least `share` of the time
    (a kernel is compute-bound when its compute time ≥ its memory time, as roofline.place says)."""
    alike = _alike(kernels, bandwidth)
    cuts = sorted({Fraction(lowest), *(p for k, _, _ in alike for p in k.breakpoints(bandwidth) if p > lowest)})
    for lo, hi in zip(cuts, [*cuts[1:], None], strict=False):
        gap = _gap(alike, share, lo + 1 if hi is None else (lo + hi) / 2)
        if gap(lo) >= 0:
            return Fraction(lo)
        root = gap.root()  # None only where the slope is 0
        if gap.slope > 0 and root is not None and (hi is None or root < hi):
            return root
    return None


def share_at_infinity(kernels: list[KernelLines], bandwidth: float) -> float | None:
    """The limit of the compute-bound share as the dim grows: the ratio of slopes in the last segment."""
    alike = _alike(kernels, bandwidth)
    cuts = [p for k, _, _ in alike for p in k.breakpoints(bandwidth)]
    x = max([Fraction(1), *cuts]) + 1
    compute, total = ZERO, ZERO
    for kernel, memory, count in alike:
        value, line = kernel.compute_time_at(x)
        if value >= memory(x):
            compute, total = compute + line.scaled(count), total + line.scaled(count)
        else:
            total = total + memory.scaled(count)
    return float(compute.slope / total.slope) if total.slope else None


def _alike(kernels: list[KernelLines], bandwidth: float) -> list[tuple[KernelLines, Line, int]]:
    """The kernels whose lines are equal, taken once with their count (a decoder's layers repeat
    the same dozen kernels: 80 layers of a 70B model, 720 kernels, 13 kinds), each with its
    memory time: the exact sums below then cost a kind each, not a kernel."""
    counts = Counter((k.flops, k.bytes, k.unit_times) for k in kernels)
    kinds = [(KernelLines("", *lines), count) for lines, count in counts.items()]
    return [(kind, kind.memory_time(bandwidth), count) for kind, count in kinds]


def _gap(alike: list[tuple[KernelLines, Line, int]], share: Fraction, x: Fraction) -> Line:
    """compute-bound time − share × total time, as a line valid around x."""
    gap = ZERO
    for kernel, memory, count in alike:
        value, line = kernel.compute_time_at(x)
        if value >= memory(x):
            gap += line.scaled((1 - share) * count)
        else:
            gap -= memory.scaled(share * count)
    return gap
