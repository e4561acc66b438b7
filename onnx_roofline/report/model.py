"""The report: per-node results and model totals, and its JSON form (schema_version 1, DESIGN.md)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
import functools
from dataclasses import dataclass, field
from typing import Any

import onnx

from onnx_roofline.costs import CompositeCost, Cost
from onnx_roofline.hardware import Hardware
from onnx_roofline.records import record
from onnx_roofline.roofline import MEMORY, UNKNOWN, Placement
from onnx_roofline.rules.registry import MATRIX
from onnx_roofline.root_cause import RootCause
from onnx_roofline.tensors import TensorInfo

SCHEMA_VERSION = 1

OK = "ok"
UNSUPPORTED = "unsupported"  # no cost rule for the op
UNKNOWN_SHAPE = "unknown-shape"  # an input or output shape is not fully known
RULE_ERROR = "rule-error"  # the rule could not cost this instance (reason says why)
DATA_DEPENDENT = "data-dependent"  # the cost depends on values: string sizes, decoded images


@record
class NodeResult:
    index: int
    name: str
    op_type: str
    domain: str
    inputs: tuple[TensorInfo | None, ...]
    outputs: tuple[TensorInfo | None, ...]
    status: str
    reason: str | None = None
    cost: Cost | None = None
    parameters: int | None = None  # elements of the weights (initializers) the node reads
    unit: str | None = None
    dtype: str | None = None  # dtype class whose peak applies (fp16, int8, ...)
    peak: float | None = None
    placement: Placement | None = None
    proto: onnx.NodeProto | None = field(default=None, repr=False, compare=False)

    @property
    def metadata(self) -> Mapping[str, str]:
        """The node's metadata_props as exported (dynamo's pkg.torch.onnx.name_scopes, ...); not in
        JSON. Read on demand: dynamo exports carry stack traces that the analysis itself never needs."""
        return {entry.key: entry.value for entry in self.proto.metadata_props} if self.proto is not None else {}

    @property
    def bound(self) -> str:
        return self.placement.bound if self.placement else UNKNOWN

    @property
    def time_s(self) -> float | None:
        return self.placement.time_s if self.placement else None

    @property
    def matrix_flops(self) -> int:
        """FLOPs on the matrix unit: all of them for a matrix op, a body's share for a Loop or If."""
        if isinstance(self.cost, CompositeCost):
            return self.cost.matrix_flops
        return self.cost.flops if self.cost is not None and self.unit == MATRIX else 0

    def to_dict(self) -> dict[str, Any]:
        # Each object tested once rather than per figure: this runs for every node of the report.
        cost, place = self.cost, self.placement
        flops = useful = transcendentals = dequantize = bytes_read = bytes_written = total_bytes = None
        if cost is not None:
            flops, useful, transcendentals, dequantize = cost.flops, cost.useful, cost.transcendentals, cost.dequantize_flops
            bytes_read, bytes_written, total_bytes = cost.bytes_read, cost.bytes_written, cost.bytes
        intensity = ridge = time_s = compute_time_s = memory_time_s = None
        bound = UNKNOWN
        if place is not None:
            intensity, ridge, bound = place.intensity, place.ridge, place.bound
            time_s, compute_time_s, memory_time_s = place.time_s, place.compute_time_s, place.memory_time_s
        return {
            "index": self.index,
            "name": self.name,
            "op_type": self.op_type,
            "domain": self.domain,
            "inputs": [None if t is None else t.to_dict() for t in self.inputs],
            "outputs": [None if t is None else t.to_dict() for t in self.outputs],
            "flops": flops,
            "useful_flops": useful,
            "transcendentals": transcendentals,
            "dequantize_flops": dequantize,
            "bytes_read": bytes_read,
            "bytes_written": bytes_written,
            "bytes": total_bytes,
            "parameters": self.parameters,
            "intensity": intensity,
            "unit": self.unit,
            "dtype": self.dtype,
            "peak": self.peak,
            "ridge": ridge,
            "bound": bound,
            "time_s": time_s,
            "compute_time_s": compute_time_s,
            "memory_time_s": memory_time_s,
            "status": self.status,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class ModelInfo:
    path: str | None
    node_count: int
    opsets: dict[str, int]
    dims: dict[str, int]
    precision: str | None  # the --dtype override, when the graph is costed in another precision
    parameters: int  # elements of all distinct initializers
    shape_inference: str
    shape_root_cause: RootCause | None = None  # why shapes stayed unknown, where they did
    shape_warnings: tuple[str, ...] = ()  # shape passes that failed

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "node_count": self.node_count,
            "opsets": dict(sorted(self.opsets.items())),
            "dims": dict(sorted(self.dims.items())),
            "precision": self.precision,
            "parameters": self.parameters,
            "shape_inference": self.shape_inference,
            "shape_warnings": list(self.shape_warnings),
        }


