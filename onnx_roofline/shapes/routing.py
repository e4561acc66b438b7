"""How many tokens each expert of an MoE layer takes: the routing load, an assumption said aloud.

A router's choices are data; the analysis assumes a load (`--expert-load`, `analyze(...,
expert_load=...)`), and every format names it:

- `uniform` (the default): every expert takes `tokens · k / E` of the `tokens · k` choices;
- `skew=F` (1 ≤ F ≤ E/k): the choices fall uniformly on a hot set of `H = max(k, round(E / F))`
  experts, each taking `tokens · k / H`, and the rest take none — F times the uniform share;
- `capacity=C`: every expert runs at its capacity bound, `ceil(C · tokens · k / E)` rows (at most
  every token), as a capacity-factor kernel pads to it.

A token-selecting expert's NonZero chooses among the `tokens · k` cells of its row of the one-hot
mask, so the load is the share of those cells it selects (`share`). The deployed view asks how
many *distinct* experts a step of T tokens touches (`distinct`): with T tokens each picking k of
the E experts uniformly, an expert is missed by all of them with probability (1 − k/E)^T, so
E·(1 − (1 − k/E)^T) are touched — k at one token, nearly E at large batch."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from onnx_roofline.model.experts import ROUTED, MoeLayer
from onnx_roofline.model.nodes import Node

UNIFORM, SKEW, CAPACITY = "uniform", "skew", "capacity"


@dataclass(frozen=True)
class ExpertLoad:
    """The routing load assumed: `kind` UNIFORM, SKEW (factor F) or CAPACITY (factor C)."""

    kind: str = UNIFORM
    factor: float = 1.0

    @classmethod
    def parse(cls, text: str) -> ExpertLoad:
        """`uniform`, `skew=F` or `capacity=C`; raises ValueError saying what is wrong."""
        kind, _, value = text.strip().partition("=")
        if kind == UNIFORM and not value:
            return cls()
        if kind in (SKEW, CAPACITY) and value:
            try:
                factor = float(Fraction(value))
            except (ValueError, ZeroDivisionError):
                factor = float("nan")
            if factor >= 1 or (kind == CAPACITY and factor > 0):
                return cls(kind, factor)
        raise ValueError(f"malformed expert load {text!r}: expected uniform, skew=F (F ≥ 1) or capacity=C (C > 0)")

    def hot(self, experts: int, top_k: int) -> int:
        """How many experts take tokens: all but under a skew."""
        return max(top_k, min(experts, round(experts / self.factor))) if self.kind == SKEW else experts

    def share(self, experts: int, top_k: int, index: int | None) -> Fraction:
        """The share of its `tokens · k` candidate cells expert `index` selects (its rows / (tokens · k));
        at most 1/k (a token takes an expert once). An expert of unknown index is a hot one."""
        if self.kind == CAPACITY:
            return min(Fraction(self.factor).limit_denominator(10**6) / experts, Fraction(1, top_k))
        hot = self.hot(experts, top_k)
        return Fraction(1, hot) if index is None or index < hot else Fraction(0)

    def distinct(self, experts: int, top_k: int, tokens: int) -> float:
        """The distinct experts `tokens` tokens touch: H·(1 − (1 − k/H)^T) over the H that take tokens."""
        hot = self.hot(experts, top_k)
        return hot * (1 - (1 - top_k / hot) ** tokens)

    def rows(self, experts: int, top_k: int, tokens: int) -> int:
        """The expert rows a grouped kernel runs for `tokens` tokens: their T·k choices, or every
        expert padded to its capacity."""
        if self.kind == CAPACITY:
            return experts * min(
                tokens, math.ceil(Fraction(self.factor).limit_denominator(10**6) * tokens * top_k / experts)
            )
        return tokens * top_k

    def describe(self, experts: int, top_k: int) -> str:
        if self.kind == CAPACITY:
            return f"capacity {self.factor:g}: every expert runs ceil({self.factor:g}·tokens·{top_k}/{experts}) rows, at most every token"
        hot = self.hot(experts, top_k)
        if hot == experts:
            return f"uniform routing: each expert takes tokens·{top_k}/{experts} rows"
        return f"skew {self.factor:g}: tokens·{top_k}/{hot} rows on each of {hot} hot experts, none on the other {experts - hot}"

    def __str__(self) -> str:
        return UNIFORM if self.kind == UNIFORM else f"{self.kind}={self.factor:g}"


UNIFORM_LOAD = ExpertLoad()


class ExpertSizing:
    """The shape engine's view of the routing: the token count of each expert's NonZero (the
    selections of the routed layers model/experts.py found) under `load`, and the nodes it sized."""

    def __init__(self, layers: Sequence[MoeLayer], load: ExpertLoad):
        self.load = load
        self.selections = {
            e.selection: (layer, e.index) for layer in layers if layer.form == ROUTED for e in layer.routed
        }
        self.sized: dict[str, None] = {}  # node names, in the order met

    def count(self, node: Node, candidates: int) -> int | None:
        """The cells of its `candidates` (k per token) an expert's NonZero selects; None for any other NonZero."""
        found = self.selections.get(node.outputs[0])
        if found is None:
            return None
        layer, index = found
        self.sized[node.name or f"{node.op_type}_{node.position}"] = None
        return math.ceil(candidates * self.load.share(layer.experts, layer.top_k, index))
