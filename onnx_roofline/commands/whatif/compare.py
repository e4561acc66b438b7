"""One model on several accelerators side by side: latency, memory-bound share, the top kernel."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from onnx_roofline.commands.whatif.session import WRITTEN, Session, view_name
from onnx_roofline.commands.whatif.sweep import main_ridge
from onnx_roofline.commands.whatif.workload import Work, work_per_run
from onnx_roofline.costs.hardware import Hardware, load_hardware
from onnx_roofline.errors import RooflineError


@dataclass(frozen=True)
class HardwareRow:
    hardware: Hardware
    latency_s: float
    work: Work
    memory_share: float | None
    intensity: float | None
    ridge: float | None
    top_name: str | None
    top_op: str | None
    top_share: float | None  # of the predicted time
    top_bound: str | None
    top_foldable: bool = False  # a runtime computes it once at load: the top figure is not a kernel to speed up

    def to_dict(self) -> dict:
        return {
            "hardware": self.hardware.key,
            "name": self.hardware.name,
            "latency_s": self.latency_s,
            "throughput": self.work.rate(self.latency_s),
            "unit": self.work.unit,
            "memory_bound_share": self.memory_share,
            "intensity": self.intensity,
            "ridge": self.ridge,
            "top": {
                "name": self.top_name,
                "op_type": self.top_op,
                "share": self.top_share,
                "bound": self.top_bound,
                "constant_foldable": self.top_foldable,
            },
        }


@dataclass(frozen=True)
class CompareResult:
    setup: dict
    view: str
    rows: tuple[HardwareRow, ...]

    def to_dict(self) -> dict:
        return {"study": "compare", **self.setup, "view": self.view, "rows": [r.to_dict() for r in self.rows]}


def parse_hardware_list(text: str) -> list[Hardware]:
    """`h100,h200,a100` → loaded entries (each name or spec file resolved once)."""
    names = [name.strip() for name in text.split(",")]
    if not all(names):
        raise RooflineError(f"malformed --hw {text!r}: expected NAME[,NAME...], e.g. h100,h200,a100")
    return [load_hardware(name) for name in dict.fromkeys(names)]


def compare(session: Session, hardware: Sequence[Hardware], view: str = WRITTEN) -> CompareResult:
    rows, view = [], view_name(view)
    for hw in hardware:
        report = session.report(hardware=hw)
        measured = session.view(report, view)
        totals = measured.totals
        costed = [n for n in measured.nodes if n.time_s is not None]
        top = max(costed, key=lambda n: n.time_s, default=None)
        rows.append(
            HardwareRow(
                hw,
                totals.time_s,
                work_per_run(report, session.graph_inputs),
                totals.memory_bound_time_share,
                totals.intensity,
                main_ridge(measured),
                top.name if top else None,
                top.op_type if top else None,
                top.time_s / totals.time_s if top and totals.time_s else None,
                top.bound if top else None,
                bool(getattr(top, "constant_foldable", False)),
            )
        )
    setup = {**session.describe(), "hardware": [hw.key for hw in hardware]}
    return CompareResult(setup, view, tuple(rows))
