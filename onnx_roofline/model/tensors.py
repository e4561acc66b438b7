"""What the analysis knows about a tensor: name, shape (ints, symbolic names or unknowns) and dtype."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import field
from typing import TYPE_CHECKING, TypeGuard

import onnx
from onnx import TensorProto

from onnx_roofline.model.precisions import PRECISIONS
from onnx_roofline.records import record

# ONNX element types by the names the report uses, with their width in bits (sub-byte types by bits).
_DTYPES: dict[int, tuple[str, int]] = {
    TensorProto.FLOAT: ("float32", 32),
    TensorProto.UINT8: ("uint8", 8),
    TensorProto.INT8: ("int8", 8),
    TensorProto.UINT16: ("uint16", 16),
    TensorProto.INT16: ("int16", 16),
    TensorProto.INT32: ("int32", 32),
    TensorProto.INT64: ("int64", 64),
    TensorProto.STRING: ("string", 0),
    TensorProto.BOOL: ("bool", 8),
    TensorProto.FLOAT16: ("float16", 16),
    TensorProto.DOUBLE: ("float64", 64),
    TensorProto.UINT32: ("uint32", 32),
    TensorProto.UINT64: ("uint64", 64),
    TensorProto.COMPLEX64: ("complex64", 64),
    TensorProto.COMPLEX128: ("complex128", 128),
    TensorProto.BFLOAT16: ("bfloat16", 16),
    TensorProto.FLOAT8E4M3FN: ("float8e4m3fn", 8),
    TensorProto.FLOAT8E4M3FNUZ: ("float8e4m3fnuz", 8),
    TensorProto.FLOAT8E5M2: ("float8e5m2", 8),
    TensorProto.FLOAT8E5M2FNUZ: ("float8e5m2fnuz", 8),
    TensorProto.UINT4: ("uint4", 4),
    TensorProto.INT4: ("int4", 4),
}
for _name, _bits in (("FLOAT4E2M1", 4), ("FLOAT8E8M0", 8), ("UINT2", 2), ("INT2", 2)):
    if hasattr(TensorProto, _name):  # newer onnx releases only
        _DTYPES[getattr(TensorProto, _name)] = (_name.lower(), _bits)

DTYPE_BITS: dict[str, int] = dict(_DTYPES.values())

Dim = int | str | None
"""An int when known, the symbol's name when symbolic, None when unknown."""


def dtype_name(elem_type: int) -> str | None:
    """The report's name for an ONNX element type (None for UNDEFINED)."""
    entry = _DTYPES.get(elem_type)
    return entry[0] if entry else None


def elem_type(dtype: str) -> int:
    """The ONNX element type for a report dtype name (the inverse of dtype_name)."""
    return next(code for code, (name, _) in _DTYPES.items() if name == dtype)


