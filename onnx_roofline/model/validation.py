"""Is this graph an ONNX graph at all? Checks the loader runs before any analysis, reading no weight
bytes and opening no file: versions, structure (every value written once, no node reading its own
output, no cycle), model-local functions that do not call themselves, node attributes against the
operator schemas, and declared dims in range. Each failure is one ModelLoadError naming the node or
value. docs/hostile-inputs.md lists every check and why it refuses rather than reports."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping

import onnx
import onnx.checker
import onnx.defs

from onnx_roofline.errors import ModelLoadError
from onnx_roofline.model.anonymous_dims import dynamic_negative_dims
from onnx_roofline.model.nodes import Node, of_kinds, read_nodes
from onnx_roofline.model.schemas import may_have_attribute
from onnx_roofline.model.scopes import remember_outer_reads
from onnx_roofline.model.tensors import DTYPE_BITS, TensorInfo, dtype_name

MAX_TENSOR_BYTES = 2**57
"""No tensor can be larger than the largest virtual address space of a 64-bit CPU (57 bits, 5-level
paging): a declared dim or tensor beyond it is a corrupt or hostile file, not a model to cost."""

_DOMAIN_VERSIONS = {"": onnx.defs.onnx_opset_version(), "ai.onnx.ml": onnx.defs.onnx_ml_opset_version()}
_GRAPH_ATTRIBUTES = (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)


def check_model(model: onnx.ModelProto, nodes: list[Node], where: str) -> None:
    """Every check of this module on a loaded model (`nodes` are its top-level nodes, read once)."""
    _check_versions(model, where)
    _check_unique(model, where)
    _check_functions(model, where)
    _Graphs(model, where).check(model.graph, nodes, set(), top_level=True)


def _check_versions(model: onnx.ModelProto, where: str) -> None:
    if model.ir_version > onnx.IR_VERSION:
        raise ModelLoadError(
            f"not a valid ONNX model: {where} (IR version {model.ir_version}; this onnx {onnx.__version__} knows up to {onnx.IR_VERSION})"
        )
    if not model.opset_import:
        raise ModelLoadError(f"not a valid ONNX model: {where} (no opset_import: the operator versions are unknown)")
    for entry in model.opset_import:
        domain = "" if entry.domain == "ai.onnx" else entry.domain
        newest = _DOMAIN_VERSIONS.get(domain)
        if entry.version <= 0 or (newest is not None and entry.version > newest):
            known = f"; this onnx {onnx.__version__} knows up to {newest}" if newest is not None else ""
            raise ModelLoadError(
                f"not a valid ONNX model: {where} (opset {entry.version} of domain {entry.domain or 'ai.onnx'!r}{known})"
            )


def _check_unique(model: onnx.ModelProto, where: str) -> None:
    """A name defined twice (two graph inputs, two initializers, two local functions) has no one
    meaning to cost: which type, which shape? onnxruntime refuses it too."""
    graph = model.graph
    kinds = (
        ("graph input", [v.name for v in graph.input]),
        ("initializer", [t.name for t in graph.initializer] + [s.values.name for s in graph.sparse_initializer]),
        ("model-local function", [f"{f.domain}::{f.name}" for f in model.functions]),
    )
    for kind, names in kinds:
        if len(set(names)) < len(names):
            seen: set[str] = set()
            for name in names:
                if name in seen:
                    raise ModelLoadError(f"not a valid ONNX model: {where} ({kind} {name!r} is defined twice)")
                seen.add(name)


def _check_functions(model: onnx.ModelProto, where: str) -> None:
    """A model-local function may call others, never itself (directly or through others): inlining
    it would not end."""
    functions = {(f.domain, f.name): f for f in model.functions}
    calls = {key: sorted({(n.domain, n.op_type) for n in f.node} & functions.keys()) for key, f in functions.items()}
    done: set[tuple[str, str]] = set()
    for start in functions:
        path: list[tuple[str, str]] = []
        stack, reached = [(start, 0)], set()  # depth-first without recursion: (function, depth)
        while stack:
            key, depth = stack.pop()
            del path[depth:]
            if key in path:
                chain = " → ".join(name for _, name in [*path[path.index(key) :], key])
                raise ModelLoadError(
                    f"not a valid ONNX model: {where} (model-local function {key[1]!r} calls itself: {chain})"
                )
            if key in done:
                continue
            path.append(key)
            reached.add(key)
            stack.extend((callee, depth + 1) for callee in calls[key])
        done |= reached  # every function reached from `start` ends


class _Graphs:
    """Structure and schemas of a graph and its bodies, in one pass over each graph's nodes (a
    node's attributes are read once: reading them is most of the cost)."""

    def __init__(self, model: onnx.ModelProto, where: str):
        self.where = where
        self.context = onnx.checker.C.CheckerContext()
        self.context.ir_version = model.ir_version
        self.context.opset_imports = {entry.domain: entry.version for entry in model.opset_import}
        self.local = {(f.domain, f.name) for f in model.functions}
        self.checked: dict[tuple, str | None] = {}  # schema problem per node signature

    def check(self, graph: onnx.GraphProto, nodes: list[Node], outer: set[str], top_level: bool = False) -> list[str]:
        """Returns the names the graph reads from enclosing scopes in the order first read, `outer`
        being those visible there. Stored order need not be topological (the spec says it must; exporters comply, the
        analysis does not need it); only a graph that is not is searched for a cycle."""
        where = self.where
        _check_declared_shapes(graph, where)
        seen = (
            {v.name for v in graph.input}
            | {t.name for t in graph.initializer}
            | {s.values.name for s in graph.sparse_initializer}
        )
        seen.add("")  # an absent optional input
        writer: dict[str, int] = {}
        reads: list[list[str]] = []
        late: list[str] = []  # read before the node that writes it (or never written in this graph)
        scope: set[str] | None = None  # what a body may read: built at the first body
        _check_text(
            ((n.op_type for n in nodes), (n.domain for n in nodes), (n.name for n in nodes)), where
        )  # before a schema is looked up by them
        for index, node in enumerate(nodes):
            names = node.inputs
            attrs = node.attributes
            kinds = tuple([(a.name, a.type, a.ref_attr_name) for a in attrs]) if attrs else ()
            self._schema(node, kinds)
            if kinds and any(kind in _GRAPH_ATTRIBUTES for _, kind, _ in kinds):
                scope = scope if scope is not None else outer | seen | {o for n in nodes for o in n.outputs}
                names = names + self._body_reads(attrs, scope)
            reads.append(names)
            if not seen.issuperset(names):
                late += [name for name in names if name not in seen]
            for name in node.outputs:
                if not name:
                    continue
                if name in writer:
                    raise ModelLoadError(
                        f"not a valid ONNX model: {where} (value {name!r} is written by two nodes: {_node(nodes, writer[name])} and {_node(nodes, index)})"
                    )
                if name in seen:
                    raise ModelLoadError(
                        f"not a valid ONNX model: {where} (node {_node(nodes, index)} writes {name!r}, a graph input or initializer)"
                    )
                if name in names:
                    raise ModelLoadError(
                        f"not a valid ONNX model: {where} (node {_node(nodes, index)} reads its own output {name!r})"
                    )
                writer[name] = index
                seen.add(name)
        _check_text((writer, late), where)  # every name read is written here, a graph input, or in `late`
        free = list(dict.fromkeys(name for name in late if name not in seen))
        for name in set(free) - outer:
            scope_text = "" if top_level else " in a subgraph"
            raise ModelLoadError(
                f"not a valid ONNX model: {where} (value {name!r} is used but never produced{scope_text})"
            )
        if any(name in seen for name in late):  # read before the node that writes it: stored out of order, or a cycle
            _check_acyclic(nodes, [[writer[n] for n in names if n in writer] for names in reads], where)
        return free

    def _body_reads(self, attrs, visible: set[str]) -> list[str]:
        """The enclosing-scope names a node's bodies read (each body checked on the way), as
        scopes.outer_references orders them: each body's are remembered as its outer reads, which
        the shape engine and the walk ask of it again."""
        names: dict[str, None] = {}
        for attr in attrs:
            if attr.type in _GRAPH_ATTRIBUTES:
                for body in [attr.g] if attr.type == onnx.AttributeProto.GRAPH else attr.graphs:
                    reads = self.check(body, read_nodes(body), visible)
                    names.update(dict.fromkeys(remember_outer_reads(body, reads)))
        return list(names)

    def _schema(self, node: Node, kinds: tuple) -> None:
        """The node against its operator's schema (attribute names and types, input and output
        counts) with onnx's checker, once per distinct signature: GPT-2's 614 nodes have 26. A call
        to a model-local function has no schema to meet. An attribute that refers to a function's
        (`ref_attr_name`) has no value outside a function body, whatever the op."""
        signature = (node.domain, node.op_type, kinds, tuple(map(bool, node.inputs)), len(node.outputs))
        problem = self.checked.get(signature, ...)
        if problem is ...:
            referring = [f"{name!r} refers to attribute {ref!r} of a function" for name, _, ref in kinds if ref]
            defined = (node.proto.domain, node.op_type) not in self.local and self._defined(node)
            problem = self.checked[signature] = (
                f"attribute {referring[0]}, outside any function"
                if referring
                else _schema_problem(_without_bodies(node.proto), self.context)
                if defined
                else None
            )
        if problem is not None:
            raise ModelLoadError(f"not a valid ONNX model: {self.where} (node {_label(node.proto)}: {problem})")

    def _defined(self, node: Node) -> bool:
        """Whether ONNX defines the op at the model's opset, undeprecated: only those are held to a
        schema. An op ONNX does not know (onnxruntime's SimplifiedLayerNormalization registered in the
        default domain, a custom domain, one a newer opset retired) is not invalid: the analysis
        types it with a shape rule or reports it unsupported."""
        opsets = self.context.opset_imports
        version = opsets.get(node.proto.domain, opsets.get("ai.onnx" if not node.domain else node.domain))
        if version is None:
            return False
        try:
            return not onnx.defs.get_schema(node.op_type, version, node.domain).deprecated
        except onnx.defs.SchemaError:
            return False


