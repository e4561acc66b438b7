"""The report's costed rows as the type checker sees them: a row whose status is ok has a cost and
a placement (the walk gives it both), so code that reads only those rows reads them without a
None check (`ok_rows`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, TypeGuard, cast

from onnx_roofline.model.status import OK

if TYPE_CHECKING:
    from onnx_roofline.costs.cost import Cost
    from onnx_roofline.costs.roofline import Placement
    from onnx_roofline.report.model import NodeResult

    class PlacedCost(Cost):
        """A row's cost: the walk filled in the default bytes a rule left None (type checker only)."""

        bytes_read: int
        bytes_written: int

    class CostedNode(NodeResult):
        """A NodeResult with its cost and placement, for the type checker only: at run time the
        rows are NodeResults."""

        cost: PlacedCost
        placement: Placement
        unit: str
        dtype: str
        peak: float

        @property
        def time_s(self) -> float: ...


def is_ok(row: NodeResult) -> TypeGuard[CostedNode]:
    """Whether the row's status is ok, narrowing it to a CostedNode."""
    return row.status == OK


def ok_rows(nodes: Iterable[NodeResult]) -> list[CostedNode]:
    """The rows whose status is ok, in order."""
    return cast("list[CostedNode]", [n for n in nodes if n.status == OK])
