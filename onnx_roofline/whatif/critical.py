"""Critical values of a dim: where each matrix node, and the model, turns compute-bound.

Each node's FLOPs and bytes are fitted as lines in the dim (affine.PROBES: two values fit, a third
checks), so each crossing is solved exactly: flops(x) / bytes(x) = ridge. Nodes of one "kind" (same
op and same shapes once the dim is named, e.g. the twelve 768→3072 MLP Gemms) share a row.

Two model-level figures, both from the same lines (so both exact):
- time share: the smallest x at which compute-bound nodes take at least half the predicted time
  (each node's bound re-decided at x; between two nodes' crossings the share is a ratio of lines);
- intensity: the smallest x at which total FLOPs / total bytes reaches the matrix ridge of the
  model's heaviest matrix node (the ridge that node is held to)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

from onnx_roofline.errors import DimensionError
from onnx_roofline.report.model import OK, NodeResult, Report
from onnx_roofline.whatif.affine import PROBES, ZERO, Line, ceil, ridge_crossing
from onnx_roofline.whatif.ops import is_matrix
from onnx_roofline.whatif.session import Session


@dataclass(frozen=True)
class NodeLines:
    node: NodeResult  # as analyzed at the first probe
    flops: Line
    bytes: Line

    def crossing(self, bandwidth: float) -> Fraction | None:
        return ridge_crossing(self.flops, self.bytes, self.node.peak / bandwidth)

    def grows(self) -> bool:
        """Intensity rises with the dim: the asymptote f1/m1 exceeds the intensity at the probe."""
        x = PROBES[0]
        return self.flops.slope * self.bytes(x) > self.flops(x) * self.bytes.slope

    def compute_bound_at(self, x: Fraction, bandwidth: float) -> bool:
        return self.flops(x) * Fraction(bandwidth) >= self.bytes(x) * Fraction(self.node.peak) and self.flops(x) > 0


@dataclass(frozen=True)
class Kind:
    """Matrix nodes that are the same computation: one row of the critical table."""

    op_type: str
    signature: str  # input shapes with the dim named: "[batch,768] [768,3072] [3072]"
    nodes: tuple[NodeLines, ...]
    ridge: float
    crossing: Fraction | None

    @property
    def critical(self) -> int | None:
        return ceil(self.crossing)

    @property
    def asymptote(self) -> float:
        lines = self.nodes[0]
        return float(lines.flops.slope / lines.bytes.slope) if lines.bytes.slope else math.inf

    def to_dict(self) -> dict:
        lines = self.nodes[0]
        return {
            "op_type": self.op_type,
            "signature": self.signature,
            "count": len(self.nodes),
            "nodes": [n.node.name for n in self.nodes],
            "flops": {"intercept": float(lines.flops.intercept), "slope": float(lines.flops.slope)},
            "bytes": {"intercept": float(lines.bytes.intercept), "slope": float(lines.bytes.slope)},
            "intensity_at_1": float(lines.flops(1) / lines.bytes(1)),
            "asymptote": self.asymptote,
            "ridge": self.ridge,
            "crossing": None if self.crossing is None else float(self.crossing),
            "critical": self.critical,
        }


@dataclass(frozen=True)
class CriticalResult:
    setup: dict
    dim: str
    kinds: tuple[Kind, ...]  # intensity grows with the dim, ordered by critical value
    flat: dict[str, int]  # "op signature" -> count of matrix nodes whose intensity does not grow
    share_crossing: Fraction | None
    intensity_crossing: Fraction | None
    model_ridge: float
    not_affine: tuple[str, ...] = field(default=())  # nodes whose cost is not a line in the dim

    def to_dict(self) -> dict:
        return {
            "study": "critical",
            **self.setup,
            "dim": self.dim,
            "probes": list(PROBES),
            "kinds": [k.to_dict() for k in self.kinds],
            "flat": self.flat,
            "model": {
                "time_share_50": _figure(self.share_crossing),
                "intensity_at_ridge": _figure(self.intensity_crossing),
                "ridge": self.model_ridge,
                "not_affine": list(self.not_affine),
            },
        }


def _figure(x: Fraction | None) -> dict:
    return {"crossing": None if x is None else float(x), "critical": ceil(x)}


def critical(session: Session, dim: str) -> CriticalResult:
    if dim in session.dims:
        raise DimensionError(f"--over {dim}: it is solved for, so do not also bind it with --dim")
    reports = [session.report({dim: x}) for x in PROBES]
    lines, not_affine = _fit(reports)
    bandwidth = session.hardware.memory_bandwidth
    matrix = [n for n in lines if is_matrix(n.node.domain, n.node.op_type)]
    if not matrix:
        raise DimensionError("no MatMul/Gemm/Conv-like node could be fitted: nothing to solve")
    kinds, flat = _kinds(matrix, reports, dim, bandwidth)
    heaviest = max(matrix, key=lambda n: n.flops(PROBES[0]))
    model_ridge = heaviest.node.peak / bandwidth
    exact = not not_affine
    return CriticalResult(
        setup=session.describe(),
        dim=dim,
        kinds=kinds,
        flat=flat,
        share_crossing=_share_crossing(lines, bandwidth) if exact else None,
        intensity_crossing=_total_crossing(lines, model_ridge) if exact else None,
        model_ridge=model_ridge,
        not_affine=tuple(not_affine),
    )


def _fit(reports: list[Report]) -> tuple[list[NodeLines], list[str]]:
    fitted, off = [], []
    for nodes in zip(*(r.nodes for r in reports)):
        if any(n.status != OK for n in nodes):
            continue
        flops = Line.fit(PROBES, tuple(n.cost.flops for n in nodes))
        moved = Line.fit(PROBES, tuple(n.cost.bytes for n in nodes))
        if flops is None or moved is None:
            off.append(nodes[0].name)
        else:
            fitted.append(NodeLines(nodes[0], flops, moved))
    return fitted, off


def _kinds(matrix: list[NodeLines], reports: list[Report], dim: str, bandwidth: float):
    by_key: dict[tuple[str, str], list[NodeLines]] = {}
    for lines in matrix:
        at = [r.nodes[lines.node.index] for r in reports[:2]]
        by_key.setdefault((lines.node.op_type, _signature(at, dim)), []).append(lines)
    kinds, flat = [], {}
    for (op_type, signature), members in by_key.items():
        if members[0].grows():
            ridge = members[0].node.peak / bandwidth
            kinds.append(Kind(op_type, signature, tuple(members), ridge, members[0].crossing(bandwidth)))
        else:
            flat[f"{op_type} {signature}"] = len(members)
    kinds.sort(key=lambda k: (k.crossing is None, k.crossing or 0, k.signature))
    return tuple(kinds), flat


def _signature(nodes: list[NodeResult], dim: str) -> str:
    """Input shapes at the first two probes, each size that changes written in terms of the dim."""
    shapes = []
    for a, b in zip(nodes[0].inputs, nodes[1].inputs):
        if a is None or b is None:
            continue
        sizes = [_size(x, y, dim) for x, y in zip(a.shape, b.shape)]
        shapes.append("[" + ",".join(sizes) + "]")
    return " ".join(shapes)


def _size(x: int, y: int, dim: str) -> str:
    """A size s(d) = x at d = PROBES[0], y at PROBES[1], written as a line in `dim`."""
    if x == y:
        return str(x)
    slope = Fraction(y - x, PROBES[1] - PROBES[0])
    base = x - slope * PROBES[0]
    term = dim if slope == 1 else f"{slope}·{dim}"
    return term if base == 0 else f"{term}{'+' if base > 0 else '-'}{abs(base)}"


def _share_crossing(lines: list[NodeLines], bandwidth: float) -> Fraction | None:
    """Smallest x ≥ 1 where compute-bound nodes take ≥ half the time. Between consecutive node
    crossings the set of compute-bound nodes is fixed, so 'compute time − memory time' is a line."""
    switches = set()
    for n in lines:
        balance = n.flops.scaled(Fraction(bandwidth)) - n.bytes.scaled(Fraction(n.node.peak))
        if (root := balance.root()) is not None and root > 1:
            switches.add(root)
    edges = [Fraction(1), *sorted(switches)]
    for lo, hi in zip(edges, [*edges[1:], None]):
        probe = lo + 1 if hi is None else (lo + hi) / 2
        gap = ZERO
        for n in lines:
            if n.compute_bound_at(probe, bandwidth):
                gap += n.flops.scaled(1 / Fraction(n.node.peak))
            else:
                gap -= n.bytes.scaled(1 / Fraction(bandwidth))
        if gap(lo) >= 0:
            return lo
        if gap.slope > 0 and (hi is None or gap.root() < hi):
            return gap.root()
    return None


def _total_crossing(lines: list[NodeLines], ridge: float) -> Fraction | None:
    flops = sum((n.flops for n in lines), ZERO)
    moved = sum((n.bytes for n in lines), ZERO)
    return ridge_crossing(flops, moved, ridge)
