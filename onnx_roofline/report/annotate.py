"""The annotated ONNX: the analyzed model with its roofline figures inside, for Netron and scripts.

Every node gets `rl.*` metadata_props (machine-readable; keys of at most 12 characters, which
Netron's sidebar shows whole) and a one-line summary first in
its doc_string (what Netron shows as "description"); the model gets totals in its metadata_props;
every edge gets the shape the analysis used in value_info. Beside it goes a Netron attachment
(`*.netron.json`): opened in Netron after the model, it adds a "Metrics" section per node.

The annotated model is the model *at the analyzed dims*: graph inputs, outputs and value_info carry
the bound shapes, so onnxruntime runs it at those dims with identical outputs and rejects others
(concrete value_info over symbolic inputs would let a runtime fold `Shape` nodes to stale values).
Weights are never read: external data references are kept when the output's folder can still reach
the data file, else the data file is hard-linked (copied where a link is impossible) beside the output.
A reference is followed only when it names a regular file inside the model's folder (`files.locate`):
anything else (absolute, `..`, a symlink leading out, a FIFO, /dev/zero) refuses the whole annotation.
"""

from __future__ import annotations

import dataclasses
import json
import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import onnx
from onnx import TensorProto

from onnx_roofline.errors import RooflineError
from onnx_roofline.model import files
from onnx_roofline.model.inferred import declared_types, inferred_types
from onnx_roofline.model.loader import load_model
from onnx_roofline.model.tensors import TensorInfo, dtype_name
from onnx_roofline.model.text import as_text
from onnx_roofline.report.breakdown import module_path
from onnx_roofline.report.costed import is_ok
from onnx_roofline.report.findings import FOLDABLE_WHY
from onnx_roofline.report.model import NodeResult, Report
from onnx_roofline.report.output import Unit
from onnx_roofline.report.units import duration, number, percent, si
from onnx_roofline.shapes.dims import bind
from onnx_roofline.version import __version__

ATTACHMENT_KEY = (
    "attachment"  # under NAMESPACE: the checksum of the attachment written with the model (attachment_checksum)
)
MAX_ATTACHMENT_BYTES = 1 << 30  # an attachment is a few bytes per node: anything larger is not ours
NAMESPACE = "rl."  # short: Netron's sidebar cuts a key after ~16 characters (`onnx_roofline.byt…` was three keys)
LEGACY_NAMESPACES = ("onnx_roofline.",)  # earlier releases' keys, replaced when a model is annotated again
AT_MOST = "at most: its sizes rest on a bound the graph fixes for a data-dependent size"
SUMMARY_PREFIX = "onnx-roofline"  # the doc_string line we own (replaced when a model is annotated again)
_ELEM_TYPES = {dtype_name(code): code for code in TensorProto.DataType.values() if dtype_name(code)}


@dataclass(frozen=True)
class Annotated:
    model: Path
    sidecar: Path
    data_files: tuple[str, ...]  # the external data locations the output references
    data_action: str  # "kept", "linked", "copied", "absent" (the input's data file is not there), "none"


def sidecar_path(destination: str | os.PathLike) -> Path:
    """`out.onnx` → `out.netron.json`."""
    path = Path(destination)
    return path.with_name(path.stem + ".netron.json")


def annotate(
    report: Report, destination: str | os.PathLike, source: str | os.PathLike | onnx.ModelProto | None = None
) -> Annotated:
    """Write the annotated copy of the analyzed model (`source`, by default the report's path)."""
    source = source if source is not None else report.model.path
    if source is None:
        raise RooflineError("annotate needs the model: pass source= for a report of an in-memory model")
    proto = load_model(source)
    main = [result for result in report.nodes if not result.scope]
    inner = [result for result in report.nodes if result.scope]
    named = dict(graph_nodes(proto.graph)) if inner else {}
    targets = [*zip(proto.graph.node, main, strict=False), *((named.get(result.name), result) for result in inner)]
    if len(proto.graph.node) != len(main) or any(
        node is None or node.op_type != result.op_type for node, result in targets
    ):
        raise RooflineError("the report does not belong to this model (its nodes differ)")
    destination = Path(destination)
    types = _declared_types(proto)
    bind(proto, report.model.dims)
    total = report.totals.time_s
    for node, result in targets:  # body nodes too, where they live
        _annotate_node(node, result, report.hardware.key, total)
    attachment = _attachment_text(netron_attachment(report)).encode()
    _annotate_model(proto, report, attachment)
    _write_shapes(proto.graph, report, types)
    in_memory = isinstance(source, onnx.ModelProto)
    protect = () if in_memory else files.referenced_files(source, proto)  # the input's data files are inputs too
    plan = _plan_external_data(proto, None if in_memory else files.model_folder(source), destination)
    sidecar = sidecar_path(destination)
    with Unit(protect) as unit:  # the data files, the attachment and the model: renamed into place once all are written
        actions = {plan.kept or "none"} | {unit.link(ref, dst) for ref, dst in plan.links}
        unit.write(attachment, sidecar)
        unit.write(proto.SerializeToString(), destination)  # refuses to overwrite the input
    action = next(a for a in ("absent", "copied", "linked", "kept", "none") if a in actions)
    return Annotated(destination, sidecar, plan.locations, action)