def _check_text(fields: Iterable[Iterable], where: str) -> None:
    """Names and op types must be text: protobuf gives bytes for a string that is not UTF-8. One
    join per field."""
    for field in fields:
        try:
            "".join(field)
        except TypeError:
            raise ModelLoadError(f"not a valid ONNX model: {where} (a name or op type is not valid UTF-8)") from None


def _check_acyclic(nodes: list[Node], depends: list[list[int]], where: str) -> None:
    """Kahn's algorithm; the graph need not be stored in topological order, but must have one."""
    waiting = [len(set(d)) for d in depends]
    users: list[list[int]] = [[] for _ in nodes]
    for index, producers in enumerate(depends):
        for producer in set(producers):
            users[producer].append(index)
    ready = [i for i, count in enumerate(waiting) if count == 0]
    done = 0
    while ready:
        index = ready.pop()
        done += 1
        for user in users[index]:
            waiting[user] -= 1
            if waiting[user] == 0:
                ready.append(user)
    if done == len(nodes):
        return
    # Walk back from a blocked node along blocked producers until one repeats: that is the cycle.
    path: list[int] = []
    seen, index = {}, next(i for i, count in enumerate(waiting) if count)
    while index not in seen:
        seen[index] = len(path)
        path.append(index)
        index = next(p for p in depends[index] if waiting[p])
    cycle = [*path[seen[index] :], index][::-1]
    chain = " → ".join(_node(nodes, i) for i in cycle)
    raise ModelLoadError(f"not a valid ONNX model: {where} (the graph has a cycle: {chain})")


