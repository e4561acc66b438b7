"""What one run of a model produces, so a latency becomes a throughput.

A graph whose first input is integer token ids [batch, sequence] produces batch·sequence tokens per
run (decode: sequence is 1, so batch tokens per step; prefill: batch·sequence); one whose first
input is a float [N, C, H, W] image batch produces N images. Anything else counts runs."""

from __future__ import annotations

from dataclasses import dataclass

from onnx_roofline.model.tensors import known
from onnx_roofline.report.model import Report
from onnx_roofline.views.graph import tensor_table

_INTEGER = {"int32", "int64", "uint32", "uint64", "int16", "uint16", "int8", "uint8"}


@dataclass(frozen=True)
class Work:
    amount: int
    unit: str  # "tokens", "images", "runs"

    def rate(self, seconds: float | None) -> float | None:
        return self.amount / seconds if seconds else None


def work_per_run(report: Report, graph_inputs: tuple[str, ...]) -> Work:
    tensors = tensor_table(report)
    first = next((tensors[name] for name in graph_inputs if name in tensors), None)
    if not known(first):
        return Work(1, "runs")
    if first.dtype in _INTEGER and first.rank in (1, 2):
        return Work(first.numel, "tokens")
    if first.rank == 4 and first.dtype not in _INTEGER:
        return Work(first.shape[0], "images")
    return Work(1, "runs")
