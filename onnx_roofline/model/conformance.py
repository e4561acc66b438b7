"""Would a runtime load this file? A model can be costed and still be one that onnxruntime refuses
(a value_info contradicting the inferred type, uint8 fed to LayerNormalization, an initializer's
raw_data shorter than its dims, an external-data location outside the model's folder). Such a
model is analyzed, and flagged: each finding an `Invalid`, in the report (model.invalid), on
stderr, and a failed `check`.

One mechanism, onnx's own: `onnx.checker.check_model(full_check=True)` (structure, tensors, sparse
initializers, then type-checked strict shape inference), on the model as onnxruntime would load it,
where no external tensor can be read (the checker would look for its file relative to the working
directory): an external initializer becomes a graph input of its declared type, and the other few
become zeros of their size, within SKELETON_BYTES. Usually the model itself is checked, serialized
once and never copied: its external initializers stand aside for the check (each renamed, its
location one the checker does not follow, a graph input of its name and type added) and the ops
below are moved, all put back after (_stand_aside). Where that cannot find what a copy finds (an
output without a shape, external tensors outside the initializers, IR < 4...), a *skeleton* of
the model is built and checked instead. Nothing is read from a weight file; external locations are checked
here instead, by files.locate (a stat, inside the model's folder). Where the checker and
onnxruntime disagree, onnxruntime decides: an op onnxruntime registers in the default domain
(ORT_DEFAULT_DOMAIN) or an op ONNX deprecated is moved to a domain of its own in the skeleton,
and a graph stored out of topological order (onnxruntime sorts it) is checked sorted.
docs/hostile-inputs.md, "Invalid is said", lists the classes."""

from __future__ import annotations

import functools
import logging
import math
import os
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import onnx
import onnx.checker
import onnx.defs
import onnx.helper

from onnx_roofline.errors import ExternalDataError, one_line
from onnx_roofline.model import files, pieces
from onnx_roofline.model.constants import readable
from onnx_roofline.model.inferred import CHECKED
from onnx_roofline.model.isolation import PassCrashed, crash_prone, isolated
from onnx_roofline.model.memo import remembered
from onnx_roofline.model.nodes import Node, kinds, of_kinds, read_fresh, read_nodes
from onnx_roofline.model.schemas import may_have_bodies, onnx_knows, opsets
from onnx_roofline.model.tensors import DTYPE_BITS, TensorInfo, dtype_name

log = logging.getLogger(__name__)

CHECKER, EXTERNAL_DATA, TENSOR_DATA = "onnx checker", "external data", "tensor data"  # Invalid.source
ATTRIBUTES = "node attributes"  # Invalid.source: attribute values the spec forbids and the checker lets through
TYPES = "node input types"  # Invalid.source: inputs of one type variable holding two types, past a contrib op

ORT_DEFAULT_DOMAIN = frozenset({
    "Affine", "Crop", "DynamicSlice", "GRUUnit", "GivenTensorFill", "ImageScaler", "MemcpyFromHost", "MemcpyToHost",
    "ParametricSoftplus", "Scale", "ScaledTanh", "SimplifiedLayerNormalization",
    "DisentangledAttention_TRT", "EfficientNMS_TRT", "MultilevelCropAndResize_TRT", "PyramidROIAlign_TRT",
})  # fmt: skip
"""Ops onnxruntime 1.32 registers in the default domain that ONNX has no schema for
(`onnxruntime.capi.onnxruntime_pybind11_state.get_all_operator_schema()`, domain "", less
`onnx.defs`): onnxruntime-genai writes SimplifiedLayerNormalization there. Not invalid."""

SKELETON_BYTES = 64 * 2**20
"""External tensors the skeleton cannot make graph inputs (a Constant's value, a body's
initializer) become zeros of their size; past this many bytes of them the checker is not run
(said at debug level): the analysis never allocates a model's weights."""

