"""Invalid is said (issue 32): a model onnxruntime cannot load is never reported clean. Each class
the fuzz campaign found, built with onnx.helper: flagged in the report (model.invalid) and on
stderr, `check` fails (exit 1); what cannot be made consistent at all is exit 2 with one line.
Valid real models are never flagged (the corpus test at the end)."""

from __future__ import annotations

import glob
import json
import os
from pathlib import Path

import numpy as np
import onnx
import onnx.helper as h
import onnx.numpy_helper as nh
import pytest

from onnx_roofline import Sizing, analysis
from onnx_roofline.analysis import analyze
from onnx_roofline.commands.cli import main
from onnx_roofline.errors import ModelLoadError
from onnx_roofline.model import inferred, isolation
from onnx_roofline.model.conformance import CHECKER, EXTERNAL_DATA, TENSOR_DATA, conformance
from onnx_roofline.model.loader import load_with_nodes

TP = onnx.TensorProto
ROOT = Path(__file__).resolve().parent.parent


def _model(nodes, inputs, outputs, initializers=(), value_info=(), opset=17, ir=8) -> onnx.ModelProto:
    graph = h.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers), value_info=list(value_info))
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)], ir_version=ir)


def _matmul(weight: onnx.TensorProto | None = None, **kwargs) -> onnx.ModelProto:
    """x[2,4] · w[4,3]: the smallest model with a weight."""
    weight = weight if weight is not None else nh.from_array(np.ones((4, 3), np.float32), "w")
    return _model(
        [h.make_node("MatMul", ["x", "w"], ["y"])],
        [h.make_tensor_value_info("x", TP.FLOAT, [2, 4])],
        [h.make_tensor_value_info("y", TP.FLOAT, [2, 3])],
        [weight],
        **kwargs,
    )


def _flags(model: onnx.ModelProto, path=None) -> tuple:
    proto, nodes = load_with_nodes(model)
    return conformance(proto, nodes, path)


def _save(model: onnx.ModelProto, folder: Path, name: str = "m.onnx") -> Path:
    path = folder / name
    path.write_bytes(model.SerializeToString())
    return path


# --- flagged: the report says it, `check` fails -------------------------------------------------


def test_a_valid_model_is_not_flagged():
    assert _flags(_matmul()) == ()
    assert analyze(_matmul()).model.invalid == ()


def test_truncated_raw_data_is_flagged():
    weight = nh.from_array(np.ones((4, 3), np.float32), "w")
    weight.raw_data = weight.raw_data[:20]  # 20 of 4·3·4 = 48 bytes
    (flag,) = _flags(_matmul(weight))
    assert flag.source == CHECKER and "raw_data size (20 bytes) is too small" in flag.message


def test_raw_data_one_byte_too_long_is_flagged():
    """onnx's checker lets it through; onnxruntime refuses to deserialize it (a size mismatch)."""
    weight = nh.from_array(np.ones((4, 3), np.float32), "w")
    weight.raw_data = weight.raw_data + b"\0"  # 49 of 4·3·4 = 48 bytes
    (flag,) = _flags(_matmul(weight))
    assert (
        flag.source == TENSOR_DATA
        and flag.message == "initializer 'w' stores 49 bytes where its dims [4, 3] and type float32 need 48 bytes"
    )


def test_initializer_of_undefined_type_is_flagged():
    weight = nh.from_array(np.ones((4, 3), np.float32), "w")
    weight.data_type = TP.UNDEFINED
    (flag,) = _flags(_matmul(weight))
    assert "UNDEFINED is not allowed" in flag.message


def _contradicted_value_info() -> onnx.ModelProto:
    model = _matmul(value_info=[])
    model.graph.node.append(h.make_node("Relu", ["y"], ["z"]))
    model.graph.output[0].name = "z"
    model.graph.value_info.append(h.make_tensor_value_info("y", TP.INT64, [2, 3]))  # MatMul of floats writes float
    return model


def _uint8_layer_norm() -> onnx.ModelProto:
    """uint8 into LayerNormalization: onnxruntime refuses the graph (T is a float type)."""
    return _model(
        [h.make_node("LayerNormalization", ["x", "s", "b"], ["y"])],
        [h.make_tensor_value_info("x", TP.UINT8, [2, 4])],
        [h.make_tensor_value_info("y", TP.UINT8, [2, 4])],
        [nh.from_array(np.ones(4, np.uint8), "s"), nh.from_array(np.zeros(4, np.uint8), "b")],
    )


