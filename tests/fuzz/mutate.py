"""A seeded, structure-aware ONNX mutator (issue 32).

Byte-level fuzzing of a model mostly yields files protobuf cannot parse; the bugs that matter hide
behind a parse that succeeds: an initializer whose bytes disagree with its dims, a dim of 2^62, an
If without outputs, an external location of `../x`. Each mutation class below changes one such
thing in a copy of a real model, and says what it changed, so a failure reads as a reproducer.

Pure onnx + numpy, no onnx_roofline import: the fuzzer must not depend on the code it tests.

    mutant = mutate(model, np.random.default_rng(7))
    mutant.label   # "init_data/raw_truncated"
    mutant.detail  # "initializer 'onnx::MatMul_123' raw_data 3072 -> 1535 bytes"
    mutant.data()  # the bytes to write (byte-level classes have no ModelProto)

`python -m tests.fuzz.mutate MODEL --seed N --out DIR` writes mutant N of MODEL (and its
symlinks), the same one the campaign ran.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
import onnx.defs
from onnx import (
    AttributeProto,
    GraphProto,
    ModelProto,
    NodeProto,
    TensorProto,
    ValueInfoProto,
    helper,
)

# Integers that break arithmetic: int32/int64 limits, zero, negatives, 2^57 (the tool's own cap).
EDGE_INTS = [0, -1, -2, 1, 2**31 - 1, 2**31, -(2**31), 2**32, 2**57 + 1, 2**62, 2**63 - 1, -(2**63)]
EDGE_FLOATS = [math.nan, math.inf, -math.inf, 0.0, -1.0, 1e38, 5e-324]
HUGE_DIMS = [2**62, 2**57 + 1, 2**40, 2**31, 2**31 - 1, 10**12]
NEGATIVE_DIMS = [-1, -7, -(2**31), -(2**63)]
VALID_TYPES = [t for t in TensorProto.DataType.values() if t != TensorProto.UNDEFINED]
INVALID_TYPES = [0, max(VALID_TYPES) + 1, 40, 99, 255, 2**31 - 1, -1]
# External locations a stranger could write: empty, escaping, absolute, special files, URL-ish,
# Windows-ish, a null byte, the model itself; plus one legitimate (absent) file inside the folder.
HOSTILE_LOCATIONS = [
    "",
    "../x",
    "../../../../../../../../etc/passwd",
    "/etc/passwd",
    "/etc/shadow",
    "/proc/self/environ",
    "/dev/zero",
    "/tmp/fuzz-absolute.bin",
    "sub/../../x",
    "./../x",
    "..",
    ".",
    "/",
    "~/.ssh/id_rsa",
    "file:///etc/passwd",
    "..\\x",
    "x\x00/../../etc/passwd",
    "mutant.onnx",
    "a/b/weights.bin",
]
# Real symlinks planted in the mutant's folder: the name is inside, its target is not.
SYMLINKS = [("link.bin", "/etc/passwd"), ("etc_dir/passwd", None), ("zero.bin", "/dev/zero"), ("up.bin", "../x")]
CONTRIB_OPS = [
    ("com.microsoft", "Attention"),
    ("com.microsoft", "GroupQueryAttention"),
    ("com.microsoft", "MatMulNBits"),
    ("com.microsoft", "SkipLayerNormalization"),
    ("com.microsoft", "FusedMatMul"),
    ("com.microsoft", "QuickGelu"),
    ("com.microsoft.nchwc", "Conv"),
    ("ai.onnx.ml", "TreeEnsembleClassifier"),
    ("ai.onnx.ml", "LabelEncoder"),
    ("ai.onnx.ml", "TreeEnsembleRegressor"),
    ("ai.onnx.preview.training", "Gradient"),
]
BOGUS_OPS = [
    ("", "NoSuchOp"),
    ("", ""),
    ("", "relu"),
    ("", "Rélu"),
    ("com.example", "Custom"),
    ("", "If"),
    ("", "Loop"),
    ("", "Scan"),
    ("", "Constant"),
]
SCHEMAS = [s for s in onnx.defs.get_all_schemas() if not s.deprecated]


class NotApplicable(Exception):
    """This class of mutation has nothing to work on in this model (no attributes, no raw data)."""


@dataclass
class Mutant:
    """One mutant: what class of change, what exactly, and the model (or bytes) it gives."""

    label: str
    detail: str
    model: ModelProto | None
    raw: bytes | None = None
    symlinks: dict[str, str] = field(default_factory=dict)  # name in the mutant's folder -> link target

    def data(self) -> bytes:
        return self.raw if self.raw is not None else self.model.SerializeToString()

    @property
    def mutation_class(self) -> str:
        return self.label.split("/", 1)[0]


# --- walking a model ------------------------------------------------------------------------------


def graphs(model: ModelProto) -> Iterator[tuple[str, GraphProto]]:
    """The main graph and every body, depth first, each with a path naming where it lives."""

    def walk(graph: GraphProto, where: str):
        yield where, graph
        for node in graph.node:
            for attr in node.attribute:
                if attr.type == AttributeProto.GRAPH:
                    yield from walk(attr.g, f"{where}/{node.name or node.op_type}/{attr.name}")
                elif attr.type == AttributeProto.GRAPHS:
                    for i, g in enumerate(attr.graphs):
                        yield from walk(g, f"{where}/{node.name or node.op_type}/{attr.name}[{i}]")

    yield from walk(model.graph, "main")


def all_nodes(model: ModelProto) -> list[tuple[str, NodeProto]]:
    found = [(where, node) for where, g in graphs(model) for node in g.node]
    found += [(f"function {f.name}", node) for f in model.functions for node in f.node]
    return found


def value_infos(model: ModelProto) -> list[tuple[str, ValueInfoProto]]:
    """Declared tensors: graph inputs first (they matter most), then outputs and value_info."""
    found = []
    for where, g in graphs(model):
        found += [(f"{where} input", v) for v in g.input]
        found += [(f"{where} output", v) for v in g.output]
        found += [(f"{where} value_info", v) for v in g.value_info]
    return found


def tensors(model: ModelProto) -> list[tuple[str, TensorProto]]:
    """Stored tensors: initializers of every graph and the values of Constant nodes."""
    found = [(f"{where} initializer", t) for where, g in graphs(model) for t in g.initializer]
    for where, node in all_nodes(model):
        for attr in node.attribute:
            if node.op_type == "Constant" and attr.type == AttributeProto.TENSOR:
                found.append((f"{where} Constant {node.name!r}", attr.t))
    return found


def pick(rng: np.random.Generator, items: Sequence):
    if not items:
        raise NotApplicable("nothing to pick from")
    return items[int(rng.integers(len(items)))]


def opset_of(model: ModelProto, domain: str = "") -> int:
    return next(
        (o.version for o in model.opset_import if o.domain in (domain, "ai.onnx" if domain == "" else domain)), 0
    )


def unique(graph_like, stem: str) -> str:
    """A value name no node, input or initializer of the model uses."""
    taken = getattr(graph_like, "_fuzz_names", None)
    if taken is None:
        taken = set()
        for _, g in graphs(graph_like):
            taken |= {v.name for v in (*g.input, *g.output, *g.value_info)} | {t.name for t in g.initializer}
            taken |= {n for node in g.node for n in (*node.input, *node.output)}
    i = 0
    while f"{stem}_{i}" in taken:
        i += 1
    return f"{stem}_{i}"


# --- the mutation classes -------------------------------------------------------------------------
# Each takes the copy to change and the generator, changes it in place, and returns (variant, detail).
# It may instead return a Mutant (byte-level, or with symlinks), or raise NotApplicable.


def m_op_type(m: ModelProto, rng) -> tuple[str, str]:
    """Another op with the same arity (a schema it may half-fit), a contrib/ML op, or a bogus one."""
    where, node = pick(rng, all_nodes(m))
    old = f"{node.domain}:{node.op_type}"
    r = rng.random()
    if r < 0.6:
        n_in, n_out = len(node.input), len(node.output)
        fits = [
            s
            for s in SCHEMAS
            if s.min_input <= n_in <= s.max_input and s.min_output <= n_out <= s.max_output and s.name != node.op_type
        ]
        schema = pick(rng, fits)
        node.domain, node.op_type, variant = schema.domain, schema.name, "same_arity"
    elif r < 0.8:
        node.domain, node.op_type = pick(rng, CONTRIB_OPS)
        variant = "contrib"
    else:
        node.domain, node.op_type = pick(rng, BOGUS_OPS)
        variant = "bogus"
    return variant, f"{where} node {node.name!r}: {old} -> {node.domain}:{node.op_type}"


def _set_attr_value(attr: AttributeProto, kind: int, rng) -> None:
    """Give `attr` type `kind` with an edge value, clearing whatever it held."""
    for f in ("f", "i", "s", "t", "g", "sparse_tensor", "tp"):
        attr.ClearField(f)
    for f in ("floats", "ints", "strings", "tensors", "graphs", "sparse_tensors", "type_protos"):
        attr.ClearField(f)
    attr.type = kind
    if kind == AttributeProto.INT:
        attr.i = int(pick(rng, EDGE_INTS))
    elif kind == AttributeProto.INTS:
        attr.ints.extend(int(pick(rng, EDGE_INTS)) for _ in range(int(rng.integers(0, 5))))
    elif kind == AttributeProto.FLOAT:
        attr.f = float(pick(rng, EDGE_FLOATS))
    elif kind == AttributeProto.FLOATS:
        attr.floats.extend(float(pick(rng, EDGE_FLOATS)) for _ in range(int(rng.integers(0, 5))))
    elif kind == AttributeProto.STRING:
        attr.s = pick(rng, [b"", b"NOTSET", b"bogus", b"\xff\xfe", b"x" * 4096])
    elif kind == AttributeProto.STRINGS:
        attr.strings.extend([b"a", b"", b"\xff"][: int(rng.integers(0, 4))])
    elif kind == AttributeProto.TENSOR:
        attr.t.CopyFrom(helper.make_tensor("t", TensorProto.FLOAT, [int(rng.integers(0, 4))], []))
    elif kind == AttributeProto.GRAPH:
        attr.g.CopyFrom(helper.make_graph([], "empty", [], []))


def m_attribute(m: ModelProto, rng) -> tuple[str, str]:
    """Change an attribute's value, its type, remove it, make its ints huge or negative, or add one."""
    candidates = [(w, n) for w, n in all_nodes(m) if n.op_type != "Constant"]
    with_attrs = [
        (w, n)
        for w, n in candidates
        if any(a.type not in (AttributeProto.GRAPH, AttributeProto.GRAPHS) for a in n.attribute)
    ]
    variant = pick(rng, ["value", "type", "remove", "huge", "huge", "add_schema", "add_unknown", "ref_attr"])
    if variant.startswith("add") or not with_attrs:
        where, node = pick(rng, candidates)
        if variant == "add_schema" and onnx.defs.has(node.op_type, node.domain):
            schema = onnx.defs.get_schema(node.op_type, node.domain)
            missing = [a for a in schema.attributes if a not in {x.name for x in node.attribute}]
            name = pick(rng, missing) if missing else "axis"
        else:
            variant, name = "add_unknown", pick(rng, ["axis", "fuzz_unknown", "perm", "to", "group", ""])
        attr = node.attribute.add()
        attr.name = name
        _set_attr_value(
            attr,
            int(pick(rng, [AttributeProto.INT, AttributeProto.INTS, AttributeProto.FLOAT, AttributeProto.STRING])),
            rng,
        )
        return (
            variant,
            f"{where} node {node.name!r} ({node.op_type}): added {name}={helper.get_attribute_value(attr)!r}"[:300],
        )
    where, node = pick(rng, with_attrs)
    index = pick(
        rng, [i for i, a in enumerate(node.attribute) if a.type not in (AttributeProto.GRAPH, AttributeProto.GRAPHS)]
    )
    attr = node.attribute[index]
    before = f"{attr.name}={_show(attr)}"
    if variant == "remove":
        del node.attribute[index]
        return variant, f"{where} node {node.name!r} ({node.op_type}): removed {before}"
    if variant == "type":
        _set_attr_value(
            attr,
            int(
                pick(
                    rng,
                    [t for t in AttributeProto.AttributeType.values() if t not in (attr.type, 0, 10, 11, 12, 13, 14)],
                )
            ),
            rng,
        )
    elif variant == "huge" or (variant == "value" and attr.type in (AttributeProto.INT, AttributeProto.INTS)):
        if attr.type == AttributeProto.INTS and len(attr.ints):
            attr.ints[int(rng.integers(len(attr.ints)))] = int(pick(rng, EDGE_INTS))
        else:
            _set_attr_value(attr, AttributeProto.INT, rng)
    elif variant == "ref_attr":
        attr.ref_attr_name = "fuzz_ref"  # only meaningful inside a function body
    else:
        _set_attr_value(attr, attr.type, rng)
    return (
        variant,
        f"{where} node {node.name!r} ({node.op_type}): {before} -> {attr.name}={_show(attr)} (type {attr.type})",
    )


