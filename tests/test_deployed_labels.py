"""Labels the deployed view prints must be true of the model (issue 29): a KV-cache mode only
where there is a cache, no blended peak above the hardware table's, no charge for a mask whose
readers were all fused, zero points of constant weights folded at load, and a fused attention's
useful FLOPs without the graph-only work. Expected figures are arithmetic from the graphs' sizes."""

from __future__ import annotations

import json

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnx_roofline import Sizing, analyze
from onnx_roofline.commands.cli import main
from onnx_roofline.commands.whatif import Session, sweep
from onnx_roofline.views.deployed import COPY, INPLACE, deploy
from tests.conftest import FIXTURES
from tests.conftest import fp16_graph as graph_model

RESNET = FIXTURES / "resnet50_fp32.onnx"
DECODE = FIXTURES / "gpt2_decode_fp16.onnx"
LAYERS, DH = 12, 64  # GPT-2 small


def _out(capsys, argv) -> str:
    assert main(argv) == 0, argv
    return capsys.readouterr().out


# --- the KV-cache mode, only where there is a cache ------------------------------------------------


def test_no_kv_cache_mode_is_printed_for_a_model_without_a_cache(capsys):
    for argv in ([str(RESNET), "--top", "1"], [str(RESNET), "--view", "deployed", "--top", "1"]):
        assert "KV cache" not in _out(capsys, argv)  # neither the written table's deployed line nor the deployed notes
    data = json.loads(_out(capsys, [str(RESNET), "--view", "deployed", "--format", "json"]))
    assert data["kv_cache"] is None and not any("KV cache" in note for note in data["notes"])
    assert (
        deploy(analyze(RESNET, sizing=Sizing(dims={"batch": 1})), INPLACE).kv_cache is None
    )  # whatever was asked: there is nothing to update


def test_a_decoder_still_says_its_kv_cache_mode(capsys):
    dims = ["--dim", "batch=1", "--dim", "past_sequence=15"]
    assert "KV cache inplace" in _out(capsys, [str(DECODE), *dims, "--top", "1"])  # in place by default (issue 39)
    assert "KV cache copy" in _out(
        capsys, [str(DECODE), *dims, "--view", "deployed", "--kv-cache", "copy", "--top", "1"]
    )
    data = json.loads(_out(capsys, [str(DECODE), *dims, "--view", "deployed", "--format", "json"]))
    assert data["kv_cache"] == INPLACE and any(note.startswith("KV cache inplace") for note in data["notes"])
    assert data["memory"]["kv_cache"] == INPLACE  # the footprint says how it counted the cache
    data = json.loads(_out(capsys, [str(DECODE), *dims, "--kv-cache", "copy", "--format", "json"]))
    assert data["views"]["deployed"]["kv_cache"] == COPY and data["memory"]["kv_cache"] == COPY


def test_a_study_of_a_model_without_a_cache_says_no_mode(capsys):
    result = sweep(Session(RESNET, kv_cache=INPLACE), {"batch": [1]}, "deployed")
    assert result.setup["kv_cache"] is None
    assert "KV cache" not in _out(capsys, ["sweep", str(RESNET), "--dim", "batch=1", "--view", "deployed"])
    decoder = sweep(Session(DECODE, dims={"past_sequence": 15}, kv_cache=INPLACE), {"batch": [1]}, "deployed")
    assert decoder.setup["kv_cache"] == INPLACE


# --- no blended peaks -------------------------------------------------------------------------------


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.onnx")), ids=lambda p: p.name)
def test_no_peak_or_ridge_is_above_the_hardware_table(path):
    """Every node (written) and kernel (deployed) of every fixture: its `peak` is at most the
    table's entry for its unit and dtype, its ridge at most that over the bandwidth, and a kernel's
    compute time is its busiest unit's, each unit timed at its own table peak."""
    written = analyze(path, sizing=Sizing(default_dims=True))
    hardware = written.hardware
    for report in (written, deploy(written, INPLACE)):
        for node in report.nodes:
            if node.placement is None or node.peak is None or node.unit is None:
                continue
            table, _, _ = hardware.peak(node.unit, node.dtype)
            assert node.peak <= table * (1 + 1e-12), (report.view, node.name)
            assert node.placement.ridge <= table / hardware.memory_bandwidth * (1 + 1e-12), (report.view, node.name)
            for share in getattr(node, "units", ()):
                if share.unit != "special":
                    assert share.peak <= hardware.peak(share.unit, share.dtype)[0] * (1 + 1e-12)
                    assert share.time_s == pytest.approx(share.work / share.peak)


