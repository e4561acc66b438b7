"""The analysis walk: load → bind dims → infer shapes → cost every node → place it on the roofline."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import math
import os
from collections import ChainMap
from collections.abc import Callable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import onnx

from onnx_roofline.costs import rules
from onnx_roofline.costs.cost import ADDITIVE, CompositeCost, Cost
from onnx_roofline.costs.hardware import Hardware, dtype_class, load_hardware
from onnx_roofline.costs.roofline import COMPUTE, MEMORY, Placement, place
from onnx_roofline.costs.rules.registry import VECTOR, Rule
from onnx_roofline.errors import DimensionConflict, DimensionError, UnboundDimensionError
from onnx_roofline.model.conformance import CHECKER, Invalid, conformance, mixed_input_types
from onnx_roofline.model.constants import MAX_FOLDED_ELEMENTS, constant_array, constant_table
from onnx_roofline.model.experts import MoeLayer, parameter_sizes, recognize
from onnx_roofline.model.inlining import inline_functions
from onnx_roofline.model.isolation import beside, spare_core
from onnx_roofline.model.loader import LoadedModel, load_with_nodes, parsed, validated
from onnx_roofline.model.memo import remembered
from onnx_roofline.model.nodes import Node, read_nodes
from onnx_roofline.model.op_node import ATTRIBUTES, KnownNode, OpNode
from onnx_roofline.model.schemas import opsets
from onnx_roofline.model.scopes import graph_outer_references
from onnx_roofline.model.status import Uncostable
from onnx_roofline.model.tensors import TensorInfo, with_precision, with_string_bytes
from onnx_roofline.model.validation import check_axes
from onnx_roofline.model.weights import Weight, parameter_count, weights
from onnx_roofline.report.experts import summarize
from onnx_roofline.report.model import (
    DATA_DEPENDENT,
    OK,
    RULE_ERROR,
    UNKNOWN_SHAPE,
    UNSUPPORTED,
    Assumed,
    Branch,
    ModelInfo,
    NodeResult,
    Report,
    Totals,
)
from onnx_roofline.shapes.bodies import CONTROL_FLOW, Body, bodies, choose_branch
from onnx_roofline.shapes.bounds import Bound, at_most
from onnx_roofline.shapes.declared import Declarations
from onnx_roofline.shapes.dims import bind, input_dim_names, map_shapes, symbolic_dims
from onnx_roofline.shapes.engine import ShapeResult, collect, infer, infer_body
from onnx_roofline.shapes.input_values import bind_values, if_conditions
from onnx_roofline.shapes.plausible import Implausible, constant_lookup, contradicted, runs_at
from onnx_roofline.shapes.ranges import outer_ranges
from onnx_roofline.shapes.roles import SOLVED, DimDefault, choose_defaults, suggested_defaults
from onnx_roofline.shapes.runnable import check_runnable, implied_sizes
from onnx_roofline.shapes.sizing import UNSIZED, Sizing, sizing_from_keywords
from onnx_roofline.shapes.texts import STRING_BYTES, StringBytes
from onnx_roofline.shapes.traced import solve, traced_gap


def analyze(
    model: str | os.PathLike | onnx.ModelProto | LoadedModel,
    hw: str | Hardware = "h100",
    sizing: Sizing | None = None,
    *,
    partial: bool = False,
    precision: str | None = None,
    fp32_matmul: str = "ieee",
    **former: Any,
) -> Report:
    """Analyze a model file (or ModelProto, which is not modified, or a file loaded once to be
    analyzed at many dims: loader.LoadedModel) on hardware `hw`, sized as `sizing` says
    (shapes/sizing.py: dims, input shapes, values, defaults and the assumptions on
    data-dependent sizes, one frozen value; None: the graph as declared).

    `partial`: leave dims unbound where a node needs them, its row uncosted; without it, a dim left
    unbound that blocks a cost raises UnboundDimensionError (a DimensionError) naming the
    `dims={...}` that would work (or give `Sizing(default_dims=True)`, as the command line does).

    `precision` ("fp16", "bf16", "fp8", "int8") costs every floating-point tensor, weights and
    activations alike, as if stored in that dtype; integer tensors (indices, shapes) keep theirs.

    `fp32_matmul`: "ieee" (the default: fp32 matmuls in full fp32, at `matrix.fp32`) or "tf32"
    (on TF32 tensor cores, at `matrix.tf32`): Hardware.with_fp32_matmul.

    `former`: the keywords this took before Sizing (`dims=`, `input_shapes=`, `values=`,
    `default_dims=`, `nonzero_fraction=`, `expert_load=`, `found_sizes=`, `frames_per_token=`),
    and a dims mapping in `sizing`'s place, still accepted with a DeprecationWarning until
    sizing.REMOVED_IN."""
    sizing = sizing_from_keywords(sizing, former)
    hardware = (hw if isinstance(hw, Hardware) else load_hardware(hw)).with_fp32_matmul(fp32_matmul)
    with cyclic_gc_paused(), remembered():
        return _analyze(model, hardware, sizing, partial, precision)


@contextlib.contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """The analysis allocates tens of thousands of small acyclic objects (value infos, results),
    which reference counting frees; each allocation also counts toward a cyclic collection that
    finds nothing to collect, about 5 % of an analysis. Paused for its duration, then restored
    (the deployed view built from a report pauses it too: views/deployed.py).

    What the analysis leaves alive (the report: millions of objects for a million-node graph)
    would otherwise sit in the youngest generation, and the collections after the pause would
    traverse all of it three times, promoting it generation by generation (a tenth of a
    million-node run): it is put in the oldest generation at once, where only a full collection
    looks at it, as it would look at it anyway. (gc.freeze then gc.unfreeze moves every tracked
    object there without a traversal; skipped when the program froze objects of its own.)"""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if not gc.get_freeze_count():
            gc.freeze()
            gc.unfreeze()
        if enabled:
            gc.enable()


def _analyze(
    model: str | os.PathLike | onnx.ModelProto | LoadedModel,
    hardware: Hardware,
    sizing: Sizing,
    partial: bool,
    precision: str | None,
) -> Report:
    """`analyze`, with the hardware resolved and the collector paused."""
    typed = bind_and_infer(model, sizing)
    proto, graph_nodes, shapes, dims = typed.proto, typed.nodes, typed.shapes, typed.dims
    declared = shapes.values if precision is None else with_precision(shapes.values, precision)
    values = with_string_bytes(declared, _string_bytes(sizing))  # strings at the length assumed (shapes/texts.py)
    stored = weights(
        proto.graph, graph_nodes, typed.given
    )  # every weight: initializers and Constant-node tensors, bodies' too
    initializers = {t.name for t in proto.graph.initializer} - typed.given | {w.name for w in stored}
    inputs = {v.name: values[v.name] for v in proto.graph.input if v.name not in initializers and v.name in values}
    shared = _Shared(precision, frozenset(typed.given), inputs, sizing, conditions=typed.conditions)
    walk = _Walk(
        values,
        {**shapes.folded, **constant_table(proto.graph, graph_nodes)},
        frozenset(w.name for w in stored),
        proto,
        hardware,
        shapes.unread,
        shared,
    )
    foldable = _constant_foldable(graph_nodes, proto, typed.given, shared.constant)
    rows = walk.rows(graph_nodes, foldable)
    bounds = tuple(dict.fromkeys((*shapes.bounds, *shared.bounds)))  # the main sweep's, and the bodies' the walk typed
    nodes = _marked_at_most(rows, at_most(graph_nodes, bounds))
    parameters = _model_parameters(stored, nodes)
    unbound = {
        name: uses
        for name, uses in typed.dim_uses.items()
        if name not in dims and not _all_bound(uses, sizing.input_shapes)
    }
    if unbound and not partial:
        _raise_if_blocked(
            nodes,
            unbound,
            dims,
            lambda: suggested_defaults(
                proto, graph_nodes, list(unbound), dims, implied_sizes(graph_nodes, shapes.values)
            ),
        )
    info = ModelInfo(
        path=None if (path := _path(model)) is None else str(path),
        node_count=len(graph_nodes),
        opsets=opsets(proto),
        dims=dims,
        defaulted_dims=tuple(typed.defaulted),
        solved_dims={dim: why for dim, (_, why) in typed.solved.items()},
        dim_roles=typed.roles,
        implausible=typed.implausible,
        invalid=typed.invalid,
        weight_tensors=stored,
        precision=precision,
        parameters=parameters,
        shape_inference=shapes.method,
        shape_root_cause=shapes.root_cause,
        shape_warnings=shapes.warnings,
        assumed=None if sizing.nonzero_fraction is None else Assumed(sizing.nonzero_fraction, shapes.assumed),
        bounds=bounds,
        regulated=shapes.regulated,
        strings=None if values is declared else _strings(values, sizing),
        experts=summarize(
            typed.experts,
            sizing.expert_load,
            graph_nodes,
            values,
            parameter_sizes(proto.graph, graph_nodes) if typed.experts else {},
            parameters,
            shapes.routed,
        ),  # the weights sized again only where there is an MoE
        branches=tuple(shared.branches),
        body_outputs=tuple(shared.aliases),
        graph_inputs=tuple(v.name for v in proto.graph.input if v.name not in initializers),
        graph_outputs=_with_aliases([v.name for v in proto.graph.output], shared.aliases),
        weights=frozenset(
            weight.name for weight in stored
        ),  # small integer shape constants are no weights (model/weights.py)
        source=proto,
    )
    return Report(info, hardware, nodes)


@dataclass(frozen=True)
class Typed:
    """A model loaded, its dims bound and its shapes inferred: what the walk costs."""

    proto: onnx.ModelProto
    nodes: list[Node]
    shapes: ShapeResult
    given: set[str]  # graph inputs given a value (bind_values): constants, not weights
    dim_uses: dict[str, list[str]]  # each symbolic dim's inputs
    dims: dict[str, int]  # every dim bound: given, derived, defaulted
    defaulted: dict[str, int]  # those a default bound (solved ones included)
    solved: dict[str, tuple[int, str]]  # defaults replaced by the size the graph fixes, and why
    roles: dict[str, DimDefault]  # each default's size, role and source (shapes/roles.py)
    implausible: tuple[Implausible, ...]  # a node the defaults cannot run (shapes/plausible.py): said, not refused
    invalid: tuple[Invalid, ...] = ()  # why a runtime would refuse the file (model/conformance.py): said, not refused
    experts: tuple[MoeLayer, ...] = ()  # the MoE layers the graph's structure shows (model/experts.py)
    conditions: Mapping[str, bool] = field(
        default_factory=dict
    )  # If conditions given --value: the branch each takes (input_values.if_conditions)


def bind_and_infer(
    model: str | os.PathLike | onnx.ModelProto | LoadedModel, sizing: Sizing, conform: bool = True
) -> Typed:
    """Load the model, bind its dims and infer its shapes, refusing what cannot run at them
    (runnable.py). A default that cannot run (a head size named like a batch) takes the size the
    graph fixes (runnable.DimensionConflict), and the binding starts again from a fresh load; a
    node that cannot run at the defaults otherwise is said, with sizes that run (plausible.py).
    `conform`: check, as loaded, whether a runtime would load it (conformance.py)."""
    solved: dict[str, tuple[int, str]] = {}
    invalid: tuple[Invalid, ...] = ()
    path = _path(model)
    checking = conform  # ONNX's checked inference, owed to the conformance check: the engine's first pass, once
    if isinstance(model, LoadedModel) and model.invalid is not None:  # the file checked by an analysis before
        invalid, checking = model.invalid, False
    declared = Declarations((), {})  # what binding drops, for that pass to be held to (shapes/declared.py)
    beside_check: Callable[[], tuple[Invalid, ...]] | None = None  # a large graph's check, run in a child
    with contextlib.ExitStack() as running:  # which ends that child if this raises first
        while True:
            proto = parsed(model)
            if checking and len(proto.graph.node) >= BESIDE_NODES and spare_core():
                beside_check = running.enter_context(
                    beside("the conformance check", _conformance_as_loaded, proto, model, path)
                )
            graph_nodes = validated(proto, model)
            if checking:  # before the dims are bound: the file's own consistency (its inference: below), once
                invalid = conformance(proto, graph_nodes, path, inference=False) if beside_check is None else ()
                declared = Declarations.of(proto.graph)
            conditions = if_conditions(
                proto.graph, sizing.values
            )  # an If's condition given --value: its branch, not a graph input
            given = bind_values(proto, {name: value for name, value in sizing.values.items() if name not in conditions})
            dim_names = input_dim_names(proto.graph)
            dim_uses = symbolic_dims(proto.graph, dim_names)
            explicit = {**_derived(dim_uses, sizing.dims), **sizing.dims}  # `past + sequence` from the two given
            chosen = (
                _defaults(proto, graph_nodes, dim_names, dim_uses, explicit, sizing.input_shapes, solved)
                if sizing.default_dims
                else {}
            )
            defaulted = {dim: choice.size for dim, choice in chosen.items()}
            bound = {**defaulted, **explicit}
            bind(proto, bound, sizing.input_shapes)
            layers = recognize(proto.graph, graph_nodes)
            shapes = infer(
                proto, graph_nodes, map_shapes(proto.graph, sizing.input_shapes), sizing, layers, checked=checking
            )
            if checking:
                invalid = invalid if beside_check is None else beside_check()
                owed = not any(flag.source == CHECKER for flag in invalid)  # the checker found nothing
                # A checked pass that raised, or types against the file's: the file's fault, or the dims'?
                if owed and (not shapes.conforms or declared.disagreement(shapes.values)):
                    invalid = conformance(*load_with_nodes(model), path)  # the file checked whole says
                if not invalid:  # what the checker is blind to past a contrib op
                    invalid = mixed_input_types(proto, graph_nodes, shapes.values)
            checking = False  # a retry at solved dims: the file is checked once
            check_axes(
                graph_nodes, shapes.values, opsets(proto).get("")
            )  # validation that needs the inferred ranks (docs/hostile-inputs.md)
            implausible: tuple[Implausible, ...] = ()
            constants = constant_lookup(
                shapes.folded, functools.partial(constant_table, proto.graph, graph_nodes), constant_array
            )  # a Pad's pads, a Reshape's target
            try:
                check_runnable(
                    graph_nodes, shapes.values, bound, dim_names, defaulted, constants
                )  # what cannot run at these dims (runnable.py)
            except DimensionConflict as conflict:
                if conflict.dim not in defaulted or conflict.dim in solved:
                    raise
                solved[conflict.dim] = (conflict.size, conflict.why)
                continue
            except DimensionError as error:
                gap = lambda sizes, bound=bound, error=error: traced_gap(model, sizing.bound({**bound, **sizes}), error)  # noqa: E731
                fixed = solve(
                    error, {dim: size for dim, size in defaulted.items() if dim not in solved}, gap
                )  # a size traced into the graph (traced.py)
                if fixed is not None:
                    solved[fixed.dim] = (fixed.size, fixed.why)
                    continue
                if (
                    runs := solve(error, explicit, gap)
                ) is not None:  # a size given that the graph cannot run: the one it can
                    raise DimensionError(
                        f"{error}; it runs at {runs.dim}={runs.size} ({runs.why}): --dim {runs.dim}={runs.size}"
                    ) from None
                if not defaulted:
                    raise
                retry = lambda sizes, bound=bound: runs_at(model, sizing.bound({**bound, **sizes}))  # noqa: E731
                flag = contradicted(error, chosen, retry, len(graph_nodes))
                if flag is None:  # no default it rests on: the dims given cannot run
                    raise
                implausible = (flag,)
            return Typed(
                proto,
                graph_nodes,
                shapes,
                given,
                dim_uses,
                bound,
                defaulted,
                solved,
                chosen,
                implausible,
                invalid,
                layers,
                conditions,
            )


def _path(model: str | os.PathLike | onnx.ModelProto | LoadedModel) -> str | os.PathLike | None:
    """The model's file (whose folder its external data lies in); None for an in-memory model."""
    if isinstance(model, LoadedModel):
        return model.path
    return None if isinstance(model, onnx.ModelProto) else model


