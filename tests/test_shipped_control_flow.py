"""Models whose work sits inside control flow, as the tools people use ship them (issue 27):
optimum's merged decoders (GPT-2, Llama, Whisper; weights shared by the branches or duplicated in
each), a voice detector's nested Ifs on its sample rate, a scripted Loop and a JAX-style Scan.
Made by tests/corpus/shipped_control_flow.py from real exporters, committed weight-stripped.

The acceptance is derived by the tool itself on two graphs that compute the same thing: a merged
decoder at `use_cache_branch=b` against the un-merged graph of branch b (the optimum inputs of
both, the same dims) must agree on FLOPs, bytes, time, weight bytes, KV-cache bytes and peak
activations, in fp32 and in fp16. Every body node is a row, and the totals are the sum of the rows."""

from __future__ import annotations

import json
import math
from pathlib import Path

import onnx
import pytest

from onnx_roofline import Sizing, analyze
from onnx_roofline.commands.cli import main

SHIPPED = Path(__file__).resolve().parent / "corpus" / "shipped"
MERGED = [
    f"{family}_decoder_model_merged{layout}" for family in ("gpt2", "llama", "whisper") for layout in ("", "_dup")
]
MERGED += [
    f"optimum_{family}_decoder_model_merged" for family in ("gpt2", "llama")
]  # optimum's own merge (tests/corpus/optimum_merged.py)


def _manifest(name: str) -> dict:
    return json.loads((SHIPPED / f"{name}.json").read_text())


def _bindings(name: str):
    """(dims, values, counterpart) of the manifest's main binding and of each variant."""
    manifest = _manifest(name)
    for binding in [manifest, *manifest.get("variants", [])]:
        yield binding["dims"], binding["values"], binding["counterpart"]


def _inputs(name: str) -> list[dict]:
    """The whole input shapes each binding gives (optimum-onnx's merged attention_mask), in _bindings' order."""
    manifest = _manifest(name)
    return [binding.get("inputs", {}) for binding in [manifest, *manifest.get("variants", [])]]


def _symbols(path: Path) -> set[str]:
    """The symbolic dims of a model's inputs (optimum's un-merged graphs name fewer than the merged one)."""
    graph = onnx.load(path, load_external_data=False).graph
    return {d.dim_param for v in graph.input for d in v.type.tensor_type.shape.dim if d.dim_param}


def _figures(report) -> dict[str, float]:
    memory = report.memory
    return {
        "flops": report.totals.flops,
        "bytes": report.totals.bytes,
        "time_s": report.totals.time_s,
        "weight_bytes": memory.weight_bytes,
        "kv_cache_bytes": memory.kv_cache_bytes,
        "peak_activation_bytes": memory.peak_activation_bytes,
    }


@pytest.mark.parametrize("precision", [None, "fp16"])
@pytest.mark.parametrize("name", MERGED)
def test_merged_equals_unmerged(name, precision):
    for (dims, values, counterpart), inputs in zip(_bindings(name), _inputs(name), strict=False):
        merged = analyze(
            SHIPPED / f"{name}.onnx", precision=precision, sizing=Sizing(dims=dims, values=values, input_shapes=inputs)
        )
        path = SHIPPED / f"{counterpart}.onnx"
        alone = analyze(
            path, precision=precision, sizing=Sizing(dims={k: v for k, v in dims.items() if k in _symbols(path)})
        )
        assert merged.uncosted.count == 0 and alone.uncosted.count == 0
        ours, theirs = _figures(merged), _figures(alone)
        for key, expected in theirs.items():
            assert math.isclose(ours[key], expected, rel_tol=0.005), (name, counterpart, key, ours[key], expected)


