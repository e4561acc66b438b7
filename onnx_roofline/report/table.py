"""The terminal view: model summary, the heaviest nodes, and breakdowns by op type or module."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from onnx_roofline.costs.roofline import COMPUTE, MEMORY
from onnx_roofline.report.breakdown import (
    MODULE,
    OP_TYPE,
    Group,
    breakdown,
    group_label,
    module_of,
    module_path,
    top_nodes,
)  # fmt: skip
from onnx_roofline.report.findings import WHAT_TIME_IS, findings, headline_lines
from onnx_roofline.report.model import OK, WRITTEN, NodeResult, Report
from onnx_roofline.report.units import duration, flops_text, number, percent, si
from onnx_roofline.shapes.roles import NAME, DimDefault
from onnx_roofline.shapes.roles import listed as listed_dims

TYPE_CHECKING = False
if TYPE_CHECKING:
    from onnx_roofline.report.costed import CostedNode
    from onnx_roofline.report.grouping import Alike


def render_table(report: Report, top: int = 15, by: Sequence[str] = (OP_TYPE,), depth: int = 3, other: Report | None = None,
                 group: bool = False, colour: bool = False) -> str:  # fmt: skip
    """`by` lists the breakdowns to show ("op_type", "module"); `depth` is the module level.
    `other`: the report's other view (deployed for a written report, written for a deployed
    one), whose total the summary shows beside its own. `group` (--group): alike nodes of
    different layers are one row (`c_fc/Gemm ×12`) and modules total across layers (report/grouping.py).
    `colour`: each node's bound in its colour (a terminal's; the caller honours NO_COLOR)."""
    sections = [_summary(report, other)]
    if top:  # --top 0: no node list, not an empty header
        sections.append(_top_grouped(report, top, colour) if group else _top_nodes(report, top, colour))
    sections += [
        _breakdown_across_layers(report, depth) if group and family == MODULE else _breakdown(report, family, depth)
        for family in by
    ]
    return "\n\n".join(sections) + "\n"


def _summary(report: Report, other: Report | None = None) -> str:
    totals, model, hw = report.totals, report.model, report.hardware
    dims = (
        listed_dims(
            model.dims,
            {
                k: model.dim_roles.get(k) or DimDefault(v, k, NAME)
                for k, v in model.dims.items()
                if k in model.defaulted_dims
            },
        )
        or "none"
    )
    lines = [
        f"model     {model.path or '<in-memory>'}  ({node_count_words(report)}, {si(model.parameters, '')} parameters, dims: {dims})",
        f"hardware  {hw.name} [{hw.key}]  {si(hw.memory_bandwidth, 'B/s')}",
        f"totals    {flops_text(totals.flops, totals.transcendentals)}  {si(totals.bytes, 'B')}  intensity {number(totals.intensity)} FLOP/B",
    ]
    lines += [f"{line.label:<9} {line.text}" for line in headline_lines(report, other)]
    if report.nodes and not totals.costed_nodes:  # not "0 FLOP ... 0.0 ns", which reads as a result
        lines[2:] = [f"totals    unknown: none of the {len(report.nodes)} nodes could be costed (see UNCOSTED below)",
                     f"latency   unknown: {report.advice_when_nothing_costed()}"]  # fmt: skip
    lines += [f"{line.label:<9} {line.text}" for line in findings(report, other)]
    return "\n".join(lines)


def node_count_words(report: Report) -> str:
    """`626 nodes (1 in the main graph)`: the nodes the table lists, bodies walked included; the
    main graph's own count beside it where control flow makes them differ."""
    rows, main = report.node_rows, report.model.node_count
    return f"{rows} nodes" + (f" ({main} in the main graph)" if main != rows else "")


NODE_HEADER = ("node", "op", "output", "flops", "bytes", "FLOP/B", "unit", "bound", "time", "share")
GROUP_COLUMNS = ("nodes", "flops", "bytes", "compute-/memory-bound", "time", "share")  # how many nodes of each bound


def op_label(node: NodeResult) -> str:
    """`Transpose (foldable)`: the op type, flagged where a runtime computes the node once at load
    (`(folded)` on a deployed kernel, which has members); every rendering of a node row uses it."""
    if not node.constant_foldable:
        return node.op_type
    return node.op_type + (" (folded)" if hasattr(node, "members") else " (foldable)")


def named_with_module(node: NodeResult) -> str:
    """`node_Where_134 (model.transformer.h.0.attn)`: the node's name, and its module where the
    name carries none (a dynamo export's, whose module is in its metadata)."""
    module = module_path(node)
    return f"{node.name} ({module})" if module and not module_of(node.name) else node.name


