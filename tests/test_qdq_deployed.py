"""Quantized graphs as deployed (issue 34): a QDQ graph's DequantizeLinear → op → QuantizeLinear
units run as integer kernels (views/quantized.py).

The graphs come from the real tool: onnxruntime's `quantize_static` in its QDQ format (per-channel
int8 weights, int8 activations, the TensorRT layout) and its QOperator format (QLinearConv,
QLinearMatMul) on a small CNN and a tiny BERT exported by torch. Deployed, every matrix kernel of
the QDQ graph computes at the int8 peak, and the QDQ graph's time is within 5 % (CNN) and 10 %
(BERT) of its QOperator twin's. Weight-only and per-type cases are one-unit graphs written with
onnx.helper, their figures computed here."""

from __future__ import annotations

import math
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnx_roofline as rl
from onnx_roofline.report.table import render_table
from onnx_roofline.views.deployed import deploy

os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
torch = pytest.importorskip("torch")
quantization = pytest.importorskip("onnxruntime.quantization")

H100_INT8 = 1978.9e12  # H100 SXM INT8 tensor cores, dense (datasheet)
H100_FP8 = 1978.9e12  # FP8 tensor cores, dense
H100_FP16 = 989.4e12  # FP16 tensor cores, dense
H100_BANDWIDTH = 3.35e12  # HBM3
MATRIX_OPS = {"Conv", "ConvTranspose", "MatMul", "Gemm"}


class _Reader(quantization.CalibrationDataReader):
    """Random calibration feeds: the figures depend on the graph's structure, not on the scales."""

    def __init__(self, feeds):
        self.feeds = iter(feeds)

    def get_next(self):
        return next(self.feeds, None)


def _quantized(path, feeds) -> dict[str, str]:
    """The model at `path` quantized by quantize_static in both formats: {"QDQ": path, "QOperator": path}."""
    out = {}
    for fmt in (quantization.QuantFormat.QDQ, quantization.QuantFormat.QOperator):
        target = str(path).replace(".onnx", f"_{fmt.name}.onnx")
        quantization.quantize_static(str(path), target, _Reader(feeds), quant_format=fmt, per_channel=fmt == quantization.QuantFormat.QDQ,
                                     activation_type=quantization.QuantType.QInt8, weight_type=quantization.QuantType.QInt8)  # fmt: skip
        out[fmt.name] = target
    return out


@pytest.fixture(scope="module")
def cnn(tmp_path_factory) -> dict[str, str]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(32, 10),
    ).eval()  # fmt: skip
    path = tmp_path_factory.mktemp("cnn") / "cnn.onnx"
    torch.onnx.export(
        model,
        (torch.randn(1, 3, 32, 32),),
        str(path),
        input_names=["x"],
        output_names=["y"],
        opset_version=17,
        dynamo=False,
    )
    rng = np.random.default_rng(0)
    return _quantized(path, [{"x": rng.standard_normal((1, 3, 32, 32)).astype(np.float32)} for _ in range(2)])


