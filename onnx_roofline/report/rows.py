"""The report as rows: one plain dict per node (`Report.rows()`), a pandas DataFrame of them
(`Report.to_dataframe()`, where pandas is installed: it is not a dependency), the one-line
`repr(report)`, and the per-node figures the JSON and CSV carry beside the cost: the node's
module, its share of the model's time, and the FLOP/s it can attain on the roofline."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from onnx_roofline.report.model import NodeResult, Report

ROW_KEYS = (
    "index", "name", "op_type", "domain", "module", "status", "output_shape", "flops", "transcendentals", "dequantize_flops",
    "bytes_read", "bytes_written", "bytes", "parameters", "intensity", "unit", "dtype", "peak", "ridge", "attainable_flops",
    "bound", "time_s", "time_share", "constant_foldable", "at_most", "reason",
)  # fmt: skip
"""The keys of each `Report.rows()` dict, in order (the DataFrame's columns)."""


def attainable_flops(node: NodeResult, bandwidth: float) -> float | None:
    """min(peak, intensity × bandwidth): the FLOP/s the roofline lets this node reach (its peak
    when it moves no bytes); None when it is not costed."""
    if node.placement is None or node.peak is None or node.cost is None:
        return None
    intensity = node.placement.intensity
    return node.peak if intensity is None else min(node.peak, intensity * bandwidth)


def roofline_extras(node: NodeResult, model_time: float, bandwidth: float) -> dict[str, Any]:
    """`time_share` and `attainable_flops`: what JSON and CSV add to a node's figures, after its
    module. They read only what NodeResult.figures_key holds."""
    time_s = node.time_s
    return {
        "time_share": time_s / model_time if time_s is not None and model_time else None,
        "attainable_flops": attainable_flops(node, bandwidth),
    }


def rows(report: Report) -> list[dict[str, Any]]:
    """One flat dict per node, ROW_KEYS in order: plain ints, floats, strings and None (unknown
    is None, never 0), ready for csv.DictWriter, a DataFrame or a list comprehension."""
    from onnx_roofline.report.breakdown import module_path

    model_time, bandwidth = report.totals.time_s, report.hardware.memory_bandwidth
    table = []
    for node in report.nodes:
        cost, place = node.cost, node.placement
        output = node.outputs[0] if node.outputs else None
        shape = output.shape if output is not None else None
        row = {
            "index": node.index, "name": node.name, "op_type": node.op_type, "domain": node.domain,
            "module": module_path(node), **roofline_extras(node, model_time, bandwidth), "status": node.status,
            "output_shape": "x".join(map(str, shape)) if shape is not None else None,
            "flops": cost.flops if cost else None, "transcendentals": cost.transcendentals if cost else None,
            "dequantize_flops": cost.dequantize_flops if cost else None,
            "bytes_read": cost.bytes_read if cost else None, "bytes_written": cost.bytes_written if cost else None,
            "bytes": cost.bytes if cost else None, "parameters": node.parameters,
            "intensity": place.intensity if place else None, "unit": node.unit, "dtype": node.dtype, "peak": node.peak,
            "ridge": place.ridge if place else None, "bound": node.bound, "time_s": node.time_s,
            "constant_foldable": node.constant_foldable, "at_most": node.at_most, "reason": node.reason,
        }  # fmt: skip
        table.append({key: row[key] for key in ROW_KEYS})
    return table


def to_dataframe(report: Report):
    """`rows()` as a pandas DataFrame, indexed by node index. pandas is optional: without it,
    an ImportError says to install it or use `rows()`."""
    try:
        import pandas
    except ImportError:
        raise ImportError(
            "Report.to_dataframe() needs pandas (pip install pandas); Report.rows() gives the same rows as plain dicts"
        ) from None
    return pandas.DataFrame.from_records(rows(report), columns=list(ROW_KEYS), index="index")


def report_repr(report: Report) -> str:
    """`<Report gpt2_decode_fp16.onnx on h100, written: 648 nodes, 271.72 MFLOP, 499.83 MB, 149.20 µs lower bound, 100.0% memory-bound>`."""
    import os

    from onnx_roofline.report.units import duration, percent, si

    totals = report.totals
    name = os.path.basename(report.model.path) if report.model.path else "<in-memory>"
    from onnx_roofline.report.findings import WHAT_TIME_IS

    what = WHAT_TIME_IS[report.view]
    uncosted = f", {report.uncosted.count} uncosted" if report.uncosted.count else ""
    return (f"<Report {name} on {report.hardware.key}, {report.view}: {len(report.nodes)} nodes{uncosted}, {si(totals.flops, 'FLOP')}, "
            f"{si(totals.bytes, 'B')}, {duration(totals.time_s)} {what}, {percent(totals.memory_bound_time_share)} memory-bound>")  # fmt: skip


def node_repr(node: NodeResult) -> str:
    """`<NodeResult 5 /h.0/attn/MatMul (MatMul): 2.36 MFLOP, 4.72 MB, memory-bound, 1.41 µs>`; an
    uncosted node gives its status instead of figures."""
    from onnx_roofline.model.status import OK
    from onnx_roofline.report.units import duration, si

    head = f"<NodeResult {node.index} {node.name} ({node.op_type})"
    if node.status != OK or node.cost is None:
        return f"{head}: {node.status}>"
    return f"{head}: {si(node.cost.flops, 'FLOP')}, {si(node.cost.bytes, 'B')}, {node.bound}-bound, {duration(node.time_s)}>"
