"""Many models at once: `onnx-roofline a.onnx b.onnx …` or `onnx-roofline models/` prints one row
per model (nodes, uncosted, FLOPs, bytes, time, memory-bound share), each analyzed as the single
command would (same options, the same defaults for unbound dims), in parallel with `-j N`.

A model that cannot be analyzed gets its one-line error in its row; the command then exits 2."""

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
from onnx_roofline.report.units import duration, percent, si


@dataclass(frozen=True)
class ModelRow:
    model: str
    nodes: int | None = None
    uncosted: int | None = None
    flops: int | None = None
    bytes: int | None = None
    time_s: float | None = None
    memory_bound_time_share: float | None = None
    defaulted_dims: tuple[str, ...] = ()
    error: str | None = None
    experts: str = ""  # an MoE's layers, experts, top-k, shared, parameters total and active (report/experts.py)


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


def summarize(paths: list[str], options: argparse.Namespace, jobs: int, progress: Callable[[int, int, str], None] | None = None) -> list[ModelRow]:
    """A row per model, in the order given; `jobs` processes analyze them (1: this process).
    `progress(done, total, model)` is told as each model is done."""
    tasks = [argparse.Namespace(**{**vars(options), "model": path, "quiet": True, "verbose": False}) for path in paths]
    if jobs <= 1 or len(tasks) == 1:
        rows = (_row(task) for task in tasks)
        return [_told(progress, done, len(tasks), row) for done, row in enumerate(rows, 1)]
    with ProcessPoolExecutor(max_workers=min(jobs, len(tasks))) as pool:
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
    totals = report.totals
    return ModelRow(
        options.model, len(report.nodes), report.uncosted.count, totals.flops, totals.bytes, totals.time_s,
        totals.memory_bound_time_share, tuple(report.model.defaulted_dims),
        experts="" if report.model.experts is None else report.model.experts.message,
    )


def render(rows: list[ModelRow], fmt: str) -> str:
    if fmt == "json":
        return json.dumps({"schema_version": 1, "kind": "summary", "models": [asdict(row) for row in rows]}, indent=2, allow_nan=False) + "\n"
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=list(ModelRow.__dataclass_fields__), lineterminator="\n")
        writer.writeheader()
        writer.writerows({**asdict(row), "defaulted_dims": " ".join(row.defaulted_dims)} for row in rows)
        return out.getvalue()
    header = ("model", "nodes", "uncosted", "flops", "bytes", "time (lower bound)", "memory-bound", "note")
    cells = [header] + [_cells(row) for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) if i in (0, 7) else cell.rjust(w) for i, (cell, w) in enumerate(zip(line, widths))).rstrip() for line in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines) + "\n"


def _cells(row: ModelRow) -> tuple[str, ...]:
    if row.error:
        return (row.model, "", "", "", "", "", "", f"error: {row.error}")
    note = "; ".join(part for part in (row.experts, f"defaults: {', '.join(row.defaulted_dims)}" if row.defaulted_dims else "") if part)
    if row.uncosted:
        note = f"UNCOSTED {row.uncosted}: totals partial" + (f"; {note}" if note else "")
    return (row.model, f"{row.nodes:,}", f"{row.uncosted:,}", si(row.flops, "FLOP"), si(row.bytes, "B"), duration(row.time_s),
            percent(row.memory_bound_time_share), note)  # fmt: skip
