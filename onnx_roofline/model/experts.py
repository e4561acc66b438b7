"""Mixture-of-experts layers, recognized from the graph's structure (never from names).

A layer is a router — a MatMul or Gemm of the tokens by a constant [hidden, E] weight — whose
scores a TopK(k) ranks, and experts that take the tokens the TopK routes to them, in one of two
forms exporters write:

- **routed** (transformers' eager experts, optimum's Qwen3-MoE, DeepSeek-V3): the TopK's indices
  are one-hot encoded over the E experts, and each expert takes its tokens with a NonZero of its
  row of that mask (`torch.where`), runs them through its own weights and scatters the result
  back. An expert is the NonZero and every node downstream of it up to the scatter.
- **dense** (optimum's GPT-OSS): the TopK's scores are scattered into a [tokens, E] matrix, every
  token runs through every expert at once (a MatMul by an [E, …] weight), and the outputs are
  weighted by that matrix and summed. The experts are the nodes between the router's input and
  that weighting.

A shared expert reads the router's input directly, beside the routed ones (DeepSeek-V3's
`shared_experts`): the MatMuls reading it, and the projections they feed.

Only the graph's structure, the dims of its weights and small integer constants (k, a one-hot
depth, an expert's index) are read: no weight byte."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import cast

import onnx

from onnx_roofline.model.constants import constant_array, small_constant_table
from onnx_roofline.model.nodes import METADATA_READS, Node
from onnx_roofline.model.weights import Weight, weights

ROUTED, DENSE = "routed", "dense"
MATRIX_OPS = frozenset({"MatMul", "Gemm"})
SCATTERS = frozenset({"ScatterElements", "ScatterND", "Scatter"})
VIEWS = frozenset({"Reshape", "Flatten", "Cast", "Squeeze", "Unsqueeze", "Identity"})
MAX_EXPERT_NODES = 400  # an expert's path that runs longer has escaped its layer: no expert


@dataclass(frozen=True)
class Expert:
    """One expert (in the dense form, all of them at once): the graph nodes that run it, by
    position, the weights they read, and (routed) its index among the layer's experts and the
    NonZero that selects its tokens."""

    nodes: tuple[int, ...]
    weights: tuple[str, ...]
    index: int | None = None
    selection: str | None = None  # the NonZero's output

    def parameters(self, sizes: Mapping[str, int]) -> int:
        return sum(sizes[name] for name in self.weights)


@dataclass(frozen=True)
class MoeLayer:
    """One mixture-of-experts layer: E experts, k of them per token, and where each lives."""

    form: str  # ROUTED or DENSE
    experts: int  # E
    top_k: int  # k
    router: int  # the router MatMul/Gemm's position
    scores: str  # the router's output, [tokens, E]: what tells the tokens
    routed: tuple[Expert, ...]  # routed: one per expert; dense: one running them all
    shared: tuple[Expert, ...] = ()

    @property
    def nodes(self) -> frozenset[int]:
        """The nodes of the routed experts: what a grouped-GEMM kernel runs."""
        return frozenset(i for expert in self.routed for i in expert.nodes)

    def routed_parameters(self, sizes: Mapping[str, int]) -> int:
        """Elements of every routed expert's weights (each tensor once)."""
        return sum(sizes[name] for name in {w for expert in self.routed for w in expert.weights})

    def shared_parameters(self, sizes: Mapping[str, int]) -> int:
        return sum(sizes[name] for name in {w for expert in self.shared for w in expert.weights})


def recognize(graph: onnx.GraphProto, nodes: list[Node]) -> tuple[MoeLayer, ...]:
    """The graph's mixture-of-experts layers, in graph order (the main graph's only)."""
    if not any(node.op_type == "TopK" and not node.domain for node in nodes):
        return ()
    found = _Graph(graph, nodes)
    layers = (found.layer(node) for node in nodes if node.op_type == "TopK" and not node.domain)
    return tuple(layer for layer in layers if layer is not None)


