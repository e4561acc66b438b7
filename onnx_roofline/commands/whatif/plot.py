"""Pictures of the what-if studies (PNG or SVG by the file's suffix); matplotlib is imported only here."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, cast

from onnx_roofline.commands.whatif.compare import CompareResult
from onnx_roofline.commands.whatif.context import ContextResult
from onnx_roofline.commands.whatif.critical import CriticalResult
from onnx_roofline.commands.whatif.fuse_report import FusionStudy, kernel_figures
from onnx_roofline.commands.whatif.sweep import SweepResult
from onnx_roofline.report.output import write_bytes
from onnx_roofline.report.plot import wrap_to_width

if TYPE_CHECKING:
    from onnx_roofline.report.costed import CostedNode

COINCIDE = 0.01  # curves closer than this (relative, everywhere on the plot) are one curve to the eye


def save(figure, destination: str, protect: Sequence[str] = ()) -> None:
    """Render and write atomically; the suffix picks the format."""
    import matplotlib.pyplot as plt

    suffix = Path(destination).suffix.lower()
    buffer = io.BytesIO()
    figure.savefig(buffer, format=suffix[1:], dpi=130, bbox_inches="tight")
    plt.close(figure)
    write_bytes(buffer.getvalue(), destination, protect)


def _figure(columns: int, rows: int = 1, title: str = "", size: tuple[float, float] | None = None):
    """Constrained layout makes room for the title, wrapped to the figure's width, and for legends
    outside the axes."""
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(
        rows, columns, figsize=size or (5.2 * columns, 3.9 * rows), squeeze=False, layout="constrained"
    )
    wrap_to_width(figure.suptitle(title, fontsize=11), 0.95 * figure.bbox.width)
    return figure, [ax for row in axes for ax in row]


def _subtitle(setup: dict, view: str | None) -> str:
    name = Path(setup["path"]).name if setup.get("path") else "model"
    hw = setup["hardware"] if isinstance(setup["hardware"], str) else ", ".join(setup["hardware"])
    dims = ", ".join(f"{k}={v}" for k, v in setup["dims"].items())
    return f"{name} · {hw}" + (f" · {dims}" if dims else "") + (f" · {view} view" if view else "")


def sweep_figure(result: SweepResult):
    """Latency, throughput, compute-bound share and intensity against the first multi-valued axis;
    one line per combination of the other axes."""
    axes_names = list(result.axes)
    x_name = next((a for a in axes_names if len(result.axes[a]) > 1), axes_names[0])
    others = [a for a in axes_names if a != x_name]
    series: dict[str, list] = {}
    for p in result.points:
        series.setdefault(", ".join(f"{a}={p.dims[a]}" for a in others), []).append(p)
    unit = result.points[0].work.unit
    figure, (lat, thr, share, inten) = _figure(2, 2, f"sweep over {x_name} — {_subtitle(result.setup, result.view)}")
    for label, points in series.items():
        xs = [p.dims[x_name] for p in points]
        lat.plot(xs, [p.latency_s * 1e3 for p in points], "o-", label=label or None)
        thr.plot(xs, [p.throughput for p in points], "o-", label=label or None)
        share.plot(xs, [100 * (p.compute_share or 0) for p in points], "o-", label=label or None)
        inten.plot(xs, [p.intensity for p in points], "o-", label=label or None)
    inten.axhline(result.ridge, color="crimson", ls="--", label=f"ridge {result.ridge:.0f} FLOP/B")
    for ax, ylabel, logy in (
        (lat, f"latency per run, the {result.view} bound (ms)", True),
        (thr, f"{unit}/s", False),
        (share, "compute-bound share of predicted time (%)", False),
        (inten, "total intensity (FLOP/B)", True),
    ):
        ax.set_xscale("log", base=2)
        if logy:
            ax.set_yscale("log")
        ax.set_xlabel(x_name)
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
    share.set_ylim(-2, 102)
    for ax in (inten, *((lat,) if len(series) > 1 else ())):
        ax.legend(fontsize=8)
    return figure


def critical_figure(result: CriticalResult):
    """Each kind's intensity as the dim grows (the fitted lines' ratio), its ridge and its crossing."""
    import numpy as np

    crossings = [float(k.crossing) for k in result.kinds if k.crossing is not None]
    top = 2 ** int(np.ceil(np.log2(max([4096, *(2 * c for c in crossings)]))))
    xs = np.unique(np.round(np.logspace(0, np.log2(top), 200, base=2)))
    figure, (ax,) = _figure(1, 1, f"critical {result.dim} — {_subtitle(result.setup, result.view)}", size=(8.5, 5.2))
    for ys, kinds in _coinciding(result.kinds, xs):
        line = ax.plot(
            xs, ys, label="\n= ".join(f"{k.op_type} {k.signature} ×{len(k.kernels)}: {_when(k)}" for k in kinds)
        )[0]
        for k in (k for k in kinds if k.crossing is not None):
            ax.plot([float(k.crossing)], [k.intensity(k.crossing)], "o", color=line.get_color())
    ax.axhline(result.model_ridge, color="crimson", ls="--", label=f"ridge {result.model_ridge:.1f} FLOP/B")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(result.dim)
    ax.set_ylabel("arithmetic intensity (FLOP/B)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(
        fontsize=7, loc="upper left", bbox_to_anchor=(0, -0.14)
    )  # below the axes: long signatures would cover the curves
    return figure


def _when(kind) -> str:
    return "never" if kind.critical is None else f"compute-bound from {kind.critical}"


def _coinciding(kinds, xs) -> list:
    """(intensities, kinds) per curve the eye can tell apart: kinds whose curves stay within
    COINCIDE of each other are drawn once, so no curve hides behind another."""
    import numpy as np

    curves: list[tuple] = []
    for kind in kinds:
        ys = np.array([float(kind.intensity(x)) for x in xs])
        same = next((c for c in curves if np.allclose(ys, c[0], rtol=COINCIDE, atol=0)), None)
        if same:
            same[1].append(kind)
        else:
            curves.append((ys, [kind]))
    return curves


def compare_figure(result: CompareResult):
    """Predicted latency per accelerator, split into compute-bound and memory-bound time."""
    figure, (ax,) = _figure(
        1, 1, f"compare — {_subtitle(result.setup, result.view)}", size=(8.5, 2.2 + 0.7 * len(result.rows))
    )
    names = [f"{r.hardware.key} (ridge {r.ridge:.0f})" for r in result.rows]
    memory = [r.latency_s * 1e3 * (r.memory_share or 0) for r in result.rows]
    compute = [r.latency_s * 1e3 - m for r, m in zip(result.rows, memory, strict=False)]
    ax.barh(names, memory, color="tab:orange", label="memory-bound kernels")
    ax.barh(names, compute, left=memory, color="tab:blue", label="compute-bound kernels")
    notes = [
        ax.annotate(
            f" {r.latency_s * 1e3:.3g} ms · top: {r.top_op} ({100 * (r.top_share or 0):.0f}%)",
            (r.latency_s * 1e3, i),
            va="center",
            fontsize=8,
        )
        for i, r in enumerate(result.rows)
    ]
    ax.invert_yaxis()
    ax.set_xlabel("predicted latency per run (ms)")
    figure.legend(fontsize=8, loc="outside lower center", ncols=2)  # not over a bar's note
    _fit_notes(ax, notes, [r.latency_s * 1e3 for r in result.rows])
    return figure


def _fit_notes(ax, notes, ends: list[float]) -> None:
    """An x range from 0 wide enough that each note, written after its bar's end, ends inside the
    axes: the bar takes end/high of the width W, the note its own w, so high ≥ end·W / (W − w)."""
    figure = ax.figure
    figure.canvas.draw()  # the layout fixes the axes' width
    renderer = figure.canvas.get_renderer()
    width = ax.get_window_extent(renderer).width
    spare = [width - n.get_window_extent(renderer).width - 6 for n in notes]
    ax.set_xlim(0, max(end * width / max(room, width / 4) for end, room in zip(ends, spare, strict=False)))


def fusion_figure(study: FusionStudy):
    """Left: a roofline with the nodes as written and the fused kernels, attention's written nodes and
    fused kernel marked. Right: bytes per kind of fused kernel, as written and fused."""
    import numpy as np

    fused = study.fused
    main = max((k for k in fused.nodes if k.cost), key=lambda k: kernel_figures(k)[0].flops)
    bandwidth, ridge = study.report.hardware.memory_bandwidth, kernel_figures(main)[1].ridge
    figure, (ax, bars) = _figure(2, 1, f"written vs fused — {_subtitle(study.setup, None)}", size=(13, 5.2))
    xs = np.logspace(-2, 4.5, 200)
    roof = np.minimum(ridge * bandwidth, xs * bandwidth) / 1e12
    ax.plot(xs, roof, color="black", lw=1.2, label=f"roofline (ridge {ridge:.0f})")
    attention_nodes = {i for planned, _ in fused.attention() for i in planned.members}

    def attained(row) -> float:
        return row.cost.flops / row.time_s / 1e12

    def scatter(rows, **style):
        pts = [(r.placement.intensity, attained(r)) for r in rows if r.placement and r.placement.intensity and r.time_s]
        if pts:
            ax.scatter(*zip(*pts, strict=False), **style)

    scatter(
        [n for n in study.report.nodes if n.index not in attention_nodes], s=12, color="0.6", label="nodes as written"
    )
    scatter(
        [k for k in fused.nodes if k.kind != "attention"], s=22, color="tab:blue", marker="s", label="fused kernels"
    )
    scatter(
        [study.report.nodes[i] for i in attention_nodes],
        s=30,
        color="tab:orange",
        marker="x",
        label="attention as written: Q·Kᵀ, softmax, P·V, …",
    )
    scatter(
        [a.kernel for a in study.attention], s=120, color="crimson", marker="*", label="attention fused: one kernel"
    )
    for a in study.attention[:1]:
        qk = a.scores_node
        shown = (
            (qk, qk.placement.intensity, "Q·Kᵀ", "tab:orange", -14),
            (a.kernel, kernel_figures(a.kernel)[1].intensity, "fused", "crimson", 6),
        )
        for row, intensity, text, color, dy in shown:
            ax.annotate(
                f"{text} {intensity:.3g} FLOP/B",
                (intensity, attained(row)),
                textcoords="offset points",
                xytext=(6, dy),
                fontsize=8,
                color=color,
            )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/B)")
    ax.set_ylabel("FLOP/s attained at the bound (TFLOP/s)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")

    kinds: dict[str, list[float]] = {}
    for planned, kernel in zip(fused.plan.groups, fused.nodes, strict=False):
        if kernel.cost is not None:
            before = sum(
                cast("CostedNode", study.report.nodes[i]).cost.bytes for i in planned.members
            )  # a costed kernel's members are
            entry = kinds.setdefault(planned.kind, [0.0, 0.0])
            entry[0] += before / 1e9
            entry[1] += kernel.cost.bytes / 1e9
    names = sorted(kinds, key=lambda k: -kinds[k][0])
    ys = np.arange(len(names))
    bars.barh(ys - 0.2, [kinds[k][0] for k in names], height=0.4, color="0.6", label="as written")
    bars.barh(ys + 0.2, [kinds[k][1] for k in names], height=0.4, color="tab:blue", label="fused (runtime estimate)")
    bars.set_yticks(
        ys,
        [
            {
                "single": "ops left alone (Transpose, LayerNorm, …)",
                "epilogue": "matmul/conv + epilogue",
                "elementwise": "elementwise chains",
                "attention": "attention",
            }.get(k, k)
            for k in names
        ],
    )
    bars.invert_yaxis()
    bars.set_xlabel("bytes moved (GB)")
    bars.legend(fontsize=8, loc="lower right")
    bars.grid(True, axis="x", alpha=0.3)
    return figure


def context_figure(result: ContextResult):
    """Per-step latency and the KV cache's share of bytes against the past length."""
    points = result.sweep.points
    xs = [p.dims[result.dim] for p in points]
    figure, (lat, kv) = _figure(2, 1, f"decode over {result.dim} — {_subtitle(result.sweep.setup, result.sweep.view)}")
    lat.plot(xs, [p.latency_s * 1e3 for p in points], "o-")
    lat.set_ylabel("predicted latency per decode step (ms)")
    kv.plot(xs, [100 * (result.kv_share(i) or 0) for i in range(len(points))], "o-", color="tab:purple")
    kv.set_ylabel("KV-cache share of bytes (%)")
    kv.set_ylim(0, 100)
    for ax in (lat, kv):
        ax.set_xscale("log", base=2)
        ax.set_xlabel(result.dim)
        ax.grid(True, which="both", alpha=0.3)
    return figure
