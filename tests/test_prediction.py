"""The predicted time beside the bound, and the headline no runtime beats (issue 40): wave
quantization and the per-kernel formula worked by hand, launches, the hardware table's figures,
and every format printing the deployed bound first."""

from __future__ import annotations

import dataclasses
import json
import math

import onnx
import pytest

from onnx_roofline import Sizing, analyze
from onnx_roofline.commands.cli import main
from onnx_roofline.costs.hardware import load_hardware
from onnx_roofline.costs.hardware.achievable import Achievable, parse_achievable
from onnx_roofline.costs.prediction import EAGER, GRAPHS, kernel_time, launch_time, wave_quantization
from onnx_roofline.errors import HardwareSpecError
from onnx_roofline.report.units import duration
from onnx_roofline.views.deployed import INPLACE, deploy
from onnx_roofline.views.prediction import predict
from tests.conftest import FIXTURES

# The H100 entry's figures, written out: 132 SMs, four tiles, 90 % of the bandwidth, 75 % of peak.
H100 = Achievable(0.90, 0.75, 132, ((128, 256), (128, 128), (64, 128), (64, 64)), 2e-6, 0.5e-6, "test", {})
DECODE, PREFILL, RESNET = (
    FIXTURES / "gpt2_decode_fp16.onnx",
    FIXTURES / "gpt2_prefill_fp16.onnx",
    FIXTURES / "resnet50_fp16.onnx",
)


def test_a_gemm_that_fills_whole_waves_loses_nothing():
    # 1536 × 2816 in 128 × 256 tiles: 12 · 11 = 132 tiles, one full wave of 132 SMs
    assert wave_quantization(1, 1536, 2816, 4096, H100) == 1.0


def test_a_gemm_that_leaves_sms_idle_takes_a_whole_wave():
    # GPT-2's MLP down-projection at 1024 tokens, 1024 × 768 (K = 3072). Per tile, waves · 132 SMs · tile area / (M·N):
    # 128×256: 8·3 = 24 tiles, 1 wave: 132·128·256 / 786432 = 5.5; 128×128: 48 tiles: 132·16384/786432 = 2.75;
    # 64×128: 96 tiles, 1 wave: 132·8192/786432 = 1.375; 64×64: 192 tiles, 2 waves: 2·132·4096/786432 = 1.375
    assert wave_quantization(1, 1024, 768, 3072, H100) == pytest.approx(1.375)


def test_a_gemm_narrower_than_a_tile_runs_a_narrower_tile():
    # a decode GEMV, M = 1, N = 4096: 64 tiles of 64 wide fill 64 SMs in one wave; the tile clipped to 1 row:
    # 132 · 1 · 64 / (1 · 4096) = 2.0625 (any tile: 132 · 1 · 64 / 4096 is the best)
    assert wave_quantization(1, 1, 4096, 4096, H100) == pytest.approx(132 * 64 / 4096)


def test_the_kernel_time_is_the_slowest_of_compute_memory_and_the_floor():
    assert kernel_time(30e-6, 9e-6, H100) == pytest.approx(30e-6 / 0.75)  # compute-bound: 40 µs
    assert kernel_time(3e-6, 9e-6, H100, quantization=2.0) == pytest.approx(
        10e-6
    )  # memory: 9 / 0.9; compute 3 · 2 / 0.75 = 8
    assert kernel_time(0.1e-6, 0.2e-6, H100) == 2e-6  # a tiny kernel takes the 2 µs floor


def test_fp8_gemms_reach_their_own_fraction_of_their_doubled_peak():
    """DeepGEMM's six M = 4096 dense FP8 rows on H800 (1,058, 990, 590, 1,358, 1,304 and 1,025 TFLOPS):
    median (1,025 + 1,058) / 2 = 1,041.5 of the 1,979 dense FP8 peak, 0.53; other dtypes keep 0.75."""
    h100 = load_hardware("h100").achievable
    assert h100.matrix_fraction("fp8") == pytest.approx(round(1041.5 / 1978.9, 2))
    assert kernel_time(30e-6, 9e-6, h100, matrix_dtype="fp8") == pytest.approx(30e-6 / 0.53)
    assert kernel_time(30e-6, 9e-6, h100, matrix_dtype="bf16") == pytest.approx(30e-6 / 0.75)
    assert kernel_time(30e-6, 9e-6, h100) == pytest.approx(30e-6 / 0.75)  # vector work
    assert "DeepGEMM" in h100.sources["compute_fractions"]


