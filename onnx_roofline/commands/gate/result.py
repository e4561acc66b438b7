"""What a gate run found: one Check per limit, with the nodes most responsible, as plain data.

Every renderer (text, JSON, JUnit, GitHub) reads this and nothing else; `to_dict` is the JSON
result, ordered and free of timestamps so the same input gives the same bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from onnx_roofline.commands.gate.baseline import Comparison, NodeFigures
from onnx_roofline.costs.memory import Footprint
from onnx_roofline.report.findings import Finding, Headline
from onnx_roofline.report.model import Assumed
from onnx_roofline.report.units import duration, percent, si
from onnx_roofline.shapes.plausible import Implausible
from onnx_roofline.shapes.roles import DimDefault

PASS, FAIL, SKIP = "pass", "fail", "skip"

# How each kind of measured value reads; "growth" is a relative change against a baseline.
_FORMATS = {
    "time": duration,
    "share": percent,
    "growth": lambda v: "?" if v is None else f"{100 * v:+.1f}%",
    "bytes": lambda v: si(v, "B"),
    "flops": lambda v: si(v, "FLOP"),
    "count": lambda v: "?" if v is None else str(v),
}


def formatted(kind: str, value: float | int | None) -> str:
    return _FORMATS[kind](value)


@dataclass(frozen=True)
class Contributor:
    """One node's part in a measured quantity (for a regression: how much it grew)."""

    node: NodeFigures
    kind: str  # how `value` reads (a share check's contributors are times)
    value: float | int | None
    share: float | None = None  # of the quantity the check measured
    note: str | None = None  # why the node is listed, where its value can't say (e.g. uncosted)
    growth: bool = False  # `value` is how much the node grew against the baseline (a regression's culprit)

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.node.index,
            "name": self.node.name,
            "op_type": self.node.op_type,
            "kind": self.kind,
            "value": self.value,
            "share": self.share,
            "note": self.note,
            "constant_foldable": self.node.foldable,
        }


@dataclass(frozen=True)
class Check:
    id: str  # stable, machine-readable: "latency", "op_type[MatMul].time_share", "regression.bytes"
    title: str  # for people: "MatMul time share"
    status: str  # PASS, FAIL or SKIP
    kind: str  # how `measured`, `limit` and contributor values read (see _FORMATS)
    measured: float | int | None
    limit: float | int | None
    message: str
    contributors: tuple[Contributor, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "status": self.status,
            "kind": self.kind,
            "measured": self.measured,
            "limit": self.limit,
            "message": self.message,
            "contributors": [c.to_dict() for c in self.contributors],
        }


@dataclass(frozen=True)
class GateResult:
    model: str | None
    hardware: str  # the hardware key
    dims: dict[str, int]
    checks: tuple[Check, ...]
    baseline: str | None = None  # its path, when one was compared
    comparison: Comparison | None = None
    view: str = "written"  # the report's view: its times every node its own kernel (as written), or the deployed bound
    assumed: Assumed | None = None  # the data-dependent size the figures assume (report.model.assumed), where one is
    dim_roles: Mapping[str, DimDefault] = field(
        default_factory=dict
    )  # the defaults taken, each with its role (report.model.dim_roles)
    implausible: tuple[Implausible, ...] = ()  # a node the defaults cannot run (report.model.implausible)
    qualifiers: tuple[Finding, ...] = ()  # what the figures rest on (findings.qualifiers): said beside the verdict
    memory: Footprint | None = (
        None  # the footprint and whether it fits, as every command judges it (findings.held_memory)
    )
    latency: Headline | None = (
        None  # the floor (deployed bound), the predicted time, every node its own kernel (findings.headline)
    )

    @property
    def passed(self) -> bool:
        return not self.failed

    @property
    def failed(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if c.status == FAIL)

    @property
    def skipped(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if c.status == SKIP)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": 1,
            "kind": "check",
            "passed": self.passed,
            "summary": {"checks": len(self.checks), "failed": len(self.failed), "skipped": len(self.skipped)},
            "model": {
                "path": self.model,
                "dims": dict(sorted(self.dims.items())),
                "nonzero_fraction": self.assumed and self.assumed.nonzero_fraction,
                "dim_roles": {name: self.dim_roles[name].to_dict() for name in sorted(self.dim_roles)},
                "implausible": [flag.to_dict() for flag in self.implausible],
            },
            "hardware": self.hardware,
            "view": self.view,
            "qualifiers": [{"label": line.label, "text": line.text} for line in self.qualifiers],
            "memory": None if self.memory is None else self.memory.to_dict(),
            "latency": None if self.latency is None else self.latency.to_dict(),
            "checks": [c.to_dict() for c in self.checks],
            "baseline": None if self.comparison is None else _comparison_dict(self.baseline, self.comparison),
        }


def _comparison_dict(path: str | None, comparison: Comparison) -> dict[str, Any]:
    def ref(node: NodeFigures) -> dict[str, Any]:
        return {"index": node.index, "name": node.name, "op_type": node.op_type}

    return {
        "path": path,
        "added": [ref(n) for n in comparison.added],
        "removed": [ref(n) for n in comparison.removed],
        "bound_changed": [
            {**ref(after), "before": before.bound, "after": after.bound} for before, after in comparison.bound_changed
        ],
    }
