"""QDQ graphs deployed as onnxruntime's QDQ transforms and TensorRT fuse them (issue 42,
views/quantized.py steps 5 and 6).

The graphs come from the real tools: a small ResNet-style CNN (a 3-channel stem Conv, two residual
blocks, global average pooling, a final Linear) exported by torch and quantized by onnxruntime's
`quantize_static`, per-channel QDQ (as it writes by default, with its Relus kept as TensorRT's
symmetric activations or QDQKeepRemovableActivations keep them: `Conv → Q → DQ → Relu → Q`)
beside its QOperator twin (QLinearConv, QLinearAdd, QGemm); the committed QDQ BERT of the corpus;
an fp8 (float8e4m3fn) QDQ MatMul from the same quantizer. Deployed, the QDQ and QOperator files
come within 5 % of each other, and every matrix kernel runs at the int8 or fp8 peak of the
H100 datasheet, its time max(FLOPs / peak, bytes / bandwidth) computed here."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnx_roofline as rl
from onnx_roofline import Sizing
from onnx_roofline.views.deployed import deploy

os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
quantization = pytest.importorskip("onnxruntime.quantization")

H100_INT8 = 1978.9e12  # H100 SXM INT8 tensor cores, dense (NVIDIA H100 whitepaper, Table 1)
H100_FP8 = 1978.9e12  # FP8 tensor cores, dense (same table)
H100_BANDWIDTH = 3.35e12  # HBM3 (same table)
MATRIX_OPS = {"Conv", "MatMul", "Gemm"}
CORPUS = Path(__file__).parent / "corpus" / "models"


class _Reader(quantization.CalibrationDataReader):
    """Random calibration feeds: the figures depend on the graph's structure, not on the scales."""

    def __init__(self, feeds):
        self.feeds = iter(feeds)

    def get_next(self):
        return next(self.feeds, None)


def _deployed(path, **dims):
    return deploy(rl.analyze(str(path), hw="h100", sizing=Sizing(dims=dims or None)))


def _written_ops(report, kernel) -> list[str]:
    return [report.written.nodes[i].op_type for i in kernel.members]


def _matrix_kernels(report):
    return [k for k in report.nodes if MATRIX_OPS & set(_written_ops(report, k))]


# --- a ResNet-style CNN, QDQ and QOperator ------------------------------------------------------------

H = W = 32  # input 3×32×32, batch 1
STEM = 16  # the stem Conv's output channels; every block keeps them
QDQ_OPTIONS = {
    "default": {},  # quantize_static drops each Relu whose input it quantizes (its Q clamps)
    "relu kept": {"QDQKeepRemovableActivations": True},  # Conv → Q → DQ → Relu → Q
    "symmetric": {"ActivationSymmetric": True},  # TensorRT's symmetric int8 activations: the Relus stay too
}


