"""verify(): analyze, check every external-data reference and the budget, materialize weights,
feed, run, compare, and optionally time — in that order: nothing is read, synthesized or run
before the checks that could refuse it. A model the analysis flags invalid (model/conformance.py)
is not run: its verdict is "invalid".

A model with model-local functions is checked with them inlined (inlining.py, as the analysis
costs a call: its body inlined): a run exposes no value inside a call, so the call itself could
only be checked at its outputs, and a model exported as one function call (torch's
`export_modules_as_functions`) would check nothing but its outputs."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import onnx

from onnx_roofline.analysis import analyze
from onnx_roofline.commands.verify import budget as budgets
from onnx_roofline.commands.verify.bodies import expose_loop_values, implied_values, inline_taken_branches, unstacked
from onnx_roofline.commands.verify.compare import UNCHECKED, Comparison, NodeCheck, compare, observed_infos
from onnx_roofline.commands.verify.inputs import bound_inputs, make_feeds
from onnx_roofline.commands.verify.limits import DEFAULT_BUDGET, Budget
from onnx_roofline.commands.verify.locales import with_installed_locales
from onnx_roofline.commands.verify.retries import Attempts, with_retries
from onnx_roofline.commands.verify.run import chunk_bytes, observe
from onnx_roofline.commands.verify.sizes import FoundSize, at_run_sizes
from onnx_roofline.commands.verify.weights import materialize
from onnx_roofline.costs.hardware import Hardware
from onnx_roofline.model import files
from onnx_roofline.model.inlining import inline_functions
from onnx_roofline.model.loader import load_model
from onnx_roofline.report.model import Report
from onnx_roofline.shapes.defaults import derived_dims
from onnx_roofline.shapes.dims import bind, symbolic_dims
from onnx_roofline.shapes.engine import infer
from onnx_roofline.shapes.input_values import bind_values, value_arrays
from onnx_roofline.shapes.sizing import Sizing

if TYPE_CHECKING:
    from onnx_roofline.commands.verify.attainment import TimingCheck  # imported where timing is asked for


@dataclass(frozen=True)
class Verification:
    report: Report
    comparison: Comparison
    weights_loaded: int
    weights_synthesized: int
    timing: TimingCheck | None = None  # when timing was asked for
    sizes: tuple[FoundSize, ...] = ()  # the values whose size is data: the analysis' against the run's (sizes.py)
    strict: bool = False  # an unchecked node fails the verification
    attempts: Attempts | None = None  # the seed that ran, and those onnxruntime failed on before it (retries.py)

    @property
    def passed(self) -> bool:
        """Nothing checked disagrees (unchecked nodes aside: `unchecked` lists them, `verdict` weighs them)."""
        return not self.comparison.disagreements and (self.timing is None or self.timing.passed)

    @property
    def unchecked(self) -> tuple[NodeCheck, ...]:
        """The nodes neither checked nor bounds-checked: not costed, or their tensors not observed."""
        return tuple(node for node in self.comparison.nodes if node.outcome in UNCHECKED)

    @property
    def verdict(self) -> str:
        """ "invalid" where a runtime would refuse the model (the analysis' conformance check, as
        `check` fails it: nothing is run); "pass" only where every node was checked; "incomplete"
        where nothing disagrees but some node was not; "fail" where something disagrees, or some
        node was not checked and `strict`."""
        if self.report.model.invalid:
            return "invalid"
        if not self.passed or (self.strict and self.unchecked):
            return "fail"
        return "incomplete" if self.unchecked else "pass"


def verify(
    model: str | os.PathLike | onnx.ModelProto,
    hw: str | Hardware = "h100",
    dims: Mapping[str, int] | None = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    seed: int = 0,
    threads: int | None = None,
    timing: Mapping[str, Any] | None = None,
    budget: Budget = DEFAULT_BUDGET,
    values: Mapping[str, Sequence[float] | float] | None = None,
    strict: bool = False,
) -> Verification:
    """Run `model` in onnxruntime (CPU) and check the analysis against it. `timing`, when given, holds
    the keyword arguments of `attainment.check_timing` (runs, warmup, margin, optimize). `values`:
    small graph inputs given a value (analyze's), which the run is fed too (an If's condition:
    the branch costed is the branch run). `strict`: a node left unchecked fails the verification
    (its verdict is otherwise "incomplete")."""
    values = dict(values or {})
    proto = load_model(model)
    dims = {
        **derived_dims(symbolic_dims(proto.graph), dims or {}),
        **(dims or {}),
    }  # `past + sequence` from the two given, fed so
    inlined = _inlined(proto) if proto.functions else None
    given = dict(values)

    def analyzed(found_sizes: Mapping | None = None) -> Report:
        """The analysis of the model (the inlined graph is what is analyzed, run and compared; the
        report still names the file), `found_sizes` typed as the run found them (sizes.py)."""
        sizing = Sizing(dims=dims, input_shapes=input_shapes, values=given, found_sizes=found_sizes or {})
        if inlined is None:
            return analyze(model, hw, sizing)
        report = analyze(inlined, hw, sizing)
        return dataclasses.replace(
            report,
            model=dataclasses.replace(report.model, path=None if isinstance(model, onnx.ModelProto) else str(model)),
        )

    report = analyzed()
    proto = proto if inlined is None else inlined
    base_dir = None if isinstance(model, onnx.ModelProto) else files.model_folder(model)
    files.locate_all(proto, base_dir)  # every reference checked (refused, present or absent) before anything is read
    if report.model.invalid:  # what analyze flags and check fails is neither run nor passed
        return Verification(report, Comparison((), (), 0, (), ()), 0, 0, strict=strict)
    values = {**implied_values(report), **values}  # the branch a default took is the branch run
    bound = load_model(proto)
    bind_values(bound, values)
    folded = infer(bind(bound, dims, input_shapes)).folded
    chunk = chunk_bytes(report.memory.peak_activation_bytes)
    budgets.check(report, proto, bound_inputs(proto, dims, input_shapes), folded, budget, chunk)
    proto = inline_taken_branches(proto, report)  # the branches taken: their values observed, their rows checked
    proto, stacked = expose_loop_values(proto, report)  # a Loop's or Scan's body values, as extra scan outputs
    output_bytes = {
        t.name: t.nbytes if t.is_known else None for node in report.nodes for t in node.outputs if t is not None
    }
    runnable = with_installed_locales(proto)  # a StringNormalizer's locale this system has (locales.py)

    def run(at_seed: int):
        weights = materialize(proto, base_dir, at_seed)
        feeds = {**make_feeds(proto, dims, input_shapes, at_seed), **value_arrays(proto, values)}
        return (
            weights,
            feeds,
            {
                **observed_infos(proto, feeds),
                **observe(runnable, feeds, weights.arrays, output_bytes, chunk, threads=threads),
            },
        )

    (weights, feeds, observed), attempts = with_retries(
        run, seed, report
    )  # another seed where onnxruntime fails on these values
    observed.update(unstacked(observed, stacked))
    report, sizes = at_run_sizes(report, observed, analyzed)
    comparison = compare(report, proto, observed, folded)
    timed = None
    if timing is not None:
        from onnx_roofline.commands.verify.attainment import check_timing

        timed = check_timing(report, weights.model, feeds, threads=threads, **timing)
    return Verification(report, comparison, weights.loaded, weights.synthesized, timed, sizes, strict, attempts)


def _inlined(model: onnx.ModelProto) -> onnx.ModelProto | None:
    """The model with its local functions' calls inlined, or None where onnx cannot inline them
    (each call is then checked at its outputs only)."""
    try:
        return inline_functions(model)
    except Exception:  # onnx's C++ raises several types; the calls stay as they are
        return None