def _stored_bytes(graph: onnx.GraphProto) -> int:
    """Bytes of the weights a graph stores: initializers and Constant tensors, small integer shape
    constants (integer, rank <= 1, <= 16 elements) aside, as model/weights.py defines a weight."""
    tensors = list(graph.initializer) + [
        a.t for n in graph.node if n.op_type == "Constant" for a in n.attribute if a.name == "value"
    ]
    integer = {onnx.TensorProto.INT8, onnx.TensorProto.INT16, onnx.TensorProto.INT32, onnx.TensorProto.INT64}
    total = 0
    for tensor in tensors:
        elements = math.prod(tensor.dims)
        if tensor.data_type in integer and len(tensor.dims) <= 1 and elements <= 16:
            continue
        total += elements * onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
    return total


@pytest.mark.parametrize("family", ["gpt2", "llama", "whisper"])
def test_a_branch_not_taken_holds_its_own_weights(family):
    """Each branch of a `_dup` merge keeps its own copy: the run reads one (weight_bytes, the
    un-merged graph's, above), and the runtime holds the other too, said apart and in the total."""
    name = f"{family}_decoder_model_merged_dup"
    dims, values, _ = next(_bindings(name))
    report = analyze(SHIPPED / f"{name}.onnx", sizing=Sizing(dims=dims, values=values))
    (node,) = [n for n in report.nodes if not n.scope]
    other = next(
        a.g for a in node.proto.attribute if a.name == ("else_branch" if values["use_cache_branch"] else "then_branch")
    )
    memory = report.memory
    assert memory.untaken_branch_weight_bytes == _stored_bytes(other) > 0
    assert (
        memory.total_bytes
        == memory.weight_bytes
        + memory.untaken_branch_weight_bytes
        + memory.kv_cache_resident_bytes
        + memory.peak_activation_bytes
    )


@pytest.mark.parametrize("name", MERGED)
def test_every_body_node_is_a_row_and_the_rows_add_up(name):
    dims, values, _ = next(_bindings(name))
    report = analyze(SHIPPED / f"{name}.onnx", sizing=Sizing(dims=dims, values=values))
    (branch,) = report.model.branches
    taken = "then_branch" if values["use_cache_branch"] else "else_branch"
    assert branch.taken == taken and branch.why == "--value use_cache_branch"
    body = [n for n in report.nodes if n.scope]
    (node,) = [n for n in report.nodes if not n.scope]
    assert node.op_type == "If" and node.cost.flops == 0  # the If keeps its own overhead: its condition read
    graph = next(a.g for a in node.proto.attribute if a.name == taken)
    assert len(body) == len(graph.node) and all(n.scope == f"{node.name}/{taken}" for n in body)
    assert report.totals.flops == sum(n.cost.flops for n in report.nodes)
    assert report.totals.bytes == sum(n.cost.bytes for n in report.nodes)


@pytest.mark.parametrize("name", ["gpt2_decoder_model_merged", "llama_decoder_model_merged_dup"])
def test_the_plain_command_on_a_merged_decoder_takes_the_cache_branch_and_says_why(name, capsys):
    assert main([str(SHIPPED / f"{name}.onnx")]) == 0
    captured = capsys.readouterr()
    assert (
        "branch    optimum::if: then_branch (default: use_cache_branch=1, as the past inputs are not empty"
        in captured.out
    )
    assert "note: branch taken: optimum::if: then_branch" in captured.err
    assert "UNCOSTED" not in captured.out


def test_an_empty_past_takes_the_prompt_branch():
    report = analyze(
        SHIPPED / "gpt2_decoder_model_merged.onnx", sizing=Sizing(dims={"past_sequence_length": 0}, default_dims=True)
    )
    (branch,) = report.model.branches
    assert branch.taken == "else_branch" and "is empty" in branch.why


def test_the_voice_detector_takes_the_branch_of_the_sample_rate_given():
    """Nested Ifs on `sr` (16000, else 8000): given a value, each If takes the branch its condition
    says; not given, both are analyzed at each If, the heavier counted, and the output says so."""
    manifest = _manifest("vad_sr_if")
    given = analyze(SHIPPED / "vad_sr_if.onnx", sizing=Sizing(dims=manifest["dims"], values=manifest["values"]))
    assert given.uncosted.count == 0 and all(b.other is None for b in given.model.branches)
    unknown = analyze(SHIPPED / "vad_sr_if.onnx", sizing=Sizing(dims=manifest["dims"]))
    assert any(b.other is not None and b.inputs == ("sr",) and "--value sr=" in b.why for b in unknown.model.branches)
    convolutions = [n for n in given.nodes if n.op_type == "Conv"]
    assert convolutions and all(n.scope for n in convolutions)  # the network is inside the branches, and costed there


