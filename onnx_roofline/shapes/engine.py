"""The shape engine: every value of the graph gets a TensorInfo, without reading a weight.

Two passes, run in one place (`infer`):
1. ONNX's shape inference with data propagation over the whole graph: fast (C++), and for most
   graphs all that is needed.
2. Where it leaves values unknown, a forward sweep in graph order types each node from its inputs
   as it goes: small integer values are folded with numpy (the Shape → Gather → Concat → Range
   chains exporters emit, from constants and known shapes), a node's outputs come from our shape
   rules (`shape_rules/`: ops ONNX has no schema for) or from ONNX's inference of that one node,
   given the values folded so far. Sweeps repeat until one types nothing new (one sweep does it
   for a graph in topological order, as ONNX requires).

What stays unknown has a root cause: the first node whose inputs are known but whose outputs are
not, with the reason its outputs could not be typed. No pass opens a weight file or reads an
external initializer; none needs a package beyond onnx and numpy."""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from operator import attrgetter
from typing import cast

import numpy as np
import onnx
from onnx import numpy_helper

from onnx_roofline.model import heap, pieces
from onnx_roofline.model.constants import MAX_FOLDED_ELEMENTS, ConstantSource, constant_value, small_constant_table
from onnx_roofline.model.experts import MoeLayer
from onnx_roofline.model.inferred import (
    CHECKED,
    CHECKED_PROPAGATED,
    DeclaredTypes,
    Mode,
    declared_types,
    inferred_types,
)
from onnx_roofline.model.isolation import CRASH_PRONE_DOMAINS, PassCrashed, isolated
from onnx_roofline.model.memo import once
from onnx_roofline.model.nodes import Node, kinds, of_kinds, read_nodes
from onnx_roofline.model.schemas import may_have_bodies, opsets
from onnx_roofline.model.scopes import graph_outer_references, outer_references
from onnx_roofline.model.spec_defaults import lacks_defaults, spell_out_defaults, with_defaults
from onnx_roofline.model.tensors import (
    Dim,
    KnownTensor,
    TensorInfo,
    dtype_name,
    elem_type,
    element_inputs,
    is_floating,
    known,
    ranked_tensor,
    sequence_of,
)
from onnx_roofline.model.text import as_text
from onnx_roofline.shapes import rules as shape_rules
from onnx_roofline.shapes.bodies import CONTROL_FLOW, cache_branch
from onnx_roofline.shapes.bounds import BOUNDED_OPS, Bound, selection_bound, typed_at_bound, upper_value
from onnx_roofline.shapes.completion import complete
from onnx_roofline.shapes.durations import FRAMES_PER_TOKEN, SUMMING_OPS, Regulated, assumed_sum, is_duration
from onnx_roofline.shapes.folding import Folder
from onnx_roofline.shapes.input_values import value_flag
from onnx_roofline.shapes.ranges import NO_RANGES, Range, outer_ranges
from onnx_roofline.shapes.root_cause import RootCause
from onnx_roofline.shapes.routing import ExpertSizing
from onnx_roofline.shapes.selection import (
    SELECTING_OPS,
    assumed_count,
    candidates,
    count_axis,
    fixed_count,
    selected_shape,
)
from onnx_roofline.shapes.sizing import UNSIZED, Sizing
from onnx_roofline.shapes.texts import TEXT_OPS, typed_text

log = logging.getLogger(__name__)

_SIZED_OPS = {("", op_type) for op_type in BOUNDED_OPS} | TEXT_OPS
"""The ops, by (domain, op type), typed from what their data does not decide: a bound the graph fixes
(bounds.py), a text pipeline's sizes (texts.py)."""


@dataclass(frozen=True)
class ShapeResult:
    values: dict[str, TensorInfo]
    folded: dict[str, np.ndarray]  # small values computed from shapes and constants
    method: str  # the passes that ran: "onnx", then "+sweep" where it was needed
    unresolved: tuple[str, ...]  # node outputs still not fully known (outputs nobody reads excluded)
    root_cause: RootCause | None = None
    warnings: tuple[str, ...] = ()  # passes that failed, said in the report
    unread: frozenset[str] = frozenset()  # outputs nobody reads that stayed unknown: costed as absent
    assumed: tuple[str, ...] = ()  # the nodes whose output size is the --nonzero-fraction assumption (selection.py)
    routed: tuple[str, ...] = ()  # the experts' NonZeros sized by the routing load (routing.py)
    bounds: tuple[Bound, ...] = ()  # the data-dependent outputs typed at the bound the graph fixes (bounds.py)
    regulated: Regulated | None = (
        None  # the sums of predicted durations sized by the frames per token assumed (durations.py)
    )
    conforms: bool | None = None  # `checked`: whether ONNX's pass ran checked without an error (infer)


def infer(
    model: onnx.ModelProto,
    nodes: list[Node] | None = None,
    map_inputs: Mapping[str, tuple[int, ...]] | None = None,
    sizing: Sizing = UNSIZED,
    moe_layers: Sequence[MoeLayer] | None = None,
    ranges: Mapping[str, Range] = NO_RANGES,
    checked: bool = False,
) -> ShapeResult:
    """Infer every value's shape: ONNX's pass over the whole graph, then the sweep over the nodes
    it left unknown. `nodes`: the graph's nodes, where the caller has read them already;
    `map_inputs`: the shapes of map-typed graph inputs ([entries], [maps, entries]), which no ONNX
    type can declare (dims.map_shapes); `sizing` (shapes/sizing.py): the sizes data decides, read
    here: `nonzero_fraction`, the share of its candidates a NonZero or Compress selects, where its
    input is data (selection.py; None types them at their bound, every candidate:
    bounds.selection_bound); `found_sizes`, the types a run found for values whose size is data
    (verify), which they take first; `frames_per_token`, the frames each token lasts where a length
    regulator sums durations that are data (durations.py); and `expert_load`, the routing of the
    `moe_layers` (model/experts.py), which sizes their experts' NonZeros where no fraction is given.
    `checked`: ONNX's pass runs first as onnx's full check runs it, types checked and the first
    error raised (_checked_inference), and `conforms` says whether it passed: the conformance of
    the file at these dims (analysis.bind_and_infer); where it raised, again as usual."""
    nodes = read_nodes(model.graph) if nodes is None else nodes
    warnings: list[str] = []
    crashed: list[str] = []  # the parts of the graph ONNX's pass crashed on (isolation.py)

    def typed_by(declared: DeclaredTypes) -> dict[str, TensorInfo]:
        values = collect(model.graph, nodes, declared)
        heap.release(len(nodes))  # the inferred copy and ONNX's own tables, freed now
        _shape_map_inputs(model.graph, values, map_inputs or {}, warnings)
        _clear_misinferred(values, nodes)
        return values

    checked_types, mode = _checked_inference(model, nodes) if checked else (None, None)
    conforms = None if not checked else checked_types is not None
    lenient = lambda: typed_by(_onnx_inference(model, nodes, warnings, crashed))  # noqa: E731
    values = lenient() if checked_types is None else typed_by(checked_types)
    needed = _needed_outputs(model, nodes)
    unknown, unread = _unknown(values, nodes, needed)
    if (
        mode is not None
        and not mode.propagated
        and any(node.op_type not in CONTROL_FLOW or node.domain for node in unknown)
    ):
        values = lenient()  # what data propagation may type (a Reshape's target), left unknown
        unknown, unread = _unknown(values, nodes, needed)
    if not unknown:
        return ShapeResult(values, {}, "onnx", (), None, tuple(warnings), frozenset(unread), conforms=conforms)
    experts = ExpertSizing(moe_layers, sizing.expert_load) if moe_layers is not None else None
    sweep = _Sweep(model, nodes, values, small_constant_table(model.graph, nodes), sizing, warnings, bool(crashed))
    sweep.experts = experts
    sweep.outer_ranges = ranges  # a body's: the ranges of the outer values it reads (ranges.py)
    sweep.regulate(sizing.frames_per_token)
    pending: list[Node] | None = unknown
    while pending and (pending := sweep.run(pending)) is not None:
        pass
    unresolved = [name for node in unknown for name in node.outputs if name in needed and not known(values.get(name))]
    root = sweep.root_cause(nodes, needed) if unresolved else None
    left_unread = frozenset(name for name in unread if not known(values.get(name)))
    return ShapeResult(
        values,
        sweep.folder.folded,
        "onnx+sweep",
        tuple(unresolved),
        root,
        tuple(warnings),
        left_unread,
        tuple(sweep.assumed),
        tuple(experts.sized) if experts else (),
        bounds=tuple(sweep.bounds),
        regulated=sweep.regulated(),
        conforms=conforms,
    )


