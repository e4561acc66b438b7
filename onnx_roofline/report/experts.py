"""What a report says of a mixture-of-experts model: its layers (experts, top-k, shared experts),
its parameters total against active per token, and the routing load its figures assume.

Active per token: every weight but the routed experts' counts once, and of a layer's E routed
experts a token runs k, so `active = total − Σ_layers (E − k)/E · routed parameters` (the experts of
a layer are alike). The routed experts' rows are the load's (shapes/routing.py): an assumption
the terminal, HTML, Markdown (findings.py) and JSON (`model.experts`) all name."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from onnx_roofline.model.experts import DENSE, MoeLayer
from onnx_roofline.model.nodes import Node
from onnx_roofline.model.tensors import TensorInfo, known
from onnx_roofline.shapes.routing import ExpertLoad


@dataclass(frozen=True)
class LayerSummary:
    """One MoE layer as the report gives it."""

    form: str  # "routed" (tokens selected per expert) or "dense" (every token through every expert, as written)
    router: str  # the router node's name
    experts: int
    top_k: int
    shared_experts: int
    tokens: int | None  # the tokens the router scores at these dims
    rows: tuple[int | None, ...]  # each routed expert's rows as costed (dense: every token, as written)
    routed_parameters: int
    shared_parameters: int
    layer: MoeLayer  # the structure found: nodes, weights (model/experts.py)

    def to_dict(self) -> dict[str, Any]:
        return {"form": self.form, "router": self.router, "experts": self.experts, "top_k": self.top_k,
                "shared_experts": self.shared_experts, "tokens": self.tokens, "rows_per_expert": list(self.rows),
                "parameters": {"routed": self.routed_parameters, "shared": self.shared_parameters}}  # fmt: skip


@dataclass(frozen=True)
class ExpertsSummary:
    """The MoE layers, the parameters total and active per token, and the routing load assumed."""

    load: ExpertLoad
    layers: tuple[LayerSummary, ...]
    parameters: int
    active_parameters: int
    sized: tuple[str, ...]  # the experts' NonZeros the load sized

    @property
    def assumption(self) -> str:
        """The load, and what it sizes: the routed experts' NonZeros, or (dense) the deployed kernel alone."""
        first = self.layers[0]
        text = self.load.describe(first.experts, first.top_k) + (
            f" ({len(self.sized)} NonZero sized by it)" if self.sized else ""
        )
        if any(s.form == DENSE for s in self.layers):
            text += "; dense layers run every token through every expert as written, the routed kernel deployed"
        return text

    @property
    def message(self) -> str:
        """One line: layers, experts, top-k, shared, parameters."""
        shapes = sorted({(s.experts, s.top_k, s.shared_experts, s.form) for s in self.layers})
        kinds = "; ".join(f"{e} experts, top-{k}, {sh} shared, {form}" for e, k, sh, form in shapes)
        return (f"{len(self.layers)} MoE layer{'s' if len(self.layers) != 1 else ''} ({kinds}); parameters "
                f"{self.parameters:,} total, {self.active_parameters:,} active per token")  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        return {"load": str(self.load), "assumption": self.assumption, "layers": [s.to_dict() for s in self.layers],
                "parameters": {"total": self.parameters, "active_per_token": self.active_parameters}, "sized": list(self.sized)}  # fmt: skip


def summarize(layers: Sequence[MoeLayer], load: ExpertLoad, nodes: Sequence[Node], values: Mapping[str, TensorInfo],
              sizes: Mapping[str, int], parameters: int, sized: Sequence[str]) -> ExpertsSummary | None:  # fmt: skip
    """The summary of the layers found, at the shapes inferred; None where there are none. `sizes`:
    each weight's elements; `parameters`: the model's."""
    if not layers:
        return None
    summaries = tuple(_layer(layer, nodes, values, sizes) for layer in layers)
    idle = sum(Fraction(s.experts - s.top_k, s.experts) * s.routed_parameters for s in summaries)
    return ExpertsSummary(load, summaries, parameters, parameters - int(idle), tuple(sized))


def _layer(
    layer: MoeLayer, nodes: Sequence[Node], values: Mapping[str, TensorInfo], sizes: Mapping[str, int]
) -> LayerSummary:
    scores = values.get(layer.scores)
    tokens = scores.numel // layer.experts if scores is not None and scores.is_known else None
    if layer.form == DENSE:
        rows: tuple[int | None, ...] = (tokens,) * layer.experts
    else:
        rows = tuple(_count(values.get(expert.selection or "")) for expert in layer.routed)
    return LayerSummary(layer.form, nodes[layer.router].name, layer.experts, layer.top_k, len(layer.shared), tokens, rows,
                        layer.routed_parameters(sizes), layer.shared_parameters(sizes), layer)  # fmt: skip


def _count(selection: TensorInfo | None) -> int | None:
    """The tokens a NonZero selected: its [rank, count] output's count."""
    return selection.shape[1] if known(selection) and len(selection.shape) == 2 else None
