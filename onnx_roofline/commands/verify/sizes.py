"""Sizes that are data, checked at the run's.

How many elements a NonZero selects, how many boxes a NonMaxSuppression keeps: no static analysis
knows. The analysis costs such a size at the bound the graph fixes (shapes/bounds.py), at an
assumption (an MoE's routing, --nonzero-fraction), or leaves it, and all that reads it, uncosted.
The run knows every one. verify types each such value as the run found it and analyzes again
(`analyze(found_sizes=...)`), until no new one appears (a NonZero downstream of another), so that
every node is checked at the sizes it ran at; each `FoundSize` says what the analysis had against
what the run found."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, cast

from onnx_roofline.model.tensors import TensorInfo
from onnx_roofline.report.model import OK, NodeResult, Report


@dataclass(frozen=True)
class FoundSize:
    """A value whose size is data: the analysis' size for it (`at most 800x3`, `2x6 assumed`,
    `unknown`) and the run's."""

    node: str
    op_type: str
    value: str
    analysis: str
    run: tuple[int, ...]

    @property
    def line(self) -> str:
        return f"{self.node} ({self.op_type}) {self.value}: analysis {self.analysis}, run {_shape(self.run)}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "op_type": self.op_type,
            "value": self.value,
            "analysis": self.analysis,
            "run": list(self.run),
        }


def at_run_sizes(report: Report, observed: Mapping[str, TensorInfo],
                 analyze_at: Callable[[Mapping[str, TensorInfo]], Report]) -> tuple[Report, tuple[FoundSize, ...]]:  # fmt: skip
    """The report analyzed again (`analyze_at`) with every data-dependent value typed as the run
    found it, and those values with what the analysis that first met each had for it. The report
    itself where the graph has none."""
    found: dict[str, FoundSize] = {}
    while new := [size for size in _data_dependent(report, observed) if size.value not in found]:
        found.update((size.value, size) for size in new)
        report = analyze_at({name: observed[name] for name in found})
    return report, tuple(found.values())


def _data_dependent(report: Report, observed: Mapping[str, TensorInfo]) -> Iterator[FoundSize]:
    """The values whose size is data and that the run produced (a body's where the run exposed it): the outputs typed at a
    bound, those of a node sized by an assumption, and the unknown outputs of an uncosted node
    whose inputs are all known (a NonZero with no assumption, an NMS whose maximum is given at run
    time)."""
    model = report.model
    bounded = {bound.output for bound in model.bounds}
    assumed = {
        *(model.assumed.nodes if model.assumed else ()),
        *(model.experts.sized if model.experts else ()),
        *(model.regulated.sized if model.regulated else ()),
    }  # a length regulator's frames (shapes/durations.py)
    for (
        node
    ) in report.nodes:  # bodies' too: an NMS in the If branch a detector takes (the run observed the branch, bodies.py)
        for tensor in node.outputs:
            seen = observed.get(tensor.name) if tensor is not None else None
            if tensor is None or seen is None or seen.shape is None or seen.sequence:
                continue
            analysis = _analysis(node, tensor, bounded, assumed)
            if analysis is not None:
                yield FoundSize(
                    node.name, node.op_type, tensor.name, analysis, cast("tuple[int, ...]", seen.shape)
                )  # a run's sizes


def _analysis(node: NodeResult, tensor: TensorInfo, bounded: set[str], assumed: set[str]) -> str | None:
    """What the analysis had for a data-dependent value; None where the value's size is not data."""
    if tensor.name in bounded:
        return f"at most {_shape(tensor.shape)}"
    if node.name in assumed:
        return f"{_shape(tensor.shape)} assumed"
    if node.status != OK and not tensor.is_known and all(t.is_known for t in node.inputs if t is not None):
        return "unknown"
    return None


def _shape(shape: tuple | None) -> str:
    return "?" if shape is None else "x".join("?" if d is None else str(d) for d in shape) or "scalar"
