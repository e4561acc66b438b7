"""The terminal view: model summary, the heaviest nodes, and breakdowns by op type or module."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from onnx_roofline.report.breakdown import MODULE, OP_TYPE, Group, breakdown, group_label, top_nodes
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
        lines.append(f"UNCOSTED  {report.uncosted.message}")
        lines.append(f"          not in the totals, which are a partial answer: {listed}")
    return "\n".join(lines)


NODE_HEADER = ("node", "op", "output", "flops", "bytes", "FLOP/B", "unit", "bound", "time", "share")
GROUP_COLUMNS = ("nodes", "flops", "bytes", "compute/memory", "time", "share")


def node_cells(node: NodeResult, model_time: float) -> list[str]:
    """One costed node as text cells (NODE_HEADER's order): the table's and markdown's rows."""
    return [
        node.name,
        node.op_type,
        shape_text(node),
        si(node.cost.flops, "FLOP"),
        si(node.cost.bytes, "B"),
        number(node.placement.intensity),
        f"{node.unit}/{node.dtype}",
        node.bound,
        duration(node.time_s),
        percent(node.time_s / model_time if model_time else None),
    ]


def group_cells(group: Group, family: str, model_time: float) -> list[str]:
    """One group as text cells: its label, then GROUP_COLUMNS."""
    t = group.totals
    bounds = Counter(n.bound for n in group.nodes if n.status == OK)
    known = t.costed_nodes > 0  # a group of uncosted nodes only has unknown figures, not zero ones
    return [
        group_label(family, group.key),
        str(len(group.nodes)) + (f" ({t.uncosted_nodes} uncosted)" if t.uncosted_nodes else ""),
        si(t.flops if known else None, "FLOP"),
        si(t.bytes if known else None, "B"),
        f"{bounds[COMPUTE]}/{bounds[MEMORY]}",
        duration(t.time_s if known else None),
        percent(t.time_s / model_time if known and model_time else None),
    ]


def group_title(family: str, depth: int) -> tuple[str, str]:
    """(section title, first column's name)."""
    return (f"by module (depth {depth})", "module") if family == MODULE else ("by op type", "op type")


def _top_nodes(report: Report, top: int) -> str:
    rows = [node_cells(n, report.totals.time_s) for n in top_nodes(report, top)]
    return f"top {len(rows)} nodes by time\n" + _grid(NODE_HEADER, rows)


def _breakdown(report: Report, family: str, depth: int) -> str:
    rows = [group_cells(g, family, report.totals.time_s) for g in breakdown(report, family, depth)]
    title, first = group_title(family, depth)
    return f"{title}\n" + _grid([first, *GROUP_COLUMNS], rows)


def shape_text(node: NodeResult) -> str:
    """The first output's shape, `1x12x1024x1024`, or `?`."""
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