def graph_nodes(graph: onnx.GraphProto, scope: str = "") -> Iterator[tuple[str, onnx.NodeProto]]:
    """Every node of the graph and of its bodies, by the name its report row has: its own (or
    `OpType_index`), under the scope of the control-flow node and body that hold it."""
    for index, node in enumerate(graph.node):
        name = f"{scope}/{node.name or f'{node.op_type}_{index}'}" if scope else node.name or f"{node.op_type}_{index}"
        yield name, node
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH:
                yield from graph_nodes(attribute.g, f"{name}/{attribute.name}")


# --- what goes in ---------------------------------------------------------------------------------


def node_figures(result: NodeResult, model_time: float) -> dict[str, str]:
    """The node's metadata_props (without the namespace): exact values, as strings."""
    figures = {"status": result.status, "module": module_path(result)}
    if not is_ok(result):
        return {**figures, "reason": result.reason or ""}
    cost, place = result.cost, result.placement
    return {
        **figures,
        **({"at_most": "true"} if result.at_most else {}),
        **({"foldable": "true"} if result.constant_foldable else {}),
        "flops": str(cost.flops),
        "transc": str(cost.transcendentals),
        "read": str(cost.bytes_read),
        "written": str(cost.bytes_written),
        "bytes": str(cost.bytes),
        "intensity": _float(place.intensity),
        "ridge": _float(place.ridge),
        "bound": place.bound,
        "time_s": _float(place.time_s),
        "share": _float(place.time_s / model_time if model_time else None),
        "unit": result.unit or "",
        "dtype": result.dtype or "",
    }


def node_summary(result: NodeResult, hardware: str, model_time: float) -> str:
    """One line for people: `onnx-roofline [h100]: memory-bound · 12.58 MFLOP · 62.91 MB · …`."""
    if not is_ok(result):
        return f"{SUMMARY_PREFIX} [{hardware}]: not costed ({result.status}: {result.reason})"
    cost, place = result.cost, result.placement
    share = place.time_s / model_time if model_time else None
    return (
        f"{SUMMARY_PREFIX} [{hardware}]: {place.bound}-bound · {si(cost.flops, 'FLOP')} · {si(cost.bytes, 'B')} · "
        f"{number(place.intensity)} FLOP/B (ridge {number(place.ridge)}) · ≥ {duration(place.time_s)} "
        f"({percent(share)} of model) · {result.unit}/{result.dtype}"
        + (f" · {AT_MOST}" if result.at_most else "")
        + (f" · {FOLDABLE_WHY}" if result.constant_foldable else "")
    )


def model_figures(report: Report) -> dict[str, str]:
    totals = report.totals
    dims = ",".join(f"{k}={v}" for k, v in sorted(report.model.dims.items()))
    return {
        "version": __version__,
        "hardware": report.hardware.key,
        "dims": dims,
        "precision": report.model.precision or "",
        "flops": str(totals.flops),
        "bytes": str(totals.bytes),
        "time_s": _float(totals.time_s),
        "mem_share": _float(totals.memory_bound_time_share),
        "uncosted": str(totals.uncosted_nodes),
        "summary": (
            f"{report.hardware.name}, {dims or 'no dims'}: {si(totals.flops, 'FLOP')}, {si(totals.bytes, 'B')}, "
            f"≥ {duration(totals.time_s)}, {percent(totals.memory_bound_time_share)} of time memory-bound"
            + (f", {totals.uncosted_nodes} nodes not costed" if totals.uncosted_nodes else "")
        ),
    }


def netron_attachment(report: Report) -> dict:
    """Netron's attachment format (view.js `metadata.Attachment`): entries keyed `kind::target`,
    where a node's target is its name, the model's is ""."""
    total = report.totals.time_s
    metrics = [_metric("model", "", name, value) for name, value in _model_metrics(report)]
    for result in report.nodes:
        metrics += [
            _metric("node", result.own_name, name, value) for name, value in _node_metrics(result, total)
        ]  # Netron names a body node by its own name
    return {"signature": "netron:attachment", "metadata": [], "metrics": metrics}


def _attachment_text(attachment: dict) -> str:
    """JSON with one metric per line: compact, and a re-annotation diffs line by line."""
    metrics = ",\n".join(json.dumps(m, ensure_ascii=False) for m in attachment["metrics"])
    head = json.dumps({k: v for k, v in attachment.items() if k != "metrics"}, ensure_ascii=False)[:-1]
    return f'{head}, "metrics": [\n{metrics}\n]}}\n'