class _Sweep:
    """A forward pass over the nodes ONNX's pass left unknown, repeatable: each visit types a
    node's outputs from its inputs, with the small values they carry folded on demand."""

    experts: ExpertSizing | None = None  # the main graph's MoE routing (routing.py)
    outer_ranges: Mapping[str, Range] = NO_RANGES  # a body's outer values' ranges (ranges.py)

    def __init__(
        self,
        model: onnx.ModelProto,
        nodes: list[Node],
        values: dict[str, TensorInfo],
        constants: Mapping[str, ConstantSource],
        sizing: Sizing = UNSIZED,
        warnings: list[str] | None = None,
        crashed: bool = False,
    ):
        self.values = values
        self.warnings = [] if warnings is None else warnings  # a one-node inference that crashed is said there too
        self.crashed = crashed  # ONNX's pass crashed on this graph: each later call of it is isolated
        self.crashes: dict[int, str] = {}  # the nodes whose one-node inference crashed, by id(Node): not run again
        self.folder = Folder(nodes, self.tensor, constants)
        self.failures: dict[int, str] = {}  # why a node's outputs could not be typed, by id(Node)
        self.symbols: dict[str, int] = {}  # what ONNX's symbolic dims turned out to be
        self.opsets = opsets(model)
        self.opset_imports = list(model.opset_import)
        self.ir_version = model.ir_version
        self.functions = {(f.domain, f.name) for f in model.functions}
        self.model = model
        self.sizing = sizing  # its bodies are sized alike (infer_body)
        self.nonzero_fraction = sizing.nonzero_fraction
        self.found = sizing.found_sizes  # the types a run found for values whose size is data (verify)
        self.nodes = nodes
        self.element_symbols = {
            d for info in values.values() if info.sequence and info.shape for d in info.shape if isinstance(d, str)
        }
        self.assumed: dict[str, None] = {}  # the nodes sized by nonzero_fraction, bodies' included, in the order met
        self.bounds: list[Bound] = []  # the outputs typed at a bound (bounds.py), bodies' included
        self.frames_per_token: float | None = None  # --frames-per-token, None for the default (durations.py)
        self.durations: dict[str, None] = {}  # the sums of durations it sized, in the order met

    def run(self, nodes: list[Node]) -> list[Node] | None:
        """Visit the nodes once, in order. Returns the nodes left with unknown outputs, to visit
        again, when this visit typed something new (a graph out of topological order, a symbol
        learned downstream); None when it did not, and nothing more can be learned."""
        progress, left = False, []
        self.folder.retry()
        for node in nodes:
            progress |= self.visit(node)
            if not all(self.resolved(name) for name in node.outputs if name):
                left.append(node)
        return left if progress else None

    def visit(self, node: Node) -> bool:
        if all(self.resolved(name) for name in node.outputs if name):
            return False
        if not all(self.resolved(name) for name in node.inputs if name):
            return bool(self.type_at_bound(node))  # a bound may type a node whose data is only partly known
        if self.found and any(name in self.found for name in node.outputs):
            each = [
                self.learn(self.found[name]) for name in node.outputs if name in self.found
            ]  # each one, then whether any was new
            return any(each)
        inputs = tuple(self.values[name] if name else None for name in node.inputs)
        value = (
            self.folder.value(node.outputs[0])
            if node.outputs and _may_be_shape(self.values.get(node.outputs[0]))
            else None
        )
        if value is not None:
            return self.learn(TensorInfo(node.outputs[0], value.shape, _numpy_dtype_name(value)))
        if not node.domain and node.op_type in SELECTING_OPS:
            learned = self.type_selection(node, inputs)
            if learned is not None:
                return learned
        if (learned := self.type_at_bound(node)) is not None:
            return learned
        partial = self.substituted(node.outputs[0]) if len(node.outputs) == 1 else None
        shape = complete(node, inputs, partial.shape) if partial is not None and partial.dtype else None
        if shape is not None and partial is not None:  # a shape completes a partial
            return self.learn(TensorInfo(node.outputs[0], shape, partial.dtype))
        typed, failure = self.type_outputs(node, inputs)
        progress = False
        for info in typed.values():
            progress |= self.learn(info)
        if failure and not all(known(self.values.get(name)) for name in node.outputs if name):
            self.failures[id(node)] = failure
        return progress

    def type_selection(self, node: Node, inputs: tuple[TensorInfo | None, ...]) -> bool | None:
        """Type a NonZero's or Compress's output whose value was not folded: at the count the graph
        fixes downstream, or a Compress's constant condition gives, else at `nonzero_fraction` of
        its candidates (recorded as assumed), else at all its candidates, the bound (recorded as
        one: at most). None where its inputs are unknown."""
        attributes = {attr.name: onnx.helper.get_attribute_value(attr) for attr in node.attributes}
        total, data = candidates(node.op_type, attributes, inputs), inputs[0]
        if total is None or not known(data):  # candidates() counts known data only
            return None
        axis, rank = count_axis(node.op_type, attributes, len(data.shape))
        count = fixed_count(node.outputs[0], axis, rank, self.consumers, self.folder.value)
        if (
            count is None
            and node.op_type == "Compress"
            and (condition := self.folder.value(node.inputs[1])) is not None
        ):
            count = int(
                np.count_nonzero(condition.reshape(-1)[:total])
            )  # a constant condition: its trues among the candidates
        if count is None and self.nonzero_fraction is None and self.experts is not None:
            count = self.experts.count(node, total)
        if count is None and self.nonzero_fraction is not None:
            count = assumed_count(total, self.nonzero_fraction)
            self.assumed[node.name or f"{node.op_type}_{node.position}"] = None
        bound = None
        if count is None:  # no count given or fixed: at most every candidate (bounds.py)
            count = total
            bound = selection_bound(node, total, data)
        dtype = "int64" if node.op_type == "NonZero" else data.dtype
        learned = self.learn(TensorInfo(node.outputs[0], selected_shape(node.op_type, attributes, data, count), dtype))
        if learned and bound is not None:
            self.bounds.append(bound)
        return learned

    def type_at_bound(self, node: Node) -> bool | None:
        """Type a data-dependent output at the bound the graph fixes (bounds.py), from its inputs as
        far as they are known, and record the bound; None where the graph fixes none."""
        if (node.domain, node.op_type) not in _SIZED_OPS:
            return None
        inputs = tuple(self.substituted(name) if name else None for name in node.inputs)
        if (node.domain, node.op_type) in TEXT_OPS:  # what a text pipeline's sizes are, whatever its text (texts.py)
            bounded = typed_text(node, inputs, self.producers.get, self.values.get, self.sizing.string_bytes)
        else:
            bounded = typed_at_bound(
                node,
                inputs,
                self.folder.value,
                lambda name: upper_value(name, self.producers.get, self.folder.value, self.tensor, self.outer_ranges),
            )
        if bounded is None:
            return None
        outputs, bound = bounded
        learned = [self.learn(info) for info in outputs]  # each one, then whether any was new
        if any(learned) and bound is not None:
            self.bounds.append(bound)
        return any(learned)

    def regulate(self, frames_per_token: float | None) -> None:
        """Size the sums of predicted durations that are data at `frames_per_token` (durations.py)."""
        self.frames_per_token = frames_per_token
        self.folder.assume = self.assume_durations

    def assume_durations(self, node: Node, known: Mapping[str, np.ndarray]) -> np.ndarray | None:
        """A length regulator's sum of durations, each assumed to last the frames per token; None
        for any other node the folder could not fold."""
        if node.domain or node.op_type not in SUMMING_OPS or not node.inputs:
            return None
        data = self.tensor(node.inputs[0])
        if data is None or not is_duration(node.inputs[0], self.producers.get):
            return None
        frames = FRAMES_PER_TOKEN if self.frames_per_token is None else self.frames_per_token
        value = assumed_sum(node, data, known, self.tensor, frames)
        if value is not None:
            self.durations[node.name or f"{node.op_type}_{node.position}"] = None
        return value

    def regulated(self) -> Regulated | None:
        """The frames-per-token assumption, the sums it sized and the nodes whose sizes rest on
        them: a value input (VALUE_INPUTS) folded from one, as the Range to the frames' limit;
        None where none was needed."""
        if not self.durations:
            return None
        frames, assumed = self.frames_per_token, self.folder.assumed
        sized = tuple(node.name or f"{node.op_type}_{node.position}" for node in self.nodes if any(
            slot < len(node.inputs) and node.inputs[slot] in assumed
            for slot in shape_rules.value_inputs(node.domain, node.op_type) or (VALUE_INPUTS.get(node.op_type, ()) if not node.domain else ())))  # fmt: skip
        return Regulated(
            FRAMES_PER_TOKEN if frames is None else frames, frames is not None, tuple(self.durations), sized
        )

    @functools.cached_property
    def producers(self) -> dict[str, Node]:
        """The node computing each value, built when a bound first needs them."""
        return {name: node for node in self.nodes for name in node.outputs if name}

    @functools.cached_property
    def consumers(self) -> dict[str, list[Node]]:
        """The nodes reading each value, built when an assumption first needs them."""
        readers: dict[str, list[Node]] = {}
        for node in self.nodes:
            for name in node.inputs:
                readers.setdefault(name, []).append(node)
        return readers

    def tensor(self, name: str) -> TensorInfo | None:
        """A value's TensorInfo, with the symbols learned so far put in."""
        self.resolved(name)
        return self.values.get(name)

    def resolved(self, name: str) -> bool:
        """Whether the value is fully known, after putting in the symbols learned so far."""
        info = self.values.get(name)
        if info is None or info.is_known:
            return info is not None
        if info.shape is None or info.dtype is None or not self.symbols:
            return False
        shape = self.substitute(info.shape)
        if not _all_int(shape):
            return False
        info = self.values[name] = TensorInfo(name, shape, info.dtype, info.key_dtype, info.sequence, info.elements)
        return info.is_known  # a sequence needs its elements too

    def substitute(self, shape: tuple[Dim, ...]) -> tuple[Dim, ...]:
        return tuple(self.symbols.get(d, d) if isinstance(d, str) else d for d in shape)

    def substituted(self, name: str) -> TensorInfo | None:
        """The value as ONNX's pass typed it, with the symbols learned so far put in (not stored:
        some dims may still be unknown)."""
        info = self.values.get(name)
        if info is None or info.shape is None:
            return info
        return TensorInfo(name, self.substitute(info.shape), info.dtype, info.key_dtype, info.sequence, info.elements)

    def learn(self, info: TensorInfo) -> bool:
        """Record a newly typed value; where ONNX's pass gave it symbolic dims of its own making
        ("unk__0"), learn what they stand for: one symbol means one size throughout its result,
        so every value that carries it resolves without being inferred again — except a symbol of
        a sequence's element type (`element_symbols`): ONNX types a sequence's elements as one, so
        the SequenceAts of uneven pieces, and all that follows them, share it for different sizes."""
        old = self.values.get(info.name)
        if known(old) or not (info.is_known or old is None):
            return False
        self.values[info.name] = info
        if (
            old is not None
            and old.shape is not None
            and known(info)
            and not info.sequence
            and len(old.shape) == len(info.shape)
        ):
            for before, after in zip(old.shape, info.shape, strict=False):
                if isinstance(before, str) and before not in self.element_symbols:
                    self.symbols.setdefault(before, after)
        return info.is_known

    def type_outputs(
        self, node: Node, inputs: tuple[TensorInfo | None, ...]
    ) -> tuple[dict[str, TensorInfo], str | None]:
        """(outputs typed, why not where they were not): a shape rule first, else ONNX's
        inference of this one node with the values folded so far."""
        if shape_rules.lookup(node.domain, node.op_type) is not None:
            reasons: dict[str, str] = {}
            typed = shape_rules.infer_node(node.proto, inputs, self.folder.value, self.opsets.get(node.domain), reasons)
            if reasons:
                return typed, next(iter(reasons.values()))
            return typed, None if typed else self.shape_rule_failure(node)
        if not node.domain and node.op_type in self.BODIES:
            typed = self.BODIES[node.op_type](self, node, inputs)
            if all(name in typed for name in node.outputs if name):
                return typed, None
        schema = _schema(node.op_type, self.opsets.get(node.domain), node.domain)
        if schema is None and (node.proto.domain, node.op_type) not in self.functions:
            return {}, f"no shape rule for {_qualified(node)}" + _not_onnx(node, self.opsets.get(""))
        return self.onnx_node_inference(node, inputs, schema)

    def shape_rule_failure(self, node: Node) -> str:
        """Why a shape rule typed nothing: a value it reads is not a constant, or the inputs."""
        slots = shape_rules.value_inputs(node.domain, node.op_type)
        unfolded = [
            node.inputs[s]
            for s in slots
            if s < len(node.inputs) and node.inputs[s] and self.folder.value(node.inputs[s]) is None
        ]
        if unfolded:
            return f"the shape rule for {_qualified(node)} needs the value of {', '.join(repr(n) for n in unfolded)}, not a constant the analysis could fold"
        return f"the shape rule for {_qualified(node)} failed on these inputs"

    def onnx_node_inference(self, node: Node, inputs, schema) -> tuple[dict[str, TensorInfo], str | None]:
        """ONNX's inference of one node (a one-node model where it calls a model-local function),
        its inputs typed and their values given where folded."""
        types = {t.name: _type_proto(t.shape, t.dtype, t.sequence) for t in inputs if t is not None}
        for name in outer_references(node.proto):  # a body's reads of this scope
            if known(info := self.values.get(name)):
                types[name] = _type_proto(info.shape, info.dtype, info.sequence)
        value_slots = VALUE_INPUTS.get(node.op_type, ()) if not node.domain else ()
        data = {
            name: numpy_helper.from_array(value, name)
            for slot, (name, tensor) in enumerate(zip(node.inputs, inputs, strict=False))
            if tensor is not None
            and (slot in value_slots or _may_be_shape(tensor))
            and tensor.numel <= MAX_FOLDED_ELEMENTS
            and (value := self.folder.value(name)) is not None
        }
        if id(node) in self.crashes:
            return {}, self.crashes[id(node)]
        try:
            if schema is None:
                call = self.function_call(node, types, data)
                outputs = self.isolated(node, lambda: _infer_function_call(call))
            else:
                proto = with_defaults(node.proto)
                outputs = self.isolated(
                    node,
                    lambda: onnx.shape_inference.infer_node_outputs(
                        schema, proto, types, data, opset_imports=self.opset_imports, ir_version=self.ir_version
                    ),
                )
        except PassCrashed as exc:
            message = (
                f"ONNX shape inference of node {node.name or node.op_type!r} ({_qualified(node)}) {CRASHED} ({exc.how})"
            )
            log.warning(message)
            self.warnings.append(message)
            self.crashed = True
            self.crashes[id(node)] = reason = f"ONNX shape inference of {_qualified(node)} {CRASHED} ({exc.how})"
            return {}, reason
        except Exception as exc:  # onnx raises InferenceError, RuntimeError, ValueError, …: it is the reason
            return {}, f"ONNX shape inference of {_qualified(node)} failed: {_first_line(exc)}"
        typed = {
            name: TensorInfo(name, *(_read_type(type_proto) or (None, None))) for name, type_proto in outputs.items()
        }
        unknown = [name for name in node.outputs if name and not known(typed.get(name))]
        return typed, _unknown_output_reason(node, unknown, outputs) if unknown else None

    def isolated(self, node: Node, fn: Callable[[], dict[str, onnx.TypeProto]]) -> dict[str, onnx.TypeProto]:
        """A one-node ONNX call, in a child process (isolation.py) where the node's domain is
        CRASH_PRONE or ONNX's pass crashed on this graph; in-process otherwise (a fork for each
        node a sweep visits would cost far more than the inference)."""
        return isolated(
            f"ONNX's C++ shape inference of {_qualified(node)}",
            fn,
            risky=self.crashed or node.domain in CRASH_PRONE_DOMAINS,
        )

    def function_call(self, node: Node, types, data) -> onnx.ModelProto:
        """A one-node model calling a model-local function, for ONNX's inference to type."""
        graph = onnx.helper.make_graph(
            [node.proto],
            "call",
            [onnx.helper.make_value_info(name, type_proto) for name, type_proto in types.items() if name not in data],
            [onnx.helper.make_empty_tensor_value_info(name) for name in node.outputs if name],
            initializer=list(data.values()),
        )
        return onnx.helper.make_model(
            graph, opset_imports=self.opset_imports, ir_version=self.ir_version, functions=self.model.functions
        )

    def body(
        self, node: Node, attribute: str, inputs: Sequence[TensorInfo | None]
    ) -> tuple[onnx.GraphProto, ShapeResult]:
        graph = next(attr.g for attr in node.attributes if attr.name == attribute)
        ranges = outer_ranges(graph, self.producers.get, self.folder.value, self.tensor, self.outer_ranges)
        result = infer_body(graph, inputs, self.tensor, self.folder.value, self.model, self.sizing, ranges)
        self.assumed.update(dict.fromkeys(result.assumed))
        self.bounds.extend(result.bounds)
        return graph, result

    @property
    def graph_inputs(self) -> dict[str, TensorInfo | None]:
        """The graph's inputs (not initializers) as typed so far."""
        graph = self.model.graph
        weights = {tensor.name for tensor in graph.initializer}
        return {value.name: self.values.get(value.name) for value in graph.input if value.name not in weights}

    def loop_outputs(self, node: Node, inputs: tuple[TensorInfo | None, ...]) -> dict[str, TensorInfo]:
        """A Loop's outputs from its body, typed with the carried values as the call site has them
        (ONNX's inference of the node cannot see the outer constants a body folds): a carried value
        whose body output keeps its input's shape ends with that shape, one that grows by the same
        length along one axis each trip (a result appended to: torchvision's pasted masks) ends
        that length × the trips longer; a scan output stacks the body's per-trip output trip-count
        times."""
        carried = inputs[2:]
        body_inputs = [TensorInfo("iteration_num", (), "int64"), TensorInfo("condition", (), "bool"), *carried]
        graph, result = self.body(node, "body", body_inputs)
        ends = [result.values.get(output.name) for output in graph.output[1:]]
        typed: dict[str, TensorInfo] = {}
        trips = self.folder.value(node.inputs[0]) if node.inputs and node.inputs[0] else None
        for slot, (name, start, end) in enumerate(zip(node.outputs, carried, ends, strict=False)):
            if name and known(end) and start is not None and end.shape == start.shape:
                typed[name] = TensorInfo(name, end.shape, end.dtype)
            elif name and known(end) and known(start) and trips is not None and trips.size == 1:
                grown = self.grown(node, body_inputs, slot, start, end, int(trips.reshape(-1)[0]))
                typed.update({name: TensorInfo(name, grown, end.dtype)} if grown is not None else {})
        for name, per_trip in zip(node.outputs[len(carried) :], ends[len(carried) :], strict=False):
            if name and known(per_trip) and trips is not None and trips.size == 1:
                typed[name] = TensorInfo(name, (int(trips.reshape(-1)[0]), *per_trip.shape), per_trip.dtype)
        return typed

    def grown(self, node: Node, body_inputs: list[TensorInfo | None], slot: int, start: KnownTensor,
              end: KnownTensor, trips: int) -> tuple[int, ...] | None:  # fmt: skip
        """A carried value's shape after `trips` trips where each trip lengthens one axis by the
        same amount: the body typed again from its first trip's end must grow it as much again;
        None where it does not (a shape that is not a running append)."""
        grows = [axis for axis, (a, b) in enumerate(zip(start.shape, end.shape, strict=False)) if a != b]
        if len(start.shape) != len(end.shape) or len(grows) != 1 or end.shape[grows[0]] < start.shape[grows[0]]:
            return None
        axis, step = grows[0], end.shape[grows[0]] - start.shape[grows[0]]
        again = list(body_inputs)
        again[2 + slot] = dataclasses.replace(end, name=start.name)
        graph, result = self.body(node, "body", again)
        second = result.values.get(graph.output[1 + slot].name)
        expected = (*end.shape[:axis], end.shape[axis] + step, *end.shape[axis + 1 :])
        if not known(second) or second.shape != expected:
            return None
        return (*start.shape[:axis], start.shape[axis] + trips * step, *start.shape[axis + 1 :])

    def scan_outputs(self, node: Node, inputs: tuple[TensorInfo | None, ...]) -> dict[str, TensorInfo]:
        """A Scan's (opset ≥ 9) outputs from its body, which sees each scan input with its scan axis
        removed: states end with the body's state shape (when it keeps its input's), each scan
        output stacks the body's per-iteration output along its scan_output_axes entry. Attributes
        a runtime would refuse (2^31 - 1 scan inputs, an axis outside a scan input's rank) type
        nothing here: ONNX's inference of the node says what is wrong."""
        if self.opsets.get("", 0) < 9:
            return {}
        attrs = {attr.name: attr for attr in node.attributes}
        scans = attrs["num_scan_inputs"].i if "num_scan_inputs" in attrs else 0
        if not 0 < scans <= len(inputs):
            return {}
        states, sliced = inputs[: len(inputs) - scans], inputs[len(inputs) - scans :]
        ranked = [t for t in sliced if ranked_tensor(t)]
        if len(ranked) < len(sliced):
            return {}
        input_axes = list(attrs["scan_input_axes"].ints) if "scan_input_axes" in attrs else [0] * scans
        if len(input_axes) != scans or not all(
            -len(t.shape) <= axis < len(t.shape) for axis, t in zip(input_axes, ranked, strict=False)
        ):
            return {}
        axes = [axis % t.rank for axis, t in zip(input_axes, ranked, strict=False)]
        length = ranked[0].shape[axes[0]]
        slices = [
            TensorInfo(t.name, t.shape[:axis] + t.shape[axis + 1 :], t.dtype)
            for t, axis in zip(ranked, axes, strict=False)
        ]
        graph, result = self.body(node, "body", [*states, *slices])
        ends = [result.values.get(output.name) for output in graph.output]
        typed: dict[str, TensorInfo] = {}
        for name, start, end in zip(node.outputs, states, ends, strict=False):
            if name and known(end) and start is not None and end.shape == start.shape:
                typed[name] = TensorInfo(name, end.shape, end.dtype)
        per_step = ends[len(states) :]
        output_axes = list(attrs["scan_output_axes"].ints) if "scan_output_axes" in attrs else [0] * len(per_step)
        for name, step, axis in zip(node.outputs[len(states) :], per_step, output_axes, strict=False):
            if name and known(step) and -len(step.shape) - 1 <= axis <= len(step.shape):
                axis %= len(step.shape) + 1
                typed[name] = TensorInfo(name, (*step.shape[:axis], length, *step.shape[axis:]), step.dtype)
        return typed

    def if_outputs(self, node: Node, inputs: tuple[TensorInfo | None, ...] = ()) -> dict[str, TensorInfo]:
        """An If's outputs: the branch a folded condition takes, or a merged decoder's cache flag at
        the bound dims (bodies.cache_branch: the branch the walk costs), else what both branches
        agree on."""
        condition = self.folder.value(node.inputs[0])
        if condition is not None:
            branches = ["then_branch" if condition.reshape(-1)[0] else "else_branch"]
        elif (implied := cache_branch(node.inputs[0], self.graph_inputs)) is not None and implied.taken:
            branches = [implied.taken]
        else:
            branches = ["then_branch", "else_branch"]
        results = []
        for branch in branches:
            graph, result = self.body(node, branch, ())
            if len(graph.output) != len(
                node.outputs
            ):  # a runtime refuses it (conformance flags it); ONNX's inference says why
                return {}
            results.append([result.values.get(output.name) for output in graph.output])
        typed: dict[str, TensorInfo] = {}
        for index, name in enumerate(node.outputs):
            options = {(info.shape, info.dtype) for info in (outputs[index] for outputs in results) if known(info)}
            if name and len(options) == 1 and all(known(outputs[index]) for outputs in results):
                typed[name] = TensorInfo(name, *options.pop())
        return typed

    def sequence_map_outputs(self, node: Node, inputs: tuple[TensorInfo | None, ...]) -> dict[str, TensorInfo]:
        """A SequenceMap's output sequences, element by element: the body typed with the i-th
        element of each sequence input (control_flow.element_inputs) gives their i-th elements."""
        present = [t for t in inputs if t is not None and (not t.sequence or t.elements is not None)]
        first = present[0].elements if present and present[0].sequence else None
        if not inputs or len(present) < len(inputs) or first is None:
            return {}
        elements: list[list[tuple]] = [[] for _ in node.outputs]
        dtypes: list[str | None] = [None] * len(node.outputs)
        for index in range(len(first)):
            graph, result = self.body(node, "body", element_inputs(present, index))
            for slot, output in enumerate(graph.output[: len(node.outputs)]):
                info = result.values.get(output.name)
                if not known(info):
                    return {}
                elements[slot].append(info.shape)
                dtypes[slot] = info.dtype
        return {
            name: sequence_of(name, shapes, dtype)
            for name, shapes, dtype in zip(node.outputs, elements, dtypes, strict=False)
            if name
        }

    BODIES = {
        "Loop": loop_outputs,
        "If": if_outputs,
        "Scan": scan_outputs,
        "SequenceMap": sequence_map_outputs,
    }  # ops typed from their bodies

    def root_cause(self, nodes: list[Node], needed: set[str]) -> RootCause | None:
        """The first node, in graph order, whose present inputs are all known and some of whose
        needed outputs are not."""
        values = self.values
        for index, node in enumerate(nodes):
            if all(known(values.get(name)) for name in node.outputs if name in needed):
                continue
            if all(known(values.get(name)) for name in node.inputs if name):
                reason = self.failures.get(id(node), "its outputs could not be typed")
                sources = self.value_sources(node, nodes)
                if sources:
                    reason += f" (computed from the values of graph input{'s' if len(sources) > 1 else ''} {', '.join(map(repr, sources))}: {self.value_hint(sources)})"
                if node.op_type in SELECTING_OPS and not node.domain:
                    reason += "; --nonzero-fraction F sizes it as if F of its candidates were selected"
                return RootCause(index, node.name or f"{node.op_type}_{index}", node.op_type, node.domain, reason)
        return None

    def value_hint(self, sources: list[str]) -> str:
        """How to give the inputs `sources` their values: --value in the form each one's shape
        takes (input_values.value_flag), or why no flag can (a token tensor, an image)."""
        shapes = {source: getattr(self.values.get(source), "shape", None) for source in sources}
        flags = {source: value_flag(source, shapes[source]) for source in sources}
        givable = [flag for flag in flags.values() if flag]
        if givable:
            return f"give {'it' if len(givable) == 1 else 'them'} with {' '.join(givable)}"
        data = ", ".join(f"{source!r} {list(shapes[source] or ())}" for source in sources)
        return f"{data}: a value (--value) is given only to a scalar or a short 1-D input, and no flag sizes what is computed from {'it' if len(sources) == 1 else 'them'}"

    def value_sources(self, node: Node, nodes: list[Node]) -> list[str]:
        """The graph inputs whose values — not just their shapes: a Shape or Size reads no value —
        the node's unfolded value inputs are computed from (a mask's sum sizing an Expand, a
        NonZero of it): what makes them data, and what a user could give a value."""
        if node.op_type in _DATA_DEPENDENT:
            slots: Sequence[int] = range(len(node.inputs))
        else:
            slots = shape_rules.value_inputs(node.domain, node.op_type) or (
                VALUE_INPUTS.get(node.op_type, ()) if not node.domain else ()
            )
        pending = [
            node.inputs[s]
            for s in slots
            if s < len(node.inputs) and node.inputs[s] and self.folder.value(node.inputs[s]) is None
        ]
        producers = {name: producer for producer in nodes for name in producer.outputs if name}
        graph = self.model.graph
        graph_inputs = {value.name for value in graph.input} - {tensor.name for tensor in graph.initializer}
        seen, found = set(), set()
        while pending:
            name = pending.pop()
            if name in seen:
                continue
            seen.add(name)
            producer = producers.get(name)
            if name in graph_inputs:
                found.add(name)
            elif producer is not None and producer.op_type not in ("Shape", "Size"):
                pending.extend(i for i in producer.inputs if i)
        return sorted(found)


