"""Handing the memory a pass has freed back to the system, where the C library keeps it.

glibc's malloc keeps freed blocks in its heap for reuse, but Python takes its small objects from
mappings of its own, which never reuse them: what ONNX's C++ inference frees (a million-node
graph's copies and tables, about a kilobyte a node) and the large tables of validation stayed
in the process beside everything allocated afterwards, and counted in its peak. `malloc_trim`
returns the free pages at once. Where the C library has no such call (macOS, musl) it is a no-op."""

from __future__ import annotations

import functools

LARGE_GRAPH = 10_000  # nodes from which a trim is worth its milliseconds


def release(nodes: int) -> None:
    """Return freed heap pages to the system after a pass over a graph of `nodes` nodes."""
    if nodes >= LARGE_GRAPH and (trim := _malloc_trim()) is not None:
        trim(0)


@functools.cache
def _malloc_trim():
    import ctypes  # only for a large graph: a small one never pays its import

    try:
        return ctypes.CDLL(None).malloc_trim  # the process's own C library
    except (OSError, AttributeError):
        return None
