"""The analysis walk: load → bind dims → infer shapes → cost every node → place it on the roofline."""

from __future__ import annotations

import contextlib
import gc
import math
import os
from collections.abc import Iterator, Mapping, Sequence

import numpy as np
import onnx
import onnx.inliner

from onnx_roofline import rules
from onnx_roofline.costs import CompositeCost, Cost, Uncostable
from onnx_roofline.dims import bind, symbolic_dims
from onnx_roofline.errors import DimensionError
from onnx_roofline.constants import MAX_FOLDED_ELEMENTS, constant_array, constant_table
from onnx_roofline.hardware import Hardware, dtype_class, load_hardware
from onnx_roofline.input_values import bind_values
from onnx_roofline.loader import load_with_nodes, opsets
from onnx_roofline.nodes import Node, read_nodes
from onnx_roofline.report.model import (
    DATA_DEPENDENT,
    OK,
    RULE_ERROR,
    UNKNOWN_SHAPE,
    UNSUPPORTED,
    ModelInfo,
    NodeResult,
    Report,
    Totals,
)
from onnx_roofline.roofline import COMPUTE, MEMORY, Placement, place
from onnx_roofline.rules.context import OpNode
from onnx_roofline.rules.registry import VECTOR, Rule
from onnx_roofline.shapes import ShapeResult, collect, graph_outer_references, infer
from onnx_roofline.tensors import TensorInfo, with_precision


def analyze(
    model: str | os.PathLike | onnx.ModelProto,
    hw: str | Hardware = "h100",
    dims: Mapping[str, int] | None = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    partial: bool = False,
    precision: str | None = None,
    values: Mapping[str, Sequence[float] | float] | None = None,
) -> Report:
    """Analyze a model file (or ModelProto, which is not modified) on hardware `hw`.

    `values` gives small graph inputs a value (a Loop's trip count, a scalar that sizes a Range):
    they are then folded and costed as constants.

    `precision` ("fp16", "bf16", "fp8", "int8") costs every floating-point tensor, weights and
    activations alike, as if stored in that dtype; integer tensors (indices, shapes) keep theirs.
    Raises DimensionError when a symbolic dim left unbound blocks a cost, unless `partial`."""
    hardware = hw if isinstance(hw, Hardware) else load_hardware(hw)
    with _cyclic_gc_paused():
        return _analyze(model, hardware, dict(dims or {}), input_shapes, partial, precision, values or {})


