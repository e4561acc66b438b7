"""ONNX's shape inference of a very large graph, a piece at a time.

ONNX's C++ pass holds a copy of the whole model and its own tables while it runs, about 1.25 KiB
a node: 1.2 GiB for a million nodes, beside the analysis's own tables, and the peak of the whole
analysis. Run on consecutive pieces of the graph in stored order, each a model of its own whose
inputs are the values it reads from before it (typed as the graph or an earlier piece declares
them), its peak is a piece's.

What a piece does not see is what ONNX's data propagation computed before it: a shape built by
Shape → Gather → Concat in one piece and read by a Reshape in the next comes out with unknown
dims, and the sweep folds it as it does in any graph (shapes/engine.py). The symbols ONNX makes up for
unknown dims (unk__N) stay distinct across pieces: each piece is told every symbol in use before
it, which ONNX's symbol table then skips."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from itertools import chain, filterfalse
from operator import attrgetter

import onnx
from google.protobuf.message import Message

from onnx_roofline.model.constants import MAX_FOLDED_ELEMENTS
from onnx_roofline.model.inferred import (
    CHECKED,
    LENIENT,
    DeclaredTypes,
    Mode,
    declared_types,
    inferred_types,
    stored_nodes_type,
)
from onnx_roofline.model.nodes import Node, kinds, of_kinds
from onnx_roofline.model.schemas import may_have_bodies, may_hold_tensors, onnx_knows, opsets
from onnx_roofline.model.scopes import outer_references
from onnx_roofline.model.spec_defaults import SPEC_DEFAULTS, lacks_defaults, spell_out_defaults
from onnx_roofline.model.text import as_text

PIECE_NODES = 10_000  # nodes above which a graph is inferred in pieces of this many (shapes/engine.py)
# ONNX's pass is itself faster a piece at a time: 2.5 µs a node for 10,000 nodes, 4.8 µs for 200,000.
SYMBOLS = "onnx_roofline::symbols"  # a value_info naming the symbols in use, for ONNX's table to skip
SERIALIZED_WEIGHTS = 64 << 20  # inline weight bytes up to which the graph is serialized whole once (_Tables)

# Field readers for map(), filter() and zip(): what every node or value of a piece is asked runs in
# C, not as a Python loop (a tenth of a microsecond a node is a tenth of a second a million nodes).
_INPUTS, _OUTPUTS, _ATTRIBUTES = attrgetter("inputs"), attrgetter("outputs"), attrgetter("attributes")
_NAME, _TYPE = attrgetter("name"), attrgetter("type")


def inferred_types_in_pieces(
    model: onnx.ModelProto,
    nodes: list[Node],
    size: int,
    failed: Callable[[str, Exception], None] | None,
    mode: Mode = LENIENT,
) -> DeclaredTypes:
    """The declared types of the model's graph after ONNX's inference (in `mode`) of each piece of
    `size` nodes in turn, in the form `inferred_types` returns them (the graph's inputs, then what
    the pieces typed, then the graph's own declared types of what no piece did). A piece whose
    inference raises is told to `failed` (which nodes, what was raised) and types nothing; with
    `failed` None, what it raised is raised. In CHECKED mode (onnx's full check: conformance.py)
    inference reads every node as stored, defaults left out. A checked pass is checked up to the
    piece holding the first node ONNX has no schema for, and not after it (as ONNX's whole pass
    drops every error past such an op)."""
    graph = model.graph
    declared = declared_types(graph)
    known = {value.name: value for value in declared[: len(graph.input)]}
    symbols = _symbols(declared)
    tables = _Tables(model, nodes, spell_out=mode != CHECKED)
    unknown_from = _first_unknown(nodes, tables.opsets) if mode.checked else len(nodes)
    for start in range(0, len(nodes), size):
        piece = nodes[start : start + size]
        produced = dict.fromkeys(chain.from_iterable(map(_OUTPUTS, piece)))  # in graph order: the result's order
        produced.pop("", None)  # an absent optional output
        piece_mode = mode if start <= unknown_from else mode._replace(checked=False)
        try:
            typed = inferred_types(tables.piece_model(start, piece, produced, known, symbols), piece_mode)
        except Exception as exc:  # what onnx raises (InferenceError, RuntimeError, ...): the sweep types these nodes
            if failed is None:
                raise
            failed(f"nodes {start}–{start + len(piece) - 1}", exc)
            continue
        new = _produced_types(typed, produced)
        known.update(new)
        symbols.update(_symbols(new.values()))
    return [*known.values(), *(value for value in declared[len(graph.input) :] if value.name not in known)]


def _first_unknown(nodes: list[Node], imported: dict[str, int]) -> int:
    """The position of the first node whose op ONNX has no schema for (onnx_knows), or the node
    count: each distinct op asked once, the nodes walked only where one is unknown."""
    unknown = of_kinds(nodes, lambda domain, op_type: not onnx_knows(domain, op_type, imported.get(domain)))
    return unknown[0].position if unknown else len(nodes)


def _produced_types(typed: DeclaredTypes, produced: dict[str, None]) -> dict:
    """Of a piece's inferred types, those of the values it produces by name, in their first
    place (the last of a name's types, as a dict built in order keeps it); not its inputs, nor
    the symbols' holder. Built whole and then cut: a handful of names are not produced."""
    new = dict(zip(map(_NAME, typed), typed, strict=True))
    for name in list(filterfalse(produced.__contains__, new)):
        del new[name]
    return new


class _Tables:
    """The graph's lookups a piece is built from, made once: initializers, value_info and outputs
    by name (positions, not protobuf objects: a million of those is half a gigabyte), and the nodes
    serialized each (`stored`).

    Copying a run of NodeProtos from the graph into a piece makes a Python object of each, then
    serializes and parses it (protobuf's upb backend copies a message between containers so):
    1–1.3 s for the million-node chain. The graph serialized once and parsed as StoredNodes holds
    each node as bytes, and a piece's run is sliced and serialized from those in C, then parsed
    into the piece: 0.3 s, that once included, for a copy of the serialized graph (~50 B a node)
    while the pieces run. A graph whose inline weights (initializers, Constant nodes' tensors)
    exceed SERIALIZED_WEIGHTS, which that copy would hold too, has its nodes copied one by one."""

    def __init__(self, model: onnx.ModelProto, nodes: list[Node], spell_out: bool):
        graph = model.graph
        self.model = model
        self.opsets = opsets(model)
        self.kinds = kinds(nodes)  # each distinct (domain, op_type): what is asked of an op, asked once
        # the defaults inference misreads, spelled out where an op of the graph has one (spec_defaults.py)
        self.spell_out = spell_out and any(op_type in SPEC_DEFAULTS for _, op_type in self.kinds)
        self.initializers = {tensor.name: index for index, tensor in enumerate(graph.initializer)}
        self.sparse = {tensor.values.name: index for index, tensor in enumerate(graph.sparse_initializer)}
        self.value_info = {value.name: index for index, value in enumerate(graph.value_info)}
        self.outputs = {value.name: index for index, value in enumerate(graph.output)}
        self.stored = self._stored_nodes(nodes)

    def piece_model(
        self, start: int, piece: list[Node], produced: dict[str, None], known: dict, symbols: set[str]
    ) -> onnx.ModelProto:
        """A model of the piece's nodes alone (the graph's nodes from `start` on): what they read
        from before them as inputs (small inline initializers as themselves, for data propagation
        to read), the graph's value_info and outputs of what they produce, and a value_info naming
        the symbols in use."""
        graph, model = self.model.graph, self.model
        result = onnx.ModelProto(
            ir_version=model.ir_version, opset_import=model.opset_import, functions=model.functions
        )
        result.graph.name = graph.name
        if self.stored is None:
            result.graph.node.extend(graph.node[start : start + len(piece)])
        else:  # GraphProto's own `node` field, serialized: parsed as the piece's nodes
            run = type(self.stored)(node=self.stored.node[start : start + len(piece)])
            result.graph.MergeFromString(run.SerializeToString())
        if piece[0].has_metadata:  # dynamo's stack traces: serialized and parsed for nothing
            for node in result.graph.node:
                node.ClearField("metadata_props")
        if self.spell_out and lacks_defaults(piece):  # a default inference misreads (spec_defaults.py)
            spell_out_defaults(result.graph.node)
        reads = self._reads(piece, produced)
        for name in reads:
            if name in known:
                result.graph.input.add().MergeFromString(known[name].SerializeToString())
            if name in self.initializers:
                self._add_initializer(result.graph, graph.initializer[self.initializers[name]], typed=name in known)
            elif name in self.sparse:
                result.graph.sparse_initializer.add().CopyFrom(graph.sparse_initializer[self.sparse[name]])
        for name in _held(produced, self.value_info):
            result.graph.value_info.add().CopyFrom(graph.value_info[self.value_info[name]])
        for name in _held(produced, self.outputs):
            result.graph.output.add().CopyFrom(graph.output[self.outputs[name]])
        if symbols:
            holder = result.graph.value_info.add(name=_unused(SYMBOLS, produced, reads))
            holder.type.tensor_type.shape.dim.extend(
                onnx.TensorShapeProto.Dimension(dim_param=symbol) for symbol in sorted(symbols)
            )
        return result

    def _reads(self, piece: list[Node], produced: dict[str, None]) -> dict[str, None]:
        """The names the piece's nodes (and their bodies, after their node's inputs) read that it
        does not produce, in order."""
        runs: Iterable[list[str]] = map(_INPUTS, piece)
        holders = [
            node
            for node in filter(_ATTRIBUTES, piece)
            if may_have_bodies(node.domain, node.op_type, self.opsets.get(node.domain))
        ]
        if holders:  # their bodies' reads after their own inputs
            runs, first = list(runs), piece[0].position
            for node in holders:
                runs[node.position - first] = [*node.inputs, *outer_references(node.proto)]
        reads = dict.fromkeys(filterfalse(produced.__contains__, chain.from_iterable(runs)))
        reads.pop("", None)  # an absent optional input
        return reads

    def _stored_nodes(self, nodes: list[Node]) -> Message | None:
        """The graph's nodes as StoredNodes (each one's bytes), or None where the weights it holds
        inline are too large to serialize with them: its initializers' and those of the nodes whose
        op may hold a tensor or a body (an external tensor's are a few bytes)."""
        graph = self.model.graph
        tensor_nodes = of_kinds(
            nodes, lambda domain, op_type: may_hold_tensors(domain, op_type, self.opsets.get(domain))
        )
        tensors = [*graph.initializer, *graph.sparse_initializer, *(node.proto for node in tensor_nodes)]
        if sum(tensor.ByteSize() for tensor in tensors) > SERIALIZED_WEIGHTS:
            return None
        return stored_nodes_type().FromString(graph.SerializeToString())  # the other fields kept as unknown bytes

    @staticmethod
    def _add_initializer(graph: onnx.GraphProto, tensor: onnx.TensorProto, typed: bool) -> None:
        """An initializer small enough to be a shape, inline, as itself; any other as a typed
        input (its data never copied, an external one's never opened), unless already one."""
        elements = math.prod(tensor.dims)
        if tensor.data_location != onnx.TensorProto.EXTERNAL and elements <= MAX_FOLDED_ELEMENTS:
            graph.initializer.add().CopyFrom(tensor)
        elif not typed:
            graph.input.append(onnx.helper.make_tensor_value_info(tensor.name, tensor.data_type, tensor.dims))


def _held(produced: dict[str, None], table: dict[str, int]) -> Iterable[str]:
    """The produced names the table holds, in produced order: found by a set intersection, which
    walks the smaller side (a graph's outputs are a few), the produced walked only where any is."""
    held = produced.keys() & table.keys()
    return filter(held.__contains__, produced) if held else ()


def _symbols(values: Iterable) -> set[str]:
    """The dim_params the values' types name (each distinct type parsed once)."""
    symbols: set[str] = set()
    for key in set(map(_TYPE, values)):
        _add_symbols(onnx.TypeProto.FromString(key), symbols)
    return symbols


def _add_symbols(value_type: onnx.TypeProto, symbols: set[str]) -> None:
    kind = value_type.WhichOneof("value")
    if kind in ("tensor_type", "sparse_tensor_type"):
        symbols.update(as_text(dim.dim_param) for dim in getattr(value_type, kind).shape.dim if dim.dim_param)
    elif kind in ("sequence_type", "optional_type"):
        _add_symbols(getattr(value_type, kind).elem_type, symbols)
    elif kind == "map_type":
        _add_symbols(value_type.map_type.value_type, symbols)


def _unused(name: str, *taken: dict[str, None]) -> str:
    while any(name in names for names in taken):
        name += "_"
    return name
