"""Facts about a graph that several passes of one analysis compute alike — a body's nodes, the
names it reads from outside, its shapes typed from the same inputs — computed once per graph
while an analysis runs (`remembered`), then forgotten with it.

A merged decoder's branch holds most of its nodes: validation, the shape engine (typing the If's
outputs) and the walk (costing the branch) each read it, and each read it whole (issue 44: 4.6×
the time of the un-merged file). A graph is known by `id()`: protobuf hands back one Python
object for one message while that object lives, and the memo keeps each graph it names alive,
so no other graph can take its id while the memo lasts. Outside `remembered` nothing is kept."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Hashable, Iterator
from contextvars import ContextVar
from typing import Any, TypeVar

T = TypeVar("T")

_MEMO: ContextVar[dict[Hashable, tuple[Any, Any]] | None] = ContextVar("graph_memo", default=None)


@contextlib.contextmanager
def remembered() -> Iterator[None]:
    """Memoize `once` for the duration; within an enclosing `remembered`, share its memo."""
    if _MEMO.get() is not None:
        yield
        return
    token = _MEMO.set({})
    try:
        yield
    finally:
        _MEMO.reset(token)


def once(kind: str, graph: Any, compute: Callable[[], T], *key: Hashable, keep: tuple[Any, ...] = ()) -> T:
    """`compute()`, the fact `kind` of `graph` (and of `key`: what else it depends on), computed once
    within `remembered`. `keep`: objects named in `key` by id, kept alive with the graph."""
    memo = _MEMO.get()
    if memo is None:
        return compute()
    name = (kind, id(graph), *key)
    found = memo.get(name)
    if found is None:
        found = memo[name] = ((graph, keep), compute())
    return found[1]
