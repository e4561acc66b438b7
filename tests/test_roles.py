"""Dims by role (shapes/roles.py): a dim whose name the defaults do not know (`x_dim2`, `?`,
`unk__12`, `p2o.DynamicDimension.1`) takes the default of its role in the graph — an image's
sides 224, an audio input's samples 16,000, a token input's sequence 512, a shared leading dim
the batch — or a size the model states (a Reshape to a constant, `imgsz` metadata); each default
is said with its role in the table, the JSON, the HTML, inspect and on stderr.

Every expected figure is computed here by formula (Conv: 2·N·Cout·Hout·Wout·(Cin/group)·kH·kW,
plus one FLOP per output for a bias; MatMul/Gemm: 2·M·K·N), at the sizes a hand binding gives."""

from __future__ import annotations

import json
import re
import shlex

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnx_roofline
from onnx_roofline import Sizing
from onnx_roofline.commands.cli import main
from onnx_roofline.errors import UnboundDimensionError
from onnx_roofline.report.html import render_html
from onnx_roofline.shapes.roles import AUDIO_SAMPLES

SIDE = 224  # the image side the name defaults give `height`/`width` (docs/defaults.md)
MATRIX_OPS = {"Conv", "Gemm", "MatMul"}


def _matrix_flops(report) -> int:
    return sum(node.cost.flops for node in report.nodes if node.op_type in MATRIX_OPS)


def _image_flops(n: int, h: int, w: int) -> int:
    """The classifier of _image_model at [n, 3, h, w], by formula."""
    h1, w1 = (h + 2 - 3) // 2 + 1, (w + 2 - 3) // 2 + 1  # conv1 k3 s2 p1
    h2, w2 = h1 // 2, w1 // 2  # MaxPool k2 s2
    conv1 = 2 * n * 16 * h1 * w1 * 3 * 3 * 3 + n * 16 * h1 * w1  # 3→16, bias
    conv2 = 2 * n * 32 * h2 * w2 * 16 * 3 * 3 + n * 32 * h2 * w2  # 16→32 k3 p1, bias
    fc = 2 * n * 32 * 10 + n * 10  # Gemm 32→10, bias
    return conv1 + conv2 + fc


def _image_model(dims: list, layout: str = "NCHW", metadata: dict | None = None) -> onnx.ModelProto:
    """conv1 3→16 k3 s2 p1, ReLU, MaxPool 2, conv2 16→32 k3 p1, GlobalAveragePool, Flatten, Gemm
    32→10. `dims`: the input's, as written (int, name, or None: no name); NHWC transposes first."""
    rng = np.random.default_rng(0)

    def weight(name, *shape):
        return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)

    source = "x"
    nodes = []
    if layout == "NHWC":
        nodes.append(helper.make_node("Transpose", ["x"], ["xt"], perm=[0, 3, 1, 2], name="to_nchw"))
        source = "xt"
    nodes += [
        helper.make_node(
            "Conv", [source, "w1", "b1"], ["c1"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], name="conv1"
        ),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2], name="pool"),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], name="conv2"),
        helper.make_node("GlobalAveragePool", ["c2"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "wf", "bf"], ["logits"], transB=1, name="fc"),
    ]
    inits = [
        weight("w1", 16, 3, 3, 3),
        weight("b1", 16),
        weight("w2", 32, 16, 3, 3),
        weight("b2", 32),
        weight("wf", 10, 32),
        weight("bf", 10),
    ]
    graph = helper.make_graph(nodes, "classifier", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1] * 4)],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, None)], initializer=inits)  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    for dim, want in zip(model.graph.input[0].type.tensor_type.shape.dim, dims, strict=False):
        dim.Clear()
        if isinstance(want, int):
            dim.dim_value = want
        elif want is not None:
            dim.dim_param = want
    for key, value in (metadata or {}).items():
        entry = model.metadata_props.add()
        entry.key, entry.value = key, value
    return model


