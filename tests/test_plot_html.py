"""The roofline plot, the HTML report (rendered in headless Chromium) and the Markdown summary."""

from __future__ import annotations

import itertools
import json
import re
import xml.etree.ElementTree as ET

import pytest

from onnx_roofline import Sizing, analyze
from onnx_roofline.commands.cli import main
from onnx_roofline.report.html import render_html
from onnx_roofline.report.markdown import render_markdown
from onnx_roofline.report.plot import LABELS, render_plot, roofline_figure
from tests.browser import browser, save_artifact  # noqa: F401 (browser: the fixture)
from tests.conftest import FIXTURES

PREFILL = (FIXTURES / "gpt2_prefill_fp16.onnx", {"batch": 1, "sequence": 1024})
DECODE = (FIXTURES / "gpt2_decode_fp16.onnx", {"batch": 1, "past_sequence": 1023})
BIG = (FIXTURES / "gpt2_prefill_fp32_torchscript.onnx", {"batch": 1, "sequence": 1024})  # 2,677 nodes


@pytest.fixture(scope="module")
def prefill():
    return analyze(PREFILL[0], sizing=Sizing(dims=PREFILL[1]))


@pytest.fixture(scope="module")
def decode():
    return analyze(DECODE[0], sizing=Sizing(dims=DECODE[1]))


def annotations(figure) -> list:
    return [t for t in figure.axes[0].texts if hasattr(t, "xy")]


# --- the plot -------------------------------------------------------------------------------------


def test_the_roofline_has_a_diagonal_and_a_ceiling_per_unit_dtype(prefill):
    figure = roofline_figure([prefill])
    axes = figure.axes[0]
    assert axes.get_xscale() == "log" and axes.get_yscale() == "log"
    words = [t.get_text() for t in axes.texts]
    ceilings = sorted(w.split(" ")[:2] for w in words if "ridge" in w)
    assert ceilings == [["matrix", "fp16"], ["vector", "fp16"], ["vector", "fp32"]]  # the ones GPT-2 fp16 runs on
    assert any(w.startswith("matrix fp16 989.40 TFLOP/s · ridge 295 FLOP/B") for w in words)
    assert "memory 3.35 TB/s" in words
    # every costed node with FLOPs is a point; those without are counted in the corner
    plotted = sum(len(c.get_offsets()) for c in axes.collections)
    with_flops = [n for n in prefill.nodes if n.status == "ok" and n.cost.flops]
    assert plotted == len(with_flops)
    assert any(w.startswith(f"+{len(prefill.nodes) - len(with_flops)} nodes with no FLOPs") for w in words)


def test_labels_name_the_heaviest_positions_and_never_overlap():
    report = analyze(BIG[0], sizing=Sizing(dims=BIG[1]))
    figure = roofline_figure([report])
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    notes = [t for t in annotations(figure) if "%" in t.get_text()]
    assert 5 <= len(notes) <= LABELS
    assert any(re.match(r"attn MatMul ×24 ", t.get_text()) for t in notes)  # twelve layers' two products: one label
    boxes = [t.get_bbox_patch().get_window_extent(renderer) for t in notes]
    assert not any(a.overlaps(b) for a, b in itertools.combinations(boxes, 2))


def test_overlay_of_prefill_and_decode(prefill, decode):
    figure = roofline_figure([prefill.to_dict(), decode.to_dict()], labels=["prefill", "decode"])
    legend = [t.get_text() for t in figure.axes[0].get_legend().get_texts()]
    assert legend == ["prefill", "decode"]
    notes = [t.get_text() for t in annotations(figure)]
    assert any(n.startswith("prefill: ") for n in notes) and any(n.startswith("decode: lm_head MatMul") for n in notes)


def test_plot_bytes_are_deterministic(prefill):
    for fmt in ("png", "svg"):
        assert render_plot([prefill], fmt) == render_plot([prefill], fmt)
    svg = render_plot([prefill], "svg")
    ET.fromstring(svg)  # well-formed
    assert b"ridge 295 FLOP/B" in svg  # text is drawn as shapes; matplotlib keeps it as a comment


