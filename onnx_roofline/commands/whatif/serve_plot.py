"""Throughput against per-token latency, the chart serving benchmarks draw: one curve per
tensor-parallel degree, batch growing along it, the largest batch that fits marked and the
batches past it drawn hollow. Throughput is per GPU (the group's divided by its GPUs), so that TP 4
is not drawn better for using four times the GPUs (issue 41)."""

from __future__ import annotations

from typing import cast

from onnx_roofline.commands.whatif.plot import _figure, _subtitle
from onnx_roofline.commands.whatif.serve import ServeResult


def serve_figure(result: ServeResult):
    figure, (ax,) = _figure(
        1, 1, f"serving, context {result.context} — {_subtitle(result.setup, 'deployed')}", size=(7.0, 4.8)
    )
    for row, degree in enumerate(d for d in result.degrees if d.points):
        points = degree.points
        xs = [p.decode.time_s * 1e3 for p in points]
        ys = [p.tokens_per_s / degree.devices for p in points]
        (line,) = ax.plot(xs, ys, "-", label=f"TP {degree.devices}")
        fitting = [i for i, p in enumerate(points) if p.fits is not False]
        over = [i for i, p in enumerate(points) if p.fits is False]
        ax.plot([xs[i] for i in fitting], [ys[i] for i in fitting], "o", color=line.get_color(), ms=4)
        ax.plot([xs[i] for i in over], [ys[i] for i in over], "o", mfc="none", color=line.get_color(), ms=4)
        predicted = [p for p in points if p.predicted_s is not None]  # the same figures as the table and the JSON
        ax.plot([p.predicted_s * 1e3 for p in predicted if p.predicted_s is not None],
                [cast(float, p.predicted_tokens_per_s) / degree.devices for p in predicted], "--", color=line.get_color(),  # set with predicted_s
                label=f"TP {degree.devices} predicted")  # fmt: skip
        limit = next((p for p in points if p.batch == degree.fits_up_to), None)
        if limit is not None:
            at = (limit.decode.time_s * 1e3, limit.tokens_per_s / degree.devices)
            ax.plot(*at, "X", color=line.get_color(), ms=10, mec="black")
            ax.annotate(
                f"fits up to {limit.batch}",
                at,
                textcoords="offset points",
                xytext=(-8, -14 - 11 * row),
                ha="right",
                fontsize=8,
                color=line.get_color(),
            )  # fmt: skip (per GPU, the limits meet: one line each)
    ax.plot([], [], "X", color="grey", mec="black", label="largest batch that fits")
    ax.plot([], [], "o", mfc="none", color="grey", label="does not fit")
    ax.plot([], [], "--", color="grey", label="predicted (dashed); bound (solid)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("per-token latency: one decode step (ms)")
    ax.set_ylabel("throughput per GPU (tokens/s ÷ GPUs in the group)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    return figure