@pytest.fixture(scope="module")
def resnet(tmp_path_factory) -> dict[str, Path]:
    """The CNN as onnxruntime's quantizer writes it: "QOperator" and one QDQ file per QDQ_OPTIONS."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.first = torch.nn.Conv2d(STEM, STEM, 3, padding=1)
            self.second = torch.nn.Conv2d(STEM, STEM, 3, padding=1)

        def forward(self, x):
            return torch.relu(x + self.second(torch.relu(self.first(x))))

    class ResNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = torch.nn.Conv2d(3, STEM, 3, padding=1)
            self.blocks = torch.nn.Sequential(Block(), Block())
            self.fc = torch.nn.Linear(STEM, 10)

        def forward(self, x):
            x = self.blocks(torch.relu(self.stem(x)))
            return self.fc(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(x, 1), 1))

    folder = tmp_path_factory.mktemp("resnet")
    source = folder / "resnet.onnx"
    torch.onnx.export(ResNet().eval(), (torch.randn(1, 3, H, W),), str(source), input_names=["x"], output_names=["y"],
                      opset_version=17, dynamo=False)  # fmt: skip
    rng = np.random.default_rng(0)
    feeds = [{"x": rng.standard_normal((1, 3, H, W)).astype(np.float32)} for _ in range(2)]
    formats = {name: (quantization.QuantFormat.QDQ, options) for name, options in QDQ_OPTIONS.items()}
    formats["QOperator"] = (quantization.QuantFormat.QOperator, {})
    out = {}
    for name, (fmt, options) in formats.items():
        out[name] = folder / f"resnet_{name.replace(' ', '_')}.onnx"
        quantization.quantize_static(str(source), str(out[name]), _Reader(feeds), quant_format=fmt,
                                     per_channel=fmt == quantization.QuantFormat.QDQ, extra_options=options,
                                     activation_type=quantization.QuantType.QInt8,
                                     weight_type=quantization.QuantType.QInt8)  # fmt: skip
    return out


@pytest.mark.parametrize("variant", list(QDQ_OPTIONS))
def test_resnet_qdq_deploys_as_its_qoperator_twin(resnet, variant):
    """Time and bytes within 5 %, and as many kernels: each QOperator node (but its Flatten, a view
    that launches nothing) is one kernel of the QDQ file."""
    qdq, qoperator = _deployed(resnet[variant]), _deployed(resnet["QOperator"])
    assert qdq.totals.time_s == pytest.approx(qoperator.totals.time_s, rel=0.05)
    assert qdq.totals.bytes == pytest.approx(qoperator.totals.bytes, rel=0.05)
    kernels = [n.op_type for n in onnx.load(resnet["QOperator"]).graph.node if n.op_type != "Flatten"]
    assert sum(k.launches for k in qdq.nodes) == sum(k.launches for k in qoperator.nodes) == len(kernels)


def test_relu_joins_the_conv_or_add_across_its_q_dq_pair(resnet):
    """`Conv → Q → DQ → Relu → Q`: the Relu in the Conv's kernel (each Relu with the Conv or Add it
    follows), whose only write is the last Q's int8 output; the residual Adds read and write int8."""
    qdq = _deployed(resnet["relu kept"])
    with_relu = [k for k in qdq.nodes if "Relu" in _written_ops(qdq, k)]
    # the stem's, each block's first Conv's and its Add's
    assert sorted(_written_ops(qdq, k)[0] for k in with_relu) == ["Add", "Add", "Conv", "Conv", "Conv"]
    for kernel in with_relu:
        assert [(t.dtype, t.shape) for t in kernel.outputs] == [("int8", (1, STEM, H, W))]
    for kernel in [k for k in qdq.nodes if _written_ops(qdq, k)[0] == "Add"]:
        data = [t for t in kernel.inputs if t.numel > STEM]  # the two activations; the rest are scales and zero points
        assert [(t.dtype, t.shape) for t in data] == [("int8", (1, STEM, H, W))] * 2


@pytest.mark.parametrize("variant", ["default", "relu kept"])
def test_stem_conv_and_final_gemm_run_on_the_int8_matrix_unit(resnet, variant):
    """The 3-channel stem Conv does 2·27 products per output beside a 5-FLOP requantize (one more
    quantize, and the Relu, where the Relu is kept): on the int8 tensor cores all the same, as
    QLinearConv is. So is the 16 → 10 Gemm."""
    qdq = _deployed(resnet[variant])
    kernels = _matrix_kernels(qdq)
    assert len(kernels) == 6  # the stem, four block Convs, the Gemm
    for kernel in kernels:
        assert (kernel.unit, kernel.dtype, kernel.peak) == ("matrix", "int8", H100_INT8), _written_ops(qdq, kernel)
        assert {(s.unit, s.dtype) for s in kernel.units} == {("matrix", "int8")}
    stem = kernels[0]
    outputs = STEM * H * W
    relu_kept = variant == "relu kept"
    flops = (2 * 3 * 3 * 3 * outputs  # the product: 27 taps
             + outputs  # the int32 bias
             + 5 * outputs  # requantize: divide, round, add the zero point, two clamps
             + relu_kept * (outputs + 5 * outputs))  # the Relu (one compare) and its Q  # fmt: skip
    assert stem.cost.flops == flops
    weights = (3 * H * W  # x, int8
               + STEM * 27  # w, int8
               + STEM * 4  # the int32 bias, read as it is (no scale nor zero point: it is at x_scale·w_scale)
               + 4 + 1  # x's scale and zero point
               + STEM * 4 + STEM  # w's per-channel scales and zero points
               + (1 + relu_kept) * (4 + 1))  # each Q's scale and zero point  # fmt: skip
    assert stem.cost.bytes == weights + outputs  # writes one int8 tensor
    assert stem.time_s == pytest.approx(max(flops / H100_INT8, stem.cost.bytes / H100_BANDWIDTH))


