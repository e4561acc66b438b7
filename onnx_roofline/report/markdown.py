"""The Markdown summary, for a pull-request comment: short, stable, diff-friendly.

The headline figures and the top nodes are visible; the breakdowns fold away in <details>.
Nothing varies between runs of the same model (no timestamps, no absolute paths), so two
comments diff line by line. Names come from a stranger's file: a node named `<script>…` or one
holding a backtick, a pipe or a newline is escaped, never passed through as HTML or table syntax.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from pathlib import Path

from onnx_roofline.errors import one_line
from onnx_roofline.report.breakdown import MODULE, OP_TYPE, breakdown, top_nodes
from onnx_roofline.report.findings import Finding, findings, headline, predicted_words
from onnx_roofline.report.model import Report
from onnx_roofline.report.table import GROUP_COLUMNS, NODE_HEADER, group_cells, group_title, node_cells
from onnx_roofline.report.units import duration, number, percent, si

NUMERIC = {"flops", "bytes", "FLOP/B", "time", "share", "nodes", "compute-/memory-bound"}  # right-aligned columns


def render_markdown(
    report: Report, top: int = 10, by: Sequence[str] = (OP_TYPE, MODULE), depth: int = 3, other: Report | None = None
) -> str:
    """A PR comment: the totals, what the terminal says beside them (`other`: the other view's
    estimate), the heaviest nodes and folded breakdowns."""
    totals, model, hw = report.totals, report.model, report.hardware
    head = headline(report, other)
    name = Path(model.path).name if model.path else "model"
    dims = ", ".join(f"{k}={v}" for k, v in sorted(model.dims.items()))
    precision = f", costed as {model.precision}" if model.precision else ""
    lines = [
        f"### onnx-roofline: {_text(name, code=True)} on {_text(hw.name)}"
        + (f" ({_text(dims)}{precision})" if dims or precision else ""),
        "",
        _table(
            [
                "floor (deployed bound)",
                "predicted",
                "every node its own kernel",
                "FLOPs",
                "bytes",
                "intensity",
                "memory-bound time",
                "nodes",
            ],  # fmt: skip (the graph's, whatever the view: the kernels are in the floor's cell)
            [
                [
                    duration(head.floor_s) + (f" ({head.kernels} kernels)" if head.floor_s is not None else ""),
                    duration(head.predicted_s)
                    + (f" ({predicted_words(head)})" if head.predicted_s is not None else ""),
                    duration(head.every_node_s),
                    si(totals.flops, "FLOP"),
                    si(totals.bytes, "B"),
                    f"{number(totals.intensity)} FLOP/B",
                    percent(totals.memory_bound_time_share),
                    f"{report.node_rows}" + (f" ({totals.uncosted_nodes} not costed)" if totals.uncosted_nodes else ""),
                ]
            ],
            right=True,
        ),
    ]
    lines += ["", *(_finding(line) for line in findings(report, other))]
    nodes = top_nodes(report, top)
    if nodes:  # --top 0: no node list, not an empty table
        lines += [
            "",
            f"**Top {len(nodes)} nodes by time**",
            "",
            _table(NODE_HEADER, [node_cells(n, totals.time_s) for n in nodes]),
        ]
    for family in by:
        title, first = group_title(family, depth)
        rows = [group_cells(g, family, totals.time_s) for g in breakdown(report, family, depth)]
        lines += [
            "",
            f"<details><summary>{title.capitalize()}</summary>",
            "",
            _table([first, *GROUP_COLUMNS], rows),
            "",
            "</details>",
        ]
    return "\n".join(lines) + "\n"


def _finding(line: Finding) -> str:
    """`- *memory* weights …`; a warning's label in bold (`- **UNCOSTED** …`)."""
    label = "" if not line.label else f"**{_text(line.label)}** " if line.loud else f"*{_text(line.label)}* "
    return f"- {label}{_text(line.text)}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], right: bool = False) -> str:
    align = ["---:" if right or h in NUMERIC else "---" for h in header]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(_cell(c, i == 0 and not right) for i, c in enumerate(row)) + " |" for row in rows]
    return "\n".join(lines)


def _cell(text: str, code: bool) -> str:
    return _text(text, code).replace("|", "\\|")


_UNSAFE_IN_CODE = re.compile(r"[`<>&]")
_MARKDOWN_PUNCTUATION = re.compile(r"([\\`*_\[\]])")


def _text(text: str, code: bool = False) -> str:
    """`text` as Markdown shows it literally: a code span where that is safe, else plain text
    with HTML and Markdown punctuation escaped (a code span shows `&lt;` as is, and a backtick
    would close it)."""
    text = one_line(text)
    if code and text and not _UNSAFE_IN_CODE.search(text):
        return f"`{text}`"
    return _MARKDOWN_PUNCTUATION.sub(r"\\\1", html.escape(text, quote=False))
