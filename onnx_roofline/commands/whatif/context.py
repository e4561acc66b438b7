"""Decode over context length: per-step latency and the KV cache's share of bytes as the past grows.

The context dim is the symbolic length of the KV-cache inputs (the non-leading symbol of the rank-4
inputs, e.g. `past_sequence` in past.{i}.key [batch, 12, past_sequence, 64]) unless named. The
KV share is the part of the bytes that grows with the past: bytes are a line in the past length
(fitted and checked over the points), and the share at L is (bytes(L) − bytes(0)) / bytes(L) —
the cache read and written, plus the mask row and, as written, the T-long score rows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from onnx_roofline.commands.whatif.affine import Line
from onnx_roofline.commands.whatif.session import WRITTEN, Session
from onnx_roofline.commands.whatif.sweep import SweepResult, sweep
from onnx_roofline.errors import DimensionError


@dataclass(frozen=True)
class ContextResult:
    dim: str
    sweep: SweepResult
    bytes_line: Line | None  # None when the bytes are not a line in the past length

    def kv_share(self, index: int) -> float | None:
        if self.bytes_line is None:
            return None
        moved = self.sweep.points[index].bytes
        return float((moved - self.bytes_line.intercept) / moved)

    def to_dict(self) -> dict:
        data = self.sweep.to_dict()
        data["study"] = "context"
        data["context_dim"] = self.dim
        for i, point in enumerate(data["points"]):
            point["kv_share"] = self.kv_share(i)
        return data


def context_dim(session: Session) -> str:
    """The symbol that sizes the cache: the non-leading symbolic dim of the rank-4 inputs — the
    one the present outputs do not carry, where there are several (the cache grows, past to
    present; a head size named as a dim, onnxruntime-genai's `kv_cache_dim`, is in both)."""
    graph = session.model.graph
    found = _rank4_symbols(graph.input)
    growing = [name for name in found if name not in _rank4_symbols(graph.output)]
    if len(growing) == 1:
        return growing[0]
    if len(found) != 1:
        seen = ", ".join(found) or "none"
        raise DimensionError(
            f"cannot tell the KV-cache length dim (candidates: {seen}); name it with --context NAME=L1,L2,..."
        )
    return found[0]


def _rank4_symbols(values) -> list[str]:
    """The symbolic dims after the first of the rank-4 values, in order, once each."""
    found: list[str] = []
    for value in values:
        dims = value.type.tensor_type.shape.dim
        if len(dims) == 4:
            found += [d.dim_param for d in list(dims)[1:] if d.dim_param and d.dim_param not in found]
    return found


def context_study(
    session: Session, lengths: Sequence[int], dim: str | None = None, view: str = WRITTEN
) -> ContextResult:
    dim = dim or context_dim(session)
    if len(lengths) < 2:
        raise DimensionError("--context needs at least two lengths (the KV share is fitted across them)")
    result = sweep(session, {dim: lengths}, view)
    xs = tuple(p.dims[dim] for p in result.points)
    line = Line.fit(xs, tuple(p.bytes for p in result.points)) if len(set(xs)) == len(xs) else None
    return ContextResult(dim, result, line)