def infer_body(
    graph: onnx.GraphProto,
    inputs: Sequence[TensorInfo | None],
    tensor: Callable[[str], TensorInfo | None],
    value: Callable[[str], np.ndarray | None],
    model: onnx.ModelProto,
    sizing: Sizing = UNSIZED,
    ranges: Mapping[str, Range] = NO_RANGES,
    checked: bool = False,
) -> ShapeResult:
    """The shape engine over a scratch model of a body (a Loop's, an If branch): its inputs declared
    as the call site types them (the body's own declaration where the call site has none), the
    outer values its nodes read declared as inputs of their known type, or as initializers where
    they are small constants (axes, shapes, trip counts) whose value inference needs, sized as the
    graph that holds it (`sizing`: a run's found sizes include a body's values), the outer values'
    `ranges` those of the graph around it (ranges.outer_ranges: a box clipped outside the body)."""
    declared = []
    for index, declaration in enumerate(graph.input):
        typed = inputs[index] if index < len(inputs) else None
        info = typed if typed is not None and typed.shape is not None and typed.dtype else tensor(declaration.name)
        declared.append(
            dataclasses.replace(info, name=declaration.name).value_info()
            if ranked_tensor(info) and info.dtype is not None
            else declaration
        )
    initializers = list(graph.initializer)
    for name in graph_outer_references(graph):
        info = tensor(name)
        small = info is not None and info.is_known and info.numel <= MAX_FOLDED_ELEMENTS
        array = value(name) if small else None
        if array is not None:
            initializers.append(numpy_helper.from_array(array, name))
        elif info is not None and info.shape is not None and info.dtype is not None:
            declared.append(info.value_info())
    outer = initializers[len(graph.initializer) :]
    seen_as = (
        *[d.SerializeToString() for d in declared],
        None,
        *[t.SerializeToString() for t in outer],
        None,
        *[(name, bounds.low.tobytes(), bounds.high.tobytes()) for name, bounds in sorted(ranges.items())],
    )
    return once(  # the engine types an If's branch for its outputs, the walk for its rows: alike
        "typed body",
        graph,
        lambda: _infer_scratch(graph, declared, initializers, model, sizing, ranges),
        seen_as,
        id(model),
        id(sizing),
        keep=(model, sizing),
    )


