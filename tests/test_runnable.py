"""What cannot run at the dims bound (onnx_roofline/shapes/runnable.py): a convolution whose dilated
kernel exceeds its padded input, a Reshape whose target does not hold its input's elements, a
GroupQueryAttention whose past holds heads of another size than its query packs. ONNX's inference
lets each through; onnxruntime refuses to run it, which each case checks; the analysis refuses
too, in one line naming the node, the sizes and the dims — and where the graph fixes the dim a
default got wrong (the genai builder's kv_cache_dim), takes the size that runs. Where onnxruntime
runs, the analysis agrees with its shapes."""

from __future__ import annotations

import json
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnx_roofline import Sizing, analyze
from onnx_roofline.commands.cli import main
from onnx_roofline.errors import DimensionConflict, DimensionError, UnboundDimensionError
from tests.corpus import manifest


def _model(op_type, x_shape, attrs, weight=None):
    inits = [numpy_helper.from_array(np.ones(weight, np.float32), "w")] if weight else []
    node = helper.make_node(op_type, ["x", *(["w"] if weight else [])], ["y"], **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=inits)  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _run(model, shape):
    """The output shape onnxruntime gives, or the exception it raises."""
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": np.ones(shape, np.float32)})[0].shape


TOO_SMALL = {
    "conv 2x2 stride 2 on 1x1": ("Conv", [1, 8, 1, 1], {"strides": [2, 2]}, (16, 8, 2, 2)),
    "dilated conv: a 5x5 window on 4x4": ("Conv", [1, 2, 4, 4], {"dilations": [2, 2]}, (4, 2, 3, 3)),
    "conv 1-d, stride 1: onnx says 0 wide": ("Conv", [1, 2, 3], {}, (4, 2, 4)),
}
FITS = {
    "pads make room": ("MaxPool", [1, 1, 2, 2], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, None),
    "auto_pad SAME": ("Conv", [1, 8, 1, 1], {"strides": [2, 2], "auto_pad": "SAME_UPPER"}, (16, 8, 2, 2)),
    "a dilated window that just fits": ("Conv", [1, 2, 5, 5], {"dilations": [2, 2]}, (4, 2, 3, 3)),
    "a max pool larger than its input (empty)": ("MaxPool", [1, 1, 2, 2], {"kernel_shape": [3, 3]}, None),
    "a strided average pool larger than its input": (
        "AveragePool",
        [1, 1, 2, 2],
        {"kernel_shape": [4, 4], "strides": [3, 3]},
        None,
    ),
}


@pytest.mark.parametrize("case", sorted(TOO_SMALL))
def test_a_window_larger_than_its_input_is_refused_as_onnxruntime_refuses_it(case):
    op_type, shape, attrs, weight = TOO_SMALL[case]
    model = _model(op_type, shape, attrs, weight)
    with pytest.raises(Exception):  # noqa: B017 - onnxruntime raises its own Fail/InvalidArgument types
        _run(model, shape)
    with pytest.raises(
        DimensionError, match=r"cannot run at its declared shapes: its input 'x' is .* smaller than its"
    ):
        analyze(model)


@pytest.mark.parametrize("case", sorted(FITS))
def test_a_window_that_fits_is_costed_at_onnxruntimes_shape(case):
    op_type, shape, attrs, weight = FITS[case]
    model = _model(op_type, shape, attrs, weight)
    (node,) = analyze(model).nodes
    assert node.status == "ok" and node.outputs[0].shape == _run(model, shape)