BESIDE_NODES = 50_000
"""Main-graph nodes from which the conformance check runs in a child forked as the file is parsed
(isolation.beside), beside this process's validation, binding and shape inference: 2-3 s of a
million-node chain's critical path moved to the second core. Forked there, before this
process's heap holds the graph: each page a parent writes after a fork is copied (forked after
validation, +3 s of system time at a million nodes). Below this, a fork (~5-10 ms) outweighs it."""


def _conformance_as_loaded(proto: onnx.ModelProto, source: str | os.PathLike | onnx.ModelProto | LoadedModel,
                           path: str | os.PathLike | None) -> tuple[Invalid, ...]:  # fmt: skip
    """The conformance check of a model just parsed, validated first as the analysis validates it
    (run in a child, on the child's own copy)."""
    return conformance(proto, validated(proto, source), path, inference=False)


NOT_FOLDED = frozenset({"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli",
                        "DequantizeLinear", "Shape", "Size", "If", "Loop", "Scan", "SequenceMap"})  # fmt: skip
"""Ops never counted constant-foldable, as onnxruntime's ConstantFolding skips them: the
nondeterministic, DequantizeLinear (kept for its QDQ fusions), control flow (subgraphs); and
Shape/Size, which read only a shape (folded there when the file declares it concretely, which
depends on the dims a deployment binds)."""