def test_a_fused_kernel_is_timed_by_its_busiest_unit_and_reports_each_share():
    """GPT-2 prefill's attention kernel: two MatMuls on the tensor cores, scale/mask/softmax on
    the vector unit, exp on the special-function units. Its compute time is the largest of the
    three, not all its FLOPs over one blended peak."""
    written = analyze(FIXTURES / "gpt2_prefill_fp16.onnx", sizing=Sizing(dims={"batch": 1, "sequence": 1024}))
    deployed = deploy(written)
    flash = next(k for k in deployed.nodes if k.op_type == "FlashAttention")
    hardware = deployed.hardware
    units = {share.unit for share in flash.units}
    assert {"matrix", "vector", "special"} <= units
    assert flash.placement.compute_time_s == pytest.approx(max(
        sum(s.time_s for s in flash.units if s.unit == unit) for unit in units))  # fmt: skip
    assert flash.peak == hardware.peak("matrix", "fp16")[0] == 989.4e12  # the H100's dense fp16 tensor-core figure
    assert flash.unit == "matrix" and flash.dtype == "fp16"
    scale = flash.cost.useful_flops / flash.cost.flops  # causal: every unit does the useful part
    matrix = sum(written.nodes[i].cost.flops for i in flash.members if written.nodes[i].unit == "matrix")
    (tensor_cores,) = [s for s in flash.units if s.unit == "matrix"]
    assert tensor_cores.work == pytest.approx(matrix * scale)
    data = json.loads(json.dumps(deployed.to_dict()))
    node = next(n for n in data["nodes"] if n["op_type"] == "FlashAttention")
    assert node["peak"] == 989.4e12 and {u["unit"] for u in node["units"]} == units


# --- a mask all of whose readers were fused is dropped ----------------------------------------------


def masked_attention(seq: int, mask_is_output: bool = False):
    """Attention whose additive mask is built per run from a position input: Unsqueeze both ways,
    LessOrEqual, Where(0, −inf), added to the scores (how exporters write a causal mask)."""
    nodes = [
        helper.make_node("Unsqueeze", ["pos", "ax1"], ["rows"], name="rows"),
        helper.make_node("Unsqueeze", ["pos", "ax0"], ["cols"], name="cols"),
        helper.make_node("LessOrEqual", ["cols", "rows"], ["allowed"], name="compare"),
        helper.make_node("Where", ["allowed", "zero", "neg"], ["mask"], name="mask"),
        helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2], name="kt"),
        helper.make_node("MatMul", ["q", "kt"], ["scores"], name="qk"),
        helper.make_node("Add", ["scores", "mask"], ["masked"], name="add_mask"),
        helper.make_node("Softmax", ["masked"], ["p"], axis=-1, name="softmax"),
        helper.make_node("MatMul", ["p", "v"], ["o"], name="pv"),
    ]
    outputs = [("o", [1, 4, seq, DH])] + ([("mask", [seq, seq])] if mask_is_output else [])
    m = graph_model(nodes, [("q", [1, 4, seq, DH]), ("k", [1, 4, seq, DH]), ("v", [1, 4, seq, DH])], outputs)
    m.graph.input.append(helper.make_tensor_value_info("pos", TensorProto.INT64, [seq]))
    m.graph.initializer.extend([numpy_helper.from_array(np.array([1], np.int64), "ax1"), numpy_helper.from_array(np.array([0], np.int64), "ax0"),
                                numpy_helper.from_array(np.array(0, np.float16), "zero"),
                                numpy_helper.from_array(np.array(-np.inf, np.float16), "neg")])  # fmt: skip
    return m


def test_a_mask_read_only_by_an_attention_kernel_is_dropped():
    seq = 128
    deployed = deploy(analyze(masked_attention(seq)))
    qkvo = 4 * (1 * 4 * seq * DH) * 2  # Q, K, V read, O written: fp16
    assert deployed.totals.bytes == qkvo  # the mask, its comparison and its views cost nothing
    dropped = {deployed.written.nodes[k.lead].name for k in deployed.nodes if k.cost.bytes == 0 and k.launches == 0}
    assert {"rows", "cols", "compare", "mask"} <= dropped
    assert any("dropped" in note for note in deployed.notes)


