"""The weights of a model: every tensor it stores as data, in one enumeration that the report's
parameters (its header and JSON), `inspect` and the memory footprint all read.

A weight is an initializer (a sparse one by its stored values) or the tensor of a `Constant`
node, in the main graph and in every body at any depth (If branches, Loop and Scan bodies, the
subgraphs of a contrib generation loop), each counted once: a tensor is one weight however many
nodes read it. Converters store weights either way: paddle2onnx, older tf2onnx and some torch
exports write every weight as a Constant node, and a model of those has its parameters there.

Not weights:

- **A small integer shape constant**: an integer tensor (int8 … int64, uint8 … uint64) of rank 0
  or 1 with at most `SHAPE_CONSTANT_ELEMENTS` (16) elements. It is what ONNX takes as a shape or
  a position: a Reshape's or Expand's target, Unsqueeze's axes, Slice's starts/ends/axes/steps,
  Pad's pads, Tile's repeats, a scalar index, a Range's bounds. Each is a vector of one entry per
  axis (two for pads), and 16 covers pads of a rank-8 tensor — beyond any layout exporters
  write; a TorchScript export writes hundreds of them, which are not parameters. An integer
  tensor of rank 2 or more, or of more elements, is data (an index table, a quantized weight);
  a float scalar (a scale, an epsilon) is a weight, and so is a bool tensor of more than 16
  elements (a mask). The quantized bias of a layer of at most 16 channels is the one weight
  this leaves out: 64 bytes at most.
- **A graph input given a value** (`--value`): a constant of the run, not a stored weight.
- A string tensor: no static byte size.

Only dims and element types are read: no weight byte, inline or external, is touched."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import onnx

from onnx_roofline.model.nodes import Node, of_kinds, read_nodes
from onnx_roofline.model.tensors import DTYPE_BITS, TensorInfo, dtype_name

SHAPE_CONSTANT_ELEMENTS = 16
"""The most elements an integer tensor of rank 0 or 1 may have to count as a shape constant."""

INTEGER_DTYPES = frozenset({"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"})

INITIALIZER, SPARSE_INITIALIZER, CONSTANT = "initializer", "sparse initializer", "Constant"

_BODY_OPS = frozenset(
    {"If", "Loop", "Scan", "SequenceMap"}
)  # default-domain ops with bodies; any custom-domain op is looked at too
_GRAPH_ATTRIBUTES = (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)


@dataclass(frozen=True)
class Weight:
    """One stored tensor: its name, dtype, shape, how it is stored (`kind`: initializer, sparse
    initializer, Constant) and where (`graph`: "" for the main graph, else the body's path,
    `If_sr/then_branch`)."""

    name: str
    dtype: str | None
    shape: tuple[int, ...]
    kind: str
    graph: str = ""

    @property
    def elements(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        """Bytes as stored: elements × element width (sub-byte types packed, rounded up)."""
        return (self.elements * DTYPE_BITS.get(self.dtype or "", 0) + 7) // 8

    def info(self) -> TensorInfo:
        return TensorInfo(self.name, self.shape, self.dtype)

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "dtype": self.dtype,
            "shape": list(self.shape),
            "kind": self.kind,
            "graph": self.graph,
        }


def is_shape_constant(dtype: str | None, shape: Sequence[int]) -> bool:
    """An integer tensor of rank 0 or 1 of at most SHAPE_CONSTANT_ELEMENTS elements (the module docstring)."""
    return dtype in INTEGER_DTYPES and len(shape) <= 1 and math.prod(shape) <= SHAPE_CONSTANT_ELEMENTS


def stored_tensors(graph: onnx.GraphProto, nodes: list[Node] | None = None, given: Iterable[str] = ()) -> list[Weight]:
    """Every tensor the graph and its bodies store, shape constants included, in graph order
    (a body's after its node's graph): the census `weights` filters. `nodes`: the main graph's,
    where the caller has read them; `given`: graph inputs given a value, left out."""
    found: list[Weight] = []
    skipped = set(given)
    for where, body, body_nodes in _graphs(graph, nodes):
        for tensor in body.initializer:
            if not where and tensor.name in skipped:
                continue
            found.append(Weight(tensor.name, dtype_name(tensor.data_type), tuple(tensor.dims), INITIALIZER, where))
        for sparse in body.sparse_initializer:
            values = sparse.values
            found.append(
                Weight(values.name, dtype_name(values.data_type), tuple(values.dims), SPARSE_INITIALIZER, where)
            )
        for node in of_kinds(body_nodes, _constant):
            if node.outputs:
                typed = constant_type(node.attributes)
                if typed is not None:
                    found.append(Weight(node.outputs[0], typed[0], typed[1], CONSTANT, where))
    return found


def weights(graph: onnx.GraphProto, nodes: list[Node] | None = None, given: Iterable[str] = ()) -> tuple[Weight, ...]:
    """The model's weights (the module docstring): every stored tensor but shape constants and strings."""
    return tuple(
        w
        for w in stored_tensors(graph, nodes, given)
        if w.dtype not in (None, "string") and not is_shape_constant(w.dtype, w.shape)
    )


