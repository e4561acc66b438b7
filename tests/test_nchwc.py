"""onnxruntime's NCHWc ops (com.microsoft.nchwc): shape rules (shape_rules/nchwc.py) and cost
rules (rules/nchwc.py) on the graphs its CPU optimizer really writes.

Graphs (random weights, nothing downloaded): two small conv nets built here — `aligned`, every
channel count a multiple of 16, which MLAS's NCHWc block (8, or 16 with AVX-512F) divides, and
`padded`, with 20-channel tensors that the layout pads up to the block — and the ResNet-50 fixture
with synthesized weights. Each is optimized by onnxruntime at ORT_ENABLE_ALL on CPU and run with
every node output exposed; the analysis must cost every node and agree with every shape the run
returns. Like with like: the NCHWc Conv also holds the activation and the residual add the
unoptimized graph runs as separate nodes (1 FLOP per output each, against 2·(C/group)·k·k per
output for the conv), so the matrix-unit FLOPs agree within 1 % and the total FLOPs exactly."""

from __future__ import annotations

import collections
from dataclasses import dataclass

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnx_roofline import analyze
from onnx_roofline.commands.verify.weights import materialize
from onnx_roofline.shapes import rules as shape_rules
from onnx_roofline.shapes.engine import collect
from onnx_roofline.shapes.rules import nchwc
from tests.conftest import FIXTURES, analyze_node

ort = pytest.importorskip("onnxruntime")

NCHWC = "com.microsoft.nchwc"
EVERY_OP = {
    "Conv",
    "MaxPool",
    "AveragePool",
    "GlobalAveragePool",
    "GlobalMaxPool",
    "ReorderInput",
    "ReorderOutput",
    "Upsample",
}


# --- building and running the graphs --------------------------------------------------------------


def _conv_net(padded_channels: int | None = None, nhwc_channels: int = 16) -> onnx.ModelProto:
    """x [2, 3, 64, 64] through a stem conv, max pool, a residual block with a depthwise conv, an
    average pool and a nearest ×2 resize, joined by an NHWC input u (Transpose → conv) and an NCHW
    input v, a strided conv with Clip, then both global pools into a Gemm; an NHWC output. With
    `padded_channels`, one more conv writes that many channels."""
    rng = np.random.default_rng(0)
    initializers, nodes = [], []

    def weight(name, *shape, value=None):
        array = value if value is not None else (0.1 * rng.standard_normal(shape)).astype(np.float32)
        initializers.append(numpy_helper.from_array(array, name))
        return name

    def node(op_type, inputs, **attrs):
        name = f"{op_type.lower()}_{len(nodes)}"
        nodes.append(helper.make_node(op_type, inputs, [name], name=name, **attrs))
        return name

    c = 16
    x = node("Relu", [node("Conv", ["x", weight("w1", c, 3, 7, 7), weight("b1", c)], strides=[2, 2], pads=[3] * 4)])
    x = node("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4)
    y = node("Relu", [node("Conv", [x, weight("w2", 2 * c, c, 3, 3), weight("b2", 2 * c)], pads=[1] * 4)])
    d = node(
        "Sigmoid", [node("Conv", [y, weight("w3", 2 * c, 1, 3, 3), weight("b3", 2 * c)], pads=[1] * 4, group=2 * c)]
    )
    y = node("Relu", [node("Add", [node("Conv", [d, weight("w4", 2 * c, 2 * c, 1, 1)]), y])])
    y = node("AveragePool", [y], kernel_shape=[2, 2], strides=[2, 2])
    scales = weight("scales", value=np.array([1, 1, 2, 2], np.float32))
    y = node(
        "Resize", [y, "", scales], mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor"
    )
    u = node(
        "Conv", [node("Transpose", ["u"], perm=[0, 3, 1, 2]), weight("wu", 2 * c, nhwc_channels, 3, 3)], pads=[1] * 4
    )
    v = node("Conv", ["v", weight("wv", 2 * c, 2 * c, 1, 1)])
    z = node(
        "Conv",
        [node("Add", [node("Add", [y, u]), v]), weight("w5", 2 * c, 2 * c, 3, 3), weight("b5", 2 * c)],
        strides=[2, 2],
        pads=[1] * 4,
    )
    z = node("Clip", [z, weight("lo", value=np.array(0, np.float32)), weight("hi", value=np.array(6, np.float32))])
    if padded_channels:
        z = node("Conv", [z, weight("w6", padded_channels, 2 * c, 3, 3), weight("b6", padded_channels)], pads=[1] * 4)
    width = 2 * (padded_channels or 2 * c)
    pooled = node("Flatten", [node("Concat", [node("GlobalAveragePool", [z]), node("GlobalMaxPool", [z])], axis=1)])
    logits = node("Gemm", [pooled, weight("wf", 10, width), weight("bf", 10)], transB=1)
    nhwc = node("Transpose", [z], perm=[0, 2, 3, 1])
    inputs = [("x", [2, 3, 64, 64]), ("u", [2, 16, 16, nhwc_channels]), ("v", [2, 2 * c, 16, 16])]
    graph = helper.make_graph(
        nodes,
        "conv_net",
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, shape) for name, shape in inputs],
        [helper.make_empty_tensor_value_info(logits), helper.make_empty_tensor_value_info(nhwc)],
        initializers,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _resnet50() -> onnx.ModelProto:
    """The ResNet-50 fixture at batch 1, its absent weights synthesized."""
    model = materialize(onnx.load(FIXTURES / "resnet50_fp32.onnx", load_external_data=False), None).model
    for value in model.graph.input:
        value.type.tensor_type.shape.dim[0].dim_value = 1
    return model


