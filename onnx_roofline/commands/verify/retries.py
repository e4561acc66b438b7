"""verify on fragile graphs. A model onnxruntime loads may still fail on the values verify makes up:
an MoE expert that gets no token fails where its code takes the expert's first row (a Gather of
row 0, a Split of [1, n − 1]). Weights and inputs drawn from another seed route the tokens
otherwise, so a failed run is tried again at the next seeds before verify gives up, and the seed
that ran is said. Where every try fails, the error says what to give: for an MoE routing fewer
tokens than its experts need, the token count at which an empty expert is unlikely, as the --dim
that sets it."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from onnx_roofline.commands.verify.errors import RunFailed, VerifyError
from onnx_roofline.report.model import Report

T = TypeVar("T")

RETRIES = 3
"""Seeds tried after the first: an expert missed at one seed with probability p is missed at all
four with p⁴ (routing being drawn afresh with the weights and inputs)."""
EMPTY_EXPERT_CHANCE = 0.01
"""The chance, under uniform routing, that some expert of a layer gets no token, below which the
hint's token count keeps a run: E · (1 − k/E)^tokens ≤ this (a union bound)."""


@dataclass(frozen=True)
class Attempts:
    """The seed the checked run used, and the seeds before it that onnxruntime failed on."""

    seed: int
    failed: tuple[tuple[int, str], ...] = ()  # (seed, onnxruntime's message)

    @property
    def note(self) -> str | None:
        """One line where a retry happened, None otherwise."""
        if not self.failed:
            return None
        seeds = ", ".join(str(seed) for seed, _ in self.failed)
        plural = "s" if len(self.failed) > 1 else ""
        return f"ran at seed {self.seed}: onnxruntime failed at seed{plural} {seeds} ({self.failed[-1][1]})"

    def to_dict(self) -> dict[str, Any]:
        return {"seed": self.seed, "failed": [{"seed": seed, "error": error} for seed, error in self.failed]}


def with_retries(run: Callable[[int], T], seed: int, report: Report) -> tuple[T, Attempts]:
    """`run(seed)`, then `run(seed + 1)` ... while onnxruntime fails to run (RunFailed), RETRIES
    times at most; every try failing is a VerifyError that says what to give instead. A graph
    with no size that depends on data runs once: other values would fail it alike."""
    if not fragile(report):
        return run(seed), Attempts(seed)
    failed: list[tuple[int, str]] = []
    for attempt in range(seed, seed + RETRIES + 1):
        try:
            return run(attempt), Attempts(attempt, tuple(failed))
        except RunFailed as exc:
            failed.append((attempt, str(exc)))
    raise VerifyError(f"{failed[-1][1]} (at seeds {seed} to {seed + RETRIES} alike): {_advice(report)}")


def fragile(report: Report) -> bool:
    """Whether a size in the graph depends on data (a NonZero, a routing, durations): what other
    seeds change."""
    model = report.model
    return bool(model.bounds or model.assumed or model.experts or model.regulated)


def _advice(report: Report) -> str:
    """What to give a run that failed at every seed: more tokens to an MoE that routes too few to
    reach every expert, another seed otherwise."""
    layers = report.model.experts.layers if report.model.experts else ()
    layer = next((s for s in layers if s.tokens), None)
    if layer is not None and layer.tokens:  # one with tokens
        needed = tokens_for_every_expert(layer.experts, layer.top_k)
        if layer.tokens < needed:
            flag = _token_flag(report.model.dims, layer.tokens, needed)
            return (
                f"an MoE of {layer.experts} experts, top-{layer.top_k}, routes {layer.tokens} tokens here, and an "
                f"expert that gets none fails the run; at {needed} tokens each expert gets one but for a "
                f"{EMPTY_EXPERT_CHANCE:.0%} chance: {flag}"
            )
    return (
        "verify draws its inputs and absent weights at random: try another --seed, "
        "or give the inputs the run needs (--value NAME=V)"
    )


def tokens_for_every_expert(experts: int, top_k: int) -> int:
    """The fewest tokens at which, routed uniformly (each token to k distinct experts of E), some
    expert gets none with a chance of at most EMPTY_EXPERT_CHANCE: E · (1 − k/E)^n ≤ it."""
    if top_k >= experts:
        return 1
    return max(1, math.ceil(math.log(EMPTY_EXPERT_CHANCE / experts) / math.log(1 - top_k / experts)))


def _token_flag(dims: dict[str, int], tokens: int, needed: int) -> str:
    """The --dim that brings the tokens to `needed`: the largest bound dim the token count is a
    multiple of (the sequence, where batch is 1), scaled; words where none is."""
    candidates = sorted((size, name) for name, size in dims.items() if size > 1 and tokens % size == 0)
    if not candidates:
        return f"bind dims that give at least {needed} tokens"
    size, name = candidates[-1]
    return f"--dim {name}={math.ceil(needed * size / tokens)}"
