"""Nodes the deployed view drops: masks and guards whose every reader is fused into a kernel
that generates what they compute.

A FlashAttention-style kernel reads Q, K, V (and a KV cache's past and new rows) and nothing
else: its causal mask comes from indices, its scale and shape arithmetic live in registers
(flash.py). A node that computes only for such a kernel — the causal-mask `Where` and the
`Expand`/`LessOrEqual` building it, the `Shape`/`Slice` arithmetic of a head reshape, the scalar
of a scale — has nobody left to read its output once the kernel runs: charging it, as the view
did (3.1 MB a layer for GPT-2's mask at 1,024 tokens), counts work no runtime does. A node is
dead when it writes no graph output and each reader of each of its outputs is either an
attention kernel that does not read that tensor as data, or another dead node."""

from __future__ import annotations

from collections.abc import Iterable

from onnx_roofline.views.flash import AttentionMatch
from onnx_roofline.views.graph import Dataflow


def data_reads(match: AttentionMatch) -> frozenset[str]:
    """The tensors an attention kernel reads from memory: Q, K, V, each cache's past and new rows."""
    return frozenset((match.q, match.k, match.v, *(c.past for c in match.caches), *(c.new for c in match.caches)))


def dead_nodes(flow: Dataflow, matches: Iterable[AttentionMatch], graph_outputs: frozenset[str]) -> frozenset[int]:
    """Every node outside the kernels whose outputs only attention kernels (not as data) or other
    dead nodes read; walked from the last node back, so a chain dies from its reader up."""
    kernel: dict[int, frozenset[str]] = {}  # member of an attention kernel -> that kernel's data reads
    for match in matches:
        reads = data_reads(match)
        kernel.update(dict.fromkeys(match.members, reads))
    dead: set[int] = set()
    # Only a node some kernel member or dead node reads can die: the kernels' producers at first,
    # then each dead node's, so the walk tests those and passes over the rest of the graph.
    candidates = {p for member in kernel for p in flow.digraph.predecessors(member)}
    for index in reversed(flow.order):
        if index not in candidates or index in kernel:
            continue
        outputs = [t.name for t in flow.nodes[index].outputs if t is not None]
        if any(name in graph_outputs for name in outputs):
            continue
        readers = [(name, c) for name in outputs for c in flow.consumers.get(name, ())]
        if readers and all(c in dead or (c in kernel and name not in kernel[c]) for name, c in readers):
            dead.add(index)
            candidates.update(flow.digraph.predecessors(index))
    return frozenset(dead)
