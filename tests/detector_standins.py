"""Detectors as torchvision builds and exports them, for the tests of issue 42 (tests/test_detectors.py).

torchvision's wheel does not load its C++ ops against every torch build (here: "operator
torchvision::nms does not exist"), so its two ops the detectors call, nms and roi_align, have
stand-ins: registered as custom ops and given the ONNX symbolics torchvision registers for them
(torchvision/ops/_register_onnx_ops.py: NonMaxSuppression with max_output_boxes_per_class =
sys.maxsize, RoiAlign with the batch indices split off the rois). The detectors' post-processing is
torchvision's own code, as written there (torchvision/ops/boxes.py, models/detection/_utils.py,
roi_heads.py, retinanet.py): the scripted `_batched_nms_coordinate_trick` (an If whose else branch
holds the NMS), `_topk_min` (TopK at Min(k, the axis)), `keep[:detections_per_img]`, RetinaNet's
score threshold (a NonZero) and Mask R-CNN's scripted `_onnx_paste_masks_in_image_loop` (a Loop
over the detections). Backbones and heads are small, weights random (torch.manual_seed)."""

from __future__ import annotations

import sys

import torch
import torch.nn.functional as F
from torch import nn
from torch.onnx import register_custom_op_symbolic
from torch.onnx import symbolic_opset11 as opset11
from torch.onnx.symbolic_helper import parse_args

_LIBRARY = torch.library.Library("standin", "DEF")
_LIBRARY.define("nms(Tensor boxes, Tensor scores, float iou_threshold) -> Tensor")
_LIBRARY.define("roi_align(Tensor input, Tensor rois, float spatial_scale, int pooled_height, int pooled_width, "
                "int sampling_ratio, bool aligned) -> Tensor")  # fmt: skip


def _nms(boxes: torch.Tensor, scores: torch.Tensor, iou_threshold: float) -> torch.Tensor:
    """Greedy NMS: the indices of the boxes kept, by decreasing score (what torchvision's kernel returns)."""
    order = scores.argsort(descending=True)
    area = (boxes[:, 2] - boxes[:, 0]).clamp(min=0) * (boxes[:, 3] - boxes[:, 1]).clamp(min=0)
    suppressed = torch.zeros(len(order), dtype=torch.bool)
    keep = []
    for rank, index in enumerate(order.tolist()):
        if suppressed[rank]:
            continue
        keep.append(index)
        rest = order[rank + 1 :]
        overlap = (
            (torch.min(boxes[index, 2:], boxes[rest, 2:]) - torch.max(boxes[index, :2], boxes[rest, :2]))
            .clamp(min=0)
            .prod(1)
        )
        suppressed[rank + 1 :] |= overlap / (area[index] + area[rest] - overlap) > iou_threshold
    return torch.tensor(keep, dtype=torch.int64)


def _roi_align(features, rois, spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned):
    """The pooled shape (the values are not what a trace records)."""
    return torch.zeros(rois.shape[0], features.shape[1], pooled_height, pooled_width, dtype=features.dtype)


_LIBRARY.impl("nms", _nms, "CPU")
_LIBRARY.impl("roi_align", _roi_align, "CPU")


@parse_args("v", "v", "f")
def _nms_symbolic(g, boxes, scores, iou_threshold):
    """torchvision's symbolic_multi_label_nms."""
    boxes = opset11.unsqueeze(g, boxes, 0)
    scores = opset11.unsqueeze(g, opset11.unsqueeze(g, scores, 0), 0)
    max_output_per_class = g.op("Constant", value_t=torch.tensor([sys.maxsize], dtype=torch.long))
    iou_threshold = g.op("Constant", value_t=torch.tensor([iou_threshold], dtype=torch.float))
    selected = g.op(
        "NonMaxSuppression",
        g.op("Cast", boxes, to_i=1),
        g.op("Cast", scores, to_i=1),
        max_output_per_class,
        iou_threshold,
    )
    return opset11.squeeze(
        g, opset11.select(g, selected, 1, g.op("Constant", value_t=torch.tensor([2], dtype=torch.long))), 1
    )


