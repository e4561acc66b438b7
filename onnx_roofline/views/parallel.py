"""One run on N devices under the Megatron split (tensor_parallel.py): what each device does and
what they say to each other.

Per kernel (per node, as written), each tensor it reads or writes counts 1/N where the plan
splits it and whole where it is replicated, so its bytes are scaled by the split share of what it
touches; its compute time by the share of its members' FLOPs that are divided. Its time is then
the roofline's max(compute, memory) again, per device. The collectives — an all-reduce per
block and for the embedding, an all-gather of the logits — sit on the critical path: the next
kernel needs the reduced hidden state, so their ring time (costs/collectives.py) is added, never
overlapped. Memory per device: the split weights and the KV cache divided, replicated weights
whole, the activation peak taken whole (an upper bound: the split activations are smaller).
Figures are exact fractions, so they stay lines in a batch-like dim."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from onnx_roofline.costs.collectives import ALL_GATHER, ALL_REDUCE, Collective, ring
from onnx_roofline.costs.hardware.interconnect import Interconnect
from onnx_roofline.report.model import DEPLOYED, OK, Report
from onnx_roofline.views.graph import tensor_table
from onnx_roofline.views.tensor_parallel import TensorParallelPlan

OVERLAP = "none: each all-reduce waits for the row-parallel projection and the next kernel waits for it (added to the step)"
ACTIVATIONS = "peak activations per device taken whole (an upper bound: the split ones are 1/N)"


@dataclass(frozen=True)
class DeviceKernel:
    name: str
    flops: Fraction
    bytes: Fraction
    compute_s: Fraction  # the busiest unit's time for this device's share

    def memory_s(self, bandwidth: float) -> Fraction:
        return self.bytes / Fraction(bandwidth)

    def time_s(self, bandwidth: float) -> Fraction:
        return max(self.compute_s, self.memory_s(bandwidth))


@dataclass(frozen=True)
class DeviceRun:
    """One device's share of one run, and the collectives between the devices."""

    devices: int
    kernels: tuple[DeviceKernel, ...]
    collectives: tuple[Collective, ...]
    bandwidth: float
    weight_bytes: Fraction
    kv_cache_bytes: Fraction
    activation_bytes: int
    capacity: float | None

    @property
    def kernel_time_s(self) -> float:
        return float(sum(k.time_s(self.bandwidth) for k in self.kernels))

    @property
    def communication_s(self) -> float:
        return sum(c.time_s for c in self.collectives)

    @property
    def time_s(self) -> float:
        return self.kernel_time_s + self.communication_s

    @property
    def compute_share(self) -> float | None:
        """The share of kernel time in compute-bound kernels."""
        total = self.kernel_time_s
        bound = sum(k.compute_s for k in self.kernels if k.compute_s >= k.memory_s(self.bandwidth))
        return float(bound) / total if total else None

    @property
    def flops(self) -> Fraction:
        return sum((k.flops for k in self.kernels), Fraction(0))

    @property
    def bytes(self) -> Fraction:
        return sum((k.bytes for k in self.kernels), Fraction(0))

    @property
    def memory_bytes(self) -> float:
        return float(self.weight_bytes + self.kv_cache_bytes + self.activation_bytes)

    @property
    def fits(self) -> bool | None:
        return None if self.capacity is None else self.memory_bytes <= self.capacity

    def collectives_dict(self) -> dict:
        kinds = (ALL_REDUCE, ALL_GATHER)
        return {"time_s": self.communication_s, **{kind: sum(c.kind == kind for c in self.collectives) for kind in kinds},
                "bytes": sum(c.bytes for c in self.collectives)}  # fmt: skip

    def memory_dict(self) -> dict:
        return {"weight_bytes": float(self.weight_bytes), "kv_cache_bytes": float(self.kv_cache_bytes),
                "activation_bytes": self.activation_bytes, "total_bytes": self.memory_bytes, "capacity": self.capacity, "fits": self.fits}  # fmt: skip


def per_device(view: Report, plan: TensorParallelPlan, devices: int, link: Interconnect | None) -> DeviceRun:
    """Device 0's share of `view` (a written or deployed report) on `devices` devices linked by `link`."""
    written = view.written if view.view == DEPLOYED else view
    share = Fraction(1, devices)
    split = plan.split_tensors if devices > 1 else frozenset()
    divided = plan.divided_nodes if devices > 1 else frozenset()

    def part(tensors) -> Fraction:
        known = {t.name: t.nbytes for t in tensors if t is not None and t.is_known}
        total = sum(known.values())
        return Fraction(sum(n * (share if name in split else 1) for name, n in known.items()), total) if total else Fraction(1)

    kernels = []
    for row in view.nodes:
        if row.status != OK or row.cost is None or row.placement is None:
            continue
        members = [written.nodes[i] for i in getattr(row, "members", (row.index,))]
        flops = sum(m.cost.flops for m in members if m.cost is not None)
        divided_flops = sum(m.cost.flops for m in members if m.cost is not None and m.index in divided)
        flop_share = Fraction(flops - divided_flops, flops) + share * Fraction(divided_flops, flops) if flops else Fraction(1)
        moved = row.cost.bytes_read * part(row.inputs) + row.cost.bytes_written * part(row.outputs)
        kernels.append(DeviceKernel(row.name, row.cost.flops * flop_share, moved, Fraction(row.placement.compute_time_s) * flop_share))
    tensors = tensor_table(written)
    collectives = () if devices == 1 or link is None else tuple(
        ring(kind, tensors[name].nbytes, devices, link)
        for kind, names in ((ALL_REDUCE, plan.reduced), (ALL_GATHER, plan.gathered)) for name in names if tensors[name].is_known)  # fmt: skip
    memory = view.memory
    read = {t.name: t.nbytes for row in view.nodes if not row.constant_foldable for t in row.inputs if t is not None and t.is_known}
    held = sum(n for name, n in read.items() if name in plan.split_weights) if devices > 1 else 0  # the split weights the footprint holds
    weights = memory.weight_bytes + memory.untaken_branch_weight_bytes - held * (1 - share)
    kv = memory.kv_cache_resident_bytes * (share if plan.found else 1)
    return DeviceRun(devices, tuple(kernels), collectives, view.hardware.memory_bandwidth, weights, kv,
                     memory.peak_activation_bytes, view.hardware.memory_capacity)  # fmt: skip
