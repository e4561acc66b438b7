"""Acceptance of issue 12: the graphs the tools people deploy with emit, analyzed on the core install.

The corpus (tests/corpus/models/, made by ``python -m tests.corpus.generate``; see
tests/corpus/__init__.py) holds weight-stripped graphs from both torch exporters, onnxruntime's
session optimization and transformers optimizer, the onnxruntime-genai builder, the quantizers,
onnx's version converter and old opsets. For every graph, at the dims its manifest binds:

1. every node is costed (status "ok"); a failure names how many are not and the root cause — the
   first uncosted node whose inputs are all known (its op, and why);
2. every node output's shape and dtype equal what onnxruntime produces, with synthesized weights
   (``onnx_roofline.commands.verify``, docs/verify.md);
3. the matrix-unit FLOPs (MatMul, Gemm, Conv, attention, MatMulNBits, MatMulInteger, ...: every node
   whose unit is "matrix") are within 1 % of the manifest's independent count (FlopCounterMode on
   the eager torch model, or a formula).

The graphs with a KV cache are also checked at a second binding, ``name@decode`` (one new token).
Nothing here imports torch: the graphs are committed. Only the regeneration test needs it.
"""

from __future__ import annotations

import functools
from pathlib import Path

import onnx
import pytest

from tests.corpus import MODELS, cases, check, manifest

ENTRIES = manifest()
BY_NAME = {e["name"]: e for e in ENTRIES}
CASES = {c["id"]: c for c in cases()}  # each graph at its dims, and at each variant's (name@decode)
MAX_BYTES = 1 << 20

names = pytest.mark.parametrize("name", sorted(CASES))


@functools.cache
def _analyzed(name: str):
    return check.analyzed(CASES[name])  # cached: two tests read it


def _report(name: str):
    report = _analyzed(name)
    if isinstance(report, Exception):
        pytest.fail(f"analyze raised {type(report).__name__}: {report}", pytrace=False)
    return report


def test_corpus_is_complete():
    """Every graph has its manifest entry and the other way round; each entry binds every symbolic
    input dim; the committed graphs stay small."""
    graphs = {p.stem for p in MODELS.glob("*.onnx")}
    assert graphs == set(BY_NAME), (
        f"graphs without a manifest: {sorted(graphs - set(BY_NAME))}, entries without a graph: {sorted(set(BY_NAME) - graphs)}"
    )
    assert len(ENTRIES) >= 40
    problems = []
    for entry in ENTRIES:
        model = onnx.load(entry["path"], load_external_data=False)
        inits = {t.name for t in model.graph.initializer}
        dims = {
            d.dim_param
            for i in model.graph.input
            if i.name not in inits
            for d in i.type.tensor_type.shape.dim
            if d.HasField("dim_param")
        }
        for binding in [entry["dims"], *(v["dims"] for v in entry.get("variants", []))]:
            if dims - set(binding):
                problems.append(f"{entry['name']}: unbound input dims {sorted(dims - set(binding))}")
        if Path(entry["path"]).stat().st_size > MAX_BYTES:
            problems.append(f"{entry['name']}: {Path(entry['path']).stat().st_size:,} bytes")
        if len(model.graph.node) != entry["nodes"]:
            problems.append(f"{entry['name']}: {len(model.graph.node)} nodes, manifest says {entry['nodes']}")
    assert not problems, problems


@names
def test_every_node_costed(name):
    report = _report(name)
    uncosted = check.uncosted(report)
    if uncosted:
        statuses = ", ".join(f"{k} {v}" for k, v in report.status_counts.items() if k != "ok")
        pytest.fail(
            f"{len(uncosted)} of {len(report.nodes)} nodes uncosted ({statuses}); root cause {check.root_cause(report)}",
            pytrace=False,
        )


@names
def test_shapes_match_onnxruntime(name):
    result = check.shapes(CASES[name])
    if not result.passed:
        pytest.fail(result.message(), pytrace=False)


@names
def test_matrix_flops_match_independent_count(name):
    problem = check.flop_problem(_report(name), CASES[name]["flops"]["matrix"])
    if problem:
        pytest.fail(problem, pytrace=False)


@pytest.mark.slow
def test_regenerating_reproduces_the_committed_graph(tmp_path):
    """The generator is deterministic: regenerating a cheap model gives the committed node list."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from tests.corpus import generate

    name = "ts_resnet"
    assert generate.main(["--out", str(tmp_path), "--only", name]) == 0
    fresh = onnx.load(tmp_path / f"{name}.onnx", load_external_data=False)
    committed = onnx.load(BY_NAME[name]["path"], load_external_data=False)

    def nodes(model):
        return [(n.domain, n.op_type, n.name, list(n.input), list(n.output)) for n in model.graph.node]

    assert nodes(fresh) == nodes(committed)
    assert [(t.name, list(t.dims), t.data_type) for t in fresh.graph.initializer] == [
        (t.name, list(t.dims), t.data_type) for t in committed.graph.initializer
    ]
