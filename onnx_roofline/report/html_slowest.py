"""The HTML report's first screen (issue 41): the slowest entries of a view, the nodes as written or
the kernels deployed, each with its share, its bound, what it waits on and what to know about it
(foldable; what a kernel fuses). It stands under the headline, so that the question a reader opens
the report with is answered before any scrolling; a node with no FLOPs is listed like any other."""

from __future__ import annotations

import html
from collections import Counter

from onnx_roofline.costs.roofline import COMPUTE, MEMORY
from onnx_roofline.report.breakdown import module_path, top_nodes
from onnx_roofline.report.findings import WHAT_TIME_IS
from onnx_roofline.report.model import DEPLOYED, NodeResult, Report
from onnx_roofline.report.table import op_label
from onnx_roofline.report.units import duration, percent, si

TYPE_CHECKING = False
if TYPE_CHECKING:
    from onnx_roofline.report.costed import CostedNode

SLOWEST = 5  # entries listed: the three a reader looks for, and two more for context

STYLE = """
.slowest { margin: 12px 0 4px; } .slowest h2 { margin: 0 0 4px; }
.slowest table { font-size: 13px; } .slowest th.text, .slowest td.why { text-align: left; }
.slowest td.why { white-space: normal; overflow-wrap: anywhere; color: #555; min-width: 10em; } .slowest td.name { min-width: 10em; }
.slowest td.wait { white-space: normal; min-width: 7em; }
"""

_COLUMNS = ("#", "name", "module", "op", "share", "time", "bound", "waiting on", "note")
_TEXT_COLUMNS = {"name", "module", "op", "bound", "waiting on", "note"}


def slowest_section(report: Report, suffix: str, other: Report | None = None, count: int = SLOWEST) -> str:
    """The `count` slowest costed entries of `report` (heaviest first, ties in graph order), as a
    table `slowest{suffix}` under a title that names what its entries are. `other`: the deployed
    view of a written report, which says what becomes of each node deployed."""
    costed = top_nodes(report, count)
    if not costed:
        return ""
    entries = "kernels" if report.view == DEPLOYED else "nodes"
    positions = {id(node): position for position, node in enumerate(report.nodes)}
    written = (
        {n.index: n for n in report.written.nodes} if report.view == DEPLOYED and report.written is not None else {}
    )
    kernels = _kernel_of(other) if report.view != DEPLOYED and other is not None and other.view == DEPLOYED else None
    rows = "".join(
        _row(rank, node, report, _note(node, report, positions[id(node)], written, kernels))
        for rank, node in enumerate(costed, 1)
    )
    head = "".join(f'<th class="text">{_e(c)}</th>' if c in _TEXT_COLUMNS else f"<th>{_e(c)}</th>" for c in _COLUMNS)
    title = f"Slowest {entries}, {report.view} ({WHAT_TIME_IS[report.view]})"
    table = f'<table id="slowest{suffix}"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'
    return f'<section class="slowest"><h2>{_e(title)}</h2>{table}</section>'


def _row(rank: int, node: CostedNode, report: Report, note: str) -> str:
    model_time = report.totals.time_s
    share = node.time_s / model_time if model_time else None
    cells = [
        ("", str(rank)),
        ("name", node.name),
        ("text", module_path(node)),
        ("text op", op_label(node)),
        ("share", percent(share)),
        ("", duration(node.time_s)),
        ("bound", f"{node.bound}-bound"),
        ("bound wait", waiting_on(node, report)),
        ("why", note),
    ]
    return (
        f'<tr class="{_e(node.bound)}">'
        + "".join(f'<td class="{c}">{_e(t)}</td>' if c else f"<td>{_e(t)}</td>" for c, t in cells)
        + "</tr>"
    )


def waiting_on(node: NodeResult, report: Report) -> str:
    """What holds the entry at its bound: the memory's bandwidth, or the peak of the unit and dtype it runs on."""
    if node.bound == MEMORY:
        return f"memory {si(report.hardware.memory_bandwidth, 'B/s')}"
    if node.bound == COMPUTE:
        return f"{node.unit} {node.dtype} {si(node.peak, 'FLOP/s')}"
    return "unknown"


def _note(node: NodeResult, report: Report, position: int, written: dict[int, NodeResult],
          kernels: dict[int, tuple[NodeResult, int]] | None) -> str:  # fmt: skip
    """As written: whether the node folds away at load, else what it becomes deployed (`kernels`:
    the deployed kernel of each graph node, and how many nodes it covers). Deployed: the graph
    nodes a kernel fuses (`written`: the written view's nodes by index)."""
    if node.constant_foldable and report.view != DEPLOYED:
        return "foldable: a runtime computes it once at load, so deployed it costs nothing"
    if report.view == DEPLOYED:
        if position < len(report.members) and len(report.members[position]) > 1:
            return "fuses " + fused_ops(report.members[position], written)
        return ""
    if kernels is None:
        return ""
    if node.index not in kernels:
        return "deployed: launches nothing"
    kernel, covered = kernels[node.index]
    if covered == 1:
        return f"deployed: its own kernel, {duration(kernel.time_s)}"
    head = kernel.op_type.split("+")[0]  # `Gemm+10`: a Gemm and 10 nodes fused into it
    return f"deployed: fused into a {head} kernel of {covered} nodes, {duration(kernel.time_s)}"


def _kernel_of(deployed: Report) -> dict[int, tuple[NodeResult, int]]:
    """Each graph node's deployed kernel and the number of graph nodes that kernel covers."""
    return {index: (kernel, len(members)) for kernel, members in zip(deployed.nodes, deployed.members, strict=True)
            for index in members}  # fmt: skip


def fused_ops(members: tuple[int, ...], written: dict[int, NodeResult]) -> str:
    """`Gemm, Mul ×4, Add ×3, Pow, Tanh`: the op types of a kernel's graph nodes, in graph order."""
    ops = Counter(written[i].op_type for i in members if i in written)
    return ", ".join(op if times == 1 else f"{op} ×{times}" for op, times in ops.items()) or f"{len(members)} nodes"


def _e(text: str) -> str:
    return html.escape(str(text), quote=True)