def _mixed_gemm() -> onnx.ModelProto:
    return _model(
        [h.make_node("Gemm", ["x", "w"], ["y"])],
        [h.make_tensor_value_info("x", TP.FLOAT, [2, 4])],
        [h.make_tensor_value_info("y", TP.FLOAT, [2, 3])],
        [nh.from_array(np.ones((4, 3), np.float16), "w")],
    )


def _contradicted_cast() -> onnx.ModelProto:
    return _model(
        [h.make_node("Cast", ["x"], ["c"], to=TP.FLOAT16), h.make_node("Relu", ["c"], ["y"])],
        [h.make_tensor_value_info("x", TP.FLOAT, [2])],
        [h.make_tensor_value_info("y", TP.FLOAT16, [2])],
        value_info=[h.make_tensor_value_info("c", TP.FLOAT, [2])],
    )  # Cast to float16 writes float16


def _sequence_for_tensor() -> onnx.ModelProto:
    sequence = h.make_tensor_sequence_value_info("x", TP.INT64, [2])
    return _model([h.make_node("Shape", ["x"], ["y"])], [sequence], [h.make_tensor_value_info("y", TP.INT64, [1])])


def _output_of_another_width() -> onnx.ModelProto:
    """x[batch, 4] · w[4, 3] declared to write y[batch, 5]: binding the batch drops the declared
    dims (dims.bind), so the analysis holds its inference to the file's declaration itself."""
    model = _matmul()
    model.graph.input[0].CopyFrom(h.make_tensor_value_info("x", TP.FLOAT, ["batch", 4]))
    model.graph.output[0].CopyFrom(h.make_tensor_value_info("y", TP.FLOAT, ["batch", 5]))
    return model


INFERENCE_REFUSES = {  # what ONNX's strict type and shape inference refuses, and what it says
    "value_info contradicting the inferred type": (_contradicted_value_info, "Inferred elem type differs from existing elem type"),
    "an op fed a type its schema does not allow": (_uint8_layer_norm, "LayerNormalization"),
    "a Gemm of mixed input types": (_mixed_gemm, "float16"),
    "a Cast contradicting its value_info": (_contradicted_cast, "Inferred elem type differs"),
    "a sequence where a tensor is needed": (_sequence_for_tensor, "seq(tensor(int64))"),
    "an output declared of another width": (_output_of_another_width, "existing shape differ"),
}  # fmt: skip


@pytest.mark.parametrize("name", INFERENCE_REFUSES)
def test_what_onnx_strict_inference_refuses_is_flagged_by_the_check_and_by_the_analysis(name, monkeypatch):
    """conformance runs onnx's full check; the analysis runs its checker and leaves the strict
    inference to its shape engine's first pass (issue 44: one inference, not two), which, where it
    raises, has the file checked whole: the same finding either way."""
    build, said = INFERENCE_REFUSES[name]
    (flag,) = _flags(build())
    assert flag.source == CHECKER and said in flag.message
    assert analyze(build(), sizing=Sizing(default_dims=True)).model.invalid == (flag,)


@pytest.fixture
def beside_forced(monkeypatch) -> list:
    """The conformance check run in a child beside the analysis from one node on (as from
    analysis.BESIDE_NODES), whatever this machine's cores: the functions forked, as they fork."""
    if not hasattr(os, "fork"):
        pytest.skip("the check runs beside in a child only where there is fork")
    forked: list = []
    real = isolation._fork
    monkeypatch.setattr(isolation, "_fork", lambda fn, args: forked.append(fn) or real(fn, args))
    for module in (isolation, analysis):  # a machine of one core runs it in-process
        monkeypatch.setattr(module, "spare_core", lambda: True)
    monkeypatch.setattr(analysis, "BESIDE_NODES", 1)
    return forked


@pytest.mark.parametrize("build", [*(build for build, _ in INFERENCE_REFUSES.values()), _matmul, lambda: _matmul(ir=2)])
def test_a_large_graphs_check_runs_in_a_child_beside_with_the_same_findings(build, request):
    """From analysis.BESIDE_NODES main-graph nodes the conformance check runs in a forked child
    while the shape engine works (issue 44: a million-node chain's 2-3 s on the other core): the
    same findings as the check run in-process, valid and invalid alike."""
    in_process = analyze(build(), sizing=Sizing(default_dims=True)).model.invalid
    forked = request.getfixturevalue("beside_forced")
    assert analyze(build(), sizing=Sizing(default_dims=True)).model.invalid == in_process
    assert forked == [analysis._conformance_as_loaded]


