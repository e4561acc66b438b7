"""What a collective over N devices of one node costs, with the algorithm NCCL would run it with.

NCCL prices every algorithm and protocol it may use (costs/nccl_tuning.py: ring, tree and NVLS
with LL, LL128 and Simple, its `src/graph/tuning.cc`) and runs the fastest for the message's
size. On an NVSwitch node of sm_90 on, the symmetric-memory kernels (costs/nccl_symmetric.py: the
one-shot and two-shot all-reduce) join them: NCCL runs them on buffers registered as symmetric
windows, and serving engines run their own one-shot and two-shot kernels for small messages
(TensorRT-LLM's and vLLM's custom all-reduce), NCCL's ring above. The cost is the lowest modelled
time among them all; the algorithm that gives it is named. The link is the hardware entry's
`interconnect` (costs/hardware/interconnect.py): its fabric, GPU generation and bandwidth."""

from __future__ import annotations

from dataclasses import dataclass

from onnx_roofline.costs.hardware.interconnect import Interconnect
from onnx_roofline.costs.nccl_symmetric import symmetric
from onnx_roofline.costs.nccl_tuning import ALL_GATHER, ALL_REDUCE, NVSWITCH, Choice, tuned

__all__ = ["ALL_GATHER", "ALL_REDUCE", "MODEL", "Collective", "collective"]

MODEL = ("NCCL's cost model (src/graph/tuning.cc; src/sym_kernels.cc): per message size the lowest modelled time among ring, tree "
         "and NVLS with the LL, LL128 and Simple protocols and, on NVSwitch from Hopper on, the one-shot and two-shot kernels; "
         "the algorithm chosen shown per point")  # fmt: skip


@dataclass(frozen=True)
class Collective:
    kind: str  # ALL_REDUCE or ALL_GATHER
    bytes: int  # the whole tensor, as each device holds it after the collective
    devices: int
    choice: Choice | None  # None on one device: nothing to say

    @property
    def time_s(self) -> float:
        return 0.0 if self.choice is None else self.choice.time_s

    @property
    def algorithm(self) -> str | None:
        return None if self.choice is None else self.choice.label

    def to_dict(self) -> dict:
        choice = self.choice
        return {"kind": self.kind, "bytes": self.bytes, "devices": self.devices, "time_s": self.time_s,
                "algorithm": None if choice is None else choice.algorithm, "protocol": None if choice is None else choice.protocol,
                "nccl_kernel": None if choice is None else choice.kernel or None}  # fmt: skip


def collective(kind: str, nbytes: int, devices: int, link: Interconnect) -> Collective:
    """The collective of a `nbytes` tensor over `devices` linked by `link` (free on one device)."""
    if devices == 1:
        return Collective(kind, nbytes, 1, None)
    choices = tuned(kind, nbytes, devices, link.fabric, link.generation, link.bandwidth)
    fast = symmetric(kind, nbytes, devices, link.generation) if link.fabric == NVSWITCH else None
    return Collective(kind, nbytes, devices, min([*choices, *([fast] if fast else [])], key=lambda c: c.time_s))