def _node(nodes: list[Node], index: int) -> str:
    node = nodes[index]
    return f"{node.name!r} ({node.op_type})" if node.name else f"#{index} ({node.op_type})"


# --- declared shapes ------------------------------------------------------------------------------


def _check_declared_shapes(graph: onnx.GraphProto, where: str) -> None:
    """Dims a file declares (inputs, outputs, initializers): 0 ≤ dim, and every tensor
    within MAX_TENSOR_BYTES. A dim of 2⁶² is refused, not costed; so is a negative dim of an
    initializer. A negative dim of a graph input or output (paddle2onnx writes `dim_value: -1`
    for a dynamic one, which ONNX's checker and onnxruntime accept) is a dynamic dim: it is made
    one, in place on the loader's copy (anonymous_dims.dynamic_negative_dims), and a main-graph
    input's is then named like any anonymous dim."""
    for value in (*graph.input, *graph.output):  # value_info: the analysis drops it before inference
        if type(value.name) is bytes:
            raise ModelLoadError(f"not a valid ONNX model: {where} (a graph input or output name is not valid UTF-8)")
        if value.type.HasField("tensor_type") and value.type.tensor_type.HasField("shape"):
            dynamic_negative_dims(value)
            dims = [d.dim_value if d.HasField("dim_value") else None for d in value.type.tensor_type.shape.dim]
            check_tensor_size(value.name, dims, value.type.tensor_type.elem_type, where)
    for tensor in graph.initializer:
        if type(tensor.name) is bytes:
            raise ModelLoadError(f"not a valid ONNX model: {where} (an initializer name is not valid UTF-8)")
        check_tensor_size(tensor.name, list(tensor.dims), tensor.data_type, where)