_PRIVATE = "onnx_roofline.unchecked"  # the skeleton's domain for ops onnxruntime knows and ONNX does not
_EXTERNAL = onnx.TensorProto.EXTERNAL
_GRAPHS = (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)


@dataclass(frozen=True)
class Invalid:
    """Why a runtime would refuse the model: `source` (CHECKER, EXTERNAL_DATA) and the root cause."""

    source: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"source": self.source, "message": self.message}

    def __str__(self) -> str:
        return f"{self.source}: {self.message}"


def refusal(invalid: Sequence[Invalid]) -> str:
    """The findings in one line, as `check` fails a model and `verify` refuses to run one."""
    more = f" (and {len(invalid) - 1} more)" if len(invalid) > 1 else ""
    return f"INVALID: a runtime would refuse this model: {invalid[0]}{more}"


def conformance(
    model: onnx.ModelProto, nodes: list[Node], path: str | os.PathLike | None, inference: bool = True
) -> tuple[Invalid, ...]:
    """The findings on a loaded model (`nodes`: its main graph's, read once; `path`: the file, None
    for an in-memory model, whose external locations cannot be placed). `inference` False: onnx's
    checker without its strict type and shape inference, which the analysis runs as its shape
    engine's first pass instead (analysis.bind_and_infer: one inference, not two). Its passes
    share what they learn of a graph (memo.py), the kinds of its nodes found once
    (nodes.of_kinds), as within an analysis."""
    with remembered():
        return _conformance(model, nodes, path, inference)


def _conformance(
    model: onnx.ModelProto, nodes: list[Node], path: str | os.PathLike | None, inference: bool
) -> tuple[Invalid, ...]:
    external = list(files.external_tensors(model, nodes))
    found = _external_data(external, None if path is None else files.model_folder(path)) + _external_types(external)
    initializers = sum(1 for tensor in model.graph.initializer if tensor.data_location == _EXTERNAL) if external else 0
    problem = _checker(model, nodes, external, len(external) > initializers, inference)
    found += (
        [Invalid(CHECKER, problem)]
        if problem
        else [*_inline_data(model.graph), *_inputs_over_initializers(model.graph), *_scan_attributes(model, nodes)]
    )  # what the checker lets through
    return tuple(found)


_CONTROL_FLOW = frozenset({"If", "Loop", "Scan"})


def mixed_input_types(
    model: onnx.ModelProto, nodes: list[Node], values: Mapping[str, TensorInfo]
) -> tuple[Invalid, ...]:
    """The first main-graph node, past one of an op ONNX has no schema for (a contrib op), whose
    inputs its schema binds to one type variable (Concat's T, Where's X and Y) and that hold
    element types that differ, as `values` (the shape engine's) type them. onnxruntime, which
    knows the contrib op, refuses it; onnx's checked inference drops every error past such a node
    (its has_unsupported_op), so the file's check said nothing."""
    versions = opsets(model)
    if all(onnx_knows(*kind, versions.get(kind[0])) for kind in kinds(nodes)):
        return ()  # no contrib op: the checker was not blind to any node
    blind = False
    for node in nodes:
        version = versions.get(node.domain)
        if not onnx_knows(node.domain, node.op_type, version):
            blind = True
            continue
        if not blind:
            continue
        for variable, slots in _type_variables(node.domain, node.op_type, version, len(node.inputs)):
            held = {
                info.dtype
                for slot in slots
                if (name := node.inputs[slot])
                and (info := values.get(name)) is not None
                and info.dtype
                and not info.sequence
            }
            if len(held) > 1:
                said = f"node {node.name or node.op_type!r} ({node.op_type}): its inputs of type {variable} hold {', '.join(sorted(held))}"
                return (Invalid(TYPES, said),)
    return ()


