"""The serving envelope of a decoder: per batch size and tensor-parallel degree, the decode step's
latency and tokens/s, the time to first token, the memory each device holds and whether it fits;
the largest batch that fits and the batch from which the step is compute-bound.

Every figure comes from the deployed view of the graph at the bound dims (the cache at the
context, `--kv-cache inplace` by default: a serving engine writes the new rows in place), split
across devices as views/tensor_parallel.py infers from the graph and views/parallel.py costs it.
A decode step at context C attends to C tokens: the past is bound to C − 1. The time to first
token is the prefill of `prompt` tokens for the whole batch at once, from a prefill graph
(`--prefill`, or the model itself where its token input has a symbolic sequence)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cache
from typing import cast

from onnx_roofline.commands.whatif.affine import Line, ceil
from onnx_roofline.commands.whatif.context import context_dim
from onnx_roofline.commands.whatif.piecewise import KernelLines, share_crossing
from onnx_roofline.commands.whatif.session import DEPLOYED, Session, batch_dim
from onnx_roofline.costs.capacity import LargestFit, MemoryBudget, largest_fitting
from onnx_roofline.costs.collectives import MODEL as COLLECTIVE_MODEL
from onnx_roofline.errors import DimensionError
from onnx_roofline.report.units import percent
from onnx_roofline.shapes.defaults import NO_DEFAULT, default_dims
from onnx_roofline.shapes.dims import symbolic_dims
from onnx_roofline.views.parallel import ACTIVATIONS, OVERLAP, DeviceRun, Exact, per_device
from onnx_roofline.views.prediction import predict_device
from onnx_roofline.views.tensor_parallel import SPLIT_PATTERN, plan_tensor_parallel

DEFAULT_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


@dataclass(frozen=True)
class ServePoint:
    batch: int
    decode: DeviceRun  # one decode step, per device
    prefill: DeviceRun | None  # the prompt's prefill for the batch, per device
    limit: bool = False  # the largest batch that fits, added to those asked
    budget: MemoryBudget | None = None  # what each device's memory is judged against (costs/capacity.py)
    predicted_s: float | None = None  # the decode step predicted (views/prediction.py predict_device), beside its bound
    predicted_ttft_s: float | None = None  # the prefill predicted

    @property
    def tokens_per_s(self) -> float:
        """The bound's: batch / the step's floor, a rate no engine exceeds."""
        return self.batch / self.decode.time_s

    @property
    def predicted_tokens_per_s(self) -> float | None:
        return None if self.predicted_s is None else self.batch / self.predicted_s

    @property
    def fits(self) -> bool | None:
        """Each device's footprint within its usable memory: the one memory model's verdict."""
        return None if self.budget is None else self.budget.fits(self.decode.memory_bytes)

    def to_dict(self) -> dict:
        run = self.decode
        return {
            "batch": self.batch,
            "largest_that_fits": self.limit,
            "step_latency_s": run.time_s,
            "kernel_time_s": run.kernel_time_s,
            "communication": run.collectives_dict(),
            "tokens_per_s": self.tokens_per_s,
            "tokens_per_s_per_device": self.tokens_per_s / run.devices,
            "compute_bound_share": run.compute_share,
            "flops_per_device": float(run.flops),
            "bytes_per_device": float(run.bytes),
            "ttft_s": None if self.prefill is None else self.prefill.time_s,
            "predicted_step_latency_s": self.predicted_s,
            "predicted_tokens_per_s": self.predicted_tokens_per_s,
            "predicted_ttft_s": self.predicted_ttft_s,
            "memory_per_device": {
                **run.memory_dict(),
                **(self.budget.to_dict() if self.budget else {}),
                "fits": self.fits,
            },
        }


@dataclass(frozen=True)
class Degree:
    devices: int
    refusal: str | None  # why this degree is not costed (heads not divisible, no blocks, no interconnect)
    points: tuple[ServePoint, ...] = ()
    memory_fit: LargestFit | None = None  # the largest batch whose per-device footprint fits (costs/capacity.py)
    compute_crossing: Fraction | None = None  # the batch from which compute-bound kernels take half the step

    @property
    def fits_up_to(self) -> int | None:
        return None if self.memory_fit is None else self.memory_fit.largest

    @property
    def memory_line(self) -> Line | None:
        """Bytes per device in the batch, through batch 1 and 2."""
        fit = self.memory_fit
        return (
            None if fit is None or fit.per_unit is None or fit.intercept is None else Line(fit.intercept, fit.per_unit)
        )

    def to_dict(self) -> dict:
        line = self.memory_line
        return {
            "tp": self.devices,
            "refused": self.refusal,
            "largest_batch_that_fits": self.fits_up_to,
            "memory_fit": None if self.memory_fit is None else self.memory_fit.to_dict("batch"),
            "memory_per_device": None
            if line is None
            else {"intercept": float(line.intercept), "per_batch": float(line.slope)},
            "compute_bound_batch": ceil(self.compute_crossing),
            "compute_bound_crossing": None if self.compute_crossing is None else float(self.compute_crossing),
            "points": [p.to_dict() for p in self.points],
        }


@dataclass(frozen=True)
class ServeResult:
    setup: dict
    context: int
    prompt: int | None
    dims: dict[str, str | None]  # the batch, past and prompt dims bound
    plan: dict | None  # the split found (None: no blocks)
    interconnect: dict | None
    assumptions: tuple[str, ...]
    degrees: tuple[Degree, ...]
    elapsed_s: float

    def to_dict(self) -> dict:
        return {
            "study": "serve",
            **self.setup,
            "view": DEPLOYED,
            "context": self.context,
            "prompt": self.prompt,
            "bound_dims": self.dims,
            "tensor_parallel": self.plan,
            "interconnect": self.interconnect,
            "assumptions": list(self.assumptions),
            "elapsed_s": self.elapsed_s,
            "degrees": [d.to_dict() for d in self.degrees],
        }


def serve(session: Session, degrees: Sequence[int] = (1,), batches: Sequence[int] = DEFAULT_BATCHES, context: int = 1024,
          prompt: int | None = None, prefill: Session | None = None) -> ServeResult:  # fmt: skip
    """The serving study of the decode graph `session` holds (see the module docstring)."""
    start = time.perf_counter()
    batch, past = batch_dim(session), context_dim(session)
    if context < 1:
        raise DimensionError(f"--context {context}: a decode step attends to at least one token")
    given = prefill  # a prefill graph of its own (--prefill): its file's findings are said beside the model's
    prefill = prefill or (_twin(session) if prompt is not None and _sequence_dim(session) else None)
    if prompt is not None and prefill is None:
        raise DimensionError(
            "--prompt needs a prefill graph: --prefill MODEL (the decode graph reads one token per sequence)"
        )
    if prompt is not None and given is not None and _sequence_dim(given) is None:
        raise DimensionError(
            f"--prefill {given.path or 'model'}: its token input has no symbolic sequence to bind --prompt "
            "to (a decode graph, one token per sequence?): give the prefill graph"
        )

    @cache
    def decode_view(b: int):
        return session.view(session.report(_with_roles(session, {batch: b, past: context - 1})), DEPLOYED)

    @cache
    def prefill_view(b: int):
        twin = cast(Session, prefill)  # asked for only where there is a prefill graph, its prompt given
        dims = {batch_dim(twin): b, cast(str, _sequence_dim(twin)): cast(int, prompt), **_empty_past(twin)}
        return twin.view(twin.report(_with_roles(twin, dims)), DEPLOYED)

    plan = plan_tensor_parallel(decode_view(1).written)
    prefill_plan = plan_tensor_parallel(prefill_view(1).written) if prefill is not None else None
    link = session.hardware.interconnect
    results = []
    for n in degrees:
        refusal = plan.refusal(n) or (
            f"{session.hardware.key} lists no interconnect: no tensor parallelism costed"
            if n > 1 and link is None
            else None
        )
        if refusal:
            results.append(Degree(n, refusal))
            continue
        runs = lambda b, n=n: per_device(decode_view(b), plan, n, link)  # noqa: E731
        budget = session.hardware.memory_budget

        def footprint(b: int, runs: Callable[[int], DeviceRun] = runs) -> float:
            return runs(b).memory_bytes

        fit = largest_fitting(footprint, budget)  # the one memory model: at TP 1, Session.footprint's total
        fits = fit.largest
        asked = sorted(set(batches) | ({fits} if fits else set()))
        points = tuple(_point(b, runs(b), decode_view(b), per_device(prefill_view(b), prefill_plan, n, link) if prefill_plan else None,
                              prefill_view(b) if prefill_plan else None, b == fits and b not in batches, budget) for b in asked)  # fmt: skip
        results.append(Degree(n, None, points, fit, _compute_crossing(runs(1), runs(2))))
    dims = {"batch": batch, "past": f"{past} = context - 1"} | ({"prompt": _sequence_dim(prefill)} if prefill else {})
    split = any(d.devices > 1 and d.refusal is None for d in results)  # nothing is said of a split no degree ran
    setup = session.describe() | ({"prefill_invalid": [flag.to_dict() for flag in given.invalid]} if given else {})
    return ServeResult(setup, context, prompt, dims, plan.to_dict(decode_view(1).written) if plan.found else None,
                       None if link is None or not split else link.to_dict(), _assumptions(session, split), tuple(results),
                       time.perf_counter() - start)  # fmt: skip


def _point(
    batch: int, decode: DeviceRun, decode_view, prefill: DeviceRun | None, prefill_view, limit: bool, budget
) -> ServePoint:
    """A point with its predicted step and TTFT beside their bounds (CUDA graphs: serving engines capture decode)."""
    predicted_ttft = None if prefill is None else predict_device(prefill, prefill_view)
    return ServePoint(batch, decode, prefill, limit, budget, predict_device(decode, decode_view), predicted_ttft)


def _compute_crossing(one: DeviceRun, two: DeviceRun) -> Fraction | None:
    """The batch from which compute-bound kernels take half the kernel time: each kernel's FLOPs,
    bytes and compute time are lines in the batch (through batch 1 and 2), solved exactly."""
    kernels = [KernelLines(a.name, _line(a.flops, b.flops), _line(a.bytes, b.bytes), (_line(a.compute_s, b.compute_s),))
               for a, b in zip(one.kernels, two.kernels, strict=False)]  # fmt: skip
    return share_crossing(kernels, one.bandwidth)


def _line(at_one: Exact, at_two: Exact) -> Line:
    return Line(Fraction(2 * at_one - at_two), Fraction(at_two - at_one))


def _twin(session: Session) -> Session:
    """The same model in a session of its own: a merged decoder's prefill takes the other branch,
    so its deployed plan is not the decode step's."""
    return Session(session.loaded, session.hardware, session.dims, session.input_shapes, session.precision, session.partial,
                   session.values, session.kv_cache, session.fp32_matmul, session.nonzero_fraction, session.expert_load, session.frames_per_token,
                   session.string_bytes)  # fmt: skip


