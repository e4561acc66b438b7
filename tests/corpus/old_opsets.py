"""Graphs at old opsets (7-11), as the TorchScript exporter writes them when asked for one.

- a conv net exported in training mode at opset 9: its ``Dropout`` has the opset-9 form, with a
  ``mask`` output that nothing consumes;
- a scripted recurrent cell at opset 11: a ``Loop`` whose trip count is the input's time axis;
- transformers models at opsets 9-11 (eager attention: SDPA has no export before opset 14) and the
  reduced ResNet at opset 7 — through ``sources.export``.
"""

from __future__ import annotations

import torch
from torch import nn

from exporters.randomize import randomize_
from tests.corpus import sources

STEPS, FEATURES = 6, 64


class DropoutConvNet(nn.Module):
    """Conv 7x7 -> ReLU -> Dropout(0.1) -> Flatten -> Linear; input [batch, 3, 16, 16]. (7x7: the
    conv's bias, one FLOP per output that FlopCounterMode does not count, stays under 0.4 %.)"""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 7, padding=3)
        self.relu = nn.ReLU()
        self.dropout = nn.Dropout(0.1)
        self.fc = nn.Linear(16 * 16 * 16, 10)

    def forward(self, pixel_values):
        return self.fc(torch.flatten(self.dropout(self.relu(self.conv(pixel_values))), 1))


class RecurrentCell(nn.Module):
    """h <- tanh(W x_t + h) over the time axis of x [batch, steps, 64]: scripted, so the loop stays a Loop."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(FEATURES, FEATURES)

    def forward(self, x):
        h = torch.zeros_like(x[:, 0])
        for t in range(x.size(1)):
            h = torch.tanh(self.lin(x[:, t]) + h)
        return h


def _seeded(module: nn.Module) -> nn.Module:
    torch.manual_seed(sources.SEED)
    return randomize_(module, sources.SEED).eval()


def dropout_recipe() -> sources.Recipe:
    return sources.Recipe(
        "dropout_convnet", lambda: _seeded(DropoutConvNet()),
        lambda: (torch.randn(sources.BATCH, 3, 16, 16, generator=torch.Generator().manual_seed(sources.SEED)),),
        {"pixel_values": ["batch", 3, 16, 16]}, {"logits": ["batch", 10]}, {"batch": sources.BATCH},
        notes="exported with training=TrainingMode.TRAINING: Dropout-7 form with its unconsumed mask output",
    )  # fmt: skip


def loop_recipe() -> sources.Recipe:
    return sources.Recipe(
        "loop_rnn", lambda: torch.jit.script(_seeded(RecurrentCell())),
        lambda: (torch.randn(sources.BATCH, STEPS, FEATURES, generator=torch.Generator().manual_seed(sources.SEED)),),
        {"x": ["batch", "steps", FEATURES]}, {"h": ["batch", FEATURES]}, {"batch": sources.BATCH, "steps": STEPS},
        notes="torch.jit.script: a Loop whose trip count is Shape(x)[1]",
    )  # fmt: skip


def loop_flops() -> int:
    """The formula: STEPS x one Linear (2·batch·64·64) — counted by FlopCounterMode on the eager cell too."""
    return STEPS * 2 * sources.BATCH * FEATURES * FEATURES
