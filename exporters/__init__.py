"""Exporters for the case-study graphs: ResNet-50 and GPT-2 small (prefill, decode), random weights.

``python -m exporters all --out fixtures/`` regenerates every committed fixture (see
docs/exporters.md).  From Python::

    from exporters.resnet import build_resnet50, export_resnet50
    from exporters.gpt2 import build_gpt2, GPT2Prefill, GPT2Decode, export_gpt2

The names are also reachable as ``exporters.export_gpt2`` etc.; they are imported lazily so
that ``import exporters`` (and the CLI's argument errors) do not pay for importing torch.
"""

from __future__ import annotations

import importlib

DTYPE_NAMES = ("fp32", "fp16", "bf16")  # torch dtypes in exporters.torch_export.DTYPES
EXPORTERS = ("dynamo", "torchscript")

_LAZY = {
    "build_resnet50": "exporters.resnet",
    "export_resnet50": "exporters.resnet",
    "ResNet50": "exporters.resnet",
    "build_gpt2": "exporters.gpt2",
    "export_gpt2": "exporters.gpt2",
    "GPT2Prefill": "exporters.gpt2",
    "GPT2Decode": "exporters.gpt2",
    "randomize_": "exporters.randomize",
    "save_stripped": "exporters.strip",
}

__all__ = ["DTYPE_NAMES", "EXPORTERS", *sorted(_LAZY)]


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'exporters' has no attribute {name!r}")
