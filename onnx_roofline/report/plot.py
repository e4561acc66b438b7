"""The roofline plot: every node a point under its hardware's roof, one or several reports at once.

It draws from the JSON form of a report (`Report.to_dict()` or a saved `--format json` file), so a
plot of two saved reports (GPT-2 prefill vs decode) is the same code as the plot of one analysis.
A node's point is (intensity, FLOPs / time lower bound): on the roof by construction, since the
analysis is static; what the plot shows is *where* on the roof each node sits and how much time
it takes (the marker's area). Nodes without FLOPs (pure data movement) have no place on a log
intensity axis: their count and share of time are written in the corner instead.
"""

from __future__ import annotations

import io
import math
import os
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from onnx_roofline.errors import RooflineError
from onnx_roofline.report.breakdown import module_of
from onnx_roofline.report.off_axis import described
from onnx_roofline.report.output import check_destination, write_bytes
from onnx_roofline.report.units import percent, si

FORMATS = ("png", "svg")
COLOR_BY = ("op_type", "bound", "report")
MAX_OP_COLORS = 9  # the heaviest op types get a colour each, the rest share grey
LABELS = 8  # labelled positions per report (fewer each in an overlay)
AREA = 2500  # marker area (points²) of a node taking all of its model's time
_PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")
_BOUND_COLORS = {"compute": "#d62728", "memory": "#1f77b4"}
_MARKERS = ("o", "^", "s", "D")
_OTHER = "#9a9a9a"


@dataclass(frozen=True)
class _Point:
    name: str
    op_type: str
    intensity: float
    perf: float  # FLOP/s at the time lower bound
    time_s: float
    bound: str


def roofline_figure(
    reports: Sequence[Mapping[str, Any]],
    labels: Sequence[str] | None = None,
    color_by: str | None = None,
    title: str | None = None,
):
    """A matplotlib Figure (Agg) of one or more reports; `labels` name the reports in an overlay.
    Colour is by op type for one report, by report for several (unless `color_by` says otherwise)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # imported here: only plotting needs matplotlib
    from matplotlib.figure import Figure

    reports = [_as_dict(r) for r in reports]
    labels = list(labels or [_default_label(r) for r in reports])
    if len(labels) != len(reports):
        raise ValueError("one label per report")
    color_by = color_by or ("op_type" if len(reports) == 1 else "report")
    points = [_points(r) for r in reports]
    figure = Figure(figsize=(11, 6.8), dpi=150, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    axes.set_xscale("log")
    axes.set_yscale("log")
    x_range, y_range = _ranges(reports, points)
    axes.set_xlim(*x_range)
    axes.set_ylim(*y_range)
    diagonals = _draw_roofs(axes, reports, x_range)
    colors = _colors(points, color_by)
    for index, (report_points, label) in enumerate(zip(points, labels, strict=False)):
        _draw_points(axes, report_points, colors, color_by, label, _MARKERS[index % len(_MARKERS)], len(reports) > 1)
    _note_zero_flop(axes, reports, labels if len(reports) > 1 else None)
    axes.set_xlabel("arithmetic intensity (FLOP / byte moved)")
    axes.set_ylabel("attainable performance at the bound (FLOP/s)")
    axes.yaxis.set_major_formatter(_si_formatter("FLOP/s"))
    axes.grid(True, which="major", alpha=0.25)
    axes.set_title(title or _default_title(reports, labels), fontsize=12)
    wrap_to_width(axes.title, axes.get_window_extent().width)  # before the layout, whose axes are wider
    if any(points):
        legend = axes.legend(
            loc="lower right", fontsize=8, framealpha=0.9, title=_legend_title(color_by), title_fontsize=8
        )
        for handle in legend.legend_handles:
            handle.set_sizes([40])  # type: ignore[union-attr]  # matplotlib's stub: a scatter's legend handle is its PathCollection; the key shows colours, not the first node's time
    figure.canvas.draw()  # settle the layout, then freeze it: labels are placed in final pixels
    figure.set_layout_engine("none")
    _label_diagonals(axes, diagonals)
    _label_heaviest(axes, points, [r["totals"]["time_s"] for r in reports], labels if len(reports) > 1 else None)
    return figure


def wrap_to_width(text, width: float) -> None:
    """Break a Text's words into lines no wider than `width` display pixels, measured (a title
    with a model's long dim names runs past both edges; matplotlib's own `wrap=True` wraps only
    while drawing, too late for the layout that makes room for it)."""
    import textwrap

    renderer = text.figure.canvas.get_renderer()
    words = text.get_text()
    columns = len(words)
    while (drawn := text.get_window_extent(renderer).width) > width and columns > 12:
        columns = min(columns - 1, int(columns * width / drawn))
        text.set_text(textwrap.fill(words, columns))


def render_plot(reports: Sequence[Mapping[str, Any]], fmt: str = "png", **options) -> bytes:
    """The plot as PNG or SVG bytes (deterministic: no timestamps in the metadata)."""
    if fmt not in FORMATS:
        raise ValueError(f"plot format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    from matplotlib import rc_context

    buffer = io.BytesIO()
    metadata = {"Date": None} if fmt == "svg" else {"Software": None}
    with rc_context({"svg.hashsalt": "onnx-roofline", "svg.fonttype": "path"}):  # stable ids, fonts as shapes
        roofline_figure(reports, **options).savefig(buffer, format=fmt, metadata=metadata)
    return buffer.getvalue()


def write_plot(
    reports: Sequence[Mapping[str, Any]], destination: str | os.PathLike, protect: Sequence[str] = (), **options
) -> None:
    """Write the plot atomically; the format follows the file's extension (.png or .svg)."""
    write_bytes(render_plot(reports, plot_format(destination), **options), str(destination), protect=protect)