def _node_metrics(result: NodeResult, model_time: float) -> list[tuple[str, str]]:
    if not is_ok(result):
        return [("status", f"{result.status}: {result.reason}")]
    cost, place = result.cost, result.placement
    return [
        ("bound", place.bound),
        ("time (lower bound)", duration(place.time_s)),
        ("share of model time", percent(place.time_s / model_time if model_time else None)),
        ("flops", si(cost.flops, "FLOP")),
        ("bytes", f"{si(cost.bytes, 'B')} ({si(cost.bytes_read, 'B')} read, {si(cost.bytes_written, 'B')} written)"),
        ("intensity", f"{number(place.intensity)} FLOP/B"),
        ("ridge", f"{number(place.ridge)} FLOP/B"),
        ("unit", f"{result.unit}/{result.dtype}"),
        *([("sizes", AT_MOST)] if result.at_most else []),
        *([("foldable", FOLDABLE_WHY)] if result.constant_foldable else []),
    ]


def _model_metrics(report: Report) -> list[tuple[str, str]]:
    totals = report.totals
    return [
        ("hardware", report.hardware.name),
        ("time (lower bound)", duration(totals.time_s)),
        ("flops", si(totals.flops, "FLOP")),
        ("bytes", si(totals.bytes, "B")),
        ("memory-bound time share", percent(totals.memory_bound_time_share)),
    ]


def _metric(kind: str, target: str, name: str, value: str) -> dict[str, str]:
    return {"kind": kind, "target": target, "name": name, "value": value, "type": "attribute"}


def _float(value: float | None) -> str:
    return "" if value is None else f"{value:.6g}"


# --- into the proto -------------------------------------------------------------------------------


def _annotate_node(node: onnx.NodeProto, result: NodeResult, hardware: str, model_time: float) -> None:
    if not node.name:
        node.name = result.name  # Netron's attachment finds nodes by name
    _set_props(node.metadata_props, node_figures(result, model_time))
    kept = [
        line for line in as_text(node.doc_string).split("\n") if line and not line.startswith(SUMMARY_PREFIX + " [")
    ]
    node.doc_string = "\n".join([node_summary(result, hardware, model_time), *kept])


def _annotate_model(proto: onnx.ModelProto, report: Report, attachment: bytes) -> None:
    """The model's figures, and the checksum of the attachment written beside it: the two files are
    renamed into place one after the other, so a reader (`inspect`) can tell a model paired with
    another run's attachment (attachment_state)."""
    _set_props(
        proto.metadata_props,
        {**model_figures(report), ATTACHMENT_KEY: attachment_checksum(zlib.crc32(attachment), len(attachment))},
    )


def attachment_checksum(crc: int, size: int) -> str:
    """`crc32:HEX, N bytes`: enough to tell one run's attachment from another's (a pairing check,
    not a defence: CRC-32, whose zlib loads no OpenSSL configuration, as hashlib's import does)."""
    return f"crc32:{crc:08x}, {size} bytes"


def attachment_state(model_path: str | os.PathLike, metadata: dict[str, str]) -> str | None:
    """Whether an annotated model's Netron attachment is the one written with it: "paired", "absent"
    "another run's" (its checksum differs) or "unreadable" (not a regular file); None for a model
    this tool did not annotate. Only the file named after the model is read, as a regular file,
    never past its size cap."""
    expected = metadata.get(NAMESPACE + ATTACHMENT_KEY)
    if expected is None:
        return None
    sidecar = sidecar_path(model_path)
    if not sidecar.exists():
        return "absent"
    crc, size = 0, 0
    try:
        with files.open_regular(sidecar, "Netron attachment", follow=False) as (fd, info):
            if info.st_size > MAX_ATTACHMENT_BYTES:
                return "another run's"
            while chunk := os.read(fd, 1 << 20):
                crc, size = zlib.crc32(chunk, crc), size + len(chunk)
    except RooflineError:
        return "unreadable"
    return "paired" if attachment_checksum(crc, size) == expected else "another run's"


def _set_props(props, figures: dict[str, str]) -> None:
    """Ours first (Netron lists them in order), then everyone else's (dynamo's name_scopes, ...);
    a model annotated again has its old figures replaced, not repeated."""
    ours = (NAMESPACE, *LEGACY_NAMESPACES)
    kept = [(as_text(p.key), as_text(p.value)) for p in props if not as_text(p.key).startswith(ours)]
    del props[:]
    for key, value in [*((NAMESPACE + k, v) for k, v in figures.items()), *kept]:
        props.add(key=key, value=value)


