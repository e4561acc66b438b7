"""The checker: the analysis proved against onnxruntime on small graphs, the fixtures and a model we
did not write; a deliberately wrong rule or shape is caught; timing and calibration work."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import subprocess
import sys
import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnx_roofline import Sizing
from onnx_roofline.analysis import analyze
from onnx_roofline.commands.cli import main
from onnx_roofline.commands.verify import VerifyError, pipeline, run, verify
from onnx_roofline.commands.verify.attainment import AT_OR_ABOVE, BEATS, CACHE_RESIDENT, FUSED, judge
from onnx_roofline.commands.verify.compare import BOUNDS_ONLY, CHECKED, NOT_CHECKED, NOT_COSTED
from onnx_roofline.commands.verify.inputs import make_feeds
from onnx_roofline.commands.verify.render import render_text
from onnx_roofline.commands.verify.timing import Kernel, Profile, attribute, profile
from onnx_roofline.commands.verify.weights import materialize
from onnx_roofline.costs.cost import Cost
from onnx_roofline.costs.hardware import load_hardware
from onnx_roofline.costs.rules import registry
from onnx_roofline.errors import EXIT_FAIL, EXIT_OK, EXIT_USAGE
from tests.conftest import FIXTURES

VOCAB, HIDDEN = 50, 16


def small_lm() -> onnx.ModelProto:
    """Embedding lookup → MatMul + bias → Relu → Slice → Reshape, with Shape/Concat on the side:
    a default op, every convention (partial read, view, metadata) and a symbolic `sequence`."""
    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"])
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, None)
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.standard_normal((VOCAB, HIDDEN)).astype(np.float32), "wte"),
        numpy_helper.from_array(rng.standard_normal((HIDDEN, HIDDEN)).astype(np.float32), "w"),
        numpy_helper.from_array(rng.standard_normal(HIDDEN).astype(np.float32), "b"),
        numpy_helper.from_array(np.array([0], np.int64), "start"),
        numpy_helper.from_array(np.array([8], np.int64), "end"),
        numpy_helper.from_array(np.array([2], np.int64), "axis"),
        numpy_helper.from_array(np.array([-1], np.int64), "minus_one"),
        numpy_helper.from_array(np.array([1], np.int64), "one"),
    ]
    nodes = [
        helper.make_node("Gather", ["wte", "input_ids"], ["emb"], name="embed"),
        helper.make_node("MatMul", ["emb", "w"], ["mm"], name="proj"),
        helper.make_node("Add", ["mm", "b"], ["biased"], name="bias"),
        helper.make_node("Relu", ["biased"], ["act"], name="relu"),
        helper.make_node("Slice", ["act", "start", "end", "axis"], ["half"], name="slice"),
        helper.make_node("Shape", ["half"], ["shape"], name="shape"),
        helper.make_node("Slice", ["shape", "start", "one"], ["lead"], name="lead"),
        helper.make_node("Concat", ["lead", "minus_one"], ["target"], axis=0, name="target"),
        helper.make_node("Reshape", ["half", "target"], ["out"], name="flatten"),
    ]
    graph = helper.make_graph(nodes, "small_lm", [ids], [out], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


DIMS = {"batch": 2, "sequence": 5}


def replace_rule(monkeypatch, op_type: str, formula, domain: str = "") -> None:
    """Swap the newest registered rule of `op_type` for one with `formula` (undone after the test)."""
    versions = list(registry._RULES[(domain, op_type)])
    versions[-1] = dataclasses.replace(versions[-1], formula=formula)
    monkeypatch.setitem(registry._RULES, (domain, op_type), versions)


# --- inputs and weights ------------------------------------------------------------------------------


def test_token_ids_stay_below_the_vocabulary_and_masks_are_ones():
    model = small_lm()
    mask = helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "sequence"])
    model.graph.input.append(mask)
    feeds = make_feeds(model, {"batch": 4, "sequence": 64}, seed=1)
    assert feeds["input_ids"].shape == (4, 64) and feeds["input_ids"].dtype == np.int64
    assert feeds["input_ids"].min() >= 0 and feeds["input_ids"].max() < VOCAB
    assert feeds["input_ids"].max() >= 2  # the vocabulary's range, not the small-int fallback [0, 2)
    assert (feeds["attention_mask"] == 1).all()


def test_unbound_dim_is_an_input_error():
    with pytest.raises(VerifyError, match="sequence"):
        make_feeds(small_lm(), {"batch": 1})


def test_missing_weights_are_synthesized_deterministically_without_touching_the_file(tmp_path):
    path = tmp_path / "lm.onnx"
    onnx.save_model(
        small_lm(),
        path,
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location="lm.onnx.data",
        size_threshold=64,
    )
    (tmp_path / "lm.onnx.data").unlink()  # weight-stripped, like the fixtures
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    proto = onnx.load(path, load_external_data=False)
    first, second = materialize(proto, tmp_path, seed=0), materialize(proto, tmp_path, seed=0)
    assert (first.loaded, first.synthesized) == (0, 3)  # wte, w, b are external; the int64 scalars inline
    arrays = {t.name: numpy_helper.to_array(t) for t in first.model.graph.initializer}
    again = {t.name: numpy_helper.to_array(t) for t in second.model.graph.initializer}
    assert arrays["wte"].shape == (VOCAB, HIDDEN) and np.array_equal(arrays["wte"], again["wte"])
    assert not np.array_equal(arrays["w"].reshape(-1)[:16], arrays["wte"].reshape(-1)[:16])  # per-name
    assert proto.graph.initializer[0].data_location == TensorProto.EXTERNAL  # the caller's proto is untouched
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


def test_real_weights_are_loaded_when_the_data_file_is_there(tmp_path):
    path = tmp_path / "lm.onnx"
    onnx.save_model(small_lm(), path, save_as_external_data=True, location="lm.onnx.data", size_threshold=64)
    weights = materialize(onnx.load(path, load_external_data=False), tmp_path)
    assert (weights.loaded, weights.synthesized) == (3, 0)
    wte = next(t for t in weights.model.graph.initializer if t.name == "wte")
    assert np.array_equal(numpy_helper.to_array(wte), numpy_helper.to_array(small_lm().graph.initializer[0]))


def test_the_run_observes_every_node_output_a_chunk_at_a_time(monkeypatch):
    """Every node output observed, whether in one run or in runs of at most 100 bytes of outputs
    each (one value per run here: each is larger): the same shapes and dtypes; the float weights
    fed as arrays, the int64 constants left in the model."""
    model = small_lm()
    feeds = make_feeds(model, DIMS)
    weights = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    sessions = []
    opened = run.open_session
    monkeypatch.setenv("ONNX_ROOFLINE_ISOLATION", "0")  # the sessions opened in this process, to count them
    monkeypatch.setattr(run, "open_session", lambda m, options: sessions.append(m) or opened(m, options))
    sizes = {"emb": 2 * 5 * HIDDEN * 4, "out": 2 * 5 * 8 * 4}  # the others unknown: as large as the largest
    whole = run.observe(model, feeds, weights, sizes, chunk_bytes=2**30)
    assert len(sessions) == 1
    apart = run.observe(model, feeds, weights, sizes, chunk_bytes=100)
    assert len(sessions) == 1 + len(whole)  # each value alone
    assert whole == apart and set(whole) == {name for node in model.graph.node for name in node.output}
    assert whole["emb"].shape == (2, 5, HIDDEN) and whole["out"].shape == (2, 5 * 8) and whole["out"].dtype == "float32"
    fed = {value.name for value in sessions[-1].graph.input} - {"input_ids"}
    assert fed == {"wte", "w", "b"} and {t.name for t in sessions[-1].graph.initializer} == {
        "start",
        "end",
        "axis",
        "minus_one",
        "one",
    }


# --- the comparison ----------------------------------------------------------------------------------


def test_small_model_passes_with_every_node_byte_checked():
    result = verify(small_lm(), dims=DIMS)
    comparison = result.comparison
    assert result.passed and comparison.disagreements == ()
    assert comparison.values_checked == 9  # one output per node, all inferred fully
    assert comparison.count(CHECKED) == 9
    bases = {node.name: node.basis for node in comparison.nodes}
    assert bases["embed"] == ("convention: partial read", "convention: partial read")
    assert bases["bias"] == ("default", "default")
    assert bases["flatten"] == ("convention: view", "convention: view")
    assert bases["shape"] == ("convention: metadata", "convention: metadata")
    bytes_line = next(line for line in render_text(result).splitlines() if line.startswith("bytes:"))
    assert bytes_line.startswith(
        "bytes:   9 nodes checked, 0 bounds-only (18 read/written counts: "
    )  # 9 nodes × (read, written)


def test_a_rule_that_forgets_an_input_is_caught(monkeypatch):
    def add_without_bias(node):
        return Cost(flops=node.outputs[0].numel, bytes_read=node.inputs[0].nbytes)  # forgets `b`

    replace_rule(monkeypatch, "Add", add_without_bias)
    result = verify(small_lm(), dims=DIMS)
    (wrong,) = result.comparison.disagreements
    assert (wrong.node, wrong.what, wrong.basis) == ("bias", "bytes_read", "default")
    assert wrong.inferred == 2 * 5 * HIDDEN * 4  # the rule's claim: `mm` only
    assert wrong.observed == 2 * 5 * HIDDEN * 4 + HIDDEN * 4  # mm + b, from the real tensors
    assert not result.passed


def test_a_partial_read_rule_reading_everything_is_caught(monkeypatch):
    replace_rule(monkeypatch, "Slice", lambda node: Cost(bytes_read=node.distinct_input_bytes()))
    result = verify(small_lm(), dims=DIMS)
    wrong = [d for d in result.comparison.disagreements if d.node == "slice"]
    assert [(d.what, d.basis) for d in wrong] == [("bytes_read", "convention: partial read")]
    kept = 2 * 5 * 8 * 4  # the [2, 5, 8] float32 slice it keeps
    assert wrong[0].observed == kept + 3 * 8  # plus starts, ends, axes (one int64 each)


def test_a_rule_whose_docstring_says_default_is_held_to_it(monkeypatch):
    def range_(node):
        """1 FLOP per output. Default bytes."""
        return Cost(flops=node.outputs[0].numel, bytes_read=0)

    replace_rule(monkeypatch, "Range", range_)
    start, limit, delta = (helper.make_tensor_value_info(n, TensorProto.INT64, []) for n in ("s", "l", "d"))
    graph = helper.make_graph(
        [helper.make_node("Range", ["s", "l", "d"], ["y"], name="range")],
        "g",
        [start, limit, delta],
        [helper.make_tensor_value_info("y", TensorProto.INT64, None)],
        initializer=[numpy_helper.from_array(np.array(v, np.int64), n) for n, v in (("s", 0), ("l", 6), ("d", 1))],
    )
    result = verify(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    (wrong,) = result.comparison.disagreements
    assert (wrong.what, wrong.basis, wrong.inferred, wrong.observed) == ("bytes_read", "default (docstring)", 0, 3 * 8)


def test_a_rule_specific_override_beyond_every_input_is_caught(monkeypatch):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="linear", name="resize")
    graph = helper.make_graph(
        [node], "g", [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=[scales]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    honest = verify(model)
    assert honest.passed and honest.comparison.count(BOUNDS_ONLY) == 1

    replace_rule(monkeypatch, "Resize", lambda node: Cost(bytes_read=10 * node.inputs[0].nbytes))
    (wrong,) = verify(model).comparison.disagreements
    assert (wrong.what, wrong.basis, wrong.inferred) == ("bytes_read", "rule-specific", 640)
    assert wrong.observed == 64 + 16  # the ceiling: x and scales once each


def test_a_wrong_inferred_shape_is_caught_with_the_bytes_it_skews(monkeypatch):
    import onnx_roofline.analysis as analysis
    from onnx_roofline.model.tensors import TensorInfo

    real_infer = analysis.infer

    def off_by_one(model, *args, **kwargs):
        result = real_infer(model, *args, **kwargs)
        result.values["act"] = TensorInfo("act", (2, 5, HIDDEN + 1), "float32")
        return result

    monkeypatch.setattr(analysis, "infer", off_by_one)
    found = verify(small_lm(), dims=DIMS).comparison.disagreements
    shape = [d for d in found if d.what == "shape"]
    assert [(d.node, d.value, d.inferred, d.observed) for d in shape] == [("relu", "act", [2, 5, 17], [2, 5, 16])]
    # Relu's write is counted from the wrong shape; Slice reads only the [2, 5, 8] it keeps either way.
    assert {(d.node, d.what) for d in found if d.what.startswith("bytes")} == {("relu", "bytes_written")}


def test_a_wrong_inferred_dtype_is_caught(monkeypatch):
    import onnx_roofline.analysis as analysis
    from onnx_roofline.model.tensors import TensorInfo

    real_infer = analysis.infer

    def half(model, *args, **kwargs):
        result = real_infer(model, *args, **kwargs)
        result.values["mm"] = TensorInfo("mm", (2, 5, HIDDEN), "float16")
        return result

    monkeypatch.setattr(analysis, "infer", half)
    found = verify(small_lm(), dims=DIMS).comparison.disagreements
    assert ("proj", "dtype", "float16", "float32") in {(d.node, d.what, d.inferred, d.observed) for d in found}


def test_a_node_without_a_rule_is_not_costed_not_passing(monkeypatch):
    monkeypatch.delitem(registry._RULES, ("", "Relu"))
    result = verify(small_lm(), dims=DIMS)
    (relu,) = [n for n in result.comparison.nodes if n.name == "relu"]
    assert relu.outcome == NOT_COSTED and "no cost rule" in relu.reason
    assert result.comparison.count(CHECKED) == 8 and result.comparison.values_checked == 9  # its shape still checked
    assert result.passed


# --- the acceptance models ---------------------------------------------------------------------------

FIXTURE_DIMS = {
    "resnet50_fp32": {"batch": 1},
    "gpt2_prefill_fp32": {"batch": 1, "sequence": 8},
    "gpt2_decode_fp32": {"batch": 1, "past_sequence": 7},
}


@pytest.mark.parametrize("name", sorted(FIXTURE_DIMS))
def test_fixture_has_no_disagreement(name, tmp_path):
    source = FIXTURES / f"{name}.onnx"
    if not source.exists():
        pytest.skip(f"{source.name} not generated")
    stripped = tmp_path / source.name
    shutil.copy(source, stripped)  # without its .data file: the weights are synthesized, as in CI
    result = verify(stripped, dims=FIXTURE_DIMS[name])
    assert result.comparison.disagreements == ()
    assert result.weights_synthesized > 0 and result.weights_loaded == 0
    costed = sum(1 for n in result.report.nodes if n.status == "ok")
    assert result.comparison.count(CHECKED) == costed
    assert result.comparison.values_unobserved == ()


@pytest.mark.parametrize("name", ["gpt2_decode_fp32", "gpt2_decode_fp32_torchscript"])
def test_a_decoders_first_step_with_an_empty_cache_runs_as_onnxruntime_runs_it(name, tmp_path, capsys):
    """`--dim past_sequence=0`: the KV cache still empty, as a generation loop's first step feeds
    it. onnxruntime runs the zero-length past; every shape and byte agrees with its run."""
    source = FIXTURES / f"{name}.onnx"
    stripped = tmp_path / source.name
    shutil.copy(source, stripped)
    result = verify(stripped, dims={"batch": 1, "past_sequence": 0})
    assert result.comparison.disagreements == () and result.comparison.count(CHECKED) == len(result.report.nodes)
    # Each layer's present key holds the one new token: [batch 1, 12 heads, 0 past + 1 new, 64] in fp32.
    presents = [n for n in result.report.nodes if n.op_type == "Concat" and n.outputs[0].shape == (1, 12, 1, 64)]
    assert len(presents) >= 24 and all(
        n.cost.bytes_written == 12 * 64 * 4 for n in presents
    )  # keys and values of 12 layers
    assert main([str(stripped), "--dim", "batch=1", "--dim", "past_sequence=0", "-q"]) == EXIT_OK
    assert "past_sequence=0" in capsys.readouterr().out


def test_a_transformers_bert_we_did_not_write(tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")

    class LastHidden(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.model(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=1000,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        max_position_embeddings=64,
    )
    bert = LastHidden(transformers.BertModel(config).eval())
    example = (torch.zeros(2, 8, dtype=torch.long),) * 3
    names = ["input_ids", "attention_mask", "token_type_ids"]
    path = tmp_path / "bert.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            bert,
            example,
            str(path),
            dynamo=False,
            opset_version=17,
            input_names=names,
            output_names=["hidden"],
            dynamic_axes={n: {0: "batch", 1: "sequence"} for n in [*names, "hidden"]},
        )
    result = verify(path, dims={"batch": 2, "sequence": 12})
    assert result.comparison.disagreements == ()
    assert result.comparison.count(CHECKED) == len(result.report.nodes) > 100
    assert {"Gather", "MatMul", "Softmax"} <= {n.op_type for n in result.report.nodes}


def with_local_function() -> onnx.ModelProto:
    """Two calls of a model-local function `local.Proj` (MatMul → Add → Relu) on [batch, 16]."""
    proj = helper.make_function(
        "local",
        "Proj",
        ["x", "w", "b"],
        ["y"],
        [
            helper.make_node("MatMul", ["x", "w"], ["xw"]),
            helper.make_node("Add", ["xw", "b"], ["biased"]),
            helper.make_node("Relu", ["biased"], ["y"]),
        ],
        [helper.make_opsetid("", 17)],
    )
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.standard_normal((HIDDEN, HIDDEN)).astype(np.float32), "w"),
        numpy_helper.from_array(rng.standard_normal(HIDDEN).astype(np.float32), "b"),
    ]
    nodes = [
        helper.make_node("Proj", ["x", "w", "b"], ["h"], domain="local", name="first"),
        helper.make_node("Proj", ["h", "w", "b"], ["out"], domain="local", name="second"),
    ]
    graph = helper.make_graph(
        nodes,
        "calls",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", HIDDEN])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["batch", HIDDEN])],
        initializer=inits,
    )
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("local", 1)], functions=[proj]
    )


def test_a_model_with_local_functions_is_checked_node_by_node_inlined():
    # The run exposes nothing inside a call: verify checks the inlined graph, 2 calls × 3 nodes.
    result = verify(with_local_function(), dims={"batch": 4})
    assert result.passed and result.comparison.disagreements == ()
    assert [n.op_type for n in result.report.nodes] == ["MatMul", "Add", "Relu"] * 2
    assert result.comparison.count(CHECKED) == 6 and result.comparison.values_checked == 6
    # the inlined graph costs what the calls cost: 2 × (2·4·16·16 + 4·16 + 4·16) = 4,352 FLOPs (MatMul, Add, Relu)
    assert (
        result.report.totals.flops
        == analyze(with_local_function(), sizing=Sizing(dims={"batch": 4})).totals.flops
        == 2 * (2 * 4 * 16 * 16 + 2 * 4 * 16)
    )


def test_calls_onnx_cannot_inline_are_checked_at_their_outputs(monkeypatch):
    monkeypatch.setattr(pipeline, "_inlined", lambda model: None)
    result = verify(with_local_function(), dims={"batch": 4})
    assert result.passed
    assert [n.outcome for n in result.comparison.nodes] == [NOT_CHECKED, NOT_CHECKED]  # no rule to re-run on a call
    assert result.comparison.values_checked == 2  # each call's output against the run


def test_a_torchscript_export_of_modules_as_functions(tmp_path):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.LayerNorm(32), torch.nn.Linear(32, 8)
    ).eval()
    path = tmp_path / "functions.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model,
            (torch.randn(2, 16),),
            str(path),
            dynamo=False,
            opset_version=17,
            input_names=["x"],
            output_names=["y"],
            dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}},
            export_modules_as_functions=True,
        )
    assert onnx.load(str(path)).functions  # the exporter wrote model-local functions
    result = verify(path, dims={"batch": 3})
    assert result.passed and result.comparison.disagreements == ()
    assert [n.op_type for n in result.report.nodes if n.op_type in ("Gemm", "Erf", "LayerNormalization")] == [
        "Gemm",
        "Erf",
        "LayerNormalization",
        "Gemm",
    ]
    assert result.comparison.count(CHECKED) == len(result.report.nodes)  # the one call's body, node by node
    # both Linear layers at batch 3: 2·3·16·32 + 2·3·32·8 multiply-adds, + one add per output for each bias
    assert result.report.totals.matrix_flops == 2 * 3 * 16 * 32 + 3 * 32 + 2 * 3 * 32 * 8 + 3 * 8


def test_a_model_onnxruntime_fails_to_run_is_one_line_and_exit_2(tmp_path):
    # Gather of index 5 from 3 rows: typed statically, refused by onnxruntime when it runs. Its
    # own error log would print before ours (from C++, to the process's stderr): a subprocess sees it.
    nodes = [helper.make_node("Gather", ["data", "index"], ["row"], axis=0)]
    graph = helper.make_graph(
        nodes,
        "oob",
        [helper.make_tensor_value_info("data", TensorProto.FLOAT, [3, 4])],
        [helper.make_tensor_value_info("row", TensorProto.FLOAT, [1, 4])],
        initializer=[numpy_helper.from_array(np.array([5], np.int64), "index")],
    )
    path = tmp_path / "oob.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    run_ = subprocess.run(
        [sys.executable, "-m", "onnx_roofline", "verify", str(path)], capture_output=True, text=True, timeout=300
    )
    assert run_.returncode == EXIT_USAGE
    assert run_.stderr.count("\n") == 1 and run_.stderr.startswith(
        "onnx-roofline: error: onnxruntime failed to run the model:"
    )


# --- timing ------------------------------------------------------------------------------------------

CPU = {
    "name": "test cpu",
    "memory_bandwidth": 10e9,
    "source": "measured by onnx-roofline calibrate: test",
    "peaks": {"vector": {"fp32": 100e9}},
}
SLOW = {**CPU, "memory_bandwidth": 1e6, "peaks": {"vector": {"fp32": 1e9}}}  # bounds in ms: far above the 1 µs timer


def test_every_node_is_timed_one_to_one_with_optimizations_off():
    model = small_lm()
    measured = profile(model, make_feeds(model, DIMS), runs=3, warmup=1)
    assert [k.originals for k in measured.kernels] == [(i,) for i in range(len(model.graph.node))]
    assert all(k.seconds >= 0 and k.runs == 3 for k in measured.kernels)
    assert measured.not_run == () and measured.unattributed == ()


def test_fused_kernels_are_attributed_to_the_nodes_they_replace():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 32])
    w = numpy_helper.from_array(np.ones((32, 32), np.float32), "w")
    b = numpy_helper.from_array(np.ones(32, np.float32), "b")
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["mm"]),
        helper.make_node("Add", ["mm", "b"], ["y"]),
        helper.make_node("Relu", ["y"], ["z"]),
    ]
    graph = helper.make_graph(
        nodes, "g", [x], [helper.make_tensor_value_info("z", TensorProto.FLOAT, [4, 32])], initializer=[w, b]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    measured = profile(model, {"x": np.ones((4, 32), np.float32)}, runs=2, warmup=1, optimize=True)
    groups = sorted(k.originals for k in measured.kernels)
    assert sorted(i for group in groups for i in group) == [0, 1, 2]  # every node accounted for once
    assert any(len(group) > 1 for group in groups)  # MatMul+Add became one Gemm/FusedMatMul kernel


def test_attribution_is_the_identity_when_the_graph_is_unchanged():
    model = small_lm()
    timed = onnx.ModelProto()
    timed.CopyFrom(model)
    for index, node in enumerate(timed.graph.node):
        node.name = f"v{index}"
    assert attribute(timed, timed) == {f"v{i}": (i,) for i in range(len(model.graph.node))}


def _synthetic_profile(seconds: list[float], groups=None) -> Profile:
    groups = groups or [(i,) for i in range(len(seconds))]
    kernels = tuple(
        Kernel(f"k{i}", "?", group, s, 5) for i, (s, group) in enumerate(zip(seconds, groups, strict=False))
    )
    return Profile(kernels, runs=5, warmup=1, optimized=False, not_run=(), unattributed=())


def test_judging_against_the_bound_with_margin_resolution_and_cache_floor():
    report = verify(small_lm(), hw=load_hardware_dict(SLOW), dims=DIMS).report
    bias = report.nodes[2]  # Add: 2·5·16 + 16 floats read, 2·5·16 written
    assert bias.op_type == "Add"
    bound = bias.time_s
    assert bound == pytest.approx((160 * 4 + 16 * 4 + 160 * 4) / 1e6)
    slow, within_margin, fast = bound * 2, bound / 1.2, bound / 50
    verdicts = []
    for seconds in (slow, within_margin + 0.0, fast):
        check = judge(report, _synthetic_profile([1.0, 1.0, seconds, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]), margin=0.25)
        verdicts.append(check.nodes[2].verdict)
    assert verdicts == [AT_OR_ABOVE, AT_OR_ABOVE, BEATS]  # no cache figure given: the fast one beats the bound
    # 1.3 kB fits a 1 MiB cache, and at 1 TB/s in cache the fast time is within the floor:
    cached = judge(
        report, _synthetic_profile([1.0] * 2 + [fast] + [1.0] * 6), 0.25, cache_bandwidth=1e12, cache_bytes=2**20
    )
    assert cached.nodes[2].verdict == CACHE_RESIDENT and cached.passed
    assert (
        judge(report, _synthetic_profile([1.0] * 2 + [fast] + [1.0] * 6), 0.25, 1e12, cache_bytes=1000).nodes[2].verdict
        == BEATS
    )


def test_timing_summary_shares_and_fused_groups():
    report = verify(small_lm(), hw=load_hardware_dict(SLOW), dims=DIMS).report
    bounds = [n.time_s for n in report.nodes]
    seconds = [b * 2 for b in bounds]
    seconds[1] = bounds[1] / 100  # proj beats its bound
    check = judge(report, _synthetic_profile(seconds), margin=0.25)
    assert check.count(BEATS) == 1 and not check.passed
    assert check.node_share == pytest.approx(8 / 9)
    assert check.time_share == pytest.approx(sum(s for i, s in enumerate(seconds) if i != 1) / sum(seconds))
    assert check.attainment == pytest.approx(sum(bounds) / sum(seconds))
    fused = judge(report, _synthetic_profile([1.0, 1.0], groups=[(0,), (1, 2, 3, 4, 5, 6, 7, 8)]))
    assert [n.verdict for n in fused.nodes] == [AT_OR_ABOVE, FUSED]
    assert fused.nodes[1].op_type == "MatMul+Add+Relu+Slice+Shape+Slice+Concat+Reshape"


def load_hardware_dict(spec: dict):
    from onnx_roofline.costs.hardware import Hardware

    return Hardware(
        key="test",
        name=spec["name"],
        memory_bandwidth=spec["memory_bandwidth"],
        peaks=spec["peaks"],
        source=spec["source"],
    )


def test_verify_with_timing_end_to_end():
    result = verify(small_lm(), hw=load_hardware_dict(CPU), dims=DIMS, timing={"runs": 2, "warmup": 1})
    timing = result.timing
    assert len(timing.nodes) == 9 and timing.cache_bandwidth > 0
    assert {n.verdict for n in timing.nodes} <= {AT_OR_ABOVE, CACHE_RESIDENT, BEATS}
    assert 0 <= timing.node_share <= 1 and timing.attainment > 0


# --- calibration -------------------------------------------------------------------------------------


def test_calibrate_writes_a_spec_that_hw_accepts(tmp_path):
    path = tmp_path / "cpu.toml"
    code = main(
        [
            "calibrate",
            "-o",
            str(path),
            "--runs",
            "1",
            "--warmup",
            "0",
            "--size",
            "256",
            "--stream-mib",
            "1",
            "--name",
            "ci cpu",
        ]
    )
    assert code == EXIT_OK
    hw = load_hardware(str(path))
    assert hw.name == "ci cpu" and hw.memory_bandwidth > 0 and hw.peaks["vector"]["fp32"] > 1e8
    assert hw.source.startswith("measured by onnx-roofline calibrate")
    assert "MatMul [256x256]" in hw.figure_source("vector", "fp32")
    assert "Add of float32" in hw.figure_source("memory_bandwidth")


def test_hw_calibrate_can_be_wired_under_hw():
    import argparse

    from onnx_roofline.commands.verify.command import add_hw_calibrate

    parser = argparse.ArgumentParser()
    add_hw_calibrate(parser.add_subparsers())
    options = parser.parse_args(["calibrate", "-o", "x.toml", "--runs", "2"])
    assert options.output == "x.toml" and options.runs == 2 and callable(options.run)


# --- the command line --------------------------------------------------------------------------------


@pytest.fixture
def lm_path(tmp_path):
    path = tmp_path / "lm.onnx"
    onnx.save(small_lm(), path)
    return path


def test_cli_passes_and_writes_json(lm_path, tmp_path, capsys):
    out = tmp_path / "verify.json"
    assert (
        main(["verify", str(lm_path), "--dim", "batch=2", "--dim", "sequence=5", "--format", "json", "-o", str(out)])
        == EXIT_OK
    )
    data = json.loads(out.read_text())
    assert data["verdict"] == "pass" and data["disagreements"] == [] and data["timing"] is None
    assert data["nodes"]["byte_checked"] == 9 and data["values"]["checked"] == 9
    assert main(["verify", str(lm_path), "--dim", "batch=2", "--dim", "sequence=5"]) == EXIT_OK
    assert "verdict: PASS" in capsys.readouterr().out


def test_cli_exit_1_lists_the_disagreement(lm_path, monkeypatch, capsys):
    replace_rule(monkeypatch, "Relu", lambda node: Cost(flops=node.outputs[0].numel, bytes_written=0))
    assert main(["verify", str(lm_path), "--dim", "batch=2", "--dim", "sequence=5"]) == EXIT_FAIL
    out = capsys.readouterr().out
    assert "#3 relu (Relu) bytes_written: inferred 0, observed 640 [default]" in out and "verdict: FAIL" in out


def test_cli_timing_section(lm_path, tmp_path, capsys):
    spec = tmp_path / "cpu.toml"
    spec.write_text(
        'name = "t"\nmemory_bandwidth = 1e15\nsource = "measured by onnx-roofline calibrate: t"\n[peaks.vector]\nfp32 = 1e18\n'
    )
    code = main(
        [
            "verify",
            str(lm_path),
            "--dim",
            "batch=2",
            "--dim",
            "sequence=5",
            "--hw",
            str(spec),
            "--timing",
            "--runs",
            "2",
            "--warmup",
            "1",
        ]
    )
    out = capsys.readouterr().out
    assert code == EXIT_OK  # an absurdly fast machine: every node is slower than its bound
    assert "judged 9 nodes: 9 at or above the bound (100.0% of nodes" in out and "attainment" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["verify", "{dir}/missing.onnx"], "model file not found"),
        (["verify", "{model}", "--dim", "batch=2"], "sequence"),
        (["verify", "{model}", "--dim", "batch=2", "--dim", "sequence=5", "--runs", "0"], "positive integer"),
        (["calibrate", "--size", "-3"], "positive integer"),
        (["verify", "{model}", "--dim", "batch=2", "--dim", "sequence=5", "--dtype", "fp16"], "what-if"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, message, lm_path, capsys):
    argv = [a.format(dir=lm_path.parent, model=lm_path) for a in args]
    with _exit_code() as code:
        code.value = main(argv)
    err = capsys.readouterr().err
    assert code.value == EXIT_USAGE and message in err and err.count("\n") == 1


class _exit_code:
    """main() returns a code, but argparse errors raise SystemExit: read both the same way."""

    value: int | None = None

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        if kind is SystemExit:
            self.value = exc.code
            return True
        return False


# --- the ONNX node test suite: every observable node's bytes against its real outputs ---------------


def test_node_suite_bytes_agree_with_the_real_outputs():
    from onnx_roofline import analyze
    from onnx_roofline.commands.verify.compare import compare, observed_infos
    from onnx_roofline.model.loader import load_model
    from onnx_roofline.shapes.engine import infer
    from tests.node_suite import cases, with_constant_inputs

    disagreements, checked = [], 0
    for case in cases():
        inputs, outputs = case.data_sets[0] if case.data_sets else ([], [])
        model = with_constant_inputs(case.model, list(inputs))
        initialized = {t.name for t in model.graph.initializer}
        fed = [v.name for v in case.model.graph.input if v.name not in {t.name for t in case.model.graph.initializer}]
        arrays = {n: a for n, a in zip(fed, inputs, strict=False) if isinstance(a, np.ndarray) and n not in initialized}
        arrays.update(
            {v.name: a for v, a in zip(model.graph.output, outputs, strict=False) if isinstance(a, np.ndarray)}
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            report = analyze(model, hw="h100", partial=True)
            folded = infer(load_model(model)).folded
        comparison = compare(report, model, observed_infos(model, arrays), folded)
        checked += comparison.count(CHECKED)
        disagreements += [
            f"{case.name}: {d.op_type} {d.what} {d.value or ''} inferred {d.inferred}, observed {d.observed}"
            for d in comparison.disagreements
        ]
    assert disagreements == []
    assert checked > 900


def _merged_decoder(tmp_path):
    """optimum's merged decoder in small: an If on a bool graph input (use_cache_branch) whose
    branches write different shapes — then: x [4, 8] · w [8, 16] → [4, 16]; else: x + x → [4, 8]."""
    w = numpy_helper.from_array(np.ones((8, 16), np.float32), "w")
    then = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["then_out"])], "then", [],
                             [helper.make_tensor_value_info("then_out", TensorProto.FLOAT, None)])  # fmt: skip
    orelse = helper.make_graph([helper.make_node("Add", ["x", "x"], ["else_out"])], "else", [],
                               [helper.make_tensor_value_info("else_out", TensorProto.FLOAT, None)])  # fmt: skip
    graph = helper.make_graph([helper.make_node("If", ["use_cache_branch"], ["y"], then_branch=then, else_branch=orelse, name="branch")], "g",
                              [helper.make_tensor_value_info("use_cache_branch", TensorProto.BOOL, [1]), helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=[w])  # fmt: skip
    path = tmp_path / "merged.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


@pytest.mark.parametrize(("value", "shape", "flops"), [(1, (4, 16), 2 * 4 * 8 * 16), (0, (4, 8), 4 * 8)])
def test_a_value_given_is_fed_to_the_run_too(tmp_path, value, shape, flops):
    """The branch costed is the branch run: the If's output shape, which differs by branch, agrees
    with onnxruntime's; its cost is that branch's (MatMul 2·4·8·16, or the Add's 4·8)."""
    result = verify(_merged_decoder(tmp_path), values={"use_cache_branch": value})
    node, branch = result.report.nodes  # the If, and its branch's one node
    assert result.passed and node.outputs[0].shape == shape and result.report.totals.flops == branch.cost.flops == flops


def test_verify_refuses_partial_in_one_line(tmp_path, capsys):
    assert main(["verify", str(_merged_decoder(tmp_path)), "--partial"]) == EXIT_USAGE
    assert (
        capsys.readouterr().err.strip()
        == "onnx-roofline: error: --partial leaves dims unbound, and verify runs the model: bind every dim (--dim NAME=N)"
    )
    assert main(["verify", str(_merged_decoder(tmp_path)), "--value", "use_cache_branch=0"]) == EXIT_OK


def test_onnxruntimes_refusal_is_said_without_its_cpp_signature():
    """onnxruntime's load errors start with a source location and a C++ signature hundreds of
    characters long; what went wrong comes after them, and is what the one line keeps."""
    from onnx_roofline.commands.verify.run import _first_line

    message = (
        "[ONNXRuntimeError] : 1 : FAIL : /onnxruntime_src/onnxruntime/core/graph/graph.cc:1357 onnxruntime::Graph::Graph("
        "const onnxruntime::Model&, onnx::GraphProto*, const std::unordered_map<std::__cxx11::basic_string<char>, int>&, "
        "onnxruntime::Version, onnxruntime::IOnnxRuntimeOpSchemaCollectionPtr, const onnxruntime::logging::Logger&, bool) "
        "[ONNXRuntimeError] : 1 : FAIL : tensorprotoutils.cc:2678 ConstantNodeProtoToTensorProto Constant node: n6 has no data attributes"
    )
    line = _first_line(RuntimeError(message))
    assert line.endswith("Constant node: n6 has no data attributes") and "Graph::Graph" not in line
    long = "[ONNXRuntimeError] : 1 : FAIL : " + "x" * 400 + " the end\nsecond line"
    assert _first_line(RuntimeError(long)) == long.replace("\n", " ")  # never cut, one line


@pytest.mark.parametrize(("dtype", "bits"), [("FLOAT8E4M3FN", 8), ("FLOAT8E5M2", 8), ("INT4", 4), ("UINT4", 4)])
def test_values_onnxruntime_returns_no_array_of_are_observed_through_a_cast(dtype, bits):
    """A QDQ pair through float8 or int4 (an fp8 or int4 QDQ export): onnxruntime's Python API
    returns no array of such a value (int4, float8e5m2) or a uint8 one (float8e4m3fn); its shape
    is observed through a Cast to float32 and its dtype is the session's, so the pair is checked
    like any other."""
    elem = getattr(TensorProto, dtype)
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["q"]),
        helper.make_node("DequantizeLinear", ["q", "s", "zp"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "qdq",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 7])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[helper.make_tensor("s", TensorProto.FLOAT, [], [0.1]), helper.make_tensor("zp", elem, [], [0])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    result = verify(model, dims={"n": 3})
    assert result.passed and result.comparison.count(CHECKED) == 2, result.comparison.disagreements
    assert result.comparison.values_checked == 2  # q observed too, not skipped
    quantize = result.report.nodes[0]
    assert quantize.outputs[0].dtype == dtype.lower() and quantize.cost.bytes_written == -(
        -3 * 7 * bits // 8
    )  # 21 elements, packed


def test_a_bfloat16_value_inside_a_float32_graph_is_observed():
    nodes = [
        helper.make_node("Cast", ["x"], ["b"], to=TensorProto.BFLOAT16),
        helper.make_node("Cast", ["b"], ["y"], to=TensorProto.FLOAT),
    ]
    graph = helper.make_graph(
        nodes,
        "bf16",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    result = verify(model)
    assert (
        result.passed and result.comparison.values_checked == 2 and result.report.nodes[0].cost.bytes_written == 3 * 2
    )


@pytest.mark.parametrize("elem_type", [TensorProto.BFLOAT16, TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E5M2])
def test_a_bfloat16_or_float8_graph_input_is_fed_as_its_bits(elem_type):
    """onnxruntime's Python API takes no bfloat16 or float8 array: verify synthesizes the values
    with ml_dtypes and hands them over as an OrtValue of their bits (run.runtime_feeds)."""
    nodes = [helper.make_node("Cast", ["x"], ["f"], to=TensorProto.FLOAT), helper.make_node("MatMul", ["f", "w"], ["y"]),
             helper.make_node("Cast", ["y"], ["out"], to=elem_type)]  # fmt: skip
    weight = numpy_helper.from_array(np.ones((8, 4), np.float32), "w")
    graph = helper.make_graph(nodes, "narrow", [helper.make_tensor_value_info("x", elem_type, ["batch", 8])],
                              [helper.make_tensor_value_info("out", elem_type, None)], initializer=[weight])  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    result = verify(model, dims={"batch": 2})
    assert result.passed and result.comparison.values_checked == 3, result.comparison.disagreements
    assert result.report.nodes[1].cost.flops == 2 * 2 * 8 * 4


def test_an_fp8_qdq_graph_from_onnxruntimes_quantizer_is_checked(tmp_path):
    """quantize_static with float8 e4m3 activations and weights (QDQ) — onnxruntime returns its
    float8 values as uint8 arrays, which read as a dtype disagreement before they were observed
    through a Cast: every node is checked and the pair's dtype is the session's."""
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    rng = np.random.default_rng(0)
    weights = [
        numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)
        for name, shape in (("w1", (16, 8)), ("w2", (8, 4)))
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["a"]),
        helper.make_node("Relu", ["a"], ["r"]),
        helper.make_node("MatMul", ["r", "w2"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])],
        initializer=weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    onnx.save(model, tmp_path / "mlp.onnx")

    class Feeds(CalibrationDataReader):
        def __init__(self):
            self.feeds = iter([{"x": rng.standard_normal((2, 16)).astype(np.float32)} for _ in range(4)])

        def get_next(self):
            return next(self.feeds, None)

    quantize_static(
        str(tmp_path / "mlp.onnx"),
        str(tmp_path / "fp8.onnx"),
        Feeds(),
        quant_format=QuantFormat.QDQ,
        activation_type=QuantType.QFLOAT8E4M3FN,
        weight_type=QuantType.QFLOAT8E4M3FN,
        calibrate_method=CalibrationMethod.Distribution,
    )
    result = verify(str(tmp_path / "fp8.onnx"), dims={"batch": 2})
    quantized = [n for n in result.report.nodes if n.op_type == "QuantizeLinear"]
    assert quantized and all(n.outputs[0].dtype == "float8e4m3fn" for n in quantized)
    assert result.passed and result.comparison.values_checked == len(result.report.nodes), (
        result.comparison.disagreements
    )


def test_a_string_input_is_synthesized_as_text():
    """numpy holds strings as objects: each one a text of 16 words (tests/test_text_inputs.py has the pipeline)."""
    graph = helper.make_graph(
        [helper.make_node("Identity", ["t"], ["u"])],
        "s",
        [helper.make_tensor_value_info("t", TensorProto.STRING, [2])],
        [helper.make_tensor_value_info("u", TensorProto.STRING, [2])],
    )
    texts = make_feeds(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), {})["t"]
    assert texts.shape == (2,) and texts.dtype == object and all(len(text.split()) == 16 for text in texts)
