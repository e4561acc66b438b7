"""verify checks what it ran (issue 34, commands/verify/sizes.py): a node whose size is data (a
NonZero, an NMS's selection, an MoE's per-expert tokens) is checked at the size the run produced,
and the report says what the analysis had against what the run found; the verdict is PASS only
where every node was checked, and --strict fails the others."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from onnx_roofline.commands.cli import main
from onnx_roofline.commands.verify import verify
from onnx_roofline.commands.verify.inputs import make_feeds
from onnx_roofline.errors import EXIT_FAIL, EXIT_OK
from tests.test_bounded_sizes import (
    FFN,
    FIRST,
    HIDDEN,
    NMS_ROWS,
    TOKENS,
    detector_tail,
    selected_rows,
)

MOE = Path(__file__).parent / "corpus" / "moe" / "optimum_qwen3_moe_decoder_with_past_model.onnx"


def test_a_nonzero_is_checked_at_the_count_the_run_selected():
    model = selected_rows()
    result = verify(model)
    feeds = make_feeds(model, {}, None, 0)  # the inputs verify runs on (seed 0)
    kept = int(np.count_nonzero(feeds["x"][:, 0] > 0))  # the rows whose first feature is positive
    assert result.unchecked == () and result.verdict == "pass"
    found = {size.node: (size.analysis, size.run) for size in result.sizes}
    assert found["where"] == (
        f"at most 1x{TOKENS}",
        (1, kept),
    )  # the NonZero at most all its elements (bounds.selection_bound)
    assert set(found) <= {
        "where",
        "leading",
        "best",
    }  # the Slice and TopK cut to their constants: listed where the run differs
    project = next(node for node in result.report.nodes if node.name == "project")
    assert (
        project.cost.flops == 2 * min(kept, FIRST) * HIDDEN * FFN
    )  # checked at the run's rows: [min(kept, 4), 8] x [8, 12]


def test_the_sizes_the_run_found_are_printed(tmp_path, capsys):
    path = tmp_path / "tail.onnx"
    onnx.save(detector_tail(), path)
    assert main(["verify", str(path), "--format", "json"]) == EXIT_OK
    document = json.loads(capsys.readouterr().out)
    [size] = document["data_dependent"]
    assert size["node"] == "nms" and size["analysis"] == f"at most {NMS_ROWS}x3"
    assert size["run"][0] <= NMS_ROWS and document["unchecked"] == [] and document["verdict"] == "pass"
    assert main(["verify", str(path)]) == EXIT_OK
    text = capsys.readouterr().out
    assert f"nms (NonMaxSuppression) selected: analysis at most {NMS_ROWS}x3, run {size['run'][0]}x3" in text
    assert text.endswith("verdict: PASS\n")


def as_labels() -> onnx.ModelProto:
    """A ZipMap to string labels: a map with string keys, which has no static byte size (a string
    tensor has one at the length assumed; a map's string keys do not), so the analysis cannot cost it."""
    nodes = [
        helper.make_node("Relu", ["x"], ["positive"], name="relu"),
        helper.make_node(
            "ZipMap", ["positive"], ["labelled"], name="to_labels", domain="ai.onnx.ml", classlabels_strings=["a", "b"]
        ),
    ]
    entry = helper.make_map_type_proto(TensorProto.STRING, helper.make_tensor_type_proto(TensorProto.FLOAT, []))
    graph = helper.make_graph(
        nodes,
        "as_labels",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
        [helper.make_value_info("labelled", helper.make_sequence_type_proto(entry))],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 1)])


def test_an_unchecked_node_is_named_not_a_bare_pass_and_strict_fails_it(tmp_path, capsys):
    path = tmp_path / "as_labels.onnx"
    onnx.save(as_labels(), path)
    assert main(["verify", str(path)]) == EXIT_OK
    verdict = capsys.readouterr().out.splitlines()[-1]
    assert verdict == "verdict: INCOMPLETE: 1 of 2 nodes not checked (to_labels); --strict fails them"
    assert main(["verify", str(path), "--strict"]) == EXIT_FAIL
    assert capsys.readouterr().out.splitlines()[-1] == "verdict: FAIL: 1 of 2 nodes not checked (to_labels)"
    assert main(["verify", str(path), "--strict", "--format", "json"]) == EXIT_FAIL
    document = json.loads(capsys.readouterr().out)
    assert document["verdict"] == "fail" and [node["name"] for node in document["unchecked"]] == ["to_labels"]


@pytest.mark.skipif(not MOE.exists(), reason="the MoE corpus (tests/corpus/optimum_moe.py) is not generated")
def test_an_moe_is_checked_at_the_tokens_each_expert_took():
    """optimum's Qwen3-MoE, 2 layers of 4 experts, top-2, 8 new tokens: each expert's NonZero is
    checked at the tokens the run routed to it, which the analysis assumed uniform."""
    result = verify(MOE, dims={"batch_size": 1, "sequence_length": 8, "past_sequence_length": 24})
    assert result.unchecked == () and result.verdict == "pass", result.comparison.disagreements
    assert len(result.sizes) == 2 * 4  # one NonZero per expert and layer
    assert {size.analysis for size in result.sizes} == {
        f"2x{8 * 2 // 4} assumed"
    }  # uniform: tokens·k/E = 8·2/4 rows each
    for layer in ("layers.0", "layers.1"):
        taken = [size.run[1] for size in result.sizes if f"/{layer}/" in size.node]
        assert sum(taken) == 8 * 2  # every token goes to top-2 distinct experts: 16 (token, expert) pairs per layer
