"""A merged decoder (optimum's merge_decoders: one If on use_cache_branch, the with-past graph in
its then_branch) counted as the file it merges (issue 41): its header, table and JSON give one node
count, the main graph's If and the nodes of the branch taken, read from the file with onnx; and its
branch is constant-folded as a runtime folds a subgraph at load, so that deployed it launches
within 5 % of the kernels of the un-merged with-past file."""

from __future__ import annotations

import contextlib
import html
import io
import json
import re

import onnx
import pytest

from onnx_roofline.commands.cli import main
from tests.conftest import REPO

SHIPPED = REPO / "tests" / "corpus" / "shipped"
PAIRS = {  # merged file, its un-merged with-past counterpart (tests/corpus/optimum_merged.py)
    "llama": (
        SHIPPED / "optimum_llama_decoder_model_merged.onnx",
        SHIPPED / "optimum_llama_decoder_with_past_model.onnx",
    ),
    "gpt2": (SHIPPED / "optimum_gpt2_decoder_model_merged.onnx", SHIPPED / "optimum_gpt2_decoder_with_past_model.onnx"),
}
DIMS = [
    "--dim",
    "batch_size=1",
    "--dim",
    "sequence_length=1",
    "--dim",
    "past_sequence_length=511",
]  # a decode step: the cache branch


def run(*args: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main([*args, *DIMS, "-q"]) == 0
    return out.getvalue()


def taken_branch_nodes(path) -> tuple[int, int]:
    """(main graph nodes, nodes of the If's then_branch), from the file itself."""
    graph = onnx.load(path, load_external_data=False).graph
    (node,) = [n for n in graph.node if n.op_type == "If"]
    then = next(a.g for a in node.attribute if a.name == "then_branch")
    return len(graph.node), len(then.node)


@pytest.mark.parametrize("name", PAIRS)
def test_header_table_and_json_give_one_node_count(name, tmp_path):
    merged, _ = PAIRS[name]
    if not merged.exists():
        pytest.skip("corpus file not generated")
    main_graph, branch = taken_branch_nodes(merged)
    count = main_graph + branch  # the If, then the rows of the branch a decode step takes
    data = json.loads(run(str(merged), "--format", "json"))
    assert data["model"]["node_count"] == len(data["nodes"]) == count
    assert data["model"]["main_graph_nodes"] == main_graph == 1
    assert f"({count} nodes (1 in the main graph)," in run(str(merged)).splitlines()[0]  # the terminal's model line
    run(str(merged), "--format", "html", "-o", str(tmp_path / "r.html"))
    sub = re.search(r'<p class="sub">(.*?)</p>', (tmp_path / "r.html").read_text()).group(1)
    assert html.unescape(sub).endswith(f" · {count} nodes (1 in the main graph)")
    markdown = run(str(merged), "--format", "markdown")
    assert re.search(rf"\| {count} \|\s*$", markdown, re.M)  # the headline table's nodes cell


@pytest.mark.parametrize("name", PAIRS)
def test_the_branch_taken_folds_as_the_unmerged_file(name):
    merged, unmerged = PAIRS[name]
    if not (merged.exists() and unmerged.exists()):
        pytest.skip("corpus files not generated")
    merged_data, unmerged_data = (json.loads(run(str(p), "--format", "json")) for p in (merged, unmerged))
    folded = [sum(n["constant_foldable"] for n in d["nodes"]) for d in (merged_data, unmerged_data)]
    assert folded[0] == folded[1] > 0  # the same nodes fold at load, inside the branch or not
    kernels = [d["views"]["deployed"]["kernels"] for d in (merged_data, unmerged_data)]
    assert abs(kernels[0] - kernels[1]) <= 0.05 * kernels[1], kernels


@pytest.mark.parametrize("name", PAIRS)
def test_the_branch_taken_is_typed_once(name, monkeypatch):
    """The shape engine types the If's outputs from the branch the cache flag takes at the bound
    dims (then_branch: the pasts are not empty), and the walk costs that branch from the same
    typing (model/memo.py): ONNX's inference of a body runs once per analysis, not once for the
    engine and once for the walk, nor for the branch not taken (issue 44)."""
    from onnx_roofline.shapes import engine

    merged, _ = PAIRS[name]
    if not merged.exists():
        pytest.skip("corpus file not generated")
    typed = []
    real = engine._infer_scratch
    monkeypatch.setattr(engine, "_infer_scratch", lambda graph, *args: typed.append(graph.name) or real(graph, *args))
    run(str(merged))
    then_branch = next(a.g for n in onnx.load(merged, load_external_data=False).graph.node if n.op_type == "If"
                       for a in n.attribute if a.name == "then_branch")  # fmt: skip
    assert typed == [then_branch.name]


@pytest.mark.parametrize("name", PAIRS)
def test_the_merged_file_is_inferred_once_checked(name, monkeypatch):
    """The file's one ONNX inference is the shape engine's checked first pass, without data
    propagation (with it, ONNX errs on the names the two branches share): conformance runs onnx's
    checker without its own strict inference, and the engine no lenient pass after it, since
    only the If is left to type and its branch is typed on its own (issue 44: three passes over
    both branches before, at 2.4x the time of the with-past file)."""
    import onnx.checker

    from onnx_roofline.model.inferred import CHECKED
    from onnx_roofline.shapes import engine

    merged, _ = PAIRS[name]
    if not merged.exists():
        pytest.skip("corpus file not generated")
    inferred, checked = [], []
    real_inference, real_check = engine.inferred_types, onnx.checker.check_model

    def inference(model, *mode):
        if any(node.op_type == "If" for node in model.graph.node):  # the file, not a branch typed alone
            inferred.append(mode)
        return real_inference(model, *mode)

    def check(model, full_check=False, *args, **kwargs):
        checked.append(full_check)
        return real_check(model, full_check, *args, **kwargs)

    monkeypatch.setattr(engine, "inferred_types", inference)
    monkeypatch.setattr(onnx.checker, "check_model", check)
    run(str(merged))
    assert inferred == [(CHECKED,)]
    assert checked == [False]