def _show(attr: AttributeProto) -> str:
    try:
        return repr(helper.get_attribute_value(attr))[:80]
    except Exception:  # noqa: BLE001 (an attribute the mutation left inconsistent fails in onnx's own ways)
        return "<inconsistent>"


def m_dim(m: ModelProto, rng) -> tuple[str, str]:
    """A declared dim made huge, 0, negative, symbolic, unknown; a dim or the whole shape removed."""
    declared = [(w, v) for w, v in value_infos(m) if v.type.HasField("tensor_type")]
    inputs = [(w, v) for w, v in declared if w.endswith(" input")]
    where, vi = pick(rng, inputs if inputs and rng.random() < 0.6 else declared)
    tt = vi.type.tensor_type
    rank = len(tt.shape.dim) if tt.HasField("shape") else 0
    variants = ["remove_shape", "add_dim", "clear_type", "to_sequence"]
    if rank:
        variants += ["huge"] * 3 + ["zero"] * 2 + ["negative"] * 2 + ["dim_param"] * 2 + ["drop_dim", "unknown_dim"]
    variant = pick(rng, variants)
    axis = int(rng.integers(rank)) if rank else 0
    dim = tt.shape.dim[axis] if rank else None
    if variant == "huge":
        dim.dim_value = int(pick(rng, HUGE_DIMS))
    elif variant == "zero":
        dim.dim_value = 0
    elif variant == "negative":
        dim.dim_value = int(pick(rng, NEGATIVE_DIMS))
    elif variant == "dim_param":
        other = [d.dim_param for _, v in declared for d in v.type.tensor_type.shape.dim if d.dim_param]
        dim.dim_param = pick(rng, ["N", "", "x y", "ü", "batch", "sequence", "0", "-1"] + other[:3])
    elif variant == "unknown_dim":
        dim.ClearField("dim_value"), dim.ClearField("dim_param")
    elif variant == "drop_dim":
        del tt.shape.dim[axis]
    elif variant == "add_dim":
        new = tt.shape.dim.add()
        new.dim_value = int(pick(rng, [1, 3, 0, 2**40]))
    elif variant == "remove_shape":
        tt.ClearField("shape")
    elif variant == "clear_type":
        vi.ClearField("type")
    else:  # the tensor declared as a sequence of itself
        inner = onnx.TypeProto()
        inner.CopyFrom(vi.type)
        vi.type.ClearField("tensor_type")
        vi.type.sequence_type.elem_type.CopyFrom(inner)
    return variant, f"{where} {vi.name!r} axis {axis}: {_shape(vi)}"