def test_cli_plot_flag_and_plot_command(tmp_path):
    model, dims = PREFILL
    a, b, png = tmp_path / "prefill.json", tmp_path / "decode.json", tmp_path / "x.png"
    assert (
        main(
            [
                str(model),
                "--dim",
                "batch=1",
                "--dim",
                "sequence=1024",
                "--format",
                "json",
                "-o",
                str(a),
                "--plot",
                str(tmp_path / "one.svg"),
            ]
        )
        == 0
    )
    assert (tmp_path / "one.svg").read_bytes().lstrip().startswith(b"<?xml")
    assert (
        main([str(DECODE[0]), "--dim", "batch=1", "--dim", "past_sequence=1023", "--format", "json", "-o", str(b)]) == 0
    )
    assert main(["plot", str(a), str(b), "-o", str(png), "--label", "prefill", "--label", "decode"]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--label", "only-one"], "--label for 2 reports"),
        (["-o", "x.gif"], "must end in .png or .svg"),
    ],
)
def test_plot_command_input_errors(tmp_path, capsys, args, message):
    report = tmp_path / "r.json"
    report.write_text(json.dumps(analyze(PREFILL[0], sizing=Sizing(dims=PREFILL[1])).to_dict()))
    options = ["-o", str(tmp_path / "x.png"), *args] if "-o" not in args else [*args[:1], str(tmp_path / args[1])]
    assert main(["plot", str(report), str(report), *options]) == 2
    assert message in capsys.readouterr().err


def test_plot_command_rejects_what_is_not_a_report(tmp_path, capsys):
    (tmp_path / "x.json").write_text('{"a": 1}')
    assert main(["plot", str(tmp_path / "x.json"), "-o", str(tmp_path / "x.png")]) == 2
    assert "not an onnx-roofline JSON report" in capsys.readouterr().err


# --- the HTML report ------------------------------------------------------------------------------


def test_html_is_self_contained_and_complete(prefill):
    page = render_html(prefill)
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)  # nothing fetched when viewed
    assert "<script src" not in page and "<link" not in page
    assert page.count("<svg") >= 1
    body = page.split('<table id="nodes"', 1)[1]
    assert body.count("<tr") == len(prefill.nodes) + 1  # every node, and the header
    assert "By op type" in page and "By module (depth 3)" in page
    assert "model.transformer.h.11" in page
    assert render_html(prefill) == page  # deterministic


def test_html_in_headless_chromium(browser, prefill, tmp_path):  # noqa: F811
    path = tmp_path / "report.html"
    path.write_text(render_html(prefill), encoding="utf-8")
    browser.goto(path.as_uri())
    assert browser.errors() == []
    assert all(u.startswith(("file:", "data:")) for u in browser.requested_urls())  # no network at view time
    width, height = browser.evaluate(
        "(r => [r.width, r.height])(document.querySelector('#roofline svg').getBoundingClientRect())"
    )
    assert width > 400 and height > 200  # the plot is drawn
    rows = browser.evaluate("document.querySelectorAll('#nodes tbody tr').length")
    assert rows == len(prefill.nodes)
    first = "document.querySelector('#nodes tbody tr').children[1].textContent"
    assert browser.evaluate(first) == "/model/lm_head/MatMul"  # heaviest first
    browser.click("#nodes th:nth-child(6)")  # flops: descending
    assert browser.evaluate(first) == "/model/lm_head/MatMul"
    browser.click("#nodes th:nth-child(6)")  # ascending: a node without FLOPs first
    assert browser.evaluate("document.querySelector('#nodes tbody tr').children[5].textContent") == "0 FLOP"
    browser.evaluate(
        "(f => { f.value = 'h.3 attn softmax'; f.dispatchEvent(new Event('input')); })(document.getElementById('filter'))"
    )
    assert browser.evaluate("document.getElementById('shown').textContent") == "1"
    assert browser.errors() == []
    save_artifact(browser.screenshot(tmp_path / "html-report.png"))


# --- Markdown -------------------------------------------------------------------------------------


def test_markdown_is_short_and_stable(prefill):
    text = render_markdown(prefill)
    assert text == render_markdown(prefill)
    assert text.startswith(
        "### onnx-roofline: `gpt2_prefill_fp16.onnx` on NVIDIA H100 SXM5 80GB (batch=1, sequence=1024)"
    )
    assert "| `/model/lm_head/MatMul` | MatMul |" in text
    assert "<details><summary>By module (depth 3)</summary>" in text
    assert str(FIXTURES) not in text  # no absolute paths: comments from two checkouts diff cleanly
    assert len(text.splitlines()) < 150


