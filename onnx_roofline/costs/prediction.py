"""A predicted time beside the bound: what a kernel takes at the fractions of peak real kernels
reach, its GEMM work quantized into waves over the SMs, no kernel shorter than a small kernel's
latency, and the launches between kernels.

The bound (roofline.place) is a floor no run beats: FLOPs at 100 % of peak, bytes at 100 % of the
bandwidth, launches hidden. The prediction rests on the hardware entry's `achievable` figures
(costs/hardware/achievable.py), each cited:

    per kernel   t = max(compute · q / f_c(dtype), memory / f_bw, t_floor)
                 q = min over the tiles (t_M, t_N) of waves · SMs · min(M, t_M) · min(N, t_N) / (batch · M · N)
                 waves = ceil(batch · ceil(M / t_M) · ceil(N / t_N) / SMs)
    per run      eager:  Σ max(t, launch_overhead)
                 graphs: Σ t + kernels · graph_launch + launch_overhead   (one graph launch)

`compute` and `memory` are the bound's own times (FLOPs over the peak, bytes over the bandwidth),
q ≥ 1 the GEMM's wave quantization (1 for a kernel that is no GEMM), f_c(dtype) the fraction of
its peak a matrix kernel of that dtype reaches (the entry's `compute_fractions`, else
`compute_fraction`). Where the entry has no
`achievable` table the prediction is the bound, and says so."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from onnx_roofline.costs.hardware.achievable import Achievable

EAGER, GRAPHS = "eager", "graphs"
LAUNCH_MODES = (EAGER, GRAPHS)
DEFAULT_LAUNCH = GRAPHS
"""Serving engines capture decode in CUDA graphs (vLLM, TensorRT-LLM, SGLang by default): the
predicted time assumes graphs unless `--launch eager` says otherwise."""


def wave_quantization(batch: int, m: int, n: int, k: int, achievable: Achievable) -> float:
    """How many times its useful FLOPs a GEMM of `batch` [M, K]×[K, N] products occupies the SMs
    for: whole waves of SMs, each SM one output tile (clipped to the matrix: a GEMM narrower than
    a tile runs a narrower tile), over 2·batch·M·N·K, with the tile that fills the SMs best, as a
    library's heuristic picks it. 1.0 where any dim is not positive."""
    if min(batch, m, n, k) <= 0:
        return 1.0
    sms = achievable.sms

    def occupied(tile_m: int, tile_n: int) -> int:
        waves = math.ceil(batch * math.ceil(m / tile_m) * math.ceil(n / tile_n) / sms)
        return waves * sms * min(m, tile_m) * min(n, tile_n)

    return max(min(occupied(*tile) for tile in achievable.tiles) / (batch * m * n), 1.0)


def kernel_time(
    compute_s: float,
    memory_s: float,
    achievable: Achievable,
    quantization: float = 1.0,
    matrix_dtype: str | None = None,
) -> float:
    """One kernel's predicted seconds: compute at the achievable fraction of peak (of a matrix
    kernel's dtype, `matrix_dtype`; None for vector work), its GEMM quantized into waves; memory
    at the achievable fraction of the bandwidth; never below the small-kernel floor."""
    return max(
        compute_s * quantization / achievable.matrix_fraction(matrix_dtype),
        memory_s / achievable.bandwidth_fraction,
        achievable.kernel_floor,
    )


def launch_time(kernel_times: list[float], mode: str, launch_overhead: float | None, achievable: Achievable) -> float:
    """Seconds the launches add to `kernel_times` (one per launched kernel) under `mode`: eagerly,
    the host submits one kernel per launch_overhead, so a shorter kernel waits for the next
    submission; from a CUDA graph, each kernel costs graph_launch and the graph one launch."""
    if mode not in LAUNCH_MODES:
        raise ValueError(f"launch must be one of {', '.join(LAUNCH_MODES)}, got {mode!r}")
    per = launch_overhead or 0.0
    if mode == EAGER:
        return sum(max(t, per) - t for t in kernel_times)
    return len(kernel_times) * achievable.graph_launch + (per if kernel_times else 0.0)


@dataclass(frozen=True)
class Prediction:
    """A predicted run: `time_s` = `kernels_s` (each kernel at the achievable fractions) +
    `launch_s` (`launch` mode) + `collectives_s` (a tensor-parallel group's all-reduces, where a
    study adds them). `per_kernel`: each row's predicted seconds, in the report's order (None for
    an uncosted one). `assumptions`: what the figures rest on, in words. `achievable`: None where
    the hardware entry gives no figures, and then the prediction is the bound."""

    time_s: float
    kernels_s: float
    launch_s: float
    collectives_s: float
    launch: str
    kernels: int
    per_kernel: tuple[float | None, ...]
    assumptions: tuple[str, ...]
    achievable: Achievable | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "time_s": self.time_s,
            "kernels_s": self.kernels_s,
            "launch_s": self.launch_s,
            "collectives_s": self.collectives_s,
            "launch": self.launch,
            "kernels": self.kernels,
            "assumptions": list(self.assumptions),
            "achievable": None if self.achievable is None else self.achievable.to_dict(),
        }