# --- the corpus's QDQ BERT ---------------------------------------------------------------------------


def test_qdq_bert_runs_every_matrix_kernel_at_int8():
    """tests/corpus/models/qdq_bert.onnx (quantize_static, QDQ, int8) at its corpus dims: every
    MatMul and Gemm on the int8 tensor cores, their products the FLOPs torch counts for the source
    model (the corpus's record), and a kernel of matrix ops and their QuantizeLinears timed
    max(FLOPs / int8 peak, bytes / bandwidth)."""
    record = json.loads((CORPUS / "qdq_bert.json").read_text())
    deployed = _deployed(CORPUS / "qdq_bert.onnx", **record["dims"])
    kernels = _matrix_kernels(deployed)
    assert len(kernels) == 1 + 2 * 6  # the pooler's Gemm; per layer QKV (packed), scores, context, output, MLP (2)
    for kernel in kernels:
        assert (kernel.unit, kernel.dtype, kernel.peak) == ("matrix", "int8", H100_INT8), _written_ops(deployed, kernel)
        assert [s.dtype for s in kernel.units if s.unit == "matrix"] == ["int8"]
        if set(_written_ops(deployed, kernel)) <= MATRIX_OPS | {"QuantizeLinear"}:
            roofline = max(kernel.cost.flops / H100_INT8, kernel.cost.bytes / H100_BANDWIDTH)
            assert kernel.time_s == pytest.approx(roofline)
    # The pooler Gemm's bias, an add per output (hidden 128), which FlopCounterMode leaves out of addmm.
    pooler_bias = record["dims"]["batch"] * 128
    assert sum(k.matrix_flops for k in kernels) == record["flops"]["matrix"] + pooler_bias


# --- fp8 ---------------------------------------------------------------------------------------------

N = 1024  # x [N, N] · w [N, N]: 2·N/3 ≈ 683 FLOP/B, above the fp8 ridge (1978.9 T / 3.35 T ≈ 591): compute-bound


def test_fp8_qdq_matmul_runs_at_the_fp8_peak(tmp_path):
    """quantize_static to float8e4m3fn (QDQ) of one MatMul: one kernel on the fp8 tensor cores,
    reading x and w and writing y at a byte an element, timed max(FLOPs / fp8 peak, bytes / bandwidth)."""
    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array(rng.standard_normal((N, N)).astype(np.float32), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "matmul",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [N, N])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [N, N])], [weight])  # fmt: skip
    source, target = tmp_path / "matmul.onnx", tmp_path / "matmul_fp8.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]), source)
    feeds = [{"x": rng.standard_normal((N, N)).astype(np.float32)} for _ in range(2)]
    quantization.quantize_static(str(source), str(target), _Reader(feeds), quant_format=quantization.QuantFormat.QDQ,
                                 activation_type=quantization.QuantType.QFLOAT8E4M3FN,
                                 weight_type=quantization.QuantType.QFLOAT8E4M3FN,
                                 calibrate_method=quantization.CalibrationMethod.Distribution)  # fmt: skip
    deployed = _deployed(target)
    (kernel,) = _matrix_kernels(deployed)
    assert sorted(_written_ops(deployed, kernel)) == ["MatMul", "QuantizeLinear"]
    assert (kernel.unit, kernel.dtype, kernel.peak) == ("matrix", "fp8", H100_FP8)
    flops = 2 * N**3 + 4 * N * N  # the product, then y's quantize (zero point a constant 0: divide, round, 2 clamps)
    bytes_moved = (N * N + N * N  # x and w, fp8
                   + 3 * (4 + 1)  # x's, w's and y's fp32 scale and fp8 zero point
                   + N * N)  # y, fp8  # fmt: skip
    assert (kernel.cost.flops, kernel.cost.bytes) == (flops, bytes_moved)
    assert kernel.bound == "compute"
    assert kernel.time_s == pytest.approx(max(flops / H100_FP8, bytes_moved / H100_BANDWIDTH))


