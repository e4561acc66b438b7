"""Terminal tables for the what-if studies (JSON is each result's to_dict())."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, cast

from onnx_roofline.commands.whatif.affine import PROBES, ceil
from onnx_roofline.commands.whatif.compare import CompareResult
from onnx_roofline.commands.whatif.context import ContextResult
from onnx_roofline.commands.whatif.critical import CriticalResult
from onnx_roofline.commands.whatif.experts import moe_columns
from onnx_roofline.commands.whatif.fuse_report import FusionStudy, kernel_figures
from onnx_roofline.commands.whatif.sweep import SweepResult
from onnx_roofline.report.units import duration, number, percent, si


def render_json(result) -> str:
    return json.dumps(result.to_dict(), indent=2, allow_nan=False) + "\n"


def render_sweep(result: SweepResult, extra: Sequence[tuple[str, list[str]]] = ()) -> str:
    """`extra`: more (header, cells) columns, e.g. the context study's KV share."""
    axes = [name for name, values in result.axes.items()]
    unit = result.points[0].work.unit if result.points else "runs"
    extra = [*extra, *moe_columns(result.points)]
    header = [
        *axes,
        "latency",
        f"{unit}/s",
        "predicted",
        f"predicted {unit}/s",
        "compute-bound",
        "FLOP/B",
        "bytes",
        "memory",
        *(h for h, _ in extra),
    ]
    rows = [
        [
            *(str(p.dims[a]) for a in axes),
            duration(p.latency_s),
            si(p.throughput, ""),
            duration(p.predicted_s),
            si(p.predicted_throughput, ""),
            percent(p.compute_share),
            number(p.intensity, 2),
            si(p.bytes, "B"),
            si(p.memory_bytes, "B") + ("" if p.fits is None else "" if p.fits else " (does not fit)"),
            *(cells[i] for _, cells in extra),
        ]
        for i, p in enumerate(result.points)
    ]
    uncosted = max((p.uncosted for p in result.points), default=0)
    notes = [
        f"ridge {number(result.ridge)} FLOP/B (of the unit the heaviest matmul runs on); compute-bound = share of predicted time "
        f"in compute-bound kernels; {unit} per run: {_work_note(result)}",
        f"{unit}/s = {unit} per run / latency: the most the bound allows; predicted = the deployed kernels at "
        f"the hardware's achievable fractions, launched from a CUDA graph (docs/cost-model.md#predicted-time), whatever the view",
        f"{len(result.points)} points in {result.elapsed_s:.2f} s (model parsed once, re-bound per point)",
    ]
    if uncosted:
        notes.append(f"warning: up to {uncosted} nodes per point could not be costed and are not in the figures")
    utilization = result.setup.get("memory_utilization")
    cache = (
        f"resident KV cache ({result.setup['kv_cache']}) + " if result.setup.get("kv_cache") else ""
    )  # only a model with a cache
    notes.append(f"memory = the deployed footprint (weights + {cache}peak activations), whatever the view; "
                 f"it fits within {percent(utilization)} of the capacity (--memory-utilization)")  # fmt: skip
    notes += [f"memory{''.join(f' at {k}={v}' for k, v in dims.items())}: {fit_text(fit, cast(str, result.batch), result.setup.get('kv_cache'))}"
              for dims, fit in result.fits if fit.budget.capacity is not None]  # fmt: skip
    columns = (f"latency, {unit}/s, FLOP/B, bytes", f"predicted, predicted {unit}/s, compute-bound, memory")
    title = _title("sweep", result.setup, result.view, columns)
    return "\n".join([title, grid(header, rows), *notes]) + "\n"


def render_context(result: ContextResult) -> str:
    shares = [percent(result.kv_share(i)) for i in range(len(result.sweep.points))]
    text = render_sweep(result.sweep, extra=[("KV share", shares)])
    note = (
        f"KV share: bytes that grow with {result.dim} (cache read and written, mask row"
        f"{', score rows' if result.sweep.view == 'written' else ''}) over all bytes"
    )
    if result.bytes_line is None:
        note = f"KV share unknown: the bytes are not a line in {result.dim} over these points"
    return text.replace("sweep ", "context ", 1) + note + "\n"