class _Graph:
    """The graph as producer and reader maps, with its weights' sizes and small constants."""

    def __init__(self, graph: onnx.GraphProto, nodes: list[Node]):
        self.nodes = nodes
        self.producer = {name: node for node in nodes for name in node.outputs if name}
        self.readers: dict[str, list[Node]] = {}
        for node in nodes:
            for name in node.inputs:
                if name:
                    self.readers.setdefault(name, []).append(node)
        self.weights: dict[str, Weight] = {w.name: w for w in weights(graph, nodes) if not w.graph}
        self.constants = small_constant_table(graph, nodes)
        self.outputs = frozenset(v.name for v in graph.output)

    def scalar(self, name: str) -> int | None:
        source = self.constants.get(name)
        value = None if source is None else constant_array(source)
        return int(value.reshape(-1)[0]) if value is not None and value.size == 1 else None

    def weight(self, node: Node) -> Weight | None:
        """The constant matrix a MatMul/Gemm multiplies by (its second input), if it has one."""
        return self.weights.get(node.inputs[1]) if node.op_type in MATRIX_OPS and len(node.inputs) > 1 else None

    def layer(self, topk: Node) -> MoeLayer | None:
        k = (
            self.scalar(topk.inputs[1])
            if len(topk.inputs) > 1
            else next((a.i for a in topk.attributes if a.name == "k"), None)
        )
        router = self.router(topk.inputs[0])
        if not k or router is None or len(topk.outputs) < 2:
            return None
        weight = cast(Weight, self.weight(router))  # router() found the node by its weight
        transposed = router.op_type == "Gemm" and any(a.name == "transB" and a.i for a in router.attributes)
        experts = weight.shape[0] if transposed else weight.shape[-1]
        tokens = self.views_of(router.inputs[0])
        for reader in self.descendants(topk.outputs[1], VIEWS):
            if reader.op_type == "OneHot" and reader.inputs[0] in self.views_through(topk.outputs[1]):
                routed = self.routed_experts(reader)
                form = ROUTED
            elif reader.op_type in SCATTERS and self.derives_from(reader.inputs[2], topk.outputs[0]):
                routed = self.dense_experts(reader, tokens, experts)
                form = DENSE
            else:
                continue
            if routed:
                shared = self.shared_experts(tokens, router, {i for e in routed for i in e.nodes})
                return MoeLayer(form, experts, k, router.position, router.outputs[0], routed, shared)
        return None

    # --- the router and the tokens it reads ----------------------------------------------------

    def router(self, scores: str, reach: int = 24) -> Node | None:
        """The nearest MatMul/Gemm by a constant [hidden, E] weight upstream of the TopK's input."""
        seen, queue = {scores}, deque([scores])
        while queue and reach:
            reach -= 1
            node = self.producer.get(queue.popleft())
            if node is None:
                continue
            weight = self.weight(node)
            if weight is not None and len(weight.shape) == 2:
                return node
            for name in node.inputs:
                if name and name not in seen and name not in self.weights:
                    seen.add(name)
                    queue.append(name)
        return None

    def views_of(self, name: str) -> frozenset[str]:
        """`name` and the values it is a view of (Reshape, Cast, … upstream): the tokens, however shaped."""
        found = {name}
        node = self.producer.get(name)
        while node is not None and node.op_type in VIEWS and node.inputs:
            found.add(node.inputs[0])
            node = self.producer.get(node.inputs[0])
        return frozenset(found)

    def views_through(self, name: str) -> frozenset[str]:
        """`name` and its views downstream."""
        return frozenset([name, *(o for n in self.descendants(name, VIEWS) if n.op_type in VIEWS for o in n.outputs)])

    def descendants(self, name: str, through: frozenset[str]) -> list[Node]:
        """The readers of `name`, and of the outputs of those among them whose op is in `through`."""
        found, queue, seen = [], deque([name]), {name}
        while queue:
            for reader in self.readers.get(queue.popleft(), ()):
                found.append(reader)
                if reader.op_type in through:
                    for out in reader.outputs:
                        if out not in seen:
                            seen.add(out)
                            queue.append(out)
        return found

    def derives_from(self, name: str, source: str, reach: int = 8) -> bool:
        """Whether `name` is computed from `source` within `reach` nodes (a scatter's updates from the TopK's values)."""
        frontier = {name}
        for _ in range(reach):
            if source in frontier:
                return True
            frontier = {i for n in frontier if (p := self.producer.get(n)) is not None for i in p.inputs if i}
        return source in frontier

    # --- the routed form ------------------------------------------------------------------------

    def routed_experts(self, one_hot: Node) -> tuple[Expert, ...]:
        """One expert per NonZero of a row of the one-hot mask: its nodes up to the scatter back, and
        the Add that accumulates what it scatters."""
        found = []
        for selection in self.descendants(
            one_hot.outputs[0], frozenset({"Transpose", "Gather", "Squeeze", "Cast", "Slice"})
        ):
            if selection.op_type != "NonZero":
                continue
            chain, index = self.mask_row(selection, one_hot.outputs[0])
            path = self.until_scatter(selection.outputs[0])
            if path is None:
                return ()
            accumulate = [
                r.position
                for i in path
                if self.nodes[i].op_type in SCATTERS
                for r in self.readers.get(self.nodes[i].outputs[0], ())
                if r.op_type == "Add"
            ]
            members = sorted({*chain, selection.position, *path, *accumulate})
            found.append(Expert(tuple(members), self.weights_read(members), index, selection.outputs[0]))
        return tuple(found)

    def mask_row(self, selection: Node, mask: str) -> tuple[list[int], int | None]:
        """The nodes taking one expert's row of the mask for its NonZero (only it reads them), and
        that expert's index: the constant a Gather picks the row by."""
        chain, index, name = [], None, selection.inputs[0]
        while name != mask and (node := self.producer.get(name)) is not None and len(self.readers.get(name, ())) == 1:
            chain.append(node.position)
            if node.op_type == "Gather" and len(node.inputs) > 1:
                index = self.scalar(node.inputs[1])
            name = node.inputs[0]
        return chain, index

    def until_scatter(self, start: str) -> list[int] | None:
        """The nodes downstream of `start` up to the scatters that write the expert's rows back
        (included); None where the walk reaches a graph output or runs on too long."""
        found, queue, seen = [], deque([start]), {start}
        while queue:
            name = queue.popleft()
            if name in self.outputs:
                return None
            for reader in self.readers.get(name, ()):
                if reader.position in found:
                    continue
                found.append(reader.position)
                if len(found) > MAX_EXPERT_NODES:
                    return None
                if reader.op_type in SCATTERS:
                    continue
                for out in reader.outputs:
                    if out and out not in seen:
                        seen.add(out)
                        queue.append(out)
        return found

    # --- the dense form -------------------------------------------------------------------------

    def dense_experts(self, scatter: Node, tokens: frozenset[str], experts: int) -> tuple[Expert, ...]:
        """The experts of a dense layer: what computes the other operand of the Mul that weights
        the experts' outputs by the scattered scores, back to the tokens, and that weighting (with
        the sum over experts after it)."""
        layout = frozenset({"Transpose", *VIEWS})
        reached = self.descendants(scatter.outputs[0], layout)
        glue = [n for n in reached if n.op_type in layout]
        scores = {scatter.outputs[0], *(o for n in glue for o in n.outputs)}
        for combine in reached:
            other = next((name for name in combine.inputs if name not in scores), None)
            if combine.op_type != "Mul" or other is None:
                continue
            members = self.upstream(other, tokens)
            stacked = [self.weight(self.nodes[i]) for i in members if self.nodes[i].op_type in MATRIX_OPS]
            if not stacked or any(w is None or len(w.shape) < 3 or w.shape[0] != experts for w in stacked):
                continue
            members.update([combine.position, *(n.position for n in glue)])
            members.update(r.position for r in self.readers.get(combine.outputs[0], ()) if r.op_type == "ReduceSum")
            stacked_weights = tuple(
                name for name in self.weights_read(members) if self.weights[name].shape[:1] == (experts,)
            )
            return (Expert(tuple(sorted(members)), stacked_weights),)
        return ()

    def upstream(self, name: str | None, stop: frozenset[str]) -> set[int]:
        """The nodes computing `name`, back to the values in `stop`, shape reads and constants."""
        found: set[int] = set()
        queue = deque([name] if name else [])
        while queue:
            node = self.producer.get(queue.popleft())
            if node is None or node.position in found or node.op_type in METADATA_READS or node.op_type == "Constant":
                continue
            found.add(node.position)
            if len(found) > MAX_EXPERT_NODES:
                return set()
            queue.extend(i for i in node.inputs if i and i not in stop and i not in self.weights)
        return found

    # --- shared experts --------------------------------------------------------------------------

    def shared_experts(self, tokens: frozenset[str], router: Node, routed: set[int]) -> tuple[Expert, ...]:
        """The MLPs reading the router's tokens beside the routed experts: the projections that
        read the tokens, and the one each feeds (through elementwise ops) that ends the MLP."""
        first = [n for name in tokens for n in self.readers.get(name, ())
                 if self.weight(n) is not None and n.position != router.position and n.position not in routed]  # fmt: skip
        if not first:
            return ()
        ends: dict[int, None] = {}
        for node in first:
            for reader in self.descendants(
                node.outputs[0],
                frozenset({"Mul", "Sigmoid", "Tanh", "Relu", "Gelu", "Silu", "Erf", "Div", "Add", "Cast"}),
            ):
                if self.weight(reader) is not None and reader not in first:
                    ends[reader.position] = None
        experts = []
        for end in ends:
            inputs = self.upstream(self.nodes[end].inputs[0], tokens)
            members = sorted({end, *inputs})
            experts.append(Expert(tuple(members), self.weights_read(members)))
        return tuple(experts)

    def weights_read(self, members: Iterable[int]) -> tuple[str, ...]:
        """The weights the nodes read, scalars aside (a clip limit, a scale: no expert's parameters)."""
        names = (name for i in sorted(members) for name in self.nodes[i].inputs if name in self.weights)
        return tuple(dict.fromkeys(name for name in names if self.weights[name].elements > 1))


def parameter_sizes(graph: onnx.GraphProto, nodes: list[Node]) -> dict[str, int]:
    """Elements of each main-graph weight, by name."""
    return {w.name: math.prod(w.shape) for w in weights(graph, nodes) if not w.graph}