def check_tensor_size(
    name: str, dims: Iterable[int | None], elem_type: int, where: str, error: type = ModelLoadError
) -> None:
    """Refuse a negative dim, or a tensor (all its dims known) over MAX_TENSOR_BYTES."""
    dims = list(dims)
    for dim in dims:
        if dim is not None and not 0 <= dim <= MAX_TENSOR_BYTES:
            raise error(f"{_prefix(where)}tensor {name!r} has a dim of {dim}: dims must be between 0 and 2^57")
    sizes = [dim for dim in dims if dim is not None]
    if len(sizes) < len(dims):
        return
    bits = DTYPE_BITS.get(dtype_name(elem_type) or "", 8) or 8
    if (math.prod(sizes) * bits + 7) // 8 > MAX_TENSOR_BYTES:
        shape = "x".join(map(str, dims))
        raise error(
            f"{_prefix(where)}tensor {name!r} of shape {shape} is larger than 2^57 bytes, the largest address space of any CPU"
        )


def _prefix(where: str) -> str:
    return f"not a valid ONNX model: {where}: " if where else ""


# --- schemas ---------------------------------------------------------------------------------------


def _without_bodies(node: onnx.NodeProto) -> onnx.NodeProto:
    """The node for the schema check: bodies replaced by an empty graph (they are checked node by
    node: the checker alone cannot see the outer scope they read), and tensor attributes without
    stubs (the checker would stat an external location relative to the working directory)."""
    if not any(
        a.type in _GRAPH_ATTRIBUTES or a.type in (onnx.AttributeProto.TENSOR, onnx.AttributeProto.TENSORS)
        for a in node.attribute
    ):
        return node
    copy = onnx.NodeProto()
    copy.CopyFrom(node)
    for attr in copy.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            attr.g.CopyFrom(onnx.GraphProto(name="body"))
        elif attr.type == onnx.AttributeProto.GRAPHS:
            for graph in attr.graphs:
                graph.CopyFrom(onnx.GraphProto(name="body"))
        elif attr.type == onnx.AttributeProto.TENSOR:
            _stub(attr.t)
        elif attr.type == onnx.AttributeProto.TENSORS:
            for tensor in attr.tensors:
                _stub(tensor)
    return copy