def test_an_fp8_model_is_predicted_at_the_fp8_fraction(tmp_path):
    """One 8192³ MatMul costed in fp16 and in fp8: the fp8 bound is the fp16 one × 989.4 / 1,978.9
    (the dense peaks), and its predicted kernel time (0.53 of that peak, not 0.75) that ratio × 0.75 /
    0.53 of the fp16 one, the same tiles and waves in both."""
    from onnx import TensorProto, helper

    m = k = n = 8192
    inputs = [
        helper.make_tensor_value_info("a", TensorProto.FLOAT16, [m, k]),
        helper.make_tensor_value_info("b", TensorProto.FLOAT16, [k, n]),
    ]
    graph = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["c"])], "g", inputs,
                              [helper.make_tensor_value_info("c", TensorProto.FLOAT16, [m, n])])  # fmt: skip
    path = tmp_path / "mm.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    deployed = {dtype: deploy(analyze(path, hw="h100", precision=dtype), INPLACE) for dtype in ("fp16", "fp8")}
    assert deployed["fp8"].totals.time_s == pytest.approx(
        deployed["fp16"].totals.time_s * 989.4 / 1978.9
    )  # the datasheet's peaks
    fp8, fp16 = (deployed[dtype].prediction.kernels_s for dtype in ("fp8", "fp16"))
    assert fp8 / fp16 == pytest.approx(989.4 / 1978.9 * 0.75 / 0.53)


def test_launches_eager_and_from_a_graph():
    times = [1e-6, 10e-6, 3e-6]
    assert launch_time(times, EAGER, 4e-6, H100) == pytest.approx(
        (4 - 1 + 0 + 4 - 3) * 1e-6
    )  # each waits for its submission
    assert launch_time(times, GRAPHS, 4e-6, H100) == pytest.approx(
        3 * 0.5e-6 + 4e-6
    )  # per kernel, and one graph launch
    with pytest.raises(ValueError, match="launch must be one of"):
        launch_time(times, "lazy", 4e-6, H100)


def test_the_h100_entry_cites_every_figure():
    achievable = load_hardware("h100").achievable
    assert achievable.sms == 132 and achievable.tiles[0] == (128, 256)
    assert {"bandwidth_fraction", "compute_fraction", "sms", "tiles", "kernel_floor", "graph_launch"} <= set(
        achievable.sources
    )
    assert "dl-performance-matrix-multiplication" in achievable.source


@pytest.mark.parametrize("table, message", [
    ({"bandwidth_fraction": 1.5}, "bandwidth_fraction` must be a fraction"),
    ({"tiles": [[128]]}, "tiles` must be a list"),
    ({"sms": 0}, "sms` must be a positive integer"),
    ({"cache": 1}, "cache` is not a field"),
])  # fmt: skip
def test_a_malformed_achievable_table_is_one_line(table, message):
    good = {"bandwidth_fraction": 0.9, "compute_fraction": 0.75, "sms": 132, "tiles": [[128, 256]], "kernel_floor": 2e-6,
            "graph_launch": 0.5e-6, "source": "a paper"}  # fmt: skip
    with pytest.raises(HardwareSpecError, match=message):
        parse_achievable({**good, **table}, "spec.toml")


@pytest.fixture(scope="module")
def decode():
    return deploy(analyze(DECODE, sizing=Sizing(dims={"batch": 1, "past_sequence": 1023})), INPLACE)