def _shape(vi: ValueInfoProto) -> str:
    if not vi.type.HasField("tensor_type"):
        return f"type now {vi.type.WhichOneof('value')}"
    tt = vi.type.tensor_type
    if not tt.HasField("shape"):
        return "shape now absent"
    return (
        "shape now ["
        + ", ".join(str(d.dim_value) if d.HasField("dim_value") else d.dim_param or "?" for d in tt.shape.dim)
        + "]"
    )


def m_elem_type(m: ModelProto, rng) -> tuple[str, str]:
    """A declared or stored element type changed to another valid one or to an invalid number."""
    variant = pick(rng, ["value_info", "value_info_invalid", "initializer", "initializer_invalid", "cast_to"])
    new = int(pick(rng, INVALID_TYPES if variant.endswith("invalid") else VALID_TYPES))
    if variant.startswith("value_info"):
        where, vi = pick(rng, [(w, v) for w, v in value_infos(m) if v.type.HasField("tensor_type")])
        old, vi.type.tensor_type.elem_type = vi.type.tensor_type.elem_type, new
        return variant, f"{where} {vi.name!r}: elem_type {old} -> {new}"
    if variant.startswith("initializer"):
        where, t = pick(rng, tensors(m))
        old, t.data_type = t.data_type, new
        return variant, f"{where} {t.name!r}: data_type {old} -> {new}"
    where, node = pick(
        rng,
        [(w, n) for w, n in all_nodes(m) if n.op_type in ("Cast", "CastLike", "EyeLike", "RandomNormal")]
        or all_nodes(m),
    )
    attr = next((a for a in node.attribute if a.name in ("to", "dtype")), None) or node.attribute.add()
    attr.name, attr.type = attr.name or "to", AttributeProto.INT
    attr.i = int(pick(rng, VALID_TYPES + INVALID_TYPES))
    return variant, f"{where} node {node.name!r} ({node.op_type}): {attr.name}={attr.i}"