def test_dims_too_small_for_a_strided_stem_are_one_line_naming_them(tmp_path, capsys):
    """A ConvNeXt-like stem (4×4, stride 4) then a 2×2 stride-2 downsampling: at 7×7 pixels the
    second conv gets a 1×1 input; at 16×16, a 4×4 one and an output."""
    w1 = numpy_helper.from_array(np.ones((8, 3, 4, 4), np.float32), "w1")
    w2 = numpy_helper.from_array(np.ones((16, 8, 2, 2), np.float32), "w2")
    nodes = [helper.make_node("Conv", ["x", "w1"], ["h"], strides=[4, 4], name="stem"),
             helper.make_node("Conv", ["h", "w2"], ["y"], strides=[2, 2], name="down")]  # fmt: skip
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, "height", "width"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=[w1, w2])  # fmt: skip
    path = tmp_path / "stem.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    assert main([str(path), "--dim", "batch=1", "--dim", "height=7", "--dim", "width=7"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("onnx-roofline: error: node 'down' (Conv) cannot run at batch=1, height=7, width=7: its input 'h' is 1×1 "
                   "(padded 1×1), smaller than its 2×2 window (kernel 2×2, dilations [1, 1]); larger dims give it an output")  # fmt: skip
    report = analyze(path, sizing=Sizing(dims={"batch": 1, "height": 16, "width": 16}))
    assert report.nodes[1].outputs[0].shape == (1, 16, 2, 2)  # 16 / 4 = 4, then (4 - 2) / 2 + 1 = 2


# --- Reshape: a traced target ----------------------------------------------------------------------