@record
class TensorInfo:
    """A tensor, or a map or sequence of maps (ai.onnx.ml's ZipMap, DictVectorizer, CastMap).

    A map is described as the tensor of its entries: shape [entries] — [maps, entries] for a
    sequence of maps, as ZipMap writes N maps of C entries from an [N, C] input — with `dtype` its
    (scalar) values' type and `key_dtype` its keys'. An entry is a key and a value, so `bits` is
    their sum and `nbytes` = entries × (key + value) bytes. String keys, like string tensors,
    have no static size. A plain tensor has key_dtype None.

    A string tensor's size is its values'; the analysis sizes one at an assumed average length,
    `string_bytes` (shapes/texts.py: Sizing.string_bytes or STRING_BYTES): `nbytes` = elements ×
    string_bytes. None: no static size (`bits` 0)

    A sequence of tensors (SplitToSequence's, SequenceConstruct's) has `sequence` True, `dtype`
    its elements', `elements` each element's shape where its length is known (the shape rules of
    shape_rules/sequences.py track it; ONNX's inference does not) and `shape` what the elements
    agree on (a dim they differ in unknown). It is known when every element is, and its bytes are
    the elements' together: what it holds."""

    name: str
    shape: tuple[Dim, ...] | None  # None: not even the rank is known
    dtype: str | None
    key_dtype: str | None = None  # set for a map or a sequence of maps: the keys' dtype
    sequence: bool = False  # a sequence of tensors: shape and dtype are its elements'
    elements: tuple[tuple[Dim, ...], ...] | None = None  # a sequence's element shapes, where its length is known
    string_bytes: int | None = None  # a string's bytes, as the analysis assumes them (Sizing.string_bytes)
    is_known: bool = field(init=False, repr=False, compare=False)
    """True when every dim is a concrete int and the dtype is known: a cost can be computed."""
    _numel: int | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Computed once, eagerly: the walk asks these of every value several times per node.
        numel: int | None = None
        if self.sequence:
            elements = self.elements
            if elements is not None and (self.dtype is not None or not elements):
                known = [shape for shape in elements if all_ints(shape)]
                numel = sum(map(math.prod, known)) if len(known) == len(elements) else None
        elif self.shape is not None and self.dtype is not None and all_ints(self.shape):
            numel = math.prod(self.shape)
        object.__setattr__(self, "is_known", numel is not None)
        object.__setattr__(self, "_numel", numel)

    @property
    def rank(self) -> int:
        if self.shape is None:
            raise ValueError(f"rank of {self.name!r} is unknown")
        return len(self.shape)

    @property
    def numel(self) -> int:
        if self._numel is None:
            raise ValueError(f"shape of {self.name!r} is not fully known: {self.shape}")
        return self._numel

    @property
    def bits(self) -> int:
        """Bits of one element (of a map's entry: key + value)."""
        if self.dtype is None:
            raise ValueError(f"dtype of {self.name!r} is unknown")
        strings = 8 * (self.string_bytes or 0)  # a string element's bits at the assumed length
        return (strings if self.dtype == "string" else DTYPE_BITS[self.dtype]) + (
            0 if self.key_dtype is None else DTYPE_BITS[self.key_dtype]
        )

    @property
    def nbytes(self) -> int:
        """Bytes in memory: sub-byte types pack, rounded up to whole bytes."""
        if (
            self._numel is None or self.key_dtype is not None or self.dtype is None or self.string_bytes is not None
        ):  # the walk asks this of every tensor of every node:
            return (
                0 if self._numel == 0 else (self.numel * self.bits + 7) // 8
            )  # raises, naming what is unknown (an empty sequence has no dtype to tell)
        return (self._numel * DTYPE_BITS[self.dtype] + 7) // 8  # numel and bits inline

    def unknown_dims(self) -> list[Dim]:
        if self.shape is None:
            return [None]
        return [d for d in self.shape if not isinstance(d, int)]

    def to_dict(self) -> dict:
        shown = {"name": self.name, "shape": None if self.shape is None else list(self.shape), "dtype": self.dtype}
        if self.sequence:
            return {
                **shown,
                "sequence": True,
                "elements": None if self.elements is None else [list(shape) for shape in self.elements],
            }
        return shown if self.key_dtype is None else {**shown, "key_dtype": self.key_dtype}

    def value_info(self) -> onnx.ValueInfoProto:
        """This tensor (map, sequence of maps) declared as a graph input/output of a scratch model."""
        if self.dtype is None:
            raise ValueError(f"dtype of {self.name!r} is unknown")
        if self.sequence:
            element = onnx.helper.make_tensor_type_proto(
                elem_type(self.dtype), None if self.shape is None else list(self.shape)
            )
            return onnx.helper.make_value_info(self.name, onnx.helper.make_sequence_type_proto(element))
        if self.key_dtype is None:
            return onnx.helper.make_tensor_value_info(
                self.name, elem_type(self.dtype), None if self.shape is None else list(self.shape)
            )
        value = onnx.helper.make_tensor_type_proto(elem_type(self.dtype), [])
        kind = onnx.helper.make_map_type_proto(elem_type(self.key_dtype), value)
        if self.shape is not None and len(self.shape) == 2:
            kind = onnx.helper.make_sequence_type_proto(kind)
        return onnx.helper.make_value_info(self.name, kind)