NAMINGS = {  # how converters write [batch, 3, height, width]: the anonymous names the analysis gives
    "empty": ([None, 3, None, None], ("x_dim0", "x_dim2", "x_dim3")),
    "question-mark": (
        ["?", 3, "?", "?"],
        ("x_dim0", "x_dim2", "x_dim3"),
    ),  # by ONNX's letter one symbol: no model means N = H = W
    "tf2onnx": (["unk__12", 3, "unk__13", "unk__14"], ("unk__12", "unk__13", "unk__14")),
    "paddle2onnx": (
        ["p2o.DynamicDimension.0", 3, "p2o.DynamicDimension.1", "p2o.DynamicDimension.2"],
        ("p2o.DynamicDimension.0", "p2o.DynamicDimension.1", "p2o.DynamicDimension.2"),
    ),
    "single-letters": (["N", 3, "H", "W"], ("N", "H", "W")),  # known to the name rules
}


@pytest.mark.parametrize("naming", sorted(NAMINGS))
def test_an_image_with_unnamed_sides_is_costed_at_the_default_side(naming):
    """The plain command's FLOPs equal those of the same model bound by hand at 224×224, batch 1."""
    dims, (batch, height, width) = NAMINGS[naming]
    plain = onnx_roofline.analyze(_image_model(dims), sizing=Sizing(default_dims=True))
    by_hand = onnx_roofline.analyze(_image_model([1, 3, SIDE, SIDE]))
    assert plain.model.dims == {batch: 1, height: SIDE, width: SIDE}
    assert _matrix_flops(plain) == _matrix_flops(by_hand) == _image_flops(1, SIDE, SIDE)
    assert plain.totals.flops == by_hand.totals.flops
    if naming != "single-letters":
        roles = {name: d.role for name, d in plain.model.dim_roles.items()}
        assert roles == {batch: "batch", height: "image height", width: "image width"}


def test_an_nhwc_image_takes_its_sides_from_axes_1_and_2():
    plain = onnx_roofline.analyze(
        _image_model(["unk__12", "unk__13", "unk__14", 3], layout="NHWC"), sizing=Sizing(default_dims=True)
    )
    assert plain.model.dims == {"unk__12": 1, "unk__13": SIDE, "unk__14": SIDE}
    assert {n: d.role for n, d in plain.model.dim_roles.items()} == {
        "unk__12": "batch",
        "unk__13": "image height",
        "unk__14": "image width",
    }
    assert _matrix_flops(plain) == _image_flops(1, SIDE, SIDE)


def test_the_image_size_the_metadata_states_is_taken():
    """ultralytics writes `imgsz: [640, 640]` into its exports: height and width, as stated."""
    plain = onnx_roofline.analyze(
        _image_model(["batch", 3, "height", "width"], metadata={"imgsz": "[320, 480]"}),
        sizing=Sizing(default_dims=True),
    )
    assert plain.model.dims == {"batch": 1, "height": 320, "width": 480}
    assert _matrix_flops(plain) == _image_flops(1, 320, 480)
    assert plain.model.dim_roles["height"].source == "model" and "imgsz" in plain.model.dim_roles["height"].text()


def test_every_output_says_each_default_with_its_role(tmp_path, capsys):
    path = tmp_path / "p2o.onnx"
    onnx.save(_image_model(NAMINGS["paddle2onnx"][0]), path)
    assert main([str(path), "--top", "3"]) == 0
    captured = capsys.readouterr()
    assert "p2o.DynamicDimension.1=224 (image height, default)" in captured.out  # the table's summary
    assert "p2o.DynamicDimension.0=1 (batch, default)" in captured.out
    assert "p2o.DynamicDimension.2=224 (image width)" in captured.err  # the note on stderr
    assert main([str(path), "--format", "json"]) == 0
    model = json.loads(capsys.readouterr().out)["model"]
    assert model["dim_roles"]["p2o.DynamicDimension.1"] == {
        "size": 224,
        "role": "image height",
        "source": "graph",
        "why": None,
    }
    assert model["defaulted_dims"] == sorted(model["dim_roles"])
    html = render_html(onnx_roofline.analyze(path, sizing=Sizing(default_dims=True)))
    assert "p2o.DynamicDimension.1=224 (image height, default)" in html
    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert "p2o.DynamicDimension.1 (1 input; default 224: image height)" in out


