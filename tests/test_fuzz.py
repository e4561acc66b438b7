"""Fuzzing, bounded for CI (issue 13): random valid graphs of registered ops keep the analysis's
invariants, and random mutations of a model's bytes end in a report or an exit 2, never a
traceback. Derandomized under CI (the same examples every run); random on a developer's machine.
Structure-aware mutants of the fixtures and corpora (tests/fuzz, issue 32), a fixed seed set, run
through the command line as a user runs it: docs/hostile-inputs.md, "Fuzzing"."""

from __future__ import annotations

import datetime
import functools
import json
import math
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from onnx_roofline import analyze
from onnx_roofline.commands.cli import main
from onnx_roofline.report.serialize import render_json
from tests.conftest import FIXTURES
from tests.fuzz.campaign import FAILURES, HERE_REPO, Config, GiB, run_jobs, seed_models

BOUNDED = settings(
    max_examples=150,
    deadline=None,
    database=None,
    derandomize=bool(os.environ.get("CI")),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
OPSET = 17
UNARY = ["Relu", "Sigmoid", "Tanh", "Exp", "Neg", "Abs", "Sqrt", "Erf", "Softplus"]
BINARY = ["Add", "Sub", "Mul", "Div", "Max", "Pow"]
VIEWS = {"Identity", "Flatten", "Reshape", "Squeeze", "Unsqueeze"}  # move 0 bytes by convention
NODE_KEYS = {
    "index",
    "name",
    "op_type",
    "domain",
    "inputs",
    "outputs",
    "flops",
    "transcendentals",
    "bytes_read",
    "bytes_written",
    "bytes",
    "intensity",
    "unit",
    "ridge",
    "bound",
    "time_s",
    "status",
}

dims = st.integers(1, 6)


@st.composite
def graphs(draw) -> tuple[onnx.ModelProto, dict[str, tuple[int, ...]]]:
    """A valid graph of 1-8 nodes over float tensors, and the shape every value must get."""
    shape = tuple(draw(st.lists(dims, min_size=1, max_size=4)))
    values: dict[str, tuple[int, ...]] = {"x": shape}
    nodes, initializers = [], []

    def constant(name: str, array: np.ndarray) -> str:
        initializers.append(numpy_helper.from_array(array, name))
        return name

    for index in range(draw(st.integers(1, 8))):
        source = draw(st.sampled_from(sorted(values)))
        shape = values[source]
        rank, out = len(shape), f"v{index}"
        kind = draw(
            st.sampled_from(
                ["unary", "binary", "matmul", "transpose", "softmax", "reduce", "concat", "flatten", "reshape"]
            )
        )
        if kind == "unary" or rank == 0:  # a scalar (all axes reduced) takes elementwise ops only
            node, result = helper.make_node(draw(st.sampled_from(UNARY)), [source], [out]), shape
        elif kind == "binary":
            other = tuple(
                d if draw(st.booleans()) else 1 for d in shape[draw(st.integers(0, rank - 1)) :]
            )  # broadcasts
            second = (
                source if draw(st.booleans()) else constant(f"c{index}", np.ones(other, np.float32))
            )  # the same tensor twice
            node, result = helper.make_node(draw(st.sampled_from(BINARY)), [source, second], [out]), shape
        elif kind == "matmul" and rank >= 2:
            n = draw(dims)
            weight = constant(f"w{index}", np.ones((shape[-1], n), np.float32))
            node, result = helper.make_node("MatMul", [source, weight], [out]), (*shape[:-1], n)
        elif kind == "transpose":
            perm = draw(st.permutations(range(rank)))
            node, result = (
                helper.make_node("Transpose", [source], [out], perm=list(perm)),
                tuple(shape[p] for p in perm),
            )
        elif kind == "softmax":
            node, result = helper.make_node("Softmax", [source], [out], axis=draw(st.integers(-rank, rank - 1))), shape
        elif kind == "reduce":
            axes = sorted(draw(st.sets(st.integers(0, rank - 1), min_size=1)))
            keep = draw(st.booleans())
            node = helper.make_node(
                "ReduceSum", [source, constant(f"a{index}", np.array(axes, np.int64))], [out], keepdims=int(keep)
            )
            result = (
                tuple(1 if i in axes else d for i, d in enumerate(shape))
                if keep
                else tuple(d for i, d in enumerate(shape) if i not in axes)
            )
        elif kind == "concat":
            axis = draw(st.integers(0, rank - 1))
            node = helper.make_node("Concat", [source, source], [out], axis=axis)
            result = tuple(2 * d if i == axis else d for i, d in enumerate(shape))
        elif kind == "flatten":
            axis = draw(st.integers(0, rank))
            node, result = (
                helper.make_node("Flatten", [source], [out], axis=axis),
                (math.prod(shape[:axis]), math.prod(shape[axis:])),
            )
        else:  # reshape (also where a MatMul had a rank-1 input)
            result = (math.prod(shape),)
            node = helper.make_node("Reshape", [source, constant(f"s{index}", np.array([-1], np.int64))], [out])
        node.name = f"n{index}_{node.op_type}"
        nodes.append(node)
        values[out] = result
    produced = [name for name in values if name != "x"]
    graph = helper.make_graph(
        nodes,
        "fuzz",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, values["x"])],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in produced],
        initializers,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]), values