def check_plot_destination(destination: str | os.PathLike) -> None:
    """Fail before the work, not after it has been printed: a plot path of another format, or in
    a folder that does not exist, is bad input."""
    plot_format(destination)
    check_destination(destination)


def plot_format(destination: str | os.PathLike) -> str:
    """ "png" or "svg", from the file's extension."""
    fmt = Path(destination).suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise RooflineError(f"plot file must end in .png or .svg: {destination}")
    return fmt


# --- the data -------------------------------------------------------------------------------------


def _as_dict(report) -> Mapping[str, Any]:
    return report.to_dict() if hasattr(report, "to_dict") else report


def _points(report: Mapping[str, Any]) -> list[_Point]:
    return [
        _Point(n["name"], n["op_type"], n["intensity"], n["flops"] / n["time_s"], n["time_s"], n["bound"])
        for n in report["nodes"]
        if n["status"] == "ok" and n["flops"] and n["time_s"] and n["intensity"]
    ]


def _ceilings(report: Mapping[str, Any]) -> dict[tuple[str, str], float]:
    """(unit, dtype) → peak, for those the model's nodes run on."""
    return {(n["unit"], n["dtype"]): n["peak"] for n in report["nodes"] if n["status"] == "ok" and n["peak"]}


def _ranges(reports, points) -> tuple[tuple[float, float], tuple[float, float]]:
    intensities = [p.intensity for ps in points for p in ps]
    perfs = [p.perf for ps in points for p in ps]
    peaks = [peak for r in reports for peak in _ceilings(r).values()] or [1.0]
    ridges = [peak / r["hardware"]["memory_bandwidth"] for r in reports for peak in _ceilings(r).values()] or [1.0]
    x_low = min([*intensities, min(ridges)]) / 4
    x_high = max([*intensities, max(ridges)]) * 6
    y_low = min([*perfs, min(peaks) / 10]) / 4
    return (x_low, x_high), (y_low, max(peaks) * 3)


def _colors(points: Sequence[Sequence[_Point]], color_by: str) -> dict[str, str]:
    if color_by == "bound":
        return dict(_BOUND_COLORS)
    if color_by == "report":
        return {}
    time_by_op: dict[str, float] = defaultdict(float)
    for point in (p for ps in points for p in ps):
        time_by_op[point.op_type] += point.time_s
    heaviest = sorted(time_by_op, key=lambda op: (-time_by_op[op], op))[:MAX_OP_COLORS]
    return dict(zip(heaviest, _PALETTE, strict=False))


# --- drawing --------------------------------------------------------------------------------------


