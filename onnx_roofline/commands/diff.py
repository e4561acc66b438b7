"""`onnx-roofline diff before.json after.json`: what changed between two saved reports — the
totals, the nodes (paired as the gate's baseline pairs them: by name, then by position and op),
the nodes added and removed, the bounds that flipped, and the modules.

Exit codes follow diff(1): 0 the figures are the same, 1 they differ, 2 bad input."""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from dataclasses import dataclass

from onnx_roofline.commands.arguments import count
from onnx_roofline.commands.gate.baseline import Baseline, NodeFigures, compare, load_baseline
from onnx_roofline.commands.listing import COMMAND_HELP
from onnx_roofline.errors import EXIT_FAIL, EXIT_OK
from onnx_roofline.report.units import duration, si

METRICS = ("latency", "bytes", "flops")


@dataclass(frozen=True)
class Change:
    """One metric of one node, module or model, before and after (None: unknown or absent)."""

    name: str
    op_type: str
    before: float | int | None
    after: float | int | None

    @property
    def delta(self) -> float | int | None:
        return None if self.before is None or self.after is None else self.after - self.before

    @property
    def relative(self) -> float | None:
        return self.delta / self.before if self.delta is not None and self.before else None


@dataclass(frozen=True)
class ReportDiff:
    before: Baseline
    after: Baseline
    totals: dict[str, Change]  # metric → the model's
    nodes: tuple[tuple[NodeFigures, NodeFigures], ...]  # paired (before, after), in the after order
    added: tuple[NodeFigures, ...]
    removed: tuple[NodeFigures, ...]
    modules: tuple[Change, ...]  # latency per module, heaviest change first

    @property
    def bound_changed(self) -> tuple[tuple[NodeFigures, NodeFigures], ...]:
        return tuple((b, a) for b, a in self.nodes if b.bound != a.bound)

    @property
    def changed(self) -> tuple[tuple[NodeFigures, NodeFigures], ...]:
        """Paired nodes whose figures or status differ."""
        return tuple((b, a) for b, a in self.nodes if _figures(b) != _figures(a))

    @property
    def same(self) -> bool:
        return not (self.added or self.removed or self.changed) and all(
            c.delta in (0, None) for c in self.totals.values()
        )


def diff_reports(before: Baseline, after: Baseline) -> ReportDiff:
    comparison = compare(before.nodes, after.nodes)
    totals = {metric: Change("model", "", before.totals[metric], after.totals[metric]) for metric in METRICS}
    return ReportDiff(
        before, after, totals, comparison.pairs, comparison.added, comparison.removed, _modules(before, after)
    )


def _figures(node: NodeFigures) -> tuple:
    return (node.status, node.bound, node.latency, node.bytes, node.flops)


def _modules(before: Baseline, after: Baseline) -> tuple[Change, ...]:
    """Latency per innermost module (the reports' `module` field), before and after."""
    sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for side, report in enumerate((before, after)):
        for node in report.nodes:
            sums[node.module or "(no module)"][side] += node.latency or 0.0
    changes = [Change(module, "", b, a) for module, (b, a) in sums.items()]
    return tuple(sorted(changes, key=lambda c: (-abs(c.delta or 0.0), c.name)))


# --- rendering ----------------------------------------------------------------------------------