if TYPE_CHECKING:

    class RankedTensor(TensorInfo):
        """A TensorInfo whose rank is known (`ranked_tensor` narrows one), for the type checker only."""

        shape: tuple[Dim, ...]

    class KnownTensor(RankedTensor):
        """A TensorInfo whose shape is concrete ints and whose dtype is known (`is_known`), for the
        type checker only: the walk calls a cost rule, and the shape engine a shape rule, once every
        present tensor of the node is known (`known` narrows one)."""

        shape: tuple[int, ...]
        dtype: str
        elements: tuple[tuple[int, ...], ...] | None

else:
    RankedTensor = KnownTensor = TensorInfo  # the same objects at run time: only the checker tells them apart


def ranked_tensor(tensor: TensorInfo | None) -> TypeGuard[RankedTensor]:
    """`tensor is not None and tensor.shape is not None`, narrowing it to a RankedTensor."""
    return tensor is not None and tensor.shape is not None


def known(tensor: TensorInfo | None) -> TypeGuard[KnownTensor]:
    """`tensor is not None and tensor.is_known`, narrowing it to a KnownTensor."""
    return tensor is not None and tensor.is_known


def sequence_of(name: str, elements: Sequence[tuple[Dim, ...]], dtype: str | None) -> TensorInfo:
    """A sequence of tensors of these shapes: its `shape` the dims they all agree on."""
    ranks = {len(shape) for shape in elements}
    common = (
        tuple(dims[0] if len(set(dims)) == 1 else None for dims in zip(*elements, strict=False))
        if len(ranks) == 1
        else None
    )
    return TensorInfo(name, common, dtype, None, True, tuple(tuple(shape) for shape in elements))


def element_inputs(inputs: Sequence[TensorInfo], index: int) -> list[TensorInfo]:
    """What a SequenceMap body's run `index` sees: each sequence input's element `index`, each
    tensor input as it is."""
    return [
        TensorInfo(t.name, t.elements[index], t.dtype) if t.sequence and t.elements is not None else t for t in inputs
    ]


def all_ints(shape: tuple[Dim, ...]) -> TypeGuard[tuple[int, ...]]:
    """`all(isinstance(d, int) for d in shape)` as a plain loop, which costs less than the
    generator: every value of a graph gets a TensorInfo, thousands of them."""
    for dim in shape:  # noqa: SIM110 (the loop is the point: see the docstring)
        if not isinstance(dim, int):
            return False
    return True


_FLOATING = {"float32", "float64", "float16", "bfloat16"}


def is_floating(dtype: str | None) -> bool:
    """Whether a dtype name is a floating-point type (fp8s included)."""
    return dtype is not None and dtype.startswith(("float", "bfloat"))


def with_string_bytes(values: dict[str, TensorInfo], string_bytes: int) -> dict[str, TensorInfo]:
    """The value table with every string tensor sized at `string_bytes` an element (their average
    length); the table itself where it holds none, or where each already has a size."""
    strings = {name: dataclasses.replace(info, string_bytes=string_bytes) for name, info in values.items()
               if info.dtype == "string" and info.string_bytes is None}  # fmt: skip
    return {**values, **strings} if strings else values


def with_precision(values: dict[str, TensorInfo], precision: str) -> dict[str, TensorInfo]:
    """The value table with every floating-point tensor in `precision` (a PRECISIONS key)."""
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; choose from {', '.join(PRECISIONS)}")
    target = PRECISIONS[precision]
    return {
        name: TensorInfo(info.name, info.shape, target, info.key_dtype, info.sequence, info.elements)
        if info.dtype in _FLOATING
        else info
        for name, info in values.items()
    }
