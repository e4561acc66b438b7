"""Re-binding dims over a grid: latency, throughput, compute-bound share and intensity per point.

The model and hardware come from the session (loaded once); each point redoes only what depends on
the dims — shape inference and costing — and the deployed view re-costs one deployment plan. The sweep's
wall time is measured and reported, so a slow point shows. Each point's footprint, and where the batch
is swept the largest batch that fits, are the one memory model's (Session.footprint: the deployed
view's, whichever view is asked; costs/capacity.py), as critical and serve give them."""

from __future__ import annotations

import itertools
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from onnx_roofline.commands.whatif.experts import MoePoint, moe_point
from onnx_roofline.commands.whatif.session import DEPLOYED, WRITTEN, Session, batch_dim, view_name
from onnx_roofline.commands.whatif.workload import Work, work_per_run
from onnx_roofline.costs.capacity import LargestFit
from onnx_roofline.errors import DimensionError
from onnx_roofline.views.ops import is_matrix


@dataclass(frozen=True)
class Point:
    dims: dict[str, int]
    latency_s: float
    work: Work
    compute_share: float | None  # share of predicted time in compute-bound kernels
    intensity: float | None  # total FLOPs / total bytes
    flops: int
    bytes: int
    uncosted: int
    memory_bytes: int | None = None  # the deployed footprint: weights + resident KV cache + peak activations
    fits: bool | None = None  # within the usable memory, capacity × utilization (None: no capacity given)
    experts: MoePoint | None = None  # deployed: the MoE kernels' distinct experts, weight bytes and bound (experts.py)
    predicted_s: float | None = (
        None  # the deployed view's predicted time (views/prediction.py), whatever the view swept
    )

    @property
    def throughput(self) -> float | None:
        """The bound's: work per run over the latency, a rate no runtime exceeds."""
        return self.work.rate(self.latency_s)

    @property
    def predicted_throughput(self) -> float | None:
        return None if self.predicted_s is None else self.work.rate(self.predicted_s)

    def to_dict(self) -> dict:
        return {
            "dims": self.dims,
            "latency_s": self.latency_s,
            "work_per_run": self.work.amount,
            "unit": self.work.unit,
            "throughput": self.throughput,
            "predicted_latency_s": self.predicted_s,
            "predicted_throughput": self.predicted_throughput,
            "compute_bound_share": self.compute_share,
            "intensity": self.intensity,
            "flops": self.flops,
            "bytes": self.bytes,
            "uncosted_nodes": self.uncosted,
            "memory_bytes": self.memory_bytes,
            "fits": self.fits,
            "moe": None if self.experts is None else self.experts.to_dict(),
        }


@dataclass(frozen=True)
class SweepResult:
    setup: dict
    view: str
    axes: dict[str, tuple[int, ...]]
    points: tuple[Point, ...]
    ridge: float | None  # the matrix ridge of the model's dtype, for reading the intensity column
    elapsed_s: float
    batch: str | None = None  # the batch dim, where it is swept
    fits: tuple[tuple[dict[str, int], LargestFit], ...] = ()  # the largest batch that fits, per value of the other axes

    def to_dict(self) -> dict:
        return {
            "study": "sweep",
            **self.setup,
            "view": self.view,
            "axes": {k: list(v) for k, v in self.axes.items()},
            "ridge": self.ridge,
            "elapsed_s": self.elapsed_s,
            "points": [p.to_dict() for p in self.points],
            "memory_fit": [{"dims": dims, **fit.to_dict(self.batch)} for dims, fit in self.fits],
        }


def sweep(session: Session, axes: Mapping[str, Sequence[int]], view: str = WRITTEN) -> SweepResult:
    """Every combination of the axes' values (the first axis varies slowest)."""
    view = view_name(view)
    clash = sorted(set(axes) & set(session.dims))
    if clash:
        raise DimensionError(f"--dim {clash[0]} is given both as a single value and as a list")
    start = time.perf_counter()
    points, ridge = [], None
    for values in itertools.product(*axes.values()):
        dims = dict(zip(axes, values, strict=False))
        report = session.report(dims)
        measured = session.view(report, view)
        totals = measured.totals
        ridge = ridge or main_ridge(measured)
        share = None if totals.memory_bound_time_share is None else 1 - totals.memory_bound_time_share
        deployed = measured if view == DEPLOYED else session.view(report, DEPLOYED)
        memory = deployed.memory  # the one memory model
        predicted = (
            deployed.prediction.time_s if deployed.prediction is not None and deployed.totals.costed_nodes else None
        )
        points.append(
            Point(
                {**session.dims, **dims},
                totals.time_s,
                work_per_run(report, session.graph_inputs),
                share,
                totals.intensity,
                totals.flops,
                totals.bytes,
                totals.uncosted_nodes,
                memory.total_bytes,
                memory.fits,
                moe_point(measured),
                predicted,
            )  # fmt: skip
        )
    batch, fits = _largest_batches(session, axes, {tuple(sorted(p.dims.items())): p.memory_bytes for p in points})
    elapsed = time.perf_counter() - start
    return SweepResult(
        session.describe(), view, {k: tuple(v) for k, v in axes.items()}, tuple(points), ridge, elapsed, batch, fits
    )


def _largest_batches(session: Session, axes: Mapping[str, Sequence[int]], known: dict) -> tuple[str | None, tuple]:
    """Where the batch dim is swept: the largest batch that fits at each value of the other axes
    (Session.largest_fitting, as critical and serve find it), the points' footprints reused."""
    try:
        batch = batch_dim(session)
    except DimensionError:
        return None, ()
    if batch not in axes:
        return None, ()
    others = {name: values for name, values in axes.items() if name != batch}
    fits = []
    for values in itertools.product(*others.values()):
        dims = dict(zip(others, values, strict=False))
        seen = {x: known.get(tuple(sorted({**session.dims, **dims, batch: x}.items()))) for x in axes[batch]}
        fits.append((dims, session.largest_fitting(batch, dims, {x: n for x, n in seen.items() if n is not None})))
    return batch, tuple(fits)


def main_lead(view):
    """The heaviest matrix op (the heaviest op when there is none; a fused kernel counts as its
    matrix op), as the graph has it; None when nothing is costed."""
    report = getattr(view, "report", None) or getattr(view, "written", None) or view  # the graph's nodes
    rows = [row for row in view.nodes if row.cost is not None and row.placement is not None]
    leads = [(row, report.nodes[row.lead if hasattr(row, "lead") else row.index]) for row in rows]
    matrix = [(row, lead) for row, lead in leads if is_matrix(lead.domain, lead.op_type)]
    heaviest = max(matrix or leads, key=lambda pair: pair[0].cost.flops, default=None)
    return None if heaviest is None else heaviest[1]


def main_peak(view) -> float | None:
    """The peak the heaviest matrix op runs at: over the bandwidth, the ridge the model's
    intensity is read against."""
    lead = main_lead(view)
    return None if lead is None else lead.peak


def main_ridge(view) -> float | None:
    peak = main_peak(view)
    return None if peak is None else peak / getattr(view, "report", view).hardware.memory_bandwidth
