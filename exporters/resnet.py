"""ResNet-50 (v1.5, torchvision layout) in plain torch, with seeded random weights, and its export.

torchvision is not a dependency, so the architecture is written out here (~60 lines).  Module
names follow torchvision (``conv1, bn1, layer1..layer4, fc``; blocks ``layer2.0.conv2`` ...) so the
lesson's "conv3_x 3x3 convolution" is found by name: it is ``layer2.<i>.conv2``.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from exporters.randomize import randomize_
from exporters.torch_export import export_module

RESNET50_PARAMS = 25_557_032  # torchvision.models.resnet50: 25.6 M
IMAGE = (3, 224, 224)


class Bottleneck(nn.Module):
    """1x1 reduce -> 3x3 (carries the stride, "v1.5") -> 1x1 expand, plus the shortcut."""

    expansion = 4

    def __init__(self, inplanes: int, planes: int, stride: int = 1):
        super().__init__()
        out = planes * self.expansion
        self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out)
        self.relu = nn.ReLU()
        self.downsample = None
        if stride != 1 or inplanes != out:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, out, 1, stride=stride, bias=False), nn.BatchNorm2d(out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return self.relu(y + identity)


class ResNet50(nn.Module):
    """Stem, four stages of [3, 4, 6, 3] bottlenecks (conv2_x..conv5_x), global pool, classifier."""

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU()
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        inplanes = 64
        stages = []
        for planes, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            layers = [Bottleneck(inplanes, planes, stride)]
            inplanes = planes * Bottleneck.expansion
            layers += [Bottleneck(inplanes, planes) for _ in range(blocks - 1)]
            stages.append(nn.Sequential(*layers))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(inplanes, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def build_resnet50(seed: int = 0) -> ResNet50:
    """ResNet-50 in eval mode with every weight and BatchNorm statistic drawn from ``seed``."""
    return randomize_(ResNet50(), seed).eval()


def export_resnet50(
    out_dir: str | Path,
    batch: int | str = "dynamic",
    dtype: str = "fp32",
    exporter: str = "dynamo",
    seed: int = 0,
) -> Path:
    """Export ResNet-50 to ``out_dir/resnet50_<dtype>[_b<N>][_torchscript].onnx``; return the path.

    ``batch="dynamic"`` gives input ``pixel_values [batch, 3, 224, 224]`` with a symbolic ``batch``;
    an int fixes it.  Weights over 1 KiB go to ``<file>.data`` beside the graph.
    """
    if dtype == "bf16":
        # onnxscript 0.7.2 folds BatchNorm into Conv with fp32 weights (bf16 has no numpy dtype),
        # and Conv accepts bf16 only from opset 22: the graph would be invalid.
        raise ValueError("bf16 ResNet-50 is not supported (Conv+BatchNorm folding yields fp32 weights)")
    stem = f"resnet50_{dtype}"
    if batch != "dynamic":
        stem += f"_b{int(batch)}"
    if exporter != "dynamo":
        stem += f"_{exporter}"
    example_batch = 2 if batch == "dynamic" else int(batch)
    dim = "batch" if batch == "dynamic" else int(batch)
    x = torch.randn(example_batch, *IMAGE, generator=torch.Generator().manual_seed(seed))
    return export_module(
        build_resnet50(seed),
        (x,),
        Path(out_dir) / f"{stem}.onnx",
        input_shapes={"pixel_values": [dim, *IMAGE]},
        output_shapes={"logits": [dim, 1000]},
        dtype=dtype,
        exporter=exporter,
    )