@pytest.mark.parametrize(("name", "trips", "per_trip"), [
    ("loop_scripted_gemm", 4, 2 * 2 * 64 * 64),  # steps=4; Gemm [batch 2, 64]·[64, 64]ᵀ: 2·2·64·64 (+ its bias, a vector add)
    ("scan_jax_rnn", 6, 2 * 2 * 16 * 32 + 2 * 2 * 32 * 32),  # T=6, B=2: x_t·Wx [2,16]·[16,32] and h·Wh [2,32]·[32,32]
])  # fmt: skip
def test_loop_and_scan_bodies_are_rows_times_their_trips(name, trips, per_trip):
    manifest = _manifest(name)
    report = analyze(SHIPPED / f"{name}.onnx", sizing=Sizing(dims=manifest["dims"], values=manifest["values"]))
    assert report.uncosted.count == 0
    body = [n for n in report.nodes if n.scope]
    assert body and all(n.trips == trips for n in body)
    products = sum(
        n.cost.flops - (n.outputs[0].numel * n.trips if len(n.inputs) > 2 else 0)
        for n in body
        if n.op_type in ("Gemm", "MatMul")
    )
    assert products == trips * per_trip  # the products alone (a Gemm's bias add, one FLOP per output, aside)


VERIFIED = [
    "gpt2_decoder_model_merged",
    "llama_decoder_model_merged_dup",
    "optimum_llama_decoder_model_merged",
    "vad_sr_if",
    "loop_scripted_gemm",
    "scan_jax_rnn",
]


@pytest.mark.parametrize("name", VERIFIED)
def test_verify_checks_every_body_node(name):
    """The run exposes the branch taken (inlined) and a Loop's or Scan's body values (stacked as
    extra scan outputs): every body row's shapes and bytes are compared with onnxruntime's."""
    from onnx_roofline.commands.verify import verify

    manifest = _manifest(name)
    result = verify(
        SHIPPED / f"{name}.onnx", dims=manifest["dims"], values=manifest["values"], input_shapes=manifest.get("inputs")
    )
    body = [check for check, row in zip(result.comparison.nodes, result.report.nodes, strict=False) if row.scope]
    assert body and all(check.outcome == "checked" for check in body), [c for c in body if c.outcome != "checked"][:3]
    assert result.passed and result.comparison.disagreements == ()


def test_verify_feeds_the_value_a_default_branch_stands_for():
    """No --value: the analysis takes the cache branch by default (the past is not empty), and the
    run is fed use_cache_branch=1, so every row of that branch is checked against the run."""
    from onnx_roofline.commands.verify import verify

    dims, _, _ = next(_bindings("gpt2_decoder_model_merged"))
    result = verify(SHIPPED / "gpt2_decoder_model_merged.onnx", dims=dims)
    (branch,) = result.report.model.branches
    assert branch.taken == "then_branch" and branch.why.startswith("default")
    body = [check for check, row in zip(result.comparison.nodes, result.report.nodes, strict=False) if row.scope]
    assert body and all(check.outcome == "checked" for check in body)
    assert result.passed


def test_verify_fails_on_a_wrong_body_rule(monkeypatch):
    """Tanh's rule made to claim 1 byte each way: the Loop body's Tanh disagrees with the run
    (a Tanh reads its input and writes its output, [batch 2, 64] float32 = 512 bytes each, per trip)."""
    import dataclasses

    from onnx_roofline.commands.verify import verify
    from onnx_roofline.costs.cost import Cost
    from onnx_roofline.costs.rules import registry

    (rule,) = registry._RULES[("", "Tanh")]
    monkeypatch.setitem(
        registry._RULES,
        ("", "Tanh"),
        [dataclasses.replace(rule, formula=lambda node: Cost(bytes_read=1, bytes_written=1))],
    )
    manifest = _manifest("loop_scripted_gemm")
    result = verify(SHIPPED / "loop_scripted_gemm.onnx", dims=manifest["dims"], values=manifest["values"])
    assert not result.passed
    wrong = {
        (d.what, d.observed) for d in result.comparison.disagreements if d.op_type == "Tanh" and "/body/" in d.node
    }
    assert wrong == {("bytes_read", 2 * 64 * 4), ("bytes_written", 2 * 64 * 4)}


