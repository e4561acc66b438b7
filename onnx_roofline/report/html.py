"""The HTML report: one self-contained file (inline SVG plot, CSS and JS; nothing fetched when viewed)
with the summary, the roofline, per-op-type and per-module breakdowns, and every node in a table
that sorts by any column and filters by text."""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

from onnx_roofline.report.breakdown import MODULE, OP_TYPE, breakdown, module_path
from onnx_roofline.report.costed import is_ok
from onnx_roofline.report.findings import WHAT_TIME_IS, findings, headline, held_memory, predicted_words
from onnx_roofline.report.html_points import interactive_svg, page_parts, zero_flop_strip
from onnx_roofline.report.html_slowest import STYLE as SLOWEST_STYLE
from onnx_roofline.report.html_slowest import slowest_section
from onnx_roofline.report.model import DEPLOYED, WRITTEN, NodeResult, Report
from onnx_roofline.report.table import GROUP_COLUMNS, group_cells, group_title, node_count_words, op_label, shape_text
from onnx_roofline.report.units import duration, number, percent, si
from onnx_roofline.shapes.roles import NAME, DimDefault
from onnx_roofline.shapes.roles import listed as listed_dims

_STYLE = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px auto; max-width: 1400px; color: #222; padding: 0 16px; }
h1 { font-size: 20px; margin: 0 0 4px; } h2 { font-size: 16px; margin: 28px 0 8px; } h1, h2, p { overflow-wrap: break-word; }
.sub { color: #555; margin: 0 0 16px; }
.figures { display: grid; grid-template-columns: repeat(auto-fit, minmax(170px, 1fr)); gap: 8px; }
.figure { background: #f5f6f8; border-radius: 6px; padding: 8px 12px; }
.figure b { display: block; font-size: 18px; } .figure span { color: #555; font-size: 12px; }
.warn { color: #a15c00; }
svg { max-width: 100%; height: auto; }
.columns { display: flex; flex-wrap: wrap; gap: 0 24px; } .columns > section { flex: 1 1 auto; min-width: 0; }  /* side by side where both fit */
.scroll { max-height: 520px; overflow: auto; border: 1px solid #e3e3e3; }
table { border-collapse: collapse; width: 100%; font-size: 12.5px; }
th, td { padding: 3px 8px; border-bottom: 1px solid #eee; text-align: right; white-space: nowrap; }
th:first-child, td:first-child, th.text, td.text, td.bound, td.name { text-align: left; }
td.name, td.text, .columns td:first-child { white-space: normal; overflow-wrap: anywhere; min-width: 4em; }  /* long names wrap, after a separator (_SCRIPT): every column stays in view */
td.op { overflow-wrap: normal; }  /* an op type breaks between words, never inside one (FlashAttention) */
th { position: sticky; top: 0; background: #fafafa; cursor: pointer; user-select: none; }
th[aria-sort="ascending"]::after { content: " ▲"; } th[aria-sort="descending"]::after { content: " ▼"; }
tr.memory td.bound { color: #1f5fa8; } tr.compute td.bound { color: #b3261e; } tr.uncosted { color: #a15c00; }
#filter { margin: 0 0 8px; padding: 4px 8px; width: 320px; }
"""

_SCRIPT = """
function sortTable(th) {
  const table = th.closest('table'), body = table.tBodies[0], index = [...th.parentNode.children].indexOf(th);
  const descending = th.getAttribute('aria-sort') !== 'descending';
  table.querySelectorAll('th').forEach(h => h.removeAttribute('aria-sort'));
  th.setAttribute('aria-sort', descending ? 'descending' : 'ascending');
  const key = row => { const cell = row.children[index]; const v = cell.dataset.v;
    return v === undefined ? cell.textContent : (v === '' ? -Infinity : parseFloat(v)); };
  const rows = [...body.rows].sort((a, b) => { const x = key(a), y = key(b);
    const order = typeof x === 'number' && typeof y === 'number' ? x - y : String(x).localeCompare(String(y), undefined, {numeric: true});
    return descending ? -order : order; });
  rows.forEach(row => body.appendChild(row));
}
for (const cell of document.querySelectorAll('td.name, td.text, .columns td:first-child'))  // a break after each / . _ and 2x3's x
  if (!cell.children.length) cell.innerHTML = cell.innerHTML.replace(/[/._]|(?<=[0-9])x(?=[0-9])/g, '$&<wbr>');
document.querySelectorAll('table.sortable th').forEach(th => th.addEventListener('click', () => sortTable(th)));
const filter = document.getElementById('filter');
filter.addEventListener('input', () => {
  const words = filter.value.toLowerCase().split(/\\s+/).filter(Boolean);
  for (const view of document.querySelectorAll('.view')) {
    let shown = 0;
    for (const row of view.querySelector('table').tBodies[0].rows) {
      const visible = words.every(w => row.textContent.toLowerCase().includes(w));
      row.hidden = !visible; shown += visible;
    }
    view.querySelector('.shown').textContent = shown;
  }
});
"""

_VIEWS_STYLE = """
.findings p { margin: 2px 0; } .findings b { display: inline-block; min-width: 84px; }
.switch { margin: 0 0 8px; } .switch > label { margin: 0 16px 0 4px; cursor: pointer; } #filter { display: block; }
body:has(#show-written:checked) [data-view="deployed"], body:has(#show-deployed:checked) [data-view="written"] { display: none; }
"""

_NODE_COLUMNS = ("#", "node", "op", "module", "output", "flops", "bytes", "FLOP/B", "unit", "bound", "time", "share")
_TEXT_COLUMNS = {"node", "op", "module", "output", "unit", "bound"}


def render_html(
    report: Report, by: Sequence[str] = (OP_TYPE, MODULE), depth: int = 3, other: Report | None = None
) -> str:
    """`other`: the report's other view (deployed for a written report): its estimate is in the
    summary, and a switch at the top shows one view at a time, its cards, slowest entries, plot,
    breakdowns and table together (issue 41)."""
    model, hw = report.model, report.hardware
    name = Path(model.path).name if model.path else "model"
    defaults = {
        k: model.dim_roles.get(k) or DimDefault(v, k, NAME) for k, v in model.dims.items() if k in model.defaulted_dims
    }
    dims = listed_dims(model.dims, defaults) or "no symbolic dims"  # each default with its role (shapes/roles.py)
    views = [report] + ([other] if other is not None else [])
    extras = page_parts()
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>onnx-roofline: {_e(name)} on {_e(hw.name)}</title>
<style>{_STYLE}{_VIEWS_STYLE}{SLOWEST_STYLE}{extras["style"]}</style>
</head>
<body>
<h1>onnx-roofline: {_e(name)}</h1>
<p class="sub">{_e(hw.name)} · {_e(dims)}{_e(f" · costed as {model.precision}" if model.precision else "")} · {_e(node_count_words(report))}</p>
{_switch(report, views)}
<section id="summary">{_summary(report, other, views)}</section>
<h2>Roofline</h2>
{"".join(_plot(v, report, name) for v in views)}{extras["tip"]}
{"".join(f'<div class="columns"{_in(v)}>{"".join(_breakdown(v, family, depth) for family in by)}</div>' for v in views)}
<h2>Nodes</h2>
{_views(report, views)}
<script>{_SCRIPT}{extras["script"]}</script>
</body>
</html>
"""


def _latency_figures(report: Report, other: Report | None) -> list[tuple[str, str]]:
    """The floor first (the deployed bound), the predicted time beside it, then the as-written sum."""
    head = headline(report, other)
    floor = [(duration(head.floor_s), f"latency floor: the deployed bound, which no runtime beats ({head.kernels} kernels)"),
             (duration(head.predicted_s), f"predicted ({predicted_words(head)})")] if head.floor_s is not None else []  # fmt: skip
    return [*floor, (duration(head.every_node_s), f"latency, {WHAT_TIME_IS[WRITTEN]} (sum of per-node bounds)")]


def _summary(report: Report, other: Report | None, views: list[Report]) -> str:
    """The cards (the latency figures, then the shown view's own: FLOPs, bytes, intensity, bound
    share), the slowest entries of the shown view, then the findings. `views`: the report, then other."""
    memory = held_memory(report, other)  # the footprint every command judges by
    cards = [_card(value, label) for value, label in _latency_figures(report, other)]
    for v in views:
        totals, shown = v.totals, _in(v)
        cards += [_card(si(totals.flops, "FLOP"), f"FLOPs ({v.view})", shown), _card(si(totals.bytes, "B"), f"bytes moved ({v.view})", shown),
                  _card(f"{number(totals.intensity)} FLOP/B", f"intensity ({v.view})", shown),
                  _card(percent(totals.memory_bound_time_share), f"of time memory-bound ({v.view})", shown, "share")]  # fmt: skip
    cards += [_card(si(report.model.parameters, ""), "parameters"),
              _card(si(memory.total_bytes, "B"), "memory footprint" + {None: "", True: ", fits", False: ", DOES NOT FIT"}[memory.fits])]  # fmt: skip
    slowest = "".join(
        f"<div{_in(v)}>{slowest_section(v, _suffix(v, report), other if v is report else report)}</div>" for v in views
    )
    lines = "".join(
        f'<p class="{"warn" if line.loud else "note"}"><b>{_e(line.label)}</b> {_e(line.text)}</p>'
        for line in findings(report, other)
    )
    return f'<div class="figures">{"".join(cards)}</div>{slowest}<div class="findings">{lines}</div>'


def _card(value: str, label: str, attrs: str = "", kind: str = "") -> str:
    return f'<div class="figure{" " + kind if kind else ""}"{attrs}><b>{_e(value)}</b><span>{_e(label)}</span></div>'


def _in(view: Report) -> str:
    """The attribute that shows an element with its view only (the switch's CSS hides the other's)."""
    return f' data-view="{view.view}"'


def _suffix(view: Report, report: Report) -> str:
    """The ids' suffix of a view's parts: none for the report's own (`nodes`, `points`), `-deployed` for the other's."""
    return "" if view is report else f"-{view.view}"


def _switch(report: Report, views: list[Report]) -> str:
    """One radio per view, at the top: the choice shows that view's cards, slowest entries, plot,
    breakdowns and table together (CSS `:has`, no script)."""
    if len(views) < 2:
        return ""
    radios = "".join(
        f'<input type="radio" name="view" id="show-{v.view}"{" checked" if v is report else ""}>'
        f'<label for="show-{v.view}">{v.view}: {_e(WHAT_TIME_IS[v.view])}, {_e(_count(v))}</label>'
        for v in views
    )
    return f'<div class="switch">view: {radios}</div>'


def _plot(view: Report, report: Report, name: str) -> str:
    """A view's roofline (the deployed one places kernels) and its strip of no-FLOPs entries."""
    suffix = _suffix(view, report)
    label = f"{Path(name).stem}, deployed kernels" if view.view == DEPLOYED else None
    svg = interactive_svg(view, suffix, label)  # inline (no XML prolog), with a hover layer naming each point
    return f'<div{_in(view)}><figure id="roofline{suffix}" class="roofline">{svg}</figure>{zero_flop_strip(view, suffix)}</div>'


def _views(report: Report, views: list[Report]) -> str:
    """The nodes table of each view (the switch at the top shows one), under one filter."""
    sections = "".join(
        f'<div class="view"{_in(v)}><p><span class="shown"{_MAIN_COUNT if v is report else ""}>{len(v.nodes)}</span> {_e(_rows(v))}</p>'
        f'<div class="scroll">{_node_table(v, "nodes" + _suffix(v, report))}</div></div>'
        for v in views
    )
    return f'<div class="views"><input id="filter" type="search" placeholder="filter: name, op type, module, bound…">{sections}</div>'


_MAIN_COUNT = ' id="shown"'  # the shown rows of the report's own view


def _count(report: Report) -> str:
    """What a view's table holds, in one count: as written its nodes; deployed its kernels, the
    count the summary and the JSON give (`kernels`: those launched), not its rows."""
    return f"{report.kernels} kernels" if report.view == DEPLOYED else f"{len(report.nodes)} nodes"


def _rows(report: Report) -> str:
    """The words after the shown-rows count: deployed, the rows are the kernels and the rows that
    launch nothing (views, shape arithmetic, folded nodes), so they are called rows."""
    if report.view != DEPLOYED:
        return f"nodes ({WHAT_TIME_IS[report.view]})"
    return f"rows ({WHAT_TIME_IS[report.view]}): the {_count(report)} and {len(report.nodes) - report.kernels} rows that launch nothing (views, shape arithmetic)"


def _breakdown(report: Report, family: str, depth: int) -> str:
    title, first = group_title(family, depth)
    rows = []
    for group in breakdown(report, family, depth):
        cells = group_cells(group, family, report.totals.time_s)
        t = group.totals
        values: list[float | int | str | None] = ["", len(group.nodes), t.flops, t.bytes, None, t.time_s, t.time_s]
        rows.append("<tr>" + "".join(_td(c, v) for c, v in zip(cells, values, strict=False)) + "</tr>")
    head = "".join(f"<th>{_e(h)}</th>" for h in (first, *GROUP_COLUMNS))
    return f'<section><h2>{_e(title.capitalize())}</h2><div class="scroll"><table class="sortable"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table></div></section>'


def _node_table(report: Report, table_id: str) -> str:
    model_time = report.totals.time_s
    rows = [_node_row(node, model_time) for node in sorted(report.nodes, key=lambda n: (-(n.time_s or 0), n.index))]
    head = "".join(
        f'<th class="text">{_e(h)}</th>' if h in _TEXT_COLUMNS else f"<th>{_e(h)}</th>" for h in _NODE_COLUMNS
    )
    return (
        f'<table id="{table_id}" class="sortable"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
    )


def _node_row(node: NodeResult, model_time: float) -> str:
    common = [
        _td(str(node.index), node.index),
        _td(node.name, None, "name", title=node.name),
        _td(op_label(node), None, "text op"),
        _td(module_path(node), None, "text"),
        _td(shape_text(node), None, "text"),
    ]
    if not is_ok(node):
        reason = f"{node.status}: {node.reason}"
        return f'<tr class="uncosted">{"".join(common)}<td class="text" colspan="7" data-v="">{_e(reason)}</td></tr>'
    cost, place = node.cost, node.placement
    share = node.time_s / model_time if model_time else None
    cells = [
        _td(si(cost.flops, "FLOP"), cost.flops),
        _td(si(cost.bytes, "B"), cost.bytes),
        _td(number(place.intensity), place.intensity),
        _td(f"{node.unit}/{node.dtype}", None, "text"),
        _td(node.bound, None, "bound"),
        _td(duration(node.time_s), node.time_s),
        _td(percent(share), share),
    ]
    return f'<tr class="{_e(node.bound)}">{"".join(common + cells)}</tr>'


def _td(text: str, value: float | int | str | None, cls: str = "", title: str | None = None) -> str:
    """A cell; `value` is what the column sorts by (text columns sort by their text)."""
    attrs = (f' class="{cls}"' if cls else "") + (f' title="{_e(title)}"' if title else "")
    attrs += "" if value is None or value == "" else f' data-v="{value!r}"'
    return f"<td{attrs}>{_e(text)}</td>"


def _e(text: str) -> str:
    return html.escape(str(text), quote=True)