def node_cells(node: CostedNode, model_time: float) -> list[str]:
    """One costed node as text cells (NODE_HEADER's order): the table's and markdown's rows."""
    return [
        named_with_module(node),
        op_label(node),
        shape_text(node),
        flops_text(node.cost.flops, node.cost.transcendentals),
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
        flops_text(t.flops, t.transcendentals) if known else si(None, "FLOP"),
        si(t.bytes if known else None, "B"),
        f"{bounds[COMPUTE]}/{bounds[MEMORY]}",
        duration(t.time_s if known else None),
        percent(t.time_s / model_time if known and model_time else None),
    ]


def group_title(family: str, depth: int) -> tuple[str, str]:
    """(section title, first column's name)."""
    return (f"by module (depth {depth})", "module") if family == MODULE else ("by op type", "op type")


def _top_nodes(report: Report, top: int, colour: bool) -> str:
    rows = [node_cells(n, report.totals.time_s) for n in top_nodes(report, top)]
    what = "nodes" if report.view == WRITTEN else "kernels"
    return f"top {len(rows)} {what} by time ({WHAT_TIME_IS[report.view]})\n" + _grid(NODE_HEADER, rows, colour)


def _top_grouped(report: Report, top: int, colour: bool) -> str:
    from onnx_roofline.report.grouping import top_alike

    rows = [alike_cells(g, report.totals.time_s) for g in top_alike(report, top)]
    what = "nodes" if report.view == WRITTEN else "kernels"
    return (
        f"top {len(rows)} {what} by time, alike {what} of different layers as one row ({WHAT_TIME_IS[report.view]})\n"
        + _grid(NODE_HEADER, rows, colour)
    )


def _breakdown_across_layers(report: Report, depth: int) -> str:
    from onnx_roofline.report.grouping import by_module_across_layers

    rows = [group_cells(g, MODULE, report.totals.time_s) for g in by_module_across_layers(report, depth)]
    return f"by module (depth {depth}), across layers (* = every layer)\n" + _grid(["module", *GROUP_COLUMNS], rows)


def _breakdown(report: Report, family: str, depth: int) -> str:
    rows = [group_cells(g, family, report.totals.time_s) for g in breakdown(report, family, depth)]
    title, first = group_title(family, depth)
    return f"{title}\n" + _grid([first, *GROUP_COLUMNS], rows)


def shape_text(node: NodeResult) -> str:
    """The first output's shape, `1x12x1024x1024`, or `?`; a sequence's, `3×(1x8x768)`: its length
    (`?` unknown) and what its elements agree on; `at most 800x3` where the sizes rest on a bound
    the graph fixes (NodeResult.at_most)."""
    out = node.outputs[0] if node.outputs else None
    text = (
        "x".join("?" if d is None else str(d) for d in out.shape) if out is not None and out.shape is not None else "?"
    )
    if out is not None and out.sequence:
        text = f"{'?' if out.elements is None else len(out.elements)}×({text})"
    return f"at most {text}" if node.at_most else text


BOUND_COLOURS = {MEMORY: "\033[34m", COMPUTE: "\033[31m"}  # blue and red, as the HTML and the plots draw them
_RESET = "\033[0m"


def _grid(header: Sequence[str], rows: Sequence[Sequence[str]], colour: bool = False) -> str:
    """Columns padded to their widest cell; `colour`: the bound column's words coloured once padded."""
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    widths[0] = min(widths[0], 48)  # long exporter names are cut from the left, where they repeat
    lines = [_row(header, widths), "  ".join("-" * w for w in widths)]
    lines += [_row(row, widths, header.index("bound") if colour and "bound" in header else None) for row in rows]
    return "\n".join(lines)


def _row(cells: Sequence[str], widths: Sequence[int], bound_column: int | None = None) -> str:
    first = cells[0] if len(cells[0]) <= widths[0] else "…" + cells[0][-(widths[0] - 1) :]
    parts = [first.ljust(widths[0])] + [
        c.rjust(w) if i > 1 else c.ljust(w) for i, (c, w) in enumerate(zip(cells[1:], widths[1:], strict=False), 1)
    ]
    if bound_column is not None and cells[bound_column] in BOUND_COLOURS:
        parts[bound_column] = BOUND_COLOURS[cells[bound_column]] + parts[bound_column] + _RESET
    return "  ".join(parts).rstrip()


def alike_cells(group: Alike, model_time: float) -> list[str]:
    """One group as the table's node cells (table.NODE_HEADER): `label ×N` and the group's sums."""
    cells = node_cells(group.first, model_time)
    if group.count == 1:
        return cells
    t = group.totals
    cells[0] = f"{group.label} ×{group.count}"
    cells[3] = flops_text(t.flops, t.transcendentals)
    cells[4] = si(t.bytes, "B")
    cells[8] = duration(t.time_s)
    cells[9] = percent(t.time_s / model_time if model_time else None)
    return cells
