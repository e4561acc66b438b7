"""The gate's outputs for people and CI: a text summary, JSON, GitHub Actions annotations, JUnit XML.

All four read a GateResult only and are deterministic: no timestamps, no host names, no locale.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Mapping

from onnx_roofline.commands.gate.result import FAIL, SKIP, Contributor, GateResult, formatted
from onnx_roofline.report.findings import footprint_text, latency_text
from onnx_roofline.shapes.roles import DimDefault
from onnx_roofline.shapes.roles import listed as listed_dims

LISTED = 20  # baseline node changes listed in the text summary (the JSON lists all)


def render_text(result: GateResult) -> str:
    """What failed, by how much, and which nodes are responsible; then the baseline's node changes."""
    verdict = "PASS" if result.passed else "FAIL"
    counts = f"{len(result.failed)} of {len(result.checks)} checks failed"
    if result.skipped:
        counts += f", {len(result.skipped)} skipped"
    lines = [
        f"onnx-roofline check: {verdict} ({counts})",
        f"model {result.model or '<in-memory>'} on {result.hardware}, dims {_dims(result.dims, result.dim_roles)}; "
        + (
            "times: deployed bound, the floor no runtime beats"
            if result.view == "deployed"
            else "times: every node its own kernel, as written (the floor a runtime cannot beat: --view deployed)"
        ),
        *(
            [f"latency: {latency_text(result.latency)}"] if result.latency is not None else []
        ),  # the floor first (issue 40)
        *[f"{'assumed' if line.label == 'ASSUMED' else line.label}: {line.text}" for line in result.qualifiers],
        "",
    ]
    for check in result.checks:
        lines.append(f"{check.status.upper() if check.status == FAIL else check.status:<5} {check.message}")
        if check.status == FAIL:
            lines += [f"        {_contributor(c)}" for c in check.contributors]
    if (
        result.memory is not None
    ):  # what the model holds, judged as every command judges it (not a check: no limit is set)
        lines.append(f"memory: {footprint_text(result.memory)}")
    lines += _comparison_lines(result)
    return "\n".join(lines) + "\n"


def render_json(result: GateResult) -> str:
    return json.dumps(result.to_dict(), indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def render_github(result: GateResult) -> str:
    """`::error` per failed check and `::warning` per skipped one (GitHub shows them on the run and
    the pull request), followed by the text summary for the log."""
    lines = []
    for check in result.checks:
        if check.status in (FAIL, SKIP):
            level = "error" if check.status == FAIL else "warning"
            props = ([f"file={_property(result.model)}"] if result.model else []) + [
                f"title={_property('onnx-roofline: ' + check.title)}"
            ]
            body = "\n".join([check.message, *(_contributor(c) for c in check.contributors)])
            lines.append(f"::{level} {','.join(props)}::{_data(body)}")
    return "\n".join(lines) + ("\n" if lines else "") + render_text(result)


def render_junit(result: GateResult) -> str:
    """One testsuite, one testcase per check; a failed check's body lists its contributors. Each
    testcase's classname names the model and hardware, so several checks in one CI report stay apart."""
    name = f"onnx-roofline check {result.model or '<in-memory>'} on {result.hardware}"
    classname = f"onnx-roofline[{result.hardware}] {result.model or '<in-memory>'}"
    counts = {
        "tests": str(len(result.checks)),
        "failures": str(len(result.failed)),
        "errors": "0",
        "skipped": str(len(result.skipped)),
    }
    suites = ET.Element("testsuites", {"name": "onnx-roofline", **counts})
    suite = ET.SubElement(suites, "testsuite", {"name": name, **counts})
    for check in result.checks:
        case = ET.SubElement(suite, "testcase", {"classname": classname, "name": check.id})
        if check.status == FAIL:
            failure = ET.SubElement(case, "failure", {"message": check.message, "type": check.id})
            failure.text = "\n".join(_contributor(c) for c in check.contributors) or None
        elif check.status == SKIP:
            ET.SubElement(case, "skipped", {"message": check.message})
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


RENDERERS = {"text": render_text, "json": render_json, "github": render_github}


def _contributor(c: Contributor) -> str:
    """`62.3%  3.07 µs  name (op)`; a regression's culprit says what it is: `+46.09 µs grown
    (62.3% of the growth)  name (op)`; a node a runtime folds at load says so: `(Transpose, foldable)`."""
    node = f"{c.node.name} ({c.node.op_type}{', foldable' if c.node.foldable else ''})" + (
        f": {c.note}" if c.note else ""
    )
    if c.growth:
        share = f" ({100 * c.share:.1f}% of the growth)" if c.share is not None else ""
        return f"+{formatted(c.kind, c.value)} grown{share}  {node}"
    share = f"{100 * c.share:5.1f}%  " if c.share is not None else ""
    value = f"{formatted(c.kind, c.value)}  " if c.value is not None else ""
    return f"{share}{value}{node}"


def _comparison_lines(result: GateResult) -> list[str]:
    comparison = result.comparison
    if comparison is None:
        return []
    changed = comparison.bound_changed
    lines = [
        "",
        f"baseline {result.baseline}: {len(comparison.added)} node(s) added, "
        f"{len(comparison.removed)} removed, {len(changed)} changed bound",
    ]
    entries = [f"  + [{n.index}] {n.name} ({n.op_type})" for n in comparison.added]
    entries += [f"  - [{n.index}] {n.name} ({n.op_type})" for n in comparison.removed]
    entries += [f"  ~ [{a.index}] {a.name} ({a.op_type}): {b.bound} → {a.bound}" for b, a in changed]
    more = [f"  ... and {len(entries) - LISTED} more (all are in --format json)"] if len(entries) > LISTED else []
    return lines + entries[:LISTED] + more


def _dims(dims: dict[str, int], roles: Mapping[str, DimDefault]) -> str:
    """`batch=8, p2o.DynamicDimension.1=224 (image height, default)`: a default with its role."""
    return listed_dims(dims, roles) or "none"


def _data(text: str) -> str:
    """A workflow command's message, escaped as GitHub's toolkit does."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")
