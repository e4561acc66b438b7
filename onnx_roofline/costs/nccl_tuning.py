"""NCCL's own cost model of a collective within one node: the latency and bandwidth its tuner gives
each algorithm (ring, tree, NVLS) and protocol (LL, LL128, Simple), and the time it compares.

Transcribed from NVIDIA/nccl `src/graph/tuning.cc` (master, commit 5067397, 2026-06-11):
`ncclTunerConstantsDefaults` (the tables below), `ncclTopoTuneModel` (one node, so no network
term) and `ncclTopoGetAlgoTime`: time = latency + bytes / algorithm bandwidth, latencies in µs and
bandwidths in GB/s as NCCL writes them. NVLS's channel count is `NVLS_NCHANNELS_SM90` (16) and
`NVLS_NCHANNELS_SM100_NVL` (24) in `src/transport/nvls.cc`.

Where NCCL's topology search would give the bus bandwidth (channels × per-channel bandwidth), the
link's bandwidth per direction from the hardware entry stands in for it. The per-channel caps
(`perChMax*Bws`) are left out: they need that search's channel count (on Hopper's NVLink they bind
below 12 channels, on Ampere's LL128 below 14)."""

from __future__ import annotations

from dataclasses import dataclass

ALL_REDUCE, ALL_GATHER = "all-reduce", "all-gather"
RING, TREE, NVLS = "ring", "tree", "NVLS"
LL, LL128, SIMPLE = "LL", "LL128", "Simple"
PROTOCOLS = (LL, LL128, SIMPLE)
NVSWITCH, PCIE = "nvswitch", "pcie"
GENERATIONS = ("volta", "ampere", "hopper", "blackwell")  # NCCL's compute-capability index: < 8.0, 8.x, 9.x, 10.0 on

BASE_LATENCY_US = {TREE: (6.8, 14.0, 8.4), RING: (6.6, 14.0, 8.4), NVLS: (0.0, 0.0, 0.0)}  # baseLatencies, per protocol
HW_LATENCY_US = {  # hwLatencies: NVLINK for an NVSwitch node, PCI for PCIe, per protocol
    NVSWITCH: {TREE: (0.6, 1.25, 4.0), RING: (0.6, 1.9, 3.4), NVLS: (0.0, 0.0, 25.0)},
    PCIE: {TREE: (1.0, 1.9, 4.0), RING: (1.0, 2.5, 5.7), NVLS: (0.0, 0.0, 0.0)},
}
LL_MAX_BW = {"volta": 39.0, "ampere": 87.7, "hopper": 141.0, "blackwell": 2 * 141.0}  # llMaxBws, one node (GB/s)
NVLS_EFFICIENCY = {"volta": 0.0, "ampere": 0.0, "hopper": 0.85, "blackwell": 0.74}  # nvlsEfficiency: 0, no NVLS
NVLS_CHANNELS = {"hopper": 16, "blackwell": 24}
# treeCorrectionFactor: the tree all-reduce's bandwidth × this, by protocol and log2(bytes / 64)
TREE_CORRECTION = {
    LL: (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0),
    LL128: (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0),
    SIMPLE: (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9),
}  # fmt: skip


@dataclass(frozen=True)
class Choice:
    """One algorithm and protocol as NCCL's model prices it for one message."""

    algorithm: str  # RING, TREE, NVLS, or a symmetric kernel's kind ("one-shot", ...: nccl_symmetric.py)
    protocol: str
    time_s: float
    kernel: str = ""  # NCCL's name for a symmetric kernel ("AllReduce_AGxLL_R")

    @property
    def label(self) -> str:
        return f"{self.algorithm}/{self.protocol}"


def tuned(kind: str, nbytes: int, devices: int, fabric: str, generation: str, bandwidth: float) -> list[Choice]:
    """Every algorithm and protocol NCCL's tuner enables for `kind` of `nbytes` (the whole tensor)
    over `devices` GPUs of one node, `bandwidth` B/s per direction."""
    bus = bandwidth / 1e9  # GB/s, NCCL's unit
    steps = 2 * (devices - 1) if kind == ALL_REDUCE else devices - 1
    nvlink = fabric == NVSWITCH
    choices = []
    for index, protocol in enumerate(PROTOCOLS):
        if protocol == LL128 and not nvlink:  # LL128 is enabled only up to NVLink paths (typeIntra <= PATH_NVB)
            continue
        ring = {LL: min(LL_MAX_BW[generation], bus * 0.5), LL128: bus * 0.92, SIMPLE: bus}[protocol] * devices / steps
        latency = BASE_LATENCY_US[RING][index] + steps * HW_LATENCY_US[fabric][RING][index]
        choices.append(Choice(RING, protocol, _time(latency, nbytes, ring)))
        if kind == ALL_REDUCE:
            tree = _tree_bandwidth(protocol, bus * 0.92, generation) * 0.5 * _tree_correction(protocol, nbytes)
            latency = BASE_LATENCY_US[TREE][index] + 2 * (devices - 1) * HW_LATENCY_US[fabric][TREE][index]
            choices.append(Choice(TREE, protocol, _time(latency, nbytes, tree)))
    if nvlink and NVLS_EFFICIENCY[generation] > 0:  # multicast on NVSwitch (nvls.cc: 2 GPUs or more)
        channels = NVLS_CHANNELS[generation]
        nvls = bus * NVLS_EFFICIENCY[generation] * (channels - 1) / channels
        # an all-reduce pipelines two operations; then bus to algorithm bandwidth as for the ring.
        # An all-gather's bandwidth is (N-1)/N of it, and not converted.
        nvls = nvls * 2 * devices / steps if kind == ALL_REDUCE else nvls * (devices - 1) / devices
        choices.append(Choice(NVLS, SIMPLE, _time(HW_LATENCY_US[fabric][NVLS][2], nbytes, nvls)))
    return choices


def _tree_bandwidth(protocol: str, bus: float, generation: str) -> float:
    return {LL: min(bus / 3.8, LL_MAX_BW[generation]), LL128: bus * 7 / 9, SIMPLE: bus}[protocol]


def _tree_correction(protocol: str, nbytes: int) -> float:
    size = (nbytes >> 6).bit_length() - 1  # log2i(nBytes >> 6)
    return TREE_CORRECTION[protocol][size] if 0 <= size < 23 else 1.0


def _time(latency_us: float, nbytes: int, bandwidth_gbps: float) -> float:
    """ncclTopoGetAlgoTime, in seconds: latency + bytes / (1000 × GB/s) µs."""
    return (latency_us + nbytes / (1000 * bandwidth_gbps)) * 1e-6