def _marked_at_most(rows: tuple[NodeResult, ...], bounded: set[str]) -> tuple[NodeResult, ...]:
    """The rows reading or writing a value bounds.at_most gives, bodies' too, marked: their figures are at most."""
    if not bounded:
        return rows
    return tuple([dataclasses.replace(row, at_most=True) if any(t is not None and t.name in bounded for t in (*row.inputs, *row.outputs)) else row
                  for row in rows])  # fmt: skip


def _constant_foldable(
    graph_nodes: list[Node], proto: onnx.ModelProto, given: set[str], constant: set[str]
) -> set[int]:
    """The nodes a runtime computes once at load, by index: ai.onnx ops (not NOT_FOLDED) whose
    every input is a constant — an initializer that no graph input can override, a Constant's
    output, or the output of a node so marked — and Constant itself. Structural: the same at every
    dims. `constant` receives the constant values' names (an If's branch folds against them)."""
    overridable = {value.name for value in proto.graph.input} | given
    constant.update(t.name for t in proto.graph.initializer if t.name not in overridable)
    constant.add("")  # an absent optional input keeps nothing from folding
    return _foldable(graph_nodes, constant)


def _foldable(graph_nodes: list[Node], constant: set[str]) -> set[int]:
    """_constant_foldable's marking over one graph's nodes, against the `constant` names, which
    grow by the outputs of the nodes marked."""
    foldable = set()
    for index, node in enumerate(graph_nodes):  # set operations in C: this runs over every node of the graph
        if node.domain or node.op_type in NOT_FOLDED or not constant.issuperset(node.inputs):
            continue
        if node.op_type == "Constant" or any(node.inputs):  # a node of absent inputs alone computes nothing known
            foldable.add(index)
            constant.update(node.outputs)
    return foldable


