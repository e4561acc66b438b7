"""The link between accelerators of one node: what a tensor-parallel collective costs.

An entry's `interconnect` table (specs.toml) gives the bandwidth each way between two devices
and the latency NCCL's own cost model charges: one per collective (`base_latency`) and one per
ring step (`step_latency`). Each figure cites its source, as the rest of the table does."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from onnx_roofline.errors import HardwareSpecError

FIELDS = ("name", "bandwidth", "step_latency", "base_latency", "source", "sources")
FIGURES = ("bandwidth", "step_latency", "base_latency")


@dataclass(frozen=True)
class Interconnect:
    name: str  # "NVLink 4", "PCIe 5.0 x16"
    bandwidth: float  # B/s per direction between two devices
    step_latency: float  # s per ring step (a send to the next device and its arrival)
    base_latency: float  # s per collective, whatever its size (launch and synchronization)
    source: str
    sources: Mapping[str, str]  # per figure, where it differs from `source`

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "bandwidth_per_direction": self.bandwidth,
            "step_latency_s": self.step_latency,
            "base_latency_s": self.base_latency,
            "source": self.source,
            "sources": dict(self.sources),
        }


def parse_interconnect(data: object, origin: str) -> Interconnect:
    """An entry's `interconnect` table, validated; every problem one line naming the key."""
    if not isinstance(data, Mapping):
        raise HardwareSpecError(f"hardware spec {origin}: `interconnect` must be a table")
    unknown = [key for key in data if key not in FIELDS]
    if unknown:
        raise HardwareSpecError(f"hardware spec {origin}: unknown field `interconnect.{unknown[0]}` (expected: {', '.join(FIELDS)})")
    missing = [key for key in ("name", *FIGURES, "source") if key not in data]
    if missing:
        raise HardwareSpecError(f"hardware spec {origin}: missing `interconnect.{missing[0]}`")
    figures = {key: _figure(data[key], key, origin) for key in FIGURES}
    sources = data.get("sources", {})
    if not isinstance(sources, Mapping) or any(key not in FIGURES for key in sources):
        raise HardwareSpecError(f"hardware spec {origin}: `interconnect.sources` must be a table keyed {', '.join(FIGURES)}")
    if not all(isinstance(text, str) and text.strip() for text in (data["name"], data["source"], *sources.values())):
        raise HardwareSpecError(f"hardware spec {origin}: `interconnect` name and sources must be non-empty strings")
    return Interconnect(data["name"], source=data["source"], sources=dict(sources), **figures)


def _figure(value: object, key: str, origin: str) -> float:
    """A bandwidth in B/s (1e3 to 1e15) or a latency in seconds (at most 1)."""
    low, high = (1e3, 1e15) if key == "bandwidth" else (0.0, 1.0)
    number = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not number or not low <= value <= high or (key == "bandwidth" and value <= 0):
        raise HardwareSpecError(f"hardware spec {origin}: `interconnect.{key}` must be a number between {low:g} and {high:g}, got {value!r}")
    return float(value)