@BOUNDED
@given(graphs())
def test_random_valid_graphs_keep_the_invariants(case):
    model, shapes = case
    report = analyze(model, hw="h100")
    nodes = report.nodes
    assert [n.status for n in nodes] == ["ok"] * len(nodes), [(n.name, n.status, n.reason) for n in nodes]
    for node in nodes:
        cost = node.cost
        assert cost.flops >= 0 and cost.transcendentals >= 0 and cost.bytes_read >= 0
        assert cost.bytes == cost.bytes_read + cost.bytes_written
        (output,) = node.outputs
        assert output.shape == shapes[output.name], node.name
        if node.op_type not in VIEWS:
            assert cost.bytes_written >= output.nbytes, node.name
        assert node.placement.time_s >= 0 and math.isfinite(node.placement.time_s)
    totals = report.totals
    assert totals.flops == sum(n.cost.flops for n in nodes)
    assert totals.bytes == sum(n.cost.bytes for n in nodes)
    assert totals.time_s == pytest.approx(sum(n.placement.time_s for n in nodes))
    document = report.to_dict()
    assert json.loads(render_json(report)) == document
    assert {"schema_version", "model", "hardware", "nodes", "totals", "unsupported"} <= document.keys()
    assert all(node.keys() >= NODE_KEYS for node in document["nodes"])


SEED_MODEL = FIXTURES / "resnet50_fp32_torchscript.onnx"


@functools.lru_cache(maxsize=1)
def seed_bytes() -> bytes:
    """The model every mutant starts from (not a fixture: hypothesis would print its 100 kB)."""
    return SEED_MODEL.read_bytes()


edits = st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(0, 255)), min_size=1, max_size=8)


@pytest.mark.skipif(not SEED_MODEL.exists(), reason=f"{SEED_MODEL.name} not generated")
@BOUNDED
@given(edits=edits, cut=st.one_of(st.none(), st.floats(0, 1)), insert=st.binary(max_size=16))
def test_mutated_model_bytes_give_a_report_or_exit_2(tmp_path_factory, capsys, edits, cut, insert):
    data = bytearray(seed_bytes())
    for where, value in edits:
        data[int(where * len(data))] = value
    if cut is not None:
        at = int(cut * len(data))
        data[at:at] = insert
    path = tmp_path_factory.mktemp("mutant") / "mutant.onnx"
    path.write_bytes(bytes(data))
    code = main([str(path), "--partial", "--format", "json"])
    out, err = capsys.readouterr()
    assert code in (0, 2), err
    assert all(line.startswith("onnx-roofline: ") for line in err.splitlines()), err  # warnings, an error: no traceback
    if code == 0:
        assert json.loads(out)["schema_version"] == 1
    else:
        assert sum(line.startswith("onnx-roofline: error: ") for line in err.splitlines()) == 1, err


CI_MUTANTS = 120  # mutant N grows from seed model N mod their count: 120 mutants, 360 runs, ~100 s on 2 cores
CI_COMMANDS = ("analyze", "inspect", "check")  # check --max-latency 1s
SEED_VARIABLE = "ONNX_ROOFLINE_FUZZ_SEED"


def campaign_seed() -> int:
    """The first mutant seed of this run: $ONNX_ROOFLINE_FUZZ_SEED where given (to rerun a failed
    day), else one from today's date (UTC), so that each day explores 120 mutants never run before."""
    given = os.environ.get(SEED_VARIABLE, "").strip()
    return int(given) if given else datetime.datetime.now(datetime.timezone.utc).date().toordinal() * CI_MUTANTS


def test_structure_aware_mutants_end_cleanly(tmp_path):
    """Each mutant (an initializer's bytes cut, a dim of 2^62, an If without outputs, nodes
    shuffled, a body of 2^62 trips, ...) run through analyze, inspect and check in a process of
    its own, under a 60 s deadline and a 4 GiB address-space limit: an exit code of 0, 1 or 2,
    every stderr line the tool's own (one error line with exit 2); no traceback, signal, hang or
    memory blow-up; where strace is installed, no file opened outside the allowlist
    (campaign.py). The seeds change every day (campaign_seed); a failure names the campaign's
    seed and each failing mutant with the command that writes it again."""
    cfg = Config(
        HERE_REPO,
        tmp_path,
        sys.executable,
        CI_COMMANDS,
        timeout=60,
        memory=4 * GiB,
        strace=shutil.which("strace"),
        oracle=False,
    )
    models = seed_models(HERE_REPO)
    first = campaign_seed()
    records = run_jobs(
        cfg, [(seed, models[seed % len(models)]) for seed in range(first, first + CI_MUTANTS)], workers=2
    )
    failures = [
        f"{r['outcome']}: mutant {r['mutant']} ({r['label']}: {r['detail'][:100]}), {r['command']}: {r['place']}; "
        f"reproduce: python -m tests.fuzz.mutate {Path(r['model_path']).relative_to(HERE_REPO)} --seed {r['seed']} --out DIR"
        for r in records
        if r["outcome"] in FAILURES
    ]
    assert not failures, f"campaign seed {first} (rerun it: {SEED_VARIABLE}={first})\n" + "\n".join(failures)
    assert (
        sum(r["outcome"] == "ok" for r in records) >= 3 * CI_MUTANTS * 0.9
    )  # the mutants ran (a few are not applicable)