def m_opset(m: ModelProto, rng) -> tuple[str, str]:
    """The default opset moved, removed or duplicated; opset_import emptied; a used domain dropped; IR version."""
    variant = pick(
        rng,
        ["version", "version", "remove_default", "empty", "duplicate", "drop_used_domain", "ir_version", "ir_version"],
    )
    default = next((o for o in m.opset_import if o.domain in ("", "ai.onnx")), None)
    if variant == "version" and default is not None:
        old, default.version = (
            default.version,
            int(pick(rng, [1, 6, 7, 9, 11, 13, 16, 0, -1, 99, 10**6, int(rng.integers(1, 24))])),
        )
        return variant, f"default opset {old} -> {default.version}"
    if variant == "remove_default" and default is not None:
        m.opset_import.remove(default)
        return variant, "default-domain opset_import removed"
    if variant == "duplicate" and default is not None:
        m.opset_import.add(domain="", version=int(pick(rng, [1, 7, 11, 99])))
        return variant, f"default domain imported twice: {[o.version for o in m.opset_import if o.domain == '']}"
    if variant == "drop_used_domain":
        used = {n.domain for _, n in all_nodes(m)} - {"", "ai.onnx"}
        victims = [o for o in m.opset_import if o.domain in used]
        if victims:
            victim = pick(rng, victims)
            m.opset_import.remove(victim)
            return variant, f"opset_import of used domain {victim.domain!r} removed"
    if variant == "ir_version":
        old, m.ir_version = m.ir_version, int(pick(rng, [0, 1, 2, 3, 4, 99, -1, 2**62]))
        return variant, f"ir_version {old} -> {m.ir_version}"
    del m.opset_import[:]
    return "empty", "opset_import emptied"


