"""The annotated ONNX: figures in metadata and doc_string, shapes on edges, weights still usable,
the input untouched; onnxruntime runs it with identical outputs; Netron shows the figures."""

from __future__ import annotations

import hashlib
import json
import re
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnx_roofline import Sizing, analyze
from onnx_roofline.commands.cli import main
from onnx_roofline.commands.verify.inputs import make_feeds
from onnx_roofline.commands.verify.weights import materialize
from onnx_roofline.errors import RooflineError
from onnx_roofline.report.annotate import NAMESPACE, annotate, sidecar_path
from tests.browser import Browser, chromium_or_skip, save_artifact
from tests.conftest import FIXTURES

DECODE = FIXTURES / "gpt2_decode_fp32.onnx"
DECODE_DIMS = {"batch": 1, "past_sequence": 7}


def small_model(folder: Path, name: str = "mlp.onnx") -> Path:
    """x[n,4] → MatMul(w 4×8) → Relu (unnamed) → y, the weight in an external data file."""
    w = np.arange(32, dtype=np.float32).reshape(4, 8) / 10
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"], name="/fc/MatMul"), helper.make_node("Relu", ["h"], ["y"])],
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 8])],
        [numpy_helper.from_array(w, "w")],
    )
    path = folder / name
    onnx.save(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
        path,
        save_as_external_data=True,
        location=name + ".data",
        size_threshold=0,
    )
    return path


def fingerprint(*paths: Path) -> list[tuple[str, int]]:
    return [(hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns) for p in paths]


def props(entries) -> dict[str, str]:
    return {p.key: p.value for p in entries}


def run(path: Path, feeds: dict) -> list[np.ndarray]:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)


def test_every_node_and_the_model_carry_the_figures(tmp_path):
    source = small_model(tmp_path)
    report = analyze(source, sizing=Sizing(dims={"n": 2}))
    result = annotate(report, tmp_path / "annotated.onnx")
    model = onnx.load(result.model, load_external_data=False)

    matmul, relu = model.graph.node
    assert relu.name == "Relu_1"  # unnamed nodes get the report's name: Netron's attachment needs one
    figures = {k[len(NAMESPACE) :]: v for k, v in props(matmul.metadata_props).items() if k.startswith(NAMESPACE)}
    assert figures["flops"] == str(2 * 2 * 4 * 8)  # 2·M·K·N
    assert figures["bytes"] == str(4 * (2 * 4 + 4 * 8 + 2 * 8))  # x and w read, h written, float32
    assert figures["bound"] == "memory" and figures["unit"] == "matrix" and figures["dtype"] == "fp32"
    assert figures["module"] == "fc" and figures["status"] == "ok"
    assert float(figures["share"]) == pytest.approx(report.nodes[0].time_s / report.totals.time_s, rel=1e-5)
    assert matmul.doc_string.startswith("onnx-roofline [h100]: memory-bound · 128 FLOP · 224 B")
    assert "\n" not in matmul.doc_string  # one line

    summary = props(model.metadata_props)
    assert summary[NAMESPACE + "flops"] == str(report.totals.flops)
    assert summary[NAMESPACE + "dims"] == "n=2" and summary[NAMESPACE + "hardware"] == "h100"

    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in model.graph.value_info}
    assert shapes["h"] == [2, 8]  # the edge shows the shape the figures were computed for
    assert [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim] == [2, 4]


def test_netron_attachment_names_every_node(tmp_path):
    source = small_model(tmp_path)
    report = analyze(source, sizing=Sizing(dims={"n": 2}))
    result = annotate(report, tmp_path / "annotated.onnx")
    assert result.sidecar == sidecar_path(result.model) == tmp_path / "annotated.netron.json"
    attachment = json.loads(result.sidecar.read_text())
    assert attachment["signature"] == "netron:attachment"
    names = {n.name for n in onnx.load(result.model, load_external_data=False).graph.node}
    by_target = {}
    for metric in attachment["metrics"]:
        assert metric.keys() >= {"kind", "target", "name", "value"}
        by_target.setdefault((metric["kind"], metric["target"]), {})[metric["name"]] = metric["value"]
    assert {target for kind, target in by_target if kind == "node"} == names
    assert by_target[("node", "/fc/MatMul")]["flops"] == "128 FLOP"
    assert ("model", "") in by_target


