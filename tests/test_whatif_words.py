"""What the what-if studies' headers and axes say (issue 41): sweep's header names which columns
follow the view swept and which are the deployed kernels', as its footnotes do; serve's plot draws
throughput per GPU, so that a wider tensor-parallel group is not drawn better for its GPUs alone."""

from __future__ import annotations

import re

import pytest

from onnx_roofline import Sizing, analyze
from onnx_roofline.commands.cli import main
from onnx_roofline.report.units import duration
from onnx_roofline.views.deployed import INPLACE, deploy
from tests.conftest import FIXTURES

DECODE = FIXTURES / "gpt2_decode_fp16.onnx"


@pytest.fixture(autouse=True)
def fixture_present():
    if not DECODE.exists():
        pytest.skip("fixture not generated")


def test_the_sweep_header_says_which_columns_are_deployed(capsys):
    assert main(["sweep", str(DECODE), "--dim", "batch=1,2", "--dim", "past_sequence=1023"]) == 0
    title, header, _, first, *notes = capsys.readouterr().out.splitlines()
    assert title.endswith("written view (latency, tokens/s, FLOP/B, bytes: every node its own kernel, as written; "
                          "predicted, predicted tokens/s, compute-bound, memory: the deployed kernels)")  # fmt: skip
    assert "lower bound" not in title and any(
        "predicted = the deployed kernels" in n and "whatever the view" in n for n in notes
    )
    written = analyze(DECODE, sizing=Sizing(dims={"batch": 1, "past_sequence": 1023}))
    deployed = deploy(written, INPLACE)  # sweep's default KV cache
    columns = dict(zip(re.split(r"\s{2,}", header.strip()), re.split(r"\s{2,}", first.strip()), strict=True))
    assert columns["latency"] == duration(written.totals.time_s)  # the view swept: as written
    assert columns["predicted"] == duration(deployed.prediction.time_s)  # the deployed kernels, whatever the view


def test_the_deployed_sweep_header_says_deployed_only(capsys):
    assert main(["sweep", str(DECODE), "--dim", "batch=1,2", "--dim", "past_sequence=1023", "--view", "deployed"]) == 0
    title = capsys.readouterr().out.splitlines()[0]
    assert title.endswith("deployed view (times: deployed bounds, the floor no runtime beats, KV cache inplace)")
    assert "as written" not in title


def test_the_serve_plot_draws_throughput_per_gpu():
    from onnx_roofline.commands.whatif import Session
    from onnx_roofline.commands.whatif.serve import serve
    from onnx_roofline.commands.whatif.serve_plot import serve_figure

    result = serve(
        Session(str(DECODE), hw="h100", kv_cache="inplace"), degrees=(1, 2, 4), batches=(1, 8, 64), context=1024
    )
    axes = serve_figure(result).axes[0]
    assert "per GPU" in axes.get_ylabel()
    solid = [line for line in axes.get_lines() if line.get_linestyle() == "-" and len(line.get_ydata())]
    for line, degree in zip(solid, result.degrees, strict=True):
        per_gpu = [
            p.batch / p.decode.time_s / degree.devices for p in degree.points
        ]  # batch tokens per step, over the group's GPUs
        assert list(line.get_ydata()) == pytest.approx(per_gpu, rel=1e-12)
