"""One model loaded once and analyzed at many points: only what depends on the dims is redone.

The file is parsed and validated once (loader.LoadedModel: analyze() copies it per call, so it is
never mutated), checked for conformance by the first analysis and its findings said by every
later one (`invalid`: a runtime would refuse the file, whatever the dims), hardware is resolved
once per name, and the fusion plan — a function of the graph's structure, not its sizes — is
built once and re-costed at every point."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from functools import cached_property

import onnx

from onnx_roofline.analysis import analyze
from onnx_roofline.costs.capacity import LargestFit, largest_fitting
from onnx_roofline.costs.hardware import Hardware, load_hardware
from onnx_roofline.costs.memory import Footprint
from onnx_roofline.errors import DimensionError
from onnx_roofline.model.loader import LoadedModel, loaded
from onnx_roofline.report.model import Report
from onnx_roofline.shapes.routing import UNIFORM_LOAD, ExpertLoad
from onnx_roofline.shapes.sizing import Sizing

TYPE_CHECKING = False
if TYPE_CHECKING:
    from onnx_roofline.model.conformance import Invalid
    from onnx_roofline.views.fusion import FusionPlan  # the deployed view is imported where it is asked for

WRITTEN, DEPLOYED = "written", "deployed"  # the two views every command names (docs/cost-model.md, "Two views")
FORMER_NAMES = {"unfused": WRITTEN, "fused": DEPLOYED}  # the studies' former words for them, still accepted


def view_name(view: str) -> str:
    """ "written" or "deployed", from either or a former name; a ValueError for anything else."""
    view = FORMER_NAMES.get(view, view)
    if view not in (WRITTEN, DEPLOYED):
        raise ValueError(f"no view {view!r}: written or deployed")
    return view


class Session:
    def __init__(
        self,
        model: str | os.PathLike | onnx.ModelProto | LoadedModel,
        hw: str | Hardware = "h100",
        dims: Mapping[str, int] | None = None,
        input_shapes: Mapping[str, Sequence[int]] | None = None,
        precision: str | None = None,
        partial: bool = False,
        values: Mapping[str, Sequence[float] | float] | None = None,
        kv_cache: str = "inplace",
        fp32_matmul: str = "ieee",
        nonzero_fraction: float | None = None,
        expert_load: ExpertLoad = UNIFORM_LOAD,
        frames_per_token: float | None = None,
        string_bytes: int | None = None,
    ):
        self.loaded = loaded(model)
        self.path, self.model = self.loaded.path, self.loaded.model
        self.fp32_matmul = fp32_matmul  # applied to every hardware a report is made on
        self.hardware = (hw if isinstance(hw, Hardware) else load_hardware(hw)).with_fp32_matmul(fp32_matmul)
        self.dims = dict(dims or {})
        self.input_shapes = dict(input_shapes or {})
        self.precision = precision
        self.partial = partial
        self.values = dict(values or {})
        self.kv_cache = kv_cache  # --kv-cache: inplace (the default) or copy
        self.nonzero_fraction = nonzero_fraction  # --nonzero-fraction (selection.py)
        self.expert_load = expert_load  # --expert-load (routing.py)
        self.frames_per_token = frames_per_token  # --frames-per-token (shapes/durations.py)
        self.string_bytes = string_bytes  # --string-bytes (shapes/texts.py)
        self._plans: dict[tuple, object] = {}  # fusion plans by the graph a report walked (rows.py's key)
        self._deployed_plans: dict[tuple, FusionPlan] = {}
        self._has_kv_cache: bool | None = None  # learned from the first deployed view
        self.incomplete: Report | None = None  # the report with the most nodes uncosted (--partial), if any

    def report(self, dims: Mapping[str, int] | None = None, hardware: Hardware | None = None) -> Report:
        """The written report at the session's dims overridden by `dims`."""
        sizing = Sizing(dims={**self.dims, **(dims or {})}, input_shapes=self.input_shapes, values=self.values,
                        nonzero_fraction=self.nonzero_fraction, expert_load=self.expert_load, frames_per_token=self.frames_per_token,
                        string_bytes=self.string_bytes)  # fmt: skip
        hw = (hardware or self.hardware).with_fp32_matmul(self.fp32_matmul)
        report = analyze(self.loaded, hw, sizing, partial=self.partial, precision=self.precision)
        if self.loaded.invalid is None:  # the first analysis checked the file: the later ones say what it found
            self.loaded = dataclasses.replace(self.loaded, invalid=report.model.invalid)
        if report.uncosted.count > (self.incomplete.uncosted.count if self.incomplete else 0):
            self.incomplete = report
        return report

    @property
    def invalid(self) -> tuple[Invalid, ...]:
        """Why a runtime would refuse the file (model/conformance.py), as the session's first
        analysis found it: every study says it (its JSON's `invalid`, a warning on stderr)."""
        return self.loaded.invalid or ()

    def view(self, report: Report, view: str):
        """`report` itself (written) or its deployed view (a former name of either is taken)."""
        if view_name(view) == WRITTEN:
            return report
        from onnx_roofline.views.deployed import deploy, deployed_plan

        key = _walked(report)
        if key not in self._deployed_plans:
            self._deployed_plans[key] = deployed_plan(report)
        deployed = deploy(report, self.kv_cache, self._deployed_plans[key])
        self._has_kv_cache = deployed.kv_cache is not None
        return deployed

    def footprint(self, dims: Mapping[str, int] | None = None) -> Footprint:
        """The footprint at the session's dims overridden by `dims`, as every command judges what
        fits: the deployed view's, the KV cache as --kv-cache says (costs/memory.py)."""
        return self.view(self.report(dims), DEPLOYED).memory

    def largest_fitting(
        self, dim: str, dims: Mapping[str, int] | None = None, known: Mapping[int, int] | None = None
    ) -> LargestFit:
        """The largest value of `dim` whose footprint (at the session's dims and `dims`) fits the
        hardware's memory budget, exactly (costs/capacity.py). `known`: footprints already analysed."""
        known = dict(known or {})
        return largest_fitting(lambda x: known[x] if x in known else self.footprint({**(dims or {}), dim: x}).total_bytes,
                               self.hardware.memory_budget)  # fmt: skip

    def fused(self, report: Report):
        """The fusion plan applied alone (no folding, no KV-cache mode): what the `fuse` study sets
        beside the graph as written."""
        from onnx_roofline.views.fusion import fuse  # only when asked

        return fuse(report, self.fusion_plan(report))

    def fusion_plan(self, report: Report):
        """Built once per graph walked; valid at every dims that walk the same nodes."""
        key = _walked(report)
        if key not in self._plans:
            from onnx_roofline.views.fusion import plan_fusion

            self._plans[key] = plan_fusion(report, self.graph_outputs)
        return self._plans[key]

    @cached_property
    def graph_inputs(self) -> tuple[str, ...]:
        initializers = {t.name for t in self.model.graph.initializer}
        return tuple(v.name for v in self.model.graph.input if v.name not in initializers)

    @cached_property
    def graph_outputs(self) -> frozenset[str]:
        return frozenset(v.name for v in self.model.graph.output)

    def describe(self) -> dict:
        """What every study's JSON says about its setup."""
        return {
            "path": self.path,
            "hardware": self.hardware.key,
            "dims": dict(sorted(self.dims.items())),
            "precision": self.precision,
            "kv_cache": None if self._has_kv_cache is False else self.kv_cache,  # null: the model has no cache
            "memory_utilization": self.hardware.memory_utilization,
            "fp32_matmul": self.fp32_matmul,
            "nonzero_fraction": self.nonzero_fraction,
            "expert_load": str(self.expert_load),
            "invalid": [flag.to_dict() for flag in self.invalid],
            "uncosted": self.uncosted,
        }

    @property
    def uncosted(self) -> dict | None:
        """The point with the most nodes left uncosted (`--partial`): its dims and `uncosted` as
        analyze's JSON gives it (count, root cause, message); None where every node was costed.
        A study's figures leave them out."""
        report = self.incomplete
        return (
            None if report is None else {"dims": dict(sorted(report.model.dims.items())), **report.uncosted.to_dict()}
        )


def _walked(report: Report) -> tuple:
    """The rows a report walked, by name and op: one graph walks other rows at other dims where an
    If takes the other branch (a merged decoder at past 0 and past 12), and a plan holds only for
    the rows it was made from."""
    return tuple((node.name, node.op_type) for node in report.nodes)


def batch_dim(session: Session) -> str:
    """The graph's one symbolic dim named as a batch (`batch`, `batch_size`, `N`: defaults.py)."""
    from onnx_roofline.shapes.defaults import default_dims
    from onnx_roofline.shapes.dims import symbolic_dims

    found = [name for name, (_, rule) in default_dims(symbolic_dims(session.model.graph)).items() if rule == "batch"]
    if len(found) != 1:
        raise DimensionError(
            f"cannot tell the batch dim (candidates: {', '.join(found) or 'none'}); name the dim to solve for with --over DIM"
        )
    return found[0]