def _model_parameters(stored: tuple[Weight, ...], nodes: tuple[NodeResult, ...]) -> int:
    """Elements of every weight (model/weights.py), a packed weight counted as the logical elements
    its rule says (`Cost.parameters`: MatMulNBits' K·N; 0 for its scales and zero points)."""
    logical = [(tensor.name, count) for node in nodes if node.cost is not None for slot, count in node.cost.parameters
               if slot < len(node.inputs) and (tensor := node.inputs[slot]) is not None]  # fmt: skip
    return parameter_count(stored, logical)


def _derived(dim_uses: Mapping[str, list[str]], dims: Mapping[str, int]) -> dict[str, int]:
    from onnx_roofline.shapes.defaults import derived_dims

    return derived_dims(dim_uses, dims)


def _defaults(
    proto: onnx.ModelProto,
    graph_nodes: list[Node],
    dim_names: Mapping[tuple[str, int], str],
    dim_uses: Mapping[str, list[str]],
    dims: Mapping[str, int],
    input_shapes: Mapping[str, Sequence[int]] | None,
    solved: Mapping[str, tuple[int, str]],
) -> dict[str, DimDefault]:
    """The defaults of the symbolic dims neither `dims` nor a whole input shape binds: by name, else
    by role in the graph (shapes/roles.py); those the graph fixes (`solved`) at that size."""
    unbound = [name for name, uses in dim_uses.items() if name not in dims and not _all_bound(uses, input_shapes)]
    metadata = {entry.key: entry.value for entry in proto.metadata_props}
    chosen = choose_defaults(proto.graph, graph_nodes, dim_names, unbound, dims, metadata)
    for dim, (size, why) in solved.items():
        chosen[dim] = DimDefault(size, chosen[dim].role if dim in chosen else why, SOLVED, why)
    return chosen


def _all_bound(uses: list[str], input_shapes: Mapping[str, Sequence[int]] | None) -> bool:
    return bool(input_shapes and all(name in input_shapes for name in uses))


@dataclass
class _Shared:
    """What every walk of one analysis shares, the main graph's and its bodies': the precision
    costed, the graph inputs (and which were given a value), how the model is sized (its bodies
    alike), and what the bodies found: the branches taken, the body outputs that are the node
    outputs of the same position."""

    precision: str | None
    given: frozenset[str]
    graph_inputs: dict[str, TensorInfo]
    sizing: Sizing = UNSIZED
    branches: list[Branch] = field(default_factory=list)
    aliases: list[tuple[str, str]] = field(default_factory=list)
    bounds: list[Bound] = field(default_factory=list)  # the bounds of the bodies a walk typed (shapes/bounds.py)
    conditions: Mapping[str, bool] = field(
        default_factory=dict
    )  # If conditions given a value (--value COND=1): the branch they take
    constant: set[str] = field(
        default_factory=set
    )  # values known at load (names are unique across scopes): an If's branches fold against them


class _Scope(dict):
    """A body's values over its enclosing scopes' (ONNX's scoping: a body sees every outer value):
    its own at a dict's speed, the outer ones where it has no name of its own. A ChainMap would do,
    but its lookups are Python (~1 µs each), and the walk asks one per input and output of every
    node of a merged decoder's branch. Writes, and iteration, are its own."""

    __slots__ = ("outer",)

    def __init__(self, own: Mapping[str, TensorInfo], outer: Mapping[str, TensorInfo]) -> None:
        super().__init__(own)
        self.outer = outer

    def __missing__(self, name: str) -> TensorInfo:
        return self.outer[name]

    def __contains__(self, name: object) -> bool:
        return dict.__contains__(self, name) or name in self.outer

    def get(self, name: str, default: Any = None) -> Any:  # type: ignore[override]  # dict.get's overloads
        return dict.get(self, name, default) if dict.__contains__(self, name) else self.outer.get(name, default)


