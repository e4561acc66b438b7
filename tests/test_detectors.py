"""torchvision detectors (issue 42): Faster R-CNN, RetinaNet and Mask R-CNN as torchvision builds and
exports them (tests/detector_standins.py: torchvision's post-processing as written there, its two C++
ops stand-ins with torchvision's ONNX symbolics). Their NMS tails sit in the If that torchvision's
scripted batched NMS becomes; the plain command costs every node at the bounds the graph states
(the proposals kept, detections per image, a pasted mask at most the image), and verify checks the
NMS in the If branch and the paste loop's body at the sizes its run had. Every bound below is the detector's arithmetic, written out."""

from __future__ import annotations

import time

import onnx
import pytest

pytest.importorskip("torch")

from onnx_roofline import (
    Sizing,
    analyze,  # noqa: E402
)
from onnx_roofline.commands.cli import main  # noqa: E402
from onnx_roofline.commands.verify import verify  # noqa: E402
from onnx_roofline.commands.verify.inputs import make_feeds  # noqa: E402
from onnx_roofline.errors import EXIT_OK  # noqa: E402
from tests import detector_standins as standins  # noqa: E402

SIDE = 224  # the plain command's default image side (docs/defaults.md)
RUN = {"height": 64, "width": 64}  # verify's sizes: a run in a second
CHANNELS, CLASSES, PRE_NMS, DETECTIONS = 32, 5, 300, 50  # FasterRCNN's defaults
RETINA_CLASSES, TOPK = 4, 100  # RetinaNet's defaults


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    folder = tmp_path_factory.mktemp("detectors")
    return {
        "faster": standins.export(standins.FasterRCNN, folder / "faster_rcnn.onnx", ("boxes", "scores", "labels")),
        "retina": standins.export(standins.RetinaNet, folder / "retinanet.onnx", ("boxes", "scores", "labels")),
        "mask": standins.export(standins.MaskRCNN, folder / "mask_rcnn.onnx", ("boxes", "scores", "labels", "masks")),
    }


def _bounds(report) -> list[int]:
    return sorted(bound.rows for bound in report.model.bounds if bound.op_type == "NonMaxSuppression")