@functools.cache
def _type_variables(
    domain: str, op_type: str, version: int | None, inputs: int
) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """The op's type variables that two or more of a node's `inputs` slots share, with those slots
    (a variadic last parameter spans the rest)."""
    schema = onnx.defs.get_schema(op_type, version or 1, domain)
    slots: dict[str, list[int]] = {}
    for index in range(inputs):
        parameters = schema.inputs
        if not parameters:
            break
        parameter = parameters[min(index, len(parameters) - 1)]
        if index >= len(parameters) and parameter.option != onnx.defs.OpSchema.FormalParameterOption.Variadic:
            break
        slots.setdefault(parameter.type_str, []).append(index)
    return tuple((variable, tuple(found)) for variable, found in slots.items() if len(found) > 1)


def _scan_attributes(model: onnx.ModelProto, nodes: list[Node]) -> list[Invalid]:
    """The first Scan (opset 9 on, at any depth) whose attributes the spec forbids: num_scan_inputs
    outside 1 to its inputs, a direction other than 0 or 1, a list of directions or axes not one per
    scan input or output, an axis outside its scan's rank (its body's + 1). onnxruntime refuses
    each as it initializes the session; onnx's checker never reads the directions, and says nothing
    of the rest past an op it has no schema for (a contrib op: its inference then drops errors)."""
    version = opsets(model).get("")
    if version is None or version < 9:
        return []
    pending = [node.proto for node in of_kinds(nodes, _control_flow)]
    while pending:
        node = pending.pop()
        bodies = {attr.name: attr.g for attr in node.attribute if attr.type == onnx.AttributeProto.GRAPH}
        pending += [inner for body in bodies.values() for inner in body.node
                    if inner.op_type in _CONTROL_FLOW and inner.domain in ("", "ai.onnx")]  # fmt: skip
        problem = _scan_problem(node, bodies["body"]) if node.op_type == "Scan" and "body" in bodies else None
        if problem:
            return [Invalid(ATTRIBUTES, f"node {node.name or node.op_type!r} (Scan): {problem}")]
    return []


def _control_flow(domain: str, op_type: str) -> bool:
    return op_type in _CONTROL_FLOW and not domain


def _scan_problem(node: onnx.NodeProto, body: onnx.GraphProto) -> str | None:
    attrs = {attr.name: attr for attr in node.attribute}
    scanned = attrs["num_scan_inputs"].i if "num_scan_inputs" in attrs else 0
    if not 1 <= scanned <= len(node.input):
        return f"num_scan_inputs {scanned} is not between 1 and its {len(node.input)} inputs"
    states = len(node.input) - scanned
    if states > len(node.output):
        return f"{states} state inputs and only {len(node.output)} outputs"
    ranks = {
        "input": [_rank(value) for value in body.input[states:]],
        "output": [_rank(value) for value in body.output[states:]],
    }
    for side, count in (("input", scanned), ("output", len(node.output) - states)):
        for kind in ("directions", "axes"):
            listed = attrs.get(f"scan_{side}_{kind}")
            if listed is None:
                continue
            if len(listed.ints) != count:
                return f"scan_{side}_{kind} has {len(listed.ints)} entries for {count} scan {side}s"
            for index, value in enumerate(listed.ints):
                rank = ranks[side][index] if index < len(ranks[side]) else None
                if kind == "directions" and value not in (0, 1):
                    return f"scan_{side}_directions[{index}] is {value}, not 0 (forward) or 1 (reverse)"
                if kind == "axes" and rank is not None and not -(rank + 1) <= value <= rank:
                    return f"scan_{side}_axes[{index}] is {value}, outside its rank-{rank + 1} scan {side}"
    return None


def _rank(value: onnx.ValueInfoProto) -> int | None:
    """A body value's rank where it declares a shape."""
    typed = value.type.tensor_type if value.type.HasField("tensor_type") else None
    return len(typed.shape.dim) if typed is not None and typed.HasField("shape") else None