def _draw_roofs(axes, reports, x_range) -> list[tuple[float, float, str]]:
    """The memory diagonal and one ceiling per unit/dtype in use (by any report on that hardware),
    each ridge marked and named. Returns where the diagonals' labels go, placed once the layout is
    final (they follow the slope)."""
    diagonals, by_hardware = [], defaultdict(list)
    for report in reports:
        by_hardware[report["hardware"]["key"]].append(report)
    for same in by_hardware.values():
        hardware = same[0]["hardware"]
        bandwidth = hardware["memory_bandwidth"]
        ceilings = sorted({c: peak for r in same for c, peak in _ceilings(r).items()}.items(), key=lambda kv: -kv[1])
        if not ceilings:
            continue
        top_ridge = ceilings[0][1] / bandwidth
        axes.plot([x_range[0], top_ridge], [bandwidth * x_range[0], ceilings[0][1]], color="#333333", lw=1.6, zorder=2)
        where = _emptiest(sorted(p.intensity for r in same for p in _points(r)), x_range[0], top_ridge)
        diagonals.append(
            (
                bandwidth,
                where,
                (f"{hardware['key']}: " if len(by_hardware) > 1 else "") + f"memory {si(bandwidth, 'B/s')}",
            )
        )
        for peak, names in _shared_ceilings(ceilings):
            ridge, matrix = peak / bandwidth, any(name.startswith("matrix") for name in names)
            axes.plot(
                [ridge, x_range[1]],
                [peak, peak],
                color="#333333",
                lw=1.6 if matrix else 1.0,
                ls="-" if matrix else "--",
                zorder=2,
            )
            axes.plot([ridge], [peak], marker="o", ms=4, color="#333333", zorder=3)
            axes.annotate(
                f"{' = '.join(names)} {si(peak, 'FLOP/s')} · ridge {ridge:,.0f} FLOP/B",
                (ridge, peak),
                fontsize=7.5,
                color="#333333",
                ha="right",
                va="bottom",
                xytext=(-5, 3),
                textcoords="offset points",
            )
        axes.axvline(top_ridge, color="#999999", lw=0.8, ls=":", zorder=1)
    return diagonals


def _shared_ceilings(ceilings) -> list[tuple[float, list[str]]]:
    """Ceilings of equal peak as one roof named "matrix fp32 = vector fp32": two labels at one
    place would print over each other (every fp32 model on an H100)."""
    shared: dict[float, list[str]] = {}
    for (unit, dtype), peak in sorted(ceilings, key=lambda c: (-c[1], c[0])):
        shared.setdefault(peak, []).append(f"{unit} {dtype}")
    return list(shared.items())


def _emptiest(intensities: list[float], low: float, high: float) -> float:
    """Where on the diagonal a label crosses no point: early in its widest gap (log scale)."""
    edges = [low, *(x for x in intensities if low < x < high), high]
    gaps = [(math.log(b) - math.log(a), a, b) for a, b in zip(edges, edges[1:], strict=False)]
    _, a, b = max(gaps)
    return math.exp(math.log(a) + 0.1 * (math.log(b) - math.log(a)))


def _label_diagonals(axes, diagonals) -> None:
    """Write each memory roof's bandwidth along its slope (the angle is known only in pixels)."""
    for bandwidth, x, text in diagonals:
        (x0, y0), (x1, y1) = axes.transData.transform([(x, bandwidth * x), (x * 10, bandwidth * x * 10)])
        angle = math.degrees(math.atan2(y1 - y0, x1 - x0))
        axes.annotate(
            text,
            (x, bandwidth * x),
            xytext=(8, -8),
            textcoords="offset points",
            fontsize=7.5,
            color="#333333",
            rotation=angle,
            rotation_mode="anchor",
            ha="left",
            va="top",
        )  # under the roof: nothing is there


def _draw_points(
    axes, points: Sequence[_Point], colors: dict[str, str], color_by: str, label: str, marker: str, overlay: bool
) -> None:
    if not points:
        return
    total = sum(p.time_s for p in points)
    groups: dict[str, list[_Point]] = defaultdict(list)
    for point in points:
        key = {"op_type": point.op_type, "bound": point.bound}.get(color_by, label)
        groups[key if color_by == "report" or key in colors else "other"].append(point)
    order = [k for k in [*colors, "other"] if k in groups] if color_by != "report" else [label]
    for index, key in enumerate(order):
        members = groups[key]
        color = colors.get(key, _OTHER) if color_by != "report" else None
        legend = f"{label}: {key}" if overlay and color_by != "report" else key
        axes.scatter(
            [p.intensity for p in members],
            [p.perf for p in members],
            s=[6 + AREA * p.time_s / total for p in members],
            c=color,
            marker=marker,
            alpha=0.55,
            edgecolors="white",
            linewidths=0.4,
            label=legend,
            zorder=4 + index * 0.01,
        )


