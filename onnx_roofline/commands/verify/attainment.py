"""Measured kernel times against the roofline: no node may run faster than its lower bound
max(FLOPs / peak, bytes / bandwidth) beyond the noise margin. One that does points at a cost rule
that over-counts, or at data the roofline assumes comes from DRAM sitting in cache.

The test is deliberately one-sided and generous to the measurement: a node beats its bound only if
measured + timer resolution < bound / (1 + margin). A node that beats the DRAM bound but whose
working set fits the last-level cache is then held to a cache floor, max(FLOPs / peak, bytes /
in-cache bandwidth), with the in-cache rate measured on the spot: within it, the node is
`cache-resident` (the roofline ignores cache reuse, as DESIGN.md's unfused view says); below it,
no memory of this machine explains the time, and the node is a violation. Fused kernels
(optimizations on) are shown but not judged: the unfused bytes of their nodes are not a lower bound
for a kernel that skips the round trips in between."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import onnx

from onnx_roofline.commands.verify.timing import RESOLUTION_S, Profile, profile
from onnx_roofline.report.costed import ok_rows
from onnx_roofline.report.model import Report

AT_OR_ABOVE = "at-or-above-bound"
CACHE_RESIDENT = "cache-resident"
BEATS = "beats-bound"
FUSED = "fused"
NOT_COSTED = "not-costed"
DEFAULT_MARGIN = 0.25


@dataclass(frozen=True)
class NodeTiming:
    kernel: str
    nodes: tuple[int, ...]
    names: tuple[str, ...]
    op_type: str  # the original op type ("A+B" for a fused group)
    measured_s: float
    bound_s: float | None  # sum of the nodes' roofline lower bounds; None when one is not costed
    bound: str | None  # compute / memory for a single node
    verdict: str
    cache_floor_s: float | None = None  # the bound with in-cache bandwidth, when the working set fits

    @property
    def attainment(self) -> float | None:
        """predicted / measured: 1.0 runs at the roofline; above 1 + margin beats it."""
        if self.bound_s is None:
            return None
        return self.bound_s / max(self.measured_s, RESOLUTION_S)

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "nodes": list(self.nodes), "names": list(self.names), "attainment": self.attainment}


if TYPE_CHECKING:

    class JudgedTiming(NodeTiming):
        """A judged node, costed, so with its bound (`TimingCheck.judged`), for the type checker only."""

        bound_s: float


@dataclass(frozen=True)
class OpTypeTiming:
    op_type: str
    kernels: int
    measured_s: float
    predicted_s: float

    @property
    def attainment(self) -> float | None:
        return self.predicted_s / self.measured_s if self.measured_s else None

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "attainment": self.attainment}


@dataclass(frozen=True)
class TimingCheck:
    hardware: str
    margin: float
    runs: int
    warmup: int
    optimized: bool
    nodes: tuple[NodeTiming, ...]
    not_run: tuple[int, ...]
    unattributed: tuple[str, ...]
    cache_bandwidth: float | None = None  # B/s, measured now
    cache_bytes: int | None = None  # last-level cache size

    def judged(self) -> list[JudgedTiming]:
        return cast("list[JudgedTiming]", [n for n in self.nodes if n.verdict in (AT_OR_ABOVE, CACHE_RESIDENT, BEATS)])

    def count(self, verdict: str) -> int:
        return sum(1 for n in self.nodes if n.verdict == verdict)

    @property
    def violations(self) -> list[NodeTiming]:
        return [n for n in self.nodes if n.verdict == BEATS]

    @property
    def passed(self) -> bool:
        return not self.violations

    @property
    def node_share(self) -> float | None:
        """Share of judged nodes whose measured time is at or above the bound."""
        judged = self.judged()
        return sum(n.verdict == AT_OR_ABOVE for n in judged) / len(judged) if judged else None

    @property
    def time_share(self) -> float | None:
        """Share of the judged nodes' measured time spent in nodes at or above their bound."""
        judged = self.judged()
        total = sum(n.measured_s for n in judged)
        return sum(n.measured_s for n in judged if n.verdict == AT_OR_ABOVE) / total if total else None

    @property
    def attainment(self) -> float | None:
        """Overall predicted / measured over the judged nodes."""
        judged = self.judged()
        measured = sum(n.measured_s for n in judged)
        return sum(n.bound_s for n in judged) / measured if measured else None

    def by_op_type(self) -> list[OpTypeTiming]:
        rows: dict[str, list[JudgedTiming]] = {}
        for node in self.judged():
            rows.setdefault(node.op_type, []).append(node)
        result = [
            OpTypeTiming(op, len(ns), sum(n.measured_s for n in ns), sum(n.bound_s for n in ns))
            for op, ns in rows.items()
        ]
        return sorted(result, key=lambda r: -r.measured_s)

    def to_dict(self) -> dict[str, Any]:
        return {
            "hardware": self.hardware,
            "margin": self.margin,
            "runs": self.runs,
            "warmup": self.warmup,
            "statistic": "median",
            "timer_resolution_s": RESOLUTION_S,
            "optimized": self.optimized,
            "cache_bandwidth": self.cache_bandwidth,
            "cache_bytes": self.cache_bytes,
            "judged_nodes": len(self.judged()),
            "cache_resident": self.count(CACHE_RESIDENT),
            "at_or_above_bound_node_share": self.node_share,
            "at_or_above_bound_time_share": self.time_share,
            "attainment": self.attainment,
            "measured_s": sum(n.measured_s for n in self.judged()),
            "predicted_s": sum(n.bound_s for n in self.judged()),
            "violations": len(self.violations),
            "passed": self.passed,
            "by_op_type": [row.to_dict() for row in self.by_op_type()],
            "nodes": [n.to_dict() for n in self.nodes],
            "not_run": list(self.not_run),
            "unattributed": list(self.unattributed),
        }