def _inputs_over_initializers(graph: onnx.GraphProto) -> list[Invalid]:
    """The first initializer that is also a graph input declared with another element type, rank
    or fixed dim: onnxruntime refuses to load it ("Data in initializer ... has element type ...";
    "Can't merge shape info"), which onnx's checker lets through."""
    declared = {value.name: value.type.tensor_type for value in graph.input if value.type.HasField("tensor_type")}
    for tensor in graph.initializer:
        typed = declared.get(tensor.name)
        if typed is None:
            continue
        kind = typed.elem_type not in (0, tensor.data_type)
        dims = (
            [d.dim_value if d.HasField("dim_value") else None for d in typed.shape.dim]
            if typed.HasField("shape")
            else None
        )
        shape = dims is not None and (
            len(dims) != len(tensor.dims)
            or any(d is not None and d != t for d, t in zip(dims, tensor.dims, strict=False))
        )
        if kind or shape:
            said = f"{dtype_name(typed.elem_type) or typed.elem_type} {['?' if d is None else d for d in dims] if dims is not None else ''}".strip()
            held = f"{dtype_name(tensor.data_type) or tensor.data_type} {list(tensor.dims)}"
            return [
                Invalid(
                    TENSOR_DATA,
                    f"initializer {tensor.name!r} is also a graph input declared {said}, where its data is {held}",
                )
            ]
    return []


def _inline_data(graph: onnx.GraphProto) -> list[Invalid]:
    """The first inline initializer whose stored data is not the value its dims and type declare
    (constants.readable): onnxruntime refuses to deserialize it, one byte too long included,
    which onnx's checker lets through."""
    for tensor in graph.initializer:
        if tensor.data_location != _EXTERNAL and not readable(tensor):
            name, count = dtype_name(tensor.data_type), math.prod(tensor.dims)
            need = (
                f"{(count * DTYPE_BITS[name] + 7) // 8} bytes"
                if name is not None and name != "string"
                else "a value of them"
            )
            stored = f"{len(tensor.raw_data)} bytes" if tensor.raw_data else "data"
            what = f"its dims {list(tensor.dims)} and type {name or tensor.data_type}"
            return [Invalid(TENSOR_DATA, f"initializer {tensor.name!r} stores {stored} where {what} need {need}")]
    return []


# --- external data ---------------------------------------------------------------------------------

_DATA_TYPES = frozenset(onnx.TensorProto.DataType.values()) - {onnx.TensorProto.UNDEFINED}


def _external_types(tensors: list[onnx.TensorProto]) -> list[Invalid]:
    """The first external tensor of no ONNX type (UNDEFINED, or a code ONNX does not define): onnx's
    checker and onnxruntime refuse it, but the check never sees its type (the tensor stands aside
    as a graph input, which may be of any type, or is left out: its size is unknown)."""
    for tensor in tensors:
        if tensor.data_type not in _DATA_TYPES:
            what = "UNDEFINED" if tensor.data_type == onnx.TensorProto.UNDEFINED else "no ONNX type"
            said = f"tensor {tensor.name!r} is stored externally with data_type {tensor.data_type} ({what})"
            return [Invalid(TENSOR_DATA, said)]
    return []


def _external_data(tensors: list[onnx.TensorProto], folder: Path | None) -> list[Invalid]:
    """Each external location, checked as `verify` would follow it (files.locate: a stat, never
    opened), once per location; and no external tensor's bytes also inline. One finding per problem."""
    found: dict[str, Invalid] = {}
    located: set[str] = set()
    for tensor in tensors:
        try:
            if _holds_data(tensor):
                raise ExternalDataError(f"tensor {tensor.name!r} is stored externally and also holds data in the file")
            entries = files.entries_of(tensor)
            _check_length(tensor, entries.get("length"))
            location = entries.get("location", "")
            if location in located:
                continue
            located.add(location)
            if folder is not None:
                files.locate(tensor, folder)
            elif not location:  # an in-memory model's: nowhere to place it, but it needs one
                raise ExternalDataError(f"external data of tensor {tensor.name!r}: no location")
        except ExternalDataError as exc:
            key = str(exc).split(": ", 1)[-1]
            found.setdefault(key, Invalid(EXTERNAL_DATA, f"{one_line(str(exc))}; the model cannot be loaded safely"))
    return list(found.values())


