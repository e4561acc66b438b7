"""What makes the HTML report's roofline explorable: every plotted point named on hover (node,
op, module, FLOPs, bytes, intensity, time, share), the table's filter highlighting its points,
and the nodes with no FLOPs — off a log-intensity axis, yet often the top offenders (45 % of
GPT-2 decode's time) — drawn as a strip under the plot, each segment as wide as its time.

The points are an invisible layer over matplotlib's SVG, one circle per node at the position
matplotlib drew it: the figure's own transform, from display pixels to the SVG's points."""

from __future__ import annotations

import html
import io
import math
from typing import Any

from onnx_roofline.report.breakdown import module_path
from onnx_roofline.report.costed import ok_rows
from onnx_roofline.report.findings import FOLDABLE_WHY
from onnx_roofline.report.model import Report
from onnx_roofline.report.off_axis import MOVEMENT, TRANSCENDENTAL, described, kind
from onnx_roofline.report.table import op_label
from onnx_roofline.report.units import duration, number, percent, si

TYPE_CHECKING = False
if TYPE_CHECKING:
    from onnx_roofline.report.costed import CostedNode

STRIP_MIN_SHARE = 0.0005  # zero-FLOP nodes under 0.05 % of the time are one "others" segment
_STRIP_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")

POINTS_STYLE = """
figure.roofline { position: relative; margin: 0; }
.points circle { fill: #000; fill-opacity: 0; stroke: none; pointer-events: all; cursor: crosshair; }
.points circle:hover, .points circle.hit { stroke: #111; stroke-width: 1.4; fill-opacity: 0.12; }
.points.filtering circle:not(.hit) { pointer-events: none; }
#tip { position: fixed; display: none; pointer-events: none; background: #fff; border: 1px solid #bbb; border-radius: 4px;
  padding: 4px 8px; font-size: 12px; box-shadow: 0 1px 4px rgba(0,0,0,.15); white-space: pre; z-index: 10; }
.strip { display: flex; height: 22px; border: 1px solid #ddd; border-radius: 3px; overflow: hidden; margin: 4px 0 2px; }
.strip span { display: block; min-width: 1px; border-right: 1px solid #fff; }
.strip span:hover, .strip span.hit { outline: 2px solid #111; outline-offset: -2px; }
.strip-note { color: #555; font-size: 12px; margin: 0 0 8px; }
.swatch { display: inline-block; width: 10px; height: 10px; margin: 0 3px 0 6px; border-radius: 2px; vertical-align: -1px; }
"""

POINTS_SCRIPT = """
(() => {
  const tip = document.getElementById('tip');
  const show = (event, text) => { tip.textContent = text; tip.style.display = 'block';
    tip.style.left = (event.clientX + 14) + 'px'; tip.style.top = (event.clientY + 12) + 'px'; };
  document.querySelectorAll('.points circle, .strip span').forEach(el => {
    el.addEventListener('mousemove', e => show(e, el.dataset.tip));
    el.addEventListener('mouseleave', () => { tip.style.display = 'none'; });
  });
  const filter = document.getElementById('filter');
  filter.addEventListener('input', () => {  // each view's points and strip follow its own table
    const active = filter.value.trim() !== '';
    for (const layer of document.querySelectorAll('.points, .strip')) {
      const table = document.getElementById(layer.dataset.table), shown = new Set();
      if (!table) continue;
      for (const row of table.tBodies[0].rows) if (!row.hidden) shown.add(row.children[0].textContent);
      layer.classList.toggle('filtering', active);
      layer.querySelectorAll('circle, span[data-i]').forEach(el => el.classList.toggle('hit', active && shown.has(el.dataset.i)));
    }
  });
})();
"""


def tip_text(node: CostedNode, model_time: float) -> str:
    """The hover text of one node: name, op, module, FLOPs, bytes, intensity, time, share."""
    cost, place = node.cost, node.placement
    share = node.time_s / model_time if model_time else None
    lines = [node.name, f"{node.op_type}" + (f" · {module_path(node)}" if module_path(node) else ""),
             f"{si(cost.flops, 'FLOP')}" + (f" + {si(cost.transcendentals, '').strip()} transc." if cost.transcendentals else "")
             + f" · {si(cost.bytes, 'B')} · {number(place.intensity)} FLOP/B",
             f"{place.bound}-bound · {duration(node.time_s)} · {percent(share)} of the time"]  # fmt: skip
    return "\n".join(lines)


def plotted(report: Report) -> list[CostedNode]:
    """The nodes the plot draws (plot._points' rule: costed, with FLOPs, time and intensity)."""
    return [n for n in ok_rows(report.nodes) if n.cost.flops and n.time_s and n.placement.intensity]


