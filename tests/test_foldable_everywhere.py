"""Foldable, everywhere (issue 41): the `(foldable)` flag the terminal gives GPT-2 decode's
`/model/lm_head/Transpose` (the tied embedding transposed on every step, all its inputs weights) is
in the HTML and Markdown node tables, in `--annotate`'s keys, and in the no-FLOPs strip; and the
deployed weights line says that the folded, transposed lm_head is a weight a runtime stores."""

from __future__ import annotations

import re

import onnx
import pytest

from onnx_roofline import Sizing, analyze
from onnx_roofline.report.annotate import NAMESPACE, annotate
from onnx_roofline.report.findings import footprint_text
from onnx_roofline.report.html import render_html
from onnx_roofline.report.html_points import zero_flop_strip
from onnx_roofline.report.markdown import render_markdown
from onnx_roofline.report.units import si
from onnx_roofline.views.deployed import INPLACE, deploy
from tests.conftest import FIXTURES

DECODE = FIXTURES / "gpt2_decode_fp16.onnx"
TRANSPOSE = "/model/lm_head/Transpose"
VOCAB, HIDDEN, FP16 = 50257, 768, 2  # GPT-2's tied embedding, 50257 × 768, costed in fp16


@pytest.fixture(scope="module")
def decode():
    if not DECODE.exists():
        pytest.skip("fixture not generated")
    return analyze(DECODE, hw="h100", sizing=Sizing(dims={"batch": 1, "past_sequence": 1023}, default_dims=True))


def test_the_transpose_is_the_one_foldable_node(decode):
    assert [n.name for n in decode.nodes if n.constant_foldable] == [TRANSPOSE]


def test_html_and_markdown_node_tables_flag_it(decode):
    page = render_html(decode)
    row = next(r for r in re.findall(r"<tr class=\"memory\">(.*?)</tr>", page) if f">{TRANSPOSE}<" in r)
    assert '<td class="text op">Transpose (foldable)</td>' in row
    assert page.count("(foldable)") >= 1 and "MatMul (foldable)" not in page
    markdown = render_markdown(decode, top=3)
    line = next(line for line in markdown.splitlines() if TRANSPOSE in line)
    assert "Transpose (foldable)" in line


def test_the_no_flops_strip_flags_it(decode):
    strip = zero_flop_strip(decode)
    assert f"{TRANSPOSE} (" in strip and re.search(
        rf"{re.escape(TRANSPOSE)} \([\d.]+%, foldable\)", strip
    )  # among the heaviest
    assert "1 of them foldable" in strip
    tip = next(t for t in re.findall(r'data-tip="([^"]*)"', strip) if t.startswith(TRANSPOSE))
    assert "Transpose (foldable)" in tip and "once at load" in tip


def test_annotate_keys_flag_it(decode, tmp_path):
    done = annotate(decode, tmp_path / "annotated.onnx")
    model = onnx.load(done.model, load_external_data=False)
    keys = {n.name: {p.key: p.value for p in n.metadata_props} for n in model.graph.node}
    assert keys[TRANSPOSE][NAMESPACE + "foldable"] == "true"
    assert all(NAMESPACE + "foldable" not in props for name, props in keys.items() if name != TRANSPOSE)
    assert all(
        len(key) - len(NAMESPACE) <= 12 for props in keys.values() for key in props if key.startswith(NAMESPACE)
    )  # Netron shows them whole
    transpose = next(n for n in model.graph.node if n.name == TRANSPOSE)
    assert "foldable" in transpose.doc_string and "once at load" in transpose.doc_string
    assert '"foldable"' in done.sidecar.read_text()  # Netron's Metrics section too


def test_the_deployed_weights_line_explains_the_folded_weight(decode):
    deployed = deploy(decode, INPLACE)
    transposed = VOCAB * HIDDEN * FP16  # the folded output a runtime stores: 77,194,752 B
    assert deployed.memory.folded_weight_bytes == transposed
    # the embedding stays (the Gather reads it); less a scalar or two that only dropped mask nodes read
    assert deployed.memory.weight_bytes == pytest.approx(decode.memory.weight_bytes + transposed, abs=16)
    assert decode.memory.folded_weight_bytes == 0  # as written nothing is folded
    text = footprint_text(deployed.memory)
    said = f"weights {si(deployed.memory.weight_bytes, 'B')} ({si(transposed, 'B')} of them the outputs of folded nodes"
    assert text.startswith(said + ", which a runtime stores at load)")
    assert deployed.to_dict()["memory"]["folded_weight_bytes"] == transposed