class _Walk:
    """Costs nodes against one graph's value table; holds the lookups the per-node step needs.
    It owns the recursion into control-flow bodies (`rows`): a rule costs one node, never a body."""

    def __init__(self, values, constants, weights: frozenset[str], model: onnx.ModelProto, hardware: Hardware, unread=frozenset(),
                 shared: _Shared | None = None, producers: Mapping[str, Node] | None = None, scope: str = "",
                 first: int = 0):  # fmt: skip
        self.values: dict[str, TensorInfo] = values
        self.unread: frozenset[str] = unread  # outputs nobody reads whose shape stayed unknown: absent slots
        self.constants = constants
        self.weights = (
            weights  # the model's weights (model/weights.py: every graph's, shape constants aside): a node's parameters
        )
        self.model = model  # for its opsets and local functions
        self.opsets: dict[str, int] = opsets(model)
        self.functions = {("" if f.domain == "ai.onnx" else f.domain, f.name): f for f in model.functions}
        self.hardware = hardware
        self._arrays: dict[str, np.ndarray | None] = {}
        self._peaks: dict[tuple[str, str | None], tuple[float, str, str]] = {}
        self._rules: dict[tuple[str, str], tuple[Rule | None, int | None]] = {}
        self._placements: dict[tuple[int, int, float], Placement] = {}
        self._costed: dict[
            tuple, tuple[Cost, str, str, float, Placement]
        ] = {}  # by op and tensor signature (and attributes)
        self._read_attributes: set[tuple] = (
            set()
        )  # the signatures whose rule read the attributes: they key the result too
        self.shared = shared if shared is not None else _Shared(None, frozenset(), {})
        self.producers: Mapping[str, Node] = (
            producers if producers is not None else {}
        )  # outer scopes' producers, for a condition's sources
        self.scope = scope  # where this graph lives ("" for the main graph): the rows' scope, as the report names it
        self.first = first  # the report's row of this graph's first row (a body's rows follow its node's)

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

    def small_constant(self, name: str) -> np.ndarray | None:
        """A constant's value where it is small enough to be a shape or an index (never a weight)."""
        source = self.constants.get(name)
        if isinstance(source, onnx.TensorProto) and math.prod(source.dims) > MAX_FOLDED_ELEMENTS:
            return None
        array = self.constant(name)
        return array if array is not None and array.size <= MAX_FOLDED_ELEMENTS else None

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

    def rows(self, graph_nodes: list[Node], foldable: AbstractSet[int] = frozenset()) -> tuple[NodeResult, ...]:
        """Every node's result in execution order, each If, Loop or Scan followed by the rows of the
        body it runs; `index` is a row's position in the report (from `first`), made so as it is
        made, never moved after."""
        if not any(node.op_type in CONTROL_FLOW and not node.domain for node in graph_nodes):
            return tuple([self.cost(index, node, index in foldable) for index, node in enumerate(graph_nodes)])
        here = {output: node for node in graph_nodes for output in node.outputs if output}
        self.producers = ChainMap(here, self.producers)  # type: ignore[arg-type]  # typeshed asks every map be mutable; ChainMap writes only the first
        rows: list[NodeResult] = []
        for index, node in enumerate(graph_nodes):
            position = self.first + len(rows)
            result = self.cost(index, node, index in foldable, position)
            if node.op_type in CONTROL_FLOW and not node.domain and result.status != UNSUPPORTED:
                result, inner = self.body_rows(result, node, position + 1)
                rows.append(result)
                rows.extend(inner)
            else:
                rows.append(result)
        return tuple(rows)

    def body_rows(self, result: NodeResult, node: Node, first: int) -> tuple[NodeResult, list[NodeResult]]:
        """The control-flow node's own row (its outputs typed from the body where the shape engine
        left them unknown) and its body's rows, named by where they live, × its trips, and placed
        from row `first` on."""
        op = OpNode(node.proto, self.opsets.get(""), result.inputs, result.outputs, self.constant, self.subgraph)
        try:
            found = bodies(op)
        except (
            ValueError,
            KeyError,
            IndexError,
            TypeError,
            AttributeError,
            ZeroDivisionError,
        ):  # a malformed node: its own row says what the rule made of it
            return result, []
        self.shared.aliases.extend(alias for body in found for alias in body.aliases)
        if node.op_type == "If":
            body, (rows, child) = self.branch(result, op, found, first)
        else:
            (body,) = found
            if body.trips is None or result.status != OK:
                return result, []  # the node's row says why its trips are unknown
            rows, child = self.walk_body(result, body, first)
        trips = body.trips or 1
        scoped = list(rows) if trips == 1 else [_over_trips(row, trips) for row in rows]
        outputs = {outer: child.values.get(inner) for inner, outer in body.aliases}
        if any(t is not None and not t.is_known and outputs.get(t.name) is not None for t in result.outputs):
            typed = tuple(
                [
                    dataclasses.replace(body_output, name=t.name)
                    if t is not None and not t.is_known and (body_output := outputs.get(t.name))
                    else t
                    for t in result.outputs
                ]
            )
            result = dataclasses.replace(result, outputs=typed)
            self.values.update(
                (t.name, t) for t in typed if t is not None and t.is_known
            )  # the nodes after it read them too
        return result, scoped

    def branch(
        self, result: NodeResult, op: OpNode, branches: list[Body], first: int
    ) -> tuple[Body, tuple[tuple[NodeResult, ...], _Walk]]:
        """The If's branch to walk: the one its condition, a --value or the bound dims imply
        (bodies.choose_branch), else both walked and the heavier counted, the other's totals kept."""
        condition = op.inputs[0].name if op.inputs and op.inputs[0] is not None else ""
        choice = choose_branch(
            op, self.sources(condition), self.shared.graph_inputs, self.shared.given, self.shared.conditions
        )
        node = result.name
        if choice.taken is not None:
            body, other = branches if branches[0].attribute == choice.taken else branches[::-1]
            self.shared.branches.append(
                Branch(
                    node,
                    body.attribute,
                    choice.why,
                    choice.inputs,
                    None,
                    choice.implied,
                    frozenset(graph_outer_references(other.graph)),
                )
            )
            return body, self.walk_body(result, body, first, fold=True)
        position = len(self.shared.branches)  # this If before the Ifs inside its branches
        walked = [(body, self.walk_body(result, body, first, fold=True)) for body in branches]
        times = [Totals.over(rows) for _, (rows, _) in walked]
        heavier = 0 if times[0].time_s >= times[1].time_s else 1
        other = walked[1 - heavier][0].graph
        self.shared.branches.insert(
            position,
            Branch(
                node,
                walked[heavier][0].attribute,
                choice.why,
                choice.inputs,
                times[1 - heavier],
                reads=frozenset(graph_outer_references(other)),
            ),
        )
        return walked[heavier]

    def sources(self, name: str) -> tuple[str, ...]:
        """The graph inputs a value is computed from (a condition's: `sr` behind `Equal(sr, 16000)`)."""
        found, seen, pending = set(), set(), [name]
        while pending:
            current = pending.pop()
            if current in seen:
                continue
            seen.add(current)
            if current in self.shared.graph_inputs:
                found.add(current)
            elif (producer := self.producers.get(current)) is not None:
                pending.extend(i for i in producer.inputs if i)
        return tuple(sorted(found))

    def walk_body(
        self, result: NodeResult, body: Body, first: int, fold: bool = False
    ) -> tuple[tuple[NodeResult, ...], _Walk]:
        """The rows of the body of `result`'s node, walked in this scope from the report's row
        `first`, and the walk that typed it. `fold` (an If's branch): its nodes of constant inputs
        are constant-foldable, as a runtime folds a subgraph at load (a merged decoder's branch as
        the un-merged file)."""
        child, nodes = self.child(body.graph, body.inputs, f"{result.name}/{body.attribute}", first)
        if not fold:
            return child.rows(nodes), child
        self.shared.constant.update(t.name for t in body.graph.initializer)
        return child.rows(nodes, _foldable(nodes, self.shared.constant)), child

    def child(
        self, graph: onnx.GraphProto, inputs: Sequence[TensorInfo | None] | None, scope: str = "", first: int = 0
    ) -> tuple[_Walk, list[Node]]:
        """A walk over a body graph in this scope: outer values stay visible, as ONNX scoping says,
        and the outer value is the source of an outer name (a body's value_info for it is only a
        declaration). `inputs`: the body's inputs as the call site types them; when the body leaves
        values unknown (its inputs often carry no shapes), its shapes are inferred from them first."""
        nodes = read_nodes(graph)
        declared = collect(graph, nodes)
        for name in graph_outer_references(graph):
            if name in self.values:
                declared.pop(name, None)
        precision = self.shared.precision
        sized = with_string_bytes(declared if precision is None else with_precision(declared, precision),
                                  _string_bytes(self.shared.sizing))  # fmt: skip
        values = _Scope(sized, self.values)  # the body's names over its scope's
        constants = ChainMap(constant_table(graph, nodes), self.constants)
        unknown = any(
            not (value := values.get(name)) or not value.is_known for n in nodes for name in n.outputs if name
        )
        if inputs is not None and unknown:
            ranges = outer_ranges(graph, self.producers.get, self.small_constant, self.values.get)  # a clipped box's
            shapes = infer_body(graph, inputs, values.get, self.small_constant, self.model, self.shared.sizing, ranges)
            inferred = with_string_bytes(shapes.values if precision is None else with_precision(dict(shapes.values), precision),
                                         _string_bytes(self.shared.sizing))  # fmt: skip
            values.update((name, info) for name, info in inferred.items() if info.is_known or name not in values)
            constants.update(shapes.folded)
            self.shared.bounds.extend(shapes.bounds)
        child = _Walk(
            values,
            constants,
            self.weights,
            self.model,
            self.hardware,
            shared=self.shared,
            producers=self.producers,
            scope=scope,
            first=first,
        )
        return child, nodes

    def cost(self, index: int, node: Node, foldable: bool = False, position: int | None = None) -> NodeResult:
        """The result of the graph's node `index`, at the report's row `position` (its index from
        this graph's first row where None), named behind this graph's scope; `foldable`: a runtime
        computes it once at load (constant_foldable)."""
        # This runs for every node of the graph: lookups are local, the common path has no call it can avoid.
        op_type, domain = node.op_type, node.domain
        values = self.values
        inputs = tuple([(values.get(name) or TensorInfo(name, None, None)) if name else None for name in node.inputs])
        names = node.outputs if not self.unread else [("" if o in self.unread else o) for o in node.outputs]
        outputs = tuple([(values.get(name) or TensorInfo(name, None, None)) if name else None for name in names])
        name = node.name or f"{op_type}_{index}"
        if self.scope:
            name = f"{self.scope}/{name}"
        row = self.first + index if position is None else position
        found = self._rules.get((domain, op_type))
        rule, opset = found if found is not None else self.rule(domain, op_type)

        if rule is None:
            return _uncosted(
                row,
                name,
                self.scope,
                node,
                inputs,
                outputs,
                foldable,
                UNSUPPORTED,
                f"no cost rule for {_qualified(domain, op_type)}",
            )
        tensors = inputs + outputs
        # an If's outputs are its branch's: typed from it (body_rows)
        blocker = _blocker(inputs if op_type == "If" and not domain else tensors)
        if blocker is not None:
            return _uncosted(row, name, self.scope, node, inputs, outputs, foldable, *blocker)
        signature = (domain, op_type, len(inputs), _signature(tensors))
        key = (signature, _attribute_key(node.attributes)) if signature in self._read_attributes else signature
        costed = self._costed.get(key)
        if costed is None:
            op = OpNode(node.proto, opset, inputs, outputs, self.constant, self.subgraph)
            try:
                cost = rule.formula(cast(KnownNode, op))  # _blocker let it through: every tensor present is known
            except Uncostable as exc:
                return _uncosted(row, name, self.scope, node, inputs, outputs, foldable, exc.status, str(exc))
            except (ValueError, KeyError, IndexError, TypeError, ArithmeticError, AttributeError) as exc:
                status, reason = RULE_ERROR, f"{op_type}: {exc}"
                absent = [o for o, n in zip(node.outputs, names, strict=False) if o and not n]
                if absent and isinstance(
                    exc, AttributeError
                ):  # the rule needed an output nothing reads and no pass typed
                    status, reason = (
                        UNKNOWN_SHAPE,
                        f"{op_type}: output {absent[0]!r}, which nothing reads, has no shape the analysis could infer",
                    )
                return _uncosted(row, name, self.scope, node, inputs, outputs, foldable, status, reason)
            costed = self.placed(rule, op, cost)
            # The same for every node whose tensors (and attributes, where the rule read them) look alike: repeated layers
            if op.reads == ATTRIBUTES and key is signature:
                self._read_attributes.add(signature)
                key = (signature, _attribute_key(node.attributes))
            if op.reads <= ATTRIBUTES:
                self._costed[key] = costed
        cost, unit, dtype, peak, placement = costed
        return NodeResult(
            row,
            name,
            op_type,
            domain,
            inputs,
            outputs,
            OK,
            None,
            cost,
            self.parameters(inputs, cost.parameters),
            unit,
            dtype,
            peak,
            placement,
            node,
            foldable,
            self.scope,
        )

    def placed(self, rule: Rule, op: OpNode, cost: Cost) -> tuple[Cost, str, str, float, Placement]:
        """The rule's cost with the framework's default bytes where it left them, and where it sits
        on the roofline: (cost, unit, dtype class, peak, placement)."""
        peak, unit, dtype = self.peak(cost.unit or rule.unit, _compute_dtype(rule.compute_dtype, op.inputs, op.outputs))
        if isinstance(cost, CompositeCost):
            return cost, unit, dtype, peak, _composite_placement(cost, peak / self.hardware.memory_bandwidth)
        if cost.bytes_read is None or cost.bytes_written is None or type(cost) is not Cost:
            cost = Cost(  # a complete Cost is kept as it is
                cost.flops,
                cost.transcendentals,
                op.distinct_input_bytes() if cost.bytes_read is None else cost.bytes_read,
                op.output_bytes() if cost.bytes_written is None else cost.bytes_written,
                cost.useful_flops,
                cost.unit,
                cost.dequantize_flops,
                cost.parameters,
                cost.load_flops,
            )
        return cost, unit, dtype, peak, self.place(cost.flops, cost.bytes, peak)

    def parameters(self, inputs: tuple[TensorInfo | None, ...], counted: tuple[tuple[int, int], ...] = ()) -> int:
        """Elements of the distinct weights among a node's inputs; `counted`, the rule's (slot,
        elements) overrides (a packed weight's logical elements)."""
        stored = self.weights
        for tensor in inputs:  # most nodes read no weight, or one: the dict only where there is one
            if tensor is not None and tensor.name in stored:
                break
        else:
            return 0
        weights = {t.name: t.numel for t in inputs if t is not None and t.name in stored}
        if counted:
            for slot, elements in counted:
                if slot < len(inputs) and (tensor := inputs[slot]) is not None and tensor.name in weights:
                    weights[tensor.name] = elements
        return sum(weights.values()) if weights else 0

    def subgraph(self, graph: onnx.GraphProto, inputs: Sequence[TensorInfo | None] | None = None) -> CompositeCost:
        """The summed cost of a body that is part of one node's work (a FlexAttention modifier,
        SequenceMap's body, a generation loop's decoder): `child`'s walk, totalled."""
        child, nodes = self.child(graph, inputs)
        return child.total(nodes)

    def function_call(self, op: OpNode) -> CompositeCost:
        """A call of a model-local function: the body inlined at this call site (attributes bound,
        inputs typed as here), its shapes inferred, and costed node by node."""
        inputs, constants = [], []
        for index, tensor in enumerate(op.inputs):
            value = op.input_value(index) if tensor is not None else None
            if tensor is not None and value is not None:
                constants.append(onnx.numpy_helper.from_array(value, tensor.name))
            elif tensor is not None:
                inputs.append(tensor.value_info())
        outputs = [onnx.helper.make_empty_tensor_value_info(name) for name in op.proto.output if name]
        graph = onnx.helper.make_graph([op.proto], "call", inputs, outputs, initializer=constants)
        call = onnx.helper.make_model(
            graph,
            opset_imports=self.model.opset_import,
            functions=self.model.functions,
            ir_version=self.model.ir_version,
        )
        body = inline_functions(call)
        nodes = read_nodes(body.graph)
        sizing = self.shared.sizing
        shapes = infer(body, nodes, sizing=sizing)
        child = _Walk(
            _Scope(with_string_bytes(dict(shapes.values), _string_bytes(sizing)), self.values),
            ChainMap({**shapes.folded, **constant_table(body.graph, nodes)}, self.constants),
            self.weights,
            self.model,
            self.hardware,
            shared=_Shared(None, frozenset(), {}, sizing),
        )
        return child.total(nodes)

    def total(self, graph_nodes: list[Node]) -> CompositeCost:
        """The summed cost of a graph's nodes; any uncosted node makes the whole unknown."""
        nodes = self.rows(graph_nodes)
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
            dequantize_flops=totals.dequantize_flops,
            time_s=totals.time_s,
            memory_bound_time_s=totals.memory_bound_time_s,
            matrix_flops=totals.matrix_flops,
        )