def _cache_step(name: str = "gpt2_decoder_model_merged") -> list[str]:
    """The merged decoder's CLI arguments at its manifest's cache-branch binding."""
    dims, values, _ = next(_bindings(name))
    return [
        str(SHIPPED / f"{name}.onnx"),
        *[f"--dim={k}={v}" for k, v in dims.items()],
        *[f"--value={k}={v}" for k, v in values.items()],
    ]


def _then_branch_nodes(name: str = "gpt2_decoder_model_merged") -> list[onnx.NodeProto]:
    graph = onnx.load(SHIPPED / f"{name}.onnx", load_external_data=False).graph
    (node,) = graph.node
    return list(next(a.g for a in node.attribute if a.name == "then_branch").node)


def test_every_body_node_is_a_row_in_json_csv_and_html(tmp_path, capsys):
    """One row per body node (and the If's own) in each format, named by where it lives."""
    body = _then_branch_nodes()
    expected = {f"optimum::if/then_branch/{n.name}" for n in body}
    assert main([*_cache_step(), "--format", "json", "-o", str(tmp_path / "r.json")]) == 0
    rows = json.loads((tmp_path / "r.json").read_text())["nodes"]
    assert len(rows) == 1 + len(body) and {r["name"] for r in rows if r["scope"]} == expected
    assert [r["index"] for r in rows] == list(range(len(rows)))  # the row's position

    assert main([*_cache_step(), "--format", "csv", "-o", str(tmp_path / "r.csv")]) == 0
    import csv

    with open(tmp_path / "r.csv", newline="") as handle:
        names = {row["name"] for row in csv.DictReader(handle)}
    assert expected <= names and len(names) == 1 + len(body)

    assert main([*_cache_step(), "--format", "html", "-o", str(tmp_path / "r.html")]) == 0
    html = (tmp_path / "r.html").read_text()
    assert all(json.dumps(name)[1:-1] in html or name in html for name in expected)


def test_every_body_node_is_annotated_for_netron(tmp_path):
    """--annotate: each node of the branch taken carries rl.* figures inside the If's body, the
    figures of its row (FLOPs as the report counts them)."""
    from onnx_roofline.report.annotate import NAMESPACE

    out = tmp_path / "annotated.onnx"
    assert main([*_cache_step(), "--annotate", str(out), "-o", str(tmp_path / "r.txt")]) == 0
    report = analyze(SHIPPED / "gpt2_decoder_model_merged.onnx", **_kwargs())
    flops = {row.own_name: row.cost.flops for row in report.nodes if row.scope}
    (node,) = onnx.load(out, load_external_data=False).graph.node
    body = next(a.g for a in node.attribute if a.name == "then_branch").node
    for inner in body:
        props = {p.key: p.value for p in inner.metadata_props}
        assert props[NAMESPACE + "flops"] == str(flops[inner.name]), inner.name


def _kwargs(name: str = "gpt2_decoder_model_merged") -> dict:
    dims, values, _ = next(_bindings(name))
    return {"dims": dims, "values": values}


