"""The converter-style models of tests/corpus/shipped (sz_*.onnx, made by
tests/corpus/shipped_sizes.py, README_sizes.md): the plain command against each manifest, whose
figures that script computes without onnx_roofline — FLOPs by formula from the architecture, the
weights by walking every graph's initializers and Constant nodes. Skipped where the corpus is absent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import onnx_roofline
from onnx_roofline import Sizing
from onnx_roofline.commands.inspect import inspect_model

SHIPPED = Path(__file__).parent / "corpus" / "shipped"
MANIFESTS = sorted(SHIPPED.glob("sz_*.json"))

pytestmark = pytest.mark.skipif(not MANIFESTS, reason="tests/corpus/shipped has no sz_* models")


def _manifest(path: Path) -> dict:
    return json.loads(path.read_text())


def _model(manifest: Path) -> Path:
    return manifest.with_suffix(".onnx")


@pytest.mark.parametrize("manifest", MANIFESTS, ids=lambda p: p.stem)
def test_parameters_and_weight_bytes_are_every_weight(manifest):
    weights = _manifest(manifest)["weights"]
    report = onnx_roofline.analyze(_model(manifest), sizing=Sizing(default_dims=True))
    assert report.model.parameters == weights["elements"]
    assert (
        report.memory.weight_bytes + report.memory.untaken_branch_weight_bytes == weights["bytes"]
    )  # held: read or not
    info = inspect_model(_model(manifest))
    assert (info.parameters, info.weight_bytes, info.weight_tensors) == (
        weights["elements"],
        weights["bytes"],
        weights["count"],
    )


def _plain_input_shapes(report) -> dict[str, list[int]]:
    return {
        t.name: list(t.shape)
        for node in report.nodes
        for t in node.inputs
        if t is not None and t.name in report.model.graph_inputs
    }


@pytest.mark.parametrize(
    "manifest",
    [m for m in MANIFESTS if "values" not in json.dumps(_manifest(m)["expect"].get("flops", []))],
    ids=lambda p: p.stem,
)
def test_the_plain_command_costs_the_size_the_manifest_computes(manifest):
    """No 1×1 image, no 1-sample signal: the plain command's matrix FLOPs are the manifest's at
    the sizes it took (224×224 images, batch 1, 16,000 audio samples)."""
    expect = _manifest(manifest)["expect"]
    report = onnx_roofline.analyze(_model(manifest), sizing=Sizing(default_dims=True))
    assert not report.model.implausible
    taken = _plain_input_shapes(report)
    matching = [
        entry
        for entry in expect["flops"]
        if all(taken.get(name) == shape for name, shape in entry["at"].get("input_shapes", {}).items())
    ]
    assert matching, f"the plain command took {taken}, which no manifest entry is computed at"
    assert report.totals.matrix_flops == matching[0]["matrix"]


@pytest.mark.parametrize("manifest", MANIFESTS, ids=lambda p: p.stem)
def test_every_default_has_the_role_the_manifest_says(manifest):
    data = _manifest(manifest)
    report = onnx_roofline.analyze(_model(manifest), sizing=Sizing(default_dims=True))
    roles = {name: d.role for name, d in report.model.dim_roles.items()}
    for key, role in data["expect"].get("roles", {}).items():
        if "(output)" in role or "(one name)" in role:  # an output's dim is never bound; `?` is anonymous per axis
            continue
        name = key.replace("[", "_dim").rstrip("]") if key.endswith("]") else key
        assert roles.get(name) == role, (name, roles)


@pytest.mark.parametrize(
    "manifest", [m for m in MANIFESTS if _manifest(m).get("named_counterpart")], ids=lambda p: p.stem
)
def test_a_variant_analyzes_as_its_named_counterpart(manifest):
    named = SHIPPED / f"{_manifest(manifest)['named_counterpart']}.onnx"
    variant = onnx_roofline.analyze(_model(manifest), sizing=Sizing(default_dims=True))
    counterpart = onnx_roofline.analyze(named, sizing=Sizing(default_dims=True))
    assert variant.totals.flops == counterpart.totals.flops
    assert variant.totals.bytes == counterpart.totals.bytes


def test_the_ocr_detector_at_the_size_its_package_feeds():
    """paddle2onnx's DB-like detector at 736×960 (what an OCR package feeds), bound by hand."""
    manifest = SHIPPED / "sz_p2o_det.json"
    if not manifest.exists():
        pytest.skip("no sz_p2o_det")
    entry = next(e for e in _manifest(manifest)["expect"]["flops"] if e["at"]["input_shapes"]["x"] == [1, 3, 736, 960])
    report = onnx_roofline.analyze(_model(manifest), sizing=Sizing(input_shapes={"x": (1, 3, 736, 960)}))
    assert report.totals.matrix_flops == entry["matrix"]


def test_the_vad_that_needs_its_rate_names_it():
    manifest = SHIPPED / "sz_vad_sr.json"
    if not manifest.exists():
        pytest.skip("no sz_vad_sr")
    for entry in _manifest(manifest)["expect"]["flops"]:
        report = onnx_roofline.analyze(
            _model(manifest), sizing=Sizing(input_shapes=entry["at"]["input_shapes"], values=entry["at"]["values"])
        )
        assert report.totals.matrix_flops == entry["matrix"]