def test_runs_with_identical_outputs_and_the_input_is_untouched(tmp_path):
    (tmp_path / "in").mkdir()
    source = small_model(tmp_path / "in")
    before = fingerprint(source, source.with_name(source.name + ".data"))
    feeds = {"x": np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)}
    expected = run(source, feeds)
    report = analyze(source, sizing=Sizing(dims={"n": 2}))

    same_folder = annotate(report, source.with_name("same.onnx"))
    assert same_folder.data_action == "kept" and same_folder.data_files == ("mlp.onnx.data",)
    (tmp_path / "out").mkdir()
    elsewhere = annotate(report, tmp_path / "out" / "annotated.onnx")
    assert elsewhere.data_action in ("linked", "copied") and elsewhere.data_files == ("annotated.onnx.data",)
    again = annotate(report, tmp_path / "out" / "annotated.onnx")  # over the previous output
    assert again.data_files == elsewhere.data_files
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "annotated.netron.json",
        "annotated.onnx",
        "annotated.onnx.data",
    ]
    for result in (same_folder, elsewhere):
        for got, want in zip(run(result.model, feeds), expected, strict=False):
            np.testing.assert_array_equal(got, want)
    assert fingerprint(source, source.with_name(source.name + ".data")) == before
    for target in (source, source.with_name(source.name + ".data")):  # neither the model nor its weights
        with pytest.raises(RooflineError, match="refusing to overwrite the input"):
            annotate(report, target)
    assert fingerprint(source, source.with_name(source.name + ".data")) == before


def test_absent_weights_stay_referenced(tmp_path):
    source = small_model(tmp_path)
    source.with_name(source.name + ".data").unlink()  # weight-stripped, like the committed fixtures
    (tmp_path / "out").mkdir()
    result = annotate(analyze(source, sizing=Sizing(dims={"n": 2})), tmp_path / "out" / "a.onnx")
    assert result.data_action == "absent" and result.data_files == ("mlp.onnx.data",)


def test_annotating_twice_replaces_the_figures(tmp_path):
    source = small_model(tmp_path)
    first = annotate(analyze(source, sizing=Sizing(dims={"n": 2})), tmp_path / "once.onnx")
    second = annotate(analyze(first.model, sizing=Sizing(dims={})), tmp_path / "twice.onnx")
    node = onnx.load(second.model, load_external_data=False).graph.node[0]
    keys = [p.key for p in node.metadata_props]
    assert len(keys) == len(set(keys))
    assert node.doc_string.count("onnx-roofline [") == 1


def test_keys_are_short_enough_for_netrons_sidebar_and_old_ones_are_replaced(tmp_path):
    """Netron cuts a metadata key after ~16 characters: every key fits whole, and none is a
    prefix-cut copy of another; a model annotated by an earlier release loses its old keys."""
    source = small_model(tmp_path)
    first = annotate(analyze(source, sizing=Sizing(dims={"n": 2})), tmp_path / "once.onnx")
    model = onnx.load(first.model, load_external_data=False)
    model.graph.node[0].metadata_props.add(key="onnx_roofline.bytes_written", value="1")  # an earlier release's key
    onnx.save(model, tmp_path / "old.onnx")
    again = onnx.load(
        annotate(analyze(tmp_path / "old.onnx", sizing=Sizing(dims={})), tmp_path / "new.onnx").model,
        load_external_data=False,
    )
    for props_list in (again.metadata_props, *(n.metadata_props for n in again.graph.node)):
        ours = [p.key for p in props_list if p.key.startswith(NAMESPACE)]
        assert ours and all(len(key) <= 16 for key in ours), ours
        assert not any(p.key.startswith("onnx_roofline.") for p in props_list)


def test_a_precision_override_keeps_the_real_types(tmp_path):
    source = small_model(tmp_path)
    report = analyze(source, precision="fp16", sizing=Sizing(dims={"n": 2}))
    result = annotate(report, tmp_path / "a.onnx")
    model = onnx.load(result.model, load_external_data=False)
    assert {v.type.tensor_type.elem_type for v in model.graph.value_info} == {TensorProto.FLOAT}
    assert props(model.metadata_props)[NAMESPACE + "precision"] == "fp16"
    run(result.model, {"x": np.ones((2, 4), dtype=np.float32)})