@contextlib.contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """The analysis allocates tens of thousands of small acyclic objects (value infos, results),
    which reference counting frees; each allocation also counts toward a cyclic collection that
    finds nothing to collect, about 5 % of an analysis. Paused for its duration, then restored."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _analyze(
    model: str | os.PathLike | onnx.ModelProto,
    hardware: Hardware,
    dims: dict[str, int],
    input_shapes: Mapping[str, Sequence[int]] | None,
    partial: bool,
    precision: str | None,
    input_values: Mapping[str, Sequence[float] | float],
) -> Report:
    """`analyze`, with the hardware resolved and the collector paused."""
    proto, graph_nodes = load_with_nodes(model)
    given = bind_values(proto, input_values)
    dim_uses = symbolic_dims(proto.graph)
    bind(proto, dims, input_shapes)
    shapes = infer(proto, graph_nodes)
    values = shapes.values if precision is None else with_precision(shapes.values, precision)
    initializers = {t.name for t in proto.graph.initializer} - given
    walk = _Walk(values, {**shapes.folded, **constant_table(proto.graph, graph_nodes)}, initializers, proto, hardware, shapes.unread)
    nodes = tuple([walk.cost(index, node) for index, node in enumerate(graph_nodes)])
    unbound = {name: uses for name, uses in dim_uses.items() if name not in dims and not _all_bound(uses, input_shapes)}
    if unbound and not partial:
        _raise_if_blocked(nodes, unbound)
    info = ModelInfo(
        path=None if isinstance(model, onnx.ModelProto) else str(model),
        node_count=len(graph_nodes),
        opsets=opsets(proto),
        dims=dims,
        precision=precision,
        parameters=sum(math.prod(t.dims) for t in proto.graph.initializer if t.name not in given),
        shape_inference=shapes.method,
        shape_root_cause=shapes.root_cause,
        shape_warnings=shapes.warnings,
    )
    return Report(info, hardware, nodes)


def _all_bound(uses: list[str], input_shapes: Mapping[str, Sequence[int]] | None) -> bool:
    return bool(input_shapes) and all(name in input_shapes for name in uses)


class _Walk:
    """Costs nodes against one graph's value table; holds the lookups the per-node step needs."""

    def __init__(self, values, constants, initializers: set[str], model: onnx.ModelProto, hardware: Hardware, unread=frozenset()):
        self.values: dict[str, TensorInfo] = values
        self.unread: frozenset[str] = unread  # outputs nobody reads whose shape stayed unknown: absent slots
        self.constants = constants
        self.initializers = initializers  # weights, inline or external: they count as parameters
        self.model = model  # for its opsets and local functions
        self.opsets: dict[str, int] = opsets(model)
        self.functions = {("" if f.domain == "ai.onnx" else f.domain, f.name): f for f in model.functions}
        self.hardware = hardware
        self._arrays: dict[str, np.ndarray | None] = {}
        self._peaks: dict[tuple[str, str | None], tuple[float, str, str]] = {}
        self._rules: dict[tuple[str, str], tuple[Rule | None, int | None]] = {}
        self._placements: dict[tuple[int, int, float], Placement] = {}
        self._costed: dict[tuple, tuple[Cost, str, str, float, Placement]] = {}  # by op and tensor signature

    def peak(self, unit: str, dtype: str | None) -> tuple[float, str, str]:
        """The hardware's peak for (unit, dtype), memoized: every node asks, few pairs occur."""
        key = (unit, dtype)
        if key not in self._peaks:
            self._peaks[key] = self.hardware.peak(unit, dtype_class(dtype))
        return self._peaks[key]

    def place(self, flops: int, bytes_moved: int, peak: float) -> Placement:
        """`roofline.place`, memoized: a model's repeated layers ask the same few questions."""
        key = (flops, bytes_moved, peak)
        if key not in self._placements:
            self._placements[key] = place(flops, bytes_moved, peak, self.hardware.memory_bandwidth)
        return self._placements[key]

    def constant(self, name: str) -> np.ndarray | None:
        if name not in self._arrays:
            source = self.constants.get(name)
            self._arrays[name] = None if source is None else constant_array(source)
        return self._arrays[name]

    def tensors(self, names: list[str]) -> tuple[TensorInfo | None, ...]:
        """Each value's TensorInfo (rank and dtype unknown where no pass typed it); None for an absent slot."""
        values = self.values
        return tuple([(values.get(name) or TensorInfo(name, None, None)) if name else None for name in names])

    def rule(self, domain: str, op_type: str) -> tuple[Rule | None, int | None]:
        """The cost rule for an op and the opset it is read at, memoized: the opsets are fixed for
        the walk, and few ops occur."""
        key = (domain, op_type)
        if key not in self._rules:
            opset = self.opsets.get(domain)
            rule = rules.lookup(domain, op_type, opset)
            if rule is None and key in self.functions:
                rule = Rule(op_type, domain, 1, self.function_call, VECTOR, 0)
            self._rules[key] = rule, opset
        return self._rules[key]

    def cost(self, index: int, node: Node) -> NodeResult:
        op_type, domain = node.op_type, node.domain
        inputs = self.tensors(node.inputs)
        outputs = self.tensors([("" if o in self.unread else o) for o in node.outputs] if self.unread else node.outputs)
        name = node.name or f"{op_type}_{index}"

        def uncosted(status: str, reason: str) -> NodeResult:
            return NodeResult(index, name, op_type, domain, inputs, outputs, status, reason, proto=node.proto)

        rule, opset = self.rule(domain, op_type)
        if rule is None:
            return uncosted(UNSUPPORTED, f"no cost rule for {_qualified(domain, op_type)}")
        tensors = inputs + outputs
        blocker = _blocker(tensors)
        if blocker is not None:
            return uncosted(*blocker)
        key = (domain, op_type, len(inputs), _signature(tensors))
        costed = self._costed.get(key)
        if costed is None:
            op = OpNode(node.proto, opset, inputs, outputs, self.constant, self.subgraph)
            try:
                cost = rule.formula(op)
            except Uncostable as exc:
                return uncosted(exc.status, str(exc))
            except (ValueError, KeyError, IndexError, TypeError, ZeroDivisionError) as exc:
                return uncosted(RULE_ERROR, f"{op_type}: {exc}")
            costed = self.placed(rule, op, cost)
            if op.tensors_only:  # the same for every node whose tensors look alike: repeated layers
                self._costed[key] = costed
        cost, unit, dtype, peak, placement = costed
        return NodeResult(index, name, op_type, domain, inputs, outputs, OK, None, cost, self.parameters(inputs), unit, dtype, peak, placement, node.proto)

    def placed(self, rule: Rule, op: OpNode, cost: Cost) -> tuple[Cost, str, str, float, Placement]:
        """The rule's cost with the framework's default bytes where it left them, and where it sits
        on the roofline: (cost, unit, dtype class, peak, placement)."""
        peak, unit, dtype = self.peak(rule.unit, _compute_dtype(rule.compute_dtype, op.inputs, op.outputs))
        if isinstance(cost, CompositeCost):
            return cost, unit, dtype, peak, _composite_placement(cost, peak / self.hardware.memory_bandwidth)
        if cost.bytes_read is None or cost.bytes_written is None or type(cost) is not Cost:
            cost = Cost(  # a complete Cost is kept as it is
                cost.flops,
                cost.transcendentals,
                op.distinct_input_bytes() if cost.bytes_read is None else cost.bytes_read,
                op.output_bytes() if cost.bytes_written is None else cost.bytes_written,
                cost.useful_flops,
            )
        return cost, unit, dtype, peak, self.place(cost.flops, cost.bytes, peak)

    def parameters(self, inputs: tuple[TensorInfo | None, ...]) -> int:
        """Elements of the distinct weights (initializers) among a node's inputs."""
        weights = {t.name: t.numel for t in inputs if t is not None and t.name in self.initializers}
        return sum(weights.values()) if weights else 0

    def subgraph(self, graph: onnx.GraphProto, inputs: Sequence[TensorInfo | None] | None = None) -> CompositeCost:
        """Cost a body graph in this scope: outer values stay visible, as ONNX scoping says.
        `inputs`: the body's inputs as the call site types them; when the body leaves values
        unknown (its inputs often carry no shapes), its shapes are inferred from them first."""
        nodes = read_nodes(graph)
        values = {**self.values, **collect(graph, nodes)}
        constants = {**self.constants, **constant_table(graph, nodes)}
        unknown = any(not (value := values.get(name)) or not value.is_known for n in nodes for name in n.outputs if name)
        if inputs is not None and unknown:
            shapes = _body_shapes(graph, inputs, values, constants, self.model)
            values.update((name, info) for name, info in shapes.values.items() if info.is_known or name not in values)
            constants.update(shapes.folded)
        child = _Walk(values, constants, self.initializers | {t.name for t in graph.initializer}, self.model, self.hardware)
        return child.total(nodes)

    def function_call(self, op: OpNode) -> CompositeCost:
        """A call of a model-local function: the body inlined at this call site (attributes bound,
        inputs typed as here), its shapes inferred, and costed node by node."""
        inputs, constants = [], []
        for index, tensor in enumerate(op.inputs):
            value = op.input_value(index) if tensor is not None else None
            if value is not None:
                constants.append(onnx.numpy_helper.from_array(value, tensor.name))
            elif tensor is not None:
                inputs.append(tensor.value_info())
        outputs = [onnx.helper.make_empty_tensor_value_info(name) for name in op.proto.output if name]
        graph = onnx.helper.make_graph([op.proto], "call", inputs, outputs, initializer=constants)
        call = onnx.helper.make_model(
            graph, opset_imports=self.model.opset_import, functions=self.model.functions, ir_version=self.model.ir_version
        )
        body = onnx.inliner.inline_local_functions(call)
        nodes = read_nodes(body.graph)
        shapes = infer(body, nodes)
        child = _Walk(
            {**self.values, **shapes.values},
            {**self.constants, **shapes.folded, **constant_table(body.graph, nodes)},
            self.initializers,
            self.model,
            self.hardware,
        )
        return child.total(nodes)

    def total(self, graph_nodes: list[Node]) -> CompositeCost:
        """The summed cost of a graph's nodes; any uncosted node makes the whole unknown."""
        nodes = [self.cost(index, node) for index, node in enumerate(graph_nodes)]
        for inner in nodes:
            if inner.status != OK:
                raise Uncostable(inner.status, f"body node {inner.name} ({inner.op_type}): {inner.reason}")
        totals = Totals.over(nodes)
        return CompositeCost(
            flops=totals.flops,
            useful_flops=totals.useful_flops,
            transcendentals=totals.transcendentals,
            bytes_read=totals.bytes_read,
            bytes_written=totals.bytes_written,
            time_s=totals.time_s,
            memory_bound_time_s=totals.memory_bound_time_s,
        )