def _traced_reshape(tmp_path):
    """x [batch, 6] reshaped to a target fixed at export, [3, 4]: it runs only at batch 2."""
    target = numpy_helper.from_array(np.array([3, 4], np.int64), "target")
    graph = helper.make_graph([helper.make_node("Reshape", ["x", "target"], ["y"], name="traced")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=[target])  # fmt: skip
    path = tmp_path / "traced.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_a_reshape_target_that_does_not_hold_the_input_is_refused(tmp_path, capsys):
    path = _traced_reshape(tmp_path)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert session.run(None, {"x": np.ones((2, 6), np.float32)})[0].shape == (3, 4)
    with pytest.raises(Exception):  # noqa: B017 - onnxruntime's own error type
        session.run(None, {"x": np.ones((3, 6), np.float32)})
    assert analyze(path, sizing=Sizing(dims={"batch": 2})).nodes[0].outputs[0].shape == (3, 4)
    assert main([str(path), "--dim", "batch=3"]) == 2
    assert capsys.readouterr().err.strip() == (
        "onnx-roofline: error: node 'traced' (Reshape) cannot run at batch=3: its input 'x' [3, 6] has 18 elements, its target [3, 4] 12: "
        "a size the graph fixed when it was exported (traced) disagrees with these dims; "
        "it runs at batch=2 (the size Reshape 'traced' was traced at): --dim batch=2"
    )  # fmt: skip; 2·6 = 3·4, the run above


def test_a_traced_attention_runs_only_at_its_traced_key_length(tmp_path):
    """TorchScript's export of MultiheadAttention with kdim traces the key length (9) into a
    Reshape target: bound to 7 keys it cannot run (onnxruntime refuses), bound to 9 it is costed."""
    torch = pytest.importorskip("torch")
    attention = torch.nn.MultiheadAttention(
        32, 4, kdim=32, vdim=32
    ).eval()  # kdim given: the separate-projection path, which traces

    class Call(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.attention = attention

        def forward(self, q, kv):
            return self.attention(q, kv, kv, need_weights=False)[0]

    path = tmp_path / "mha.onnx"
    axes = {"q": {0: "sequence", 1: "batch"}, "kv": {0: "kv_sequence", 1: "batch"}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracer's warnings: what it traces is the point
        torch.onnx.export(
            Call(),
            (torch.randn(7, 2, 32), torch.randn(9, 2, 32)),
            str(path),
            dynamo=False,
            input_names=["q", "kv"],
            dynamic_axes=axes,
        )
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    with pytest.raises(Exception):  # noqa: B017
        session.run(None, {"q": np.ones((7, 2, 32), np.float32), "kv": np.ones((7, 2, 32), np.float32)})
    with pytest.raises(
        DimensionError,
        match=r"\(Reshape\) cannot run at batch=2, kv_sequence=7, sequence=7: .* disagrees with these dims",
    ):
        analyze(path, sizing=Sizing(dims={"batch": 2, "kv_sequence": 7, "sequence": 7}))
    report = analyze(path, sizing=Sizing(dims={"batch": 2, "kv_sequence": 9, "sequence": 7}))
    assert report.uncosted.count == 0
    assert (
        report.nodes[-1].outputs[0].shape
        == session.run(None, {"q": np.ones((7, 2, 32), np.float32), "kv": np.ones((9, 2, 32), np.float32)})[0].shape
    )


# --- GroupQueryAttention: a past head size the query fixes -------------------------------------------

HEADS, KV_HEADS, HEAD = 4, 2, 16


def _gqa(tmp_path):
    """One GroupQueryAttention on packed QKV [batch, seq, (4 + 2·2)·16] with a past whose head dim is
    a symbol, kv_cache_dim, as the onnxruntime-genai builder names it."""
    past = ["batch", KV_HEADS, "past_sequence", "kv_cache_dim"]
    inputs = [helper.make_tensor_value_info("qkv", TensorProto.FLOAT, ["batch", "sequence", (HEADS + 2 * KV_HEADS) * HEAD]),
              helper.make_tensor_value_info("past_key", TensorProto.FLOAT, past), helper.make_tensor_value_info("past_value", TensorProto.FLOAT, past),
              helper.make_tensor_value_info("seqlens_k", TensorProto.INT32, ["batch"]), helper.make_tensor_value_info("total", TensorProto.INT32, [])]  # fmt: skip
    node = helper.make_node("GroupQueryAttention", ["qkv", "", "", "past_key", "past_value", "seqlens_k", "total"], ["y", "present_key", "present_value"],
                            domain="com.microsoft", name="attention", num_heads=HEADS, kv_num_heads=KV_HEADS)  # fmt: skip
    outputs = [
        helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in ("y", "present_key", "present_value")
    ]
    graph = helper.make_graph([node], "g", inputs, outputs)
    path = tmp_path / "gqa.onnx"
    onnx.save(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]),
        path,
    )
    return path


def _gqa_run(path, head, past=5, sequence=1):
    feeds = {"qkv": np.ones((1, sequence, (HEADS + 2 * KV_HEADS) * HEAD), np.float32), "past_key": np.ones((1, KV_HEADS, past, head), np.float32),
             "past_value": np.ones((1, KV_HEADS, past, head), np.float32), "seqlens_k": np.array([past + sequence - 1], np.int32),
             "total": np.array(past + sequence, np.int32)}  # fmt: skip
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return [out.shape for out in session.run(None, feeds)]


def test_a_past_head_size_other_than_the_querys_is_refused_naming_the_one_that_runs(tmp_path, capsys):
    path = _gqa(tmp_path)
    with pytest.raises(Exception):  # noqa: B017 - onnxruntime: past_key dimension 3 should match the packed head size
        _gqa_run(path, head=1)
    dims = {"batch": 1, "sequence": 1, "past_sequence": 5}
    with pytest.raises(
        DimensionConflict,
        match=r"holds heads of 1 where its query 'qkv' packs heads of 16: pass Sizing\(dims=\{'kv_cache_dim': 16\}\)",
    ):
        analyze(path, sizing=Sizing(dims={**dims, "kv_cache_dim": 1}))
    assert main([str(path), *(f"--dim={k}={v}" for k, v in dims.items()), "--dim", "kv_cache_dim=1"]) == 2
    assert capsys.readouterr().err.strip().endswith("packs heads of 16: bind --dim kv_cache_dim=16")
    with pytest.raises(UnboundDimensionError) as unbound:  # strict: unbound, and the suggestion is the size that runs
        analyze(path, sizing=Sizing(dims=dims))
    assert unbound.value.suggested == {"kv_cache_dim": 16}


def test_a_default_the_graph_rules_out_is_replaced_by_the_size_it_fixes(tmp_path, capsys):
    """No --dim for kv_cache_dim: its name has no default (1), which the query rules out; the
    analysis takes 16, says why, and costs the cache onnxruntime returns at 16."""
    path = _gqa(tmp_path)
    assert (
        main([str(path), "--dim", "batch=1", "--dim", "sequence=1", "--dim", "past_sequence=5", "--format", "json"])
        == 0
    )
    captured = capsys.readouterr()
    assert "kv_cache_dim=16 (the head size of 'attention' (com.microsoft::GroupQueryAttention))" in captured.err
    report = json.loads(captured.out)
    assert report["model"]["dims"]["kv_cache_dim"] == 16 and report["model"]["defaulted_dims"] == ["kv_cache_dim"]
    assert report["model"]["solved_dims"] == {
        "kv_cache_dim": "the head size of 'attention' (com.microsoft::GroupQueryAttention)"
    }
    (node,) = report["nodes"]
    assert [tuple(o["shape"]) for o in node["outputs"]] == _gqa_run(
        path, head=HEAD
    )  # y [1, 1, 64], present [1, 2, 6, 16] twice


@pytest.mark.parametrize("entry", [e for e in manifest() if e["name"].startswith("genai")], ids=lambda e: e["name"])
def test_the_genai_builders_kv_cache_dim_is_taken_from_its_attention(entry):
    """The builder's graphs name the KV head dim kv_cache_dim; left unbound, it comes out as the
    head size the corpus binds (the model config's), and every node as at that binding."""
    given = {k: v for k, v in entry["dims"].items() if k != "kv_cache_dim"}
    defaulted = analyze(entry["path"], sizing=Sizing(dims=given, default_dims=True))
    bound = analyze(entry["path"], sizing=Sizing(dims=entry["dims"]))
    assert defaulted.model.dims["kv_cache_dim"] == entry["dims"]["kv_cache_dim"]
    assert "GroupQueryAttention" in defaulted.model.solved_dims["kv_cache_dim"]
    assert [(n.outputs, n.cost) for n in defaulted.nodes] == [(n.outputs, n.cost) for n in bound.nodes]


# --- broadcasting against a size the exporter fixed --------------------------------------------


def _position_table(tmp_path):
    """onnx-simplifier with --overwrite-input-shape on a dynamo export: the inputs stay [batch, seq, 32],
    the position table is folded for seq 8 ([1, 8, 32])."""
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "pos"], ["a"]), helper.make_node("Relu", ["a"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", 32])],
        [numpy_helper.from_array(np.zeros((1, 8, 32), np.float32), "pos")],
    )
    path = tmp_path / "fixed.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_a_broadcast_against_a_fixed_size_is_refused_naming_both(tmp_path):
    path = _position_table(tmp_path)
    with pytest.raises(Exception, match="broadcast"):  # noqa: B017 - onnxruntime refuses seq 16 too
        ort.InferenceSession(str(path)).run(None, {"x": np.zeros((1, 16, 32), np.float32)})
    with pytest.raises(
        DimensionConflict, match=r"'x' \[1, 16, 32\], 'pos' \[1, 8, 32\] do not broadcast \(8 against 16 on axis -2\)"
    ):
        analyze(path, sizing=Sizing(dims={"batch": 1, "seq": 16}))


def test_a_default_that_cannot_broadcast_takes_the_size_the_graph_fixes(tmp_path, capsys):
    report = analyze(_position_table(tmp_path), sizing=Sizing(default_dims=True))
    assert report.model.dims["seq"] == 8 and "pos" in report.model.solved_dims["seq"]
    assert report.uncosted.count == 0 and report.nodes[0].outputs[0].shape == (1, 8, 32)
