"""A runnable size for a traced graph: the input size a size traced into the graph fixes.

An exporter that traces a model writes the sizes it saw into the graph. A text recognizer
(PaddleOCR's, a CRNN) folds the height its backbone leaves (3 rows of a 48-pixel line) into the
channels, `x.reshape(b, c * 3, w)`: the Reshape's target then holds its input only at the input
heights that pool to 3. A traced Mamba cuts its causal conv's output to the sequence it saw and
multiplies it into the gate: the broadcast holds only at that sequence. At the defaults (height
224, sequence 512) runnable.py refuses such a node (`TracedSize`); the size that runs is in the
graph: where the Reshape's input elements equal its target's, where the two sizes agree.

It is found over each defaulted dim in turn, on `gap(size)`: the input's elements less the
target's (the one size less the other) with that dim at `size`, every other dim as bound, one
shape inference each. A dim whose doubling leaves the gap as it was does not move it (the batch
of a traced sequence) and is passed over; the gap grows with a dim that feeds one side alone
(convolutions and pools are monotone in their input), or falls (it is then negated). From the
default, the size is doubled or halved until the gap changes sign, then bisected to the least size
where it is ≥ 0, and kept where it is 0 there (never, for a dim that feeds both sides alike). The
least such size is the one an exporter traced at, for a backbone whose convolutions divide
downward (48 for the heights 48 to 63, all pooling to 3 rows). The analysis binds it and says
so, as it does a size the graph fixes elsewhere (runnable.DimensionConflict); a size given that
cannot run is refused with the one that can."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from onnx_roofline.errors import DimensionError, RooflineError
from onnx_roofline.model.tensors import TensorInfo
from onnx_roofline.model.tensors import known as known_tensor
from onnx_roofline.shapes.sizing import Sizing

MAX_SIZE = 16_384
"""The largest size tried: an image side, a sequence (a larger one would not be a default's fix)."""
TRIES = 40
"""Shape inferences one solve runs at most (each a fresh load: milliseconds for a recognizer, a
second or more for a large decoder): two a dim to see whether it moves the gap, the rest to
bracket and bisect the one that does."""


class TracedSize(DimensionError):
    """A node that cannot run at these dims because a size was traced into it (runnable.py): a
    Reshape whose target, with no -1, holds other elements than its input (`axis` None: `first`
    is its input, `second` its output), or inputs of a broadcasting op whose sizes on `axis`
    (from the end) differ and are not 1 (a Mamba's conv output cut to the traced sequence)."""

    def __init__(self, message: str, node: str, op_type: str, first: str, second: str, axis: int | None = None) -> None:
        super().__init__(message)
        self.node, self.op_type, self.first, self.second, self.axis = node, op_type, first, second, axis

    def __reduce__(self):
        return type(self), (str(self), self.node, self.op_type, self.first, self.second, self.axis)

    def gap(self, values: Mapping[str, TensorInfo]) -> int | None:
        """`first`'s elements less `second`'s (on `axis`, where given); None where either is not
        known, empty, or too short for the axis."""
        first, second = values.get(self.first), values.get(self.second)
        if not known_tensor(first) or not known_tensor(second):
            return None
        if not first.numel or not second.numel:  # an empty side (a size pooled to nothing) runs nothing: no solution
            return None
        if self.axis is None:
            return first.numel - second.numel
        if min(len(first.shape), len(second.shape)) < -self.axis:
            return None
        return first.shape[self.axis] - second.shape[self.axis]


@dataclass(frozen=True)
class Solved:
    """The size `dim` must take for the traced node to run, and what fixes it."""

    dim: str
    size: int
    why: str


def solve(
    error: DimensionError, defaulted: Mapping[str, int], gap: Callable[[dict[str, int]], int | None], tries: int = TRIES
) -> Solved | None:
    """The defaulted dim and size at which the node `error` names runs (gap 0); None where
    `error` is no TracedSize, no defaulted dim fixes it, or `tries` shape inferences do not find
    it. `gap(sizes)`: TracedSize.gap with `sizes` bound (None where the values do not resolve).
    A dim whose doubling leaves the gap as it was does not move it, and is passed over; one that
    lowers it is solved on the negated gap."""
    if not isinstance(error, TracedSize):
        return None
    left = [tries]
    for dim, default in defaulted.items():
        known: dict[int, int | None] = {}

        def at(size: int, dim: str = dim, known: dict[int, int | None] = known) -> int | None:
            if size not in known:
                if left[0] <= 0:
                    raise _Spent
                left[0] -= 1
                known[size] = gap({dim: size})
            return known[size]

        try:
            here, doubled = at(default), at(2 * default)
            if here is None or doubled is None or here == doubled:
                continue
            sign = 1 if doubled > here else -1

            def signed(size: int, sign: int = sign) -> int | None:
                return None if (value := at(size)) is None else sign * value

            size = _root(signed, default)
        except _Spent:
            return None
        if size is not None:
            return Solved(dim, size, f"the size {error.op_type} {error.node!r} was traced at")
    return None


class _Spent(Exception):
    """The shape inferences a solve may run are spent."""


def _root(gap: Callable[[int], int | None], start: int) -> int | None:
    """The least size at which a nondecreasing `gap` is ≥ 0, where it is 0 there: bracketed from
    `start` by doubling or halving, then bisected. A size whose shapes do not resolve counts as
    below the root (a window wider than its input: too small)."""
    below = lambda size: (value := gap(size)) is None or value < 0  # noqa: E731
    first = gap(start)
    if first is None or first == 0:
        return None
    lo, hi = start, start
    if first < 0:
        while below(hi):
            lo, hi = hi, hi * 2
            if hi > MAX_SIZE:
                return None
    else:
        while lo > 0 and not below(lo):
            hi, lo = lo, lo // 2
    while hi - lo > 1:  # below(lo) (or lo 0), not below(hi)
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if below(mid) else (lo, mid)
    return hi if gap(hi) == 0 else None


def traced_gap(model, sizing: Sizing, error: TracedSize) -> int | None:
    """`error`'s gap at `sizing`'s dims (a fresh load, bound and inferred); None where it does not resolve."""
    from onnx_roofline.shapes.fresh import inferred_at

    try:
        return error.gap(inferred_at(model, sizing)[3].values)
    except RooflineError:
        return None