def _body_shapes(
    graph: onnx.GraphProto, inputs: Sequence[TensorInfo | None], values: Mapping[str, TensorInfo], constants: Mapping, model: onnx.ModelProto
) -> ShapeResult:
    """The shapes pass over a scratch model of a body: its inputs declared as the call site types
    them (the body's own declaration where the call site has no type), and the outer values its
    nodes read declared as inputs of their known shape, or as initializers where they are small
    constants (axes, shapes) that inference needs the value of."""
    declared = []
    for index, value in enumerate(graph.input):
        typed = inputs[index] if index < len(inputs) else None
        info = typed if typed is not None and typed.shape is not None and typed.dtype else values.get(value.name)
        known = info is not None and info.shape is not None and info.dtype is not None
        declared.append(TensorInfo(value.name, info.shape, info.dtype).value_info() if known else value)
    initializers = list(graph.initializer)
    for name in graph_outer_references(graph):
        source = constants.get(name)
        weight = isinstance(source, onnx.TensorProto) and math.prod(source.dims) > MAX_FOLDED_ELEMENTS
        array = constant_array(source) if source is not None and not weight else None
        if array is not None and array.size <= MAX_FOLDED_ELEMENTS:
            initializers.append(onnx.numpy_helper.from_array(array, name))
        elif (info := values.get(name)) is not None and info.shape is not None and info.dtype is not None:
            declared.append(info.value_info())
    outputs = [onnx.helper.make_empty_tensor_value_info(value.name) for value in graph.output]
    body = onnx.helper.make_graph(graph.node, graph.name or "body", declared, outputs, initializer=initializers)
    scratch = onnx.helper.make_model(body, opset_imports=model.opset_import, ir_version=model.ir_version)
    scratch.functions.extend(model.functions)
    return infer(scratch)