def _check_length(tensor: onnx.TensorProto, length: str | None) -> None:
    """A `length` (its external_data entry) that is not the tensor's size (its dims and type):
    onnxruntime refuses it, whether or not the file is there."""
    if length is None:
        return
    size = _bytes(tensor)
    if size is not None and length != str(size):
        raise ExternalDataError(
            f"external data of tensor {tensor.name!r}: length {length[:40]!r} is not its size, {size} bytes"
        )


# --- onnx's checker, on the model as loaded or on a skeleton -----------------------------------------


def _checker(model: onnx.ModelProto, nodes: list[Node], external: list[onnx.TensorProto],
             elsewhere: bool, inference: bool) -> str | None:  # fmt: skip
    """onnx's full check of the model (`external`: its external tensors) or of its skeleton: its
    first problem, in one line; None when it passes (or cannot be run: a crash, a skeleton too
    large). `elsewhere`: whether external tensors lie outside the main graph's initializers. A
    model checked as loaded whose problem needs the skeleton's rework (a sort, a declared shape
    dropped) is checked again on the skeleton: a rare path, paid only there."""
    try:
        if not elsewhere and _as_loaded(model, external):
            restore = _stand_aside(model, nodes, external)
            try:
                problem = _full_check(model, nodes, inference)
            finally:
                restore()
            if not problem or not any(rework in problem for rework in _REWORKED):
                return None if problem and _SHAPELESS_INPUT in problem else problem
    except PassCrashed as crash:
        log.debug("%s", crash)
        return None
    skeleton = _skeleton(model, nodes, elsewhere)
    if skeleton is None:
        return None
    try:
        check = lambda: _full_check(skeleton, read_fresh(skeleton.graph), inference)  # noqa: E731
        problem = check()
        if problem and "topologically sorted" in problem:  # onnxruntime sorts the graph: check it sorted
            _sort(skeleton.graph)
            problem = check()
        if problem and _SHAPELESS_INPUT in problem:  # onnx requires a main-graph input's shape; onnxruntime does not
            return None
        if problem and "existing shape differ" in problem:  # onnxruntime keeps the shape it infers over a declared one
            for value in skeleton.graph.value_info:
                if value.type.HasField("tensor_type"):
                    value.type.tensor_type.ClearField("shape")
            problem = check()
    except PassCrashed as crash:
        log.debug("%s", crash)
        return None
    return problem


_SHAPELESS_INPUT = "Field 'shape' of 'type' is required but missing"
_REWORKED = ("topologically sorted", "existing shape differ")  # problems the skeleton is reworked for and checked again


def _as_loaded(model: onnx.ModelProto, external: list[onnx.TensorProto]) -> bool:
    """Whether checking the model itself, its `external` initializers stood aside, finds what
    checking its skeleton finds: every output has a type and shape (the skeleton drops the others);
    no duplicate key in metadata_props (the one field the skeleton leaves out that onnx's checker
    reads; onnxruntime loads it); and where there are external initializers, IR 4 or later (an
    initializer need not be a graph input) and each one the checker passes as it stands aside:
    one location, in UTF-8 (protobuf gives bytes that cannot be set back), a known type, no negative dim, no data in the file (the external-data pass
    flags those), and its name not already a graph input's (which the skeleton keeps, typed as declared)."""
    keys = [entry.key for entry in model.metadata_props]
    if len(set(keys)) != len(keys) or not all(_shaped(value) for value in model.graph.output):
        return False
    if not external:
        return True
    declared = {value.name for value in model.graph.input}
    return model.ir_version >= 4 and all(
        [type(entry.value) for entry in tensor.external_data if entry.key == "location"] == [str]
        and DTYPE_BITS.get(dtype_name(tensor.data_type) or "") and min(tensor.dims, default=0) >= 0 and tensor.name not in declared and not _holds_data(tensor)
        for tensor in external
    )  # fmt: skip


