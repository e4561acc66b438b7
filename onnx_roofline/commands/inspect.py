"""`onnx-roofline inspect MODEL`: what a model is before any analysis — inputs and outputs with
their shapes and symbolic dims, opsets, producer, op histogram, parameters and weight bytes, and
the external-data files it names (present or not).

No shape inference, no cost, no weight byte: the model is read as the analysis reads it (loader:
through `files`, external data never loaded), and an external-data file is only stat()ed, and
only where its location resolves inside the model's folder (files.locate); a location that may
not be followed is listed as refused, with the reason."""

from __future__ import annotations

import argparse
import math
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from onnx_roofline.commands.listing import COMMAND_HELP

if TYPE_CHECKING:  # imported where used: inspect starts without the analysis
    from onnx_roofline.model.conformance import Invalid

INSPECT_VERSION = 1
ATTACHMENT_WORDS = {  # attachment_state → what a user reads
    "paired": "the one written with this model",
    "absent": "missing (--annotate writes it beside the model)",
    "another run's": "NOT the one written with this model (another run's, or edited): annotate again",
    "unreadable": "not a regular file",
}


@dataclass(frozen=True)
class ValueSummary:
    """A graph input or output: name, dtype, shape (ints, symbol names, None for unknown)."""

    name: str
    dtype: str | None
    shape: tuple[int | str | None, ...] | None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "dtype": self.dtype, "shape": None if self.shape is None else list(self.shape)}

    def shape_text(self) -> str:
        if self.shape is None:
            return "[rank unknown]"
        return "[" + ", ".join("?" if d is None else str(d) for d in self.shape) + "]"


@dataclass(frozen=True)
class DataFile:
    """An external-data file the model names: the tensors in it and the bytes they declare."""

    location: str
    tensors: int
    declared_bytes: int  # the tensors' sizes from their dims and dtype (never read)
    status: str  # "present", "absent" or "refused"
    size: int | None = None  # the file's size where present (stat)
    reason: str | None = None  # why a location is refused

    def to_dict(self) -> dict[str, Any]:
        return {"location": self.location, "tensors": self.tensors, "declared_bytes": self.declared_bytes,
                "status": self.status, "present": self.status == "present", "size": self.size, "reason": self.reason}  # fmt: skip


@dataclass(frozen=True)
class Inspection:
    """What `inspect` reports about one model (`to_dict` is its `--format json`)."""

    path: str | None
    file_size: int | None
    ir_version: int
    producer: str
    producer_version: str
    domain: str
    model_version: int
    graph_name: str
    opsets: dict[str, int]
    inputs: tuple[ValueSummary, ...]
    outputs: tuple[ValueSummary, ...]
    dims: dict[str, tuple[str, ...]]  # symbolic dim → the inputs that use it
    default_dims: dict[
        str, int
    ]  # what `onnx-roofline MODEL` binds them to (by name or role: shapes/roles.py, solved_dims)
    node_count: int
    ops: dict[str, int]  # op histogram, "domain::Op" for a domain other than ai.onnx, most frequent first
    functions: int
    subgraph_nodes: int  # nodes inside If/Loop/Scan bodies (not in node_count)
    initializers: int
    parameters: int  # elements of every weight (model/weights.py): initializers and Constant-node tensors, bodies' too
    weight_bytes: int  # their bytes, by dtype width (inline and external alike, never read)
    weight_bytes_by_dtype: dict[str, int]
    external_data: tuple[DataFile, ...]
    metadata: dict[str, str] = field(default_factory=dict)  # the model's metadata_props
    solved_dims: dict[str, str] = field(default_factory=dict)  # defaults the graph fixes instead of the name's, and why
    dim_roles: dict[str, str] = field(
        default_factory=dict
    )  # each default's role where its name does not say it (`image height`)
    weight_tensors: int = 0  # the weights counted: initializers and Constant-node tensors, in every graph
    constant_weights: int = 0  # of them, Constant nodes' tensors
    invalid: tuple[
        str, ...
    ] = ()  # why a runtime would refuse the file (model/conformance.py), each "source: root cause"
    attachment: str | None = None  # an annotated model's Netron attachment: paired, absent, another run's, unreadable
    inference_failure: str | None = None  # where ONNX's inference fails at the default dims, and why

    def to_dict(self) -> dict[str, Any]:
        return {
            "inspect_version": INSPECT_VERSION,
            "model": {
                "path": self.path,
                "file_size": self.file_size,
                "ir_version": self.ir_version,
                "producer": self.producer,
                "producer_version": self.producer_version,
                "domain": self.domain,
                "model_version": self.model_version,
                "graph_name": self.graph_name,
                "metadata": self.metadata,
            },  # fmt: skip
            "opsets": self.opsets,
            "inputs": [v.to_dict() for v in self.inputs],
            "outputs": [v.to_dict() for v in self.outputs],
            "dims": {
                name: {
                    "inputs": list(uses),
                    "default": self.default_dims.get(name),
                    "solved": self.solved_dims.get(name),
                    "role": self.dim_roles.get(name),
                }
                for name, uses in self.dims.items()
            },
            "node_count": self.node_count,
            "subgraph_nodes": self.subgraph_nodes,
            "functions": self.functions,
            "ops": self.ops,
            "initializers": self.initializers,
            "weight_tensors": self.weight_tensors,
            "constant_weights": self.constant_weights,
            "parameters": self.parameters,
            "weight_bytes": self.weight_bytes,
            "weight_bytes_by_dtype": self.weight_bytes_by_dtype,
            "external_data": [f.to_dict() for f in self.external_data],
            "invalid": list(self.invalid),
            "attachment": self.attachment,
            "inference_failure": self.inference_failure,
        }


