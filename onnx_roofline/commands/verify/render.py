"""The verification as text for the terminal and as one JSON object (schema_version 1)."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from onnx_roofline.commands.verify.attainment import AT_OR_ABOVE, BEATS, CACHE_RESIDENT, FUSED, TimingCheck
from onnx_roofline.commands.verify.compare import BOUNDS_ONLY, CHECKED, NOT_CHECKED, NOT_COSTED, NOT_OBSERVED
from onnx_roofline.commands.verify.pipeline import Verification
from onnx_roofline.model.conformance import refusal
from onnx_roofline.report.units import duration, percent, si

SCHEMA_VERSION = 1
CALIBRATED_SOURCE = "measured by onnx-roofline calibrate"


def to_dict(result: Verification) -> dict[str, Any]:
    report, comparison = result.report, result.comparison
    return {
        "schema_version": SCHEMA_VERSION,
        "model": report.model.to_dict(),
        "hardware": report.hardware.to_dict(),
        "runtime": _runtime(),
        "weights": {"loaded": result.weights_loaded, "synthesized": result.weights_synthesized},
        "attempts": None if result.attempts is None else result.attempts.to_dict(),
        "values": {
            "checked": comparison.values_checked,
            "partly_inferred": list(comparison.values_partly_inferred),
            "not_observed": list(comparison.values_unobserved),
        },
        "nodes": {
            "byte_checked": comparison.count(CHECKED),
            "bounds_only": comparison.count(BOUNDS_ONLY),
            "not_costed": comparison.count(NOT_COSTED),
            "not_observed": comparison.count(NOT_OBSERVED),
            "not_checked": comparison.count(NOT_CHECKED),
            "byte_basis": dict(sorted(_bases(result).items())),
        },
        "disagreements": [d.to_dict() for d in comparison.disagreements],
        "not_costed": [n.to_dict() for n in comparison.nodes if n.outcome in (NOT_COSTED, NOT_OBSERVED, NOT_CHECKED)],
        "bounds_only": [n.to_dict() for n in comparison.nodes if n.outcome == BOUNDS_ONLY],
        "timing": result.timing.to_dict() if result.timing is not None else None,
        "data_dependent": [size.to_dict() for size in result.sizes],
        "unchecked": [n.to_dict() for n in result.unchecked],
        "verdict": result.verdict,
    }


def render_json(result: Verification) -> str:
    return json.dumps(to_dict(result), indent=2) + "\n"


def render_text(result: Verification, limit: int = 50) -> str:
    report, comparison = result.report, result.comparison
    dims = " ".join(f"{k}={v}" for k, v in sorted(report.model.dims.items())) or "none"
    if result.verdict == "invalid":  # nothing was run
        return f"verify {report.model.path or '<in-memory model>'}  dims: {dims}  (not run)\nverdict: {_verdict_text(result)}\n"
    counts = _bases(result)  # each checked node's bytes read and bytes written, by what they follow
    bases = ", ".join(f"{count} {basis}" for basis, count in sorted(counts.items(), key=lambda kv: -kv[1]))
    lines = [
        f"verify {report.model.path or '<in-memory model>'}  dims: {dims}  ({_runtime()}, values from a run with optimizations off)",
        f"weights: {result.weights_loaded} loaded, {result.weights_synthesized} synthesized (external data absent)",
        f"values:  {comparison.values_checked} node outputs checked (shape + dtype); "
        f"{len(comparison.values_partly_inferred)} partly inferred; {len(comparison.values_unobserved)} not observed",
        f"bytes:   {comparison.count(CHECKED)} nodes checked, {comparison.count(BOUNDS_ONLY)} bounds-only "
        f"({counts.total()} read/written counts: {bases or 'none'}); {comparison.count(NOT_COSTED)} not costed; "
        f"{comparison.count(NOT_OBSERVED) + comparison.count(NOT_CHECKED)} not observed, control flow or function calls",
        f"disagreements: {len(comparison.disagreements)}",
    ]
    if result.attempts is not None and result.attempts.note:
        lines.insert(2, f"seed:    {result.attempts.note}")
    for d in comparison.disagreements[:limit]:
        basis = f" [{d.basis}]" if d.basis else ""
        note = f" ({d.note})" if d.note else ""
        value = f" {d.value}" if d.value else ""
        lines.append(
            f"  #{d.index} {d.node} ({d.op_type}) {d.what}{value}: inferred {d.inferred}, observed {d.observed}{basis}{note}"
        )
    if len(comparison.disagreements) > limit:
        lines.append(f"  ... and {len(comparison.disagreements) - limit} more (--format json lists all)")
    uncosted = [n for n in comparison.nodes if n.outcome in (NOT_COSTED, NOT_OBSERVED, NOT_CHECKED)]
    if uncosted:
        by_op = Counter(n.op_type for n in uncosted)
        lines.append(
            "not byte-checked (not costed, not observed, control flow, function calls): "
            + ", ".join(f"{op} ×{c}" for op, c in sorted(by_op.items()))
        )
        for n in uncosted[:limit]:
            lines.append(f"  #{n.index} {n.name} ({n.op_type}): {n.reason}")
    bounded = [n for n in comparison.nodes if n.outcome == BOUNDS_ONLY]
    if bounded:
        lines.append(
            "bounds-only (rule-specific bytes, within [0, default]): "
            + ", ".join(f"{op} ×{c}" for op, c in sorted(Counter(n.op_type for n in bounded).items()))
        )
    if result.sizes:
        lines.append(
            f"data-dependent sizes, checked at the run's ({len(result.sizes)}): what the analysis had against what the run found"
        )
        lines += [f"  {size.line}" for size in result.sizes[:limit]]
        if len(result.sizes) > limit:
            lines.append(f"  ... and {len(result.sizes) - limit} more (--format json lists all)")
    if result.timing is not None:
        lines += _timing_lines(result.timing, report.hardware, limit)
    lines.append(f"verdict: {_verdict_text(result)}")
    return "\n".join(lines) + "\n"


def _verdict_text(result: Verification, shown: int = 5) -> str:
    """PASS only where every node was checked; otherwise the unchecked nodes, how many and the
    first few, beside the verdict."""
    if result.verdict == "invalid":
        return refusal(result.report.model.invalid)
    unchecked = result.unchecked
    if not unchecked:
        return result.verdict.upper()
    names = ", ".join(n.name for n in unchecked[:shown]) + (", ..." if len(unchecked) > shown else "")
    strict = "" if result.strict else "; --strict fails them"
    return f"{result.verdict.upper()}: {len(unchecked)} of {len(result.comparison.nodes)} nodes not checked ({names}){strict}"


def _timing_lines(timing: TimingCheck, hardware, limit: int) -> list[str]:
    lines = [
        f"timing on {hardware.name}: median of {timing.runs} runs after {timing.warmup} warm-up, "
        f"optimizations {'on (fused kernels attributed to their nodes)' if timing.optimized else 'off'}, "
        f"noise margin {percent(timing.margin)}, timer resolution 1 µs",
    ]
    if not hardware.source.startswith(CALIBRATED_SOURCE):
        lines.append(
            "  note: this hardware spec was not measured on this machine; use `onnx-roofline calibrate -o spec.toml`"
        )
    judged = timing.judged()
    lines += [
        f"  judged {len(judged)} nodes: {timing.count(AT_OR_ABOVE)} at or above the bound ({percent(timing.node_share)} of nodes, "
        f"{percent(timing.time_share)} of measured time); {timing.count(CACHE_RESIDENT)} cache-resident "
        f"(beat the DRAM bound, not the in-cache floor at {si(timing.cache_bandwidth, 'B/s')}); {timing.count(BEATS)} beat the bound",
        f"  measured {duration(sum(n.measured_s for n in judged))}, predicted {duration(sum(n.bound_s for n in judged))}, "
        f"attainment (predicted/measured) {_ratio(timing.attainment)}",
    ]
    if timing.count(FUSED):
        lines.append(f"  fused kernels (not judged): {timing.count(FUSED)}")
    if timing.not_run:
        lines.append(f"  nodes with no kernel (constants, folded): {len(timing.not_run)}")
    if timing.unattributed:
        lines.append(f"  kernels with no graph node: {', '.join(timing.unattributed[:10])}")
    lines.append(f"  {'op type':<22}{'nodes':>6}{'measured':>12}{'predicted':>12}{'attainment':>12}")
    for row in timing.by_op_type():
        lines.append(
            f"  {row.op_type:<22}{row.kernels:>6}{duration(row.measured_s):>12}{duration(row.predicted_s):>12}{_ratio(row.attainment):>12}"
        )
    for node in sorted(timing.violations, key=lambda n: -(n.attainment or 0))[:limit]:
        lines.append(
            f"  BEATS BOUND #{node.nodes[0]} {node.names[0]} ({node.op_type}, {node.bound}-bound): measured {duration(node.measured_s)}, "
            f"bound {duration(node.bound_s)}, cache floor {duration(node.cache_floor_s)}, attainment {_ratio(node.attainment)}"
        )
    return lines


def _bases(result: Verification) -> Counter:
    return Counter(basis for n in result.comparison.nodes if n.basis for basis in n.basis)


def _ratio(value: float | None) -> str:
    return "?" if value is None else f"{value:.3f}"


def _runtime() -> str:
    import onnxruntime as ort

    return f"onnxruntime {ort.__version__} CPUExecutionProvider"