def test_faster_rcnn_is_costed_whole_at_the_bounds_its_graph_states(exported):
    report = analyze(exported["faster"], sizing=Sizing(default_dims=True))
    assert report.model.dims == {"height": SIDE, "width": SIDE}
    assert report.uncosted.count == 0 and not report.unsupported
    anchors = 3 * (SIDE // 4) ** 2  # 3 anchors at each position of the stride-4 map: 9,408
    first = min(
        PRE_NMS, anchors
    )  # _topk_min: the RPN's top 300, all kept at most (max_output_boxes_per_class = sys.maxsize)
    second = DETECTIONS * (CLASSES - 1)  # the 50 proposals kept, a box for each class but the background: 200
    assert _bounds(report) == sorted([first, second])
    pooled = next(node for node in report.nodes if node.op_type == "RoiAlign")
    assert pooled.outputs[0].shape == (DETECTIONS, CHANNELS, 7, 7) and pooled.at_most  # keep[:detections_per_img]
    head = next(
        node for node in report.nodes if node.op_type == "Gemm" and node.inputs[0].shape == (DETECTIONS, CHANNELS * 49)
    )
    assert (
        head.cost.flops == 2 * DETECTIONS * CHANNELS * 49 * 64 + DETECTIONS * 64
    )  # the box head's matmul and bias, 50 rows at most
    assert all(
        node.scope.startswith("If_") for node in report.nodes if node.op_type == "NonMaxSuppression"
    )  # the NMS tails in the If


def test_faster_rcnn_verifies_the_nms_in_its_if_at_the_run_size(exported):
    import onnxruntime as ort

    result = verify(exported["faster"], dims=RUN)
    assert result.verdict == "pass" and not result.comparison.disagreements
    kept = {size.node: size.run for size in result.sizes if size.op_type == "NonMaxSuppression"}
    assert len(kept) == 2 and all(node.startswith("If_") for node in kept)
    session = ort.InferenceSession(exported["faster"], providers=["CPUExecutionProvider"])
    boxes = session.run(None, make_feeds(onnx.load(exported["faster"]), RUN, None, 0))[
        0
    ]  # the inputs verify ran on (seed 0)
    second = max(kept.items())[1][0]  # the per-class NMS is the later If
    assert boxes.shape == (min(DETECTIONS, second), 4)  # keep[:50] of what the run's NMS kept


def test_retinanet_is_costed_whole_and_verified(exported, capsys):
    report = analyze(exported["retina"], sizing=Sizing(default_dims=True))
    assert report.uncosted.count == 0 and not report.unsupported
    levels = [3 * RETINA_CLASSES * (SIDE // stride) ** 2 for stride in (4, 8)]  # scores a level: 37,632 and 9,408
    selections = sorted(bound.rows for bound in report.model.bounds if bound.op_type == "NonZero")
    assert selections == sorted(
        levels * 2
    )  # the boolean index and torch.where: every score above the threshold, at most
    assert _bounds(report) == [sum(min(TOPK, scores) for scores in levels)]  # _topk_min per level: 100 + 100
    assert main(["verify", exported["retina"], "--dim", "height=64", "--dim", "width=64"]) == EXIT_OK
    assert "verdict: PASS" in capsys.readouterr().out


def test_mask_rcnn_pastes_its_masks_at_the_bounds_the_image_sets(exported):
    """torchvision's paste loop (_onnx_paste_masks_in_image_loop): each trip resizes a mask to its
    box and pads it to the image. The box is clipped to the image (clip_boxes_to_image: x in
    [0, W], y in [0, H]), so every size in the body is at most the image's, + 1 for a box's width."""
    report = analyze(exported["mask"], sizing=Sizing(default_dims=True))
    assert report.uncosted.count == 0 and not report.unsupported
    (loop,) = [node for node in report.nodes if node.op_type == "Loop"]
    assert loop.outputs[0].shape == (DETECTIONS, SIDE, SIDE) and loop.at_most  # a mask a detection, at most 50
    body_rows = [node for node in report.nodes if node.scope == f"{loop.name}/body"]
    body = {node.op_type: node for node in body_rows}
    resized = body["Resize"]
    box = SIDE - 0 + 1  # x2 − x1 + 1 of a box clipped to [0, SIDE]: the most a box spans
    assert resized.outputs[0].shape == (1, 1, box, box) and resized.at_most and resized.trips == DETECTIONS
    assert resized.cost.flops == DETECTIONS * 8 * box * box  # bilinear: 2 taps an axis, 2 FLOPs a tap, each trip
    padded = {bound.output for bound in report.model.bounds if bound.op_type == "ConstantOfShape"}
    pads = sorted(node.outputs[0].shape for node in body_rows if node.outputs[0].name in padded)
    assert pads == sorted(
        [
            (SIDE, box),  # the rows above the box, y0 = max(y1, 0) ≤ SIDE, as wide as the pasted mask
            (SIDE - 1, box),  # the rows below it, H − y1 with y1 = min(y2 + 1, H) ≥ 1
            (SIDE, SIDE),  # the columns left of it, x0 ≤ W, as tall as the image
            (SIDE, SIDE - 1),  # the columns right of it, W − x1, x1 ≥ 1
        ]
    )
    cuts = [node for node in body_rows if node.op_type == "Slice" and node.inputs[0].shape == (box, box)]
    cut = [node.outputs[0].shape for node in cuts]
    assert cut == [(box, box)] * 2  # its rows, then its columns inside the image: at most the mask cut from


def test_mask_rcnn_verifies_within_a_minute(exported, capsys):
    report = analyze(exported["mask"], sizing=Sizing(default_dims=True))
    assert _bounds(report) == sorted([min(PRE_NMS, 3 * (SIDE // 4) ** 2), DETECTIONS * (CLASSES - 1)])
    masks = next(node for node in report.nodes if node.op_type == "ConvTranspose")
    assert masks.outputs[0].shape == (DETECTIONS, CHANNELS, 28, 28) and masks.at_most  # 14×14 pooled, doubled
    start = time.perf_counter()
    assert main(["verify", exported["mask"], "--dim", "height=64", "--dim", "width=64"]) == EXIT_OK
    assert time.perf_counter() - start < 60
    out = capsys.readouterr().out
    assert "disagreements: 0" in out and "NonMaxSuppression" in out
    assert out.splitlines()[-1] == "verdict: PASS"  # the paste loop's rows checked at its first trip's sizes
    assert "Loop_" in out and "(Resize) mask.3: analysis at most 1x1x65x65" in out  # a box of a 64 image: 65 wide