def inspect_model(model: str | os.PathLike) -> Inspection:
    """The Inspection of a model file (or ModelProto, which has no folder: its external data is
    listed as absent)."""
    import onnx

    from onnx_roofline.errors import ExternalDataError
    from onnx_roofline.model import files
    from onnx_roofline.model.conformance import conformance
    from onnx_roofline.model.loader import load_with_nodes
    from onnx_roofline.model.schemas import opsets
    from onnx_roofline.model.tensors import DTYPE_BITS, dtype_name
    from onnx_roofline.model.weights import CONSTANT
    from onnx_roofline.model.weights import weights as stored_weights
    from onnx_roofline.report.annotate import attachment_state
    from onnx_roofline.shapes.dims import symbolic_dims

    proto, nodes = load_with_nodes(model)
    in_memory = isinstance(model, onnx.ModelProto)
    metadata = {p.key: p.value for p in proto.metadata_props}
    invalid = tuple(str(flag) for flag in conformance(proto, nodes, None if in_memory else model))
    graph = proto.graph
    initialized = {t.name for t in graph.initializer}
    inputs = tuple(_value(v) for v in graph.input if v.name not in initialized)
    outputs = tuple(_value(v) for v in graph.output)
    dims = {name: tuple(uses) for name, uses in symbolic_dims(graph).items()}
    defaults, solved, roles, inference_failure, mixed = _defaults(proto, dims)
    invalid = invalid or tuple(str(flag) for flag in mixed)  # what the checker is blind to past a contrib op

    ops = Counter(f"{n.domain}::{n.op_type}" if n.domain not in ("", "ai.onnx") else n.op_type for n in graph.node)
    initializers = [*graph.initializer, *(s.values for s in graph.sparse_initializer)]
    weights = stored_weights(graph)  # the analysis' parameters: initializers and Constant-node tensors, bodies' too
    by_dtype: Counter[str] = Counter()
    for weight in weights:
        by_dtype[weight.dtype or "undefined"] += weight.nbytes

    external: dict[str, list[onnx.TensorProto]] = {}
    for tensor in files.external_tensors(proto):
        external.setdefault(files.location_of(tensor), []).append(tensor)
    folder = None if in_memory else files.model_folder(model)
    data_files = []
    for location, tensors in external.items():
        declared = sum((math.prod(t.dims) * DTYPE_BITS.get(dtype_name(t.data_type) or "", 0) + 7) // 8 for t in tensors)
        status, size, reason = "absent", None, None
        if folder is not None:
            try:
                ref = files.locate(tensors[0], folder)  # stat() only, inside the folder only
            except ExternalDataError as exc:
                status, reason = "refused", str(exc)
            else:
                if ref is not None:
                    status, size = "present", os.stat(ref.path).st_size
        data_files.append(DataFile(location, len(tensors), declared, status, size, reason))

    file_size = None if in_memory else os.stat(model).st_size
    return Inspection(
        path=None if in_memory else str(model),
        file_size=file_size,
        ir_version=proto.ir_version,
        producer=proto.producer_name,
        producer_version=proto.producer_version,
        domain=proto.domain,
        model_version=proto.model_version,
        graph_name=graph.name,
        opsets=dict(sorted(opsets(proto).items())),
        inputs=inputs,
        outputs=outputs,
        dims=dims,
        default_dims=defaults,
        solved_dims=solved,
        node_count=len(graph.node),
        ops=dict(sorted(ops.items(), key=lambda kv: (-kv[1], kv[0]))),
        functions=len(proto.functions),
        subgraph_nodes=_subgraph_nodes(graph),
        initializers=len(initializers),
        parameters=sum(weight.elements for weight in weights),
        weight_bytes=sum(by_dtype.values()),
        weight_bytes_by_dtype=dict(sorted(by_dtype.items(), key=lambda kv: -kv[1])),
        external_data=tuple(data_files),
        metadata=metadata,
        dim_roles=roles,
        weight_tensors=len(weights),
        constant_weights=sum(weight.kind == CONSTANT for weight in weights),
        invalid=invalid,
        attachment=None if in_memory else attachment_state(model, metadata),
        inference_failure=inference_failure,
    )


def _value(value) -> ValueSummary:
    from onnx_roofline.model.tensors import dtype_name

    if not value.type.HasField("tensor_type"):
        return ValueSummary(value.name, value.type.WhichOneof("value") or None, None)
    tensor_type = value.type.tensor_type
    shape = None
    if tensor_type.HasField("shape"):
        shape = tuple(d.dim_value if d.HasField("dim_value") else d.dim_param if d.HasField("dim_param") else None
                      for d in tensor_type.shape.dim)  # fmt: skip
    return ValueSummary(value.name, dtype_name(tensor_type.elem_type), shape)


def _defaults(
    proto, dims: dict[str, tuple[str, ...]]
) -> tuple[dict[str, int], dict[str, str], dict[str, str], str | None, tuple[Invalid, ...]]:
    """The dims `onnx-roofline MODEL` binds, those of them the graph fixes, with why, and each
    one's role where its name does not say it: the default by name or role (shapes/roles.py),
    unless a node cannot run at it (a head size named like a batch: genai's `kv_cache_dim`),
    which the analysis finds by binding and inferring as it does. A graph it refuses at its
    defaults keeps them as chosen: inspect describes any model. Last, the node where ONNX's own
    inference fails in that pass at defaults the graph runs, which `analyze` says as the root of
    its uncosted nodes: inspect says it too (a node fed a value of another type or rank, past a
    contrib op after which onnx's checker in model/conformance.py drops every inference error),
    and the node past such an op whose inputs of one type variable hold two types
    (conformance.mixed_input_types), as `analyze` finds them. Run with no dim too, for that."""
    from onnx_roofline.analysis import bind_and_infer
    from onnx_roofline.errors import RooflineError
    from onnx_roofline.model.conformance import mixed_input_types
    from onnx_roofline.model.nodes import read_nodes
    from onnx_roofline.shapes.dims import input_dim_names
    from onnx_roofline.shapes.roles import choose_defaults
    from onnx_roofline.shapes.sizing import Sizing

    metadata = {entry.key: entry.value for entry in proto.metadata_props}
    chosen = (
        choose_defaults(proto.graph, read_nodes(proto.graph), input_dim_names(proto.graph), list(dims), {}, metadata)
        if dims
        else {}
    )
    roles = {name: choice.said for name, choice in chosen.items() if choice.said}
    try:
        typed = bind_and_infer(
            proto, Sizing(default_dims=True), conform=False
        )  # the loaded model, not the file read again (checked already)
    except RooflineError:
        return {name: choice.size for name, choice in chosen.items()}, {}, roles, None, ()
    roles = {name: choice.said for name, choice in typed.roles.items() if choice.said}
    cause = typed.shapes.root_cause
    failure = (
        f"node {cause.name!r} ({cause.op_type}): {cause.reason}"
        if cause is not None and cause.reason.startswith("ONNX shape inference of") and not typed.implausible
        else None
    )  # not an op no rule types, nor a default the graph cannot run (IMPLAUSIBLE: the defaults' fault)
    return (
        {name: typed.dims.get(name, choice.size) for name, choice in chosen.items()},
        {dim: why for dim, (_, why) in typed.solved.items()},
        roles,
        failure,
        mixed_input_types(typed.proto, typed.nodes, typed.shapes.values),
    )


def _subgraph_nodes(graph) -> int:
    """Nodes in the bodies of control-flow ops, at any depth."""
    count, pending = 0, [graph]
    while pending:
        for node in pending.pop().node:
            for attr in node.attribute:
                bodies = [attr.g] if attr.HasField("g") else list(attr.graphs)
                count += sum(len(body.node) for body in bodies)
                pending.extend(bodies)
    return count


def render_text(info: Inspection) -> str:
    """The terminal view of an Inspection."""
    from onnx_roofline.report.units import si

    producer = " ".join(p for p in (info.producer, info.producer_version) if p) or "unknown"
    size = f"{si(info.file_size, 'B')} file, " if info.file_size is not None else ""
    lines = [
        f"model       {info.path or '<in-memory>'}  ({size}IR {info.ir_version}, producer {producer})",
        "opsets      " + (", ".join(f"{d or 'ai.onnx'} {v}" for d, v in info.opsets.items()) or "none"),
        f"graph       {info.graph_name or '(unnamed)'}: {_count(info.node_count, 'node')}"
        + (f" (+{info.subgraph_nodes} in control-flow bodies)" if info.subgraph_nodes else "")
        + (f", {info.functions} local functions" if info.functions else ""),
    ]
    groups = {title: _alike(values) for title, values in (("inputs", info.inputs), ("outputs", info.outputs))}
    width = min(max((len(label) for rows in groups.values() for label, _ in rows), default=0), 40)
    for title, rows in groups.items():
        for index, (label, value) in enumerate(rows):
            lines.append(
                f"{title if index == 0 else '':<11} {label:<{width}}  {value.dtype or '?':<8} {value.shape_text()}"
            )
        if not rows:
            lines.append(f"{title:<11} none")
    if info.dims:
        listed = ", ".join(f"{name} ({len(uses)} input{'s' if len(uses) > 1 else ''}; default {info.default_dims[name]}"
                           f"{': ' + (info.solved_dims.get(name) or info.dim_roles[name]) if name in info.solved_dims or name in info.dim_roles else ''})"
                           for name, uses in info.dims.items())  # fmt: skip
        lines.append(f"dims        {listed}")
    else:
        lines.append("dims        none symbolic: every input shape is fixed")
    dtypes = ", ".join(f"{d} {si(b, 'B')}" for d, b in info.weight_bytes_by_dtype.items())
    lines.append(
        f"parameters  {si(info.parameters, '').strip()} in {_weights_text(info)}, {si(info.weight_bytes, 'B')}"
        + (f" ({dtypes})" if dtypes else "")
    )
    if info.external_data:
        for index, data in enumerate(info.external_data):
            state = {"present": f"present ({si(data.size, 'B')})", "absent": "absent (the analysis does not need it)",
                     "refused": f"refused: {data.reason}"}[data.status]  # fmt: skip
            lines.append(
                f"{'external' if index == 0 else '':<11} {data.location}: {_count(data.tensors, 'tensor')}, {si(data.declared_bytes, 'B')} declared; {state}"
            )
    else:
        lines.append("external    none: every weight is inline")
    ops = ", ".join(f"{op} {count}" for op, count in info.ops.items())
    lines.append(f"ops         {_count(len(info.ops), 'kind')}: {ops}")
    if info.metadata:
        lines.append("metadata    " + ", ".join(sorted(info.metadata)))
    if info.attachment is not None:
        from onnx_roofline.report.annotate import sidecar_path

        lines.append(
            f"attachment  {sidecar_path(info.path).name if info.path else 'Netron attachment'}: {ATTACHMENT_WORDS[info.attachment]}"
        )
    if info.path is not None:
        import shlex

        flags = [part for name, size in info.default_dims.items() for part in ("--dim", f"{name}={size}")]
        lines.append(
            f"analyze     {shlex.join(['onnx-roofline', info.path, '--hw', 'h100', *flags])}"
        )  # quoted: a dim named `?` is a glob
    if info.inference_failure:
        lines.append(f"shapes      stop at {info.inference_failure}")
    lines += [f"INVALID     {flag}" for flag in info.invalid]  # a runtime would refuse the file (model/conformance.py)
    return "\n".join(lines) + "\n"


def _weights_text(info: Inspection) -> str:
    """`3 initializers`; `28 weights (28 Constant nodes)`; `12 weights (10 initializers, 2 Constant nodes)`."""
    from_initializers = info.weight_tensors - info.constant_weights
    if not info.constant_weights and from_initializers == info.initializers:
        return _count(info.initializers, "initializer")
    parts = [_count(from_initializers, "initializer") if from_initializers == info.initializers
             else f"{from_initializers} of {_count(info.initializers, 'initializer')}"] if from_initializers else []  # fmt: skip
    parts += [_count(info.constant_weights, "Constant node")] if info.constant_weights else []
    return f"{_count(info.weight_tensors, 'weight')} ({', '.join(parts) or 'none'})"


def _count(n: int, what: str) -> str:
    return f"{n:,} {what}{'' if n == 1 else 's'}"


def _alike(values: tuple[ValueSummary, ...]) -> list[tuple[str, ValueSummary]]:
    """(label, value) rows, where values whose names differ only in their numbers and that share
    dtype and shape are one row (`past.#.key ×12`): a 12-layer cache is 2 rows, not 24."""
    import re

    groups: dict[tuple, list[ValueSummary]] = {}
    for value in values:
        groups.setdefault((re.sub(r"[0-9]+", "#", value.name), value.dtype, value.shape), []).append(value)
    rows: list[tuple[str, ValueSummary]] = []
    for (pattern, _, _), members in groups.items():
        rows += [(f"{pattern} ×{len(members)}", members[0])] if len(members) > 2 else [(m.name, m) for m in members]
    order = {id(v): i for i, v in enumerate(values)}
    return sorted(rows, key=lambda row: order[id(row[1])])


def render_json(info: Inspection) -> str:
    import json

    return json.dumps(info.to_dict(), indent=2) + "\n"


def add_command(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("inspect", help=COMMAND_HELP["inspect"])
    parser.add_argument(
        "model", help="path to an .onnx file (external weight data need not be present, and is never read)"
    )
    parser.add_argument("--format", choices=("table", "json"), default="table", help="output format (default: table)")
    parser.add_argument(
        "-o", "--output", metavar="FILE", help="write the output to FILE (atomically) instead of stdout"
    )
    parser.set_defaults(run=run_inspect)


def run_inspect(options: argparse.Namespace) -> int:
    import sys

    from onnx_roofline.errors import EXIT_OK, one_line
    from onnx_roofline.report.output import write_text

    info = inspect_model(options.model)
    for flag in info.invalid:
        print(f"onnx-roofline: warning: INVALID: {one_line(flag)}", file=sys.stderr)
    if info.inference_failure:
        print(f"onnx-roofline: warning: at the default dims, shape inference stops at {one_line(info.inference_failure)}"
              " (`onnx-roofline MODEL` leaves it and the nodes after it uncosted)", file=sys.stderr)  # fmt: skip
    text = render_json(info) if options.format == "json" else render_text(info)
    data = [
        Path(options.model).parent / f.location for f in info.external_data if f.location and "\0" not in f.location
    ]
    write_text(text, options.output, protect=[Path(options.model), *data])
    return EXIT_OK