def _token_model(past: bool = False) -> onnx.ModelProto:
    """input_ids [unk__0, unk__1] int64 → Gather from a [100, 16] embedding → MatMul [16, 16];
    an attention mask of the same rank with dims of its own; with `past`, a cache input [.., past, 16]."""
    table = numpy_helper.from_array(np.ones((100, 16), np.float32), "embedding")
    w = numpy_helper.from_array(np.ones((16, 16), np.float32), "w")
    nodes = [helper.make_node("Gather", ["embedding", "input_ids"], ["e"], name="embed"),
             helper.make_node("MatMul", ["e", "w"], ["h"], name="proj"),
             helper.make_node("Cast", ["attention_mask"], ["m"], to=TensorProto.FLOAT, name="mask")]  # fmt: skip
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["unk__0", "unk__1"]),
              helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["unk__2", "unk__3"])]  # fmt: skip
    if past:
        inputs.append(helper.make_tensor_value_info("past_key", TensorProto.FLOAT, ["unk__0", "past_sequence", 16]))
    graph = helper.make_graph(nodes, "lm", inputs, [helper.make_tensor_value_info("h", TensorProto.FLOAT, None), helper.make_tensor_value_info("m", TensorProto.FLOAT, None)],
                              initializer=[table, w])  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_token_input_takes_a_batch_and_a_sequence():
    report = onnx_roofline.analyze(_token_model(), sizing=Sizing(default_dims=True))
    assert report.model.dims == {"unk__0": 1, "unk__1": 512, "unk__2": 1, "unk__3": 512}
    assert {n: d.role for n, d in report.model.dim_roles.items()} == {
        "unk__0": "batch",
        "unk__1": "sequence",
        "unk__2": "batch",
        "unk__3": "sequence",
    }
    proj = next(node for node in report.nodes if node.name == "proj")
    assert proj.cost.flops == 2 * 1 * 512 * 16 * 16  # [1, 512, 16] @ [16, 16]


def test_a_token_input_beside_a_past_is_one_decode_step():
    report = onnx_roofline.analyze(_token_model(past=True), sizing=Sizing(default_dims=True))
    assert report.model.dims["unk__1"] == 1 and report.model.dims["past_sequence"] == 511
    assert report.model.dim_roles["unk__1"].role == "sequence"


def _audio_model(dims: list, front: str = "Conv") -> onnx.ModelProto:
    """input [batch, samples] → Unsqueeze to [N, 1, T] → reflect Pad 32 → `front` (a Conv1d 1→8
    k64 s32, or a Relu: nothing that says audio) → output."""
    axes = numpy_helper.from_array(np.array([1], np.int64), "axes")
    pads = numpy_helper.from_array(np.array([0, 0, 32, 0, 0, 32], np.int64), "pads")
    weight = numpy_helper.from_array(np.ones((8, 1, 64), np.float32), "w")
    nodes = [helper.make_node("Unsqueeze", ["input", "axes"], ["u"], name="unsqueeze"),
             helper.make_node("Pad", ["u", "pads"], ["p"], mode="reflect", name="pad")]  # fmt: skip
    if front == "Conv":
        nodes.append(helper.make_node("Conv", ["p", "w"], ["y"], kernel_shape=[64], strides=[32], name="stft"))
    else:
        nodes.append(helper.make_node("Relu", ["p"], ["y"], name="relu"))
    graph = helper.make_graph(nodes, "vad", [helper.make_tensor_value_info("input", TensorProto.FLOAT, dims)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=[axes, pads, weight])  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_an_audio_input_takes_a_second_at_16_khz():
    report = onnx_roofline.analyze(_audio_model(["batch", None]), sizing=Sizing(default_dims=True))
    assert report.model.dims == {"batch": 1, "input_dim1": AUDIO_SAMPLES} and AUDIO_SAMPLES == 16_000
    assert report.model.dim_roles["input_dim1"].role == "audio samples"
    frames = (16_000 + 64 - 64) // 32 + 1  # padded 16,064 samples, window 64, hop 32
    conv = next(node for node in report.nodes if node.op_type == "Conv")
    assert conv.cost.flops == 2 * 1 * 8 * frames * 1 * 64
    assert not report.model.implausible


def test_a_reshape_to_a_constant_states_the_size_it_takes():
    """x [batch, unk] reshaped to [1, 1, 28, 28]: the model runs at unk = 784 only."""
    shape = numpy_helper.from_array(np.array([1, 1, 28, 28], np.int64), "shape")
    weight = numpy_helper.from_array(np.ones((4, 1, 3, 3), np.float32), "w")
    nodes = [
        helper.make_node("Reshape", ["x", "shape"], ["r"], name="to_image"),
        helper.make_node("Conv", ["r", "w"], ["y"], name="conv"),
    ]
    graph = helper.make_graph(nodes, "mnist", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "unk__7"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=[shape, weight])  # fmt: skip
    report = onnx_roofline.analyze(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), sizing=Sizing(default_dims=True)
    )
    assert report.model.dims == {"unk__7": 784}
    assert report.model.dim_roles["unk__7"].source == "model"
    assert "to_image" in report.model.dim_roles["unk__7"].text()
    assert report.nodes[1].cost.flops == 2 * 1 * 4 * 26 * 26 * 1 * 3 * 3