def test_a_file_checked_beside_finds_its_external_data_and_refusal_as_in_process(tmp_path, request):
    """Checked beside, a file on disk: the child places its external locations from the file's
    folder (a location leaving it is flagged), and a file its validation refuses is refused by
    the analysis itself, one line, the child's result never asked."""
    path = _save(_external("../x.bin"), tmp_path)
    in_process = analyze(path, sizing=Sizing(default_dims=True)).model.invalid
    assert [flag.source for flag in in_process] == [EXTERNAL_DATA]
    forked = request.getfixturevalue("beside_forced")
    assert analyze(path, sizing=Sizing(default_dims=True)).model.invalid == in_process
    refused = _save(
        _model([h.make_node("Relu", ["ghost"], ["y"])], [], [h.make_tensor_value_info("y", TP.FLOAT, [2])]),
        tmp_path,
        "r.onnx",
    )
    with pytest.raises(ModelLoadError, match="'ghost' is used but never produced"):
        analyze(refused, sizing=Sizing(default_dims=True))
    assert forked == [analysis._conformance_as_loaded] * 2


def test_a_valid_analysis_runs_onnx_inference_once(monkeypatch):
    """The strict inference of onnx's full check is the shape engine's first pass: a valid model
    analyzed calls ONNX's C++ inference once (its checker without full_check), not twice."""
    calls = []
    real = inferred._cpp.infer_shapes
    monkeypatch.setattr(inferred._cpp, "infer_shapes", lambda *args: calls.append(args[1:]) or real(*args))
    full = []
    check = onnx.checker.check_model
    monkeypatch.setattr(
        onnx.checker,
        "check_model",
        lambda model, full_check=False, **kw: full.append(full_check) or check(model, full_check, **kw),
    )
    report = analyze(ROOT / "fixtures" / "resnet50_fp32.onnx", sizing=Sizing(dims={"batch": 1}))
    assert report.model.invalid == () and report.uncosted.count == 0
    assert calls == [(True, True, True)] and full == [False]  # checked, strict, data propagation; the checker alone


def test_out_of_order_nodes_are_checked_as_onnxruntime_sorts_them():
    """Stored order is not topological: onnxruntime sorts it (not a finding); a type error found
    in the sorted graph is."""
    relu, matmul = h.make_node("Relu", ["y"], ["z"]), h.make_node("MatMul", ["x", "w"], ["y"])
    model = _matmul()
    del model.graph.node[:]
    model.graph.node.extend([relu, matmul])
    model.graph.output[0].name = "z"
    assert _flags(model) == ()
    model.graph.node[0].op_type = "Not"  # Not of a float: onnxruntime refuses
    (flag,) = _flags(model)
    assert "Not" in flag.message and "tensor(float)" in flag.message


def test_ir_version_below_3_is_flagged():
    (flag,) = _flags(_matmul(ir=2))
    assert flag.source == CHECKER and "IR version < 3 cannot have opset_import" in flag.message


def test_a_sparse_initializer_index_out_of_range_is_flagged():
    values = nh.from_array(np.ones(2, np.float32), "w")
    indices = nh.from_array(np.array([0, 99], np.int64), "w_idx")  # 99 of 4·3 = 12 elements
    model = _matmul()
    del model.graph.initializer[:]
    model.graph.sparse_initializer.append(h.make_sparse_tensor(values, indices, [4, 3]))
    (flag,) = _flags(model)
    assert "out of range" in flag.message


def test_an_op_onnx_does_not_know_in_the_default_domain_is_flagged_unless_onnxruntime_registers_it():
    """RotaryEmbedding at opset 17 (ONNX has it from 23): refused; onnxruntime-genai's
    SimplifiedLayerNormalization in the default domain: onnxruntime registers it there."""

    def model(op):
        return _model(
            [h.make_node(op, ["x", "s"], ["y"])],
            [h.make_tensor_value_info("x", TP.FLOAT, [2, 4])],
            [h.make_tensor_value_info("y", TP.FLOAT, [2, 4])],
            [nh.from_array(np.ones(4, np.float32), "s")],
        )

    (flag,) = _flags(model("RotaryEmbedding"))
    assert "No Op registered for RotaryEmbedding with domain_version of 17" in flag.message
    assert _flags(model("SimplifiedLayerNormalization")) == ()


