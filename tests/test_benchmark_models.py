"""The graphs benchmarks/models.py generates are valid ONNX: a benchmark whose model the analysis
flags INVALID times the conformance re-check (the file checked whole again) on every analysis,
which no valid file pays, and says nothing of the tool on real graphs."""

from __future__ import annotations

import onnx
import pytest

from benchmarks import models
from onnx_roofline import Sizing, analyze


@pytest.mark.parametrize(
    "make, dims",
    [
        (
            lambda: models._Decoder(2, 256, 4, 2, 512, 1000).model(),
            {"batch": 2, "past_sequence": 31},
        ),  # Llama-shaped, small
        (lambda: models.chain(300), {"batch": 1}),
        (lambda: models.ifs(3), {"batch": 1}),
    ],
    ids=["decoder", "chain", "ifs"],
)
def test_the_benchmark_graphs_are_valid_onnx(make, dims):
    model = make()
    # onnx's strict type and shape inference, the oracle (its checker would look for the absent weights' file)
    onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    report = analyze(model, sizing=Sizing(dims=dims))
    assert report.model.invalid == ()
    assert all(node.status == "ok" for node in report.nodes)
