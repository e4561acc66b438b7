"""The serving study as a table: one block of rows per tensor-parallel degree, then the limits
(largest batch that fits, compute-bound batch) and every assumption the figures rest on."""

from __future__ import annotations

from onnx_roofline.commands.whatif.render import TIMES, _title, fit_text, grid
from onnx_roofline.commands.whatif.serve import ServeResult
from onnx_roofline.report.units import duration, percent, si

HEADER = [
    "TP",
    "batch",
    "step",
    "tokens/s",
    "predicted step",
    "predicted tokens/s",
    "per GPU",
    "TTFT",
    "predicted TTFT",
    "comm",
    "all-reduce",
    "compute-bound",
    "memory/GPU",
    "fits",
]


def render_serve(result: ServeResult) -> str:
    rows, limits = [], []
    for degree in result.degrees:
        if degree.refusal:
            limits.append(f"TP {degree.devices}: not costed: {degree.refusal}")
            continue
        for p in degree.points:
            run = p.decode
            rows.append([str(degree.devices), str(p.batch) + (" (limit)" if p.limit else ""), duration(run.time_s), si(p.tokens_per_s, ""),
                         duration(p.predicted_s), si(p.predicted_tokens_per_s, ""),
                         si(p.tokens_per_s / run.devices, ""), "-" if p.prefill is None else duration(p.prefill.time_s),
                         "-" if p.predicted_ttft_s is None else duration(p.predicted_ttft_s),
                         duration(run.communication_s) if run.devices > 1 else "-", " + ".join(run.algorithms()) or "-",
                         percent(run.compute_share), si(run.memory_bytes, "B"),
                         {True: "yes", False: "no", None: "?"}[p.fits]])  # fmt: skip
        crossing = degree.compute_crossing
        replicas = degree.points[0].decode.kv_replicas if degree.points else 1
        if replicas > 1:
            limits.append(
                f"TP {degree.devices}: one KV head per GPU, each of the {degree.devices // replicas} replicated on {replicas} GPUs"
            )
        limits.append(
            f"TP {degree.devices}: " + (fit_text(degree.memory_fit, "batch", result.setup.get("kv_cache"), " per GPU") if degree.memory_fit is not None and degree.memory_fit.budget.capacity
                                        else "no memory capacity given: what fits is not judged")
            + ("; compute-bound kernels never take half the step, at any batch" if crossing is None
               else f"; compute-bound kernels take half the step from batch {crossing.__ceil__()} (exact {float(crossing):.2f})")
        )  # fmt: skip
    plan = result.plan or {}
    found = (f"{plan['layers']['attention']} attention and {plan['layers']['mlp']} MLP blocks, hidden {plan['hidden']}, "
             f"{plan['heads']} heads ({plan['kv_heads']} KV), embedding {'split' if plan['embedding'] else 'not found'}, "
             f"lm_head {'split' if plan['lm_head'] else 'not found'}") if plan else None  # fmt: skip
    title = (
        _title("serve", result.setup, None)
        + f"  ·  context {result.context}"
        + ("" if result.prompt is None else f"  ·  prompt {result.prompt}")
    )
    lines = [
        title
        + f"  ·  deployed view ({TIMES['deployed']}"
        + (f", KV cache {result.setup['kv_cache']})" if result.setup.get("kv_cache") else ")"),
        grid(HEADER, rows) if rows else "(no degree costed)",
        *limits,
        *(f"blocks: {found}",) * bool(found),
        *(f"replicated: {len(plan['replicated_projections'])} projection(s) in no block run whole on every device",)
        * bool(plan.get("replicated_projections")),
        *(f"assumed: {a}" for a in result.assumptions),
        "step = one decode step per device (kernels + collectives), the bound: tokens/s = batch / step, a rate no engine exceeds; "
        "predicted = the kernels at the hardware's achievable fractions, launched from a CUDA graph (docs/cost-model.md#predicted-time); per GPU = tokens/s / TP; "
        "TTFT = prefill of the prompt for the whole batch"
        + ("" if result.prompt is not None else " (give --prompt N --prefill MODEL)"),
        f"{sum(len(d.points) for d in result.degrees)} points in {result.elapsed_s:.2f} s",
    ]
    return "\n".join(lines) + "\n"