def test_a_leading_dim_shared_by_inputs_is_the_batch():
    nodes = [helper.make_node("Add", ["a", "b"], ["y"], name="add")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["d0", 8]), helper.make_tensor_value_info("b", TensorProto.FLOAT, ["d0", 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])  # fmt: skip
    report = onnx_roofline.analyze(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), sizing=Sizing(default_dims=True)
    )
    assert report.model.dim_roles["d0"].role == "batch"


def test_a_dim_with_no_role_is_said_so(capsys, tmp_path):
    nodes = [helper.make_node("Relu", ["a"], ["y"], name="relu")]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["d0"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    path = tmp_path / "plain.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    assert main([str(path), "--top", "1"]) == 0
    captured = capsys.readouterr()
    assert "d0=1 (no role found, default)" in captured.out and "d0=1 (no role found)" in captured.err


def test_a_strict_command_suggests_the_sizes_by_role_quoted(tmp_path, capsys):
    """check takes no default: its error suggests the role's size, quoted for a shell."""
    path = tmp_path / "img.onnx"
    onnx.save(_image_model(["n?", 3, "p2o[1] px", "p2o[2]*"]), path)
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    command = re.search(r"e\.g\. `([^`]*)`", err).group(1)
    words = shlex.split(command)  # what a shell hands the program: the suggestion as written
    assert words[:3] == ["onnx-roofline", "check", str(path)]
    assert set(words[3::2]) == {"--dim"} and set(words[4::2]) == {"n?=1", "p2o[1] px=224", "p2o[2]*=224"}
    assert "image height" in err
    with pytest.raises(UnboundDimensionError) as unbound:
        onnx_roofline.analyze(path)
    assert unbound.value.suggested == {"n?": 1, "p2o[1] px": 224, "p2o[2]*": 224}
    assert unbound.value.roles == {"p2o[1] px": "image height", "p2o[2]*": "image width"}  # `n?`: its name says batch


def test_the_gates_output_says_the_defaults_with_their_roles():
    """`check` binds no default (a gate never passes on sizes nobody chose); a report analyzed with
    the defaults and gated in Python says them as every output does."""
    from onnx_roofline.commands.gate.evaluate import evaluate
    from onnx_roofline.commands.gate.policy import Policy
    from onnx_roofline.commands.gate.render import render_json, render_text

    report = onnx_roofline.analyze(_image_model(NAMINGS["paddle2onnx"][0]), sizing=Sizing(default_dims=True))
    result = evaluate(report, Policy(max_uncosted=0))
    assert "p2o.DynamicDimension.1=224 (image height, default)" in render_text(result)
    assert json.loads(render_json(result))["model"]["dim_roles"]["p2o.DynamicDimension.2"]["role"] == "image width"
