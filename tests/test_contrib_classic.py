"""onnxruntime's classic contrib ops and its retired default-domain ops (rules/contrib_classic.py,
shape_rules/contrib_classic.py).

An op with a CPU kernel is one node run by onnxruntime (`check_run`): the analysis must type every
output as the run returns it, cost the node, and `verify` must pass (shapes and bytes against the
run). An op without one (`check_formula`, from test_transformer_shapes) is checked against the
schema's formula written here, and against onnxruntime's own static inference where it types the
output. FLOPs are the formulas of the op's docs, written as arithmetic."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from onnx_roofline import Sizing, analyze
from onnx_roofline.commands.verify import verify
from onnx_roofline.commands.verify.inputs import make_feeds
from onnx_roofline.costs import rules
from onnx_roofline.model.tensors import elem_type
from tests.conftest import DTYPES, one_node_model
from tests.test_transformer_shapes import check_formula

MS = "com.microsoft"
f32, f16, f64, i32, i64, u8, i8, u32 = "float32", "float16", "float64", "int32", "int64", "uint8", "int8", "uint32"


def model_of(op_type, inputs, outputs, attrs=None, initializers=None, domain=MS, opset=17):
    """conftest's one-node model, with the input dtypes its table lacks (int16, string) set after."""
    declared = {name: dtype for name, dtype, _ in inputs}
    inputs = [(name, dtype if dtype in DTYPES else f32, shape) for name, dtype, shape in inputs]
    model = one_node_model(op_type, inputs, outputs, attrs, initializers, opset=opset, domain=domain)
    for value in model.graph.input:
        value.type.tensor_type.elem_type = elem_type(declared[value.name])
    return model


def check_run(op_type, inputs, outputs, attrs=None, initializers=None, domain=MS, opset=17, status="ok"):
    """The node's result, after checking its output shapes and dtypes against onnxruntime's run and
    that verify passes; `status` what the analysis must report (a data-dependent node is not ok)."""
    model = model_of(op_type, inputs, outputs, attrs, initializers, domain, opset)
    feeds = make_feeds(model, {})
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    ran = {
        o.name: (a.shape, str(a.dtype)) for o, a in zip(session.get_outputs(), session.run(None, feeds), strict=False)
    }
    (node,) = analyze(model).nodes
    assert node.status == status, node.reason
    typed = {t.name: (t.shape, t.dtype) for t in node.outputs if t is not None and t.is_known}
    assert typed == {name: ran[name] for name in typed}
    if status == "ok":
        assert typed == ran
    result = verify(model)
    assert result.comparison.disagreements == ()
    return node


def flops(node):
    return node.cost.flops


# --- com.microsoft versions of ai.onnx ops -------------------------------------------------------------


def test_aliases_are_the_ai_onnx_rules():
    """The same function, registered for the second domain (a change to the ai.onnx rule applies)."""
    pairs = {"Pad": "Pad", "Range": "Range", "Trilu": "Trilu", "GatherND": "GatherND", "GridSample": "GridSample",
             "Unique": "Unique", "MaxpoolWithMask": "MaxPool", "TorchEmbedding": "Gather"}  # fmt: skip
    for ms, onnx_op in pairs.items():
        assert rules.lookup(MS, ms, 1).formula is rules.lookup("", onnx_op, 21).formula


def test_pad_constant_pads_begin_then_end():
    pads = np.array([1, 2, 0, -1], np.int64)  # rows +1 before, columns +2 before and −1 after
    node = check_run("Pad", [("x", f32, [2, 3]), ("pads", i64, [4])], ["y"], initializers={"pads": pads})
    assert node.outputs[0].shape == (3, 4)
    assert flops(node) == 0  # a copy
    assert node.cost.bytes == 2 * 3 * 4 + 4 * 8 + 3 * 4 * 4  # x + pads read, y written


def test_pad_2d_pads_reflect():
    pads = np.array([[1, 2, 0, 1]], np.int64)
    node = check_run("Pad", [("x", f32, [2, 3]), ("pads", i64, [1, 4])], ["y"], {"mode": "reflect"}, {"pads": pads})
    assert node.outputs[0].shape == (3, 6)


