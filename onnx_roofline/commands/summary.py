"""Many models at once: `onnx-roofline a.onnx b.onnx …` or `onnx-roofline models/` prints one row
per model (nodes, uncosted, FLOPs, bytes, the floor and the predicted time, the as-written sum,
memory-bound share), each analyzed as the single
command would (same options, the same defaults for unbound dims), in parallel with `-j N`.

A model that cannot be analyzed gets its one-line error in its row; the command then exits 2.
The workers end with the command, however it ends, and run no child beside themselves (isolation.pool_worker)."""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from onnx_roofline.errors import RooflineError, one_line
from onnx_roofline.model.isolation import pool_worker
from onnx_roofline.report.units import duration, percent, si


@dataclass(frozen=True)
class ModelRow:
    model: str
    nodes: int | None = None
    uncosted: int | None = None
    flops: int | None = None
    bytes: int | None = None
    time_s: float | None = None  # as written: every node its own kernel
    memory_bound_time_share: float | None = None
    defaulted_dims: tuple[str, ...] = ()
    error: str | None = None
    experts: str = ""  # an MoE's layers, experts, top-k, shared, parameters total and active (report/experts.py)
    floor_time_s: float | None = (
        None  # the deployed bound, a floor no runtime beats (None past the default table's size)
    )
    predicted_time_s: float | None = None  # the deployed kernels predicted (views/prediction.py)


def model_paths(arguments: list[str]) -> list[str]:
    """The models the arguments name: files as given, a folder's `*.onnx` files (sorted, not
    recursive). A folder without any is an error, as a directory is where one model is expected."""
    paths: list[str] = []
    for argument in arguments:
        if os.path.isdir(argument):
            found = sorted(str(p) for p in Path(argument).glob("*.onnx") if p.is_file())
            if not found:
                raise RooflineError(f"not a regular file (a directory), and no .onnx file in it: {argument}")
            paths += found
        else:
            paths.append(argument)
    return paths


def summarize(
    paths: list[str], options: argparse.Namespace, jobs: int, progress: Callable[[int, int, str], None] | None = None
) -> list[ModelRow]:
    """A row per model, in the order given; `jobs` processes analyze them (1: this process).
    `progress(done, total, model)` is told as each model is done."""
    tasks = [argparse.Namespace(**{**vars(options), "model": path, "quiet": True, "verbose": False}) for path in paths]
    if jobs <= 1 or len(tasks) == 1:
        rows = (_row(task) for task in tasks)
        return [_told(progress, done, len(tasks), row) for done, row in enumerate(rows, 1)]
    with ProcessPoolExecutor(
        max_workers=min(jobs, len(tasks)), initializer=pool_worker, initargs=(os.getpid(),)
    ) as pool:
        return [_told(progress, done, len(tasks), row) for done, row in enumerate(pool.map(_row, tasks), 1)]


def _told(progress: Callable[[int, int, str], None] | None, done: int, total: int, row: ModelRow) -> ModelRow:
    if progress is not None:
        progress(done, total, row.model)
    return row


def _row(options: argparse.Namespace) -> ModelRow:
    from onnx_roofline.commands.arguments import analyze_from_options, refuse_if_nothing_costed

    try:
        report = analyze_from_options(options, default_dims=True)
        refuse_if_nothing_costed(report)  # nothing costed is an error row, as in the single command
    except RooflineError as exc:
        return ModelRow(options.model, error=one_line(str(exc)))
    from onnx_roofline.commands.arguments import other_view
    from onnx_roofline.report.findings import headline

    written = report.written if report.view == "deployed" else report
    head, totals = headline(report, other_view(report, options)), written.totals
    return ModelRow(
        options.model,
        len(written.nodes),
        written.uncosted.count,
        totals.flops,
        totals.bytes,
        totals.time_s,
        totals.memory_bound_time_share,
        tuple(written.model.defaulted_dims),
        experts="" if written.model.experts is None else written.model.experts.message,
        floor_time_s=head.floor_s,
        predicted_time_s=head.predicted_s,
    )


def render(rows: list[ModelRow], fmt: str) -> str:
    if fmt == "json":
        return (
            json.dumps(
                {"schema_version": 1, "kind": "summary", "models": [asdict(row) for row in rows]},
                indent=2,
                allow_nan=False,
            )
            + "\n"
        )
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=list(ModelRow.__dataclass_fields__), lineterminator="\n")
        writer.writeheader()
        writer.writerows({**asdict(row), "defaulted_dims": " ".join(row.defaulted_dims)} for row in rows)
        return out.getvalue()
    header = (
        "model",
        "nodes",
        "uncosted",
        "flops",
        "bytes",
        "floor (deployed bound)",
        "predicted",
        "every node its own kernel",
        "memory-bound",
        "note",
    )
    cells = [header] + [_cells(row) for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(header))]
    lines = [
        "  ".join(
            cell.ljust(w) if i in (0, 9) else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(line, widths, strict=False))
        ).rstrip()
        for line in cells
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines) + "\n"


def _cells(row: ModelRow) -> tuple[str, ...]:
    if row.error:
        return (row.model, "", "", "", "", "", "", "", "", f"error: {row.error}")
    note = "; ".join(
        part
        for part in (row.experts, f"defaults: {', '.join(row.defaulted_dims)}" if row.defaulted_dims else "")
        if part
    )
    if row.uncosted:
        note = f"UNCOSTED {row.uncosted}: totals partial" + (f"; {note}" if note else "")
    return (row.model, f"{row.nodes:,}", f"{row.uncosted:,}", si(row.flops, "FLOP"), si(row.bytes, "B"), duration(row.floor_time_s),
            duration(row.predicted_time_s), duration(row.time_s), percent(row.memory_bound_time_share), note)  # fmt: skip