def render_critical(result: CriticalResult) -> str:
    dim = result.dim
    header = ["kind", "count", "FLOP/B at 1", "limit", "ridge", "crossing", f"critical {dim}", "predicted"]
    rows = [
        [
            f"{k.op_type} {k.signature}",
            str(len(k.kernels)),
            number(k.intensity(1), 2),
            number(k.asymptote),
            number(k.ridge),
            "never" if k.crossing is None else number(float(k.crossing), 2),
            "never" if k.critical is None else str(k.critical),
            "never" if k.predicted is None else str(ceil(k.predicted)),
        ]
        for k in result.kinds
    ]
    lines = [
        _title(f"critical {dim}", result.setup, result.view),
        f"matrix kernels whose intensity grows with {dim}: the smallest {dim} at which each is compute-bound,",
        f"solved from lines fitted at {dim} = 1, 2 (checked at 64): flops({dim}) / bytes({dim}) = ridge",
        grid(header, rows),
    ]
    if result.flat:
        flat = ", ".join(f"{name} ×{count}" for name, count in result.flat.items())
        lines.append(f"flat in {dim} (no reuse across it, never crosses): {flat}")
    if result.not_affine:
        lines.append(f"not lines in {dim}, left out (model figures withheld): {', '.join(result.not_affine[:5])}")
    for moe in result.experts:
        read = ", ".join(f"{d:.2f} at {x}" for x, d in zip(PROBES, moe.distinct, strict=False))
        lines.append(f"MoE {moe.kernel}: reads the weights of {read} of {moe.experts} experts; compute-bound from {dim} = "
                     f"{'never' if moe.critical is None else moe.critical} (the distinct experts' weights added at each {dim})")  # fmt: skip
    lines += [
        f"model: compute-bound kernels take ≥ 50% of the predicted time from {dim} = "
        f"{_crossing(result.share_crossing, result.share_limit, percent)}; predicted (at the hardware's achievable fractions of "
        f"bandwidth and peak: docs/cost-model.md#predicted-time) from {dim} = "
        f"{'never' if result.predicted_share_crossing is None else ceil(result.predicted_share_crossing)}",
        f"model: total FLOPs / total bytes reaches the ridge {number(result.model_ridge)} at {dim} = "
        f"{_crossing(result.intensity_crossing, result.intensity_limit, lambda v: number(v, 2) + ' FLOP/B')}",
    ]
    if result.memory_fit is not None and result.memory_capacity is not None:
        lines.append(f"model: {fit_text(result.memory_fit, dim, result.setup.get('kv_cache'))}")
    return "\n".join(lines) + "\n"


def render_compare(result: CompareResult) -> str:
    unit = result.rows[0].work.unit if result.rows else "runs"
    header = ["hardware", "ridge", "latency", f"{unit}/s", "memory-bound", "FLOP/B", "top kernel", "its share", "bound"]
    rows = [
        [
            r.hardware.key,
            number(r.ridge),
            duration(r.latency_s),
            si(r.work.rate(r.latency_s), ""),
            percent(r.memory_share),
            number(r.intensity, 2),
            f"{r.top_op} {r.top_name}" + (" (foldable)" if r.top_foldable else ""),
            percent(r.top_share),
            r.top_bound or "?",
        ]
        for r in result.rows
    ]
    return "\n".join([_title("compare", result.setup, result.view), grid(header, rows)]) + "\n"


def render_fusion(study: FusionStudy, top: int = 10) -> str:
    data = study.to_dict(top)
    a, b = data["written"], data["fused"]
    change = lambda x, y: "same" if x == y else percent((y - x) / x) if x else "?"  # noqa: E731
    summary = grid(
        ["", "written (graph as written)", "fused (the fusion plan alone)", "change"],
        [
            ["kernels", str(a["kernels"]), str(b["kernels"]), change(a["kernels"], b["kernels"])],
            ["FLOPs", si(a["flops"], "FLOP"), si(b["flops"], "FLOP"), change(a["flops"], b["flops"])],
            ["bytes", si(a["bytes"], "B"), si(b["bytes"], "B"), change(a["bytes"], b["bytes"])],
            ["latency", duration(a["time_s"]), duration(b["time_s"]), change(a["time_s"], b["time_s"])],
            ["memory-bound share", percent(a["memory_bound_time_share"]), percent(b["memory_bound_time_share"]), ""],
            ["FLOP/B", number(a["intensity"], 2), number(b["intensity"], 2), ""],
        ],
    )
    kinds = ", ".join(f"{count} {kind}" for kind, count in data["kernel_kinds"].items())
    sections = [_title("fuse", study.setup, None), summary, f"fused kernels: {kinds}"]
    if study.attention:
        sections.append(_attention(study))
    sections.append(_top_kernels(study, top))
    return "\n\n".join(sections) + "\n"


def _attention(study: FusionStudy) -> str:
    """One line per shape of attention (the layers of a model repeat it), with the count."""
    header = [
        "attention (first Q·Kᵀ node)",
        "count",
        "S",
        "T",
        "B·H",
        "dh",
        "written Q·Kᵀ FLOP/B",
        "bound",
        "written bytes",
        "fused bytes",
        "fused FLOP/B",
        "matmuls only",
        "ridge",
        "bound",
    ]
    rows: dict[tuple, list[Any]] = {}  # cells: [name, count]
    for row in study.attention:
        qk, k = row.scores_node, row.kernel
        cost, place = kernel_figures(k)
        cells = [
            str(row.queries),
            str(row.keys),
            str(row.heads),
            str(row.head_size),
            number(qk.placement.intensity, 1),
            qk.bound,
            si(row.pattern_bytes, "B"),
            si(cost.bytes, "B"),
            number(place.intensity, 1),
            number(row.matmul_intensity, 1),
            number(place.ridge),
            k.bound,
        ]
        entry = rows.setdefault(tuple(cells), [row.name, 0])
        entry[1] += 1
    table = [[name, str(count), *cells] for cells, (name, count) in rows.items()]
    return (
        f"attention: {len(study.attention)} decomposed patterns. As written: Q·Kᵀ reads Q and K and writes the S×T "
        "scores. Fused: one FlashAttention-style kernel\nreads Q, K, V once and writes O. 'matmuls only' counts "
        "the two matmuls' FLOPs (the lesson's S·T/(S+T) in fp16); 'fused FLOP/B' adds scale, mask and softmax.\n"
        + grid(header, table)
    )


