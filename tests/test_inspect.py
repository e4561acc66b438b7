"""`onnx-roofline inspect MODEL`: what a model is, read without a weight byte (shape inference runs
only to find the defaults a graph fixes). Expected values are computed here from the protobuf
directly."""

from __future__ import annotations

import json
import math
from collections import Counter

import numpy as np
import onnx
import pytest

from onnx_roofline.commands.cli import main
from onnx_roofline.commands.inspect import inspect_model
from tests import hostile
from tests.conftest import FIXTURES
from tests.corpus import MODELS as CORPUS
from tests.test_audit import audited, inside

ALL_FIXTURES = sorted(p.name for p in FIXTURES.glob("*.onnx"))
BYTES_PER = {
    onnx.TensorProto.FLOAT: 4,
    onnx.TensorProto.FLOAT16: 2,
    onnx.TensorProto.INT64: 8,
    onnx.TensorProto.INT32: 4,
    onnx.TensorProto.BOOL: 1,
    onnx.TensorProto.INT8: 1,
    onnx.TensorProto.UINT8: 1,
    onnx.TensorProto.DOUBLE: 8,
}


def dims_of(value: onnx.ValueInfoProto) -> list:
    return [d.dim_value if d.HasField("dim_value") else d.dim_param for d in value.type.tensor_type.shape.dim]


@pytest.mark.parametrize("fixture", ALL_FIXTURES)
def test_json_matches_the_protobuf(fixture, capsys):
    path = FIXTURES / fixture
    proto = onnx.load(path, load_external_data=False)
    assert main(["inspect", str(path), "--format", "json"]) == 0
    info = json.loads(capsys.readouterr().out)
    initialized = {t.name for t in proto.graph.initializer}
    graph_inputs = [v for v in proto.graph.input if v.name not in initialized]
    assert [i["name"] for i in info["inputs"]] == [v.name for v in graph_inputs]
    assert [i["shape"] for i in info["inputs"]] == [dims_of(v) for v in graph_inputs]
    assert [o["shape"] for o in info["outputs"]] == [dims_of(v) for v in proto.graph.output]
    assert info["opsets"] == {imp.domain: imp.version for imp in proto.opset_import}
    assert info["model"]["producer"] == proto.producer_name and info["model"]["ir_version"] == proto.ir_version
    assert info["ops"] == dict(Counter(n.op_type for n in proto.graph.node))
    assert info["node_count"] == len(proto.graph.node)
    # Every weight: the initializers and Constant-node tensors (the fixtures have no bodies), but the
    # small integer shape constants (an integer tensor of rank <= 1 and <= 16 elements: docs/cost-model.md).
    stored = list(proto.graph.initializer) + [
        n.attribute[0].t for n in proto.graph.node if n.op_type == "Constant" and n.attribute[0].name == "value"
    ]
    integer = {onnx.TensorProto.INT64, onnx.TensorProto.INT32, onnx.TensorProto.INT8, onnx.TensorProto.UINT8}
    weights = [t for t in stored if not (t.data_type in integer and len(t.dims) <= 1 and math.prod(t.dims) <= 16)]
    assert info["parameters"] == sum(math.prod(t.dims) for t in weights)
    assert info["weight_bytes"] == sum(math.prod(t.dims) * BYTES_PER[t.data_type] for t in weights)
    symbolic = {d for v in graph_inputs for d in dims_of(v) if isinstance(d, str)}
    assert set(info["dims"]) == symbolic
    for name, entry in info["dims"].items():
        assert entry["inputs"] == [v.name for v in graph_inputs if name in dims_of(v)]
    (data,) = info["external_data"]  # the fixtures ship without their weights file
    assert data["location"] == f"{fixture}.data" and data["status"] == "absent" and data["present"] is False
    external = [t for t in proto.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]
    assert data["tensors"] == len(external)
    assert data["declared_bytes"] == sum(math.prod(t.dims) * BYTES_PER[t.data_type] for t in external)


