"""What real kernels reach on a device: the figures a predicted time rests on.

The roofline bound divides by the datasheet's peaks; no kernel reaches them. An entry's
`achievable` table (specs.toml) gives, each with its source: the fraction of the HBM bandwidth a
streaming copy sustains, the fraction of the dense matrix peak a large cuBLAS/CUTLASS GEMM
sustains (and, where a matrix dtype's GEMMs reach less of their own peak, that dtype's fraction:
FP8 GEMMs reach a smaller share of their doubled peak than FP16 ones), the SM count and the GEMM tiles over which a matrix kernel's work is quantized into
waves, the shortest time any kernel takes (a small kernel's latency floor), and the launch
overhead per kernel inside a CUDA graph. An entry without the table has no prediction: its
predicted time is its bound, said so (costs/prediction.py)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from onnx_roofline.errors import HardwareSpecError

FRACTIONS = ("bandwidth_fraction", "compute_fraction")
SECONDS = ("kernel_floor", "graph_launch")
FIGURES = (*FRACTIONS, "sms", "tiles", *SECONDS)
FIELDS = (*FIGURES, "compute_fractions", "source", "sources")


@dataclass(frozen=True)
class Achievable:
    bandwidth_fraction: float  # of memory_bandwidth, a large streaming copy
    compute_fraction: float  # of the dense matrix peak, a large GEMM (the vector units alike)
    sms: int  # streaming multiprocessors: a GEMM's tiles run in waves of this many
    tiles: tuple[tuple[int, int], ...]  # the (M, N) output tiles a library chooses among, one per SM at a time
    kernel_floor: float  # s: no kernel takes less, however little it does
    graph_launch: float  # s per kernel launched from a captured CUDA graph
    source: str
    sources: Mapping[str, str]  # per figure, where it differs from `source`
    compute_fractions: Mapping[str, float] = field(default_factory=dict)  # per matrix dtype class, where it differs

    def matrix_fraction(self, dtype_class: str | None) -> float:
        """The fraction of the matrix peak a GEMM of `dtype_class` reaches: its own where the
        table gives one, else `compute_fraction` (None: vector work, at compute_fraction)."""
        return self.compute_fractions.get(dtype_class or "", self.compute_fraction)

    def to_dict(self) -> dict[str, Any]:
        return {
            "bandwidth_fraction": self.bandwidth_fraction,
            "compute_fraction": self.compute_fraction,
            "compute_fractions": dict(self.compute_fractions),
            "sms": self.sms,
            "tiles": [list(tile) for tile in self.tiles],
            "kernel_floor_s": self.kernel_floor,
            "graph_launch_s": self.graph_launch,
            "source": self.source,
            "sources": dict(self.sources),
        }


def parse_achievable(data: object, origin: str) -> Achievable:
    """An entry's `achievable` table, validated; every problem one line naming the key."""
    where = f"hardware spec {origin}: `achievable"
    if not isinstance(data, Mapping):
        raise HardwareSpecError(f"{where}` must be a table")
    unknown = [key for key in data if key not in FIELDS]
    if unknown:
        raise HardwareSpecError(f"{where}.{unknown[0]}` is not a field (expected: {', '.join(FIELDS)})")
    missing = [key for key in (*FIGURES, "source") if key not in data]
    if missing:
        raise HardwareSpecError(f"{where}.{missing[0]}` is missing")
    for key in FRACTIONS:
        if not _number(data[key]) or not 0 < data[key] <= 1:
            raise HardwareSpecError(f"{where}.{key}` must be a fraction in (0, 1], got {data[key]!r}")
    for key in SECONDS:
        if not _number(data[key]) or not 0 <= data[key] <= 1:
            raise HardwareSpecError(f"{where}.{key}` must be seconds between 0 and 1, got {data[key]!r}")
    sms, tiles = data["sms"], data["tiles"]
    if not isinstance(sms, int) or isinstance(sms, bool) or sms < 1:
        raise HardwareSpecError(f"{where}.sms` must be a positive integer, got {sms!r}")
    if not isinstance(tiles, list) or not tiles or not all(_tile(tile) for tile in tiles):
        raise HardwareSpecError(f"{where}.tiles` must be a list of [M, N] pairs of positive integers, got {tiles!r}")
    per_dtype = data.get("compute_fractions", {})
    if not isinstance(per_dtype, Mapping) or not all(
        isinstance(key, str) and _number(value) and 0 < value <= 1 for key, value in per_dtype.items()
    ):
        raise HardwareSpecError(
            f"{where}.compute_fractions` must be a table of dtype classes to fractions in (0, 1], got {per_dtype!r}"
        )
    sources = data.get("sources", {})
    if not isinstance(sources, Mapping) or any(key not in (*FIGURES, "compute_fractions") for key in sources):
        raise HardwareSpecError(
            f"{where}.sources` must be a table keyed by {', '.join((*FIGURES, 'compute_fractions'))}"
        )
    if not all(isinstance(text, str) and text.strip() for text in (data["source"], *sources.values())):
        raise HardwareSpecError(f"{where}` sources must be non-empty strings")
    return Achievable(float(data["bandwidth_fraction"]), float(data["compute_fraction"]), sms, tuple((m, n) for m, n in tiles),
                      float(data["kernel_floor"]), float(data["graph_launch"]), data["source"], dict(sources),
                      {key: float(value) for key, value in per_dtype.items()})  # fmt: skip


def _tile(tile: object) -> bool:
    return (
        isinstance(tile, list)
        and len(tile) == 2
        and all(isinstance(t, int) and not isinstance(t, bool) and t > 0 for t in tile)
    )


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
