"""One run on N devices under the Megatron split (tensor_parallel.py): what each device does and
what they say to each other.

Per kernel (per node, as written), each tensor it reads or writes counts the share the plan gives
it (1/N; 1/min(N, H_kv) on the KV side where KV heads are replicated) and whole where it is not
split, so its bytes are scaled by the share of what it touches; its compute time by the share of
its members' FLOPs this device does. Its time is then the roofline's max(compute, memory) again,
per device. The collectives — an all-reduce per block and for the embedding, an all-gather of the
logits — sit on the critical path: the next kernel needs the reduced hidden state, so their time
(costs/collectives.py: the algorithm NCCL would pick for the size) is added, never overlapped.
Memory per device: the split weights and the KV cache at their shares, replicated weights whole,
the activation peak taken whole (an upper bound: the split activations are smaller).
Figures are exact fractions, so they stay lines in a batch-like dim."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from fractions import Fraction
from typing import cast

from onnx_roofline.costs.collectives import ALL_GATHER, ALL_REDUCE, Collective, collective
from onnx_roofline.costs.hardware.interconnect import Interconnect
from onnx_roofline.report.costed import is_ok
from onnx_roofline.report.model import DEPLOYED, Report
from onnx_roofline.views.graph import tensor_table
from onnx_roofline.views.tensor_parallel import TensorParallelPlan

OVERLAP = (
    "none: each all-reduce waits for the row-parallel projection and the next kernel waits for it (added to the step)"
)
ACTIVATIONS = "peak activations per device taken whole (an upper bound: the split ones are 1/N)"


Exact = Fraction | int  # a figure kept exact: an int where no share divides it (one device, a node not split)


@dataclass(frozen=True)
class DeviceKernel:
    name: str
    flops: Exact
    bytes: Exact
    compute_s: Fraction  # the busiest unit's time for this device's share

    def memory_s(self, bandwidth: float) -> Fraction:
        return self.bytes / _exact(bandwidth)

    def time_s(self, bandwidth: float) -> Fraction:
        return max(self.compute_s, self.memory_s(bandwidth))


@functools.lru_cache(maxsize=64)
def _exact(value: float) -> Fraction:
    """A float as the exact fraction it is, converted once: a run's every kernel divides by its
    bandwidth, and a serving study makes thousands of kernels."""
    return Fraction(value)


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
    kv_replicas: int = 1  # devices holding each KV head (1: the KV heads are divided)

    @functools.cached_property
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

    @functools.cached_property
    def flops(self) -> Exact:
        return sum((k.flops for k in self.kernels), Fraction(0))

    @functools.cached_property
    def bytes(self) -> Exact:
        return sum((k.bytes for k in self.kernels), Fraction(0))

    @property
    def memory_bytes(self) -> float:
        return float(self.weight_bytes + self.kv_cache_bytes + self.activation_bytes)

    @property
    def fits(self) -> bool | None:
        return None if self.capacity is None else self.memory_bytes <= self.capacity

    def algorithms(self, kind: str = ALL_REDUCE) -> tuple[str, ...]:
        """The algorithms (and protocols) the `kind` collectives run with, in order of appearance."""
        return tuple(dict.fromkeys(c.algorithm for c in self.collectives if c.kind == kind and c.algorithm))

    def collectives_dict(self) -> dict:
        kinds = (ALL_REDUCE, ALL_GATHER)
        messages: dict[tuple[str, int], dict] = {}
        for c in self.collectives:  # one entry per kind and size: the algorithm chosen for it, and how many ran
            entry = messages.setdefault((c.kind, c.bytes), {**c.to_dict(), "count": 0})
            entry["count"] += 1
        return {"time_s": self.communication_s, **{kind: sum(c.kind == kind for c in self.collectives) for kind in kinds},
                "bytes": sum(c.bytes for c in self.collectives), "messages": list(messages.values())}  # fmt: skip

    def memory_dict(self) -> dict:
        return {"weight_bytes": float(self.weight_bytes), "kv_cache_bytes": float(self.kv_cache_bytes), "kv_replicas": self.kv_replicas,
                "activation_bytes": self.activation_bytes, "total_bytes": self.memory_bytes, "capacity": self.capacity, "fits": self.fits}  # fmt: skip


def per_device(view: Report, plan: TensorParallelPlan, devices: int, link: Interconnect | None) -> DeviceRun:
    """Device 0's share of `view` (a written or deployed report) on `devices` devices linked by `link`."""
    written = cast(Report, view.written) if view.view == DEPLOYED else view  # a deployed view carries its written one
    shares = plan.shares(devices)
    divided = plan.divided_nodes if devices > 1 else frozenset()

    def does(node) -> Exact:
        """The share of a node's FLOPs one device does: its output's share where the plan splits it
        (a replicated K/V projection does more than 1/N), else 1/N (a row projection); 1 outside."""
        if node.index not in divided:
            return 1
        out = node.outputs[0] if node.outputs else None
        return shares.get(out.name, Fraction(1, devices)) if out is not None else Fraction(1, devices)

    def part(tensors) -> Exact:
        """The share of the tensors' bytes one device touches: 1 (an int, exact and cheap) where
        the plan splits none of them, as on one device."""
        if not any(t is not None and t.name in shares for t in tensors):
            return 1
        known = {t.name: t.nbytes for t in tensors if t is not None and t.is_known}
        total = sum(known.values())
        return Fraction(sum(n * shares.get(name, 1) for name, n in known.items()), total) if total else 1

    kernels = []
    for row in view.nodes:
        if not is_ok(row) or row.cost is None or row.placement is None:
            continue
        members = [written.nodes[i] for i in getattr(row, "members", (row.index,))]
        flop_share: Exact = 1
        if any(m.index in divided for m in members):
            flops = sum(m.cost.flops for m in members if m.cost is not None)
            done = sum((m.cost.flops * does(m) for m in members if m.cost is not None), Fraction(0))
            flop_share = Fraction(done, flops) if flops else 1
        moved = row.cost.bytes_read * part(row.inputs) + row.cost.bytes_written * part(row.outputs)
        kernels.append(
            DeviceKernel(
                row.name, row.cost.flops * flop_share, moved, Fraction(row.placement.compute_time_s) * flop_share
            )
        )
    tensors = tensor_table(written)
    collectives = () if devices == 1 or link is None else tuple(
        collective(kind, tensors[name].nbytes, devices, link)
        for kind, names in ((ALL_REDUCE, plan.reduced), (ALL_GATHER, plan.gathered)) for name in names if tensors[name].is_known)  # fmt: skip
    memory = view.memory
    read = {
        t.name: t.nbytes
        for row in view.nodes
        if not row.constant_foldable
        for t in row.inputs
        if t is not None and t.is_known
    }
    saved = (
        sum(n * (1 - shares[name]) for name, n in read.items() if name in plan.split_weights) if devices > 1 else 0
    )  # the split weights' other shares
    weights = memory.weight_bytes + memory.untaken_branch_weight_bytes - saved
    kv = memory.kv_cache_resident_bytes * plan.kv_share(devices)
    return DeviceRun(devices, tuple(kernels), collectives, view.hardware.memory_bandwidth, weights, kv,
                     memory.peak_activation_bytes, view.hardware.memory_capacity, plan.kv_replicas(devices))  # fmt: skip