def check_timing(
    report: Report,
    model: onnx.ModelProto,
    feeds: Mapping[str, np.ndarray],
    runs: int = 10,
    warmup: int = 3,
    margin: float = DEFAULT_MARGIN,
    optimize: bool = False,
    threads: int | None = None,
) -> TimingCheck:
    from onnx_roofline.commands.verify.calibrate import cache_bandwidth, last_level_cache_bytes

    measured = profile(model, feeds, runs=runs, warmup=warmup, optimize=optimize, threads=threads)
    return judge(report, measured, margin, cache_bandwidth(threads=threads).rate, last_level_cache_bytes())


def judge(
    report: Report,
    measured: Profile,
    margin: float = DEFAULT_MARGIN,
    cache_bandwidth: float | None = None,
    cache_bytes: int | None = None,
) -> TimingCheck:
    nodes = []
    for kernel in measured.kernels:
        if not kernel.originals:
            continue
        results = [report.nodes[i] for i in kernel.originals]
        costed = ok_rows(results)
        bound_s = sum(r.time_s for r in costed) if len(costed) == len(results) else None
        floor_s = None
        if bound_s is None:
            verdict = NOT_COSTED
        elif len(results) > 1:
            verdict = FUSED
        elif not _beats(kernel.seconds, bound_s, margin):
            verdict = AT_OR_ABOVE
        else:
            floor_s = _cache_floor(results[0], cache_bandwidth, cache_bytes)
            verdict = CACHE_RESIDENT if floor_s is not None and not _beats(kernel.seconds, floor_s, margin) else BEATS
        nodes.append(
            NodeTiming(
                kernel=kernel.name,
                nodes=kernel.originals,
                names=tuple(r.name for r in results),
                op_type="+".join(r.op_type for r in results),
                measured_s=kernel.seconds,
                bound_s=bound_s,
                bound=results[0].bound if len(results) == 1 else None,
                verdict=verdict,
                cache_floor_s=floor_s,
            )
        )
    return TimingCheck(
        report.hardware.name,
        margin,
        measured.runs,
        measured.warmup,
        measured.optimized,
        tuple(nodes),
        measured.not_run,
        measured.unattributed,
        cache_bandwidth,
        cache_bytes,
    )


def _beats(measured_s: float, bound_s: float, margin: float) -> bool:
    """Faster than the bound even at the top of the timer's resolution and past the noise margin."""
    return measured_s + RESOLUTION_S < bound_s / (1 + margin)


def _cache_floor(node, cache_bandwidth: float | None, cache_bytes: int | None) -> float | None:
    """max(compute time, bytes at the in-cache rate) for a node whose bytes fit the cache, else None."""
    if cache_bandwidth is None or cache_bytes is None or node.cost.bytes > cache_bytes:
        return None
    return max(node.placement.compute_time_s, node.cost.bytes / cache_bandwidth)
