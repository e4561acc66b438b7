"""A saved report to compare against: load it (validated), and pair its nodes with the current ones.

The baseline is what `onnx-roofline analyze --format json` writes (schema_version 1). Nodes pair by
name first, then by (index, op_type), so renamed-but-unmoved nodes still pair and a graph that only
gained or lost nodes lists exactly those.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from onnx_roofline.errors import RooflineError
from onnx_roofline.model import files
from onnx_roofline.report.breakdown import module_path
from onnx_roofline.report.model import OK, SCHEMA_VERSION, NodeResult, Report


class BaselineError(RooflineError):
    """A baseline that is missing, not a schema_version 1 report, or made under other conditions."""


@dataclass(frozen=True)
class NodeFigures:
    """The figures of one node that a comparison needs, from a live result or a saved report."""

    index: int
    name: str
    op_type: str
    bound: str
    latency: float | None
    bytes: int | None
    flops: int | None
    status: str = OK
    reason: str | None = None  # why an uncosted node has no figures
    module: str = ""  # the innermost module path ("" for none)
    foldable: bool = False  # constant-foldable: a runtime computes it once at load

    @classmethod
    def of(cls, node: NodeResult) -> NodeFigures:
        cost = node.cost
        return cls(
            node.index,
            node.name,
            node.op_type,
            node.bound,
            node.time_s,
            cost.bytes if cost else None,
            cost.flops if cost else None,
            node.status,
            node.reason,
            module_path(node),
            node.constant_foldable,
        )

    def value(self, metric: str) -> float | int | None:
        return getattr(self, metric)


@dataclass(frozen=True)
class Baseline:
    path: str
    hardware: str  # the hardware's display name, as the report has it
    dims: dict[str, int]
    totals: dict[str, float | int]  # metric ("latency", "bytes", "flops") → model total
    nodes: tuple[NodeFigures, ...]


@dataclass(frozen=True)
class Comparison:
    pairs: tuple[tuple[NodeFigures, NodeFigures], ...]  # (before, after), in current order
    added: tuple[NodeFigures, ...]
    removed: tuple[NodeFigures, ...]

    @property
    def bound_changed(self) -> tuple[tuple[NodeFigures, NodeFigures], ...]:
        return tuple((before, after) for before, after in self.pairs if before.bound != after.bound)


def load_baseline(path: str | Path) -> Baseline:
    path = Path(path)
    return _parse(files.read_json(path, "baseline file", BaselineError), str(path))


def ensure_comparable(baseline: Baseline, report: Report) -> None:
    """Latency on other hardware, or bytes at other dims, say nothing about a regression: refuse."""
    if baseline.hardware != report.hardware.name:
        raise BaselineError(
            f"baseline {baseline.path} was made for {baseline.hardware}, this check runs on {report.hardware.name}: "
            "compare on the same hardware, or make a new baseline"
        )
    if baseline.dims != report.model.dims:
        raise BaselineError(
            f"baseline {baseline.path} was made with dims {dims_text(baseline.dims)}, this check binds "
            f"{dims_text(report.model.dims)}: bind the same dims, or make a new baseline"
        )


def compare(before: Sequence[NodeFigures], after: Sequence[NodeFigures]) -> Comparison:
    """Pair nodes by name (in order, for repeated names), then the rest by (index, op_type)."""
    by_name: dict[str, deque[NodeFigures]] = defaultdict(deque)
    for node in before:
        by_name[node.name].append(node)
    matched: dict[int, NodeFigures] = {}  # position in `after` → its baseline node
    for position, node in enumerate(after):
        if by_name[node.name]:
            matched[position] = by_name[node.name].popleft()
    left = {(n.index, n.op_type): n for queue in by_name.values() for n in queue}
    for position, node in enumerate(after):
        if position not in matched and (node.index, node.op_type) in left:
            matched[position] = left.pop((node.index, node.op_type))
    return Comparison(
        pairs=tuple((matched[p], node) for p, node in enumerate(after) if p in matched),
        added=tuple(node for p, node in enumerate(after) if p not in matched),
        removed=tuple(sorted(left.values(), key=lambda n: n.index)),
    )


# --- validation of the saved report ------------------------------------------------------------


def _parse(data: Any, origin: str) -> Baseline:
    def fail(problem: str) -> BaselineError:
        return BaselineError(
            f"baseline {origin}: {problem} (make one with `onnx-roofline analyze MODEL --format json`)"
        )

    if not isinstance(data, dict) or "schema_version" not in data:
        raise fail("not an onnx-roofline report")
    if data["schema_version"] != SCHEMA_VERSION:
        raise fail(f"schema_version {data['schema_version']!r} is not {SCHEMA_VERSION}")
    try:
        totals = data["totals"]
        nodes = tuple(
            NodeFigures(
                index=_typed(n["index"], int),
                name=_typed(n["name"], str),
                op_type=_typed(n["op_type"], str),
                bound=_typed(n["bound"], str),
                latency=_optional(n["time_s"], float),
                bytes=_optional(n["bytes"], int),
                flops=_optional(n["flops"], int),
                status=_typed(n["status"], str),
                reason=_optional(n.get("reason"), str),
                module=_optional(n.get("module"), str) or "",
                foldable=n.get("constant_foldable", False) is True,
            )
            for n in data["nodes"]
        )
        return Baseline(
            path=origin,
            hardware=_typed(data["hardware"]["name"], str),
            dims=dict(_typed(data["model"]["dims"], dict)),
            totals={
                "latency": _typed(totals["time_s"], float),
                "bytes": _typed(totals["bytes"], int),
                "flops": _typed(totals["flops"], int),
            },
            nodes=nodes,
        )
    except KeyError as exc:
        raise fail(f"missing key {exc}") from None
    except TypeError as exc:
        raise fail(str(exc)) from None


def _typed(value: Any, kind: type) -> Any:
    """`value` if it is of `kind` (an int passes as a float; a bool is never a number)."""
    kinds = (int, float) if kind is float else kind
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise TypeError(f"expected {kind.__name__}, got {value!r}")
    return value


def _optional(value: Any, kind: type) -> Any:
    return None if value is None else _typed(value, kind)


def dims_text(dims: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(dims.items())) or "none"