def _composite_placement(cost: CompositeCost, ridge: float) -> Placement:
    """A body's time is the sum of its nodes' times; it is memory-bound when most of that time is."""
    bound = MEMORY if cost.memory_bound_time_s * 2 >= cost.time_s else COMPUTE
    intensity = cost.flops / cost.bytes if cost.bytes else None
    compute_time = cost.time_s - cost.memory_bound_time_s
    return Placement(intensity, ridge, bound, cost.time_s, compute_time, cost.memory_bound_time_s)


def _compute_dtype(choice: int | str, inputs: tuple[TensorInfo | None, ...], outputs: tuple[TensorInfo | None, ...]) -> str | None:
    """The dtype whose peak applies: a literal, or input `choice`'s (output 0's where it is absent)."""
    if isinstance(choice, str):
        return choice
    source = (inputs[choice] if choice < len(inputs) else None) or (outputs[0] if outputs else None)
    return source.dtype if source is not None else None


def _qualified(domain: str, op_type: str) -> str:
    return f"{domain}::{op_type}" if domain else op_type


def _signature(tensors: tuple[TensorInfo | None, ...]) -> tuple:
    """What a rule that reads only tensors sees of a node's: each slot's shape and dtype, which
    slots are absent, and which hold the same tensor (as the slot where its name first appears)."""
    first: dict[str, int] = {}
    return tuple([None if t is None else (first.setdefault(t.name, slot), t.shape, t.dtype) for slot, t in enumerate(tensors)])


def _blocker(tensors: tuple[TensorInfo | None, ...]) -> tuple[str, str] | None:
    """(status, reason) where a node's tensors keep it from being costed: a shape or dtype not
    fully known, or a string tensor or map with string keys (no static byte size; a map of known
    entries otherwise has one, TensorInfo says how). None, the common case, in one pass."""
    for tensor in tensors:
        if tensor is not None and (not tensor.is_known or tensor.dtype == "string" or tensor.key_dtype == "string"):
            break
    else:
        return None
    unknown = [t for t in tensors if t is not None and not t.is_known]
    if unknown:
        return UNKNOWN_SHAPE, _unknown_reason(unknown)
    string = next(t for t in tensors if t is not None and "string" in (t.dtype, t.key_dtype))
    kind = "string tensor" if string.dtype == "string" else "map with string keys"
    return DATA_DEPENDENT, f"{kind} {string.name!r} has no static byte size"


def _unknown_reason(tensors: list[TensorInfo]) -> str:
    shown = ", ".join(f"{t.name!r} {_shape_text(t)}" for t in tensors[:3])
    more = f" and {len(tensors) - 3} more" if len(tensors) > 3 else ""
    return f"shape not fully known: {shown}{more}"


def _shape_text(tensor: TensorInfo) -> str:
    if tensor.shape is None:
        return "[rank unknown]"
    return "[" + ", ".join("?" if d is None else str(d) for d in tensor.shape) + "]" + ("" if tensor.dtype else " dtype?")


def _raise_if_blocked(nodes: tuple[NodeResult, ...], unbound: dict[str, list[str]]) -> None:
    """An unbound dim that leaves a node uncostable is an error naming the dim and its inputs."""
    blocked = {
        dim
        for node in nodes
        if node.status == UNKNOWN_SHAPE
        for tensor in (*node.inputs, *node.outputs)
        if tensor is not None and tensor.shape is not None
        for dim in tensor.shape
        if isinstance(dim, str) and dim in unbound
    }
    if not blocked and any(node.status == UNKNOWN_SHAPE for node in nodes):
        blocked = set(unbound)  # symbols were renamed or lost downstream: every unbound dim may be to blame
    if blocked:
        dim = sorted(blocked)[0]
        others = "" if len(blocked) == 1 else f" (also unbound: {', '.join(sorted(blocked - {dim}))})"
        raise DimensionError(
            f"dimension {dim!r} is unbound (used by input {', '.join(repr(u) for u in unbound[dim])}){others}: "
            f"bind it with --dim {dim}=N, or pass --partial to report the nodes it blocks as unknown"
        )