def test_the_prediction_sums_its_kernels_and_never_beats_the_bound(decode):
    prediction = decode.prediction
    assert prediction.launch == GRAPHS  # the default: what serving engines do for decode
    kernels = [t for t in prediction.per_kernel if t is not None]
    assert prediction.kernels_s == pytest.approx(sum(kernels))
    assert prediction.time_s == pytest.approx(prediction.kernels_s + prediction.launch_s)
    for kernel, predicted in zip(decode.nodes, prediction.per_kernel, strict=True):
        if kernel.launches:  # each launched kernel: at least its bound over the fractions, and the floor
            assert predicted >= max(kernel.placement.memory_time_s / 0.9, 2e-6) - 1e-15
    eager = predict(decode, EAGER)
    launched = [t for k, t in zip(decode.nodes, eager.per_kernel, strict=True) if k.launches]
    assert eager.time_s == pytest.approx(
        sum(max(t, 4e-6) for t in launched)
        + sum(t for k, t in zip(decode.nodes, eager.per_kernel, strict=True) if not k.launches)
    )


def test_an_entry_without_achievable_figures_predicts_its_bound(decode):
    bare = dataclasses.replace(decode, hardware=dataclasses.replace(decode.hardware, achievable=None))
    prediction = predict(bare)
    assert prediction.time_s == pytest.approx(decode.totals.time_s) and prediction.achievable is None
    assert "predicted = bound" in prediction.assumptions[0]


@pytest.mark.parametrize("model, dims", [
    (RESNET, ["--dim", "batch=1"]),
    (PREFILL, ["--dim", "batch=1", "--dim", "sequence=1024"]),
    (DECODE, ["--dim", "batch=1", "--dim", "past_sequence=1023"]),
])  # fmt: skip
def test_the_headline_is_the_deployed_bound_in_every_format(model, dims, capsys, tmp_path):
    assert main([str(model), *dims, "--format", "json", "-q"]) == 0
    data = json.loads(capsys.readouterr().out)
    floor, predicted = data["totals"]["floor_time_s"], data["totals"]["predicted_time_s"]
    assert floor == data["views"]["deployed"]["totals"]["time_s"]  # the deployed bound
    assert (
        data["totals"]["every_node_own_kernel_time_s"]
        == data["totals"]["time_s"]
        == data["views"]["written"]["totals"]["time_s"]
    )
    assert floor <= data["totals"]["every_node_own_kernel_time_s"] and predicted >= floor
    assert data["prediction"]["time_s"] == predicted
    assert main([str(model), *dims, "-q"]) == 0
    table = capsys.readouterr().out.splitlines()
    latency = next(i for i, line in enumerate(table) if line.startswith("latency"))
    assert (
        table[latency].startswith(f"latency   {duration(floor)} floor: the deployed bound")
        and f"predicted {duration(predicted)}" in table[latency]
    )
    assert (
        "every node its own kernel" in table[latency + 1]
    )  # the as-written sum, named for what it is, on the next line
    for fmt in ("markdown", "html"):
        assert main([str(model), *dims, "--format", fmt, "-q", "-o", str(tmp_path / fmt)]) == 0
        text = (tmp_path / fmt).read_text(encoding="utf-8")
        assert text.index(duration(floor)) < text.index(
            duration(data["totals"]["every_node_own_kernel_time_s"])
        )  # the floor first