def _declared_types(proto: onnx.ModelProto) -> dict[str, int]:
    """Each value's real element type (the report's dtypes may be a --dtype override): as ONNX's
    inference declares them (run where a crash of it cannot end the process: inferred.py), or
    where it fails or crashes, as the model does."""
    graph = proto.graph
    try:
        declared = inferred_types(proto)
    except Exception:  # what onnx raises (InferenceError, ValueError, RuntimeError), or PassCrashed
        declared = declared_types(graph)
    types = {t.name: t.data_type for t in graph.initializer}
    elements: dict[bytes, int] = {}  # by serialized TypeProto: a graph's values share few
    for value in declared:
        element = elements.get(value.type)
        if element is None:
            read = onnx.TypeProto.FromString(value.type)
            element = elements[value.type] = read.tensor_type.elem_type if read.HasField("tensor_type") else 0
        if element:
            types[value.name] = element
    return types


def _write_shapes(graph: onnx.GraphProto, report: Report, types: dict[str, int]) -> None:
    """Graph inputs/outputs and value_info take the shapes the analysis used, except a size that is
    only a bound (NodeResult.at_most): a run that keeps fewer rows must still match the declaration."""
    infos: dict[str, TensorInfo] = {}
    bounded = {info.name for result in report.nodes if result.at_most for info in result.outputs if info is not None}
    for result in report.nodes:
        for info in (*result.inputs, *result.outputs):
            if info is not None and info.shape is not None and info.name not in bounded:
                infos.setdefault(info.name, info)
    own = report.model.precision is None  # then the report's dtypes are the model's own

    def typed(name: str) -> onnx.ValueInfoProto | None:
        """The value's type as the analysis has it: a tensor's, a sequence's (its elements' shape),
        a map's, of the model's own element type."""
        info = infos.get(name)
        elem = types.get(name) or (_ELEM_TYPES.get(info.dtype) if own and info is not None else None)
        if info is None or not elem:
            return None
        return dataclasses.replace(info, dtype=dtype_name(elem)).value_info()

    def write(value: onnx.ValueInfoProto, replacement: onnx.ValueInfoProto) -> None:
        """A declaration of another kind (a tensor declared where a sequence flows) is left as it is."""
        declared = value.type.WhichOneof("value")
        if declared is None or declared == replacement.type.WhichOneof("value"):
            value.type.CopyFrom(replacement.type)

    for value in (*graph.input, *graph.output):
        replacement = typed(value.name)
        if replacement is not None:
            write(value, replacement)
    skip = {v.name for v in (*graph.input, *graph.output)} | {t.name for t in graph.initializer}
    declared = {v.name: v for v in graph.value_info}
    for name in infos:
        replacement = None if name in skip else typed(name)
        if replacement is None:
            continue
        if name in declared:
            write(declared[name], replacement)
        else:
            graph.value_info.append(replacement)


# --- the weights ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _DataPlan:
    locations: tuple[str, ...]  # what the output references
    links: tuple[tuple[files.DataRef, Path], ...]  # (data file, its place beside the output)
    kept: str | None  # "kept" or "absent" when some reference stays as it resolves (or not) already


def _plan_external_data(proto: onnx.ModelProto, source_dir: Path | None, destination: Path) -> _DataPlan:
    """Rewrite external data locations to resolve from the output's folder. onnxruntime refuses
    locations that are absolute or leave the model's folder, so a data file outside the output's
    folder is to be linked (or copied) beside it; a data file that is absent stays referenced as is.
    Every reference is checked (`files.locate`) before anything is written."""
    tensors = list(files.external_tensors(proto))
    if not tensors or source_dir is None:
        locations = sorted({files.location_of(t) for t in tensors})
        return _DataPlan(tuple(locations), (), "kept" if locations else None)
    refs = [(t, files.locate(t, source_dir)) for t in tensors]  # raises for what may not be followed
    locations = sorted({files.location_of(t) for t in tensors})
    out_dir = destination.parent.resolve()
    moved: dict[str, str] = {}
    links: list[tuple[files.DataRef, Path]] = []
    kept = None
    for tensor, ref in refs:
        location = files.location_of(tensor)
        if location in moved:
            continue
        original = (source_dir / location).resolve() if ref is None else ref.path
        if original.is_relative_to(out_dir):
            moved[location], kept = original.relative_to(out_dir).as_posix(), kept or "kept"
        elif ref is None:
            moved[location], kept = location, "absent"
        else:
            name = f"{destination.name}.data" if len(locations) == 1 else f"{destination.name}.{Path(location).name}"
            moved[location] = name
            links.append((ref, destination.parent / name))
    for tensor in tensors:
        _set_location(tensor, moved[files.location_of(tensor)])
    return _DataPlan(tuple(sorted(set(moved.values()))), tuple(links), kept)


def _set_location(tensor: TensorProto, location: str) -> None:
    for entry in tensor.external_data:
        if entry.key == "location":
            entry.value = location