def _string_bytes(sizing: Sizing) -> int:
    """The bytes every string element counts: the sizing's, else the default (shapes/texts.py)."""
    return STRING_BYTES if sizing.string_bytes is None else sizing.string_bytes


def _strings(values: Mapping[str, TensorInfo], sizing: Sizing) -> StringBytes:
    """The string-length assumption, said where the graph holds strings."""
    count = sum(1 for info in values.values() if info.dtype == "string")
    return StringBytes(_string_bytes(sizing), sizing.string_bytes is not None, count)


def _uncosted(index: int, name: str, scope: str, node: Node, inputs: tuple, outputs: tuple, foldable: bool,
              status: str, reason: str) -> NodeResult:  # fmt: skip
    """A row the walk could not cost, and why (`status`: unsupported, unknown shape, rule error)."""
    return NodeResult(
        index,
        name,
        node.op_type,
        node.domain,
        inputs,
        outputs,
        status,
        reason,
        graph_node=node,
        constant_foldable=foldable,
        scope=scope,
    )


def _over_trips(row: NodeResult, trips: int) -> NodeResult:
    """A body's row as the enclosing graph reports it: its runs, cost and time the totals over the
    body's `trips` runs."""
    if row.cost is None or row.placement is None:
        return dataclasses.replace(row, trips=row.trips * trips)
    cost, place = row.cost, row.placement
    scaled = {f: getattr(cost, f) * trips for f in ADDITIVE if hasattr(cost, f)}
    scaled["useful_flops"] = None if cost.useful_flops is None else cost.useful_flops * trips
    placement = dataclasses.replace(
        place,
        time_s=place.time_s * trips,
        compute_time_s=place.compute_time_s * trips,
        memory_time_s=place.memory_time_s * trips,
    )
    return dataclasses.replace(
        row, trips=row.trips * trips, cost=dataclasses.replace(cost, **scaled), placement=placement
    )