def _top_kernels(study: FusionStudy, top: int) -> str:
    total = study.fused.totals.time_s or 1.0
    kernels = sorted((k for k in study.fused.nodes if k.time_s is not None), key=lambda k: -(k.time_s or 0.0))[:top]
    rows = []
    for k in kernels:
        cost, place = kernel_figures(k)
        rows.append(
            [
                k.name,
                k.op_type,
                k.kind,
                si(cost.bytes, "B"),
                number(place.intensity, 1),
                k.bound,
                duration(place.time_s),
                percent(place.time_s / total),
            ]
        )
    header = ["kernel", "ops", "kind", "bytes", "FLOP/B", "bound", "time", "share"]
    return f"top {len(rows)} fused kernels by time\n" + grid(header, rows)


def _title(study: str, setup: dict, view: str | None, columns: tuple[str, str] | None = None) -> str:
    """The study's first line. `columns`: the columns that follow the view, and those that are the
    deployed view's whatever the view, said apart where the view is another (the header never
    contradicts a footnote)."""
    dims = ", ".join(f"{k}={v}" for k, v in setup["dims"].items()) or "none"
    hw = setup["hardware"] if isinstance(setup["hardware"], str) else ",".join(setup["hardware"])
    parts = [f"{study}  {setup['path'] or '<in-memory>'}", f"hw {hw}", f"dims {dims}"]
    if setup.get("precision"):
        parts.append(f"costed as {setup['precision']}")
    if setup.get("nonzero_fraction") is not None:
        parts.append(f"assumed: NonZero/Compress select {setup['nonzero_fraction']:.4g} of their candidates")
    if view:
        what = TIMES.get(view, "")
        if view != "deployed" and columns and view in VIEW_TIMES:
            what = f"{columns[0]}: {VIEW_TIMES[view]}; {columns[1]}: the deployed kernels"
        if view == "deployed" and setup.get("kv_cache"):
            what += f", KV cache {setup['kv_cache']}"
        parts.append(f"{view} view ({what})" if what else f"{view} view")
    return "  ·  ".join(parts)


VIEW_TIMES = {
    "written": "every node its own kernel, as written",
    "deployed": "deployed bounds, the floor no runtime beats",
}
TIMES = {view: f"times: {what}" for view, what in VIEW_TIMES.items()}
"""What the times of a view are: every printed time says so."""


def _work_note(result: SweepResult) -> str:
    unit = result.points[0].work.unit if result.points else "runs"
    return {
        "tokens": "tokens = elements of the token-id input (decode: batch·1; prefill: batch·sequence)",
        "images": "images = the image input's batch",
    }.get(unit, "one per run")


def _crossing(x, limit, show) -> str:
    if x is not None:
        return f"{x.__ceil__()} (exact crossing {float(x):.2f})"
    return "never" + ("" if limit is None else f" (tends to {show(limit)} as it grows)")


def grid(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns padded to their widest cell; the first column left-aligned, numbers right-aligned."""
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    numeric = [i > 0 and all(_numeric(row[i]) for row in rows) for i in range(len(header))]

    def line(cells):
        return "  ".join(
            c.rjust(w) if n else c.ljust(w) for c, w, n in zip(cells, widths, numeric, strict=False)
        ).rstrip()

    return "\n".join([line(header), "  ".join("-" * w for w in widths), *(line(r) for r in rows)])


def _numeric(cell: str) -> bool:
    return cell[:1].isdigit() or cell[:1] in "-+?" or cell in ("never", "same", "")


def fit_text(fit, dim: str, kv_cache: str | None, per: str = "") -> str:
    """The largest value of `dim` that fits, as every study prints it (costs/capacity.py): the
    budget, the answer, and the footprint analysed there and one above."""
    budget = fit.budget
    head = f"the largest {dim} that fits {si(float(budget.usable), 'B')}{per} ({percent(budget.utilization)} of {si(budget.capacity, 'B')})"
    if fit.largest is None:
        return (
            f"{head} = none ({'the footprint does not grow with it' if fit.per_unit <= 0 else f'{dim} 1 does not fit'})"
        )
    cache = f", KV cache {kv_cache}" if kv_cache else ""
    return (f"{head} = {fit.largest} (deployed footprint{cache}: {si(float(fit.per_unit), 'B')} per {dim} on {si(float(fit.intercept), 'B')}; "
            f"{si(float(fit.bytes_at_largest), 'B')} at {fit.largest}, {si(float(fit.bytes_above_largest), 'B')} at {fit.largest + 1})")  # fmt: skip
