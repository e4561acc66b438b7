"""What the deployed view adds to the time, and how fp32 matmuls run: transcendentals on the
special-function units (H100: 16 results/clk/SM × 132 SMs × 1.83 GHz), the kernel-launch floor
beside the bound, and --fp32-matmul ieee|tf32. Expected values written as arithmetic."""

from __future__ import annotations

import json

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnx_roofline import Sizing, analyze
from onnx_roofline.commands.cli import main
from onnx_roofline.costs.hardware import list_hardware, load_hardware
from onnx_roofline.errors import HardwareSpecError
from onnx_roofline.views.deployed import deploy
from tests.conftest import FIXTURES

F16, F32 = TensorProto.FLOAT16, TensorProto.FLOAT
BANDWIDTH = 3.35e12
SFU = 16 * 132 * 1.83e9  # H100 SXM: SFU results per clock per SM × SMs × the clock its tensor peaks assume
FP16_TENSOR = 989.4e12


def model(nodes, inputs, outputs, dtype=F16, weights=None):
    tensors = [
        numpy_helper.from_array(np.zeros(s, np.float16 if dtype == F16 else np.float32), n)
        for n, s in (weights or {}).items()
    ]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, dtype, s) for n, s in inputs],
                              [helper.make_tensor_value_info(n, dtype, s) for n, s in outputs], initializer=tensors)  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def test_h100_special_function_rate_is_cited_arithmetic():
    h100 = load_hardware("h100")
    assert h100.special_function_rate == pytest.approx(SFU)  # ≈ 3.9 T/s
    assert h100.special_function_rate == pytest.approx(
        FP16_TENSOR / (132 * 4096) * 16 * 132, rel=1e-4
    )  # 1.83 GHz: the clock of the tensor peak
    for hw in list_hardware():
        if hw.key.startswith(("h", "a", "l")):
            assert hw.special_function_rate and hw.launch_overhead == 4e-6
            assert "http" in hw.figure_source("special_function_rate") and "http" in hw.figure_source("launch_overhead")
    assert load_hardware("epyc-9654").special_function_rate is None  # a CPU has no SFU: transcendentals are not timed


def test_a_chain_of_exps_is_bound_by_the_special_function_units_deployed():
    n = 1 << 20
    names = ["x", *(f"e{i}" for i in range(1, 9))]
    nodes = [helper.make_node("Exp", [a], [b], name=b) for a, b in zip(names, names[1:], strict=False)]
    written = analyze(model(nodes, [("x", [n])], [("e8", [n])]))
    for node in written.nodes:  # as written transcendentals do not enter the time
        assert node.time_s == pytest.approx(2 * n * 2 / BANDWIDTH)
    (kernel,) = deploy(written).nodes
    assert kernel.cost.transcendentals == 8 * n
    assert kernel.placement.compute_time_s == pytest.approx(8 * n / SFU)  # eight exps per element on the SFUs
    assert kernel.placement.memory_time_s == pytest.approx(2 * n * 2 / BANDWIDTH)  # x read, e8 written
    assert kernel.bound == "compute" and kernel.time_s == pytest.approx(8 * n / SFU)


def test_gpt2_prefill_attention_exp_time_equals_its_tensor_core_time():
    written = analyze(FIXTURES / "gpt2_prefill_fp16.onnx", sizing=Sizing(dims={"batch": 1, "sequence": 1024}))
    kernel = next(k for k in deploy(written).nodes if k.op_type == "FlashAttention")
    share = kernel.cost.useful_flops / kernel.cost.flops  # causal: both timed on the useful part
    matmuls = sum(written.nodes[i].cost.flops for i in kernel.members if written.nodes[i].op_type == "MatMul")
    tensor = matmuls * share / FP16_TENSOR
    exps = kernel.cost.transcendentals * share / SFU
    # per score: 4·dh = 256 tensor-core FLOPs at 989.4 T/s against one exp at 16·132·1.83 G/s
    assert exps / tensor == pytest.approx(FP16_TENSOR / (4 * 64 * SFU), rel=1e-9)
    assert exps == pytest.approx(tensor, rel=1e-3)
    assert kernel.placement.compute_time_s == pytest.approx(max(tensor, exps), rel=1e-9)