def test_a_mask_someone_else_reads_is_kept():
    seq = 128
    deployed = deploy(analyze(masked_attention(seq, mask_is_output=True)))
    mask = next(k for k in deployed.nodes if "mask" in {deployed.written.nodes[i].name for i in k.members})
    assert (
        mask.cost.bytes_written == seq * seq * 2 and mask.launches == 1
    )  # the graph's output: [seq, seq] fp16, written
    assert deployed.totals.bytes >= 4 * (1 * 4 * seq * DH) * 2 + seq * seq * 2  # Q, K, V, O and the mask


def test_gpt2_prefill_causal_mask_is_not_charged():
    written = analyze(FIXTURES / "gpt2_prefill_fp16.onnx", sizing=Sizing(dims={"batch": 1, "sequence": 1024}))
    deployed = deploy(written)
    charged = {i for k in deployed.nodes if k.cost is not None and k.cost.bytes for i in k.members}
    wheres = [n for n in written.nodes if n.op_type == "Where" and list(n.outputs[0].shape) == [1, 1, 1024, 1024]]
    assert wheres and not any(n.index in charged for n in wheres)  # the mask Where the 12 attention kernels share


# --- zero points of constant weights are folded at load ---------------------------------------------


def matmul_integer(m: int, k: int, n: int, weight_is_input: bool = False):
    """A [m, k] uint8 with a runtime zero point × B [k, n] uint8 with a constant zero point 128."""
    node = helper.make_node("MatMulInteger", ["a", "b", "a_zp", "b_zp"], ["y"], name="mmi")
    inputs = [
        helper.make_tensor_value_info("a", TensorProto.UINT8, [m, k]),
        helper.make_tensor_value_info("a_zp", TensorProto.UINT8, []),
    ]
    weights = [numpy_helper.from_array(np.array(128, np.uint8), "b_zp")]
    if weight_is_input:
        inputs.append(helper.make_tensor_value_info("b", TensorProto.UINT8, [k, n]))
    else:
        weights.append(numpy_helper.from_array(np.zeros([k, n], np.uint8), "b"))
    graph = helper.make_graph(
        [node], "g", inputs, [helper.make_tensor_value_info("y", TensorProto.INT32, [m, n])], initializer=weights
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def test_a_constant_weights_zero_point_is_subtracted_at_load_deployed():
    m, k, n = 16, 1024, 8210
    written = analyze(matmul_integer(m, k, n))
    deployed = deploy(written)
    product = 2 * m * k * n  # the integer product
    assert written.totals.flops == product + m * k + k * n  # as written: A's and B's zero points subtracted every run
    assert deployed.totals.flops == product + m * k  # B − 128 done once at load; A's zero point is a runtime input
    assert k * n == 8_407_040  # the 8.4 M FLOPs a run for a 1024×8210 weight
    assert any("zero points" in note and "folded at load" in note for note in deployed.notes)


def test_a_weight_given_at_run_time_keeps_its_zero_point_work():
    m, k, n = 16, 256, 512
    deployed = deploy(analyze(matmul_integer(m, k, n, weight_is_input=True)))
    assert deployed.totals.flops == 2 * m * k * n + m * k + k * n  # B is a graph input: nothing to fold


# --- a fused attention's useful FLOPs leave out the graph-only work ----------------------------------


def test_gpt2_decode_attention_useful_flops_leave_out_the_graph_only_work():
    written = analyze(DECODE, sizing=Sizing(dims={"batch": 1, "past_sequence": 1023}))
    deployed = deploy(written, INPLACE)
    flash = next(k for k in deployed.nodes if k.op_type == "FlashAttention")
    heads, keys, queries = 12, 1024, 1  # one new token against past 1023 + 1
    k_scale = heads * keys * DH  # K·(1/√dh) over the whole cache, one multiply per element, every step
    nan_guard = 2 * heads * queries * keys  # IsNaN and its Where over the probabilities
    assert flash.cost.flops - flash.cost.useful_flops == k_scale + nan_guard  # causal at S = 1: every score is seen
    assert flash.cost.flops / flash.cost.useful_flops == pytest.approx(1.25, abs=0.01)  # the issue's +25 %
    assert any("graph-only work" in note for note in deployed.notes)
    assert deployed.totals.bytes == pytest.approx(285.7e6, rel=0.003)  # decode in place unchanged