def _with_roles(session: Session, given: dict[str, int]) -> dict[str, int]:
    """`given` and every other unbound dim at the size its role implies with them: a decode step's
    sequence 1, a total length the past plus the sequence (shapes/defaults.py)."""
    implied = default_dims(symbolic_dims(session.model.graph), {**session.dims, **given})
    return given | {
        name: size for name, (size, rule) in implied.items() if rule != NO_DEFAULT and name not in session.dims
    }


def _sequence_dim(session: Session) -> str | None:
    """The symbolic sequence of the token input [batch, sequence] (None where it is fixed)."""
    graph = session.model.graph
    for value in graph.input:
        dims = value.type.tensor_type.shape.dim
        if (
            value.name in session.graph_inputs and len(dims) == 2 and value.type.tensor_type.elem_type in (6, 7)
        ):  # int32, int64
            return dims[1].dim_param or None
    return None


def _empty_past(session: Session) -> dict[str, int]:
    """A merged decoder's prefill: the past bound to 0 (a prefill graph has none to bind)."""
    try:
        return {context_dim(session): 0}
    except DimensionError:
        return {}


def _assumptions(session: Session, split: bool) -> tuple[str, ...]:
    """Every assumption the figures rest on, as the table prints them and the JSON lists them; those
    of the split only where a degree > 1 was costed."""
    link = session.hardware.interconnect
    kv = f"updated {session.kv_cache}" if session.kv_cache else "none"
    return (
        *((f"split: {SPLIT_PATTERN}",
           f"collectives: an all-reduce after every block and the embedding, an all-gather of the logits; {COLLECTIVE_MODEL}"
           + ("" if link is None else f"; {link.name}, {link.fabric}, {link.bandwidth / 1e9:g} GB/s per direction"),
           f"overlap: {OVERLAP}",
           f"KV cache: {kv}; KV heads divided among the devices, or where the devices outnumber them one whole KV head per device, "
           "replicated (vLLM, TensorRT-LLM)") if split else (f"KV cache: {kv}",)),
        f"memory: weights split as the plan says, replicated ones whole; {ACTIVATIONS}; fits within "
        f"{percent(session.hardware.memory_utilization)} of each device's memory, the rest the runtime's workspace (--memory-utilization)",
        "latency: the deployed view's kernels at their roofline bound, per device, plus the collectives; no launch overhead",
    )  # fmt: skip
