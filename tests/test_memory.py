"""The memory footprint: weights, the KV cache, peak activations by liveness, and whether they fit
(onnx_roofline/costs/memory.py). fp16: 2 bytes per element."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnx_roofline import Sizing, analyze
from onnx_roofline.costs.hardware import list_hardware, load_hardware
from onnx_roofline.errors import HardwareSpecError
from onnx_roofline.report.serialize import render_json
from onnx_roofline.report.table import render_table
from tests.conftest import FIXTURES, fp16_graph

F16 = TensorProto.FLOAT16
MS = "com.microsoft"


def model(nodes, inputs, outputs, weights=None, extra_opsets=()):
    return fp16_graph(nodes, inputs, outputs, weights, (("", 21), *((d, 1) for d in extra_opsets)))


def mlp():
    return model(
        [
            helper.make_node("MatMul", ["x", "w1"], ["h"], name="mm1"),
            helper.make_node("Relu", ["h"], ["a"], name="relu"),
            helper.make_node("Reshape", ["a", "shape"], ["a2"], name="view"),  # shares a's buffer
            helper.make_node("MatMul", ["a2", "w2"], ["y"], name="mm2"),
        ],
        [("x", [1024, 256])],
        [("y", [1024, 256])],
        {"w1": [256, 512], "w2": [512, 256]},
    )


def with_shape(m):
    m.graph.initializer.append(numpy_helper.from_array(np.array([1024, 512], np.int64), "shape"))
    return m


def test_weights_and_peak_activation_by_liveness():
    memory = analyze(with_shape(mlp())).memory
    assert (
        memory.weight_bytes == (256 * 512 + 512 * 256) * 2
    )  # w1, w2 fp16; the int64 [2] shape is a shape constant, no weight
    # mm1: x and h live (1.5 MB); relu: h and a (x freed after mm1): 2 MB; the view allocates nothing;
    # mm2: a and y (h freed after relu): 1.5 MB
    assert memory.peak_activation_bytes == 2 * 1024 * 512 * 2
    assert memory.peak_at == "relu"
    assert memory.kv_cache_bytes == 0 and memory.kv_cache_bytes_per_sequence is None
    assert memory.total_bytes == memory.weight_bytes + memory.peak_activation_bytes
    assert memory.capacity == 80e9 and memory.fits  # H100 SXM 80 GB


def test_a_concat_cache_holds_past_and_present():
    b, h, p, dh = 4, 12, 100, 64
    m = model(
        [helper.make_node("Concat", ["past", "new"], ["present"], name="cache", axis=2)],
        [("past", [b, h, p, dh]), ("new", [b, h, 1, dh])],
        [("present", [b, h, p + 1, dh])],
    )
    memory = analyze(m).memory
    assert memory.kv_cache_bytes == b * h * (p + 1) * dh * 2  # the cache after the step
    assert memory.kv_cache_bytes_per_sequence == h * (p + 1) * dh * 2
    assert memory.kv_cache_resident_bytes == b * h * (p + (p + 1)) * dh * 2  # the graph copies past into present
    assert memory.peak_activation_bytes == b * h * 1 * dh * 2  # only the new rows: caches are not activations


def test_a_shared_gqa_buffer_is_held_once():
    b, s, heads, kv_heads, dh, length = 1, 1, 8, 2, 64, 256
    nodes = [helper.make_node("GroupQueryAttention", ["q", "k", "v", "past_k", "past_v", "seqlens", "total"],
                              ["y", "present_k", "present_v"], name="gqa", domain=MS, num_heads=heads, kv_num_heads=kv_heads)]  # fmt: skip
    graph = helper.make_graph(
        nodes,
        "g",
        [
            helper.make_tensor_value_info("q", F16, [b, s, heads * dh]),
            helper.make_tensor_value_info("k", F16, [b, s, kv_heads * dh]),
            helper.make_tensor_value_info("v", F16, [b, s, kv_heads * dh]),
            helper.make_tensor_value_info("past_k", F16, [b, kv_heads, length, dh]),
            helper.make_tensor_value_info("past_v", F16, [b, kv_heads, length, dh]),
            helper.make_tensor_value_info("seqlens", TensorProto.INT32, [b]),
        ],
        [helper.make_tensor_value_info(n, F16, None) for n in ("y", "present_k", "present_v")],
        initializer=[numpy_helper.from_array(np.array([length], np.int32), "total")],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(MS, 1)])
    memory = analyze(m).memory
    buffer = b * kv_heads * length * dh * 2  # one max-length buffer per K and V
    assert memory.kv_cache_bytes == 2 * buffer
    assert memory.kv_cache_resident_bytes == 2 * buffer  # past and present are the same buffer


def test_gpt2_decode_footprint():
    path = FIXTURES / "gpt2_decode_fp16.onnx"
    batch, past, layers, heads, dh, vocab, hidden = 4, 1023, 12, 12, 64, 50257, 768
    report = analyze(path, sizing=Sizing(dims={"batch": batch, "past_sequence": past}))
    memory = report.memory
    proto = onnx.load(path, load_external_data=False)
    shape_constant = lambda t: t.data_type == TensorProto.INT64 and len(t.dims) <= 1 and np.prod(t.dims) <= 16  # noqa: E731 (model/weights.py)
    stored = sum(
        int(np.prod(t.dims)) * 2 if t.data_type == F16 else int(np.prod(t.dims)) * 8
        for t in proto.graph.initializer
        if not shape_constant(t)
    )
    assert all(t.data_type in (F16, TensorProto.INT64) for t in proto.graph.initializer)
    assert not any(n.op_type == "Constant" and n.attribute[0].t.data_type == F16 for n in proto.graph.node)
    assert memory.weight_bytes == stored  # every weight is read by some node
    assert memory.weight_bytes >= 124_439_808 * 2  # GPT-2 small's parameters in fp16
    per_sequence = layers * 2 * heads * (past + 1) * dh * 2  # K and V of every layer, past + the new row
    assert memory.kv_cache_bytes == batch * per_sequence
    assert memory.kv_cache_bytes_per_sequence == per_sequence
    assert memory.kv_cache_resident_bytes == batch * layers * 2 * heads * (past + past + 1) * dh * 2  # past and present
    # at the lm_head: the transposed embedding (as written, computed every step), the final hidden
    # states it multiplies and the logits it writes
    assert memory.peak_activation_bytes == (vocab * hidden + batch * hidden + batch * vocab) * 2
    assert memory.peak_at == "/model/lm_head/MatMul"
    assert memory.fits


def test_it_does_not_fit_a_small_accelerator():
    small = load_hardware("l4")
    report = analyze(
        FIXTURES / "gpt2_decode_fp16.onnx", hw=small, sizing=Sizing(dims={"batch": 512, "past_sequence": 1023})
    )
    per_sequence = 12 * 2 * 12 * 1024 * 64 * 2
    assert report.memory.kv_cache_bytes == 512 * per_sequence  # 19.3 GB, and as much again for the past
    assert report.memory.capacity == 24e9 and report.memory.fits is False


def test_json_and_table_carry_the_footprint():
    report = analyze(with_shape(mlp()))
    data = json.loads(render_json(report))
    assert data["view"] == "written"
    # the JSON's memory is what a runtime holds, the deployed footprint (costs/capacity.py): mm1 and
    # its Relu are one kernel, so x and a are live at once, then a and y: 1024·256·2 + 1024·512·2
    assert data["memory"]["peak_activation_bytes"] == 1024 * 256 * 2 + 1024 * 512 * 2
    assert data["memory"]["fits"] is True and data["memory"]["memory_capacity"] == 80e9
    assert data["hardware"]["memory_capacity"] == 80e9
    assert "memory    weights" in render_table(report)


def test_every_builtin_entry_cites_its_memory_capacity():
    expected = {"h100": 80e9, "h100-pcie": 80e9, "h200": 141e9, "a100": 80e9, "l4": 24e9, "epyc-9654": 6e12}
    for hw in list_hardware():
        assert hw.memory_capacity == expected[hw.key]
        assert "http" in hw.figure_source("memory_capacity") and "memory_capacity" in hw.sources


def test_a_spec_file_may_give_a_capacity_and_it_is_validated(tmp_path):
    good = tmp_path / "npu.toml"
    good.write_text("memory_bandwidth = 1e12\nmemory_capacity = 16e9\n[peaks.vector]\nfp32 = 1e13\n")
    assert load_hardware(str(good)).memory_capacity == 16e9
    bad = tmp_path / "bad.toml"
    bad.write_text('memory_bandwidth = 1e12\nmemory_capacity = "16 GB"\n[peaks.vector]\nfp32 = 1e13\n')
    with pytest.raises(HardwareSpecError, match="memory_capacity"):
        load_hardware(str(bad))
    none = tmp_path / "none.toml"
    none.write_text("memory_bandwidth = 1e12\n[peaks.vector]\nfp32 = 1e13\n")
    assert analyze(with_shape(mlp()), hw=load_hardware(str(none))).memory.fits is None  # not judged


def test_critical_and_sweep_say_the_largest_batch_that_fits():
    from math import floor

    from onnx_roofline.commands.whatif import Session, critical, sweep

    session = Session(FIXTURES / "gpt2_decode_fp16.onnx", dims={"past_sequence": 1023}, kv_cache="inplace")
    result = critical(session, "batch", "deployed")
    vocab, hidden = 50257, 768
    per_sequence = (
        12 * 2 * 12 * 1024 * 64 * 2 + (hidden + vocab) * 2
    )  # its KV cache, and its hidden state and logits at the lm_head
    weights = 2 * (124_439_808 + vocab * hidden)  # GPT-2 small, and the lm_head's transposed embedding folded at load
    assert result.memory_line.slope == per_sequence
    assert result.fits_up_to == floor(
        (80e9 * 0.9 - weights) / per_sequence
    )  # 1893: 90 % of an H100's 80 GB (vLLM's default)
    assert result.to_dict()["model"]["memory"]["fits_up_to"] == result.fits_up_to
    points = sweep(session, {"batch": [1, result.fits_up_to + 1]}, "deployed").points
    assert points[0].fits and not points[1].fits
    assert points[1].memory_bytes > 80e9 * 0.9


def test_the_largest_batch_that_fits_is_checked_where_the_activation_peak_moves():
    from onnx_roofline.commands.whatif import Session, critical
    from onnx_roofline.views.deployed import deploy

    path = FIXTURES / "gpt2_decode_fp16.onnx"
    fits = critical(Session(path, dims={"past_sequence": 1023}, kv_cache="copy"), "batch").fits_up_to
    at = {
        b: deploy(analyze(path, sizing=Sizing(dims={"batch": b, "past_sequence": 1023})), "copy").memory
        for b in (fits, fits + 1)
    }
    assert at[fits].total_bytes <= 80e9 * 0.9 < at[fits + 1].total_bytes  # 90 % of the H100's 80 GB, the cache copied
