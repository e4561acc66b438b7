"""Critical values of a dim: where each matrix kernel, and the model, turns compute-bound.

Each kernel's FLOPs and bytes are fitted as lines in the dim (affine.PROBES: two values fit, a third
checks), so every crossing is solved exactly rather than scanned. Kernels of one "kind" (same op,
same shapes once the dim is named, e.g. the twelve 768→3072 MLP Gemms) share a row. As written, a
node's crossing is flops(x)/bytes(x) = its ridge; in the deployed view it is where the kernel's
compute time (busiest unit) reaches its memory time, which is the same thing for one unit.

Two model-level figures, from the same lines (so both exact):
- time share: the smallest x at which compute-bound kernels take at least half the predicted time;
- intensity: the smallest x at which total FLOPs / total bytes reaches the ridge of the unit and
  dtype the model's heaviest matrix op runs on (295.3 for fp16 matmuls on H100).

And the largest value of the dim that fits the memory budget, by the one memory model every command
shares (Session.largest_fitting: the deployed footprint, costs/capacity.py), whichever view is asked."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, cast

from onnx_roofline.commands.whatif.affine import PROBES, ZERO, Line, ceil, ridge_crossing
from onnx_roofline.commands.whatif.experts import MoeCrossing, moe_crossings
from onnx_roofline.commands.whatif.piecewise import KernelLines, share_at_infinity, share_crossing
from onnx_roofline.commands.whatif.session import DEPLOYED, WRITTEN, Session, batch_dim, view_name
from onnx_roofline.commands.whatif.sweep import main_lead, main_peak
from onnx_roofline.costs.capacity import LargestFit
from onnx_roofline.costs.rules.registry import MATRIX
from onnx_roofline.errors import DimensionError
from onnx_roofline.report.model import OK, Report
from onnx_roofline.views.ops import is_matrix

if TYPE_CHECKING:
    from onnx_roofline.report.costed import CostedNode
    from onnx_roofline.report.model import NodeResult


@dataclass(frozen=True)
class Kind:
    """Matrix kernels that are the same computation: one row of the critical table."""

    op_type: str
    signature: str  # input shapes of the matrix op with the dim named: "[batch,768] [768,3072] [3072]"
    kernels: tuple[KernelLines, ...]
    ridge: float  # of the first kernel, at the first probe
    crossing: Fraction | None
    predicted: Fraction | None = None  # the crossing at the achievable fractions: compute / f_c = memory / f_bw

    @property
    def critical(self) -> int | None:
        return ceil(self.crossing)

    @property
    def asymptote(self) -> float | None:
        """The intensity the kernel tends to as the dim grows: the ratio of the lines' slopes."""
        lines = self.kernels[0]
        return float(lines.flops.slope / lines.bytes.slope) if lines.bytes.slope else None

    def intensity(self, x: float) -> float:
        lines = self.kernels[0]
        return float(lines.flops(x) / lines.bytes(x))

    def to_dict(self) -> dict:
        lines = self.kernels[0]
        return {
            "op_type": self.op_type,
            "signature": self.signature,
            "count": len(self.kernels),
            "nodes": [k.name for k in self.kernels],
            "flops": _line(lines.flops),
            "bytes": _line(lines.bytes),
            "intensity_at_1": self.intensity(1),
            "asymptote": self.asymptote,
            "ridge": self.ridge,
            "crossing": None if self.crossing is None else float(self.crossing),
            "predicted_crossing": None if self.predicted is None else float(self.predicted),
            "predicted_critical": ceil(self.predicted),
            "critical": self.critical,
        }


