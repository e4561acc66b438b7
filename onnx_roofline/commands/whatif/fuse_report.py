"""The graph as written beside its fusion plan, with each decomposed attention shown both ways: written,
Q·Kᵀ writes the S×T scores (memory-bound for long T); fused, one kernel reads Q, K, V and writes O,
so its intensity is about S·T/(S+T) FLOP/B in fp16 (the lesson's formula) from the matmuls alone."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from onnx_roofline.commands.whatif.session import Session
from onnx_roofline.costs.cost import Cost
from onnx_roofline.costs.roofline import Placement
from onnx_roofline.model.tensors import KnownTensor
from onnx_roofline.report.model import Report, Totals
from onnx_roofline.views.flash import AttentionMatch
from onnx_roofline.views.fusion import FusedGroup, FusedView, PlannedGroup

if TYPE_CHECKING:
    from onnx_roofline.report.costed import CostedNode


@dataclass(frozen=True)
class AttentionRow:
    name: str
    queries: int  # S
    keys: int  # T
    heads: int  # batch × heads: the S×T score matrices
    head_size: int  # dh
    scores_node: CostedNode  # the Q·Kᵀ node as written
    pattern_bytes: int  # as written: every node of the pattern
    pattern_time_s: float
    matmul_flops: int  # the two matmuls: 2·S·T·dh + 2·S·T·dv per score matrix
    kernel: FusedGroup

    @property
    def matmul_intensity(self) -> float | None:
        return self.matmul_flops / self.kernel.cost.bytes if self.kernel.cost and self.kernel.cost.bytes else None

    def to_dict(self) -> dict:
        qk, kernel = self.scores_node, self.kernel
        return {
            "name": self.name,
            "S": self.queries,
            "T": self.keys,
            "heads": self.heads,
            "head_size": self.head_size,
            "written": {
                "qk_flops": qk.cost.flops,
                "qk_bytes": qk.cost.bytes,
                "qk_intensity": qk.placement.intensity,
                "qk_bound": qk.bound,
                "pattern_bytes": self.pattern_bytes,
                "pattern_time_s": self.pattern_time_s,
            },
            "fused": {
                "flops": kernel.cost.flops if kernel.cost else None,
                "matmul_flops": self.matmul_flops,
                "bytes": kernel.cost.bytes if kernel.cost else None,
                "intensity": kernel.placement.intensity if kernel.placement else None,
                "matmul_intensity": self.matmul_intensity,
                "ridge": kernel.placement.ridge if kernel.placement else None,
                "bound": kernel.bound,
                "time_s": kernel.time_s,
            },
        }


@dataclass(frozen=True)
class FusionStudy:
    setup: dict
    report: Report
    fused: FusedView
    attention: tuple[AttentionRow, ...]

    def to_dict(self, top: int = 10) -> dict:
        kernels = sorted((k for k in self.fused.nodes if k.time_s is not None), key=lambda k: -(k.time_s or 0.0))
        return {
            "study": "fuse",
            **self.setup,
            "written": _totals(self.report.totals, len(self.report.nodes)),
            "fused": _totals(self.fused.totals, len(self.fused.nodes)),
            "kernel_kinds": _kinds(self.fused),
            "attention": [a.to_dict() for a in self.attention],
            "top_fused_kernels": [k.to_dict() for k in kernels[:top]],
        }


def fusion_study(session: Session) -> FusionStudy:
    report = session.report()
    fused = session.fused(report)
    rows = tuple(_attention_row(report, planned, kernel) for planned, kernel in fused.attention() if kernel.cost)
    return FusionStudy(session.describe(), report, fused, rows)


def _attention_row(report: Report, planned: PlannedGroup, kernel: FusedGroup) -> AttentionRow:
    match = cast(AttentionMatch, planned.attention)  # fused.attention() pairs the planned attentions
    # A fused kernel with a cost was costed from its members: each is a costed row, its tensors known.
    qk, pv = cast("CostedNode", report.nodes[match.scores]), cast("CostedNode", report.nodes[match.values])
    scores = cast(KnownTensor, qk.outputs[0])
    *_, queries, keys = scores.shape
    members = cast("list[CostedNode]", [report.nodes[i] for i in planned.members])
    return AttentionRow(
        name=qk.name,
        queries=queries,
        keys=keys,
        heads=scores.numel // (queries * keys),
        head_size=cast(KnownTensor, qk.inputs[0]).shape[-1],
        scores_node=qk,
        pattern_bytes=sum(n.cost.bytes for n in members),
        pattern_time_s=sum(n.time_s for n in members),
        matmul_flops=qk.cost.flops + pv.cost.flops,
        kernel=kernel,
    )


def kernel_figures(kernel: FusedGroup) -> tuple[Cost, Placement]:
    """A fused kernel's cost and placement, where the study shows it: it has a time or a cost, and
    a kernel costed from its members is placed as well."""
    return cast(Cost, kernel.cost), cast(Placement, kernel.placement)


def _totals(totals: Totals, kernels: int) -> dict:
    return {
        "kernels": kernels,
        "flops": totals.flops,
        "bytes": totals.bytes,
        "time_s": totals.time_s,
        "memory_bound_time_share": totals.memory_bound_time_share,
        "intensity": totals.intensity,
    }


def _kinds(fused: FusedView) -> dict[str, int]:
    counts: dict[str, int] = {}
    for planned in fused.plan.groups:
        counts[planned.kind] = counts.get(planned.kind, 0) + 1
    return counts