@pytest.fixture(scope="module")
def bert(tmp_path_factory) -> dict[str, str]:
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=100, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                                     max_position_embeddings=64, attn_implementation="eager")  # fmt: skip
    bert_model = transformers.BertModel(config).eval()

    class Hidden(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bert = bert_model

        def forward(self, input_ids, attention_mask):
            return self.bert(input_ids=input_ids, attention_mask=attention_mask, use_cache=False, return_dict=False)[0]

    path = tmp_path_factory.mktemp("bert") / "bert.onnx"
    ids = torch.randint(0, 100, (1, 16))
    with torch.no_grad():
        torch.onnx.export(Hidden(), (ids, torch.ones_like(ids)), str(path), input_names=["input_ids", "attention_mask"],
                          output_names=["hidden"], opset_version=17, dynamo=False)  # fmt: skip
    rng = np.random.default_rng(0)
    feeds = [
        {"input_ids": rng.integers(0, 100, (1, 16)), "attention_mask": np.ones((1, 16), np.int64)} for _ in range(2)
    ]
    return _quantized(path, feeds)


def _deployed(path):
    return deploy(rl.analyze(path, hw="h100"))


def _matrix_kernels(report):
    """The deployed kernels that run a Conv, ConvTranspose, MatMul or Gemm of the graph."""
    written = report.written.nodes
    return [k for k in report.nodes if any(written[i].op_type in MATRIX_OPS for i in k.members)]


def _assert_int8(report):
    kernels = _matrix_kernels(report)
    assert kernels
    for kernel in kernels:
        matrix = [share for share in kernel.units if share.unit == "matrix"]
        assert [(s.dtype, s.peak) for s in matrix] == [("int8", H100_INT8)], kernel.name


def _matrix_weights(report, path) -> dict[str, tuple[str, int]]:
    """The weight matrices (initializers of rank 2 or more) the matrix kernels read: name → (dtype, bytes)."""
    matrices = {t.name for t in onnx.load(path).graph.initializer if len(t.dims) >= 2}
    return {t.name: (t.dtype, t.nbytes) for k in _matrix_kernels(report) for t in k.inputs if t.name in matrices}


def _stored_weight_bytes(path) -> int:
    """Every initializer at its stored dtype, what the quantized model holds with no fp32 copy, but
    the integer tensors of rank 0 or 1 and at most 16 elements the parameter count leaves out as
    shape constants (docs/cost-model.md: per-tensor zero points, here, and a 10-wide bias), and the
    scale and zero point of each int32 bias's DQ: the integer kernel adds the bias as it is, at
    x_scale·w_scale (QLinearConv and QGemm take no bias scale; onnxruntime's QDQ transform leaves
    them unread)."""
    graph = onnx.load(path).graph
    int32 = {t.name for t in graph.initializer if t.data_type == TensorProto.INT32}
    bias_dqs = [n for n in graph.node if n.op_type == "DequantizeLinear" and n.input[0] in int32]
    bias_scales = {name for n in bias_dqs for name in n.input[1:]}
    arrays = [numpy_helper.to_array(t) for t in graph.initializer if t.name not in bias_scales]
    return sum(a.nbytes for a in arrays if not (a.dtype.kind in "iu" and a.ndim <= 1 and a.size <= 16))


def test_cnn_qdq_runs_int8_kernels_as_its_qoperator_twin(cnn):
    qdq, qoperator = _deployed(cnn["QDQ"]), _deployed(cnn["QOperator"])
    _assert_int8(qdq)
    assert qdq.totals.time_s == pytest.approx(qoperator.totals.time_s, rel=0.05)
    assert qdq.memory.weight_bytes == _stored_weight_bytes(cnn["QDQ"])
    weights = _matrix_weights(qdq, cnn["QDQ"])
    assert {dtype for dtype, _ in weights.values()} == {"int8"}
    assert (
        sum(size for _, size in weights.values()) == 16 * 3 * 3 * 3 + 32 * 16 * 3 * 3 + 10 * 32
    )  # the two convs' and the Linear's, a byte each


def test_cnn_qdq_as_written_stays_fp32_and_says_what_deployed_gives(cnn):
    written = rl.analyze(cnn["QDQ"], hw="h100")
    convs = [n for n in written.nodes if n.op_type == "Conv"]
    assert [(n.dtype, n.peak) for n in convs] == [("fp32", pytest.approx(66.9e12))] * 2
    deployed = deploy(written)
    summary = render_table(written, other=deployed)
    assert "quantized: 12 DequantizeLinear" in summary
    assert "matrix kernels on quantized operands: 3 int8" in summary
    notes = written.to_dict_with(written.to_dict()["nodes"], other=deployed)["views"]["deployed"]["notes"]
    assert any(note.startswith("quantized: ") for note in notes)


def test_bert_qdq_runs_int8_kernels_as_its_qoperator_twin(bert):
    qdq, qoperator = _deployed(bert["QDQ"]), _deployed(bert["QOperator"])
    _assert_int8(qdq)
    assert qdq.totals.time_s == pytest.approx(qoperator.totals.time_s, rel=0.10)
    weights = _matrix_weights(qdq, bert["QDQ"])
    assert {dtype for dtype, _ in weights.values()} == {"int8"}
    # Per layer Q, K, V and the output projection (64×64 each) and the MLP (64×128 and 128×64), a byte each.
    assert sum(size for _, size in weights.values()) == 2 * (4 * 64 * 64 + 2 * 64 * 128)


# --- one unit, written with onnx.helper ---------------------------------------------------------------

M, K, N, BLOCK = 16, 256, 128, 32


def _weight(name: str, dtype: int, shape, rng) -> onnx.TensorProto:
    low, high = {
        TensorProto.INT4: (-8, 8),
        TensorProto.UINT4: (0, 16),
        TensorProto.INT8: (-128, 128),
        TensorProto.UINT8: (0, 256),
    }[dtype]
    return helper.make_tensor(name, dtype, shape, rng.integers(low, high, math.prod(shape)).tolist())


@pytest.mark.parametrize("dtype", [TensorProto.INT4, TensorProto.UINT4])
def test_weight_only_blocked_4_bit_computes_at_the_float_peak(dtype):
    """A [M, K] fp16 activation times a K×N weight stored in 4 bits, blocked by 32 along K (opset 21),
    as MatMulNBits runs it: fp16 tensor cores, the packed weight bytes read."""
    rng = np.random.default_rng(0)
    blocks = K // BLOCK
    initializers = [_weight("w", dtype, [K, N], rng), numpy_helper.from_array(np.full((blocks, N), 0.01, np.float16), "w_scale"),
                    _weight("w_zero_point", dtype, [blocks, N], rng)]  # fmt: skip
    nodes = [helper.make_node("DequantizeLinear", ["w", "w_scale", "w_zero_point"], ["w_dq"], axis=0, block_size=BLOCK),
             helper.make_node("MatMul", ["a", "w_dq"], ["y"])]  # fmt: skip
    graph = helper.make_graph(nodes, "weight_only", [helper.make_tensor_value_info("a", TensorProto.FLOAT16, [M, K])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [M, N])], initializers)  # fmt: skip
    deployed = deploy(rl.analyze(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]), hw="h100"))
    (kernel,) = [k for k in deployed.nodes if k.launches]
    assert (kernel.unit, kernel.dtype, kernel.peak) == ("matrix", "fp16", H100_FP16)
    flops = 2 * M * K * N
    bytes_read = (
        M * K * 2  # a, fp16
        + K * N // 2  # w, two 4-bit weights a byte
        + blocks * N * 2  # one fp16 scale per block of 32 along K
        + blocks * N // 2  # one 4-bit zero point per block
    )
    bytes_written = M * N * 2  # y, fp16
    assert (kernel.cost.flops, kernel.cost.bytes_read, kernel.cost.bytes_written) == (flops, bytes_read, bytes_written)
    assert kernel.cost.dequantize_flops == 2 * K * N  # (q − zero point)·scale, each weight once
    assert kernel.time_s == pytest.approx(max(flops / H100_FP16, (bytes_read + bytes_written) / H100_BANDWIDTH))
    assert deployed.memory.weight_bytes == K * N // 2 + blocks * N * 2 + blocks * N // 2


