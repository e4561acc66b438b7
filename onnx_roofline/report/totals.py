"""A report's totals over its nodes: a module of its own, so that the groupings (breakdown.py)
sum their groups without importing the Report, which delegates to them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

from onnx_roofline.costs.roofline import MEMORY

TYPE_CHECKING = False
if TYPE_CHECKING:
    from onnx_roofline.costs.cost import Cost
    from onnx_roofline.costs.roofline import Placement
    from onnx_roofline.report.costed import PlacedCost

    class Placed(Protocol):
        """What a total sums: a report's node, a deployed kernel, a fused view's group."""

        @property
        def cost(self) -> Cost | None: ...
        @property
        def placement(self) -> Placement | None: ...
        @property
        def matrix_flops(self) -> int: ...

    class _Costed(Placed, Protocol):
        """One with a cost and a placement, which every ok one has."""

        @property
        def cost(self) -> PlacedCost: ...
        @property
        def placement(self) -> Placement: ...


@dataclass(frozen=True)
class Totals:
    """Sums over the costed nodes: FLOPs, bytes, time (the sum of per-node bounds), the share of
    time spent memory-bound, and how many nodes were costed and not."""

    flops: int
    useful_flops: int
    transcendentals: int
    dequantize_flops: int
    matrix_flops: int  # FLOPs on the matrix unit (MatMul, Gemm, Conv, attention), bodies included
    bytes_read: int
    bytes_written: int
    time_s: float
    memory_bound_time_s: float
    costed_nodes: int
    uncosted_nodes: int

    @property
    def bytes(self) -> int:
        return self.bytes_read + self.bytes_written

    @property
    def memory_bound_time_share(self) -> float | None:
        return self.memory_bound_time_s / self.time_s if self.time_s else None

    @property
    def intensity(self) -> float | None:
        return self.flops / self.bytes if self.bytes else None

    @classmethod
    def over(cls, nodes: Sequence[Placed]) -> Totals:
        costed = cast("list[_Costed]", [n for n in nodes if n.cost is not None and n.placement is not None])
        return cls(  # sums over lists, which build faster than generators: a report has thousands of nodes
            flops=sum([n.cost.flops for n in costed]),
            useful_flops=sum([n.cost.useful for n in costed]),
            transcendentals=sum([n.cost.transcendentals for n in costed]),
            dequantize_flops=sum([n.cost.dequantize_flops for n in costed]),
            matrix_flops=sum([n.matrix_flops for n in costed]),
            bytes_read=sum([n.cost.bytes_read for n in costed]),
            bytes_written=sum([n.cost.bytes_written for n in costed]),
            time_s=sum([n.placement.time_s for n in costed]),
            memory_bound_time_s=sum([n.placement.time_s for n in costed if n.placement.bound == MEMORY]),
            costed_nodes=len(costed),
            uncosted_nodes=len(nodes) - len(costed),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "flops": self.flops,
            "useful_flops": self.useful_flops,
            "transcendentals": self.transcendentals,
            "dequantize_flops": self.dequantize_flops,
            "matrix_flops": self.matrix_flops,
            "bytes_read": self.bytes_read,
            "bytes_written": self.bytes_written,
            "bytes": self.bytes,
            "intensity": self.intensity,
            "time_s": self.time_s,
            "memory_bound_time_share": self.memory_bound_time_share,
            "costed_nodes": self.costed_nodes,
            "uncosted_nodes": self.uncosted_nodes,
        }
