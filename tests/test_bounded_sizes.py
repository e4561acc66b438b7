"""Sizes the graph bounds (issue 34, shapes/bounds.py): a detector tail appended the way YOLO
deployment scripts write it — boxes and scores → NonMaxSuppression → the selected boxes gathered →
TopK of their scores at k = Min(kept, K) — is costed at the bound its constants fix, labelled
"at most" in every format; onnxruntime's run keeps no more than that bound. A size the graph does
not bound stays uncosted, with the flag that sizes it named."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnx_roofline import Sizing, analyze
from onnx_roofline.commands.cli import main
from onnx_roofline.model.status import OK

BOXES, CLASSES, PER_CLASS, K = 1000, 80, 10, 100
NMS_ROWS = 1 * CLASSES * min(PER_CLASS, BOXES)  # batch 1 × 80 classes × 10 boxes each at most = 800


def _constant(name: str, value) -> onnx.NodeProto:
    return helper.make_node(
        "Constant", [], [name], name=f"{name}_constant", value=numpy_helper.from_array(np.array(value), f"{name}_value")
    )


def detector_tail(per_class: int | None = PER_CLASS, k: int = K, first: int | None = None) -> onnx.ModelProto:
    """boxes [1, 1000, 4] and scores [1, 80, 1000] → NonMaxSuppression (max_output_boxes_per_class
    `per_class`, a graph input where None) → each selected box and score gathered → TopK of the
    scores at k = Min(kept, `k`) → the top boxes and classes. `first`: the selection cut to its
    first rows by a Slice to that constant length before anything reads it."""
    maximum = [_constant("max_out", np.array([per_class], np.int64))] if per_class is not None else []
    cut = (
        [
            _constant("starts", [0]),
            _constant("ends", [first]),
            helper.make_node("Slice", ["selected_all", "starts", "ends"], ["selected"], name="first_rows"),
        ]
        if first
        else []
    )
    nodes = [
        *maximum, _constant("iou", np.array([0.45], np.float32)), _constant("score_min", np.array([0.25], np.float32)),
        helper.make_node("NonMaxSuppression", ["boxes", "scores", "max_out", "iou", "score_min"], ["selected_all" if first else "selected"], name="nms"),
        *cut,
        _constant("box_column", np.array(2, np.int64)), _constant("class_column", np.array(1, np.int64)), _constant("batch_axis", [0]),
        helper.make_node("Gather", ["selected", "box_column"], ["box_index"], axis=1, name="box_index"),
        helper.make_node("Gather", ["selected", "class_column"], ["class_index"], axis=1, name="class_index"),
        helper.make_node("Squeeze", ["boxes", "batch_axis"], ["all_boxes"], name="squeeze"),
        helper.make_node("Gather", ["all_boxes", "box_index"], ["kept_boxes"], axis=0, name="kept_boxes"),
        helper.make_node("GatherND", ["scores", "selected"], ["kept_scores"], name="kept_scores"),
        helper.make_node("Shape", ["kept_scores"], ["kept"], name="kept"),
        _constant("k_max", np.array([k], np.int64)),
        helper.make_node("Min", ["kept", "k_max"], ["k"], name="k"),
        helper.make_node("TopK", ["kept_scores", "k"], ["top_scores", "top_index"], axis=0, name="topk"),
        helper.make_node("Gather", ["kept_boxes", "top_index"], ["top_boxes"], axis=0, name="top_boxes"),
        helper.make_node("Gather", ["class_index", "top_index"], ["top_classes"], axis=0, name="top_classes"),
    ]  # fmt: skip
    inputs = [
        helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [1, BOXES, 4]),
        helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, CLASSES, BOXES]),
    ]
    if per_class is None:
        inputs.append(helper.make_tensor_value_info("max_out", TensorProto.INT64, [1]))
    outputs = [
        helper.make_tensor_value_info(name, dtype, None)
        for name, dtype in (
            ("top_boxes", TensorProto.FLOAT),
            ("top_scores", TensorProto.FLOAT),
            ("top_classes", TensorProto.INT64),
        )
    ]
    return helper.make_model(
        helper.make_graph(nodes, "detector_tail", inputs, outputs), opset_imports=[helper.make_opsetid("", 17)]
    )


def detections(seed: int = 0, candidates: int = BOXES) -> dict[str, np.ndarray]:
    """Boxes spread over a 640-pixel image, 5 to 50 pixels a side, and uniform scores: most of
    each class's boxes pass the 0.25 score threshold and few overlap. `candidates`: only the first
    boxes score at all (the others 0), so a class keeps no more of them than that."""
    rng = np.random.default_rng(seed)
    corner = rng.uniform(0, 600, (1, BOXES, 2)).astype(np.float32)
    side = rng.uniform(5, 50, (1, BOXES, 2)).astype(np.float32)
    scores = rng.uniform(0, 1, (1, CLASSES, BOXES)).astype(np.float32)
    scores[:, :, candidates:] = 0
    return {"boxes": np.concatenate([corner, corner + side], axis=-1), "scores": scores}


def _run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """onnxruntime's outputs by name, NonMaxSuppression's selection among them."""
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    probe.graph.output.append(helper.make_tensor_value_info("selected", TensorProto.INT64, None))
    session = onnxruntime.InferenceSession(probe.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip([output.name for output in session.get_outputs()], session.run(None, feeds), strict=False))


def _node(report, name: str):
    return next(node for node in report.nodes if node.name == name)


@pytest.mark.parametrize("partial", [False, True])
def test_the_detector_tail_is_costed_at_the_bound_its_constants_fix(partial):
    report = analyze(detector_tail(), partial=partial)
    assert [node.name for node in report.nodes if node.status != OK] == []
    assert _node(report, "nms").outputs[0].shape == (NMS_ROWS, 3)  # (batch, class, box) per row
    assert _node(report, "kept_boxes").outputs[0].shape == (NMS_ROWS, 4)
    assert _node(report, "topk").outputs[0].shape == (min(NMS_ROWS, K),)  # k = Min(kept, 100) at the bound: 100
    assert _node(report, "top_boxes").outputs[0].shape == (K, 4)
    [bound] = report.model.bounds
    assert (bound.node, bound.rows) == ("nms", NMS_ROWS)
    downstream = {
        "nms",
        "box_index",
        "class_index",
        "kept_boxes",
        "kept_scores",
        "kept",
        "k",
        "topk",
        "top_boxes",
        "top_classes",
    }
    assert {
        node.name for node in report.nodes if node.at_most
    } == downstream  # the boxes' Squeeze and the constants are exact


def test_onnxruntime_keeps_no_more_than_the_bound():
    model = detector_tail()
    for seed, candidates in ((0, BOXES), (1, BOXES), (2, 6), (3, 1)):
        outputs = _run(model, detections(seed, candidates))
        kept = len(outputs["selected"])
        assert 0 < kept <= NMS_ROWS
        assert kept <= CLASSES * candidates  # fewer candidates, fewer rows: the bound is an upper one
        assert len(outputs["top_scores"]) == min(kept, K)  # TopK's k is min(kept, K) in the run too


def test_a_min_against_a_constant_above_the_bound_keeps_the_bound():
    report = analyze(detector_tail(k=1000))
    assert _node(report, "topk").outputs[0].shape == (min(NMS_ROWS, 1000),)  # 800: every kept row at most
    assert _node(report, "topk").at_most


def test_a_slice_to_a_constant_length_bounds_what_reads_it():
    model = detector_tail(first=50)
    report = analyze(model)
    assert [node.name for node in report.nodes if node.status != OK] == []
    assert _node(report, "first_rows").outputs[0].shape == (min(50, NMS_ROWS), 3)
    assert _node(report, "kept_boxes").outputs[0].shape == (50, 4) and _node(report, "kept_boxes").at_most
    assert _node(report, "topk").outputs[0].shape == (min(50, K),)
    assert len(_run(model, detections())["top_scores"]) <= 50


def test_a_maximum_that_is_data_bounds_nothing_and_stays_uncosted_loudly():
    report = analyze(detector_tail(per_class=None))
    assert [bound.node for bound in report.model.bounds] == [
        "topk"
    ]  # k = Min(kept, 100) still bounds TopK's own outputs
    assert _node(report, "nms").status != OK and _node(report, "top_boxes").status != OK
    assert report.uncosted.root_cause.name == "nms"
    assert "--value max_out" in report.uncosted.root_cause.reason


def test_a_bound_in_an_if_branch_is_labelled_there_and_on_the_if():
    """The tail as the then-branch of an If (detections or a fixed fallback): its rows, named by
    where they live, are at most, and so is the If whose outputs its bound sizes."""
    tail = detector_tail()
    detected = helper.make_graph(
        list(tail.graph.node), "detected", [], [helper.make_tensor_value_info("top_boxes", TensorProto.FLOAT, None)]
    )
    fallback = helper.make_graph(
        [helper.make_node("Identity", ["none"], ["no_boxes"])],
        "fallback",
        [],
        [helper.make_tensor_value_info("no_boxes", TensorProto.FLOAT, None)],
    )
    graph = helper.make_graph([helper.make_node("If", ["detect"], ["boxes_out"], then_branch=detected, else_branch=fallback, name="maybe")], "g",
                              [*tail.graph.input, helper.make_tensor_value_info("detect", TensorProto.BOOL, [])],
                              [helper.make_tensor_value_info("boxes_out", TensorProto.FLOAT, None)],
                              initializer=[numpy_helper.from_array(np.zeros((K, 4), np.float32), "none")])  # fmt: skip
    report = analyze(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), sizing=Sizing(values={"detect": 1})
    )
    assert [node.name for node in report.nodes if node.status != OK] == []
    assert _node(report, "maybe/then_branch/nms").outputs[0].shape == (NMS_ROWS, 3)
    marked = {node.name for node in report.nodes if node.at_most}
    assert {"maybe", "maybe/then_branch/nms", "maybe/then_branch/topk", "maybe/then_branch/top_boxes"} <= marked
    assert "maybe/then_branch/squeeze" not in marked


TOKENS, HIDDEN, FFN, FIRST, K_MAX = 16, 8, 12, 4, 3


def selected_rows() -> onnx.ModelProto:
    """The rows of x whose first feature is positive (NonZero: a count no analysis can know, and
    no constant bounds), then a Slice of the first 4 of them through a weight, and a TopK of
    their second feature at k = Min(selected, 3), doubled."""
    nodes = [
        helper.make_node("Gather", ["x", "first"], ["feature"], axis=1, name="feature"),  # [16]
        helper.make_node("Greater", ["feature", "zero"], ["mask"], name="mask"),
        helper.make_node("NonZero", ["mask"], ["where"], name="where"),  # [1, n]
        helper.make_node("Squeeze", ["where", "axis"], ["rows"], name="rows"),  # [n]
        helper.make_node("Slice", ["rows", "start", "length"], ["leading"], name="leading"),  # [min(n, 4)]
        helper.make_node("Gather", ["x", "leading"], ["picked"], axis=0, name="picked"),  # [≤ 4, 8]
        helper.make_node("MatMul", ["picked", "w"], ["y"], name="project"),  # [≤ 4, 12]
        helper.make_node("Gather", ["x", "second"], ["score_all"], axis=1, name="score_all"),  # [16]
        helper.make_node("Gather", ["score_all", "rows"], ["scores"], axis=0, name="scores"),  # [n]
        helper.make_node("Shape", ["scores"], ["selected"], name="selected"),
        helper.make_node("Min", ["selected", "k_max"], ["k"], name="k"),
        helper.make_node("TopK", ["scores", "k"], ["best", "best_index"], name="best"),  # [min(n, 3)]
        helper.make_node("Add", ["best", "best"], ["doubled"], name="doubled"),
    ]
    constants = {"first": np.array(0, np.int64), "second": np.array(1, np.int64), "zero": np.array(0, np.float32), "axis": np.array([0], np.int64),
                 "start": np.array([0], np.int64), "length": np.array([FIRST], np.int64), "k_max": np.array([K_MAX], np.int64),
                 "w": np.ones((HIDDEN, FFN), np.float32)}  # fmt: skip
    graph = helper.make_graph(nodes, "selected_rows", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [TOKENS, HIDDEN])],
                              [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in ("y", "doubled")],
                              initializer=[numpy_helper.from_array(value, name) for name, value in constants.items()])  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_slice_to_a_constant_length_and_a_min_against_a_constant_bound_a_count_that_is_data():
    report = analyze(selected_rows())
    # the NonZero keeps at most all its TOKENS elements; the Slice and the TopK then cut that to their constants
    assert {(bound.node, bound.rows) for bound in report.model.bounds} == {("where", TOKENS)}
    project, doubled = _node(report, "project"), _node(report, "doubled")
    assert project.at_most and project.cost.flops == 2 * FIRST * HIDDEN * FFN  # [≤ 4, 8] x [8, 12]
    assert doubled.at_most and doubled.outputs[0].shape == (K_MAX,)
    assert report.uncosted.count == 0
    session = onnxruntime.InferenceSession(selected_rows().SerializeToString(), providers=["CPUExecutionProvider"])
    for seed in range(3):
        x = np.random.default_rng(seed).standard_normal((TOKENS, HIDDEN)).astype(np.float32)
        y, best = session.run(["y", "doubled"], {"x": x})
        assert len(y) <= FIRST and len(best) <= K_MAX


def test_every_format_says_at_most(tmp_path, capsys):
    path = tmp_path / "tail.onnx"
    onnx.save(detector_tail(), path)
    assert main([str(path)]) == 0
    table = capsys.readouterr().out
    assert f"at most {NMS_ROWS}x3" in table and f"keeps at most {NMS_ROWS:,} rows" in table

    assert main([str(path), "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["model"]["bounds"][0]["rows"] == NMS_ROWS
    assert {node["name"] for node in document["nodes"] if node["at_most"]} >= {"nms", "topk"}

    assert main([str(path), "--format", "csv"]) == 0
    rows = {row["name"]: row for row in csv.DictReader(io.StringIO(capsys.readouterr().out))}
    assert rows["nms"]["at_most"] == "True" and rows["squeeze"]["at_most"] == "False"

    for form in ("html", "markdown"):
        assert main([str(path), "--format", form]) == 0
        assert f"at most {NMS_ROWS}x3" in capsys.readouterr().out

    annotated = tmp_path / "annotated.onnx"
    assert main([str(path), "--annotate", str(annotated), "-q"]) == 0
    written = onnx.load(annotated)
    nms = next(node for node in written.graph.node if node.name == "nms")
    assert {p.key: p.value for p in nms.metadata_props}["rl.at_most"] == "true" and "at most" in nms.doc_string
    kept = len(
        _run(written, detections(candidates=1))["top_scores"]
    )  # a bound is not declared as the size: a run that keeps fewer runs
    assert kept <= CLASSES