def test_a_sequence_is_annotated_as_a_sequence_of_its_elements_shape(tmp_path):
    """SplitToSequence → SequenceAt (dynamo's unoptimized torch.split): the sequence's value_info
    is a sequence of [2, 1, 4] tensors (x [2, 3, 4] split in 3 along axis 1), not a tensor — which
    would make the annotated model invalid — and onnxruntime runs it to the same output."""
    nodes = [
        helper.make_node("SplitToSequence", ["x"], ["s"], axis=1),
        helper.make_node("SequenceAt", ["s", "i"], ["a"]),
        helper.make_node("Relu", ["a"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "split",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[helper.make_tensor("i", TensorProto.INT64, [], [1])],
    )
    source = tmp_path / "split.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), source)
    result = annotate(analyze(source, sizing=Sizing(dims={"b": 2})), tmp_path / "a.onnx")
    model = onnx.load(result.model)
    onnx.checker.check_model(model, full_check=True)
    (sequence,) = [v for v in model.graph.value_info if v.name == "s"]
    element = sequence.type.sequence_type.elem_type.tensor_type
    assert [d.dim_value for d in element.shape.dim] == [2, 1, 4] and element.elem_type == TensorProto.FLOAT
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    (y,) = run(result.model, {"x": x})
    assert np.array_equal(y, np.maximum(x[:, 1:2], 0))


def test_cli_annotate_flag(tmp_path, capsys):
    source = small_model(tmp_path)
    out = tmp_path / "cli.onnx"
    assert main([str(source), "--dim", "n=2", "--format", "json", "--annotate", str(out)]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["schema_version"] == 1  # stdout stays the report
    assert str(out) in captured.err and out.exists() and sidecar_path(out).exists()


@pytest.mark.skipif(not DECODE.exists(), reason="fixture not generated")
def test_gpt2_decode_annotated_gives_identical_outputs(tmp_path):
    """The acceptance case: GPT-2 decode with weights (synthesized: the fixture ships without them)."""
    stripped = onnx.load(DECODE, load_external_data=False)
    (tmp_path / "in").mkdir()
    (tmp_path / "out").mkdir()
    source = tmp_path / "in" / "decode.onnx"
    onnx.save(materialize(stripped, None).model, source, save_as_external_data=True, location="decode.onnx.data")
    before = fingerprint(source)
    report = analyze(source, sizing=Sizing(dims=DECODE_DIMS))
    result = annotate(report, tmp_path / "out" / "decode.annotated.onnx")
    feeds = make_feeds(stripped, DECODE_DIMS)
    for got, want in zip(run(result.model, feeds), run(source, feeds), strict=True):
        np.testing.assert_array_equal(got, want)
    assert fingerprint(source) == before


# --- shown in a real Netron -----------------------------------------------------------------------

NODE = "/model/transformer/h.0/attn/MatMul"  # decode's Q·Kᵀ: 1.0 FLOP/B, deep in memory-bound land


@pytest.fixture
def netron():
    return pytest.importorskip("netron")


@pytest.fixture
def annotated_decode(tmp_path):
    source = FIXTURES / "gpt2_decode_fp16.onnx"
    if not source.exists():
        pytest.skip("fixture not generated")
    (tmp_path / "out").mkdir()
    report = analyze(source, sizing=Sizing(dims={"batch": 1, "past_sequence": 1023}))
    return annotate(report, tmp_path / "out" / "gpt2_decode.annotated.onnx")


def open_netron(browser: Browser, url: str) -> None:
    browser.call("Network.setBlockedURLs", urls=["https://*"])  # its telemetry and update checks
    browser.call("Network.setCookie", name="consent", value="1", url=url)  # skips the cookie banner
    browser.goto(url)


def select_node(browser: Browser, name: str) -> dict[str, str]:
    """Click the node in the graph, as a person would; the sidebar's rows, name → value."""
    node = f'[id="node-name-{name}"]'
    browser.wait_until(
        f"(e => e && e.getAttribute('transform'))(document.querySelector({json.dumps(node)}))", timeout=60
    )
    deadline = time.monotonic() + 30
    while True:  # Netron may be between views (its spinner) when the click lands, or close the sidebar
        browser.click(f"{node} .node-item-type")  # as it re-renders for an attachment it read meanwhile: click again
        try:
            browser.wait_until("document.querySelectorAll('#sidebar-content .sidebar-item').length", timeout=2)
            browser.wait_until(
                "(s => getComputedStyle(s).opacity === '1' && Math.abs(s.getBoundingClientRect().right - innerWidth) < 1)"
                "(document.getElementById('sidebar'))",
                timeout=3,
            )  # slid in: the screenshot shows it whole
            break
        except TimeoutError:
            if time.monotonic() > deadline:
                raise
    rows = browser.evaluate(
        "[...document.querySelectorAll('#sidebar-content .sidebar-item')].map(item => ["
        "item.querySelector('.sidebar-item-name input').value, item.querySelector('.sidebar-item-value-list').innerText])"
    )
    return {key: value.strip() for key, value in rows}


def skip_if_netron_refuses(browser: Browser) -> None:
    if "Please update to the newest version" in (browser.evaluate("document.body.innerText") or ""):
        pytest.skip("this netron release is over 180 days old and refuses to run: upgrade it")


def test_netron_serving_the_annotated_model_shows_the_metadata(netron, annotated_decode, tmp_path):
    chromium = chromium_or_skip()
    address = netron.serve(str(annotated_decode.model), address=("127.0.0.1", 0), browse=False)
    browser = Browser(chromium, tmp_path / "profile")
    try:
        url = f"http://{address[0]}:{address[1]}/"
        open_netron(browser, url)
        skip_if_netron_refuses(browser)
        sidebar = select_node(browser, NODE)
        shot = browser.screenshot(tmp_path / "netron-served.png")
        assert sidebar["rl.bound"] == "memory" and sidebar["rl.unit"] == "matrix"
        assert int(sidebar["rl.flops"]) == 2 * 12 * 1 * 64 * 1024  # Q·Kᵀ for one new token over 1024 positions
        assert sidebar["description"].startswith("onnx-roofline [h100]: memory-bound")
        assert "1×12×1×1024" in browser.evaluate("document.getElementById('canvas').textContent")  # edges show shapes
        assert browser.errors() == []
        assert all(
            u.startswith(url) or u.startswith("data:") for u in browser.requested_urls() if not u.startswith("https:")
        )
        save_artifact(shot)
    finally:
        browser.close()
        netron.stop(address)


def test_netron_attachment_adds_a_metrics_section(netron, annotated_decode, tmp_path):
    """Netron as a person uses it: open the model, then the attachment, from the file dialog."""
    chromium = chromium_or_skip()
    address = netron.serve(None, address=("127.0.0.1", 0), browse=False)
    browser = Browser(chromium, tmp_path / "profile", width=1600, height=1300)
    try:
        open_netron(browser, f"http://{address[0]}:{address[1]}/")
        skip_if_netron_refuses(browser)
        browser.wait_until(
            "document.body.classList.contains('welcome') && !document.body.classList.contains('spinner')"
        )
        browser.set_files("#open-file-dialog", [str(annotated_decode.model)])
        select_node(browser, NODE)
        browser.set_files("#open-file-dialog", [str(annotated_decode.sidecar)])
        deadline = time.monotonic() + 10
        while "share of model time" not in (sidebar := select_node(browser, NODE)) and time.monotonic() < deadline:
            time.sleep(0.2)  # the attachment is read asynchronously
        assert sidebar["bound"] == "memory" and sidebar["unit"] == "matrix/fp16"
        assert sidebar["intensity"] == "1.0 FLOP/B" and re.fullmatch(r"[\d.]+ ns", sidebar["time (lower bound)"])
        assert sidebar["rl.bound"] == "memory"  # the model's own metadata is still there
        assert browser.errors() == []
        save_artifact(browser.screenshot(tmp_path / "netron.png"))
    finally:
        browser.close()
        netron.stop(address)