def _with_aliases(outputs: list[str], aliases: list[tuple[str, str]]) -> tuple[str, ...]:
    """The graph's outputs and the body outputs that are them (a merged decoder's present, as its
    branch names it): what the KV-cache detection and the activations' lifetimes read."""
    names = dict.fromkeys(outputs)
    grown = True
    while grown:
        before = len(names)
        names.update((inner, None) for inner, outer in aliases if outer in names)
        grown = len(names) > before
    return tuple(names)


def _composite_placement(cost: CompositeCost, ridge: float) -> Placement:
    """A body's time is the sum of its nodes' times; it is memory-bound when most of that time is."""
    bound = MEMORY if cost.memory_bound_time_s * 2 >= cost.time_s else COMPUTE
    intensity = cost.flops / cost.bytes if cost.bytes else None
    compute_time = cost.time_s - cost.memory_bound_time_s
    return Placement(intensity, ridge, bound, cost.time_s, compute_time, cost.memory_bound_time_s)


def _compute_dtype(
    choice: int | str, inputs: Sequence[TensorInfo | None], outputs: Sequence[TensorInfo | None]
) -> str | None:
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
    return tuple(
        [None if t is None else (first.setdefault(t.name, slot), t.shape, t.dtype) for slot, t in enumerate(tensors)]
    )