def parameter_count(found: Iterable[Weight], logical: Iterable[tuple[str, int]] = ()) -> int:
    """Elements of the weights, each once; `logical`: (name, elements) where a cost rule counts a
    packed weight by its logical elements (MatMulNBits' K·N; 0 for its scales and zero points)."""
    elements = {(w.graph, w.name): w.elements for w in found}
    by_name: dict[str, list[tuple[str, str]]] = {}
    for key in elements:
        by_name.setdefault(key[1], []).append(key)
    for name, count in logical:
        for key in by_name.get(name, ()):
            elements[key] = count
    return sum(elements.values())


def constant_type(attributes: Sequence[onnx.AttributeProto]) -> tuple[str | None, tuple[int, ...]] | None:
    """(dtype, shape) of the tensor a Constant node of these attributes produces, read from its
    dims (never its bytes); None for a form with no tensor."""
    for attr in attributes:
        name = attr.name
        if name == "value":
            return dtype_name(attr.t.data_type), tuple(attr.t.dims)
        if name == "sparse_value":
            return dtype_name(attr.sparse_tensor.values.data_type), tuple(attr.sparse_tensor.values.dims)
        if name == "value_float":
            return "float32", ()
        if name == "value_floats":
            return "float32", (len(attr.floats),)
        if name == "value_int":
            return "int64", ()
        if name == "value_ints":
            return "int64", (len(attr.ints),)
        if name in ("value_string", "value_strings"):
            return "string", () if name == "value_string" else (len(attr.strings),)
    return None


def _constant(domain: str, op_type: str) -> bool:
    return op_type == "Constant" and not domain


def _may_hold_body(domain: str, op_type: str) -> bool:
    return op_type in _BODY_OPS or bool(domain)


def _graphs(graph: onnx.GraphProto, nodes: list[Node] | None) -> Iterator[tuple[str, onnx.GraphProto, list[Node]]]:
    """(path, graph, its nodes) of the graph and every body in it, depth first. Only a node that
    can hold a body has its attributes looked at: If, Loop, Scan, SequenceMap, and any op of a
    custom domain (onnxruntime's BeamSearch holds its decoder)."""
    pending = [("", graph, read_nodes(graph) if nodes is None else nodes)]
    while pending:
        where, current, current_nodes = pending.pop(0)
        yield where, current, current_nodes
        for node in of_kinds(current_nodes, _may_hold_body):
            for attr in node.attributes:
                if attr.type not in _GRAPH_ATTRIBUTES:
                    continue
                label = f"{where}/" if where else ""
                label += node.name or f"{node.op_type}_{node.position}"
                bodies = [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)
                for position, body in enumerate(bodies):
                    suffix = attr.name if len(bodies) == 1 else f"{attr.name}[{position}]"
                    pending.append((f"{label}/{suffix}", body, read_nodes(body)))