def _infer_scratch(
    graph: onnx.GraphProto,
    declared: list[onnx.ValueInfoProto],
    initializers: list[onnx.TensorProto],
    model: onnx.ModelProto,
    sizing: Sizing,
    ranges: Mapping[str, Range] = NO_RANGES,
) -> ShapeResult:
    outputs = [onnx.helper.make_empty_tensor_value_info(output.name) for output in graph.output]
    body = onnx.helper.make_graph(graph.node, graph.name or "body", declared, outputs, initializer=initializers)
    scratch = onnx.helper.make_model(body, opset_imports=model.opset_import, ir_version=model.ir_version)
    scratch.functions.extend(model.functions)
    return infer(scratch, read_nodes(graph), sizing=sizing, ranges=ranges)


def _unknown_output_reason(node: Node, unknown: list[str], types: Mapping[str, onnx.TypeProto]) -> str:
    """Why ONNX typed the node but not these outputs: they are sequences of tensors (SequenceEmpty's,
    a SplitToSequence's), which no TensorInfo describes; or a value it needs is data, not a constant."""
    if node.op_type in _DATA_DEPENDENT:
        return f"{node.op_type}'s output size depends on the values of its input data"
    sequences = [
        name
        for name in unknown
        if name in types and types[name].WhichOneof("value") in ("sequence_type", "optional_type")
    ]
    if sequences:
        return f"{', '.join(repr(n) for n in sequences[:3])}: a sequence of tensors, whose elements the analysis does not follow through {node.op_type}"
    return f"ONNX cannot type {', '.join(repr(n) for n in unknown[:3])}: an input value it needs is not a constant the analysis could fold"