def render_text(result: ReportDiff, top: int) -> str:
    lines = [f"before {result.before.path}", f"after  {result.after.path}", "", "model totals"]
    lines += _aligned(
        [
            (metric, _value(metric, c.before), _value(metric, c.after), _relative(c))
            for metric, c in result.totals.items()
        ]
    )
    lines.append("")
    lines.append(f"nodes: {len(result.nodes)} paired, {len(result.changed)} changed, {len(result.added)} added, "
                 f"{len(result.removed)} removed, {len(result.bound_changed)} changed bound")  # fmt: skip
    ranked = sorted(result.changed, key=lambda pair: -abs(_latency_delta(pair)))[:top]
    if ranked:
        lines.append(f"top {len(ranked)} changed nodes by latency")
        lines += _aligned(
            [
                (
                    f"{after.name} ({after.op_type})",
                    _value("latency", before.latency),
                    _value("latency", after.latency),
                    _relative(Change(after.name, after.op_type, before.latency, after.latency))
                    + (f"  {before.bound} → {after.bound}" if before.bound != after.bound else ""),
                )
                for before, after in ranked
            ]
        )
    for title, nodes in (("added", result.added), ("removed", result.removed)):
        if nodes:
            lines.append(
                f"{title}: "
                + ", ".join(f"{n.name} ({n.op_type})" for n in nodes[:top])
                + (" …" if len(nodes) > top else "")
            )
    moved = [c for c in result.modules if c.delta][:top]
    if moved:
        lines.append(f"top {len(moved)} modules by latency change")
        lines += _aligned(
            [(c.name, _value("latency", c.before), _value("latency", c.after), _relative(c)) for c in moved]
        )
    lines.append("")
    lines.append("same figures" if result.same else "the figures differ")
    return "\n".join(lines) + "\n"


def _aligned(rows: list[tuple[str, str, str, str]]) -> list[str]:
    """`  label  before → after  change`, each column as wide as its widest cell."""
    if not rows:
        return []
    label, before, after = (max(len(row[i]) for row in rows) for i in range(3))
    return [f"  {a:<{label}}  {b:>{before}} → {c:>{after}}  {d}" for a, b, c, d in rows]


def render_json(result: ReportDiff) -> str:
    def node(n: NodeFigures) -> dict:
        return {"index": n.index, "name": n.name, "op_type": n.op_type, "status": n.status, "bound": n.bound,
                "time_s": n.latency, "bytes": n.bytes, "flops": n.flops}  # fmt: skip

    def change(c: Change) -> dict:
        return {"name": c.name, "before": c.before, "after": c.after, "delta": c.delta, "relative": c.relative}

    data = {
        "schema_version": 1,
        "kind": "diff",
        "before": result.before.path,
        "after": result.after.path,
        "same": result.same,
        "totals": {metric: change(c) for metric, c in result.totals.items()},
        "changed": [{"before": node(b), "after": node(a)} for b, a in result.changed],
        "added": [node(n) for n in result.added],
        "removed": [node(n) for n in result.removed],
        "bound_changed": [a.name for _, a in result.bound_changed],
        "modules": [change(c) for c in result.modules if c.delta],
    }
    return json.dumps(data, indent=2, allow_nan=False) + "\n"


def _latency_delta(pair: tuple[NodeFigures, NodeFigures]) -> float:
    before, after = pair
    return (after.latency or 0.0) - (before.latency or 0.0)


def _value(metric: str, value) -> str:
    if value is None:
        return "unknown"
    return duration(value) if metric == "latency" else si(value, "B" if metric == "bytes" else "FLOP")


def _relative(change: Change) -> str:
    if change.delta is None:
        return ""
    return f"({change.relative:+.1%})" if change.relative is not None else ("(new)" if change.delta else "")


# --- the command --------------------------------------------------------------------------------


def add_command(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "diff",
        help=COMMAND_HELP["diff"],
        description="Exit 0: the same figures; 1: they differ; 2: bad input.",
    )
    parser.add_argument("before", metavar="BEFORE.json")
    parser.add_argument("after", metavar="AFTER.json")
    parser.add_argument("--format", choices=("table", "json"), default="table", help="output format (default: table)")
    parser.add_argument("--top", type=count(), default=10, metavar="N", help="nodes and modules listed (default: 10)")
    parser.set_defaults(run=run)


def run(options: argparse.Namespace) -> int:
    result = diff_reports(load_baseline(options.before), load_baseline(options.after))
    print(render_json(result) if options.format == "json" else render_text(result, max(options.top, 0)), end="")
    return EXIT_OK if result.same else EXIT_FAIL
