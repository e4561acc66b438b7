"""A corpus of graphs as the tools people deploy with emit them (issue 12), and its manifest.

Each model of the corpus is two files in ``tests/corpus/models/``:

- ``<name>.onnx``: the graph, weight-stripped (``exporters.strip.save_stripped``: initializers over
  1 KiB point to ``<name>.onnx.data``, which is not committed; the analysis never reads it and
  ``verify`` synthesizes the values);
- ``<name>.json``: its manifest entry — which generator and tool made it, the dims to bind, and an
  independent count of its matrix-unit FLOPs (``flops.matrix``), made outside this project's rules
  (``torch.utils.flop_counter.FlopCounterMode`` on the eager-attention torch model, or a formula
  written in the generator); and ``variants``, more bindings of the same graph with their own count
  (``decode``: one new token after the KV cache, for the graphs with a past).

``python -m tests.corpus.generate --out tests/corpus/models`` regenerates them (needs the ``dev``
extra: torch, transformers, onnxruntime-genai); ``tests/test_corpus.py`` is the acceptance test, and
needs only the core install. This module is imported by that test: it must not import torch.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MODELS = Path(__file__).resolve().parent / "models"
SCHEMA = 1


def manifest(folder: Path = MODELS) -> list[dict[str, Any]]:
    """Every manifest entry in ``folder``, sorted by name; each with ``path`` (the .onnx) added."""
    entries = []
    for spec in sorted(folder.glob("*.json")):
        entry = json.loads(spec.read_text())
        entry["path"] = str(spec.with_suffix(".onnx"))
        entries.append(entry)
    return entries


def cases(folder: Path = MODELS) -> list[dict[str, Any]]:
    """One check case per binding: each entry as it is (``id`` its name), then each of its variants
    (``id`` ``name@label``, with the variant's ``dims`` and ``flops``)."""
    out = []
    for entry in manifest(folder):
        out.append({**entry, "id": entry["name"]})
        for variant in entry.get("variants", []):
            out.append(
                {
                    **entry,
                    "id": f"{entry['name']}@{variant['label']}",
                    "dims": variant["dims"],
                    "flops": variant["flops"],
                }
            )
    return out