def test_a_model_checked_as_loaded_is_left_as_loaded():
    """A model with no external tensor is checked itself, not a copy (issue 44): the ops onnxruntime
    runs and ONNX's checker refuses (SimplifiedLayerNormalization) moved out of its way for the
    check, in the main graph and in an If's branches, and moved back; a
    duplicate metadata key, which onnxruntime loads, not a finding either."""

    def norm(name):
        return h.make_node("SimplifiedLayerNormalization", ["x", "s"], [name])

    branch = h.make_graph([norm("b")], "then", [], [h.make_tensor_value_info("b", TP.FLOAT, [2, 4])])
    model = _model(
        [norm("n"), h.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=branch)],
        [h.make_tensor_value_info("x", TP.FLOAT, [2, 4]), h.make_tensor_value_info("c", TP.BOOL, [])],
        [h.make_tensor_value_info("y", TP.FLOAT, [2, 4]), h.make_tensor_value_info("n", TP.FLOAT, [2, 4])],
        [nh.from_array(np.ones(4, np.float32), "s")],
    )
    model.metadata_props.add(key="k", value="1")
    model.metadata_props.add(key="k", value="2")
    proto, nodes = load_with_nodes(model)
    before = proto.SerializeToString()
    assert conformance(proto, nodes, None) == ()
    assert proto.SerializeToString() == before
    proto.graph.node[1].attribute[0].g.node[0].op_type = "Not"  # Not of a float in the branch: onnxruntime refuses
    (flag,) = conformance(proto, nodes, None)
    assert flag.source == CHECKER and "Not" in flag.message


# --- external data: said without opening the file -----------------------------------------------


def _external(location: str, length: int | None = 48) -> onnx.ModelProto:
    weight = onnx.TensorProto(name="w", data_type=TP.FLOAT, dims=[4, 3], data_location=TP.EXTERNAL)
    if location is not None:
        weight.external_data.add(key="location", value=location)
    if length is not None:
        weight.external_data.add(key="length", value=str(length))
    return _matmul(weight)


def test_external_initializers_stand_aside_for_the_check_and_come_back(tmp_path):
    """A model with external weights is checked as loaded too (issue 44): each external initializer
    a graph input of its type for the check, its file never looked for (absent here, not a finding);
    a weight of a type MatMul refuses (int64 against a float x) is found through it, and the model
    is as loaded afterwards."""
    model = _external("w.bin")
    proto, nodes = load_with_nodes(model)
    before = proto.SerializeToString()
    assert conformance(proto, nodes, _save(model, tmp_path)) == ()
    assert proto.SerializeToString() == before
    model.graph.initializer[0].data_type = TP.INT64
    model.graph.initializer[0].external_data[1].value = "96"  # its length at 8 bytes an element
    proto, nodes = load_with_nodes(model)
    before = proto.SerializeToString()
    (flag,) = conformance(proto, nodes, _save(model, tmp_path))
    assert flag.source == CHECKER and "tensor(int64)" in flag.message
    assert proto.SerializeToString() == before


@pytest.mark.parametrize("location, said", [
    ("../x.bin", "leaves the model's folder"),
    (".", "not a regular file (a directory)"),
    ("sub", "not a regular file (a directory)"),
    ("up.bin", "leads outside the model's folder (through a symlink)"),
    ("", "no location"),
])  # fmt: skip
def test_an_external_location_that_may_not_be_followed_is_flagged(tmp_path, location, said):
    folder = tmp_path / "model"
    (folder / "sub").mkdir(parents=True)
    (tmp_path / "x.bin").write_bytes(bytes(48))
    (folder / "up.bin").symlink_to(tmp_path / "x.bin")
    path = _save(_external(location), folder)
    (flag,) = analyze(path, sizing=Sizing(default_dims=True)).model.invalid
    assert flag.source == EXTERNAL_DATA and said in flag.message and "cannot be loaded safely" in flag.message