@dataclass(frozen=True)
class CriticalResult:
    setup: dict
    dim: str
    view: str
    kinds: tuple[Kind, ...]  # intensity grows with the dim, ordered by critical value
    flat: dict[str, int]  # "op signature" → count of matrix kernels whose intensity does not grow
    share_crossing: Fraction | None
    share_limit: float | None  # compute-bound share as the dim grows without bound
    intensity_crossing: Fraction | None
    intensity_limit: float | None
    model_ridge: float
    not_affine: tuple[str, ...]  # kernels whose cost is not a line in the dim (left out)
    memory_fit: LargestFit | None = None  # the largest value of the dim whose footprint fits (costs/capacity.py)
    experts: tuple[MoeCrossing, ...] = ()  # deployed: each MoE kernel's distinct experts and crossing (experts.py)
    predicted_share_crossing: Fraction | None = None  # share_crossing at the achievable fractions (predicted_bandwidth)

    @property
    def fits_up_to(self) -> int | None:
        return None if self.memory_fit is None else self.memory_fit.largest

    @property
    def memory_capacity(self) -> float | None:
        return None if self.memory_fit is None else self.memory_fit.budget.capacity

    @property
    def memory_line(self) -> Line | None:
        """The footprint (weights + resident KV cache + peak activations) in the dim, through the probes."""
        fit = self.memory_fit
        return (
            None if fit is None or fit.per_unit is None or fit.intercept is None else Line(fit.intercept, fit.per_unit)
        )

    def to_dict(self) -> dict:
        return {
            "study": "critical",
            **self.setup,
            "dim": self.dim,
            "view": self.view,
            "probes": list(PROBES),
            "kinds": [k.to_dict() for k in self.kinds],
            "flat": self.flat,
            "model": {
                "compute_share_50": {**_figure(self.share_crossing), "limit": self.share_limit},
                "predicted_compute_share_50": _figure(self.predicted_share_crossing),
                "intensity_at_ridge": {**_figure(self.intensity_crossing), "limit": self.intensity_limit},
                "ridge": self.model_ridge,
                "not_affine": list(self.not_affine),
                "moe": [m.to_dict() for m in self.experts],
                "memory": {
                    "capacity": self.memory_capacity,
                    "bytes": None if self.memory_line is None else _line(self.memory_line),
                    "fits_up_to": self.fits_up_to,
                },
            },
            "memory_fit": None if self.memory_fit is None else self.memory_fit.to_dict(self.dim),
        }


@dataclass(frozen=True)
class _Fitted:
    row: CostedNode  # the node (written view) or kernel (deployed view) at the first probe
    lead: NodeResult  # the node that leads it: its matrix op, or the node itself
    lines: KernelLines


def critical(session: Session, dim: str | None = None, view: str = WRITTEN) -> CriticalResult:
    """Where each matmul kind turns compute-bound as `dim` grows (by default the graph's batch dim)."""
    dim, view = dim or batch_dim(session), view_name(view)
    if dim in session.dims:
        raise DimensionError(f"--over {dim}: it is solved for, so do not also bind it with --dim")
    reports = [session.report({dim: x}) for x in PROBES]
    views = [session.view(r, view) for r in reports]
    fitted, not_affine = _fit(views, reports)
    matrix = [f for f in fitted if is_matrix(f.lead.domain, f.lead.op_type)]
    if not matrix:
        raise DimensionError(f"no MatMul/Gemm/Conv-like kernel is a line in {dim!r}: nothing to solve")
    bandwidth = session.hardware.memory_bandwidth
    model_ridge = Fraction(cast(float, main_peak(views[-1]))) / Fraction(
        bandwidth
    )  # at the largest probe (a matrix kernel is costed); exact
    kernels = [f.lines for f in fitted]
    flops = sum((k.flops for k in kernels), ZERO)
    moved = sum((k.bytes for k in kernels), ZERO)
    exact = not not_affine  # a model figure from a partial fit would be wrong, not approximate
    lead = main_lead(views[-1])
    predicted = predicted_bandwidth(session.hardware, lead.dtype if lead is not None and lead.unit == MATRIX else None)
    return CriticalResult(
        setup=session.describe(),
        dim=dim,
        view=view,
        **_kinds(matrix, reports, dim, bandwidth, predicted),
        share_crossing=share_crossing(kernels, bandwidth) if exact else None,
        predicted_share_crossing=share_crossing(kernels, predicted) if exact else None,
        share_limit=share_at_infinity(kernels, bandwidth) if exact else None,
        intensity_crossing=ridge_crossing(flops, moved, model_ridge) if exact else None,
        intensity_limit=float(flops.slope / moved.slope) if exact and moved.slope else None,
        model_ridge=float(model_ridge),
        not_affine=tuple(not_affine),
        experts=moe_crossings(views, session.expert_load, bandwidth),
        memory_fit=session.largest_fitting(
            dim,
            known={x: v.memory.total_bytes for x, v in zip(PROBES, views, strict=False)} if view == DEPLOYED else None,
        ),
    )


