"""What the terminal says, every shared format says (issue 30): the deployed estimate, foldable
nodes and their share, the launch floor, the memory breakdown and every assumption appear in the
HTML and the Markdown as in the table, equal to the JSON's figures; the HTML switches between the
written nodes and the deployed kernels."""

from __future__ import annotations

import json
import re

import onnx
import pytest
from onnx import TensorProto, helper

from onnx_roofline import Sizing, analyze
from onnx_roofline.commands.cli import main
from onnx_roofline.report.units import duration, percent, si
from onnx_roofline.views.deployed import deploy
from tests.conftest import FIXTURES

DECODE = FIXTURES / "gpt2_decode_fp16.onnx"
DIMS = ["--dim", "batch=1", "--dim", "past_sequence=1023"]


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("parity")
    for fmt in ("json", "html", "markdown", "table"):
        assert main([str(DECODE), *DIMS, "--format", fmt, "-o", str(folder / fmt), "-q"]) == 0
    return {fmt: (folder / fmt).read_text(encoding="utf-8") for fmt in ("json", "html", "markdown", "table")}


def test_the_json_has_both_views_and_the_foldable_block(outputs):
    data = json.loads(outputs["json"])
    written = analyze(DECODE, sizing=Sizing(dims={"batch": 1, "past_sequence": 1023}))
    deployed = deploy(written, "inplace")  # the CLI's default (issue 39)
    assert data["views"]["written"]["totals"]["time_s"] == data["totals"]["time_s"]
    assert data["views"]["deployed"]["totals"]["time_s"] == deployed.totals.time_s
    assert (
        data["views"]["deployed"]["kernels"] == deployed.kernels and data["views"]["deployed"]["kv_cache"] == "inplace"
    )
    # lm_head's Transpose of its [50257, 768] fp16 weight: read and written once, 2 · 50257 · 768 · 2 B
    assert data["foldable"]["nodes"] == 1 and data["foldable"]["bytes"] == 2 * 50257 * 768 * 2
    assert data["foldable"]["time_share"] == pytest.approx(data["foldable"]["time_s"] / data["totals"]["time_s"])


@pytest.mark.parametrize("fmt", ["html", "markdown", "table"])
def test_every_format_says_what_the_json_holds(outputs, fmt):
    data, text = json.loads(outputs["json"]), outputs[fmt]
    deployed = data["views"]["deployed"]
    said = [
        duration(data["totals"]["floor_time_s"]),  # the headline: the deployed bound (issue 40)
        duration(data["totals"]["predicted_time_s"]),  # and the predicted time beside it
        f"{deployed['kernels']} kernels",
        f"{si(data['foldable']['bytes'], 'B')}, {duration(data['foldable']['time_s'])}, {percent(data['foldable']['time_share'])} of the time",
        f"= {duration(data['launches']['floor_s'])} floor",  # the launch floor: kernels × overhead
        f"{data['launches']['kernels']} launches (every node its own kernel) × {duration(data['hardware']['launch_overhead'])}",  # as written
        f"weights {si(data['memory']['weight_bytes'], 'B')}",  # the memory breakdown
        f"peak activations {si(data['memory']['peak_activation_bytes'], 'B')} = {si(data['memory']['total_bytes'], 'B')}",
    ]
    for phrase in said:
        assert phrase in text, f"{fmt} lacks {phrase!r}"


def test_the_html_switches_between_written_nodes_and_deployed_kernels(outputs):
    data, page = json.loads(outputs["json"]), outputs["html"]
    deployed = deploy(analyze(DECODE, sizing=Sizing(dims={"batch": 1, "past_sequence": 1023})), "copy")
    assert 'id="show-written" checked' in page and 'id="show-deployed"' in page
    tables = dict(re.findall(r'<table id="([\w-]+)" class="sortable"><thead>.*?</thead><tbody>(.*?)</tbody>', page))
    assert tables["nodes"].count("<tr") == len(data["nodes"]) == 648
    assert tables["nodes-deployed"].count("<tr") == len(deployed.nodes)


def test_assumptions_and_warnings_reach_the_html(tmp_path):
    """An assumed NonZero fraction and an uncosted node: the HTML says both, as the table does."""
    graph = helper.make_graph(
        [
            helper.make_node("NonZero", ["x"], ["i"]),
            helper.make_node("Transpose", ["i"], ["t"]),
            helper.make_node("Acme", ["t"], ["y"], domain="acme"),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, None)],
    )
    path = tmp_path / "m.onnx"
    onnx.save(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("acme", 1)]), path
    )
    for fmt in ("html", "table"):
        assert (
            main(
                [str(path), "--nonzero-fraction", "1/4", "--format", fmt, "-o", str(tmp_path / fmt), "-q", "--partial"]
            )
            == 0
        )
    table, page = (tmp_path / "table").read_text(), (tmp_path / "html").read_text()
    for label in ("ASSUMED", "UNCOSTED"):
        (line,) = [line for line in table.splitlines() if line.startswith(label)]
        text = line[len(label) :].strip()
        assert f'<p class="warn"><b>{label}</b> ' in page and text.split(":")[0] in page