def test_an_absent_data_file_is_not_flagged_and_a_wrong_length_is(tmp_path):
    """The fixtures ship without their data files: absent is fine. A `length` that is not the
    tensor's size (4·3 floats = 48 bytes) is refused by onnxruntime, file or not."""
    assert analyze(_save(_external("w.bin"), tmp_path), sizing=Sizing(default_dims=True)).model.invalid == ()
    (flag,) = analyze(_save(_external("w.bin", length=2**62), tmp_path), sizing=Sizing(default_dims=True)).model.invalid
    assert "is not its size, 48 bytes" in flag.message


def test_the_data_file_is_never_opened(tmp_path, monkeypatch):
    """Only stat()ed: a FIFO as the location would block an open."""
    os.mkfifo(tmp_path / "w.bin")
    (flag,) = analyze(_save(_external("w.bin"), tmp_path), sizing=Sizing(default_dims=True)).model.invalid
    assert "not a regular file (a FIFO)" in flag.message


# --- the commands ------------------------------------------------------------------------------


def _invalid_file(folder: Path) -> Path:
    weight = nh.from_array(np.ones((4, 3), np.float32), "w")
    weight.raw_data = weight.raw_data[:20]
    return _save(_matmul(weight), folder)


def test_analyze_says_it_in_every_output(tmp_path, capsys):
    path = _invalid_file(tmp_path)
    assert main([str(path), "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert "INVALID   onnx checker: " in out and "onnx-roofline: warning: INVALID: onnx checker:" in err
    assert main([str(path), "--format", "json"]) == 0
    (flag,) = json.loads(capsys.readouterr().out)["model"]["invalid"]
    assert flag["source"] == "onnx checker" and "too small" in flag["message"]


def test_check_fails_on_an_invalid_model(tmp_path, capsys):
    path = _invalid_file(tmp_path)
    assert main(["check", str(path), "--max-latency", "1s"]) == 1
    out = capsys.readouterr().out
    assert "FAIL  INVALID: a runtime would refuse this model: onnx checker:" in out
    assert main(["check", str(_save(_matmul(), tmp_path, "ok.onnx")), "--max-latency", "1s"]) == 0


def test_inspect_says_it(tmp_path, capsys):
    assert main(["inspect", str(_invalid_file(tmp_path)), "--format", "json"]) == 0
    out, err = capsys.readouterr()
    (flag,) = json.loads(out)["invalid"]
    assert flag.startswith("onnx checker: ") and "INVALID" in err


# --- what cannot be made consistent: exit 2, one line -------------------------------------------


def test_duplicate_graph_inputs_are_refused(tmp_path, capsys):
    model = _matmul()
    model.graph.input.append(h.make_tensor_value_info("x", TP.INT64, [2, 4]))
    with pytest.raises(ModelLoadError, match="graph input 'x' is defined twice"):
        analyze(model)
    assert main([str(_save(model, tmp_path))]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_duplicate_initializers_are_refused():
    model = _matmul()
    model.graph.initializer.append(nh.from_array(np.zeros((4, 3), np.float32), "w"))
    with pytest.raises(ModelLoadError, match="initializer 'w' is defined twice"):
        analyze(model)


def test_no_opset_import_is_refused():
    for ir in (2, 8):
        model = _matmul(ir=ir)
        del model.opset_import[:]
        with pytest.raises(ModelLoadError, match="no opset_import"):
            analyze(model)


def test_a_hardware_name_the_spec_file_lacks_is_refused(tmp_path, capsys):
    spec = tmp_path / "mine.toml"
    spec.write_text('name = "Mine"\nmemory_bandwidth = 1e12\n[peaks]\nvector = {fp32 = 1e12}\n')
    model = str(_save(_matmul(), tmp_path))
    assert main([model, "--hw", f"{spec}:NOPE"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith("no entry `NOPE` (it holds one spec, `mine`)")
    assert main([model, "--hw", f"{spec}:mine"]) == 0


# --- valid real models are never flagged ---------------------------------------------------------

CORPUS = sorted(glob.glob(str(ROOT / "fixtures" / "*.onnx")) + glob.glob(str(ROOT / "tests" / "corpus" / "models" / "*.onnx"))
                + glob.glob(str(ROOT / "tests" / "corpus" / "shipped" / "*.onnx")))  # fmt: skip


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: Path(p).name)
def test_no_valid_model_is_flagged(path):
    assert _flags_of_file(path) == ()


def _flags_of_file(path: str) -> tuple:
    proto, nodes = load_with_nodes(path)
    return conformance(proto, nodes, path)
