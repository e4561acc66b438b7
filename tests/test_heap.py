"""heap.release: the C library's free pages handed back after a pass over a large graph only."""

from __future__ import annotations

from onnx_roofline.model import heap


def test_a_large_graph_trims_and_a_small_one_does_not(monkeypatch):
    calls = []
    monkeypatch.setattr(heap, "_malloc_trim", lambda: calls.append)
    heap.release(heap.LARGE_GRAPH - 1)
    assert calls == []
    heap.release(heap.LARGE_GRAPH)
    assert calls == [0]  # malloc_trim(0): keep no padding at the top of the heap


def test_without_the_call_it_does_nothing(monkeypatch):
    monkeypatch.setattr(heap, "_malloc_trim", lambda: None)
    heap.release(10**6)