VALUE_INPUTS: dict[str, tuple[int, ...]] = {
    "Reshape": (1,), "Expand": (1,), "Tile": (1,), "ConstantOfShape": (0,), "Range": (0, 1, 2), "Slice": (1, 2, 3, 4),
    "Pad": (1, 3), "Resize": (2, 3), "Upsample": (1,), "Unsqueeze": (1,), "Squeeze": (1,), "Split": (1,), "TopK": (1,),
    "OneHot": (1,), "CenterCropPad": (1,), "ReduceSum": (1,), "ReduceMean": (1,), "ReduceMax": (1,), "ReduceMin": (1,),
    "ReduceProd": (1,), "ReduceL1": (1,), "ReduceL2": (1,), "ReduceLogSum": (1,), "ReduceLogSumExp": (1,),
    "ReduceSumSquare": (1,),
}  # fmt: skip
"""The ai.onnx inputs whose value ONNX's inference of a node reads (`getInputData`), by slot: a
float among them (Resize's scales) is folded for it too."""

_DATA_DEPENDENT = {"NonZero", "Unique", "NonMaxSuppression", "Compress", "StringSplit", "TopK", "RegexFullMatch"}


def _may_be_shape(info: TensorInfo | None) -> bool:
    """Whether a value could be a shape, an axis or an index, by what ONNX's pass knows of it:
    not floating-point, and small. An activation ([batch, 1, 768], batch unknown) is not worth
    evaluating a chain for; a float that a shape is computed from (Resize's scales) is folded
    when the value input that needs it is."""
    if info is None:
        return True
    if is_floating(info.dtype):
        return False
    return info.shape is None or math.prod(d for d in info.shape if isinstance(d, int)) <= MAX_FOLDED_ELEMENTS


