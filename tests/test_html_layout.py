"""Layout that holds (issue 30): the HTML report at 1000 and 1400 px in headless Chromium, and the
PNG plots, on two fixtures and an onnxruntime-genai builder export (long dim names such as
`total_sequence_length`, node names such as `/model/layers.0/attn/qkv_proj/MatMul`). Measured by
bounding boxes: nothing overflows its container, no two plot labels intersect, titles wrap inside
the page or figure, tables fit or wrap, and curves that coincide are told apart."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from onnx_roofline import Sizing, analyze
from onnx_roofline.commands.cli import main
from onnx_roofline.commands.whatif import compare, context_study, critical, sweep
from onnx_roofline.commands.whatif.compare import parse_hardware_list
from onnx_roofline.commands.whatif.fuse_report import fusion_study
from onnx_roofline.commands.whatif.plot import (
    compare_figure,
    context_figure,
    critical_figure,
    fusion_figure,
    sweep_figure,
)
from onnx_roofline.commands.whatif.session import Session
from onnx_roofline.report.plot import roofline_figure
from tests.browser import Browser, chromium_or_skip
from tests.conftest import FIXTURES, REPO

WIDTHS = (1000, 1400)
LLM = (
    REPO / "tests" / "corpus" / "models" / "genai_llama_fp32.onnx"
)  # the genai builder's own names (tests/corpus/genai.py)
LLM_DIMS = {
    "batch_size": 1,
    "sequence_length": 1,
    "past_sequence_length": 1023,
    "total_sequence_length": 1024,
    "kv_cache_dim": 32,
}
DECODE_DIMS = {"batch": 1, "past_sequence": 1023}
MODELS = {  # the fp16 decoder the lesson studies, an fp32 CNN (two ceilings at one peak), the LLM export
    "gpt2_decode_fp16": (FIXTURES / "gpt2_decode_fp16.onnx", DECODE_DIMS),
    "resnet50_fp32": (FIXTURES / "resnet50_fp32.onnx", {"batch": 1}),
    "genai_llama_fp32": (LLM, LLM_DIMS),
}

# Every element outside the plot within its parent's box (only a scroll box may be taller than its
# parent), no content wider than its box, no two plot texts (matplotlib's <g id="text_N">, glyphs
# drawn as paths) intersecting, and each inside the plot.
MEASURE = r"""(() => {
  const box = e => e.getBoundingClientRect(), slack = 0.5;
  const name = e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + ' ' + e.textContent.trim().slice(0, 60);
  const found = {overflow: [], clipped: [], labels: [], outside: []};
  for (const e of document.body.querySelectorAll('*')) {
    if (e.closest('svg') && e.tagName.toLowerCase() !== 'svg') continue;
    const r = box(e), p = box(e.parentElement);
    if (!r.width && !r.height) continue;  // not shown
    const scrolls = ['auto', 'scroll'].includes(getComputedStyle(e.parentElement).overflowY);
    if (r.left < p.left - slack || r.right > p.right + slack || (!scrolls && (r.top < p.top - slack || r.bottom > p.bottom + slack)))
      found.overflow.push(name(e));
    if (e.clientWidth && e.scrollWidth > e.clientWidth + 1) found.clipped.push(name(e));
  }
  if (document.documentElement.scrollWidth > innerWidth) found.overflow.push('the page scrolls sideways');
  const svg = [...document.querySelectorAll('figure.roofline svg')].find(s => box(s).width), frame = box(svg);  // the view shown
  const texts = [...svg.querySelectorAll('g[id^="text_"]')].map(g => [g.innerHTML.match(/<!--\s*([\s\S]*?)\s*-->/)?.[1] ?? g.id, box(g)]);
  for (const [text, r] of texts)
    if (r.left < frame.left || r.right > frame.right || r.top < frame.top || r.bottom > frame.bottom) found.outside.push(text);
  for (const [[a, r], [b, q]] of texts.flatMap((t, i) => texts.slice(i + 1).map(u => [t, u])))
    if (r.left < q.right && q.left < r.right && r.top < q.bottom && q.top < r.bottom) found.labels.push(a + ' × ' + b);
  return found;
})()"""


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """Each model's HTML report, written by the CLI as a user would."""
    folder = tmp_path_factory.mktemp("layout")
    written = {}
    for name, (model, dims) in MODELS.items():
        written[name] = folder / f"{name}.html"
        bindings = [arg for k, v in dims.items() for arg in ("--dim", f"{k}={v}")]
        assert (
            main(
                [
                    str(model),
                    *bindings,
                    "--format",
                    "html",
                    "--by",
                    "op-type",
                    "--by",
                    "module",
                    "-o",
                    str(written[name]),
                    "-q",
                ]
            )
            == 0
        )
    return written


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    browser = Browser(chromium_or_skip(), tmp_path_factory.mktemp("chromium-profile"))
    yield browser
    browser.close()


def open_at(page, path, width: int) -> None:
    page.call("Emulation.setDeviceMetricsOverride", width=width, height=900, deviceScaleFactor=1, mobile=False)
    page.goto(path.as_uri())


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", MODELS)
def test_the_html_report_holds_its_layout(page, pages, name, width):
    open_at(page, pages[name], width)
    assert page.errors() == []
    views = page.evaluate("[...document.querySelectorAll('input[type=radio]')].map(i => '#' + i.id)")
    for view in [None, *views]:  # as opened, then with each view switched on (written, deployed)
        if view:
            page.click(view)
        assert page.evaluate(MEASURE) == {"overflow": [], "clipped": [], "labels": [], "outside": []}, view


