"""No transcendental op is called data movement anywhere (issue 41): every op whose cost rule counts
transcendentals, found by analyzing the ONNX node test suite's cases of every registered op, is
classified by every rendering that sorts the no-FLOPs nodes (the HTML strip, its tooltips, the
plot's note) as transcendental work, and an op with FLOPs as well stays on the plot."""

from __future__ import annotations

import re

import pytest

from onnx_roofline import Sizing, analyze
from onnx_roofline.costs import rules
from onnx_roofline.report.html_points import plotted, zero_flop_strip
from onnx_roofline.report.model import OK
from onnx_roofline.report.off_axis import MOVEMENT, TRANSCENDENTAL
from onnx_roofline.report.plot import zero_flop_lines
from tests.conftest import FIXTURES
from tests.node_suite import cases, with_constant_inputs


@pytest.fixture(scope="module")
def transcendental_reports():
    """(op type, report) for each suite case of a registered op where some node counts transcendentals."""
    found = []
    for case in cases():
        if not all(rules.lookup(n.domain, n.op_type, None) for n in case.model.graph.node):
            continue
        inputs = case.data_sets[0][0] if case.data_sets else []
        try:
            report = analyze(with_constant_inputs(case.model, list(inputs)), hw="h100", partial=True)
        except Exception:  # noqa: BLE001 (the coverage sweep, tests/test_node_suite.py, reports these)
            continue
        if any(n.status == OK and n.cost.transcendentals for n in report.nodes):
            found.append(report)
    return found


def _strip_movement_count(strip: str) -> int:
    match = re.search(rf"(\d+) {MOVEMENT}", strip)
    return int(match.group(1)) if match else 0


def test_the_sweep_finds_the_transcendental_ops(transcendental_reports):
    ops = {n.op_type for r in transcendental_reports for n in r.nodes if n.status == OK and n.cost.transcendentals}
    assert {
        "Tanh",
        "Sigmoid",
        "Exp",
        "Erf",
        "Sqrt",
        "Softmax",
        "Gelu",
    } <= ops  # the exp/tanh/erf/sqrt family of the cost model
    assert len(ops) >= 40


def test_no_transcendental_op_is_data_movement_in_any_rendering(transcendental_reports):
    for report in transcendental_reports:
        costed = [n for n in report.nodes if n.status == OK]
        no_flops = [n for n in costed if not n.cost.flops]
        moving = [n for n in no_flops if not n.cost.transcendentals]  # only bytes: what "data movement" may count
        special = [n for n in no_flops if n.cost.transcendentals]
        name = report.model.path or report.nodes[0].op_type
        strip = zero_flop_strip(report)
        assert _strip_movement_count(strip) == len(moving), name
        if special:
            assert f"{len(special)} {TRANSCENDENTAL}" in strip, name
        for tip in re.findall(r'data-i="(\d+)" data-tip="([^"]*)"', strip):
            node = report.nodes[int(tip[0])]
            assert (MOVEMENT in tip[1]) == (not node.cost.transcendentals), (name, tip)
        note = "\n".join(zero_flop_lines([report.to_dict()]))
        assert _strip_movement_count(note) == len(moving), (name, note)
        if special:
            assert f"{len(special)} {TRANSCENDENTAL}" in note, (name, note)
        with_flops = {n.index for n in costed if n.cost.flops and n.cost.transcendentals and n.time_s}
        assert with_flops <= {n.index for n in plotted(report)}, name  # on the log-intensity axis, not in the strip


def test_gpt2_tanh_is_not_data_movement_in_the_strip():
    report = analyze(
        FIXTURES / "gpt2_decode_fp16.onnx",
        hw="h100",
        sizing=Sizing(dims={"batch": 1, "past_sequence": 1023}, default_dims=True),
    )
    tanh = [n for n in report.nodes if n.op_type == "Tanh"]
    assert len(tanh) == 12  # one GELU per layer, 12 layers
    strip = zero_flop_strip(report)
    assert f"12 {TRANSCENDENTAL} (Tanh" in strip
    no_flops = [n for n in report.nodes if n.status == OK and not n.cost.flops]
    assert f"{len(no_flops) - 12} {MOVEMENT}" in strip