@dataclass(frozen=True)
class Totals:
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
    def over(cls, nodes: tuple[NodeResult, ...] | list[NodeResult]) -> Totals:
        costed = [n for n in nodes if n.cost is not None and n.placement is not None]
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


@dataclass(frozen=True)
class Report:
    model: ModelInfo
    hardware: Hardware
    nodes: tuple[NodeResult, ...]

    @functools.cached_property
    def totals(self) -> Totals:
        """Computed once: every renderer asks (the report is immutable)."""
        return Totals.over(self.nodes)

    @functools.cached_property
    def uncosted(self) -> Uncosted:
        return Uncosted.of(self)

    @property
    def unsupported(self) -> dict[str, int]:
        """Nodes whose cost is unknown, by op type (never counted as zero in the totals)."""
        return dict(sorted(Counter(n.op_type for n in self.nodes if n.status != OK).items()))

    @property
    def status_counts(self) -> dict[str, int]:
        return dict(sorted(Counter(n.status for n in self.nodes).items()))

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "model": self.model.to_dict(),
            "hardware": self.hardware.to_dict(),
            "nodes": [n.to_dict() for n in self.nodes],
            "totals": self.totals.to_dict(),
            "unsupported": self.unsupported,
            "status_counts": self.status_counts,
            "uncosted": self.uncosted.to_dict(),
        }


@dataclass(frozen=True)
class Uncosted:
    """How many nodes have no cost and the root cause: the first node, in graph order, that is
    uncosted for a reason of its own (no rule, outputs that could not be typed) rather than
    because something upstream is unknown."""

    count: int
    node_count: int
    root_cause: RootCause | None

    @classmethod
    def of(cls, report: Report) -> Uncosted:
        count = sum(1 for n in report.nodes if n.status != OK)
        if not count:
            return cls(0, len(report.nodes), None)
        causes = [report.model.shape_root_cause] if report.model.shape_root_cause is not None else []
        own = next((n for n in report.nodes if n.status not in (OK, UNKNOWN_SHAPE)), None)
        if own is not None:
            causes.append(RootCause(own.index, own.name, own.op_type, own.domain, own.reason or own.status))
        if not causes:  # unknown shapes with no node to blame (a graph input left unbound)
            first = next(n for n in report.nodes if n.status != OK)
            causes.append(RootCause(first.index, first.name, first.op_type, first.domain, first.reason or first.status))
        return cls(count, len(report.nodes), min(causes, key=lambda cause: cause.index))

    @property
    def message(self) -> str | None:
        """One line: "328 of 1061 nodes uncosted, downstream of X (Op): reason"."""
        if not self.count:
            return None
        cause = self.root_cause
        return f"{self.count} of {self.node_count} nodes uncosted, downstream of {cause.name} ({cause.op_type}): {cause.reason}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "root_cause": self.root_cause.to_dict() if self.root_cause else None,
            "message": self.message,
        }