def interactive_svg(report: Report, suffix: str = "", label: str | None = None) -> str:
    """The roofline as inline SVG (the plot of `render_plot`), with a hover layer `points{suffix}`
    (its table `nodes{suffix}`): one circle per plotted node, `data-i` its index, `data-tip` and a
    <title> its figures. `label`: the model's name in the title (the file's stem by default)."""
    from matplotlib import rc_context

    from onnx_roofline.report.plot import AREA, roofline_figure

    data = report.to_dict()
    buffer = io.BytesIO()
    with rc_context({"svg.hashsalt": "onnx-roofline", "svg.fonttype": "path"}):  # as render_plot draws it
        figure = roofline_figure([data], labels=[label] if label else None)
        figure.savefig(buffer, format="svg", metadata={"Date": None})
    svg = buffer.getvalue().decode()
    svg = svg[svg.index("<svg") :]
    axes, dpi, height = figure.axes[0], figure.dpi, figure.bbox.height
    nodes = plotted(report)
    total = sum(n.time_s for n in nodes) or 1.0
    model_time = report.totals.time_s
    circles = []
    for node in nodes:
        x, y = axes.transData.transform((node.placement.intensity, node.cost.flops / node.time_s))
        cx, cy = x * 72 / dpi, (height - y) * 72 / dpi  # display pixels → the SVG's points, y down
        radius = max(
            3.0, math.sqrt(6 + AREA * node.time_s / total) / 2
        )  # the marker's (area in points²), at least 3 pt
        text = tip_text(node, model_time)
        circles.append(
            f'<circle cx="{cx:.3f}" cy="{cy:.3f}" r="{radius:.2f}" data-i="{node.index}" data-tip="{_e(text)}"><title>{_e(text)}</title></circle>'
        )
    layer = f'<g id="points{suffix}" class="points" data-table="nodes{suffix}">{"".join(circles)}</g>'
    end = svg.rindex("</svg>")
    return svg[:end] + layer + svg[end:]


def zero_flop_strip(report: Report, suffix: str = "") -> str:
    """The nodes with no FLOPs, as a strip `strip{suffix}` (its table `nodes{suffix}`) of segments
    as wide as their time (heaviest first), with a line saying how many there are and their share;
    "" when there are none."""
    nodes = sorted((n for n in ok_rows(report.nodes) if not n.cost.flops), key=lambda n: (-(n.time_s or 0), n.index))
    if not nodes:
        return ""
    model_time = report.totals.time_s or 1.0
    spent = sum(n.time_s for n in nodes)
    shown = [n for n in nodes if n.time_s / model_time >= STRIP_MIN_SHARE]
    rest = nodes[len(shown) :]
    colors: dict[str, str] = {}
    segments = []
    for node in shown:
        color = colors.setdefault(node.op_type, _STRIP_COLORS[len(colors) % len(_STRIP_COLORS)])
        text = (
            f"{node.name}\n{op_label(node)} · {_no_flops_work(node)}\n{duration(node.time_s)} · {percent(node.time_s / model_time)} of the time"
            + (f"\n{FOLDABLE_WHY}" if node.constant_foldable else "")
        )
        segments.append(
            f'<span style="flex-grow: {_grow(node.time_s, spent)}; background: {color}" data-i="{node.index}" data-tip="{_e(text)}" title="{_e(text)}"></span>'
        )
    if rest:
        time_rest = sum(n.time_s for n in rest)
        text = f"{len(rest)} more nodes with no FLOPs, each under {percent(STRIP_MIN_SHARE)}\n{duration(time_rest)} · {percent(time_rest / model_time)} of the time"
        segments.append(
            f'<span style="flex-grow: {_grow(time_rest, spent)}; background: #c8c8c8" data-tip="{_e(text)}" title="{_e(text)}"></span>'
        )
    legend = " ".join(
        f'<span class="swatch" style="background: {color}"></span>{_e(op)}' for op, color in colors.items()
    )
    others = '<span class="swatch" style="background: #c8c8c8"></span>others' if rest else ""
    heaviest = ", ".join(
        f"{_e(n.name)} ({percent(n.time_s / model_time)}{', foldable' if n.constant_foldable else ''})"
        for n in shown[:3]
    )
    folded = [n for n in nodes if n.constant_foldable]
    fold_note = (
        f"{len(folded)} of them foldable ({percent(sum(n.time_s for n in folded) / model_time)} of the time): "
        "their inputs are all weights or constants, so a runtime computes them once at load. "
        if folded
        else ""
    )
    return (f'<section id="zero-flop{suffix}"><div id="strip{suffix}" class="strip" data-table="nodes{suffix}">{"".join(segments)}</div>'
            f'<p class="strip-note">No FLOPs, not on the log-intensity axis: {len(nodes)} nodes '
            f'({_e(described((n.op_type, n.cost.transcendentals) for n in nodes))}), '
            f'{percent(spent / model_time)} of the time{"; heaviest: " + heaviest if heaviest else ""}. '
            f'{fold_note}Each segment is as wide as its time: {legend}{others}.</p></section>')  # fmt: skip


def _no_flops_work(node: CostedNode) -> str:
    """`154.39 MB moved, no FLOPs`, or `36.86 k transc. and 147.46 kB moved, no FLOPs` (not data movement)."""
    moved = f"{si(node.cost.bytes, 'B')} moved, no FLOPs"
    if kind(node.cost.transcendentals) == TRANSCENDENTAL:
        return f"{si(node.cost.transcendentals, '').strip()} transc. ({TRANSCENDENTAL}) and {moved}"
    return f"{MOVEMENT}: {moved}"


def _grow(time_s: float, spent: float) -> str:
    """A segment's flex-grow: its per-mille of the strip's time (flex shares out only a fraction
    of the space when the grows sum under 1)."""
    return f"{1000 * time_s / spent:.4f}" if spent else "0"


def page_parts() -> dict[str, Any]:
    """What render_html adds to its page: the style, the script, the tooltip element."""
    return {"style": POINTS_STYLE, "script": POINTS_SCRIPT, "tip": '<div id="tip" role="tooltip"></div>'}


def _e(text: str) -> str:
    return html.escape(str(text), quote=True)
