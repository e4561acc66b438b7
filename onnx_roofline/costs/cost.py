"""The cost of one node: FLOPs, transcendentals and bytes moved."""

from __future__ import annotations

from dataclasses import fields

from onnx_roofline.records import record


@record
class Cost:
    """What a rule returns. FLOPs count a multiply-add as 2; transcendentals (exp, log, tanh, erf,
    sqrt, ...) are their own column. A bytes field left as None takes the framework default
    (each distinct input read once, each output written once); a rule sets it only where the op
    touches part of a tensor (Gather, Slice) or none of it (views)."""

    flops: int = 0
    transcendentals: int = 0
    bytes_read: int | None = None
    bytes_written: int | None = None
    useful_flops: int | None = None
    """FLOPs that contribute to the result, where fewer than executed (causal attention computes
    the full S×T rectangle but uses the lower triangle); None: all of them. The roofline uses `flops`."""
    unit: str | None = None
    """The unit this instance runs on, where the rule decides per node (an Einsum that only sums
    is vector work); None: the rule's registered unit."""
    dequantize_flops: int = 0
    """FLOPs that dequantize weights inside a weight-only quantized matmul ((q − zero point)·scale
    per weight element, MatMulNBits): vector work beside the matrix product, a column of its own
    like transcendentals, not in `flops` (and, like them, not in the time bound)."""
    parameters: tuple[tuple[int, int], ...] = ()
    """(input slot, elements) pairs for inputs whose parameter count is not their stored element
    count: a packed quantized weight counts its logical K·N weights, its scales and zero points 0
    (quantization metadata). The walk counts a slot only where it holds an initializer; slots not
    listed count their elements as stored."""
    load_flops: tuple[tuple[tuple[int, ...], int], ...] = ()
    """(input slots, FLOPs) pairs: FLOPs in `flops` that read only those inputs (a weight's zero
    point subtracted from it, QLinearMatMul, MatMulInteger, ...). As written they run every time;
    where every one of those inputs is constant the deployed view folds them at load."""

    @property
    def useful(self) -> int:
        return self.flops if self.useful_flops is None else self.useful_flops

    @property
    def bytes(self) -> int:
        return self.bytes_read + self.bytes_written  # type: ignore[operator]

    def __add__(self, other: Cost) -> Cost:
        """Sum of two resolved costs (subgraph bodies, fused groups)."""
        for cost in (self, other):
            if cost.bytes_read is None or cost.bytes_written is None:
                raise ValueError("only costs with resolved bytes can be added")
        summed = {
            f.name: getattr(self, f.name) + getattr(other, f.name)
            for f in fields(Cost)
            if f.name not in ("useful_flops", "unit", "parameters", "load_flops")
        }
        return Cost(**summed, useful_flops=self.useful + other.useful)


VIEW = Cost(bytes_read=0, bytes_written=0)
"""A pure view (Reshape, Squeeze, Identity, ...): no arithmetic, no data moved."""


@record
class CompositeCost(Cost):
    """The summed cost of a subgraph (an If branch, a Loop body × trips): its time is the sum of
    its nodes' roofline times, not one roofline placement of the summed FLOPs and bytes."""

    time_s: float = 0.0
    memory_bound_time_s: float = 0.0
    matrix_flops: int = 0  # the body's FLOPs on the matrix unit (a Loop of Gemms is matrix work)


ADDITIVE = (
    "flops",
    "transcendentals",
    "bytes_read",
    "bytes_written",
    "dequantize_flops",
    "time_s",
    "memory_bound_time_s",
    "matrix_flops",
)
"""The CompositeCost fields that add up over a body's nodes and scale with its trips."""