def _session(model: onnx.ModelProto, level, path=None):
    options = ort.SessionOptions()
    options.graph_optimization_level = level
    options.log_severity_level = 3
    if path is not None:
        options.optimized_model_filepath = str(path)
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _feeds(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in model.graph.input}
    return {name: rng.standard_normal(shape).astype(np.float32) for name, shape in shapes.items()}


def observed_shapes(model: onnx.ModelProto, feeds) -> dict[str, tuple[int, ...]]:
    """Every node output's shape as onnxruntime returns it (each exposed as a graph output; the
    graph run as it is, no optimization)."""
    exposed = onnx.ModelProto()
    exposed.CopyFrom(model)
    declared = {o.name for o in exposed.graph.output}
    for name in (o for n in exposed.graph.node for o in n.output if o and o not in declared):
        exposed.graph.output.append(helper.make_empty_tensor_value_info(name))
    session = _session(exposed, ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    names = [o.name for o in session.get_outputs()]
    return {name: tuple(array.shape) for name, array in zip(names, session.run(None, feeds), strict=False)}


@dataclass(frozen=True)
class Case:
    original: onnx.ModelProto
    optimized: onnx.ModelProto
    observed: dict[str, tuple[int, ...]]


@pytest.fixture(scope="module")
def cases(tmp_path_factory) -> dict[str, Case]:
    folder = tmp_path_factory.mktemp("nchwc")
    built = {"aligned": _conv_net(), "padded": _conv_net(padded_channels=20, nhwc_channels=20), "resnet50": _resnet50()}
    found = {}
    for name, model in built.items():
        path = folder / f"{name}.onnx"
        _session(model, ort.GraphOptimizationLevel.ORT_ENABLE_ALL, path)
        optimized = onnx.load(path)
        if not any(n.domain == NCHWC for n in optimized.graph.node):
            pytest.skip("this CPU's MLAS has no NCHWc block: onnxruntime writes no com.microsoft.nchwc ops here")
        found[name] = Case(model, optimized, observed_shapes(optimized, _feeds(optimized)))
    return found


def _nchwc_ops(model: onnx.ModelProto) -> collections.Counter:
    return collections.Counter(n.op_type for n in model.graph.node if n.domain == NCHWC)


def _matrix_flops(report) -> int:
    return sum(n.cost.flops for n in report.nodes if n.unit == "matrix")


# --- real graphs ----------------------------------------------------------------------------------------


def test_the_optimizer_writes_every_nchwc_op(cases):
    ops = _nchwc_ops(cases["aligned"].optimized)
    assert set(ops) == EVERY_OP
    nodes = cases["aligned"].optimized.graph.node
    convs = [n for n in nodes if n.domain == NCHWC and n.op_type == "Conv"]
    activations = {helper.get_attribute_value(a) for n in convs for a in n.attribute if a.name == "activation"}
    assert {b"Relu", b"Sigmoid", b"Clip"} <= activations
    assert any(len(n.input) == 4 and n.input[3] for n in convs)  # the residual Add, fused as Sum
    reorders = {
        (n.op_type, a.i)
        for n in nodes
        if n.op_type.startswith("Reorder")
        for a in n.attribute
        if a.name == "channels_last"
    }
    assert reorders == {("ReorderInput", 0), ("ReorderInput", 1), ("ReorderOutput", 0), ("ReorderOutput", 1)}


@pytest.mark.parametrize("name", ["aligned", "padded", "resnet50"])
def test_every_node_is_costed_with_the_shapes_onnxruntime_returns(cases, name):
    case = cases[name]
    report = analyze(case.optimized)
    assert report.totals.uncosted_nodes == 0, [(n.name, n.reason) for n in report.nodes if n.status != "ok"]
    outputs = [t for n in report.nodes for t in n.outputs if t is not None]
    assert len(outputs) == len(case.observed)
    assert {t.name: t.shape for t in outputs} == case.observed


@pytest.mark.parametrize("name", ["aligned", "resnet50"])
def test_aligned_channels_cost_what_the_unoptimized_graph_costs(cases, name):
    case = cases[name]
    optimized, original = analyze(case.optimized), analyze(case.original)
    assert optimized.totals.flops == original.totals.flops  # fusion moves activations and adds, adds nothing
    assert optimized.totals.transcendentals == original.totals.transcendentals
    assert _matrix_flops(optimized) == pytest.approx(_matrix_flops(original), rel=0.01)


def test_padded_channels_are_counted_as_the_work_the_kernels_do(cases):
    """The 16 → 20 conv computes ⌈20/block⌉·block output channels; the next ops read them."""
    report = analyze(cases["padded"].optimized)
    block = nchwc.block_size()
    channels = -(-20 // block) * block
    conv = [n for n in report.nodes if n.domain == NCHWC and n.op_type == "Conv"][
        -1
    ]  # the net's last conv; with a block of 16 others write 32 channels too
    assert conv.outputs[0].shape == (2, channels, 8, 8)
    assert (
        conv.cost.flops == 2 * 2 * channels * 8 * 8 * 32 * 3 * 3 + 2 * channels * 8 * 8
    )  # N·M·H·W·(C·k²) MACs, + bias
    reorder = next(
        n for n in report.nodes if n.op_type == "ReorderInput" and n.inputs[0].name == "u"
    )  # the 20-channel NHWC input
    assert reorder.outputs[0].shape[1] == channels
    assert reorder.cost.bytes == (2 * 20 + 2 * channels) * 16 * 16 * 4  # the NHWC input read, the padded layout written


# --- one-node models: the shape rules against onnxruntime's run ------------------------------------------


def _one_node(op_type, inputs, attrs=None) -> onnx.ModelProto:
    """One NCHWc node; `inputs` in slot order, each (name, shape) for a graph input or (name,
    array) for an initializer (a Conv's reordered filter)."""
    node = helper.make_node(op_type, [name for name, _ in inputs], ["y"], domain=NCHWC, **(attrs or {}))
    graph = helper.make_graph(
        [node],
        "one",
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, v) for k, v in inputs if isinstance(v, list)],
        [helper.make_empty_tensor_value_info("y")],
        [numpy_helper.from_array(v, k) for k, v in inputs if isinstance(v, np.ndarray)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(NCHWC, 1)])


