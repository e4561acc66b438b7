"""Data movement and shape ops (onnx_roofline/costs/rules/movement.py): one-node models, every expected
number written as the arithmetic it comes from. f32 = 4 bytes, int64 = 8 bytes, bool = 1 byte."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from onnx_roofline import Sizing, analyze
from onnx_roofline.costs.rules import lookup
from onnx_roofline.model.op_node import OpNode
from onnx_roofline.model.status import Uncostable
from onnx_roofline.model.tensors import TensorInfo
from tests.conftest import analyze_node, one_node_model

I64 = np.int64


def costs(node):
    c = node.cost
    return c.flops, c.bytes_read, c.bytes_written


def direct(op_type, inputs, outputs, opset=21, **attrs):
    """Call the rule's formula on a hand-built OpNode (for values the walk has no shape for:
    sequences, optionals, data-dependent outputs). `inputs`/`outputs`: TensorInfo or None."""
    proto = helper.make_node(op_type, [t.name if t else "" for t in inputs], [t.name for t in outputs], **attrs)
    rule = lookup("", op_type, opset)
    return rule.formula(OpNode(proto, opset, tuple(inputs), tuple(outputs), lambda name: None))


def t(name, shape, dtype="float32"):
    return TensorInfo(name, tuple(shape), dtype)


SEQ = TensorInfo("seq", None, None)  # a sequence value: no tensor shape


# --- views ---------------------------------------------------------------------------------------


def test_reshape_reads_only_its_shape_input():
    node = analyze_node(
        "Reshape",
        [("x", "float32", [2, 3, 4]), ("shape", "int64", [2])],
        ["y"],
        initializers={"shape": np.array([6, 4], I64)},
    )
    assert costs(node) == (0, 2 * 8, 0)  # the 2 int64 dims of `shape`; no data moves
    assert node.outputs[0].shape == (6, 4)


def test_squeeze_axes_attribute_then_input():
    old = analyze_node("Squeeze", [("x", "float32", [1, 3])], ["y"], attrs={"axes": [0]}, opset=11)
    assert costs(old) == (0, 0, 0)  # axes as an attribute: nothing to read
    new = analyze_node(
        "Squeeze",
        [("x", "float32", [1, 3]), ("axes", "int64", [1])],
        ["y"],
        initializers={"axes": np.array([0], I64)},
        opset=13,
    )
    assert costs(new) == (0, 1 * 8, 0)


def test_unsqueeze_and_flatten():
    node = analyze_node(
        "Unsqueeze",
        [("x", "float32", [3]), ("axes", "int64", [2])],
        ["y"],
        initializers={"axes": np.array([0, 2], I64)},
    )
    assert costs(node) == (0, 2 * 8, 0)
    assert costs(analyze_node("Flatten", [("x", "float32", [2, 3, 4])], ["y"])) == (0, 0, 0)


def test_constant_is_free_and_its_consumer_pays():
    report = analyze(
        one_node_model(
            "Constant", [], [("c", "float32", [2, 3])], attrs={"value": helper.make_tensor("v", 1, [2, 3], [0.0] * 6)}
        )
    )
    (node,) = report.nodes
    assert node.status == "ok" and costs(node) == (0, 0, 0)


# --- copies --------------------------------------------------------------------------------------


def test_transpose_reads_and_writes_once():
    node = analyze_node("Transpose", [("x", "float32", [2, 3, 4])], ["y"], attrs={"perm": [2, 0, 1]})
    assert costs(node) == (0, 24 * 4, 24 * 4)


def test_concat_same_input_twice_reads_it_once():
    node = analyze_node("Concat", [("x", "float32", [2, 3]), "x"], ["y"], attrs={"axis": 0})
    assert costs(node) == (0, 6 * 4, 12 * 4)  # x read once, the [4, 3] output written


def test_split_across_opsets():
    outs = [("a", "float32", [1, 4]), ("b", "float32", [2, 4])]
    attr = analyze_node("Split", [("x", "float32", [3, 4])], outs, attrs={"axis": 0, "split": [1, 2]}, opset=11)
    assert costs(attr) == (0, 12 * 4, 12 * 4)
    inp = analyze_node(
        "Split",
        [("x", "float32", [3, 4]), ("split", "int64", [2])],
        outs,
        attrs={"axis": 0},
        initializers={"split": np.array([1, 2], I64)},
        opset=13,
    )
    assert costs(inp) == (0, 12 * 4 + 2 * 8, 12 * 4)  # plus the `split` sizes
    num = analyze_node("Split", [("x", "float32", [4, 4])], ["a", "b"], attrs={"axis": 0, "num_outputs": 2}, opset=18)
    assert costs(num) == (0, 16 * 4, 16 * 4)


def test_expand_and_tile_read_the_input_once():
    expand = analyze_node(
        "Expand",
        [("x", "float32", [3, 1]), ("shape", "int64", [2])],
        ["y"],
        initializers={"shape": np.array([3, 4], I64)},
    )
    assert costs(expand) == (0, 3 * 4 + 2 * 8, 12 * 4)
    tile = analyze_node(
        "Tile", [("x", "float32", [2, 3]), ("r", "int64", [2])], ["y"], initializers={"r": np.array([2, 2], I64)}
    )
    assert costs(tile) == (0, 6 * 4 + 2 * 8, 24 * 4)


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
def test_pad_every_mode_is_a_copy(mode):
    node = analyze_node(
        "Pad",
        [("x", "float32", [3, 3]), ("pads", "int64", [4])],
        ["y"],
        attrs={"mode": mode},
        initializers={"pads": np.array([1, 1, 1, 1], I64)},
    )
    assert costs(node) == (0, 9 * 4 + 4 * 8, 25 * 4)


def test_pad_attributes_before_opset_11():
    node = analyze_node("Pad", [("x", "float32", [2, 3])], ["y"], attrs={"pads": [1, 1, 1, 1]}, opset=2)
    assert costs(node) == (0, 6 * 4, 4 * 5 * 4)


def test_depth_to_space_trilu_reverse_sequence_copy():
    d2s = analyze_node("DepthToSpace", [("x", "float32", [1, 8, 2, 2])], ["y"], attrs={"blocksize": 2})
    assert costs(d2s) == (0, 32 * 4, 32 * 4)
    trilu = analyze_node("Trilu", [("x", "float32", [3, 3])], ["y"])
    assert costs(trilu) == (0, 9 * 4, 9 * 4)
    rev = analyze_node(
        "ReverseSequence",
        [("x", "float32", [4, 2]), ("lens", "int64", [2])],
        ["y"],
        attrs={"batch_axis": 1, "time_axis": 0},
    )
    assert costs(rev) == (0, 8 * 4 + 2 * 8, 8 * 4)


def test_dropout_inference_and_training():
    infer = analyze_node("Dropout", [("x", "float32", [4])], ["y", ("mask", "bool", [4])])
    assert costs(infer) == (0, 4 * 4, 4 * 4 + 4 * 1)  # a copy; the bool mask written too
    train = analyze_node(
        "Dropout",
        [("x", "float32", [4]), ("ratio", "float32", []), ("training", "bool", [])],
        ["y"],
        initializers={"ratio": np.array(0.5, np.float32), "training": np.array(True)},
    )
    assert costs(train) == (2 * 4, 4 * 4 + 4 + 1, 4 * 4)  # compare + scale per element


# --- partial reads -------------------------------------------------------------------------------


def test_gather_embedding_reads_only_the_looked_up_rows():
    node = analyze_node("Gather", [("wte", "float32", [50257, 768]), ("ids", "int64", [1, 8])], ["h"])
    assert node.outputs[0].shape == (1, 8, 768)
    assert costs(node) == (0, 8 * 768 * 4 + 8 * 8, 8 * 768 * 4)  # 8 rows + 8 indices, not the table


def test_gather_with_a_symbolic_dim_bound():
    model = one_node_model("Gather", [("wte", "float32", [50257, 768]), ("ids", "int64", [1, "seq"])], ["h"])
    (node,) = analyze(model, dims={"seq": 16}).nodes
    assert costs(node) == (0, 16 * 768 * 4 + 16 * 8, 16 * 768 * 4)


def test_gather_reads_a_repeated_row_once():
    node = analyze_node("Gather", [("x", "float32", [4, 2]), ("i", "int64", [100])], ["y"])
    assert costs(node) == (0, 8 * 4 + 100 * 8, 100 * 2 * 4)  # 200 picks capped at the 8-element table


def test_gather_elements_and_nd():
    ge = analyze_node("GatherElements", [("x", "float32", [3, 3]), ("i", "int64", [2, 3])], ["y"])
    assert costs(ge) == (0, 6 * 4 + 6 * 8, 6 * 4)
    gnd = analyze_node("GatherND", [("x", "float32", [2, 2]), ("i", "int64", [2, 2])], ["y"])
    assert costs(gnd) == (0, 2 * 4 + 4 * 8, 2 * 4)  # two scalars picked


def test_slice_reads_what_it_keeps():
    node = analyze_node(
        "Slice",
        [("x", "float32", [10, 20]), ("s", "int64", [1]), ("e", "int64", [1]), ("a", "int64", [1])],
        ["y"],
        initializers={"s": np.array([2], I64), "e": np.array([5], I64), "a": np.array([0], I64)},
    )
    assert node.outputs[0].shape == (3, 20)
    assert costs(node) == (0, 3 * 20 * 4 + 3 * 8, 3 * 20 * 4)


def test_slice_with_steps_and_with_attributes():
    steps = analyze_node(
        "Slice",
        [("x", "float32", [10]), ("s", "int64", [1]), ("e", "int64", [1]), ("a", "int64", [1]), ("st", "int64", [1])],
        ["y"],
        initializers={
            "s": np.array([0], I64),
            "e": np.array([10], I64),
            "a": np.array([0], I64),
            "st": np.array([2], I64),
        },
    )
    assert costs(steps) == (0, 5 * 4 + 4 * 8, 5 * 4)  # every other element kept
    attrs = analyze_node("Slice", [("x", "float32", [10])], ["y"], attrs={"starts": [1], "ends": [4]}, opset=9)
    assert costs(attrs) == (0, 3 * 4, 3 * 4)


def test_compress_reads_the_kept_slices():
    # the kept count depends on the condition's values: costed where the graph declares the shape
    node = analyze_node(
        "Compress",
        [("x", "float32", [3, 2]), ("c", "bool", [3])],
        [("y", "float32", [2, 2])],
        attrs={"axis": 0},
        initializers={"c": np.array([True, False, True])},
    )
    assert costs(node) == (0, 4 * 4 + 3 * 1, 4 * 4)


def test_center_crop_pad_reads_the_surviving_part():
    node = analyze_node(
        "CenterCropPad",
        [("x", "float32", [4, 6]), ("shape", "int64", [2])],
        ["y"],
        initializers={"shape": np.array([3, 8], I64)},
    )
    assert costs(node) == (0, 3 * 6 * 4 + 2 * 8, 3 * 8 * 4)  # rows cropped 4→3, columns padded 6→8


# --- scatters ------------------------------------------------------------------------------------


def test_scatter_nd_none_and_add():
    spec = [("x", "float32", [8]), ("i", "int64", [4, 1]), ("u", "float32", [4])]
    none = analyze_node("ScatterND", spec, ["y"])
    assert costs(none) == (0, 8 * 4 + 4 * 8 + 4 * 4, 8 * 4)  # data copied, updates stored
    add = analyze_node("ScatterND", spec, ["y"], attrs={"reduction": "add"})
    assert add.cost.flops == 4  # one add per update


def test_scatter_elements_max_and_legacy_scatter():
    spec = [("x", "float32", [3, 3]), ("i", "int64", [1, 2]), ("u", "float32", [1, 2])]
    node = analyze_node("ScatterElements", spec, ["y"], attrs={"reduction": "max"}, opset=18)
    assert costs(node) == (2, 9 * 4 + 2 * 8 + 2 * 4, 9 * 4)
    assert analyze_node("Scatter", spec, ["y"], opset=9).cost.flops == 0


def test_col2im_adds_every_column_element():
    node = analyze_node(
        "Col2Im",
        [("x", "float32", [1, 4, 9]), ("img", "int64", [2]), ("blk", "int64", [2])],
        ["y"],
        initializers={"img": np.array([4, 4], I64), "blk": np.array([2, 2], I64)},
    )
    assert node.outputs[0].shape == (1, 1, 4, 4)
    assert costs(node) == (36, 36 * 4 + 2 * 8 + 2 * 8, 16 * 4)  # 1·(2·2) rows × 3·3 positions added


# --- metadata and generators ---------------------------------------------------------------------


def test_shape_and_size_read_no_data():
    assert costs(analyze_node("Shape", [("x", "float32", [2, 3, 4])], ["s"])) == (0, 0, 3 * 8)
    assert costs(analyze_node("Shape", [("x", "float32", [2, 3, 4])], ["s"], attrs={"start": 1})) == (0, 0, 2 * 8)
    assert costs(analyze_node("Size", [("x", "float32", [2, 3, 4])], ["n"])) == (0, 0, 8)


def test_eye_like_reads_no_data():
    assert costs(analyze_node("EyeLike", [("x", "float32", [3, 4])], ["y"])) == (0, 0, 12 * 4)


def test_constant_of_shape_reads_its_shape():
    node = analyze_node("ConstantOfShape", [("s", "int64", [3])], ["y"], initializers={"s": np.array([2, 3, 4], I64)})
    assert costs(node) == (0, 3 * 8, 24 * 4)


def test_range_adds_once_per_element():
    node = analyze_node(
        "Range",
        [("a", "int64", []), ("b", "int64", []), ("d", "int64", [])],
        ["y"],
        initializers={"a": np.array(0, I64), "b": np.array(10, I64), "d": np.array(2, I64)},
    )
    assert node.outputs[0].shape == (5,)
    assert costs(node) == (5, 3 * 8, 5 * 8)


def test_one_hot():
    node = analyze_node(
        "OneHot",
        [("i", "int64", [4]), ("depth", "int64", []), ("v", "float32", [2])],
        ["y"],
        initializers={"depth": np.array(5, I64)},
    )
    assert costs(node) == (0, 4 * 8 + 8 + 2 * 4, 4 * 5 * 4)


def test_non_zero_compares_every_element():
    node = analyze_node("NonZero", [("x", "float32", [2, 2])], [("y", "int64", [2, 2])])  # nnz declared: 2
    assert costs(node) == (4, 4 * 4, 2 * 2 * 8)


def test_unique_sorts():
    cost = direct(
        "Unique", [t("x", [8])], [t("y", [5]), t("i", [5], "int64"), t("inv", [8], "int64"), t("c", [5], "int64")]
    )
    assert cost.flops == 8 * 3  # n·ceil(log2 n), n = 8
    rows = direct("Unique", [t("x", [4, 3])], [t("y", [2, 3])], axis=0)
    assert rows.flops == 4 * 2 * 3  # 4 rows sorted, each compare 3 elements


def test_random_generators():
    normal = analyze_node("RandomNormal", [], [("y", "float32", [2, 3])], attrs={"shape": [2, 3]})
    assert costs(normal) == (4 * 6, 0, 6 * 4) and normal.cost.transcendentals == 2 * 6
    like = analyze_node("RandomUniformLike", [("x", "float32", [4])], ["y"])
    assert costs(like) == (2 * 4, 0, 4 * 4)  # the input lends its shape only
    assert costs(analyze_node("Bernoulli", [("p", "float32", [4])], ["y"])) == (4, 4 * 4, 4 * 4)


def test_multinomial():
    node = analyze_node("Multinomial", [("x", "float32", [2, 10])], ["y"], attrs={"sample_size": 5})
    # CDF: 20 exps and 20 adds; 10 draws: 1 scale + ceil(log2 10) = 4 compares each
    assert node.cost.flops == 20 + 10 * (1 + 4) and node.cost.transcendentals == 20


def test_det():
    node = analyze_node("Det", [("x", "float32", [2, 3, 3])], ["y"])
    # per 3×3: column 1 → 2 divides + 2² multiply-adds (8); column 2 → 1 + 1² (2); diagonal product 2
    assert node.cost.flops == 2 * ((2 + 8) + (1 + 2) + 2)


def test_non_max_suppression_counts_every_pair():
    cost = direct("NonMaxSuppression", [t("boxes", [1, 6, 4]), t("scores", [1, 2, 6])], [t("sel", [3, 3], "int64")])
    # per class: 6 threshold compares + 6·ceil(log2 6) = 18 sort compares + 15 pairs × 13; per box 3
    assert cost.flops == 2 * (6 + 18 + 15 * 13) + 6 * 3


# --- resampling ----------------------------------------------------------------------------------


def _resize(mode, x_shape, scales, **attrs):
    return analyze_node(
        "Resize",
        [("x", "float32", x_shape), "", ("scales", "float32", [4])],
        ["y"],
        attrs={"mode": mode, **attrs},
        initializers={"scales": np.array(scales, np.float32)},
    )


def test_resize_upsample_by_mode():
    nearest = _resize("nearest", [1, 3, 4, 4], [1, 1, 2, 2])
    outputs = 3 * 8 * 8
    assert costs(nearest) == (0, 48 * 4 + 4 * 4, outputs * 4)  # the whole input once, plus scales
    assert _resize("linear", [1, 3, 4, 4], [1, 1, 2, 2]).cost.flops == 2 * 4 * outputs  # bilinear: 4 taps
    assert _resize("cubic", [1, 3, 4, 4], [1, 1, 2, 2]).cost.flops == 2 * 16 * outputs  # bicubic: 16 taps


def test_resize_downsample_reads_the_taps_and_antialias_widens_them():
    nearest = _resize("nearest", [1, 1, 8, 8], [1, 1, 0.5, 0.5])
    assert costs(nearest) == (0, 16 * 4 + 4 * 4, 16 * 4)  # picks 16 of the 64 elements
    linear = _resize("linear", [1, 1, 8, 8], [1, 1, 0.5, 0.5])
    assert costs(linear) == (2 * 4 * 16, 64 * 4 + 4 * 4, 16 * 4)  # 16 outputs × 4 taps = all 64
    wide = _resize("linear", [1, 1, 8, 8], [1, 1, 0.5, 0.5], antialias=1)
    assert wide.cost.flops == 2 * (4 * 4) * 16  # per axis ceil(2 · 8/4) = 4 taps


def test_resize_crop_of_unchanged_size_interpolates():
    node = analyze_node(
        "Resize",
        [("x", "float32", [1, 1, 4, 4]), ("roi", "float32", [8]), "", ("sizes", "int64", [4])],
        ["y"],
        attrs={"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize"},
        initializers={
            "roi": np.array([0, 0, 0.25, 0.25, 1, 1, 0.75, 0.75], np.float32),
            "sizes": np.array([1, 1, 4, 4], I64),
        },
    )
    assert node.cost.flops == 2 * 4 * 16  # both spatial axes cropped: bilinear on 16 outputs


def test_upsample_opset_9():
    node = analyze_node(
        "Upsample",
        [("x", "float32", [1, 1, 2, 2]), ("scales", "float32", [4])],
        ["y"],
        attrs={"mode": "linear"},
        initializers={"scales": np.array([1, 1, 2, 2], np.float32)},
        opset=9,
    )
    assert costs(node) == (2 * 4 * 16, 4 * 4 + 4 * 4, 16 * 4)


def test_grid_sample_by_mode():
    spec = [("x", "float32", [1, 2, 4, 4]), ("grid", "float32", [1, 3, 3, 2])]
    outputs = 2 * 3 * 3
    linear = analyze_node("GridSample", spec, ["y"], attrs={"mode": "linear"})
    assert costs(linear) == (2 * 4 * outputs, 32 * 4 + 18 * 4, outputs * 4)  # 72 taps > 32: whole input
    nearest = analyze_node("GridSample", spec, ["y"], attrs={"mode": "nearest"})
    assert costs(nearest) == (0, outputs * 4 + 18 * 4, outputs * 4)
    cubic = analyze_node("GridSample", spec, ["y"], attrs={"mode": "cubic"})
    assert cubic.cost.flops == 2 * 16 * outputs


def test_affine_grid():
    node = analyze_node(
        "AffineGrid",
        [("theta", "float32", [2, 2, 3]), ("size", "int64", [4])],
        ["grid"],
        initializers={"size": np.array([2, 3, 5, 6], I64)},
    )
    assert node.outputs[0].shape == (2, 5, 6, 2)
    assert costs(node) == (4 * 120, 12 * 4 + 4 * 8, 120 * 4)  # x' = t0·x + t1·y + t2: 2 multiply-adds


def _roi_align(**attrs):
    return analyze_node(
        "RoiAlign",
        [("x", "float32", [1, 2, 10, 10]), ("rois", "float32", [3, 4]), ("bi", "int64", [3])],
        ["y"],
        attrs={"output_height": 2, "output_width": 2, **attrs},
    )


def test_roi_align():
    outputs = 3 * 2 * 2 * 2
    avg = _roi_align(sampling_ratio=2)
    assert costs(avg) == (outputs * (8 * 4 + 1), 200 * 4 + 12 * 4 + 3 * 8, outputs * 4)  # 4 samples, 1 divide
    assert _roi_align(sampling_ratio=2, mode="max").cost.flops == outputs * 8 * 4
    adaptive = _roi_align(sampling_ratio=0)  # data-dependent: the lower bound, 1 sample per bin
    assert costs(adaptive) == (outputs * (8 + 1), outputs * 4 * 4 + 12 * 4 + 3 * 8, outputs * 4)


def test_max_roi_pool_lower_bound():
    node = analyze_node(
        "MaxRoiPool",
        [("x", "float32", [1, 2, 10, 10]), ("rois", "float32", [3, 5])],
        ["y"],
        attrs={"pooled_shape": [2, 2]},
    )
    assert costs(node) == (0, 24 * 4 + 15 * 4, 24 * 4)


# --- containers and the ops that are not costed ---------------------------------------------------


def test_containers_count_tensor_bytes_only():
    a, b = t("a", [2, 3]), t("b", [4])
    construct = direct("SequenceConstruct", [a, b], [SEQ])
    assert (construct.bytes_read, construct.bytes_written) == (10 * 4, 10 * 4)
    pos = t("pos", [], "int64")
    at = direct("SequenceAt", [SEQ, pos], [a])
    assert (at.bytes_read, at.bytes_written) == (6 * 4 + 8, None)  # None: the default, the output's bytes
    insert = direct("SequenceInsert", [SEQ, b, pos], [SEQ])
    assert (insert.bytes_read, insert.bytes_written) == (4 * 4 + 8, 4 * 4)
    erase = direct("SequenceErase", [SEQ], [SEQ])
    assert (erase.bytes_read, erase.bytes_written) == (0, 0)
    split = direct("SplitToSequence", [a], [SEQ])
    assert (split.bytes_read, split.bytes_written) == (6 * 4, 6 * 4)
    concat = direct("ConcatFromSequence", [SEQ], [t("y", [4, 3])], axis=0)
    assert concat.bytes_read == 12 * 4
    assert direct("SequenceEmpty", [], [SEQ]).bytes_read == 0
    assert direct("Optional", [a], [SEQ]).bytes_read == 0
    has = direct("OptionalHasElement", [SEQ], [t("h", [], "bool")])
    assert (has.bytes_read, has.bytes_written) == (0, None)


def test_string_ops_count_their_strings_at_the_length_assumed_never_zero():
    (node,) = analyze(_string_model(), sizing=Sizing(string_bytes=12)).nodes
    assert node.cost.flops == 3 * 12  # LOWER: one op a byte of 3 strings of 12 bytes
    assert node.cost.bytes == 2 * 3 * 12  # read and written
    with pytest.raises(Uncostable, match="no static byte size"):  # a bare string: no length to count
        direct("StringNormalizer", [t("x", [3], "string")], [t("y", [3], "string")], case_change_action="LOWER")


def _string_model():
    x = helper.make_tensor_value_info("x", TensorProto.STRING, [3])
    y = helper.make_tensor_value_info("y", TensorProto.STRING, [3])
    graph = helper.make_graph(
        [helper.make_node("StringNormalizer", ["x"], ["y"], case_change_action="LOWER")], "g", [x], [y]
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def test_image_decoder_is_not_costed():
    with pytest.raises(Uncostable, match="encoded data"):
        direct("ImageDecoder", [t("encoded", [100], "uint8")], [t("image", [4, 4, 3], "uint8")])


def test_every_rule_here_runs_on_the_vector_unit():
    node = analyze_node("Gather", [("x", "float32", [4, 2]), ("i", "int64", [3])], ["y"])
    assert node.unit == "vector"