def _holds_data(tensor: onnx.TensorProto) -> bool:
    return bool(tensor.raw_data or tensor.float_data or tensor.int32_data or tensor.int64_data or tensor.string_data
                or tensor.double_data or tensor.uint64_data)  # fmt: skip


_STOOD_ASIDE = "#onnx-roofline: not read"  # a location onnx's checker does not follow (its in-memory mark, "#")


def _stand_aside(model: onnx.ModelProto, nodes: list[Node], external: list[onnx.TensorProto]):
    """The model made, in place, what the skeleton would hold: each `external` initializer (all in
    the main graph's, _as_loaded) renamed out of the way with a location the checker does not
    follow, and a graph input of its name, type and dims in its place; the ops onnxruntime runs and
    ONNX's checker refuses moved (_tolerate). Returns what puts the model back as it was loaded."""
    inputs = len(model.graph.input)
    add_input = model.graph.input.add
    aside = []
    for index, tensor in enumerate(external):
        location = next(entry for entry in tensor.external_data if entry.key == "location")
        aside.append((tensor, tensor.name, location, location.value))
        declared = add_input(name=tensor.name).type.tensor_type  # make_tensor_value_info's, built in place
        declared.elem_type = tensor.data_type
        declared.shape.SetInParent()  # a scalar's shape is there, with no dims
        for dim in tensor.dims:
            declared.shape.dim.add(dim_value=dim)
        tensor.name, location.value = f"{_STOOD_ASIDE} {index}", _STOOD_ASIDE
    moved = _tolerate(model, nodes, _bodies(model, nodes, model.graph.node))

    def restore() -> None:
        _restore(model, moved)
        for tensor, name, location, value in aside:
            tensor.name, location.value = name, value
        del model.graph.input[inputs:]

    return restore


def _shaped(value: onnx.ValueInfoProto) -> bool:
    kind = value.type.WhichOneof("value")
    return kind is not None and (kind != "tensor_type" or value.type.tensor_type.HasField("shape"))


def _full_check(model: onnx.ModelProto, nodes: list[Node], inference: bool) -> str | None:
    """onnx's full check of the model as it stands, its first problem in one line: the checker,
    then (`inference`) ONNX's strict type and shape inference — of the whole model up to
    PIECE_NODES main-graph nodes, as `check_model(full_check=True)` runs it, and past that a piece
    at a time (pieces.py: the whole pass holds about 1.25 KiB a node, the peak of a million-node
    analysis)."""
    whole = len(nodes) <= pieces.PIECE_NODES
    serialized = model.SerializeToString()
    return isolated("ONNX's checker", _check, serialized, inference and whole, risky=crash_prone(model)) or (
        None if whole or not inference else _strict_in_pieces(model, nodes)
    )


def _check(serialized: bytes, full: bool) -> str | None:
    try:
        onnx.checker.check_model(serialized, full_check=full)
    except _CHECK_ERRORS as exc:
        return _one_line(exc)
    return None


def _strict_in_pieces(model: onnx.ModelProto, nodes: list[Node]) -> str | None:
    try:
        pieces.inferred_types_in_pieces(model, nodes, pieces.PIECE_NODES, None, CHECKED)
    except _CHECK_ERRORS as exc:
        return _one_line(exc)
    return None


_CHECK_ERRORS = (onnx.checker.ValidationError, onnx.shape_inference.InferenceError, ValueError, RuntimeError)


def _one_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = "; ".join(line.removeprefix("==> Context: ") for line in lines) or type(exc).__name__
    return one_line(text if len(text) <= 400 else text[:399] + "…")