def _fit(views, reports: list[Report]) -> tuple[list[_Fitted], list[str]]:
    """Lines for every costed kernel; the names of those that are not lines in the dim."""
    fitted, off = [], []
    for rows in zip(*(v.nodes for v in views), strict=False):
        if any(r.status != OK for r in rows):
            continue
        flops = Line.fit(PROBES, tuple(r.cost.flops for r in rows))
        moved = Line.fit(PROBES, tuple(r.cost.bytes for r in rows))
        # a kernel of no FLOPs computes nothing, whatever its members did as written: a deployed
        # kernel folded at load or dropped (FREE), whose members may be uncosted besides (--partial)
        units = () if flops == ZERO else _unit_times(rows[0], reports)
        if flops is None or moved is None or units is None:
            off.append(rows[0].name)
            continue
        lead = reports[0].nodes[getattr(rows[0], "lead", getattr(rows[0], "index", 0))]
        fitted.append(_Fitted(rows[0], lead, KernelLines(rows[0].name, flops, moved, units)))
    return fitted, off


def _unit_times(row, reports: list[Report]) -> tuple[Line, ...] | None:
    """Compute seconds per unit, summed over the row's member nodes (a node is its own member)."""
    per_unit: dict[str, Line] = {}
    for index in getattr(row, "members", (getattr(row, "index", 0),)):
        nodes = cast("list[CostedNode]", [r.nodes[index] for r in reports])  # a costed kernel's members are costed
        flops = Line.fit(PROBES, tuple(n.cost.flops for n in nodes))
        if flops is None:
            return None
        if flops != ZERO:
            seconds = flops.scaled(1 / Fraction(nodes[0].peak))
            per_unit[nodes[0].unit] = per_unit.get(nodes[0].unit, ZERO) + seconds
    return tuple(per_unit.values())


def predicted_bandwidth(hardware, matrix_dtype: str | None = None) -> float:
    """The bandwidth at which the bound's crossings are the prediction's: a kernel predicted at
    max(compute / f_c, memory / f_bw) is compute-bound when compute ≥ bytes / (bandwidth · f_bw / f_c),
    and every share is unchanged by scaling all times by f_c (costs/prediction.py; wave quantization
    and the kernel floor left out, so the crossing stays exact); f_c is the model's main matrix
    dtype's (`matrix_dtype`: FP8 GEMMs reach less of their peak). The bandwidth itself without figures."""
    achievable = hardware.achievable
    if achievable is None:
        return hardware.memory_bandwidth
    return hardware.memory_bandwidth * achievable.bandwidth_fraction / achievable.matrix_fraction(matrix_dtype)


def _kinds(matrix: list[_Fitted], reports: list[Report], dim: str, bandwidth: float, predicted: float) -> dict:
    by_key: dict[tuple[str, str], list[_Fitted]] = {}
    for f in matrix:
        shapes = _signature([r.nodes[f.lead.index] for r in reports[:2]], dim)
        by_key.setdefault((f.row.op_type, shapes), []).append(f)
    kinds, flat = [], {}
    for (op_type, signature), members in by_key.items():
        first, x = members[0].lines, PROBES[0]
        if first.flops.slope * first.bytes(x) > first.flops(x) * first.bytes.slope:  # intensity grows
            crossing = share_crossing([first], bandwidth)  # one kernel: share ≥ ½ ⇔ it is compute-bound
            ridge = members[0].row.placement.ridge
            kinds.append(
                Kind(
                    op_type,
                    signature,
                    tuple(m.lines for m in members),
                    ridge,
                    crossing,
                    share_crossing([first], predicted),
                )
            )
        else:
            flat[f"{op_type} {signature}"] = len(members)
    kinds.sort(key=lambda k: (k.crossing is None, k.crossing or 0, k.signature))
    return {"kinds": tuple(kinds), "flat": flat}


def _signature(nodes, dim: str) -> str:
    """Input shapes at the first two probes, each size that changes written as a line in the dim."""
    shapes = []
    for a, b in zip(nodes[0].inputs, nodes[1].inputs, strict=False):
        if a is not None and b is not None:
            shapes.append("[" + ",".join(_size(x, y, dim) for x, y in zip(a.shape, b.shape, strict=False)) + "]")
    return " ".join(shapes)


def _size(x: int, y: int, dim: str) -> str:
    if x == y:
        return str(x)
    slope = Fraction(y - x, PROBES[1] - PROBES[0])
    base = x - slope * PROBES[0]
    term = dim if slope == 1 else f"{slope}·{dim}"
    return term if base == 0 else f"{term}{'+' if base > 0 else '-'}{abs(base)}"


def _line(line: Line) -> dict:
    return {"intercept": float(line.intercept), "slope": float(line.slope)}


def _figure(x: Fraction | None) -> dict:
    return {"crossing": None if x is None else float(x), "critical": ceil(x)}