@parse_args("v", "v", "f", "i", "i", "i", "i")
def _roi_align_symbolic(g, features, rois, spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned):
    """torchvision's roi_align_opset16."""
    indices = opset11.squeeze(
        g, opset11.select(g, rois, 1, g.op("Constant", value_t=torch.tensor([0], dtype=torch.long))), 1
    )
    boxes = opset11.select(g, rois, 1, g.op("Constant", value_t=torch.tensor([1, 2, 3, 4], dtype=torch.long)))
    return g.op("RoiAlign", features, boxes, g.op("Cast", indices, to_i=7),
                coordinate_transformation_mode_s="half_pixel" if aligned else "output_half_pixel",
                spatial_scale_f=spatial_scale, output_height_i=pooled_height, output_width_i=pooled_width,
                sampling_ratio_i=sampling_ratio)  # fmt: skip


register_custom_op_symbolic("standin::nms", _nms_symbolic, 11)
register_custom_op_symbolic("standin::roi_align", _roi_align_symbolic, 16)


# --- torchvision's post-processing, as written there ----------------------------------------------


@torch.jit._script_if_tracing
def batched_nms(boxes: torch.Tensor, scores: torch.Tensor, idxs: torch.Tensor, iou_threshold: float) -> torch.Tensor:
    """torchvision.ops.boxes._batched_nms_coordinate_trick."""
    if boxes.numel() == 0:
        return torch.empty((0,), dtype=torch.int64, device=boxes.device)
    max_coordinate = boxes.max()
    offsets = idxs.to(boxes) * (max_coordinate + torch.tensor(1).to(boxes))
    boxes_for_nms = boxes + offsets[:, None]
    return torch.ops.standin.nms(boxes_for_nms, scores, iou_threshold)


