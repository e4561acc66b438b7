"""The fused and deployed views' graph (whatif/digraph.py): reachability, contraction and the two
topological orders, by hand on small graphs, and against networkx (where it is installed: torch
brings it) on random DAGs, whose orders the fusion plan was made with."""

import random

import pytest

from onnx_roofline.views.digraph import CycleError, DiGraph


def diamond() -> DiGraph:
    # 0 → 1 → 3, 0 → 2 → 3, 4 alone
    graph = DiGraph(range(5))
    for tail, head in [(0, 1), (0, 2), (1, 3), (2, 3)]:
        graph.add_edge(tail, head)
    return graph


def test_reachability_on_a_diamond():
    graph = diamond()
    assert graph.descendants(0) == {1, 2, 3}
    assert graph.ancestors(3) == {0, 1, 2}
    assert graph.ancestors(4) == set() and graph.descendants(4) == set()
    assert graph.has_path(0, 3) and graph.has_path(2, 2)
    assert not graph.has_path(3, 0) and not graph.has_path(1, 2) and not graph.has_path(0, 4)


def test_contraction_moves_the_edges_and_drops_the_node():
    graph = diamond()
    graph.contract(1, 2)  # 1 and 2 become one: 0 → 1 → 3
    assert list(graph.successors(0)) == [1]
    assert list(graph.predecessors(3)) == [1]
    assert graph.descendants(0) == {1, 3}
    assert graph.topological_order() == [0, 4, 1, 3]
    graph.contract(0, 1)  # an edge between the two merged is no self-loop
    assert list(graph.successors(0)) == [3] and graph.ancestors(3) == {0}


def test_orders_put_every_edge_forward_and_break_ties_as_asked():
    graph = diamond()
    # Kahn's generations in insertion order: {0, 4}, then {1, 2}, then {3}
    assert graph.topological_order() == [0, 4, 1, 2, 3]
    # the smallest key first among the ready: 4 has key -1, 2 key 0, 1 key 1
    keys = {0: 5, 1: 1, 2: 0, 3: 2, 4: -1}
    assert graph.lexicographical_order(keys.__getitem__) == [4, 0, 2, 1, 3]


def test_a_cycle_has_no_order():
    graph = DiGraph()
    graph.add_edge(0, 1)
    graph.add_edge(1, 0)
    with pytest.raises(CycleError):
        graph.topological_order()
    with pytest.raises(CycleError):
        graph.lexicographical_order(lambda node: node)


@pytest.mark.parametrize("seed", range(20))
def test_the_same_as_networkx_on_random_dags(seed):
    nx = pytest.importorskip("networkx")
    rng = random.Random(seed)
    size = rng.randint(2, 60)
    ours, theirs = DiGraph(range(size)), nx.DiGraph()
    theirs.add_nodes_from(range(size))
    for _ in range(rng.randint(0, 3 * size)):
        tail, head = sorted(rng.sample(range(size), 2))
        ours.add_edge(tail, head)
        theirs.add_edge(tail, head)
    key = {node: rng.random() for node in range(size)}.__getitem__
    assert ours.topological_order() == list(nx.topological_sort(theirs))
    assert ours.lexicographical_order(key) == list(nx.lexicographical_topological_sort(theirs, key=key))
    for _ in range(10):
        a, b = rng.sample(range(size), 2)
        assert ours.has_path(a, b) == nx.has_path(theirs, a, b)
        assert ours.ancestors(a) == nx.ancestors(theirs, a) and ours.descendants(a) == nx.descendants(theirs, a)
    for _ in range(size // 3):  # contract pairs that leave the graph acyclic, as fusion does
        a, b = rng.sample(list(theirs.nodes), 2)
        if any(x != b and nx.has_path(theirs, x, b) for x in theirs.successors(a)) or any(
            x != a and nx.has_path(theirs, x, a) for x in theirs.successors(b)
        ):
            continue
        ours.contract(a, b)
        nx.contracted_nodes(theirs, a, b, self_loops=False, copy=False)
        assert {n: set(ours.successors(n)) for n in theirs.nodes} == {
            n: set(theirs.successors(n)) for n in theirs.nodes
        }
        assert ours.topological_order() == list(nx.topological_sort(theirs))
