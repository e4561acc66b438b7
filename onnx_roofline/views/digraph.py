"""A directed graph of node indices (or of groups of them), with the few algorithms the fused and
deployed views run on it: reachability, topological orders, two nodes contracted into one.

networkx did this before; importing it (the whole package, 0.15–0.3 s) was most of what the
default table's start-up spent beyond onnx's own import, for a few breadth-first searches. The
orders are networkx's: the fusion plan, which is greedy, comes out the same."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, KeysView


class CycleError(ValueError):
    """A topological order was asked of a graph with a cycle."""


class DiGraph:
    """Successors and predecessors per node, each in the order its edge was first added."""

    def __init__(self, nodes: Iterable[int] = ()):
        self._successors: dict[int, dict[int, None]] = {node: {} for node in nodes}
        self._predecessors: dict[int, dict[int, None]] = {node: {} for node in self._successors}

    def add_node(self, node: int) -> None:
        if node not in self._successors:
            self._successors[node] = {}
            self._predecessors[node] = {}

    def add_edge(self, tail: int, head: int) -> None:
        if tail not in self._successors:
            self.add_node(tail)
        if head not in self._successors:
            self.add_node(head)
        self._successors[tail][head] = None
        self._predecessors[head][tail] = None

    def successors(self, node: int) -> KeysView[int]:
        return self._successors[node].keys()

    def predecessors(self, node: int) -> KeysView[int]:
        return self._predecessors[node].keys()

    def descendants(self, node: int) -> set[int]:
        """Every node a path from `node` reaches, `node` itself excluded."""
        return _reached(self._successors, node)

    def ancestors(self, node: int) -> set[int]:
        """Every node with a path to `node`, `node` itself excluded."""
        return _reached(self._predecessors, node)

    def has_path(self, source: int, target: int) -> bool:
        """Searched from both ends at once, the smaller frontier first: on a long graph the path,
        or its absence, shows without walking everything downstream of `source`."""
        if source == target:
            return True
        forward, backward = {source}, {target}
        forward_frontier, backward_frontier = [source], [target]
        while forward_frontier and backward_frontier:
            if len(forward_frontier) <= len(backward_frontier):
                forward_frontier = _step(self._successors, forward_frontier, forward)
                if any(node in backward for node in forward_frontier):
                    return True
            else:
                backward_frontier = _step(self._predecessors, backward_frontier, backward)
                if any(node in forward for node in backward_frontier):
                    return True
        return False

    def contract(self, into: int, other: int) -> None:
        """`other` merged into `into`: its edges become `into`'s (none from `into` to itself)."""
        tails, heads = self._predecessors.pop(other), self._successors.pop(other)
        for tail in tails.keys() - {other}:
            del self._successors[tail][other]
        for head in heads.keys() - {other}:
            del self._predecessors[head][other]
        for tail in tails:
            if tail not in (into, other):
                self.add_edge(tail, into)
        for head in heads:
            if head not in (into, other):
                self.add_edge(into, head)

    def topological_order(self) -> list[int]:
        """Kahn's algorithm generation by generation, each in insertion order (networkx's
        topological_sort). Raises CycleError."""
        waiting = {node: len(tails) for node, tails in self._predecessors.items() if tails}
        generation = [node for node, tails in self._predecessors.items() if not tails]
        order: list[int] = []
        while generation:
            order += generation
            following = []
            for node in generation:
                for head in self._successors[node]:
                    waiting[head] -= 1
                    if not waiting[head]:
                        del waiting[head]
                        following.append(head)
            generation = following
        if waiting:
            raise CycleError("the graph has a cycle")
        return order

    def lexicographical_order(self, key: Callable[[int], object]) -> list[int]:
        """A topological order that takes, of the nodes ready, the one with the smallest key
        (networkx's lexicographical_topological_sort). Raises CycleError."""
        position = {node: index for index, node in enumerate(self._successors)}
        waiting = {node: len(tails) for node, tails in self._predecessors.items() if tails}
        ready = [(key(node), position[node], node) for node, tails in self._predecessors.items() if not tails]
        heapq.heapify(ready)
        order: list[int] = []
        while ready:
            node = heapq.heappop(ready)[2]
            order.append(node)
            for head in self._successors[node]:
                waiting[head] -= 1
                if not waiting[head]:
                    del waiting[head]
                    heapq.heappush(ready, (key(head), position[head], head))
        if waiting:
            raise CycleError("the graph has a cycle")
        return order


def _reached(edges: dict[int, dict[int, None]], start: int) -> set[int]:
    seen: set[int] = set()
    frontier = [start]
    while frontier:
        frontier = _step(edges, frontier, seen)
    seen.discard(start)
    return seen


def _step(edges: dict[int, dict[int, None]], frontier: list[int], seen: set[int]) -> list[int]:
    """The nodes one edge beyond the frontier not seen yet, added to `seen`."""
    following = []
    for node in frontier:
        for neighbour in edges[node]:
            if neighbour not in seen:
                seen.add(neighbour)
                following.append(neighbour)
    return following