def test_the_launch_floor_is_reported_beside_the_bound(capsys):
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("Reshape", ["r", "shape"], ["y"], name="view"),
    ]
    m = model(nodes, [("x", [64, 64])], [("y", [4096])])
    m.graph.initializer.append(numpy_helper.from_array(np.array([4096], np.int64), "shape"))
    report = analyze(m)
    launches = report.launches
    assert launches.kernels == 1  # the Reshape is a view: it launches nothing
    assert launches.per_kernel_s == 4e-6 and launches.floor_s == 4e-6
    relu = 2 * 64 * 64 * 2 / BANDWIDTH  # 4.9 ns of memory time
    assert launches.time_s == pytest.approx(
        4e-6 + report.nodes[1].time_s
    )  # the Relu takes a launch; the view its bound
    assert relu < 4e-6
    path = FIXTURES / "gpt2_decode_fp16.onnx"
    assert main([str(path), "--dim", "batch=1", "--dim", "past_sequence=1023", "--format", "json", "--launch-overhead", "2us",
                 "--view", "deployed"]) == 0  # fmt: skip
    data = json.loads(capsys.readouterr().out)
    kernels = sum(1 for n in data["nodes"] if n["bytes"] or n["flops"])  # every kernel that moves or computes launches
    assert data["launches"]["per_kernel_s"] == 2e-6
    assert data["launches"]["floor_s"] == pytest.approx(data["launches"]["kernels"] * 2e-6)
    assert data["launches"]["kernels"] <= kernels


def test_fp32_matmul_ieee_by_default_and_tf32_when_asked(capsys):
    m, k, n = 2048, 2048, 2048
    mm = model(
        [helper.make_node("MatMul", ["a", "b"], ["y"], name="mm")],
        [("a", [m, k]), ("b", [k, n])],
        [("y", [m, n])],
        dtype=F32,
    )
    flops = 2 * m * k * n
    ieee = analyze(mm).nodes[0]
    assert ieee.unit == "matrix" and ieee.dtype == "fp32" and ieee.bound == "compute"
    assert ieee.time_s == pytest.approx(flops / 66.9e12)  # full fp32 on the FP32 CUDA cores: cuBLAS's default
    tf32 = analyze(mm, fp32_matmul="tf32").nodes[0]
    assert tf32.time_s == pytest.approx(flops / 494.7e12)  # TF32 tensor cores, dense
    assert load_hardware("h100").peaks["matrix"]["fp32"] == load_hardware("h100").peaks["vector"]["fp32"]
    fp16 = model(
        [helper.make_node("MatMul", ["a", "b"], ["y"], name="mm")], [("a", [m, k]), ("b", [k, n])], [("y", [m, n])]
    )
    assert analyze(fp16, fp32_matmul="tf32").nodes[0].time_s == analyze(fp16).nodes[0].time_s  # fp16 is untouched
    path = FIXTURES / "gpt2_prefill_fp32.onnx"
    assert (
        main([str(path), "--dim", "batch=1", "--dim", "sequence=128", "--format", "json", "--fp32-matmul", "tf32"]) == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert data["hardware"]["fp32_matmul"] == "tf32" and data["hardware"]["peaks"]["matrix"]["fp32"] == 494.7e12


def test_spec_files_may_give_the_new_figures_and_they_are_validated(tmp_path):
    good = tmp_path / "gpu.toml"
    good.write_text(
        "memory_bandwidth = 1e12\nspecial_function_rate = 1e12\nlaunch_overhead = 5e-6\n[peaks.vector]\nfp32 = 1e13\n"
    )
    hw = load_hardware(str(good))
    assert (hw.special_function_rate, hw.launch_overhead) == (1e12, 5e-6)
    for bad, key in [
        ("launch_overhead = 5\n", "launch_overhead"),
        ("special_function_rate = -1\n", "special_function_rate"),
    ]:
        path = tmp_path / f"{key}.toml"
        path.write_text("memory_bandwidth = 1e12\n" + bad + "[peaks.vector]\nfp32 = 1e13\n")
        with pytest.raises(HardwareSpecError, match=key):
            load_hardware(str(path))