def _label_heaviest(
    axes, points: Sequence[Sequence[_Point]], model_times: Sequence[float], report_labels: Sequence[str] | None
) -> None:
    """Label the heaviest *positions*: a layer repeated twelve times is one point, labelled ×12.
    The heaviest compute-bound positions are labelled too, so both sides of the ridge are named.
    Labels are placed greedily where they overlap no earlier label, and off the roofs and markers
    where there is room (on a flat roof of convolutions, labels would cover one another's points)."""
    renderer = axes.figure.canvas.get_renderer()
    placed = [t.get_window_extent(renderer) for t in axes.texts]
    placed += [axes.get_legend().get_window_extent(renderer)] if axes.get_legend() else []
    drawn = _drawn_boxes(axes)
    for index, report_points in enumerate(points):
        positions: dict[tuple, list[_Point]] = defaultdict(list)
        for point in report_points:
            positions[(_short_name(point), round(point.intensity, 3), round(point.perf, -6))].append(point)
        count = LABELS if len(points) == 1 else max(3, LABELS // len(points))
        by_time = sorted(positions.values(), key=lambda ps: -sum(p.time_s for p in ps))
        chosen = by_time[:count]
        chosen += [ps for ps in by_time if ps[0].bound == "compute" and ps not in chosen][
            : max(0, 2 - sum(ps[0].bound == "compute" for ps in chosen))
        ]
        for members in chosen:
            share = sum(p.time_s for p in members) / (model_times[index] or 1.0)
            text = _short_name(members[0]) + (f" ×{len(members)}" if len(members) > 1 else "") + f"  {percent(share)}"
            if report_labels:
                text = f"{report_labels[index]}: {text}"
            _place(axes, renderer, placed, drawn, text, members[0].intensity, members[0].perf)


_OFFSETS = tuple(
    (round(r * math.cos(math.radians(a))), round(r * math.sin(math.radians(a))))
    for r in (12, 26, 42, 60, 80, 105, 135, 170)
    for a in (-35, 35, 145, -145, -70, 70, 110, -110, 0, 180)
)


def _place(axes, renderer, placed: list, drawn, text: str, x: float, y: float) -> None:
    """The nearest offset whose box overlaps no label and no roof or marker; failing that, the
    nearest that overlaps no label; failing both, no label."""
    from matplotlib.text import Text
    from matplotlib.transforms import Bbox

    frame = axes.get_window_extent(renderer)
    fallback = None
    for offset in _OFFSETS:
        note = _note(axes, text, x, y, offset)
        note.update_positions(renderer)
        words = Text.get_window_extent(note, renderer)  # the words and their box, not the leader line
        extent = Bbox.from_extents(words.x0 - 4, words.y0 - 4, words.x1 + 4, words.y1 + 4)
        note.remove()
        if (
            frame.contains(extent.x0, extent.y0)
            and frame.contains(extent.x1, extent.y1)
            and not any(extent.overlaps(o) for o in placed)
        ):
            if not _covers(extent, drawn):
                fallback = (offset, extent)
                break
            fallback = fallback or (offset, extent)
    if fallback:
        _note(axes, text, x, y, fallback[0])
        placed.append(fallback[1])


def _note(axes, text: str, x: float, y: float, offset: tuple[int, int]):
    box = dict(boxstyle="round,pad=0.2", fc="white", ec="#bbbbbb", lw=0.5, alpha=0.9)
    arrow = dict(arrowstyle="-", color="#777777", lw=0.6)
    return axes.annotate(
        text,
        (x, y),
        xytext=offset,
        textcoords="offset points",
        fontsize=7,
        ha="left" if offset[0] >= 0 else "right",
        va="center",
        bbox=box,
        arrowprops=arrow,
        zorder=6,
    )


def _drawn_boxes(axes):
    """What a label should not hide, as display-pixel boxes (x0, y0, x1, y1) in an array: every
    marker, and the roof lines sampled every 4 px."""
    import numpy as np

    boxes = []
    for collection in axes.collections:
        centres = collection.get_offset_transform().transform(collection.get_offsets())
        radii = np.sqrt(np.resize(collection.get_sizes(), len(centres))) / 2 * axes.figure.dpi / 72
        boxes.append(np.column_stack([centres - radii[:, None], centres + radii[:, None]]))
    for line in axes.lines:
        xy = line.get_transform().transform(line.get_xydata())
        for a, b in zip(xy, xy[1:], strict=False):
            samples = np.linspace(a, b, max(2, int(np.hypot(*(b - a)) / 4)))
            boxes.append(np.column_stack([samples - 1, samples + 1]))
    return np.concatenate(boxes) if boxes else np.empty((0, 4))


def _covers(extent, boxes) -> bool:
    return bool(
        (
            (boxes[:, 0] < extent.x1)
            & (extent.x0 < boxes[:, 2])
            & (boxes[:, 1] < extent.y1)
            & (extent.y0 < boxes[:, 3])
        ).any()
    )


def _note_zero_flop(axes, reports, report_labels) -> None:
    lines = zero_flop_lines(reports, report_labels)
    if lines:
        axes.text(
            0.01, 0.99, "\n".join(lines), transform=axes.transAxes, fontsize=7.5, va="top", ha="left", color="#444444"
        )


def zero_flop_lines(reports: Sequence[Mapping[str, Any]], report_labels: Sequence[str] | None = None) -> list[str]:
    """The plot's note on what it cannot place: per report, the nodes with no FLOPs (data movement
    or transcendentals only, report/off_axis.py) and their share of the time, and the uncosted."""
    lines = []
    for index, report in enumerate(reports):
        nodes = [n for n in report["nodes"] if n["status"] == "ok" and not n["flops"]]
        total = report["totals"]["time_s"] or 1.0
        prefix = f"{report_labels[index]}: " if report_labels else ""
        if nodes:
            share = sum(n["time_s"] for n in nodes) / total
            lines.append(
                f"{prefix}+{len(nodes)} {'node' if len(nodes) == 1 else 'nodes'} with no FLOPs "
                f"({described(((n['op_type'], n['transcendentals']) for n in nodes), short=True)}), {percent(share)} of time: not on a log axis"
            )
        uncosted = report["totals"].get("uncosted_nodes", 0)
        if uncosted:
            lines.append(f"{prefix}{uncosted} nodes not costed (not shown)")
    return lines


# --- words ----------------------------------------------------------------------------------------


_CONTAINERS = {"h", "layers", "layer", "blocks", "block", "encoder", "decoder", "transformer", "model"}


def _short_name(point: _Point) -> str:
    """`/model/transformer/h.3/attn/c_attn/Gemm` → `attn.c_attn Gemm`: what repeats per layer, with
    the layer's index gone; `/layer3/layer3.2/conv2/Conv` → `layer3.conv2 Conv`."""
    parts = [p for p in module_of(point.name).split(".") if p]
    indices = [i for i, part in enumerate(parts) if part.isdigit()]
    if indices:
        last = indices[-1]
        before = (
            [parts[last - 1]]
            if last > 0 and parts[last - 1] not in _CONTAINERS and not parts[last - 1].isdigit()
            else []
        )
        parts = before + parts[last + 1 :]
    else:
        parts = parts[-1:]
    return f"{'.'.join(parts)} {point.op_type}" if parts else point.op_type


def _default_label(report: Mapping[str, Any]) -> str:
    return Path(report["model"]["path"] or "model").stem


def _default_title(reports, labels) -> str:
    hardware = sorted({r["hardware"]["name"] for r in reports})
    dims = "; ".join(
        ", ".join(f"{k}={v}" for k, v in r["model"]["dims"].items()) for r in reports if r["model"]["dims"]
    )
    return f"{' vs '.join(labels)} on {', '.join(hardware)}" + (f"  ({dims})" if dims else "")


def _legend_title(color_by: str) -> str:
    area = "area ∝ share of the model's time"
    return {"op_type": f"op type ({area})", "bound": f"bound ({area})"}.get(color_by, area)


def _si_formatter(unit: str):
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda value, _: si(value, unit).replace(".00 ", " "))
