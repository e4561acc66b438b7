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

import onnx

from onnx_roofline.model.constants import MAX_FOLDED_ELEMENTS
from onnx_roofline.model.inferred import CHECKED, LENIENT, DeclaredTypes, Mode, declared_types, inferred_types
from onnx_roofline.model.nodes import Node
from onnx_roofline.model.schemas import may_have_bodies, onnx_knows, opsets
from onnx_roofline.model.scopes import outer_references
from onnx_roofline.model.spec_defaults import lacks_defaults, spell_out_defaults
from onnx_roofline.model.text import as_text

PIECE_NODES = 10_000  # nodes above which a graph is inferred in pieces of this many (shapes/engine.py)
# ONNX's pass is itself faster a piece at a time: 2.5 µs a node for 10,000 nodes, 4.8 µs for 200,000.
SYMBOLS = "onnx_roofline::symbols"  # a value_info naming the symbols in use, for ONNX's table to skip


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
    inference reads every node as stored, defaults left out."""
    graph = model.graph
    declared = declared_types(graph)
    known = {value.name: value for value in declared[: len(graph.input)]}
    symbols = _symbols(declared)
    tables = _Tables(model, spell_out=mode != CHECKED)
    for start in range(0, len(nodes), size):
        piece = nodes[start : start + size]
        produced = {name: None for node in piece for name in node.outputs if name}  # in graph order: the result's order
        try:
            typed = inferred_types(tables.piece_model(start, piece, produced, known, symbols), mode)
        except Exception as exc:  # what onnx raises (InferenceError, RuntimeError, ...): the sweep types these nodes
            if failed is None:
                raise
            failed(f"nodes {start}–{start + len(piece) - 1}", exc)
            continue
        finally:
            if mode.checked and not all(onnx_knows(n.domain, n.op_type, tables.opsets.get(n.domain)) for n in piece):
                mode = mode._replace(checked=False)  # as ONNX's whole pass drops every error past such an op
        new = {name: value for value in typed if (name := value.name) in produced}
        known.update(new)
        symbols.update(_symbols(new.values()))
    return [*known.values(), *(value for value in declared[len(graph.input) :] if value.name not in known)]


class _Tables:
    """The graph's lookups a piece is built from, made once: initializers, value_info and outputs
    by name (positions, not protobuf objects: a million of those is half a gigabyte)."""

    def __init__(self, model: onnx.ModelProto, spell_out: bool):
        graph = model.graph
        self.model = model
        self.spell_out = spell_out  # the defaults inference misreads, spelled out (spec_defaults.py)
        self.opsets = opsets(model)
        self.initializers = {tensor.name: index for index, tensor in enumerate(graph.initializer)}
        self.sparse = {tensor.values.name: index for index, tensor in enumerate(graph.sparse_initializer)}
        self.value_info = {value.name: index for index, value in enumerate(graph.value_info)}
        self.outputs = {value.name: index for index, value in enumerate(graph.output)}

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
        result.graph.node.extend(graph.node[start : start + len(piece)])  # a slice: copied in C, not node by node
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
        for name in produced:
            if name in self.value_info:
                result.graph.value_info.add().CopyFrom(graph.value_info[self.value_info[name]])
            if name in self.outputs:
                result.graph.output.add().CopyFrom(graph.output[self.outputs[name]])
        if symbols:
            holder = result.graph.value_info.add(name=_unused(SYMBOLS, produced.keys() | reads.keys()))
            holder.type.tensor_type.shape.dim.extend(
                onnx.TensorShapeProto.Dimension(dim_param=symbol) for symbol in sorted(symbols)
            )
        return result

    def _reads(self, piece: list[Node], produced: dict[str, None]) -> dict[str, None]:
        """The names the piece's nodes (and their bodies) read that it does not produce, in order."""
        names: list[str] = []
        for node in piece:
            names += node.inputs
            if node.attributes and may_have_bodies(node.domain, node.op_type, self.opsets.get(node.domain)):
                names += outer_references(node.proto)
        return {name: None for name in dict.fromkeys(names) if name and name not in produced}

    @staticmethod
    def _add_initializer(graph: onnx.GraphProto, tensor: onnx.TensorProto, typed: bool) -> None:
        """An initializer small enough to be a shape, inline, as itself; any other as a typed
        input (its data never copied, an external one's never opened), unless already one."""
        elements = math.prod(tensor.dims)
        if tensor.data_location != onnx.TensorProto.EXTERNAL and elements <= MAX_FOLDED_ELEMENTS:
            graph.initializer.add().CopyFrom(tensor)
        elif not typed:
            graph.input.append(onnx.helper.make_tensor_value_info(tensor.name, tensor.data_type, tensor.dims))


def _symbols(values: Iterable) -> set[str]:
    """The dim_params the values' types name (each distinct type parsed once)."""
    symbols: set[str] = set()
    for key in {value.type for value in values}:
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


def _unused(name: str, taken: set[str]) -> str:
    while name in taken:
        name += "_"
    return name