def _all_int(shape: tuple) -> bool:
    return all(isinstance(d, int) for d in shape)


def _qualified(node: Node) -> str:
    return f"{node.domain}::{node.op_type}" if node.domain else node.op_type


def _not_onnx(node: Node, opset: int | None) -> str:
    """Where a default-domain op is no ai.onnx operator at all (tf2onnx's `Erfc`), say so: the
    graph is not valid ONNX, and onnxruntime refuses it too."""
    if node.domain or onnx.defs.has(node.op_type):
        return ""
    return f" (not an ai.onnx operator at any opset: the graph is not valid ONNX at opset {opset})"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]


@functools.lru_cache(maxsize=4096)
def _type_proto(shape: tuple | None, dtype: str, sequence: bool = False) -> onnx.TypeProto:
    """A tensor type (a sequence of such tensors), built once per (shape, dtype): a graph's values
    share few (read-only here)."""
    tensor = onnx.helper.make_tensor_type_proto(elem_type(dtype), None if shape is None else list(shape))
    return onnx.helper.make_sequence_type_proto(tensor) if sequence else tensor


@functools.cache
def _schema(op_type: str, opset: int | None, domain: str):
    try:
        return onnx.defs.get_schema(op_type, opset if opset is not None else onnx.defs.onnx_opset_version(), domain)
    except onnx.defs.SchemaError:
        return None