def test_modules_deployed_check_and_diff_see_body_nodes(tmp_path, capsys):
    """Body rows have the modules their own names give (those of the un-merged graph of the same
    branch); the deployed view's kernels run every row; check and diff read them like any node."""
    from onnx_roofline.report.breakdown import module_path

    dims, values, counterpart = next(_bindings("gpt2_decoder_model_merged"))
    report = analyze(SHIPPED / "gpt2_decoder_model_merged.onnx", sizing=Sizing(dims=dims, values=values))
    path = SHIPPED / f"{counterpart}.onnx"
    alone = analyze(path, sizing=Sizing(dims={k: v for k, v in dims.items() if k in _symbols(path)}))
    assert {module_path(n) for n in report.nodes if n.scope} == {module_path(n) for n in alone.nodes}

    assert main([*_cache_step(), "--view", "deployed", "--format", "json", "-o", str(tmp_path / "d.json")]) == 0
    kernels = json.loads((tmp_path / "d.json").read_text())["nodes"]
    folded = {n.index for n in report.nodes if n.constant_foldable}
    assert {m for kernel in kernels for m in kernel["members"]} | folded == set(range(len(report.nodes)))

    assert main(["check", "--max-latency", "1ns", *_cache_step()]) == 1  # the body's time counts against the limit
    assert "optimum::if/then_branch//model/lm_head/MatMul" in capsys.readouterr().out  # named among the slowest

    longer = {
        **dims,
        "past_sequence_length": dims["past_sequence_length"] * 2,
        "attention_mask_sequence_length": dims["past_sequence_length"] * 2 + 1,
    }
    for label, bound in (("a", dims), ("b", longer)):
        args = [
            str(SHIPPED / "gpt2_decoder_model_merged.onnx"),
            *[f"--dim={k}={v}" for k, v in bound.items()],
            "--value=use_cache_branch=1",
        ]
        assert main([*args, "--format", "json", "-o", str(tmp_path / f"{label}.json")]) == 0
    capsys.readouterr()
    assert (
        main(["diff", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--format", "json"]) == 1
    )  # a longer past: the body's attention grows
    assert "optimum::if/then_branch//model/transformer/h.0/attn/" in capsys.readouterr().out


def test_a_body_declaring_an_outer_name_takes_the_outer_type():
    """onnxslim writes value_info for the outer-scope names a branch reads, with the outer graph's
    symbolic dims: a declaration, not a source. The bound dims reach the branch's MatMul."""
    onnxslim = pytest.importorskip("onnxslim")
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    def branch(name):
        nodes = [
            helper.make_node("MatMul", ["x", "w"], [f"{name}_m"]),
            helper.make_node("Relu", [f"{name}_m"], [f"{name}_out"]),
        ]
        return helper.make_graph(
            nodes, name, [], [helper.make_tensor_value_info(f"{name}_out", TensorProto.FLOAT, None)]
        )

    graph = helper.make_graph(
        [helper.make_node("If", ["c"], ["y"], then_branch=branch("then"), else_branch=branch("else"), name="choose")], "g",
        [helper.make_tensor_value_info("c", TensorProto.BOOL, [1]), helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=[numpy_helper.from_array(np.ones((64, 64), np.float32), "w")],
    )  # fmt: skip
    slim = onnxslim.slim(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    declared = {v.name for a in slim.graph.node[0].attribute if a.name == "then_branch" for v in a.g.value_info}
    assert "x" in declared  # the layout under test: the branch declares the outer name
    report = analyze(slim, sizing=Sizing(dims={"batch": 2, "seq": 5}, values={"c": [1]}))
    (matmul,) = [n for n in report.nodes if n.op_type == "MatMul"]
    assert report.uncosted.count == 0 and matmul.outputs[0].shape == (2, 5, 64)
    assert matmul.cost.flops == 2 * (2 * 5) * 64 * 64  # 2·M·K·N, M = batch·seq


def test_a_loop_trip_count_without_a_value_names_the_input_and_the_flag(capsys):
    manifest = _manifest("loop_scripted_gemm")
    assert (
        main([str(SHIPPED / "loop_scripted_gemm.onnx"), *[f"--dim={k}={v}" for k, v in manifest["dims"].items()]]) == 0
    )
    captured = capsys.readouterr()
    assert "Loop trip count 'steps' is not a constant" in captured.err and "--value steps=N" in captured.err
    assert "UNCOSTED" in captured.out  # the partial totals are said in the table too
