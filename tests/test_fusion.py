"""The fused view: which ops merge, what a fused kernel reads and writes, and the lesson's attention
claims, each figure written as arithmetic (fp16: 2 bytes per element)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnx_roofline import Sizing, analyze
from onnx_roofline.commands.whatif.fuse_report import fusion_study
from onnx_roofline.commands.whatif.session import Session
from onnx_roofline.views.fusion import ATTENTION, ELEMENTWISE, EPILOGUE, fuse, plan_fusion
from tests.conftest import FIXTURES
from tests.conftest import fp16_graph as graph_model

H100_RIDGE = 989.4e12 / 3.35e12  # 295.34 FLOP/B, fp16 tensor cores over HBM3
F16 = TensorProto.FLOAT16


def fused_view(model: onnx.ModelProto, **dims):
    report = analyze(model, sizing=Sizing(dims=dims))
    return report, fuse(report, plan_fusion(report, frozenset(o.name for o in model.graph.output)))


def group_of(view, op_name: str):
    index = next(n.index for n in view.report.nodes if n.name == op_name)
    return next(g for g in view.nodes if index in g.members)


def test_elementwise_chain_reads_inputs_once_and_writes_only_the_end():
    model = graph_model(
        [
            helper.make_node("Add", ["x", "b"], ["t1"], name="add"),
            helper.make_node("Relu", ["t1"], ["t2"], name="relu"),
            helper.make_node("Mul", ["t2", "x"], ["y"], name="mul"),  # x read again: still once
        ],
        [("x", [1024, 256]), ("b", [256])],
        [("y", [1024, 256])],
    )
    report, view = fused_view(model)
    (group,) = view.nodes
    assert group.kind == ELEMENTWISE
    assert group.cost.flops == 3 * 1024 * 256  # add, max, multiply per element
    assert group.cost.bytes_read == 1024 * 256 * 2 + 256 * 2  # x once, the bias once
    assert group.cost.bytes_written == 1024 * 256 * 2  # y only: t1, t2 never leave the kernel
    assert (
        report.totals.bytes == 3 * (1024 * 256 * 2 * 2) + 256 * 2 + 1024 * 256 * 2
    )  # unfused: 3 round trips, +x in mul


def test_bias_and_activation_are_a_matmul_epilogue_and_views_alias():
    model = graph_model(
        [
            helper.make_node("MatMul", ["x", "w"], ["mm"], name="mm"),
            helper.make_node("Reshape", ["mm", "shape"], ["r"], name="reshape"),
            helper.make_node("Add", ["r", "bias"], ["biased"], name="bias"),
            helper.make_node("Relu", ["biased"], ["y"], name="relu"),
        ],
        [("x", [64, 512])],
        [("y", [64, 8, 128])],
        weights={"w": [512, 1024], "bias": [128]},
    )
    model.graph.initializer.append(numpy_helper.from_array(np.array([64, 8, 128], np.int64), "shape"))
    _, view = fused_view(model)
    (group,) = view.nodes
    assert group.kind == EPILOGUE and group.op_type == "MatMul+3"
    assert group.cost.flops == 2 * 64 * 512 * 1024 + 64 * 1024 + 64 * 1024  # matmul, bias add, relu
    assert group.cost.bytes_read == (64 * 512 + 512 * 1024 + 128) * 2  # x, W, bias (the reshape is a view of mm)
    assert group.cost.bytes_written == 64 * 1024 * 2  # y: mm and the biased tensor stay on chip


def test_an_intermediate_used_outside_the_group_is_written():
    model = graph_model(
        [
            helper.make_node("MatMul", ["x", "w"], ["mm"], name="mm"),
            helper.make_node("Relu", ["mm"], ["y"], name="relu"),
        ],
        [("x", [64, 512])],
        [("y", [64, 1024]), ("mm", [64, 1024])],  # the pre-activation is also a graph output
        weights={"w": [512, 1024]},
    )
    _, view = fused_view(model)
    (group,) = view.nodes
    assert group.cost.bytes_written == 2 * (64 * 1024 * 2)  # mm and y


def test_two_matmuls_never_share_a_kernel():
    model = graph_model(
        [
            helper.make_node("MatMul", ["x", "w1"], ["h"], name="up"),
            helper.make_node("Relu", ["h"], ["a"], name="act"),
            helper.make_node("MatMul", ["a", "w2"], ["y"], name="down"),
        ],
        [("x", [64, 256])],
        [("y", [64, 256])],
        weights={"w1": [256, 1024], "w2": [1024, 256]},
    )
    _, view = fused_view(model)
    assert group_of(view, "act") is group_of(view, "up")
    assert group_of(view, "down") is not group_of(view, "up")
    assert group_of(view, "up").cost.bytes_written == 64 * 1024 * 2  # the activation, read by `down`


def test_a_merge_that_would_close_a_cycle_is_refused():
    """r = Relu(x); n = LayerNorm(r); y = Add(r, n): Add joining Relu's group would make that group
    both feed and wait for the LayerNorm."""
    model = graph_model(
        [
            helper.make_node("Relu", ["x"], ["r"], name="relu"),
            helper.make_node("LayerNormalization", ["r", "g"], ["n"], name="ln"),
            helper.make_node("Add", ["r", "n"], ["y"], name="add"),
        ],
        [("x", [64, 256])],
        [("y", [64, 256])],
        weights={"g": [256]},
    )
    _, view = fused_view(model)
    assert group_of(view, "add") is not group_of(view, "relu")


def test_a_plan_is_valid_at_every_dims():
    session = Session(FIXTURES / "gpt2_decode_fp16.onnx", dims={"past_sequence": 63})
    plan = session.fusion_plan(session.report({"batch": 1}))
    at_8 = session.report({"batch": 8})
    again = plan_fusion(at_8, session.graph_outputs)
    assert [g.members for g in plan.groups] == [g.members for g in again.groups]
    assert fuse(at_8, plan).totals == fuse(at_8, again).totals


@pytest.fixture(scope="module")
def prefill():
    return fusion_study(Session(FIXTURES / "gpt2_prefill_fp16.onnx", dims={"batch": 1, "sequence": 1024}))


@pytest.fixture(scope="module")
def decode():
    return fusion_study(Session(FIXTURES / "gpt2_decode_fp16.onnx", dims={"batch": 1, "past_sequence": 1023}))


def test_prefill_attention_is_memory_bound_unfused_because_qk_writes_the_scores(prefill):
    S = T = 1024
    heads, dh = 12, 64
    assert len(prefill.attention) == 12  # one pattern per layer
    row = prefill.attention[0]
    assert (row.queries, row.keys, row.heads, row.head_size) == (S, T, heads, dh)
    qk = row.scores_node
    assert qk.cost.flops == 2 * heads * S * T * dh
    assert qk.cost.bytes == 2 * heads * (S * dh + dh * T + S * T)  # Q, Kᵀ read; the S×T scores written
    assert qk.placement.intensity == pytest.approx(S * T * dh / (S * dh + dh * T + S * T))  # 56.9
    assert qk.placement.intensity == pytest.approx(56.89, abs=0.01)
    assert qk.bound == "memory"


def test_prefill_attention_fused_is_compute_bound_at_t_over_2(prefill):
    """Per head in fp16: FLOPs 4·S·T·dh (two matmuls), bytes 2·(S·dh + T·dh + T·dh + S·dh) for Q, K,
    V read and O written, so intensity = 4·S·T·dh / (4·dh·(S+T)) = S·T/(S+T): the lesson's formula,
    T/2 = 512 at S = T = 1024."""
    S = T = 1024
    heads, dh = 12, 64
    row = prefill.attention[0]
    kernel = row.kernel
    assert kernel.kind == ATTENTION
    assert kernel.cost.bytes == heads * 2 * (S * dh + T * dh + T * dh + S * dh)
    assert row.matmul_flops == heads * 4 * S * T * dh
    assert row.matmul_intensity == S * T / (S + T) == 512
    # The kernel also does the graph's scale, mask and softmax work: scales on Q and K (S·dh + T·dh),
    # then per score a mask add, softmax 4 − 2/T (max, subtract, sum, divide), a NaN test and a select.
    E, L = heads * S * T, heads * S
    assert kernel.cost.flops == row.matmul_flops + heads * (S * dh + T * dh) + E + (4 * E - 2 * L) + E + E
    assert kernel.placement.intensity == pytest.approx(526.25, abs=0.01)
    assert kernel.bound == "compute"
    assert kernel.placement.ridge == H100_RIDGE  # the tensor cores' own roof: never a blended one above it
    # the vector work overlaps: the compute time is the tensor cores' alone
    assert kernel.placement.compute_time_s == pytest.approx(row.matmul_flops / 989.4e12)


def test_decode_attention_is_memory_bound_in_both_views(decode):
    """S = 1 query against T = past + 1 = 1024 keys: S·T/(S+T) = 1024/1025 ≈ 1 FLOP/B."""
    S, T = 1, 1024
    heads, dh = 12, 64
    row = decode.attention[0]
    assert (row.queries, row.keys) == (S, T)
    assert row.kernel.cost.bytes == heads * 2 * (S * dh + T * dh + T * dh + S * dh)
    assert row.matmul_intensity == pytest.approx(S * T / (S + T))
    assert row.scores_node.bound == "memory" and row.kernel.bound == "memory"


def test_fusing_keeps_flops_and_cuts_bytes(prefill, decode):
    for study in (prefill, decode):
        assert study.fused.totals.flops == study.report.totals.flops
        assert study.fused.totals.bytes < study.report.totals.bytes
        assert study.fused.totals.time_s < study.report.totals.time_s
    # the graph as written spends most of prefill memory-bound; fused, most of it is compute-bound
    assert prefill.report.totals.memory_bound_time_share > 0.8
    assert prefill.fused.totals.memory_bound_time_share < 0.4


def test_gpt2_mlp_gelu_is_one_epilogue(prefill):
    """c_fc Gemm + the 8-op tanh GELU (+ reshapes) → one kernel: reads x, W, bias and the GELU's
    five scalar constants, writes the activation once. T = 1024 tokens, D = 768, F = 3072."""
    T, D, F = 1024, 768, 3072
    gemm = group_of(prefill.fused, "/model/transformer/h.0/mlp/c_fc/Gemm")
    assert gemm.kind == EPILOGUE and gemm.op_type == "Gemm+10"
    assert gemm.cost.bytes == 2 * (T * D + D * F + F + T * F) + 5 * 2


def test_resnet_convs_take_relu_and_residual_add():
    study = fusion_study(Session(FIXTURES / "resnet50_fp16.onnx", dims={"batch": 1}))
    labels = [k.op_type for k in study.fused.nodes if k.kind == EPILOGUE]
    assert labels.count("Conv+2") == 16  # conv3 of each bottleneck: + residual Add + Relu
    assert study.fused.totals.bytes < study.report.totals.bytes


def test_chains_merge_when_one_op_joins_two_of_them():
    """a = Relu(x); b = Neg(y); c = MatMul(z, w); d = Add(a, b) merges the two chains; e = Sigmoid(c)
    is the MatMul's epilogue; f = Mul(d, e) then joins the epilogue and pulls the merged chain in:
    one kernel reading x, y, z, w and writing f."""
    model = graph_model(
        [
            helper.make_node("Relu", ["x"], ["a"], name="relu"),
            helper.make_node("Neg", ["y"], ["b"], name="neg"),
            helper.make_node("MatMul", ["z", "w"], ["c"], name="mm"),
            helper.make_node("Add", ["a", "b"], ["d"], name="add"),
            helper.make_node("Sigmoid", ["c"], ["e"], name="sigmoid"),
            helper.make_node("Mul", ["d", "e"], ["f"], name="mul"),
            helper.make_node("Relu", ["f"], ["g"], name="after"),
        ],
        [("x", [64, 64]), ("y", [64, 64]), ("z", [64, 32])],
        [("g", [64, 64])],
        weights={"w": [32, 64]},
    )
    _, view = fused_view(model)
    (group,) = view.nodes
    assert group.kind == EPILOGUE and group.op_type == "MatMul+6"
    assert group.cost.bytes_read == 2 * (64 * 64 + 64 * 64 + 64 * 32 + 32 * 64)
    assert group.cost.bytes_written == 2 * 64 * 64


def deployed_fused(model: onnx.ModelProto, **dims):
    """The fused view with the deployed view's plan (rows.py's rules apply)."""
    report = analyze(model, sizing=Sizing(dims=dims))
    return report, fuse(report, plan_fusion(report, frozenset(o.name for o in model.graph.output), deployed=True))


def test_projections_of_one_activation_are_packed_deployed():
    """Deployed, two MatMuls reading x with constant weights are one GEMM: x is read once."""
    model = graph_model(
        [
            helper.make_node("MatMul", ["x", "wq"], ["q"], name="q"),
            helper.make_node("MatMul", ["x", "wk"], ["k"], name="k"),
        ],
        [("x", [64, 256])],
        [("q", [64, 128]), ("k", [64, 128])],
        weights={"wq": [256, 128], "wk": [256, 128]},
    )
    _, written_plan = fused_view(model)
    assert group_of(written_plan, "q") is not group_of(written_plan, "k")  # the fused view keeps two kernels
    _, view = deployed_fused(model)
    packed = group_of(view, "q")
    assert packed is group_of(view, "k")
    assert packed.cost.bytes_read == (64 * 256 + 2 * 256 * 128) * 2  # x once, both weights
    assert packed.cost.bytes_written == 2 * 64 * 128 * 2


def test_a_decomposed_layernorm_is_one_kernel_deployed():
    """mean, centring, variance, rsqrt, gain and bias over the last axis: one kernel reading x,
    the gain, the bias and two scalar constants once, writing y once."""
    rows, d = 1024, 768
    model = graph_model(
        [
            helper.make_node("ReduceMean", ["x"], ["mean"], axes=[-1], name="mean"),
            helper.make_node("Sub", ["x", "mean"], ["centred"], name="centre"),
            helper.make_node("Pow", ["centred", "two"], ["squared"], name="square"),
            helper.make_node("ReduceMean", ["squared"], ["var"], axes=[-1], name="var"),
            helper.make_node("Add", ["var", "eps"], ["var_eps"], name="eps"),
            helper.make_node("Sqrt", ["var_eps"], ["std"], name="sqrt"),
            helper.make_node("Div", ["centred", "std"], ["normed"], name="divide"),
            helper.make_node("Mul", ["normed", "gamma"], ["scaled"], name="gain"),
            helper.make_node("Add", ["scaled", "beta"], ["y"], name="bias"),
        ],
        [("x", [rows, d])],
        [("y", [rows, d])],
        weights={"two": [], "eps": [], "gamma": [d], "beta": [d]},
        opsets=(("", 17),),
    )
    _, written_plan = fused_view(model)
    assert group_of(written_plan, "mean") is not group_of(written_plan, "bias")  # reductions split the fused view
    _, view = deployed_fused(model)
    kernels = {id(g) for g in view.nodes if g.cost and g.cost.bytes}
    assert len(kernels) == 1
    norm = group_of(view, "mean")
    assert norm.cost.bytes_read == (rows * d + 2 * d + 2) * 2  # x, gamma, beta, and the two scalars
    assert norm.cost.bytes_written == rows * d * 2  # y alone


def test_a_tensor_only_shape_reads_is_not_written():
    """Shape reads metadata, not data: the epilogue does not write h for it (and it waits on nothing)."""
    model = graph_model(
        [
            helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
            helper.make_node("Relu", ["h"], ["y"], name="act"),
            helper.make_node("Shape", ["h"], ["shape"], name="shape"),
        ],
        [("x", [64, 256])],
        [("y", [64, 1024])],
        weights={"w": [256, 1024]},
    )
    model.graph.output.append(helper.make_tensor_value_info("shape", TensorProto.INT64, [2]))
    _, view = deployed_fused(model)
    assert group_of(view, "act") is group_of(view, "mm")
    assert group_of(view, "mm").cost.bytes_written == 64 * 1024 * 2  # y alone: h is read by nobody's data path
