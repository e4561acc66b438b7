"""The link between accelerators of one node: what a tensor-parallel collective costs.

An entry's `interconnect` table (specs.toml) gives the bandwidth each way between two devices,
the fabric that links them (`nvswitch`: every pair through NVSwitch, NVLink's latencies, NVLS
and NCCL's symmetric kernels where the generation has them; `pcie`: PCIe's latencies, ring and
tree only) and the GPU generation whose constants NCCL's model takes (costs/nccl_tuning.py).
The bandwidth cites its source, as the rest of the table does; the latencies are NCCL's."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from onnx_roofline.costs.nccl_tuning import GENERATIONS, NVSWITCH, PCIE
from onnx_roofline.errors import HardwareSpecError

FIELDS = ("name", "fabric", "generation", "bandwidth", "source", "sources")
FABRICS = (NVSWITCH, PCIE)


@dataclass(frozen=True)
class Interconnect:
    name: str  # "NVLink 4 (18 links) through NVSwitch", "PCIe 5.0 x16"
    fabric: str  # NVSWITCH or PCIE
    generation: str  # NCCL's GPU generation: volta, ampere, hopper, blackwell
    bandwidth: float  # B/s per direction between two devices
    source: str
    sources: Mapping[str, str]  # per figure, where it differs from `source`

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "fabric": self.fabric,
            "generation": self.generation,
            "bandwidth_per_direction": self.bandwidth,
            "source": self.source,
            "sources": dict(self.sources),
        }


def parse_interconnect(data: object, origin: str) -> Interconnect:
    """An entry's `interconnect` table, validated; every problem one line naming the key."""
    if not isinstance(data, Mapping):
        raise HardwareSpecError(f"hardware spec {origin}: `interconnect` must be a table")
    unknown = [key for key in data if key not in FIELDS]
    if unknown:
        raise HardwareSpecError(
            f"hardware spec {origin}: unknown field `interconnect.{unknown[0]}` (expected: {', '.join(FIELDS)})"
        )
    missing = [key for key in FIELDS[:-1] if key not in data]
    if missing:
        raise HardwareSpecError(f"hardware spec {origin}: missing `interconnect.{missing[0]}`")
    for key, allowed in (("fabric", FABRICS), ("generation", GENERATIONS)):
        if data[key] not in allowed:
            raise HardwareSpecError(
                f"hardware spec {origin}: `interconnect.{key}` must be one of {', '.join(allowed)}, got {data[key]!r}"
            )
    bandwidth = data["bandwidth"]
    if not (
        isinstance(bandwidth, (int, float))
        and not isinstance(bandwidth, bool)
        and math.isfinite(bandwidth)
        and 1e3 <= bandwidth <= 1e15
    ):
        raise HardwareSpecError(
            f"hardware spec {origin}: `interconnect.bandwidth` must be a number between 1e3 and 1e15 (B/s), got {bandwidth!r}"
        )
    sources = data.get("sources", {})
    if not isinstance(sources, Mapping) or any(key != "bandwidth" for key in sources):
        raise HardwareSpecError(f"hardware spec {origin}: `interconnect.sources` must be a table keyed bandwidth")
    if not all(isinstance(text, str) and text.strip() for text in (data["name"], data["source"], *sources.values())):
        raise HardwareSpecError(f"hardware spec {origin}: `interconnect` name and sources must be non-empty strings")
    return Interconnect(
        data["name"], data["fabric"], data["generation"], float(bandwidth), data["source"], dict(sources)
    )