def _needed_outputs(model: onnx.ModelProto, nodes: list[Node]) -> set[str]:
    """Node outputs something reads: another node, a body, or the graph's outputs. An output
    nobody reads (an old Dropout's mask) must not hold its node back."""
    needed = set(chain.from_iterable(map(_INPUTS, nodes)))  # in C: this runs over every node of the graph
    for node in _body_holders(model, nodes):
        needed.update(outer_references(node.proto))
    needed.discard("")  # an absent optional input
    needed.update(output.name for output in model.graph.output)
    return needed


_INPUTS = attrgetter("inputs")


def _body_holders(model: onnx.ModelProto, nodes: list[Node]) -> list[Node]:
    """The nodes that hold a body (If, Loop, Scan...), in stored order: only those of an op that
    may (schemas.may_have_bodies: validation refused an attribute an op's schema lacks) looked at."""
    imported = opsets(model)
    holders = of_kinds(nodes, lambda domain, op_type: may_have_bodies(domain, op_type, imported.get(domain)))
    return [node for node in holders if node.holds_body]


def _shape_map_inputs(
    graph: onnx.GraphProto, values: dict[str, TensorInfo], shapes: Mapping[str, tuple[int, ...]], warnings: list[str]
) -> None:
    """Map-typed graph inputs (a DictVectorizer's) take the shapes given them; one given none is
    said: how many entries a map holds is data, and nothing downstream can be sized without it."""
    for value in graph.input:
        info = values.get(value.name)
        if info is None or info.key_dtype is None:
            continue
        if value.name in shapes:
            values[value.name] = TensorInfo(value.name, shapes[value.name], info.dtype, info.key_dtype)
        else:
            rank = len(cast("tuple[Dim, ...]", info.shape))  # a map's type has a shape (_read_map_type)
            form = "[maps, entries]" if rank == 2 else "[entries]"
            example = "8x3" if rank == 2 else "16"
            warnings.append(
                f"graph input {value.name!r} is a map, whose entry count is data: give its shape {form} "
                f"as an input shape (--input {value.name}={example})"
            )


def _unknown(values: dict[str, TensorInfo], nodes: list[Node], needed: set[str]) -> tuple[list[Node], list[str]]:
    """The nodes with an output not fully known that something reads — or that nothing reads at
    all (a dead node, costed as any other) — in graph order, and the unknown outputs nobody reads of
    the other nodes (an old Dropout's mask): one plain loop, as this runs over every node of the
    graph and for most of them finds nothing. Only the sweep changes what is known, and only of the
    nodes it is given."""
    unknown, unread = [], []
    get = values.get
    for node in nodes:
        pending, missing = False, []
        for name in node.outputs:
            info = get(name)
            if info is None or not info.is_known:
                if name in needed:
                    pending = True
                elif name:
                    missing.append(name)
        if pending:
            unknown.append(node)
            unread.extend(missing)
        elif missing:
            if any(name in needed for name in node.outputs):
                unread.extend(missing)
            else:
                unknown.append(node)  # a dead node: typed and costed as any other
    return unknown, unread


CRASHED = "crashed in a child process"  # what a warning says of an ONNX pass that crashed (isolation.py)


def _infer_function_call(call: onnx.ModelProto) -> dict[str, onnx.TypeProto]:
    """ONNX's inference of a one-node model that calls a model-local function: its values' types."""
    inferred = onnx.shape_inference.infer_shapes(call, strict_mode=True, data_prop=True).graph
    return {value.name: value.type for value in [*inferred.value_info, *inferred.output]}


MISINFERRED = frozenset({"MaxPool", "AveragePool"})
"""ai.onnx ops ONNX's inference types wrong in some form: a pool under ceil_mode keeps a last window
that would start in the end padding (onnx 1.23; onnxruntime, PyTorch and the reference drop it)."""


def _clear_misinferred(values: dict[str, TensorInfo], nodes: list[Node]) -> None:
    """Where ONNX's pass typed a MISINFERRED node otherwise than its shape rule does, clear the
    node's outputs and every value computed from them (rank unknown, dtype kept): the sweep types
    them again, the node by its rule. One loop of set lookups where no pool has ceil_mode."""
    if not any(op_type in MISINFERRED and not domain for domain, op_type in kinds(nodes)):
        return  # no pool: nothing to walk
    stale: set[str] = set()
    for node in nodes:
        if stale and not stale.isdisjoint(node.inputs):
            stale.update(name for name in node.outputs if name)
        elif (
            node.op_type in MISINFERRED
            and not node.domain
            and any(a.name == "ceil_mode" and a.i for a in node.attributes)
        ):
            inputs = tuple(values.get(name) if name else None for name in node.inputs)
            if inputs and inputs[0] is not None and all(t.is_known for t in inputs if t is not None):
                ruled = shape_rules.infer_node(node.proto, inputs, lambda name: None)
                if any(
                    name in ruled and not _same_type(ruled[name], values.get(name)) for name in node.outputs if name
                ):
                    stale.update(name for name in node.outputs if name)
    for name in stale:
        if name in values:
            values[name] = TensorInfo(name, None, values[name].dtype)


def _same_type(a: TensorInfo, b: TensorInfo | None) -> bool:
    return b is not None and a.shape == b.shape and a.dtype == b.dtype


def _for_inference(model: onnx.ModelProto, nodes: list[Node]) -> onnx.ModelProto:
    """The model as shape inference needs it. Dynamo exports carry metadata_props on every node
    (stack traces, most of the file), which inference would serialize, parse and return for
    nothing: a copy without them halves its time (the first node tells whether they are there).
    A default inference misreads is spelled out in the copy (spec_defaults.py)."""
    metadata, defaults = bool(nodes) and nodes[0].has_metadata, lacks_defaults(nodes)
    if not metadata and not defaults:
        return model
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    if metadata:
        for node in copy.graph.node:
            node.ClearField("metadata_props")
    if defaults:
        spell_out_defaults(copy.graph.node)
    return copy