def test_decode_text_groups_the_cache_and_names_defaults(capsys):
    assert main(["inspect", str(FIXTURES / "gpt2_decode_fp16.onnx")]) == 0
    out = capsys.readouterr().out
    assert "past.#.key ×12" in out and "present.#.value ×12" in out and "past.3.key" not in out
    assert "batch (25 inputs; default 1), past_sequence (24 inputs; default 511)" in out
    assert "absent (the analysis does not need it)" in out
    assert "--dim batch=1 --dim past_sequence=511" in out  # a command that analyzes it
    assert "parameters  124.44 M" in out


def test_a_default_the_graph_fixes_is_the_one_inspect_names(capsys):
    """onnxruntime-genai names the KV cache's head size `kv_cache_dim`: its name's default (1)
    cannot run at GroupQueryAttention, whose packed query fixes it at hidden / heads. inspect names
    the size analyze binds, and the command it prints runs."""
    path = CORPUS / "genai_llama_int4.onnx"
    head = 128 // 4  # the corpus config (tests/corpus/sources.py): hidden 128, 4 query heads
    info = inspect_model(path)
    assert info.default_dims["kv_cache_dim"] == head and "GroupQueryAttention" in info.solved_dims["kv_cache_dim"]
    assert info.to_dict()["dims"]["kv_cache_dim"]["default"] == head
    assert main(["inspect", str(path)]) == 0
    command = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("analyze"))
    assert f"--dim kv_cache_dim={head}" in command
    assert main(command.split()[2:]) == 0  # the suggested command, as the user pastes it


def test_external_data_present_absent_refused_and_never_opened(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    weights = hostile.weights_file(folder)  # 4×8 float32: 128 bytes
    present = hostile.save(hostile.matmul_with(hostile.external("w.bin")), folder / "present.onnx")
    absent = hostile.save(hostile.matmul_with(hostile.external("gone.bin")), folder / "absent.onnx")
    (tmp_path / "outside.bin").write_bytes(b"\0" * 128)
    escaping = hostile.save(hostile.matmul_with(hostile.external("../outside.bin")), folder / "escaping.onnx")
    absolute = hostile.save(
        hostile.matmul_with(hostile.external(str(tmp_path / "outside.bin"))), folder / "absolute.onnx"
    )

    (data,) = inspect_model(present).external_data
    assert (data.status, data.size, data.declared_bytes, data.tensors) == ("present", 128, 4 * 8 * 4, 1)
    assert inspect_model(absent).external_data[0].status == "absent"
    for path in (escaping, absolute):
        (refused,) = inspect_model(path).external_data
        assert refused.status == "refused" and refused.size is None and "model's folder" in refused.reason

    warm = tmp_path / "warm"
    warm.mkdir()
    hostile.weights_file(warm)
    copy = hostile.save(hostile.matmul_with(hostile.external("w.bin")), warm / "present.onnx")
    code, events = audited(["inspect", copy], ["inspect", present, "--format", "json"])
    assert code == 0
    opened = [paths[0] for event, paths, _ in events if event == "open"]
    assert opened == [str(present.resolve())]  # the model only: the weights file is stat()ed, never opened
    assert all(not inside(p, tmp_path) or p == str(present.resolve()) for _, paths, _ in events for p in paths)
    assert weights.read_bytes() == np.arange(32, dtype=np.float32).tobytes()


def test_inline_model_and_fixed_shapes(tmp_path, capsys):
    model = hostile.matmul_with(onnx.numpy_helper.from_array(np.ones((4, 8), np.float32), "w"))
    path = hostile.save(model, tmp_path / "inline.onnx")
    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert "none symbolic: every input shape is fixed" in out and "none: every weight is inline" in out
    assert "parameters  32 in 1 initializer, 128 B (float32 128 B)" in out


def test_missing_model_is_one_line_exit_2(tmp_path, capsys):
    assert main(["inspect", str(tmp_path / "nope.onnx")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "model file not found" in err
