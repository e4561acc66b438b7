"""Machine-readable renderings: JSON (the schema_version 1 contract) and CSV (one row per node)."""

from __future__ import annotations

import csv
import io
import json

from onnx_roofline.report.model import Report

CSV_COLUMNS = (
    "index", "name", "op_type", "domain", "status", "flops", "transcendentals", "dequantize_flops", "bytes_read",
    "bytes_written", "bytes", "parameters", "intensity", "unit", "dtype", "ridge", "bound", "time_s", "reason",
)


def render_json(report: Report) -> str:
    """Deterministic: keys in a fixed order, no timestamps."""
    return json.dumps(report.to_dict(), indent=2, allow_nan=False) + "\n"


def render_csv(report: Report) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=[*CSV_COLUMNS, "output_shape"], extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for node in report.to_dict()["nodes"]:
        output = node["outputs"][0] if node["outputs"] else None
        shape = output["shape"] if output else None
        writer.writerow({**node, "output_shape": "x".join(map(str, shape)) if shape is not None else ""})
    return buffer.getvalue()