def _checked_inference(model: onnx.ModelProto, nodes: list[Node]) -> tuple[DeclaredTypes | None, Mode]:
    """ONNX's pass over the graph (whole or in pieces, as _onnx_inference), checked: its types, or
    None where it raised or crashed (the usual pass then says what went wrong), and the mode it
    ran in. A graph whose nodes hold bodies runs it without data propagation, as onnx's full check
    does: with it, ONNX errs on the names two branches share ("Data for input 0 already exists",
    onnx 1.23, optimum's merged decoders)."""
    mode = CHECKED if _body_holders(model, nodes) else CHECKED_PROPAGATED
    try:
        if len(nodes) > pieces.PIECE_NODES:
            return pieces.inferred_types_in_pieces(model, nodes, pieces.PIECE_NODES, None, mode), mode
        return inferred_types(_for_inference(model, nodes), mode), mode
    except Exception:  # onnx raises several types (InferenceError, ValidationError, RuntimeError), PassCrashed
        return None, mode


def _onnx_inference(
    model: onnx.ModelProto, nodes: list[Node], warnings: list[str], crashed: list[str]
) -> DeclaredTypes:
    """ONNX's inference over the whole graph (in pieces where it is very large: pieces.py): the
    value types it declares (inferred.py); where it fails, the model's own, and the sweep types
    node by node. Where it crashed (isolation.py), the part it crashed on is added to `crashed`."""

    def failed(where: str, exc: Exception) -> None:
        if isinstance(exc, PassCrashed):
            crashed.append(where)
            message = f"ONNX shape inference of {where} {CRASHED} ({exc.how}); typed node by node instead"
        else:
            message = f"ONNX shape inference of {where} failed ({_first_line(exc)}); typed node by node instead"
        log.warning(message)
        warnings.append(message)

    if len(nodes) > pieces.PIECE_NODES:
        return pieces.inferred_types_in_pieces(model, nodes, pieces.PIECE_NODES, failed)
    try:
        return inferred_types(_for_inference(model, nodes))
    except Exception as exc:  # onnx raises several types (InferenceError, RuntimeError); keep going without
        failed("the whole graph", exc)
        return declared_types(model.graph)


_TensorType = tuple[
    tuple[Dim, ...] | None, str | None, str | None, bool
]  # (shape, dtype, key dtype: a map's, a sequence)


def collect(
    graph: onnx.GraphProto, nodes: list[Node] | None = None, declared: DeclaredTypes | None = None
) -> dict[str, TensorInfo]:
    """TensorInfo for every value the graph declares (inputs, initializers, value_info, outputs).
    `nodes`: the graph's nodes, where the caller has read them already; `declared`: the inputs',
    value_info's and outputs' types (inferred.py: ONNX's inferred ones), if not `graph`'s own."""
    values: dict[str, TensorInfo] = {}
    # A graph's values share few distinct types (every [batch, sequence, 768] activation has the
    # same one): each is parsed and read field by field once, keyed by its serialized bytes.
    types: dict[bytes, _TensorType | None] = {}
    declared = declared_types(graph) if declared is None else declared
    for value in declared:
        key = value.type
        if key in types:
            typed = types[key]
        else:
            typed = types[key] = _read_type(onnx.TypeProto.FromString(key))
        if typed is None:
            continue
        name = value.name
        info = TensorInfo(name, *typed)
        old = values.get(name)
        if old is None or _moreknown(info, old):
            values[name] = info
    for tensor in graph.initializer:
        values[tensor.name] = TensorInfo(tensor.name, tuple(tensor.dims), dtype_name(tensor.data_type))
    constants = of_kinds(read_nodes(graph) if nodes is None else nodes, _constant)
    for node in constants:  # Constant outputs are known without inference
        if node.outputs and node.outputs[0] not in values:
            value = constant_value(node.attributes)
            if value is not None:
                values[node.outputs[0]] = TensorInfo(node.outputs[0], value.shape, _numpy_dtype_name(value))
    return values


def _constant(domain: str, op_type: str) -> bool:
    return op_type == "Constant"  # of any domain, as collect has always read them


def declared_value(value: onnx.ValueInfoProto) -> TensorInfo | None:
    """What a ValueInfoProto declares, as TensorInfo; None for what no TensorInfo describes."""
    typed = _read_type(value.type)
    return None if typed is None else TensorInfo(value.name, *typed)


def _read_type(value_type: onnx.TypeProto) -> _TensorType | None:
    """A tensor type's (shape, dtype, None, False); a sequence of tensors' (its elements' shape and
    dtype, None, True); a map's or a sequence of maps' (_read_map_type); None for optionals and
    other nestings."""
    kind = value_type.WhichOneof("value")
    if kind == "sequence_type" and value_type.sequence_type.elem_type.WhichOneof("value") == "tensor_type":
        shape, dtype, _, _ = _read_tensor_type(value_type.sequence_type.elem_type.tensor_type)
        return shape, dtype, None, True
    if kind != "tensor_type":
        return _read_map_type(value_type, kind)
    return _read_tensor_type(value_type.tensor_type)


def _read_tensor_type(tensor_type: onnx.TypeProto.Tensor) -> _TensorType:
    shape: tuple[Dim, ...] | None = None
    if tensor_type.HasField("shape"):
        # A slice reads a repeated field faster than iterating it; a non-zero dim_value is set.
        shape = tuple([d.dim_value or _dim(d) for d in tensor_type.shape.dim[:]])
    return shape, dtype_name(tensor_type.elem_type), None, False


def _read_map_type(value_type: onnx.TypeProto, kind: str | None) -> _TensorType | None:
    """A map of scalar values as TensorInfo describes one: shape [entries], the values' dtype and
    the keys'; a sequence of maps [maps, entries]. Neither count is in the type: both unknown."""
    shape: tuple[Dim, ...] = (None,)
    if kind == "sequence_type":
        value_type = value_type.sequence_type.elem_type
        kind, shape = value_type.WhichOneof("value"), (None, None)
    if kind != "map_type" or value_type.map_type.value_type.WhichOneof("value") != "tensor_type":
        return None
    entries = value_type.map_type
    return shape, dtype_name(entries.value_type.tensor_type.elem_type), dtype_name(entries.key_type), False


def _dim(dim: onnx.TensorShapeProto.Dimension) -> Dim:
    """A dim whose dim_value reads 0: a 0, a symbol (text.py: a value_info's may not be UTF-8), or unknown."""
    kind = dim.WhichOneof("value")
    return 0 if kind == "dim_value" else (as_text(dim.dim_param) if kind == "dim_param" else None)


def _moreknown(new: TensorInfo, old: TensorInfo) -> bool:
    return len(new.unknown_dims()) < len(old.unknown_dims()) or (old.dtype is None and new.dtype is not None)


def _numpy_dtype_name(array: np.ndarray) -> str | None:
    return dtype_name(onnx.helper.np_dtype_to_tensor_dtype(array.dtype))
