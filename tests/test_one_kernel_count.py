"""One kernel count on the HTML page (issue 41): the summary's floor, the deployed switch and the
deployed table's line all give the deployed view's kernels launched, the JSON's
`views.deployed.kernels`, and no other number is called kernels (the deployed table's other rows
launch nothing and are called rows; the written view's launches are "every node its own kernel")."""

from __future__ import annotations

import contextlib
import html
import io
import json
import re

import pytest

from onnx_roofline.commands.cli import main
from tests.browser import browser  # noqa: F401 (the fixture)
from tests.conftest import FIXTURES, REPO

MODELS = [
    FIXTURES / "gpt2_decode_fp16.onnx",  # 91 kernels launched against 203 deployed rows when filed
    FIXTURES / "resnet50_fp16.onnx",
    REPO / "tests/corpus/models/genai_llama_fp32.onnx",  # onnxruntime-genai's builder
    REPO / "tests/corpus/models/qdq_resnet.onnx",  # quantize_static, QDQ
]
KERNEL_COUNT = re.compile(r"(\d[\d,]*) kernels\b")


def run(*args: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main([*args, "-q"]) == 0
    return out.getvalue()


def page_text(page: str) -> str:
    """The words a reader sees (either view's), without scripts, styles and tags."""
    page = re.sub(r"<(script|style)\b.*?</\1>", " ", page, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


@pytest.mark.parametrize("model", MODELS, ids=lambda p: p.name)
def test_the_page_gives_one_kernel_count_the_jsons(model, tmp_path):
    if not model.exists():
        pytest.skip("model not generated")
    data = json.loads(run(str(model), "--format", "json"))
    run(str(model), "--format", "html", "-o", str(tmp_path / "report.html"))
    counts = {int(c.replace(",", "")) for c in KERNEL_COUNT.findall(page_text((tmp_path / "report.html").read_text()))}
    assert counts == {data["views"]["deployed"]["kernels"]}


def test_the_browser_shows_one_kernel_count_in_either_view(browser, tmp_path):  # noqa: F811
    model = MODELS[0]
    if not model.exists():
        pytest.skip("fixture not generated")
    data = json.loads(run(str(model), "--format", "json"))
    path = tmp_path / "report.html"
    run(str(model), "--format", "html", "-o", str(path))
    browser.goto(path.as_uri())
    for view in ("written", "deployed"):
        browser.click(f"#show-{view}")
        text = browser.evaluate("document.body.innerText")
        assert {int(c.replace(",", "")) for c in KERNEL_COUNT.findall(text)} == {
            data["views"]["deployed"]["kernels"]
        }, view
    assert browser.errors() == []