def test_markdown_format_from_the_cli(capsys):
    model, dims = DECODE
    assert (
        main(
            [
                str(model),
                "--dim",
                "batch=1",
                "--dim",
                "past_sequence=1023",
                "--format",
                "markdown",
                "--top",
                "3",
                "--by",
                "module",
                "--depth",
                "4",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "**Top 3 nodes by time**" in out and "By module (depth 4)" in out and "By op type" not in out
    assert "`model.transformer.h.0.attn`" in out


# --- the HTML roofline: hover, filter, the zero-FLOP strip ----------------------------------------


def _scatter_centres(svg: str) -> list[tuple[float, float]]:
    """The centre of every marker matplotlib drew (each a closed circle path in a PathCollection)."""
    centres = []
    for group in re.findall(r'<g id="PathCollection_\d+">(.*?)</g>', svg, re.S):
        for d in re.findall(r'<path d="([^"]+)"', group):
            numbers = [float(v) for v in re.findall(r"-?[\d.]+", d)]
            xs, ys = numbers[0::2], numbers[1::2]
            centres.append(((min(xs) + max(xs)) / 2, (min(ys) + max(ys)) / 2))
    return centres


def test_html_names_every_plotted_point_where_matplotlib_drew_it(decode):
    page = render_html(decode)
    svg = page[page.index("<svg") : page.index('<g id="points"')]
    circles = re.findall(r'<circle cx="([\d.]+)" cy="([\d.]+)" r="[\d.]+" data-i="(\d+)" data-tip="([^"]*)"', page)
    plotted = [n for n in decode.nodes if n.status == "ok" and n.cost.flops > 0]
    assert sorted(int(i) for *_, i, _ in circles) == [n.index for n in plotted]
    centres = _scatter_centres(svg)
    assert len(centres) == len(plotted)
    for x, y, _, _ in circles:  # each hover circle sits on a marker
        assert min(abs(float(x) - cx) + abs(float(y) - cy) for cx, cy in centres) < 0.01
    by_index = {int(i): tip for *_, i, tip in circles}
    head = next(n for n in plotted if n.name == "/model/lm_head/MatMul")
    tip = by_index[head.index]
    assert tip.startswith("/model/lm_head/MatMul\nMatMul · model.lm_head\n77.19 MFLOP · 77.30 MB · 1.0 FLOP/B")
    assert "memory-bound" in tip and f"{100 * head.time_s / decode.totals.time_s:.1f}% of the time" in tip
    softmax = next(n for n in plotted if n.op_type == "Softmax")
    assert "transc." in by_index[softmax.index]  # transcendentals are shown, not free


def test_html_shows_the_zero_flop_nodes_in_a_strip(decode):
    page = render_html(decode)
    zero = [n for n in decode.nodes if n.status == "ok" and n.cost.flops == 0]
    share = sum(n.time_s for n in zero) / decode.totals.time_s
    strip = page.split('<div id="strip"', 1)[1].split("</div>", 1)[0]
    widths = [float(w) for w in re.findall(r"flex-grow: ([\d.]+)", strip)]
    assert sum(widths) == pytest.approx(
        1000, abs=0.01
    )  # per mille of the zero-FLOP time: every node, named or in "others"
    transpose = next(n for n in zero if n.name == "/model/lm_head/Transpose")
    assert widths[0] == pytest.approx(
        1000 * transpose.time_s / sum(n.time_s for n in zero), abs=1e-3
    )  # the heaviest first
    moving = [
        n for n in zero if not n.cost.transcendentals
    ]  # Tanh has no FLOPs but is no data movement (tests/test_off_axis.py)
    assert f"{len(zero)} nodes ({len(moving)} data movement" in page and f"{100 * share:.1f}% of the time" in page
    assert "/model/lm_head/Transpose (" in page  # the top offender, named


def test_html_hover_and_filter_in_headless_chromium(browser, decode, tmp_path):  # noqa: F811
    path = tmp_path / "report.html"
    path.write_text(render_html(decode), encoding="utf-8")
    browser.goto(path.as_uri())
    head = next(n for n in decode.nodes if n.name == "/model/lm_head/MatMul")
    circle = f"document.querySelector('#points circle[data-i=\"{head.index}\"]')"
    browser.evaluate(f"{circle}.scrollIntoView({{block: 'center'}})")  # the plot starts under the first screen's list
    centre = browser.evaluate(f"(r => [r.x + r.width / 2, r.y + r.height / 2])({circle}.getBoundingClientRect())")
    browser.call("Input.dispatchMouseEvent", type="mouseMoved", x=centre[0], y=centre[1])
    browser.wait_until("document.getElementById('tip').style.display === 'block'")
    assert browser.evaluate("document.getElementById('tip').textContent").startswith(
        "/model/lm_head/MatMul\nMatMul · model.lm_head"
    )
    browser.evaluate(
        "(f => { f.value = 'h.3 attn softmax'; f.dispatchEvent(new Event('input')); })(document.getElementById('filter'))"
    )
    assert browser.evaluate("[...document.querySelectorAll('#points circle.hit')].map(c => c.dataset.i)") == [
        str(n.index) for n in decode.nodes if n.name == "/model/transformer/h.3/attn/Softmax"
    ]
    assert browser.errors() == []
    save_artifact(browser.screenshot(tmp_path / "html-hover.png"))