def test_pad_pads_computed_from_a_shape():
    """An exporter's Shape → Concat chain into the pads input is folded on demand for the shape rule."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Concat", ["s", "s"], ["pads"], axis=0),  # [2, 3, 2, 3]
        helper.make_node("Pad", ["x", "pads"], ["y"], domain=MS),
        helper.make_node("Relu", ["y"], ["z"]),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    graph = helper.make_graph(nodes, "g", [x], [helper.make_empty_tensor_value_info("z")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    report = analyze(model)
    assert [(n.status, n.outputs[0].shape) for n in report.nodes[2:]] == [("ok", (2 + 2 + 2, 3 + 3 + 3))] * 2
    assert verify(model).comparison.disagreements == ()


def test_range_with_and_without_delta():
    values = {"s": np.array(1, np.int32), "l": np.array(10, np.int32), "d": np.array(3, np.int32)}
    node = check_run("Range", [("s", i32, []), ("l", i32, []), ("d", i32, [])], ["y"], initializers=values)
    assert node.outputs[0].shape == (3,)  # 1, 4, 7
    assert flops(node) == 3  # one add per output
    values = {"s": np.array(0.5, np.float32), "l": np.array(3, np.float32)}
    assert check_run("Range", [("s", f32, []), ("l", f32, [])], ["y"], initializers=values).outputs[0].shape == (3,)


def test_range_empty_when_the_limit_is_behind():
    values = {"s": np.array([5], np.int64), "l": np.array([1], np.int64)}
    assert check_run("Range", [("s", i64, [1]), ("l", i64, [1])], ["y"], initializers=values).outputs[0].shape == (0,)


def test_trilu():
    node = check_run(
        "Trilu", [("x", i64, [2, 3, 4]), ("k", i64, [])], ["y"], {"upper": 0}, {"k": np.array(1, np.int64)}
    )
    assert flops(node) == 0 and node.cost.bytes == 2 * 3 * 4 * 8 + 8 + 2 * 3 * 4 * 8


@pytest.mark.parametrize("indices, expected", [([5, 2], (5, 4)), ([5, 1, 3], (5, 1))])
def test_gather_nd(indices, expected):
    node = check_run("GatherND", [("x", f32, [2, 3, 4]), ("i", i64, indices)], ["y"])
    assert node.outputs[0].shape == expected
    # reads the selected elements (the output's, at most x), the indices; writes y
    out = int(np.prod(expected))
    assert node.cost.bytes_read == min(out, 24) * 4 + int(np.prod(indices)) * 8


@pytest.mark.parametrize("mode, taps", [("bilinear", 4), ("nearest", 1), ("bicubic", 16)])
def test_grid_sample(mode, taps):
    node = check_run("GridSample", [("x", f32, [2, 3, 5, 6]), ("grid", f32, [2, 7, 8, 2])], ["y"], {"mode": mode})
    assert node.outputs[0].shape == (2, 3, 7, 8)
    outputs = 2 * 3 * 7 * 8
    assert flops(node) == (0 if taps == 1 else 2 * taps * outputs)  # 2 FLOPs per tap


def test_unique_is_data_dependent():
    """idx has the input's length; the uniques and counts depend on the values: the node is not
    costed (never zero) and its reason says the values of x size it."""
    node = check_run("Unique", [("x", f32, [6])], ["y", "idx", "counts"], status="unknown-shape")
    assert node.cost is None
    assert node.outputs[1].shape == (6,) and node.outputs[0].shape is None
    report = analyze(one_node_model("Unique", [("x", f32, [6])], ["y", "idx", "counts"], domain=MS))
    assert "values of graph input 'x'" in report.uncosted.root_cause.reason


def test_maxpool_with_mask():
    attrs = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}
    node = check_run("MaxpoolWithMask", [("x", f32, [2, 3, 8, 8]), ("mask", i32, [1, 3, 8, 8])], ["y"], attrs)
    assert node.outputs[0].shape == (2, 3, 4, 4)
    # MaxPool's count: taps inside the input per axis, outputs 0..3 at 2o−1..2o+1: 2 + 3 + 3 + 3 = 11
    assert flops(node) == 2 * 3 * 11 * 11 - 2 * 3 * 4 * 4


def test_nhwc_max_pool_reads_channels_last():
    attrs = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}
    node = check_run("NhwcMaxPool", [("x", u8, [2, 8, 8, 3])], ["y"], attrs)
    assert node.outputs[0].shape == (2, 4, 4, 3)
    assert flops(node) == 2 * 3 * 11 * 11 - 2 * 3 * 4 * 4  # as the NCHW pool of the same tensors


def test_nhwc_max_pool_dilations_and_ceil_mode():
    node = check_run("NhwcMaxPool", [("x", i8, [2, 7, 7, 3])], ["y"], {"kernel_shape": [3, 3], "dilations": [2, 2]})
    assert node.outputs[0].shape == (2, 3, 3, 3)  # 7 − (3 − 1)·2 = 3
    assert flops(node) == 2 * 3 * 3 * 3 * (9 - 1)  # full windows: 8 compares each
    node = check_run(
        "NhwcMaxPool", [("x", i8, [2, 7, 7, 3])], ["y"], {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}
    )
    assert node.outputs[0].shape == (2, 4, 4, 3)


def test_conv_transpose_with_dynamic_pads():
    inputs = [("x", f32, [1, 2, 5, 5]), ("w", f32, [2, 3, 3, 3]), ("pads", i64, [4]), ("b", f32, [3])]
    pads = {"pads": np.array([1, 0, 1, 2], np.int64)}
    node = check_run("ConvTransposeWithDynamicPads", inputs, ["y"], {"strides": [2, 2]}, pads)
    assert node.outputs[0].shape == (1, 3, 9, 9)  # 2·4 + 3 − (1 + 1) rows, 2·4 + 3 − (0 + 2) columns
    # every input element scatters into Cout·kH·kW outputs, + the bias (input 3, not the pads) per output
    assert flops(node) == 2 * (1 * 2 * 5 * 5) * (3 * 3 * 3) + 1 * 3 * 9 * 9
    node = check_run("ConvTransposeWithDynamicPads", inputs[:3], ["y"], {"strides": [2, 2]}, pads)
    assert flops(node) == 2 * (1 * 2 * 5 * 5) * (3 * 3 * 3)  # no bias


# --- utility ops with a CPU kernel -----------------------------------------------------------------------


@pytest.mark.parametrize("axis, expected", [(-1, (2, 3, 1)), (2, (2, 3, 1)), (-3, (1, 2, 3)), (1, (2, 1, 3))])
def test_expand_dims(axis, expected):
    node = check_run(
        "ExpandDims", [("x", f32, [2, 3]), ("axis", i32, [])], ["y"], initializers={"axis": np.array(axis, np.int32)}
    )
    assert node.outputs[0].shape == expected
    assert (node.cost.bytes_read, node.cost.bytes_written) == (4, 0)  # a view: the int32 axis read


def test_sample_op_is_a_copy():
    node = check_run("SampleOp", [("x", f32, [2, 3])], ["y"])
    assert flops(node) == 0 and node.cost.bytes == 2 * 2 * 3 * 4


def test_inverse():
    node = check_run("Inverse", [("x", f32, [2, 4, 4])], ["y"])
    assert flops(node) == 2 * (2 * 4**3)  # 2·M³ per matrix


@pytest.mark.parametrize("metric, transcendentals", [("sqeuclidean", 0), ("euclidean", 4 * 3)])
def test_cdist(metric, transcendentals):
    node = check_run("CDist", [("a", f32, [4, 5]), ("b", f32, [3, 5])], ["c"], {"metric": metric})
    assert flops(node) == 4 * 3 * (3 * 5 - 1)  # per pair: 5 subtracts, 5 squares, 4 adds
    assert node.cost.transcendentals == transcendentals  # a sqrt per pair


def test_cdist_other_metric_is_unsupported():
    model = one_node_model("CDist", [("a", f64, [4, 5]), ("b", f64, [3, 5])], ["c"], {"metric": "cosine"}, domain=MS)
    (node,) = analyze(model).nodes
    assert node.status == "unsupported" and "cosine" in node.reason


def test_matmul_integer16():
    node = check_run("MatMulInteger16", [("a", "int16", [2, 4, 5]), ("b", "int16", [5, 3])], ["c"])
    assert flops(node) == 2 * 5 * (2 * 4 * 3)  # 2·K per output
    assert (
        rules.lookup(MS, "MatMulInteger16", 1).unit == "matrix"
    )  # (no int16 tensor-core peak: placed on the vector unit)


@pytest.mark.parametrize("dtype, per_element", [(i32, 7 + 9), (i64, 2 * 7 + 9), (f32, 7 + 9)])
def test_murmur_hash3(dtype, per_element):
    node = check_run("MurmurHash3", [("x", dtype, [2, 3])], ["y"], {"positive": 0} if dtype == i64 else None)
    assert flops(node) == 6 * per_element  # 7 ops per 4-byte block, 9 to finalize


def test_murmur_hash3_of_strings_hashes_the_length_assumed():
    model = model_of("MurmurHash3", [("x", "string", [2])], ["y"])
    (node,) = analyze(model, sizing=Sizing(string_bytes=12)).nodes
    assert node.outputs[0].shape == (2,) and node.outputs[0].dtype == u32
    assert flops(node) == 2 * (12 // 4 * 7 + 9)  # 3 blocks of 4 bytes a 12-byte key, then the finalizer


@pytest.mark.parametrize("mode, per_output", [("bilinear", 8), ("nearest", 0)])
def test_crop_and_resize(mode, per_output):
    inputs = [("x", f32, [2, 3, 10, 12]), ("rois", f32, [4, 4]), ("batch_indices", i32, [4]), ("crop_size", i32, [2])]
    node = check_run("CropAndResize", inputs, ["y"], {"mode": mode}, {"crop_size": np.array([5, 7], np.int32)})
    assert node.outputs[0].shape == (4, 3, 5, 7)
    assert flops(node) == per_output * 4 * 3 * 5 * 7  # 4 taps at 2 FLOPs each (bilinear)


def test_word_conv_embedding():
    inputs = [("sequence", i32, [6, 10]), ("w", f32, [16, 1, 3, 8]), ("b", f32, [16]), ("c", f32, [50, 8])]
    node = check_run("WordConvEmbedding", inputs, ["y"])
    assert node.outputs[0].shape == (6, 16)
    # the lower bound, one window per word: 16 filters · (2·3·8 taps + bias + max)
    assert flops(node) == 6 * 16 * (2 * 3 * 8 + 2)
    assert node.cost.transcendentals == 6 * 16  # tanh
    # 3 char rows of 8 floats per word, the rest whole
    assert node.cost.bytes_read == 6 * 10 * 4 + 16 * 3 * 8 * 4 + 16 * 4 + 6 * 3 * 8 * 4


def test_tokenizer_is_typed_at_the_most_tokens_a_string_of_the_length_assumed_holds():
    """The output's last dim is the most tokens in any string, data: a string of B bytes holds at
    most ⌊B / mincharnum⌋ tokens, + 2 with mark (the start and end marks)."""
    attrs = {"mark": 1, "mincharnum": 2, "pad_value": "#", "separators": [" "]}
    model = model_of("Tokenizer", [("x", "string", [2])], ["y"], attrs)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (tokens,) = session.run(None, {"x": np.array(["Hello World", "I love computer science !"], object)})
    (node,) = analyze(model, sizing=Sizing(string_bytes=25)).nodes  # the longest string: 25 bytes
    bound = 25 // 2 + 2
    assert node.outputs[0].shape == (2, bound) and node.at_most and tokens.shape[1] <= bound
    assert flops(node) == 2 * 25  # one scan step a byte
    assert node.cost.bytes == 2 * 25 + 2 * bound * 25  # the strings read, the tokens written, 25 bytes each


# --- no CPU kernel: the schema's formula ---------------------------------------------------------------------


def _formula(op_type, inputs, expected, attrs=None):
    check_formula(op_type, inputs, list(expected), expected, attrs)
    (node,) = analyze(one_node_model(op_type, inputs, list(expected), attrs, domain=MS)).nodes
    return node


def test_mul_integer():
    inputs = [("a", u8, [3, 5]), ("a_zp", u8, []), ("b", u8, [5]), ("b_zp", u8, [])]
    node = _formula("MulInteger", inputs, {"c": ((3, 5), i32)})
    assert flops(node) == 3 * 15  # per output: a multiply, two zero-point subtracts


def test_reduce_sum_integer():
    node = _formula("ReduceSumInteger", [("x", i8, [3, 5, 7])], {"y": ((3, 1, 7), i32)}, {"axes": [1], "keepdims": 1})
    assert flops(node) == 3 * 5 * 7 - 3 * 7  # n − m adds
    _formula("ReduceSumInteger", [("x", u8, [3, 5, 7])], {"y": ((3,), u32)}, {"axes": [1, 2], "keepdims": 0})


def test_rfft_and_irfft():
    node = _formula("Rfft", [("x", f32, [3, 16])], {"y": ((3, 9, 2), f32)}, {"signal_ndim": 1})
    assert flops(node) == 3 * 2.5 * 16 * 4  # 2.5·N·log2(N) per line, N = 16
    node = _formula("Rfft", [("x", f32, [3, 4, 16])], {"y": ((3, 4, 9, 2), f32)}, {"signal_ndim": 2})
    assert flops(node) == 3 * 2.5 * 64 * 6  # a 4×16 transform: N = 64
    # onnxruntime's Irfft returns 2·m − 1 points for m bins (its kernel), and normalizes by 1/N
    node = _formula("Irfft", [("x", f32, [3, 5, 2])], {"y": ((3, 9), f32)}, {"signal_ndim": 1})
    assert flops(node) == 3 * round(2.5 * 9 * np.log2(9)) + 3 * 9


@pytest.mark.parametrize("op_type", ["ComplexMul", "ComplexMulConj"])
def test_complex_mul(op_type):
    node = _formula(op_type, [("a", f16, [3, 5, 2]), ("b", f16, [5, 2])], {"c": ((3, 5, 2), f16)})
    assert flops(node) == 6 * 3 * 5  # 4 multiplies and 2 adds per complex output


def test_is_all_finite():
    node = _formula("IsAllFinite", [("x", f32, [3, 5, 7]), ("x2", f32, [4])], {"y": ((), "bool")})
    assert flops(node) == 3 * 5 * 7 + 4  # one test per element


def test_bitmask_dropouts():
    node = _formula("BitmaskDropout", [("x", f32, [3, 5, 7])], {"y": ((3, 5, 7), f32), "mask": ((4,), u32)})
    assert flops(node) == 0  # inference: a copy; the mask packs 105 bits in 4 words
    inputs = [("x", f16, [3, 5, 7]), ("bias", f16, [7]), ("residual", f16, [3, 5, 7])]
    node = _formula("BitmaskBiasDropout", inputs, {"y": ((3, 5, 7), f16), "mask": ((4,), u32)})
    assert flops(node) == 2 * 105  # bias and residual adds


def test_nhwc_fused_conv():
    inputs = [("x", f16, [1, 8, 8, 4]), ("w", f16, [6, 4, 3, 3]), ("b", f16, [6])]
    node = _formula("NhwcFusedConv", inputs, {"y": ((1, 6, 6, 6), f16)}, {"activation": "Relu"})
    outputs = 6 * 6 * 6
    assert flops(node) == 2 * (4 * 3 * 3) * outputs + outputs + outputs  # taps, bias, Relu


def test_torch_embedding():
    node = _formula("TorchEmbedding", [("weight", f32, [10, 6]), ("indices", i64, [2, 3])], {"y": ((2, 3, 6), f32)})
    assert node.cost.bytes_read == 2 * 3 * 6 * 4 + 2 * 3 * 8  # the 6 rows looked up, the indices


# --- onnxruntime's default-domain ops ONNX retired (opset < 10) ------------------------------------------


@pytest.mark.parametrize(
    "op_type, attrs, per_element, transcendentals",
    [
        ("Affine", {"alpha": 2.0, "beta": 1.0}, 2, 0),
        ("Scale", {"scale": 2.0}, 1, 0),
        ("ScaledTanh", {"alpha": 2.0, "beta": 1.0}, 2, 1),
        ("ParametricSoftplus", {"alpha": 2.0, "beta": 1.0}, 3, 2),
        ("ImageScaler", {"scale": 2.0, "bias": [1.0, 2.0, 3.0]}, 2, 0),
        ("MemcpyFromHost", {}, 0, 0),
        ("MemcpyToHost", {}, 0, 0),
    ],
)
def test_retired_elementwise(op_type, attrs, per_element, transcendentals):
    node = check_run(op_type, [("x", f32, [2, 3, 4, 5])], ["y"], attrs, domain="", opset=9)
    assert flops(node) == per_element * 120 and node.cost.transcendentals == transcendentals * 120


@pytest.mark.parametrize(
    "attrs, expected",
    [({"border": [1, 2, 3, 4]}, (2, 3, 4, 8)), ({"border": [1, 2, 3, 4], "scale": [5, 6]}, (2, 3, 5, 6))],
)
def test_crop(attrs, expected):
    node = check_run("Crop", [("x", f32, [2, 3, 10, 12])], ["y"], attrs, domain="", opset=9)
    assert node.outputs[0].shape == expected
    assert node.cost.bytes_read == int(np.prod(expected)) * 4  # reads what it keeps


def test_dynamic_slice():
    values = {"s": np.array([1, -3]), "e": np.array([100, -1]), "a": np.array([0, 2])}
    inputs = [("x", f32, [5, 6, 7]), ("s", i64, [2]), ("e", i64, [2]), ("a", i64, [2])]
    node = check_run("DynamicSlice", inputs, ["y"], initializers=values, domain="", opset=9)
    assert node.outputs[0].shape == (4, 6, 2)  # rows 1..4, columns 4..5
    values = {"s": np.array([1, 2], np.int32), "e": np.array([3, 4], np.int32)}
    inputs = [("x", f32, [5, 6, 7]), ("s", i32, [2]), ("e", i32, [2])]
    node = check_run("DynamicSlice", inputs, ["y"], initializers=values, domain="", opset=9)
    assert node.outputs[0].shape == (2, 2, 7)  # no axes: the first two


def test_gru_unit():
    """No kernel in onnxruntime: Caffe2's formula, per element of hidden [N, D]."""
    inputs = [("h", f32, [4, 8]), ("gates", f32, [4, 24]), ("lengths", f32, [4]), ("t", f32, [])]
    (node,) = analyze(one_node_model("GRUUnit", inputs, ["hidden"], opset=9)).nodes
    assert node.outputs[0].shape == (4, 8)
    assert (flops(node), node.cost.transcendentals) == (4 * 32, 2 * 32)  # sigmoid, tanh; 2 multiplies, subtract, add