def test_the_deployed_json_gives_each_kernel_its_predicted_time(capsys):
    assert (
        main(
            [
                str(DECODE),
                "--dim",
                "batch=1",
                "--dim",
                "past_sequence=1023",
                "--view",
                "deployed",
                "--format",
                "json",
                "-q",
            ]
        )
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    per_kernel = [n["predicted_time_s"] for n in data["nodes"]]
    assert math.fsum(t for t in per_kernel if t is not None) == pytest.approx(data["prediction"]["kernels_s"])
    assert data["totals"]["floor_time_s"] == data["totals"]["time_s"]  # deployed, the report's own total is the floor


def test_serve_predicts_fewer_tokens_per_second_than_its_bound_at_every_batch(tmp_path, capsys):
    """GPT-2 decode on one H100 and two: the predicted tokens/s below the bound's at every batch,
    the same figures in the JSON and on the plot (its dashed curve), TP 1's step the analysis's prediction."""
    from onnx_roofline.commands.whatif import Session
    from onnx_roofline.commands.whatif.serve import serve
    from onnx_roofline.commands.whatif.serve_plot import serve_figure

    result = serve(
        Session(str(DECODE), hw="h100", kv_cache="inplace"), degrees=(1, 2), batches=(1, 8, 64), context=1024
    )
    points = [p for degree in result.degrees for p in degree.points]
    assert points and all(p.predicted_tokens_per_s < p.tokens_per_s for p in points)
    one = next(p for p in result.degrees[0].points if p.batch == 1)
    assert one.predicted_s == pytest.approx(
        deploy(analyze(DECODE, sizing=Sizing(dims={"batch": 1, "past_sequence": 1023})), INPLACE).prediction.time_s
    )
    data = result.to_dict()
    assert [p["predicted_tokens_per_s"] for d in data["degrees"] for p in d["points"]] == [
        p.predicted_tokens_per_s for p in points
    ]
    figure = serve_figure(result)
    dashed = [line for line in figure.axes[0].get_lines() if line.get_linestyle() == "--" and len(line.get_ydata())]
    assert [list(line.get_ydata()) for line in dashed] == [
        [p.predicted_tokens_per_s / d.devices for p in d.points] for d in result.degrees
    ]  # per GPU


def test_check_states_the_floor_first(capsys):
    """`check`'s figures: the deployed bound, the prediction beside it, the as-written sum after (issue 40)."""
    assert main(["check", str(DECODE), "--dim", "batch=1", "--dim", "past_sequence=1023", "--format", "json"]) == 0
    latency = json.loads(capsys.readouterr().out)["latency"]
    deployed = deploy(analyze(DECODE, sizing=Sizing(dims={"batch": 1, "past_sequence": 1023})), INPLACE)
    assert latency["floor_time_s"] == pytest.approx(deployed.totals.time_s)
    assert latency["predicted_time_s"] == pytest.approx(deployed.prediction.time_s)
    assert main(["check", str(DECODE), "--dim", "batch=1", "--dim", "past_sequence=1023"]) == 0
    said = capsys.readouterr().out.splitlines()
    assert said[2] == (
        f"latency: floor {duration(deployed.totals.time_s)} (the deployed bound, which no runtime beats), predicted "
        f"{duration(deployed.prediction.time_s)} (CUDA graphs); {duration(deployed.written.totals.time_s)} every node its own kernel"
    )


def test_sweep_and_critical_give_the_prediction_beside_the_bound():
    from onnx_roofline.commands.whatif import Session
    from onnx_roofline.commands.whatif.critical import critical, predicted_bandwidth
    from onnx_roofline.commands.whatif.sweep import sweep

    session = Session(str(DECODE), hw="h100", dims={"past_sequence": 1023}, kv_cache="inplace")
    written, deployed = (sweep(session, {"batch": [1, 8]}, view).points for view in ("written", "deployed"))
    for as_written, point in zip(written, deployed, strict=True):  # the deployed prediction, whatever the view swept
        expected = deploy(analyze(DECODE, sizing=Sizing(dims=point.dims)), INPLACE).prediction.time_s
        assert as_written.predicted_s == point.predicted_s == pytest.approx(expected)
        assert point.predicted_throughput < point.throughput  # below the bound's rate
    # a kernel predicted at max(compute / 0.75, memory / 0.9) is compute-bound where compute ≥ bytes / (3.35e12 · 0.9 / 0.75)
    assert predicted_bandwidth(session.hardware) == pytest.approx(3.35e12 * 0.9 / 0.75)
    prefill = critical(Session(str(PREFILL), hw="h100", dims={"sequence": 128}), view="deployed")
    assert all(
        k.predicted is None or k.crossing is None or k.predicted <= k.crossing for k in prefill.kinds
    )  # earlier: the real ridge is lower
    assert prefill.predicted_share_crossing <= prefill.share_crossing


def test_the_many_models_summary_gives_the_floor_first(capsys):
    assert main([str(RESNET), str(DECODE), "--format", "json", "-q"]) == 0
    rows = json.loads(capsys.readouterr().out)["models"]
    for row, model in zip(rows, (RESNET, DECODE), strict=True):
        deployed = deploy(analyze(model, sizing=Sizing(default_dims=True)), INPLACE)
        assert row["floor_time_s"] == pytest.approx(deployed.totals.time_s)
        assert row["predicted_time_s"] == pytest.approx(deployed.prediction.time_s)
        assert row["time_s"] == pytest.approx(deployed.written.totals.time_s)  # as written, its meaning kept