def _skeleton(model: onnx.ModelProto, nodes: list[Node], elsewhere: bool) -> onnx.ModelProto | None:
    """The model without external tensors (see the module's docstring); None past SKELETON_BYTES."""
    skeleton = onnx.ModelProto(ir_version=model.ir_version, producer_name=model.producer_name)
    skeleton.opset_import.extend(model.opset_import)
    skeleton.functions.extend(model.functions)
    graph, source = skeleton.graph, model.graph
    graph.name = source.name
    for field in ("input", "value_info", "node", "sparse_initializer"):
        getattr(graph, field).extend(getattr(source, field))
    graph.output.extend(
        value for value in source.output if _shaped(value)
    )  # onnxruntime types an output without a type or shape
    initializers = list(source.initializer)
    graph.initializer.extend([tensor for tensor in initializers if tensor.data_location != _EXTERNAL])
    declared = {value.name for value in source.input}
    inputs: dict[str, onnx.ValueInfoProto] = {}
    for tensor in initializers:
        if tensor.data_location == _EXTERNAL and tensor.name not in declared:
            inputs.setdefault(
                tensor.name, onnx.helper.make_tensor_value_info(tensor.name, tensor.data_type, list(tensor.dims))
            )
    graph.input.extend(inputs.values())
    if elsewhere and not _zero_filled(skeleton):
        return None
    _tolerate(skeleton, nodes, _bodies(model, nodes, skeleton.graph.node))
    return skeleton


def _zero_filled(skeleton: onnx.ModelProto) -> bool:
    """The skeleton's other external tensors made zeros of their size, in place; False past SKELETON_BYTES."""
    left = SKELETON_BYTES
    for tensor in files.external_tensors(skeleton):
        size = _bytes(tensor)
        if size is None or size > left:
            log.debug(
                "external tensors beyond %d bytes outside the initializers: onnx's checker not run", SKELETON_BYTES
            )
            return False
        left -= size
        del tensor.external_data[:]
        tensor.data_location = onnx.TensorProto.DEFAULT
        tensor.raw_data = bytes(size)
    return True


def _bytes(tensor: onnx.TensorProto) -> int | None:
    bits = DTYPE_BITS.get(dtype_name(tensor.data_type) or "")
    if not bits:
        return None
    count = 1
    for dim in tensor.dims:
        count *= max(dim, 0)
    return (count * bits + 7) // 8


def _tolerate(model: onnx.ModelProto, nodes: list[Node],
              bodies: list[onnx.AttributeProto]) -> list[tuple[onnx.NodeProto, str | None]]:  # fmt: skip
    """Default-domain ops onnxruntime runs and ONNX has no current schema for, moved to a domain
    of their own (the checker skips its ops), in place: the main graph's from `nodes` (indexing
    `model`'s graph), bodies' (`bodies`: the main graph's graph attributes) and functions' by a
    walk. Returns each node moved with its domain before, for _restore."""
    opsets = {entry.domain or "": entry.version for entry in model.opset_import}
    version = opsets.get("", opsets.get("ai.onnx"))
    if version is None:
        return []
    suspects = of_kinds(nodes, lambda domain, op_type: not domain and _suspect(op_type, version))
    moved = [_domain_of(model.graph.node[node.position]) for node in suspects if _movable(node, version)]
    moved += [_domain_of(inner.proto) for inner in _inner_nodes(model, bodies) if _movable(inner, version)]
    for proto, _ in moved:
        proto.domain = _PRIVATE
    if moved:
        model.opset_import.append(onnx.helper.make_opsetid(_PRIVATE, 1))
        for function in model.functions:
            function.opset_import.append(onnx.helper.make_opsetid(_PRIVATE, 1))
    return moved


def _domain_of(proto: onnx.NodeProto) -> tuple[onnx.NodeProto, str | None]:
    return proto, proto.domain if proto.HasField("domain") else None  # None: not set, as it is put back


def _restore(model: onnx.ModelProto, moved: list[tuple[onnx.NodeProto, str | None]]) -> None:
    """Undo _tolerate: each node moved back to its domain, the private opset dropped."""
    if not moved:
        return
    for proto, domain in moved:
        if domain is None:
            proto.ClearField("domain")
        else:
            proto.domain = domain
    del model.opset_import[-1]
    for function in model.functions:
        del function.opset_import[-1]


