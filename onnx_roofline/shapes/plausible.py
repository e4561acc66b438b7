"""A result that rests on a default the model contradicts is said as such, with the dims that fix it.

runnable.py refuses dims a node cannot run at: a window wider than its padded input, a pad wider
than its axis, a Reshape that cannot divide. Where the dims were given, that is an error (exit 2):
the user chose sizes the model cannot take. Where defaults were taken (`onnx-roofline MODEL` with
no `--dim`), the plain command must still answer: the report is made at the defaults, flagged
IMPLAUSIBLE (the table, the JSON's `model.implausible`, stderr), naming the node, what it cannot
do, and the defaults it rests on with a size at which it runs.

That size is found by trying: each defaulted dim in turn (those no role explained first: a dim
defaulted to 1 for want of a role is the usual culprit, a 1-sample audio input), at the sizes of
`LADDER` above its default, then the two below it (a sequence of 512 longer than the 128
positions a BERT's table holds), the graph bound, inferred and checked again each time, until it
runs; then those dims all together. At most `ATTEMPTS` tries (`ATTEMPTS_LARGE` for a graph of
over `LARGE_GRAPH` nodes, where each costs seconds); where none runs, the defaults are named
without a size."""

from __future__ import annotations

import math
import os
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import onnx

from onnx_roofline.errors import DimensionError, RooflineError
from onnx_roofline.model.loader import LoadedModel
from onnx_roofline.shapes.roles import GRAPH, NAME, NONE, DimDefault
from onnx_roofline.shapes.sizing import Sizing

LADDER = (16, 64, 224, 512, 1024, 4096, 16_000)
ATTEMPTS, ATTEMPTS_LARGE, LARGE_GRAPH = 10, 2, 20_000


@dataclass(frozen=True)
class Implausible:
    """A node that cannot run at the defaults taken: `problem` (runnable.py's message, the node
    and the dims in it), `dims` (the defaults it rests on) and `fix` (sizes of them at which the
    graph runs, where one was found)."""

    problem: str
    dims: tuple[str, ...]
    fix: Mapping[str, int] = field(default_factory=dict)

    @property
    def message(self) -> str:
        """One line: the problem, then the fix as flags to give."""
        if self.fix:
            flags = " ".join(f"--dim {shlex.quote(f'{dim}={size}')}" for dim, size in self.fix.items())
            return f"{self.problem}; the defaults cannot be what it runs at: it runs with {flags} (bind the sizes you run at)"
        flags = " ".join(f"--dim {shlex.quote(f'{dim}=N')}" for dim in self.dims)
        return f"{self.problem}; the defaults cannot be what it runs at: bind the sizes you run at ({flags})"

    def to_dict(self) -> dict:
        return {"problem": self.problem, "dims": list(self.dims), "fix": dict(self.fix), "message": self.message}


def contradicted(
    error: DimensionError, defaults: Mapping[str, DimDefault], runs: Callable[[dict[str, int]], bool], node_count: int
) -> Implausible | None:
    """The Implausible for `error` (runnable's, raised at `defaults`), trying sizes with `runs`
    (bound dims → whether the graph runs at them: every other default as taken). None where no
    size of a default makes it run and no default lacks a role: it rests on the dims given."""
    order = {NONE: 0, GRAPH: 1, NAME: 2}
    candidates = sorted(
        (name for name, d in defaults.items() if d.source in order), key=lambda name: order[defaults[name].source]
    )
    budget = ATTEMPTS_LARGE if node_count > LARGE_GRAPH else ATTEMPTS
    problem = str(error)
    tries: list[dict[str, int]] = []
    for (
        name
    ) in candidates:  # larger first (a dim defaulted too small), then smaller (one longer than a table the graph holds)
        tries += [{name: size} for size in LADDER if size > defaults[name].size][:3]
        tries += [{name: size} for size in reversed(LADDER) if size < defaults[name].size][:2]
    loose = [name for name in candidates if defaults[name].source == NONE]
    if len(loose) > 1:
        tries += [{name: size for name in loose} for size in LADDER]
    for sizes in tries[:budget]:
        if runs(sizes):
            return Implausible(problem, tuple(sizes), sizes)
    return Implausible(problem, tuple(loose)) if loose else None


def runs_at(model: str | os.PathLike | onnx.ModelProto | LoadedModel, sizing: Sizing) -> bool:
    """Whether the model binds, infers and passes runnable.py at `sizing`'s dims (a fresh load)."""
    from onnx_roofline.model.constants import constant_array, constant_table
    from onnx_roofline.shapes.fresh import inferred_at
    from onnx_roofline.shapes.runnable import check_runnable

    try:
        proto, nodes, dim_names, shapes = inferred_at(model, sizing)
        check_runnable(
            nodes,
            shapes.values,
            sizing.dims,
            dim_names,
            (),
            constant_lookup(shapes.folded, lambda: constant_table(proto.graph, nodes), constant_array),
        )
    except RooflineError:
        return False
    return True


def constant_lookup(folded: Mapping, table: Callable[[], Mapping], read: Callable) -> Callable:
    """name → a small constant's value (a value the shape engine folded, an initializer, a Constant
    node), or None; `table` (name → source) is built when first needed: few graphs need it."""
    from onnx_roofline.model.constants import MAX_FOLDED_ELEMENTS

    sources: list[Mapping] = []

    def constant(name: str):
        if name in folded:
            return folded[name]
        if not sources:
            sources.append(table())
        source = sources[0].get(name)
        if source is None or (isinstance(source, onnx.TensorProto) and math.prod(source.dims) > MAX_FOLDED_ELEMENTS):
            return None
        return read(source)

    return constant
