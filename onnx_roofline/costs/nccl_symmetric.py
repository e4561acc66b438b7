"""NCCL's symmetric-memory kernels on an NVSwitch node: the one-shot and two-shot all-reduce (and
their all-gathers) that run over NVLink loads and stores, as NCCL's own model prices them.

Transcribed from NVIDIA/nccl `src/sym_kernels.cc` (master, commit 5067397, 2026-06-11):
`queryModel_lsa`, `model`, `softmin`, `softplus`, `ncclSymkMask` and `ncclSymkPickKernel`. A
one-shot all-reduce (`AllReduce_AGxLL_R`) gathers every GPU's whole tensor by the LL protocol and
reduces it locally; a two-shot one (`AllReduce_RSxLD_AGxST`) reduce-scatters by loads and
all-gathers by stores; the `MC` kernels do the same through NVSwitch multicast (NVLS). NCCL
compiles them for sm_90 on (`src/device/symmetric/generate.py`: `__CUDA_ARCH__ >= 900`) and offers
them where every GPU pair is linked by NVLink (`isAllDirectNvlink`); multicast needs 3 GPUs or
more (`ncclSymkInitOnce`). Times in µs, bandwidths in NCCL's "GBps" here: 2^30 bytes per second."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from onnx_roofline.costs.nccl_tuning import ALL_GATHER, ALL_REDUCE, LL, Choice

GBPS = 2**30 / 1e6  # bytes per µs in one "GBps" of sym_kernels.cc
LL_BUS_FACTOR = 9  # "2X the bytes, plus some processing, plus no unrolling"
MAX_BLOCKS = 64  # ncclSymkMaxBlocks; the config's maxCTAs defaults to MAXCHANNELS (64), minCTAs to 1
SM_PENALTY = 0.025  # ncclSymkPickKernel: "2.5% percent increase in time per SM"
LL_LIMIT = 2 << 30  # LL kernels count elements in 32 bits: none from 2 GiB of bus bytes on
LDST = "LD/ST"


@dataclass(frozen=True)
class Kernel:
    """One symmetric kernel as queryModel_lsa prices it."""

    name: str  # NCCL's (ncclSymkKernelId)
    label: str  # what it does, as the report names it
    protocol: str  # LL or loads and stores
    bus_bytes: Callable[[int, int], int]  # of NCCL's count in bytes and the GPUs: the most a GPU sends or receives
    bus_multiplier: Callable[[int], float] = lambda devices: 1.0
    multicast: bool = False  # through NVSwitch multicast: 3 GPUs or more, a block count of its own
    peak_gbps: tuple[float, float] = (320, 600)  # Hopper, Blackwell


def _ll(count: int, devices: int) -> int:
    return devices * count * LL_BUS_FACTOR


KERNELS = {
    ALL_REDUCE: (
        Kernel("AllReduce_AGxLL_R", "one-shot", LL, _ll),
        Kernel("AllReduce_AGxLLMC_R", "one-shot multicast", LL, _ll, lambda n: 1.1, True),  # "to beat non-MC LL"
        Kernel("AllReduce_RSxLD_AGxST", "two-shot", LDST, lambda count, n: 2 * count * (n - 1) // n),
        Kernel("AllReduce_RSxLDMC_AGxSTMC", "two-shot multicast", LDST, lambda count, n: count // n + count, lambda n: float(n), True, (480, 1000)),
    ),
    ALL_GATHER: (
        Kernel("AllGather_LL", "one-shot", LL, _ll),
        Kernel("AllGather_LLMC", "one-shot multicast", LL, _ll, lambda n: 1.1, True),
        Kernel("AllGather_ST", "direct", LDST, lambda count, n: (n - 1) * count),
        Kernel("AllGather_STMC", "direct multicast", LDST, lambda count, n: (n - 1) * count, lambda n: 0.55 * n, True),
    ),
}  # fmt: skip


def symmetric(kind: str, nbytes: int, devices: int, generation: str) -> Choice | None:
    """The symmetric kernel NCCL picks for `kind` of `nbytes` (the whole tensor) over `devices`
    GPUs of an NVSwitch node of `generation`, and its modelled time; None where there is none."""
    if generation not in ("hopper", "blackwell"):
        return None
    count = nbytes if kind == ALL_REDUCE else nbytes // devices  # NCCL's count: an all-gather's is each GPU's part
    best, best_score = None, math.inf
    for kernel in KERNELS[kind]:
        if (kernel.multicast and devices <= 2) or (
            kernel.protocol == LL and (count if kind == ALL_REDUCE else nbytes) >= LL_LIMIT
        ):
            continue
        time_us, blocks = _query(kernel, kind, count, devices, generation == "hopper")
        if time_us * (1 + SM_PENALTY * blocks) < best_score:
            best, best_score = (
                Choice(kernel.label, kernel.protocol, time_us * 1e-6, kernel.name),
                time_us * (1 + SM_PENALTY * blocks),
            )
    return best


def _query(kernel: Kernel, kind: str, count: int, devices: int, hopper: bool) -> tuple[float, int]:
    """queryModel_lsa: (µs, blocks) at the fewest blocks within 2.5 % of the time at the most."""
    all_reduce, ll = kind == ALL_REDUCE, kernel.protocol == LL
    if hopper:  # cudaArch < 1000
        base, sm = (4.5 if ll else 7.8), (65 if all_reduce else 44) * GBPS
    else:
        base, sm = ((11.0 if all_reduce else 8.5) if ll else (19.5 if all_reduce else 13.0)), 55 * GBPS
    peak = kernel.peak_gbps[0 if hopper else 1] * GBPS
    most = -(-(16 if hopper else 32) // devices) if kernel.multicast and kernel.protocol == LDST else MAX_BLOCKS
    bus_bytes, multiplier = kernel.bus_bytes(count, devices), kernel.bus_multiplier(devices)

    def model(blocks: int) -> float:
        return base + _softplus(bus_bytes / _softmin(blocks * sm * multiplier, peak, sm) - 1, 1)

    at_most = model(most)
    return next(((model(b), b) for b in range(1, most) if model(b) <= 1.025 * at_most), (at_most, most))


def _softmin(x: float, ceiling: float, softness: float) -> float:
    """A smooth min(x, ceiling)."""
    return ceiling - softness * math.log1p((math.exp(ceiling / softness) - 1) * math.exp(-x / softness))


def _softplus(x: float, softness: float) -> float:
    """A smooth max(0, x)."""
    z = x / softness
    return x if z >= 100 else softness * math.log1p(math.exp(z))