def _bodies(model: onnx.ModelProto, nodes: list[Node], graph_nodes) -> list[onnx.AttributeProto]:
    """The graph attributes of `graph_nodes` (the main graph's, as stored in `model` or a skeleton),
    read only of the nodes whose op can hold a body (schemas.may_have_bodies): a large graph has few."""
    imported = opsets(model)
    holding = of_kinds(nodes, lambda domain, op_type: may_have_bodies(domain, op_type, imported.get(domain)))
    return [attr for node in holding for attr in graph_nodes[node.position].attribute if attr.type in _GRAPHS]


def _inner_nodes(model: onnx.ModelProto, bodies: list[onnx.AttributeProto]) -> Iterator[Node]:
    """Every node of a body (`bodies`: the main graph's graph attributes) or a model-local
    function, as read_nodes reads it (a body's nodes read once in an analysis: memo.py)."""
    pending = list(bodies)
    for function in model.functions:
        yield from read_fresh(function)
    while pending:
        attr = pending.pop()
        for body in [attr.g] if attr.type == onnx.AttributeProto.GRAPH else attr.graphs:
            for node in read_nodes(body):
                yield node
                if node.attributes:
                    pending.extend(a for a in node.attributes if a.type in _GRAPHS)


def _movable(node: Node, version: int) -> bool:
    """Whether _tolerate moves the node aside: a default-domain op _tolerated at `version` (its
    attributes asked only of an op that may be)."""
    return (
        not node.domain
        and _suspect(node.op_type, version)
        and _tolerated(node.op_type, version, tuple(attr.name for attr in node.attributes))
    )


@functools.cache
def _suspect(op_type: str, version: int) -> bool:
    """Whether a default-domain op of this name may be _tolerated: ONNX has no schema for it at
    `version`, or a deprecated one (a body's thousand nodes are asked, few ops occur)."""
    try:
        return onnx.defs.get_schema(op_type, version, "").deprecated
    except onnx.defs.SchemaError:
        return True


@functools.cache
def _tolerated(op_type: str, version: int, attributes: tuple[str, ...]) -> bool:
    """An op of the default domain that onnxruntime loads though ONNX's checker would not: one of
    ORT_DEFAULT_DOMAIN, or one ONNX deprecated (Upsample after opset 9, the experimental ops) whose
    attributes its schema declares — onnxruntime refuses one it does not (the campaign's mutant
    921759: a Conv's attributes on GroupNormalization-18, deprecated at opset 20)."""
    try:
        schema = onnx.defs.get_schema(op_type, version, "")
    except onnx.defs.SchemaError:
        return op_type in ORT_DEFAULT_DOMAIN
    return schema.deprecated and set(attributes) <= set(schema.attributes)


def _sort(graph: onnx.GraphProto) -> None:
    """The graph's nodes in a topological order (stable: stored order where it allows). A cycle
    cannot be here: validation refused it."""
    written = {name: index for index, node in enumerate(graph.node) for name in node.output if name}
    needs = [{written[name] for name in node.input if name in written} for node in graph.node]
    users: list[list[int]] = [[] for _ in graph.node]
    for index, producers in enumerate(needs):
        for producer in producers:
            users[producer].append(index)
    waiting = [len(producers) for producers in needs]
    ready = deque(index for index, count in enumerate(waiting) if not count)
    order = []
    while ready:
        index = ready.popleft()
        order.append(index)
        for user in users[index]:
            waiting[user] -= 1
            if not waiting[user]:
                ready.append(user)
    if len(order) != len(graph.node):
        return
    ordered = [graph.node[index] for index in order]
    copies = [onnx.NodeProto() for _ in ordered]
    for copy, node in zip(copies, ordered, strict=False):
        copy.CopyFrom(node)
    del graph.node[:]
    graph.node.extend(copies)