@pytest.mark.parametrize(
    ("dtype", "scale_shape", "axis", "peak_class", "peak"),
    [
        (TensorProto.UINT8, [], None, "int8", H100_INT8),  # per tensor
        (TensorProto.INT8, [N], 1, "int8", H100_INT8),  # per output channel
        (TensorProto.FLOAT8E4M3FN, [], None, "fp8", H100_FP8),
    ],
)
def test_qdq_matmul_is_one_kernel_on_the_quantized_tensors(dtype, scale_shape, axis, peak_class, peak):
    """DQ(x) and DQ(w) → MatMul → Relu → Q: one kernel at the quantized peak, reading x and w and
    writing y in the quantized dtype."""
    rng = np.random.default_rng(0)
    zero = helper.make_tensor("zero", dtype, [], [0.0 if dtype == TensorProto.FLOAT8E4M3FN else 0])
    w_zero = helper.make_tensor(
        "w_zero", dtype, scale_shape, [0.0 if dtype == TensorProto.FLOAT8E4M3FN else 0] * math.prod(scale_shape)
    )
    w = helper.make_tensor("w", dtype, [K, N], rng.integers(0, 8, K * N).astype(float).tolist() if dtype == TensorProto.FLOAT8E4M3FN
                           else rng.integers(0, 100, K * N).tolist())  # fmt: skip
    initializers = [w, zero, w_zero, numpy_helper.from_array(np.array(0.1, np.float32), "scale"),
                    numpy_helper.from_array(np.full(scale_shape, 0.01, np.float32), "w_scale")]  # fmt: skip
    per_axis = {"axis": axis} if axis is not None else {}
    nodes = [
        helper.make_node("DequantizeLinear", ["x", "scale", "zero"], ["x_dq"]),
        helper.make_node("DequantizeLinear", ["w", "w_scale", "w_zero"], ["w_dq"], **per_axis),
        helper.make_node("MatMul", ["x_dq", "w_dq"], ["h"]),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("QuantizeLinear", ["r", "scale", "zero"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", dtype, [M, K])],
                              [helper.make_tensor_value_info("y", dtype, [M, N])], initializers)  # fmt: skip
    deployed = deploy(rl.analyze(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]), hw="h100"))
    (kernel,) = [k for k in deployed.nodes if k.launches]
    assert sorted(deployed.written.nodes[i].op_type for i in kernel.members) == ["MatMul", "QuantizeLinear", "Relu"]
    assert [(s.dtype, s.peak) for s in kernel.units if s.unit == "matrix"] == [(peak_class, peak)]
    scales = 4 + 4 * math.prod(scale_shape)  # x's fp32 scale (y shares it), w's per tensor or per channel
    zero_points = 1 + math.prod(scale_shape)  # one byte each, x's and y's shared
    assert kernel.cost.bytes_read == M * K + K * N + scales + zero_points  # x and w, a byte an element
    assert kernel.cost.bytes_written == M * N  # y, a byte an element
    assert kernel.cost.dequantize_flops == 0  # the product is on the quantized operands: nothing dequantized
