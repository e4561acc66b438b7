"""A kernel of the deployed view: the graph nodes it runs, what it reads and writes, its units."""

from __future__ import annotations

from onnx_roofline.records import record
from onnx_roofline.report.model import NodeResult
from onnx_roofline.views.units import UnitShare


@record
class KernelResult(NodeResult):
    """One kernel of the deployed view: a NodeResult whose `index` is its place in the execution
    order, `inputs`/`outputs` what it reads from and writes to memory, and `members` the graph
    nodes it runs."""

    members: tuple[int, ...] = ()
    lead: int = 0  # the graph node that names it (its matrix op; Q·Kᵀ for attention)
    kernel_matrix_flops: int = 0
    launches: int = 1  # 0: a folded node or a pure view, which launch nothing
    units: tuple[UnitShare, ...] = ()  # each unit's work, peak and time: the busiest sets the compute time

    @property
    def matrix_flops(self) -> int:
        return self.kernel_matrix_flops

    @property
    def figures_key(self) -> tuple:
        return (*NodeResult.figures_key.fget(self), id(self.units))  # type: ignore[attr-defined]

    def figures(self) -> dict:
        """A node's figures, and each unit's share (`peak` and `ridge` are the busiest unit's)."""
        return {**NodeResult.figures(self), "units": [u.to_dict() for u in self.units]}