def _attribute_key(attributes) -> tuple[bytes, ...]:
    """A node's attributes as their serialized bytes: equal for nodes whose attributes are equal
    (in the same order), which a rule that read them cannot tell apart."""
    return tuple([attribute.SerializeToString() for attribute in attributes])


def _blocker(tensors: tuple[TensorInfo | None, ...]) -> tuple[str, str] | None:
    """(status, reason) where a node's tensors keep it from being costed: a shape or dtype not
    fully known, or a string tensor or map with string keys (no static byte size; a map of known
    entries otherwise has one, TensorInfo says how). None, the common case, in one pass."""
    for tensor in tensors:
        if tensor is not None and (not tensor.is_known or (tensor.dtype == "string" and tensor.string_bytes is None)
                                   or tensor.key_dtype == "string"):  # fmt: skip
            break
    else:
        return None
    unknown = [t for t in tensors if t is not None and not t.is_known]
    if unknown:
        return UNKNOWN_SHAPE, _unknown_reason(unknown)
    string = next(
        t
        for t in tensors
        if t is not None and (t.key_dtype == "string" or (t.dtype == "string" and t.string_bytes is None))
    )
    kind = "string tensor" if string.dtype == "string" else "map with string keys"
    return DATA_DEPENDENT, f"{kind} {string.name!r} has no static byte size"


def _unknown_reason(tensors: list[TensorInfo]) -> str:
    shown = ", ".join(f"{t.name!r} {_shape_text(t)}" for t in tensors[:3])
    more = f" and {len(tensors) - 3} more" if len(tensors) > 3 else ""
    return f"shape not fully known: {shown}{more}"


def _shape_text(tensor: TensorInfo) -> str:
    if tensor.shape is None:
        return "[rank unknown]"
    return (
        "[" + ", ".join("?" if d is None else str(d) for d in tensor.shape) + "]" + ("" if tensor.dtype else " dtype?")
    )


def _raise_if_blocked(
    nodes: tuple[NodeResult, ...],
    unbound: dict[str, list[str]],
    dims: Mapping[str, int],
    suggest: Callable[[], dict[str, DimDefault]],
) -> None:
    """An unbound dim that leaves a node uncostable is an error naming the dim and its inputs,
    suggesting each its default by role or, where the graph fixes it, that size (`suggest`, asked
    only then)."""
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
        suggested = suggest()
        raise UnboundDimensionError(
            sorted(blocked),
            unbound,
            {name: d.size for name, d in suggested.items()},
            {name: d.said for name, d in suggested.items() if d.said},
        )
