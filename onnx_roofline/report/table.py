"""The terminal view: model summary, the heaviest nodes, and breakdowns by op type or module."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from onnx_roofline.report.breakdown import MODULE, OP_TYPE, breakdown, group_label, top_nodes
from onnx_roofline.report.model import OK, NodeResult, Report
from onnx_roofline.report.units import duration, number, percent, si
from onnx_roofline.roofline import COMPUTE, MEMORY


def render_table(report: Report, top: int = 15, by: Sequence[str] = (OP_TYPE,), depth: int = 3) -> str:
    """`by` lists the breakdowns to show ("op_type", "module"); `depth` is the module level."""
    sections = [_summary(report), _top_nodes(report, top)]
    sections += [_breakdown(report, family, depth) for family in by]
    return "\n\n".join(sections) + "\n"


def _summary(report: Report) -> str:
    totals, model, hw = report.totals, report.model, report.hardware
    dims = ", ".join(f"{k}={v}" for k, v in sorted(model.dims.items())) or "none"
    lines = [
        f"model     {model.path or '<in-memory>'}  ({model.node_count} nodes, {si(model.parameters, '')} parameters, dims: {dims})",
        f"hardware  {hw.name} [{hw.key}]  {si(hw.memory_bandwidth, 'B/s')}",
        f"totals    {si(totals.flops, 'FLOP')}  {si(totals.bytes, 'B')}  intensity {number(totals.intensity)} FLOP/B",
        f"latency   {duration(totals.time_s)} lower bound (sum of per-node bounds)  "
        f"memory-bound share of time {percent(totals.memory_bound_time_share)}",
    ]
    if report.unsupported:
        listed = ", ".join(f"{op}×{count}" for op, count in report.unsupported.items())
        lines.append(f"uncosted  {totals.uncosted_nodes} nodes not in the totals: {listed}")
    return "\n".join(lines)


def _top_nodes(report: Report, top: int) -> str:
    total = report.totals.time_s or 1.0
    rows = [
        [
            n.name,
            n.op_type,
            _shape(n),
            si(n.cost.flops, "FLOP"),
            si(n.cost.bytes, "B"),
            number(n.placement.intensity),
            f"{n.unit}/{n.dtype}",
            n.bound,
            duration(n.time_s),
            percent(n.time_s / total),
        ]
        for n in top_nodes(report, top)
    ]
    header = ["node", "op", "output", "flops", "bytes", "FLOP/B", "unit", "bound", "time", "share"]
    return f"top {len(rows)} nodes by time\n" + _grid(header, rows)


def _breakdown(report: Report, family: str, depth: int) -> str:
    groups = breakdown(report, family, depth)
    total = report.totals.time_s or 1.0
    rows = []
    for group in groups:
        t = group.totals
        bounds = Counter(n.bound for n in group.nodes if n.status == OK)
        rows.append(
            [
                group_label(family, group.key),
                str(len(group.nodes)) + (f" ({t.uncosted_nodes} uncosted)" if t.uncosted_nodes else ""),
                si(t.flops, "FLOP"),
                si(t.bytes, "B"),
                f"{bounds[COMPUTE]}/{bounds[MEMORY]}",
                duration(t.time_s),
                percent(t.time_s / total),
            ]
        )
    title = f"by module (depth {depth})" if family == MODULE else "by op type"
    header = ["module" if family == MODULE else "op type", "nodes", "flops", "bytes", "compute/memory", "time", "share"]
    return f"{title}\n" + _grid(header, rows)


def _shape(node: NodeResult) -> str:
    out = node.outputs[0] if node.outputs else None
    return "x".join(str(d) for d in out.shape) if out is not None and out.shape is not None else "?"


def _grid(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    widths[0] = min(widths[0], 48)  # long exporter names are cut from the left, where they repeat
    lines = [_row(header, widths), "  ".join("-" * w for w in widths)]
    lines += [_row(row, widths) for row in rows]
    return "\n".join(lines)


def _row(cells: Sequence[str], widths: Sequence[int]) -> str:
    first = cells[0] if len(cells[0]) <= widths[0] else "…" + cells[0][-(widths[0] - 1) :]
    parts = [first.ljust(widths[0])] + [c.rjust(w) if i > 1 else c.ljust(w) for i, (c, w) in enumerate(zip(cells[1:], widths[1:]), 1)]
    return "  ".join(parts).rstrip()
