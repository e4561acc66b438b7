"""What a collective over N devices costs on a ring, as NCCL's own model prices it.

A ring all-reduce is a reduce-scatter and an all-gather: 2(N−1) steps, each device sending
1/N of the tensor per step, so 2(N−1)/N × bytes cross each link in each direction. Its time is
the per-collective latency, plus the per-step latency at every step, plus those bytes over the
per-direction bandwidth. An all-gather is half the steps and half the bytes. Latencies and
bandwidth come from the hardware's `interconnect` entry (costs/hardware/interconnect.py)."""

from __future__ import annotations

from dataclasses import dataclass

from onnx_roofline.costs.hardware.interconnect import Interconnect

ALL_REDUCE, ALL_GATHER = "all-reduce", "all-gather"
RING = "ring"


@dataclass(frozen=True)
class Collective:
    kind: str  # ALL_REDUCE or ALL_GATHER
    bytes: int  # the whole tensor, as each device holds it after the collective
    devices: int
    time_s: float

    def to_dict(self) -> dict:
        return {"kind": self.kind, "algorithm": RING, "bytes": self.bytes, "devices": self.devices, "time_s": self.time_s}


def ring(kind: str, nbytes: int, devices: int, link: Interconnect) -> Collective:
    """The collective of a `nbytes` tensor over `devices` on a ring of `link`s (free on one device)."""
    if devices == 1:
        return Collective(kind, nbytes, 1, 0.0)
    steps = 2 * (devices - 1) if kind == ALL_REDUCE else devices - 1
    seconds = link.base_latency + steps * link.step_latency + steps * nbytes / devices / link.bandwidth
    return Collective(kind, nbytes, devices, seconds)