def m_init_data(m: ModelProto, rng) -> tuple[str, str]:
    """Stored tensor data that disagrees with itself: raw_data truncated or extended, dims that do
    not match, string_data, typed fields of the wrong count, sparse initializers with impossible dims."""
    stored = tensors(m)
    inline = [(w, t) for w, t in stored if t.raw_data]
    variant = pick(
        rng,
        [
            "raw_truncated",
            "raw_truncated",
            "raw_extended",
            "dims",
            "dims",
            "string_data",
            "typed_count",
            "raw_and_typed",
            "sparse",
            "sparse",
        ],
    )
    if variant.startswith("raw") and not inline:
        variant = "dims"
    where, t = pick(rng, inline if variant.startswith("raw") else stored)
    size = len(t.raw_data)
    if variant == "raw_truncated":
        t.raw_data = t.raw_data[: int(pick(rng, [0, 1, size // 2, size - 1]))]
        return variant, f"{where} {t.name!r}: raw_data {size} -> {len(t.raw_data)} bytes, dims {list(t.dims)}"
    if variant == "raw_extended":
        extra = rng.bytes(int(pick(rng, [1, 3, 64]))) if rng.random() < 0.6 else t.raw_data
        t.raw_data = t.raw_data + extra
        return variant, f"{where} {t.name!r}: raw_data {size} -> {len(t.raw_data)} bytes, dims {list(t.dims)}"
    if variant == "raw_and_typed":
        t.float_data.extend([1.0, 2.0, 3.0])
        return variant, f"{where} {t.name!r}: float_data added beside raw_data ({size} bytes)"
    if variant == "dims":
        old = list(t.dims)
        how = pick(rng, ["append", "scale", "huge", "negative", "zero", "clear"])
        if how == "append":
            t.dims.append(int(pick(rng, [1, 7, 2**40])))
        elif how == "clear" or not t.dims:
            del t.dims[:]
        else:
            axis = int(rng.integers(len(t.dims)))
            t.dims[axis] = {
                "scale": t.dims[axis] * 1000 + 1,
                "huge": int(pick(rng, HUGE_DIMS)),
                "negative": int(pick(rng, NEGATIVE_DIMS)),
                "zero": 0,
            }[how]
        return f"dims_{how}", f"{where} {t.name!r}: dims {old} -> {list(t.dims)}"
    if variant == "string_data":
        t.ClearField("raw_data")
        t.string_data.extend([b"fuzz", b"", b"\xff"][: int(rng.integers(1, 4))])
        if rng.random() < 0.5:
            t.data_type = TensorProto.STRING
        return (
            variant,
            f"{where} {t.name!r}: string_data {list(t.string_data)} with data_type {t.data_type}, dims {list(t.dims)}",
        )
    if variant == "typed_count":
        t.ClearField("raw_data")
        for f in ("float_data", "int32_data", "int64_data", "double_data", "uint64_data"):
            t.ClearField(f)
        n = int(pick(rng, [0, 1, 5]))
        target = {TensorProto.INT64: t.int64_data, TensorProto.DOUBLE: t.double_data}.get(t.data_type, t.float_data)
        target.extend([1] * n)
        return variant, f"{where} {t.name!r}: {n} typed values for dims {list(t.dims)}"
    return _sparse(m, rng)


def _sparse(m: ModelProto, rng) -> tuple[str, str]:
    """A sparse initializer whose dims, indices or values cannot agree."""
    name = pick(rng, [t.name for t in m.graph.initializer] or [unique(m, "sparse")])
    how = pick(rng, ["huge_dims", "index_out_of_range", "count_mismatch", "negative_dims", "rank_mismatch"])
    dims = {"huge_dims": [2**40, 2**40], "negative_dims": [-4, 8], "rank_mismatch": [4, 8]}.get(how, [4, 8])
    values = helper.make_tensor(
        name,
        TensorProto.FLOAT,
        [3 if how != "count_mismatch" else 2],
        [1.0, 2.0, 3.0][: 3 if how != "count_mismatch" else 2],
    )
    indices = [0, 5, 2**40 if how == "index_out_of_range" else 31]
    idx = helper.make_tensor(name + "_idx", TensorProto.INT64, [3, 1] if how == "rank_mismatch" else [3], indices)
    sparse = helper.make_sparse_tensor(values, idx, dims)
    existing = [i for i, t in enumerate(m.graph.initializer) if t.name == name]
    if existing and rng.random() < 0.7:
        del m.graph.initializer[existing[0]]  # the dense one moves to sparse
    m.graph.sparse_initializer.append(sparse)
    return f"sparse_{how}", f"sparse initializer {name!r}: dims {dims}, indices {indices}"


def m_init_location(m: ModelProto, rng) -> Mutant | tuple[str, str]:
    """An initializer's bytes said to live outside the model's folder, in a special file, behind a
    symlink, at an offset/length no file has; or an external marker with no location at all."""
    stored = [t for _, g in graphs(m) for t in g.initializer]
    external = [t for t in stored if t.data_location == TensorProto.EXTERNAL]
    t = pick(rng, external if external and rng.random() < 0.5 else stored)
    for f in ("raw_data", "float_data", "int32_data", "int64_data", "double_data", "uint64_data", "string_data"):
        t.ClearField(f)
    t.data_location = TensorProto.EXTERNAL
    entries = {e.key: e.value for e in t.external_data}
    variant = pick(rng, ["location"] * 5 + ["symlink"] * 2 + ["offset_length", "no_location", "bad_data_location"])
    symlinks = {}
    if variant == "location":
        entries["location"] = pick(rng, HOSTILE_LOCATIONS)
    elif variant == "symlink":
        name, target = pick(rng, SYMLINKS)
        if target is None:  # a directory symlink, and the file reached through it
            symlinks["etc_dir"] = "/etc"
        else:
            symlinks[name] = target
        entries["location"] = name
    elif variant == "offset_length":
        entries.setdefault("location", f"{t.name or 'w'}.bin")
        entries[pick(rng, ["offset", "length"])] = pick(rng, ["-1", "abc", str(2**64), str(2**62), "1e3", "²", ""])
    elif variant == "no_location":
        entries.pop("location", None)
        entries.setdefault("length", "16")
    else:
        t.data_location = int(pick(rng, [2, 99]))
    del t.external_data[:]
    for key, value in entries.items():
        t.external_data.add(key=key, value=value)
    detail = f"initializer {t.name!r}: external {entries}" + (f", symlinks {symlinks}" if symlinks else "")
    if symlinks:
        return Mutant(f"init_location/{variant}", detail, m, symlinks=symlinks)
    return variant, detail


def _wrap_in_if(m: ModelProto, rng, node_index: int) -> tuple[NodeProto, GraphProto, GraphProto]:
    """Replace main-graph node N by If(true) whose branches each hold a copy of N that reads its
    inputs from the outer scope: legal ONNX, which every pass must see through."""
    g = m.graph
    node = g.node[node_index]
    cond = unique(m, "fuzz_cond")
    g.initializer.append(helper.make_tensor(cond, TensorProto.BOOL, [], [True]))
    branches = []
    for branch in ("then", "else"):
        inner = NodeProto()
        inner.CopyFrom(node)
        inner.name = f"{node.name or node.op_type}_{branch}"
        del inner.output[:]
        inner.output.extend(f"{o}__{branch}" if o else "" for o in node.output)
        outs = [helper.make_empty_tensor_value_info(o) for o in inner.output if o]
        branches.append(helper.make_graph([inner], f"{branch}_branch", [], outs))
    wrapper = helper.make_node(
        "If",
        [cond],
        [o for o in node.output if o],
        name=f"fuzz_if_{node.name or node_index}",
        then_branch=branches[0],
        else_branch=branches[1],
    )
    g.node.remove(node)
    g.node.insert(node_index, wrapper)
    return wrapper, branches[0], branches[1]


def m_body(m: ModelProto, rng) -> tuple[str, str]:
    """Control flow around real nodes: If wrappers (outer-scope reads, no outputs, mismatched
    branches, body value_info contradicting the outer type, a ghost name), a Scan over a zero-sized
    axis, a Loop of 2^62 trips."""
    g = m.graph
    plain = [i for i, n in enumerate(g.node) if n.op_type not in ("If", "Loop", "Scan") and all(n.output) and n.input]
    variant = pick(
        rng,
        [
            "if_wrap",
            "if_no_outputs",
            "if_no_outputs",
            "if_ghost",
            "if_value_info",
            "if_branch_mismatch",
            "scan_zero_axis",
            "scan_zero_axis",
            "scan_bad_axes",
            "loop_huge_trip",
        ],
    )
    if variant.startswith("if") and plain:
        index = pick(rng, plain)
        name = g.node[index].name
        wrapper, then_g, else_g = _wrap_in_if(m, rng, index)
        if variant == "if_no_outputs":
            del wrapper.output[:]
            del then_g.output[:]
            del else_g.output[:]
            # the wrapped node's outputs are still read downstream: produce them again, outside
            again = NodeProto()
            again.CopyFrom(then_g.node[0])
            del again.output[:]
            again.output.extend(o.rsplit("__then", 1)[0] for o in then_g.node[0].output)
            again.name = f"{name}_again"
            g.node.insert(index + 1, again)
        elif variant == "if_ghost":
            then_g.node[0].input[0] = "fuzz_ghost_value"
        elif variant == "if_value_info":
            outer = then_g.node[0].input[0]
            then_g.value_info.append(helper.make_tensor_value_info(outer, TensorProto.STRING, [3, 3, 3]))
        elif variant == "if_branch_mismatch":
            del else_g.output[-1]
        return variant, f"node {name!r} wrapped in If {wrapper.name!r}"
    if variant.startswith("scan"):
        return variant, _add_scan(m, rng, variant)
    return "loop_huge_trip", _add_loop(m, rng)


def _add_scan(m: ModelProto, rng, variant: str) -> str:
    """A Scan (opset-9 form) over a float initializer whose scanned axis has length 0, or whose
    scan axes are out of range."""
    g = m.graph
    width = int(pick(rng, [4, 1, 0]))
    xs, init, state_out, ys = (
        unique(m, s) for s in ("fuzz_scan_xs", "fuzz_scan_init", "fuzz_scan_state", "fuzz_scan_ys")
    )
    g.initializer.append(helper.make_tensor(xs, TensorProto.FLOAT, [0, width], []))
    g.initializer.append(helper.make_tensor(init, TensorProto.FLOAT, [width], [0.0] * width))
    body = helper.make_graph(
        [helper.make_node("Add", ["s", "x_t"], ["s_next"]), helper.make_node("Identity", ["x_t"], ["y_t"])],
        "scan_body",
        [
            helper.make_tensor_value_info("s", TensorProto.FLOAT, [width]),
            helper.make_tensor_value_info("x_t", TensorProto.FLOAT, [width]),
        ],
        [
            helper.make_tensor_value_info("s_next", TensorProto.FLOAT, [width]),
            helper.make_tensor_value_info("y_t", TensorProto.FLOAT, [width]),
        ],
    )
    attrs = {"num_scan_inputs": 1}
    if variant == "scan_bad_axes":
        attrs[pick(rng, ["scan_input_axes", "scan_output_axes", "scan_input_directions"])] = [
            int(pick(rng, [5, -9, 2**40]))
        ]
        if rng.random() < 0.3:
            attrs["num_scan_inputs"] = int(pick(rng, [0, 2, 2**31 - 1]))
    g.node.append(helper.make_node("Scan", [init, xs], [state_out, ys], name="fuzz_scan", body=body, **attrs))
    g.output.extend(
        [
            helper.make_tensor_value_info(state_out, TensorProto.FLOAT, None),
            helper.make_tensor_value_info(ys, TensorProto.FLOAT, None),
        ]
    )
    return f"Scan over {xs!r} [0, {width}] {attrs}"


def _add_loop(m: ModelProto, rng) -> str:
    """A Loop whose constant trip count is 2^62 (or int64 max)."""
    g = m.graph
    trips = int(pick(rng, [2**62, 2**63 - 1, 10**12]))
    names = {s: unique(m, f"fuzz_loop_{s}") for s in ("M", "cond", "acc", "out")}
    g.initializer.extend(
        [
            helper.make_tensor(names["M"], TensorProto.INT64, [], [trips]),
            helper.make_tensor(names["cond"], TensorProto.BOOL, [], [True]),
            helper.make_tensor(names["acc"], TensorProto.FLOAT, [4], [0.0] * 4),
        ]
    )
    body = helper.make_graph(
        [helper.make_node("Identity", ["c"], ["c_out"]), helper.make_node("Add", ["a", "a"], ["a_out"])],
        "loop_body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
            helper.make_tensor_value_info("a", TensorProto.FLOAT, [4]),
        ],
        [
            helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("a_out", TensorProto.FLOAT, [4]),
        ],
    )
    g.node.append(
        helper.make_node("Loop", [names["M"], names["cond"], names["acc"]], [names["out"]], name="fuzz_loop", body=body)
    )
    g.output.append(helper.make_tensor_value_info(names["out"], TensorProto.FLOAT, [4]))
    return f"Loop of {trips} trips"


def m_function(m: ModelProto, rng) -> tuple[str, str]:
    """A node moved into a model-local function: plain, without opset imports, with an output it
    never produces, shadowing a standard op, recursive, with an attribute reference nobody fills,
    with its domain not imported, defined twice."""
    g = m.graph
    plain = [
        i for i, n in enumerate(g.node) if n.op_type not in ("If", "Loop", "Scan") and all(n.output) and all(n.input)
    ]
    index = pick(rng, plain)
    node = g.node[index]
    variant = pick(
        rng,
        [
            "wrap",
            "wrap",
            "no_opset",
            "missing_output",
            "shadow_standard",
            "recursive",
            "ref_attr",
            "domain_unimported",
            "duplicate",
        ],
    )
    domain, fname = ("", node.op_type) if variant == "shadow_standard" else ("fuzz.local", f"F_{node.op_type}")
    inner = NodeProto()
    inner.CopyFrom(node)
    inner.name = "inner"
    formal_in = [f"in{i}" for i in range(len(node.input))]
    formal_out = [f"out{i}" for i in range(len(node.output))]
    del inner.input[:], inner.output[:]
    inner.input.extend(formal_in)
    inner.output.extend(formal_out)
    body = [inner]
    attributes = []
    if variant == "missing_output":
        formal_out = formal_out + ["never_written"]
    elif variant == "recursive":
        body.append(helper.make_node(fname, [formal_out[0]], ["loop_back"], domain=domain))
    elif variant == "ref_attr":
        ref = inner.attribute.add()
        ref.name, ref.type, ref.ref_attr_name = "fuzz_attr", AttributeProto.INT, "fuzz_attr"
        attributes = ["fuzz_attr"]
    imports = [] if variant == "no_opset" else list(m.opset_import)
    function = helper.make_function(domain, fname, formal_in, formal_out, body, imports, attributes)
    m.functions.append(function)
    if variant == "duplicate":
        twin = onnx.FunctionProto()
        twin.CopyFrom(function)
        del twin.node[:]
        twin.node.append(helper.make_node("Identity", [formal_in[0]], [formal_out[0]]))
        m.functions.append(twin)
    if variant != "shadow_standard":
        call = helper.make_node(
            fname, list(node.input), list(node.output), name=f"fuzz_call_{node.name}", domain=domain
        )
        g.node.remove(node)
        g.node.insert(index, call)
        if variant != "domain_unimported" and not any(o.domain == domain for o in m.opset_import):
            m.opset_import.add(domain=domain, version=1)
    return variant, f"node {node.name!r} ({node.op_type}) as function {domain}:{fname}"


def m_duplicate(m: ModelProto, rng) -> tuple[str, str]:
    """Names declared twice: a graph input, an input with another type, an initializer that is also
    an input of another shape, an initializer, a graph output, a node output that is a graph input."""
    g = m.graph
    variant = pick(
        rng, ["input", "input_retyped", "initializer_as_input", "initializer", "output", "node_writes_input"]
    )
    if variant in ("input", "input_retyped") and g.input:
        copy = ValueInfoProto()
        copy.CopyFrom(pick(rng, list(g.input)))
        if variant == "input_retyped" and copy.type.HasField("tensor_type"):
            copy.type.tensor_type.elem_type = (
                TensorProto.INT8 if copy.type.tensor_type.elem_type != TensorProto.INT8 else TensorProto.FLOAT
            )
        g.input.append(copy)
        return variant, f"graph input {copy.name!r} declared twice"
    if variant == "initializer_as_input" and g.initializer:
        t = pick(rng, list(g.initializer))
        g.input.append(helper.make_tensor_value_info(t.name, TensorProto.INT64, [int(pick(rng, [1, 7, 2**40]))]))
        return variant, f"initializer {t.name!r} also a graph input of another type and shape"
    if variant == "initializer" and g.initializer:
        t = pick(rng, list(g.initializer))
        twin = TensorProto()
        twin.CopyFrom(t)
        twin.dims.append(3)
        g.initializer.append(twin)
        return variant, f"initializer {t.name!r} stored twice"
    if variant == "node_writes_input" and g.input and g.node:
        node = pick(rng, list(g.node))
        node.output[0] = g.input[0].name
        return variant, f"node {node.name!r} writes graph input {g.input[0].name!r}"
    copy = ValueInfoProto()
    copy.CopyFrom(pick(rng, list(g.output)))
    g.output.append(copy)
    return "output", f"graph output {copy.name!r} declared twice"


def m_topology(m: ModelProto, rng) -> tuple[str, str]:
    """Nodes stored out of topological order (legal to analyze, not to run), or a real cycle."""
    g = m.graph
    nodes = list(g.node)
    if len(nodes) < 2:
        raise NotApplicable("one node")
    variant = pick(rng, ["shuffle", "reverse", "last_first", "cycle"])
    if variant == "cycle":
        later = int(rng.integers(1, len(nodes)))
        earlier = int(rng.integers(0, later))
        if not nodes[earlier].input or not nodes[later].output:
            raise NotApplicable("no input to redirect")
        nodes[earlier].input[0] = nodes[later].output[0]
        return variant, f"node {nodes[earlier].name!r} reads {nodes[later].output[0]!r}, written after it"
    order = {
        "shuffle": list(rng.permutation(len(nodes))),
        "reverse": list(range(len(nodes)))[::-1],
        "last_first": [len(nodes) - 1, *range(len(nodes) - 1)],
    }[variant]
    copies = []
    for i in order:
        n = NodeProto()
        n.CopyFrom(nodes[int(i)])
        copies.append(n)
    del g.node[:]
    g.node.extend(copies)
    return variant, f"{len(nodes)} nodes reordered ({variant})"


def m_bytes(m: ModelProto, rng) -> Mutant:
    """The serialized file itself: bytes flipped, truncated, inserted, zeroed, or a span repeated."""
    data = bytearray(m.SerializeToString())
    variant = pick(rng, ["flip", "flip", "truncate", "insert", "zero_span", "repeat_span"])
    size = len(data)
    if variant == "flip":
        spots = rng.integers(0, size, int(rng.integers(1, 17)))
        for at in spots:
            data[int(at)] ^= int(rng.integers(1, 256))
        detail = f"{len(spots)} bytes flipped at {sorted(int(s) for s in spots)[:8]}"
    elif variant == "truncate":
        at = int(rng.integers(0, size))
        data = data[:at]
        detail = f"truncated to {at} of {size} bytes"
    elif variant == "insert":
        at = int(rng.integers(0, size))
        data[at:at] = rng.bytes(int(rng.integers(1, 33)))
        detail = f"random bytes inserted at {at}"
    elif variant == "zero_span":
        at, n = int(rng.integers(0, size)), int(rng.integers(1, 257))
        data[at : at + n] = bytes(len(data[at : at + n]))
        detail = f"{n} bytes zeroed at {at}"
    else:
        at, n = int(rng.integers(0, size)), int(rng.integers(1, 4097))
        data[at:at] = data[at : at + n]
        detail = f"{n} bytes at {at} repeated"
    return Mutant(f"bytes/{variant}", detail, None, raw=bytes(data))


MUTATIONS: dict[str, Callable] = {
    "op_type": m_op_type,
    "attribute": m_attribute,
    "dim": m_dim,
    "elem_type": m_elem_type,
    "opset": m_opset,
    "init_data": m_init_data,
    "init_location": m_init_location,
    "body": m_body,
    "function": m_function,
    "duplicate": m_duplicate,
    "topology": m_topology,
    "bytes": m_bytes,
}


def mutate(model: ModelProto, rng: np.random.Generator, classes: Sequence[str] | None = None) -> Mutant:
    """One mutant of `model` (left untouched): a class drawn uniformly from `classes` (all by
    default), falling back to another where the drawn one has nothing to work on."""
    names = list(classes or MUTATIONS)
    for name in [names[int(i)] for i in rng.permutation(len(names))]:
        copy = ModelProto()
        copy.CopyFrom(model)
        try:
            made = MUTATIONS[name](copy, rng)
            if isinstance(made, Mutant):
                made.data()  # a value protobuf cannot serialize counts as not applicable
                return made
            variant, detail = made
            mutant = Mutant(f"{name}/{variant}", detail, copy)
            mutant.data()
            return mutant
        except (NotApplicable, ValueError, TypeError, IndexError):
            continue
    raise NotApplicable(f"no mutation of {sorted(names)} applies")


def rng_for(seed: int, model_name: str) -> np.random.Generator:
    """The generator of mutant `seed` of a model: stable across runs, machines and Python hashes."""
    return np.random.default_rng([seed, zlib.crc32(model_name.encode())])


def mutant_for(seed: int, model_path: str | os.PathLike, classes: Sequence[str] | None = None) -> Mutant:
    model = onnx.load(os.fspath(model_path), load_external_data=False)
    return mutate(model, rng_for(seed, Path(model_path).name), classes)


def write(mutant: Mutant, folder: Path, name: str = "mutant.onnx") -> Path:
    """The mutant as a file in `folder`, with its planted symlinks beside it."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(mutant.data())
    for link, target in mutant.symlinks.items():
        (folder / link).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, folder / link)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="write mutant SEED of MODEL (as the campaign made it)")
    parser.add_argument("model")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--classes", help="comma-separated mutation classes (default: all)")
    parser.add_argument("--out", required=True, help="folder to write mutant.onnx (and its symlinks) into")
    args = parser.parse_args(argv)
    mutant = mutant_for(args.seed, args.model, args.classes.split(",") if args.classes else None)
    path = write(mutant, Path(args.out))
    print(json.dumps({"path": str(path), "label": mutant.label, "detail": mutant.detail, "symlinks": mutant.symlinks}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