def _rule_shape(model: onnx.ModelProto) -> tuple[int, ...] | None:
    values = collect(model.graph)
    node = model.graph.node[0]
    typed = shape_rules.infer_node(node, tuple(values[name] for name in node.input), lambda name: None, 1)
    return typed["y"].shape if "y" in typed else None


def _run_shape(model: onnx.ModelProto) -> tuple[int, ...]:
    (y,) = _session(model, ort.GraphOptimizationLevel.ORT_DISABLE_ALL).run(None, _feeds(model))
    return y.shape


def _filter(*shape) -> np.ndarray:
    return np.zeros(shape, np.float32)


ONE_NODE = {
    "reorder_input": ("ReorderInput", [("x", [2, 20, 5, 7])], {}),
    "reorder_input_nhwc": ("ReorderInput", [("x", [2, 5, 7, 20])], {"channels_last": 1}),
    "reorder_output": ("ReorderOutput", [("x", [2, 32, 5, 7])], {"channels": 28}),
    "reorder_output_nhwc": ("ReorderOutput", [("x", [2, 32, 5, 7])], {"channels": 28, "channels_last": 1}),
    "conv_bias_sum_relu": (
        "Conv",
        [("x", [2, 16, 9, 9]), ("w", _filter(32, 16, 3, 3)), ("b", [32]), ("sum", [2, 32, 5, 5])],
        {"strides": [2, 2], "pads": [1, 1, 1, 1], "activation": "Relu"},
    ),
    "conv_nchw_input": (
        "Conv",
        [("x", [1, 3, 17, 17]), ("w", _filter(16, 3, 7, 7))],
        {"strides": [2, 2], "pads": [3, 3, 3, 3]},
    ),
    "conv_depthwise": ("Conv", [("x", [1, 16, 8, 8]), ("w", _filter(16, 1, 3, 3))], {"group": 16, "dilations": [2, 2]}),
    "max_pool_ceil": ("MaxPool", [("x", [1, 16, 10, 10])], {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    "average_pool_same": (
        "AveragePool",
        [("x", [1, 16, 11, 11])],
        {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"},
    ),
    "global_max_pool": ("GlobalMaxPool", [("x", [2, 32, 7, 5])], {}),
    "global_average_pool": ("GlobalAveragePool", [("x", [2, 32, 7, 5])], {}),
    "upsample": ("Upsample", [("x", [1, 16, 3, 4])], {"scales": [1, 1, 2, 3]}),
}


@pytest.mark.parametrize("case", sorted(ONE_NODE))
def test_shape_rule_matches_onnxruntime_on_one_node(case):
    model = _one_node(*ONE_NODE[case])
    assert _rule_shape(model) == _run_shape(model)


def test_the_block_is_the_one_onnxruntime_uses_here():
    """onnxruntime's own inference of a one-channel ReorderInput (built, never run) gives the block."""
    model = _one_node("ReorderInput", [("x", [1, 1, 1, 1])], {})
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    assert nchwc.block_size() == session.get_outputs()[0].shape[1]  # the CPU flags read as MLAS reads them


def test_reorder_input_pads_to_the_block():
    block = nchwc.block_size()
    assert block in (8, 16)  # MLAS: 8 on x86-64, 16 with AVX-512F
    model = _one_node("ReorderInput", [("x", [1, 20, 4, 4])])
    assert _rule_shape(model) == (1, -(-20 // block) * block, 4, 4)
    assert nchwc.padded(48) == 48  # every block divides it: no padding, no probe needed


def test_upsample_needs_one_scale_per_dim():
    assert _rule_shape(_one_node("Upsample", [("x", [1, 16, 3, 4])], {"scales": [2, 2]})) is None


# --- cost rules ----------------------------------------------------------------------------------------


def _nchwc_node(op_type, inputs, outputs, attrs=None, initializers=None):
    return analyze_node(op_type, inputs, outputs, attrs=attrs, initializers=initializers, domain=NCHWC)


def test_conv_with_bias_sum_and_activation():
    node = _nchwc_node(
        "Conv",
        [
            ("x", "float32", [2, 16, 9, 9]),
            ("w", "float32", [32, 16, 3, 3]),
            ("b", "float32", [32]),
            ("s", "float32", [2, 32, 5, 5]),
        ],
        [("y", "float32", [2, 32, 5, 5])],
        {"strides": [2, 2], "pads": [1, 1, 1, 1], "activation": "Relu"},
    )
    outputs = 2 * 32 * 5 * 5
    assert node.cost.flops == 2 * outputs * 16 * 3 * 3 + outputs + outputs + outputs  # MACs, bias, Sum, Relu
    assert node.unit == "matrix"
    assert (
        node.cost.bytes == (2 * 16 * 9 * 9 + 32 * 16 * 9 + 32 + outputs + outputs) * 4
    )  # X, W, B, Sum read; Y written


def test_conv_sigmoid_is_a_transcendental():
    node = _nchwc_node(
        "Conv",
        [("x", "float32", [1, 8, 4, 4]), ("w", "float32", [8, 1, 3, 3])],
        [("y", "float32", [1, 8, 4, 4])],
        {"pads": [1, 1, 1, 1], "group": 8, "activation": "Sigmoid"},
    )
    assert node.cost.flops == 2 * 8 * 4 * 4 * 1 * 3 * 3  # depthwise: C/group = 1 tap per kernel position
    assert node.cost.transcendentals == 8 * 4 * 4


@pytest.mark.parametrize("op_type", ["MaxPool", "AveragePool", "GlobalMaxPool", "GlobalAveragePool"])
def test_pools_cost_as_their_nchw_forms(op_type):
    attrs = {} if op_type.startswith("Global") else {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}
    out = [1, 16, 1, 1] if op_type.startswith("Global") else [1, 16, 5, 5]
    spec = ([("x", "float32", [1, 16, 10, 10])], [("y", "float32", out)])
    blocked = _nchwc_node(op_type, *spec, attrs)
    plain = analyze_node(op_type, *spec, attrs=attrs)
    assert blocked.cost == plain.cost


def test_reorders_are_copies():
    node = _nchwc_node(
        "ReorderOutput", [("x", "float32", [1, 24, 4, 4])], [("y", "float32", [1, 20, 4, 4])], {"channels": 20}
    )
    assert node.cost.flops == 0
    assert node.cost.bytes == (24 + 20) * 4 * 4 * 4  # the padded layout read, the real channels written


def test_upsample_nearest_is_a_copy_and_linear_interpolates():
    spec = ([("x", "float32", [1, 16, 3, 4])], [("y", "float32", [1, 16, 6, 8])])
    nearest = _nchwc_node("Upsample", *spec, {"scales": [1, 1, 2, 2]})
    assert nearest.cost.flops == 0
    linear = _nchwc_node("Upsample", *spec, {"scales": [1, 1, 2, 2], "mode": "linear"})
    assert linear.cost.flops == 16 * 6 * 8 * 4 * 2  # 2 taps per scaled axis (4), a multiply-add each