def test_long_names_wrap_after_their_separators_and_read_the_same(page, pages):
    """A name breaks after `/`, `.` or `_` (a <wbr> the page adds), never as written text: the
    cell's text, its sort key and the filter see the name unchanged."""
    open_at(page, pages["genai_llama_fp32"], 1000)
    name = "/model/layers.0/attn/qkv_proj/MatMul"
    cell = f"[...document.querySelectorAll('#nodes td.name')].find(td => td.textContent === '{name}')"
    assert page.evaluate(f"{cell}.querySelectorAll('wbr').length") == 5 + 1 + 1  # five /, one ., one _
    page.evaluate(
        "(f => { f.value = 'qkv_proj/MatMul'; f.dispatchEvent(new Event('input')); })(document.getElementById('filter'))"
    )
    assert page.evaluate("document.getElementById('shown').textContent") == "2"  # one per layer


# --- the PNG plots --------------------------------------------------------------------------------


def boxes(figure) -> list:
    """(what, display box) of every label, note, title and legend in a drawn figure (tick labels
    are matplotlib's to place)."""
    from matplotlib.text import Text

    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    found = [(t.get_text(), Text.get_window_extent(t, renderer)) for t in figure.texts if t.get_text()]
    found += [("legend", legend.get_window_extent(renderer)) for legend in figure.legends]
    for axes in figure.axes:
        texts = [*axes.texts, axes.title, axes.xaxis.label, axes.yaxis.label]
        found += [
            (t.get_text(), Text.get_window_extent(t, renderer)) for t in texts if t.get_text()
        ]  # words, not leader lines
        found += [("legend", axes.get_legend().get_window_extent(renderer))] if axes.get_legend() else []
    return found


def assert_laid_out(figure) -> None:
    found = boxes(figure)
    frame = figure.bbox
    assert [what for what, b in found if b.x0 < frame.x0 or b.y0 < frame.y0 or b.x1 > frame.x1 or b.y1 > frame.y1] == []
    assert [(a, b) for (a, r), (b, q) in itertools.combinations(found, 2) if r.overlaps(q)] == []


@pytest.fixture(scope="module")
def reports():
    return {name: analyze(model, sizing=Sizing(dims=dims)) for name, (model, dims) in MODELS.items()}


@pytest.mark.parametrize("name", MODELS)
def test_the_roofline_png_holds_its_layout(reports, name):
    figure = roofline_figure([reports[name]])
    assert_laid_out(figure)
    ridges = [t for t in figure.axes[0].texts if "ridge" in t.get_text()]
    assert len({t.xy for t in ridges}) == len(ridges)  # one label per roof


def test_ceilings_of_one_peak_are_one_roof(reports):
    """fp32 runs at 66.9 TFLOP/s on an H100's tensor cores and its vector units alike."""
    words = [t.get_text() for t in roofline_figure([reports["resnet50_fp32"]]).axes[0].texts]
    assert [w for w in words if "ridge" in w] == ["matrix fp32 = vector fp32 66.90 TFLOP/s · ridge 20 FLOP/B"]


def test_the_overlay_title_wraps_inside_the_figure(reports):
    figure = roofline_figure([reports["gpt2_decode_fp16"], reports["genai_llama_fp32"]])
    assert "\n" in figure.axes[0].get_title()  # two models' dims: past_sequence=1023; batch_size=1, ...
    assert_laid_out(figure)


def test_critical_draws_coinciding_curves_once_and_names_them_all():
    result = critical(Session(FIXTURES / "gpt2_decode_fp16.onnx", dims={"past_sequence": 1023}), "batch")
    figure = critical_figure(result)
    assert_laid_out(figure)
    axes = figure.axes[0]
    curves = [line.get_ydata() for line in axes.lines if len(line.get_ydata()) > 2]
    assert not any(
        np.allclose(a, b, rtol=0.01) for a, b in itertools.combinations(curves, 2)
    )  # none hidden behind another
    legend = [t.get_text() for t in axes.get_legend().get_texts()]
    assert all(any(kind.signature in entry for entry in legend) for kind in result.kinds)
    shared = next(entry for entry in legend if "\n= " in entry)  # GPT-2's c_fc and c_proj Gemms: one curve
    assert "[batch,768] [768,3072] [3072]" in shared and "[batch,3072] [3072,768] [768]" in shared


def test_the_what_if_pngs_hold_their_layout():
    """Long dim names in every title; the compare notes end inside the axes."""
    decode = Session(FIXTURES / "gpt2_decode_fp16.onnx", dims={"batch": 1})
    figures = [
        sweep_figure(
            sweep(
                Session(LLM, dims={k: v for k, v in LLM_DIMS.items() if k != "batch_size"}), {"batch_size": (1, 2, 4)}
            )
        ),
        compare_figure(compare(Session(LLM, dims=LLM_DIMS), parse_hardware_list("h100,h200,a100,l4"))),
        context_figure(context_study(decode, [64, 256, 1024])),
        fusion_figure(fusion_study(Session(FIXTURES / "gpt2_prefill_fp16.onnx", dims={"batch": 1, "sequence": 128}))),
    ]
    for figure in figures:
        assert_laid_out(figure)
    bars = figures[1].axes[0]
    assert all(bars.bbox.contains(*note.get_window_extent().p1) for note in bars.texts)
