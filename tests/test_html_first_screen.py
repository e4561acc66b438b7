"""The HTML report's first screen and its view switch (issue 41), in headless Chromium at 1000 and
1400 px wide and 850 high, on GPT-2 decode, the optimum Llama, the optimum merged Llama (an If)
and a QDQ ResNet. Every figure is read from the page's text and checked against the JSON of the
same view (`--format json`, and `--view deployed --format json`):
- the three slowest entries (nodes as written, kernels deployed) with their shares and bounds are
  on screen without scrolling;
- switching views changes the memory-bound share card and the plot's points to that view's;
- one kernel count is on the page, the JSON's `views.deployed.kernels`."""

from __future__ import annotations

import contextlib
import io
import json
import re

import pytest

from onnx_roofline.commands.cli import main
from tests.browser import Browser, chromium_or_skip
from tests.conftest import FIXTURES, REPO

HEIGHT = 850
WIDTHS = (1000, 1400)
VIEWS = ("written", "deployed")
SHIPPED = REPO / "tests" / "corpus" / "shipped"
MODELS = {
    "gpt2_decode": (FIXTURES / "gpt2_decode_fp16.onnx", ["--dim", "batch=1", "--dim", "past_sequence=1023"]),
    "optimum_llama": (SHIPPED / "optimum_llama_decoder_with_past_model.onnx", []),
    "optimum_llama_merged": (SHIPPED / "optimum_llama_decoder_model_merged.onnx", []),  # If: the cache branch taken
    "qdq_resnet": (REPO / "tests" / "corpus" / "models" / "qdq_resnet.onnx", []),  # quantize_static's QDQ
}
KERNEL_COUNT = re.compile(r"(\d[\d,]*) kernels\b")

SHOWN = "filter(e => e.getBoundingClientRect().width)"  # the elements of the view shown (the other's are display: none)
# The rows of the slowest-entries table shown, as name, share, bound, with each row's box.
SLOWEST = f"""[...document.querySelectorAll('table[id^="slowest"]')].{SHOWN}
  .flatMap(t => [...t.tBodies[0].rows]).map(r => ({{name: r.children[1].innerText.replace(/\\s+/g, ''),
    share: r.children[4].innerText, bound: r.children[6].innerText, bottom: r.getBoundingClientRect().bottom,
    right: r.getBoundingClientRect().right}}))"""
SHARE_CARD = f"[...document.querySelectorAll('.figure.share')].{SHOWN}.map(c => c.querySelector('b').innerText)"
POINTS = (f"[...document.querySelectorAll('figure.roofline')].{SHOWN}"
          ".flatMap(f => [...f.querySelectorAll('.points circle')].map(c => +c.dataset.i))")  # fmt: skip


def run(*args: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main([*args, "-q"]) == 0
    return out.getvalue()


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """Per model: the HTML page the CLI writes, and the JSON of each view."""
    folder = tmp_path_factory.mktemp("first-screen")
    made = {}
    for name, (model, dims) in MODELS.items():
        if not model.exists():
            continue
        page = folder / f"{name}.html"
        run(str(model), *dims, "--format", "html", "-o", str(page))
        made[name] = (
            page,
            {view: json.loads(run(str(model), *dims, "--view", view, "--format", "json")) for view in VIEWS},
        )
    return made


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    browser = Browser(chromium_or_skip(), tmp_path_factory.mktemp("chromium-profile"), height=HEIGHT)
    yield browser
    browser.close()


def slowest(data: dict, count: int = 3) -> list[dict]:
    """The JSON's `count` slowest costed entries, heaviest first, ties in graph order."""
    costed = [n for n in data["nodes"] if n["status"] == "ok" and n["time_s"] is not None]
    return sorted(costed, key=lambda n: (-n["time_s"], n["index"]))[:count]


def plotted(data: dict) -> list[int]:
    """What a roofline can place: costed entries with FLOPs, a time and an intensity (log axes)."""
    return sorted(
        n["index"] for n in data["nodes"] if n["status"] == "ok" and n["flops"] and n["time_s"] and n["intensity"]
    )


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", MODELS)
def test_the_first_screen_and_the_switch_follow_the_json(page, outputs, name, width):
    if name not in outputs:
        pytest.skip("model not generated")
    path, data = outputs[name]
    page.call("Emulation.setDeviceMetricsOverride", width=width, height=HEIGHT, deviceScaleFactor=1, mobile=False)
    page.goto(path.as_uri())
    kernels = data["deployed"]["views"]["deployed"]["kernels"]
    assert data["written"]["views"]["deployed"]["kernels"] == kernels  # one count, whichever view the JSON leads with
    for view in VIEWS:
        page.click(f"#show-{view}")
        page.evaluate("window.scrollTo(0, 0)")  # the first screen, as opened
        rows = page.evaluate(SLOWEST)
        for row, entry in zip(rows[:3], slowest(data[view]), strict=True):
            assert row["bottom"] <= HEIGHT and row["right"] <= width, (view, row)  # on screen without scrolling
            assert row["name"] == re.sub(r"\s+", "", entry["name"]), view
            share = 100 * entry["time_s"] / data[view]["totals"]["time_s"]
            assert float(row["share"].rstrip("%")) == pytest.approx(share, abs=0.05), (
                view,
                entry["name"],
            )  # one decimal
            assert row["bound"] == f"{entry['bound']}-bound", (view, entry["name"])
        memory_share = 100 * data[view]["totals"]["memory_bound_time_share"]
        assert page.evaluate(SHARE_CARD) == [f"{memory_share:.1f}%"], view
        assert sorted(page.evaluate(POINTS)) == plotted(data[view]), view
        counts = {int(c.replace(",", "")) for c in KERNEL_COUNT.findall(page.evaluate("document.body.innerText"))}
        assert counts == {kernels}, view
    assert page.errors() == []


def test_each_slowest_node_says_what_it_becomes_deployed(page, outputs):
    """As written, the note of each slowest node: foldable (gone at load), or the deployed kernel
    that runs it, alone or with the other graph nodes of its JSON `members`."""
    if "gpt2_decode" not in outputs:
        pytest.skip("fixture not generated")
    path, data = outputs["gpt2_decode"]
    page.goto(path.as_uri())
    page.click("#show-written")
    notes = page.evaluate(f"[...document.querySelectorAll('table[id^=\"slowest\"]')].{SHOWN}"
                          ".flatMap(t => [...t.tBodies[0].rows]).map(r => r.lastElementChild.innerText)")  # fmt: skip
    kernel_of = {i: kernel for kernel in data["deployed"]["nodes"] for i in kernel["members"]}
    for note, node in zip(notes, slowest(data["written"], len(notes)), strict=True):
        if node["constant_foldable"]:
            assert note.startswith("foldable"), node["name"]
        elif len(kernel_of[node["index"]]["members"]) == 1:
            assert note.startswith("deployed: its own kernel"), node["name"]
        else:
            assert f" of {len(kernel_of[node['index']]['members'])} nodes" in note, node["name"]