def _into_relu(node, inputs):
    """`node` (com.microsoft) feeding a Relu: what follows an untyped output is uncosted."""
    graph = helper.make_graph(
        [node, helper.make_node("Relu", [node.output[0]], ["y"])],
        "g",
        inputs,
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])


def test_an_untyped_output_says_why_in_the_root_cause():
    """A shape rule says why it leaves an output untyped: Unique's uniques are data, Pad's pads a
    graph input's value (named, so `--value pads=…` is the cure)."""
    unique = _into_relu(
        helper.make_node("Unique", ["x"], ["u", "idx", "counts"], domain=MS),
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8])],
    )
    cause = analyze(unique).model.shape_root_cause
    assert cause.op_type == "Unique" and "distinct values" in cause.reason and "graph input 'x'" in cause.reason
    pad = _into_relu(
        helper.make_node("Pad", ["x", "pads"], ["p"], domain=MS),
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
            helper.make_tensor_value_info("pads", TensorProto.INT64, [4]),
        ],
    )
    cause = analyze(pad).model.shape_root_cause
    assert "needs the value of 'pads'" in cause.reason and "graph input 'pads'" in cause.reason
    report = analyze(pad, sizing=Sizing(values={"pads": [0, 1, 0, 1]}))  # given: folded, and every node costed
    assert report.totals.uncosted_nodes == 0 and report.nodes[0].outputs[0].shape == (2, 5)