def clip_boxes_to_image(boxes: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """torchvision.ops.boxes.clip_boxes_to_image as it traces (a Max with 0, a Min with the side)."""
    boxes_x, boxes_y = boxes[..., 0::2], boxes[..., 1::2]
    height, width = size
    zero = torch.tensor(0, dtype=boxes.dtype)
    boxes_x = torch.min(torch.max(boxes_x, zero), torch.as_tensor(width, dtype=boxes.dtype))
    boxes_y = torch.min(torch.max(boxes_y, zero), torch.as_tensor(height, dtype=boxes.dtype))
    return torch.stack((boxes_x, boxes_y), dim=boxes.dim()).reshape(boxes.shape)


def topk_min(x: torch.Tensor, k: int, axis: int) -> torch.Tensor:
    """torchvision.models.detection._utils._topk_min: k, or the axis' size where smaller (traced: a Min)."""
    axis_dim_val = torch._shape_as_tensor(x)[axis].unsqueeze(0)
    return torch.min(torch.cat((torch.tensor([k], dtype=axis_dim_val.dtype), axis_dim_val), 0))


def _onnx_paste_mask_in_image(mask, box, im_h, im_w):
    """torchvision.models.detection.roi_heads._onnx_paste_mask_in_image."""
    one = torch.ones(1, dtype=torch.int64)
    zero = torch.zeros(1, dtype=torch.int64)
    w = box[2] - box[0] + one
    h = box[3] - box[1] + one
    w = torch.max(torch.cat((w, one)))
    h = torch.max(torch.cat((h, one)))
    mask = mask.expand((1, 1, mask.size(0), mask.size(1)))
    mask = F.interpolate(mask, size=(int(h), int(w)), mode="bilinear", align_corners=False)
    mask = mask[0][0]
    x_0 = torch.max(torch.cat((box[0].unsqueeze(0), zero)))
    x_1 = torch.min(torch.cat((box[2].unsqueeze(0) + one, im_w.unsqueeze(0))))
    y_0 = torch.max(torch.cat((box[1].unsqueeze(0), zero)))
    y_1 = torch.min(torch.cat((box[3].unsqueeze(0) + one, im_h.unsqueeze(0))))
    unpaded_im_mask = mask[(y_0 - box[1]) : (y_1 - box[1]), (x_0 - box[0]) : (x_1 - box[0])]
    zeros_y0 = torch.zeros(y_0, unpaded_im_mask.size(1))
    zeros_y1 = torch.zeros(im_h - y_1, unpaded_im_mask.size(1))
    concat_0 = torch.cat((zeros_y0, unpaded_im_mask.to(dtype=torch.float32), zeros_y1), 0)[0:im_h, :]
    zeros_x0 = torch.zeros(concat_0.size(0), x_0)
    zeros_x1 = torch.zeros(concat_0.size(0), im_w - x_1)
    return torch.cat((zeros_x0, concat_0, zeros_x1), 1)[:, :im_w]


@torch.jit._script_if_tracing
def paste_masks_loop(masks, boxes, im_h, im_w):
    """torchvision.models.detection.roi_heads._onnx_paste_masks_in_image_loop."""
    res_append = torch.zeros(0, im_h, im_w)
    for i in range(masks.size(0)):
        mask_res = _onnx_paste_mask_in_image(masks[i][0], boxes[i], im_h, im_w)
        mask_res = mask_res.unsqueeze(0)
        res_append = torch.cat((res_append, mask_res))
    return res_append


# --- the detectors -----------------------------------------------------------------------------------


class FasterRCNN(nn.Module):
    """A two-stage detector shaped like torchvision's: a stride-4 backbone, an RPN keeping the top
    `pre_nms` proposals (_topk_min) through NMS, the first `detections` of them pooled by
    RoiAlign (7×7) into a box head, then per-class NMS and `detections_per_img`."""

    def __init__(self, classes: int = 5, pre_nms: int = 300, detections: int = 50, channels: int = 32):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.ReLU(), nn.Conv2d(16, channels, 3, 2, 1), nn.ReLU())
        self.objectness, self.deltas = nn.Conv2d(channels, 3, 1), nn.Conv2d(channels, 12, 1)  # 3 anchors a position
        self.box_head = nn.Sequential(nn.Flatten(), nn.Linear(channels * 7 * 7, 64), nn.ReLU())
        self.cls = nn.Linear(64, classes)
        self.classes, self.pre_nms, self.detections = classes, pre_nms, detections

    def detect(self, image: torch.Tensor):
        features = self.backbone(image)
        objectness = self.objectness(features).reshape(image.shape[0], -1)
        corners = torch.sigmoid(self.deltas(features).reshape(image.shape[0], -1, 4)[0]) * image.shape[-1]
        boxes = torch.cat([corners[:, :2], corners[:, :2] + corners[:, 2:] + 1], 1)
        scores, order = torch.topk(objectness[0], topk_min(objectness, self.pre_nms, 1))
        boxes = boxes[order]
        proposals = boxes[
            batched_nms(boxes, scores, torch.zeros_like(scores, dtype=torch.int64), 0.7)[: self.detections]
        ]
        rois = torch.cat([torch.zeros_like(proposals[:, :1]), proposals], 1)
        pooled = torch.ops.standin.roi_align(features, rois, 0.25, 7, 7, 2, False)
        scores = F.softmax(self.cls(self.box_head(pooled)), -1)[:, 1:]  # the background class dropped
        labels = torch.arange(1, self.classes).expand_as(scores).reshape(-1)
        boxes = proposals[:, None, :].expand(-1, self.classes - 1, 4).reshape(-1, 4)
        boxes = clip_boxes_to_image(boxes, image.shape[-2:])  # postprocess_detections clips them to the image
        keep = batched_nms(boxes, scores.reshape(-1), labels, 0.5)[: self.detections]
        return features, boxes[keep], scores.reshape(-1)[keep], labels[keep]

    def forward(self, image: torch.Tensor):
        return self.detect(image)[1:]


