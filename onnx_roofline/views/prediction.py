"""The predicted time of a deployed report: each kernel at the fractions of peak real kernels
reach, its GEMM quantized into waves over the SMs, launches added (costs/prediction.py has the
formulas). A GEMM's M, N and K come from its lead node's output and FLOPs: out [..., M, N] (a
Conv's [B, C, H, W] as the implicit GEMM M = B·H·W, N = C), batch the leading dims, K = FLOPs /
(2·batch·M·N)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, cast

from onnx_roofline.costs.prediction import (
    DEFAULT_LAUNCH,
    LAUNCH_MODES,
    Prediction,
    kernel_time,
    launch_time,
    wave_quantization,
)
from onnx_roofline.costs.rules.registry import MATRIX
from onnx_roofline.model.tensors import all_ints
from onnx_roofline.report.model import DEPLOYED, OK, NodeResult, Report
from onnx_roofline.report.units import duration, percent
from onnx_roofline.views.ops import VIEWS

if TYPE_CHECKING:
    from onnx_roofline.costs.hardware.achievable import Achievable

__all__ = ("DEFAULT_LAUNCH", "LAUNCH_MODES", "predict", "predict_device")

CONVOLUTIONS = frozenset({"Conv", "ConvInteger", "QLinearConv", "FusedConv", "NhwcConv", "ConvTranspose"})


def predict(report: Report, launch: str = DEFAULT_LAUNCH, collectives_s: float = 0.0) -> Prediction:
    """The predicted run of a deployed `report` under `launch` ("graphs" or "eager"); a written
    report is predicted as if every node were its own kernel. `collectives_s`: the collectives'
    time a tensor-parallel study adds."""
    hw = report.hardware
    achievable = hw.achievable
    costed = [n for n in report.nodes if n.placement is not None]
    if achievable is None:
        bound = sum(n.placement.time_s for n in costed if n.placement is not None)
        return Prediction(bound + collectives_s, bound, 0.0, collectives_s, launch, report.kernels,
                          tuple(n.placement.time_s if n.placement is not None else None for n in report.nodes),
                          (f"{hw.name} has no achievable figures in the hardware table: predicted = bound",), None)  # fmt: skip
    per_kernel: list[float | None] = []
    launched: list[float] = []
    quantized = 0
    for node in report.nodes:
        if node.placement is None:
            per_kernel.append(None)
            continue
        if not _launches(node):
            per_kernel.append(node.placement.time_s)  # folded at load, or a pure view: nothing runs
            continue
        q = _quantization(report, node)
        quantized += q > 1.0
        seconds = kernel_time(
            node.placement.compute_time_s, node.placement.memory_time_s, achievable, q, _matrix_dtype(node)
        )
        per_kernel.append(seconds)
        launched.append(seconds)
    kernels_s = sum(t for t in per_kernel if t is not None)
    launch_s = launch_time(launched, launch, hw.launch_overhead, achievable)
    assumptions = (
        f"compute at {percent(achievable.compute_fraction)} of peak{_per_dtype_words(achievable)}, memory at "
        f"{percent(achievable.bandwidth_fraction)} of the bandwidth, no kernel under {duration(achievable.kernel_floor)}",
        f"GEMMs in waves of output tiles over {achievable.sms} SMs ({', '.join(f'{m}×{n}' for m, n in achievable.tiles)}, the best for each): "
        f"{quantized} kernel(s) lose time to wave quantization",
        _launch_words(launch, len(launched), hw.launch_overhead, achievable.graph_launch),
    ) + ((f"collectives {duration(collectives_s)}",) if collectives_s else ())
    return Prediction(kernels_s + launch_s + collectives_s, kernels_s, launch_s, collectives_s, launch, len(launched),
                      tuple(per_kernel), assumptions, achievable)  # fmt: skip


def _matrix_dtype(node: NodeResult) -> str | None:
    """The dtype class whose matrix peak a kernel runs at; None for vector work."""
    return node.dtype if node.unit == MATRIX else None


def _per_dtype_words(achievable) -> str:
    return "".join(
        f" ({dtype} GEMMs at {percent(fraction)})" for dtype, fraction in sorted(achievable.compute_fractions.items())
    )


def _launches(node: NodeResult) -> bool:
    """A deployed kernel launches unless folded or a pure view (KernelResult.launches); an
    as-written node, unless it is a pure view."""
    return bool(getattr(node, "launches", 0 if node.op_type in VIEWS else 1))


def _quantization(report: Report, node: NodeResult) -> float:
    """The wave quantization of a kernel whose matrix work is one GEMM or convolution (its lead
    node's); 1.0 for any other kernel or where its shapes are unknown."""
    lead = node
    if report.view == DEPLOYED and report.written is not None and hasattr(node, "lead"):
        lead = report.written.nodes[node.lead]
    if lead.unit != MATRIX or lead.cost is None or not lead.cost.flops or not lead.outputs or lead.outputs[0] is None:
        return 1.0
    shape = lead.outputs[0].shape
    if shape is None or len(shape) < 2 or not all_ints(shape) or not all(d > 0 for d in shape):
        return 1.0
    if lead.op_type in CONVOLUTIONS:
        batch, m, n = 1, shape[0] * math.prod(shape[2:]), shape[1]
    else:
        batch, m, n = math.prod(shape[:-2]), shape[-2], shape[-1]
    k = lead.cost.flops // (2 * batch * m * n)
    return wave_quantization(
        batch, m, n, k, cast("Achievable", report.hardware.achievable)
    )  # predict() asks only with figures


def _launch_words(launch: str, kernels: int, overhead: float | None, graph_launch: float) -> str:
    if launch == "eager":
        return f"launched eagerly: {kernels} kernels, none shorter than the {duration(overhead or 0.0)} launch overhead"
    return f"launched from a CUDA graph: {kernels} kernels × {duration(graph_launch)} + one graph launch ({duration(overhead or 0.0)})"


def predict_device(run, view: Report, launch: str = DEFAULT_LAUNCH) -> float:
    """One device's predicted step of `view` (a deployed report) run as `run` (views/parallel.py's
    DeviceRun, made from the same view): on one device the view's own prediction; split, each
    launched kernel's share at the achievable fractions (no wave quantization: the device's GEMM
    shapes are its share's), launched as `launch` says, then the collectives, on the critical
    path. The bound (`run.time_s`) where the hardware gives no achievable figures."""
    hardware = view.hardware
    achievable = hardware.achievable
    if achievable is None:
        return float(run.time_s)
    if run.devices == 1:
        return (view.prediction or predict(view, launch)).time_s + run.communication_s
    rows = [
        row for row in view.nodes if row.status == OK and row.cost is not None and row.placement is not None
    ]  # per_device's kernels
    kernels = [
        kernel_time(float(k.compute_s), float(k.memory_s(run.bandwidth)), achievable, matrix_dtype=_matrix_dtype(row))
        for row, k in zip(rows, run.kernels, strict=True)
        if _launches(row)
    ]
    return sum(kernels) + launch_time(kernels, launch, hardware.launch_overhead, achievable) + run.communication_s