# --- which activations join, written with onnx.helper ---------------------------------------------------

M, K = 64, 128


def _unit_across_a_pair(activation: str, dq_scale: str = "h_scale") -> onnx.ModelProto:
    """DQ(x), DQ(w) → MatMul → Q(h) → DQ(h, `dq_scale`) → activation → Q(y): int8 per tensor, opset 21."""
    rng = np.random.default_rng(0)
    names = ("x_scale", "w_scale", "h_scale", "other_scale", "y_scale")
    scalars = [numpy_helper.from_array(np.array(0.05, np.float32), name) for name in names]
    zero = helper.make_tensor("zero", TensorProto.INT8, [], [0])
    weight = helper.make_tensor("w", TensorProto.INT8, [K, K], rng.integers(-100, 100, K * K).tolist())
    bounds = [numpy_helper.from_array(np.array(value, np.float32), name) for name, value in [("low", 0), ("high", 6)]]
    extra = {"Clip": bounds}
    nodes = [
        helper.make_node("DequantizeLinear", ["x", "x_scale", "zero"], ["x_dq"]),
        helper.make_node("DequantizeLinear", ["w", "w_scale", "zero"], ["w_dq"]),
        helper.make_node("MatMul", ["x_dq", "w_dq"], ["h"]),
        helper.make_node("QuantizeLinear", ["h", "h_scale", "zero"], ["h_q"]),
        helper.make_node("DequantizeLinear", ["h_q", dq_scale, "zero"], ["h_dq"]),
        helper.make_node(activation, ["h_dq", *(t.name for t in extra.get(activation, []))], ["a"]),
        helper.make_node("QuantizeLinear", ["a", "y_scale", "zero"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "across", [helper.make_tensor_value_info("x", TensorProto.INT8, [M, K])],
                              [helper.make_tensor_value_info("y", TensorProto.INT8, [M, K])],
                              [weight, zero, *scalars, *extra.get(activation, [])])  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


@pytest.mark.parametrize("activation", ["Relu", "Clip", "LeakyRelu", "Sigmoid", "HardSigmoid", "Tanh"])
def test_activation_joins_the_matmul_across_a_pair_of_one_scale(activation):
    """One kernel reading x and w, writing y (int8): h's Q → DQ round trip never touches memory."""
    deployed = deploy(rl.analyze(_unit_across_a_pair(activation), hw="h100"))
    (kernel,) = [k for k in deployed.nodes if k.launches]
    assert sorted(_written_ops(deployed, kernel)) == sorted(["MatMul", "QuantizeLinear", activation, "QuantizeLinear"])
    assert [t.name for t in kernel.outputs] == ["y"]
    assert kernel.cost.bytes_written == M * K  # y, int8
    assert (kernel.unit, kernel.dtype) == ("matrix", "int8")


def test_a_dq_of_another_scale_keeps_the_activation_apart():
    """A DQ naming another scale than its Q's requantizes: the activation is a kernel of its own."""
    deployed = deploy(rl.analyze(_unit_across_a_pair("Sigmoid", dq_scale="other_scale"), hw="h100"))
    kernels = [_written_ops(deployed, k) for k in deployed.nodes if k.launches]
    assert sorted(map(sorted, kernels)) == [["MatMul", "QuantizeLinear"], ["QuantizeLinear", "Sigmoid"]]