def _stub(tensor: onnx.TensorProto) -> None:
    if tensor.data_location == onnx.TensorProto.EXTERNAL:
        tensor.CopyFrom(onnx.TensorProto(name=tensor.name, data_type=onnx.TensorProto.FLOAT, float_data=[0.0]))


def _schema_problem(node: onnx.NodeProto, context) -> str | None:
    try:
        onnx.checker.check_node(node, context)
    except UnicodeDecodeError:  # the checker's own message quotes a name that is not UTF-8
        return "a name or attribute is not valid UTF-8"
    except onnx.checker.ValidationError as exc:
        return re.sub(r"in '[^']* : ", "in '", str(exc).strip().splitlines()[0]).rstrip(
            "."
        )  # the node is named already
    return None


def _label(node: onnx.NodeProto) -> str:
    return f"{node.name!r} ({node.op_type})" if node.name else f"of type {node.op_type}"


# --- after inference: attribute values that need the input's rank -----------------------------------

_AXIS_RANGE = {"Flatten": (0, 1), "OneHot": (1, 1)}  # (extra low, extra high) on [-r, r-1]


def _has_axes(op_type: str, opset: int | None) -> bool:
    return op_type == "Transpose" or may_have_attribute("", op_type, opset, "axis")


def _axis_range(node: Node) -> tuple[int, int]:
    """The extra room an op's `axis` has beyond its input's axes: a new axis where it adds one
    (OneHot; ConcatFromSequence with new_axis=1 stacks its elements, [-r-1, r])."""
    if node.op_type == "ConcatFromSequence" and any(
        attr.name == "new_axis" and attr.i == 1 for attr in node.attributes
    ):
        return 1, 1
    return _AXIS_RANGE.get(node.op_type, (0, 0))


_SCALED = ("QuantizeLinear", "DequantizeLinear")  # their axis names the scale's axis, when there is one


def _per_tensor(node: Node, values: Mapping[str, TensorInfo]) -> bool:
    """A QuantizeLinear or DequantizeLinear with one scale: its `axis` is ignored (by the spec and
    onnxruntime, whose optimizer writes one on a per-tensor DequantizeLinear of a bias)."""
    if node.op_type not in _SCALED or len(node.inputs) < 2:
        return False
    scale = values.get(node.inputs[1])
    return (
        scale is not None and scale.shape is not None and all(d == 1 for d in scale.shape)
    )  # a scalar, or one element


def check_axes(nodes: list[Node], values: Mapping[str, TensorInfo], opset: int | None) -> None:
    """An `axis` attribute outside its input's rank (Softmax axis=99), or a Transpose `perm` that is
    not a permutation of the axes: the schemas do not say, inference would. Checked for the
    default domain (imported at `opset`) where the input's rank is known; most ops have no such
    attribute, and their nodes are not visited (nodes.of_kinds)."""
    for node in of_kinds(nodes, lambda domain, op_type: not domain and _has_axes(op_type, opset)):
        if not node.inputs or not node.inputs[0]:
            continue
        info = values.get(node.inputs[0])
        if info is None or info.shape is None or _per_tensor(node, values):
            continue
        rank = len(info.shape)
        for attr in node.attributes:
            if attr.name == "axis" and attr.type == onnx.AttributeProto.INT:
                low, high = _axis_range(node)
                if not -(rank + low) <= attr.i <= rank - 1 + high:
                    raise ModelLoadError(
                        f"not a valid ONNX model: node {_label(node.proto)}: axis {attr.i} is out of range for its rank-{rank} input {info.name!r}"
                    )
            elif attr.name == "perm" and node.op_type == "Transpose" and sorted(attr.ints) != list(range(rank)):
                raise ModelLoadError(
                    f"not a valid ONNX model: node {_label(node.proto)}: perm {list(attr.ints)} is not a permutation of its rank-{rank} input's axes"
                )