class MaskRCNN(FasterRCNN):
    """Faster R-CNN with torchvision's mask branch: RoiAlign (14×14) of the detections, a mask head
    (conv, transposed conv, a mask per class), the label's mask pasted into the image by the loop."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        channels = self.box_head[1].in_features // 49
        self.mask_head = nn.Sequential(nn.Conv2d(channels, channels, 3, padding=1), nn.ReLU(),
                                       nn.ConvTranspose2d(channels, channels, 2, 2),
                                       nn.ReLU(), nn.Conv2d(channels, self.classes, 1))  # fmt: skip

    def forward(self, image: torch.Tensor):
        features, boxes, scores, labels = self.detect(image)
        rois = torch.cat([torch.zeros_like(boxes[:, :1]), boxes], 1)
        masks = self.mask_head(torch.ops.standin.roi_align(features, rois, 0.25, 14, 14, 2, False)).sigmoid()
        masks = masks[torch.arange(masks.shape[0]), labels][:, None]
        height = torch.scalar_tensor(image.shape[-2], dtype=torch.int64)
        width = torch.scalar_tensor(image.shape[-1], dtype=torch.int64)
        return boxes, scores, labels, paste_masks_loop(masks, boxes.to(torch.int64), height, width)[:, None]


class RetinaNet(nn.Module):
    """A one-stage detector with torchvision's RetinaNet.postprocess_detections over two levels:
    scores above `score_thresh` (a NonZero), the top `topk_candidates` of them a level
    (_topk_min), then batched NMS and `detections_per_img`."""

    def __init__(self, classes: int = 4, topk_candidates: int = 100, detections: int = 50, score_thresh: float = 0.05):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.ReLU())
        self.levels = nn.ModuleList(
            [nn.Sequential(nn.Conv2d(16, 32, 3, 2, 1), nn.ReLU()), nn.Sequential(nn.Conv2d(32, 32, 3, 2, 1), nn.ReLU())]
        )
        self.cls, self.reg = (
            nn.Conv2d(32, 3 * classes, 3, padding=1),
            nn.Conv2d(32, 3 * 4, 3, padding=1),
        )  # 3 anchors a position
        self.classes, self.topk_candidates, self.detections, self.score_thresh = (
            classes,
            topk_candidates,
            detections,
            score_thresh,
        )

    def forward(self, image: torch.Tensor):
        features = self.stem(image)
        height, width = image.shape[-2], image.shape[-1]
        image_boxes, image_scores, image_labels = [], [], []
        for level in self.levels:
            features = level(features)
            logits = self.cls(features).permute(0, 2, 3, 1).reshape(-1, self.classes)
            corners = torch.sigmoid(self.reg(features).permute(0, 2, 3, 1).reshape(-1, 4)) * 32
            num_classes = logits.shape[-1]
            scores_per_level = torch.sigmoid(logits).flatten()
            keep_idxs = scores_per_level > self.score_thresh
            scores_per_level = scores_per_level[keep_idxs]
            topk_idxs = torch.where(keep_idxs)[0]
            scores_per_level, idxs = scores_per_level.topk(topk_min(topk_idxs, self.topk_candidates, 0))
            topk_idxs = topk_idxs[idxs]
            anchor_idxs = torch.div(topk_idxs, num_classes, rounding_mode="floor")
            boxes = corners[anchor_idxs]
            boxes = torch.cat([boxes[:, :2], boxes[:, :2] + boxes[:, 2:]], 1)
            boxes = torch.stack([boxes[:, 0].clamp(0, width), boxes[:, 1].clamp(0, height), boxes[:, 2].clamp(0, width),
                                 boxes[:, 3].clamp(0, height)], 1)  # fmt: skip
            image_boxes.append(boxes)
            image_scores.append(scores_per_level)
            image_labels.append(topk_idxs % num_classes)
        boxes, scores, labels = torch.cat(image_boxes), torch.cat(image_scores), torch.cat(image_labels)
        keep = batched_nms(boxes, scores, labels, 0.5)[: self.detections]
        return boxes[keep], scores[keep], labels[keep]


def export(kind: type[nn.Module], path, outputs: tuple[str, ...]) -> str:
    """A `kind` with random weights (seed 0), exported by TorchScript at opset 17 with a dynamic image size."""
    torch.manual_seed(0)
    module = kind().eval()
    torch.onnx.export(module, (torch.rand(1, 3, 64, 64),), str(path), input_names=["image"], output_names=list(outputs),
                      dynamic_axes={"image": {2: "height", 3: "width"}}, opset_version=17, dynamo=False)  # fmt: skip
    return str(path)
