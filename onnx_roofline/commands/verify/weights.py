"""Weights for the run: the real ones where the external data file is there, deterministic random
ones where it is absent (the fixtures ship without it). Always into an in-memory copy: the user's
file is never written. A data file is read only through `files` (a regular file inside the model's
folder, the span checked against it); the budget has been checked before this runs."""

from __future__ import annotations

import functools
import math
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

from onnx_roofline.commands.verify.budget import PROTOBUF_LIMIT, tensor_bytes
from onnx_roofline.commands.verify.errors import VerifyError
from onnx_roofline.model import files
from onnx_roofline.model.constants import RAW_DTYPES
from onnx_roofline.model.tensors import dtype_name

WEIGHT_SCALE = 0.02  # GPT-2's init std: keeps activations finite through many layers
POOL_SIZE = 1_000_003  # prime, so no tensor row lines up with the pool's period


@dataclass(frozen=True, eq=False)
class Weights:
    """The external initializers' values: read from their data file where it is there,
    synthesized where it is absent. Once each, as arrays: the run feeds them to onnxruntime as
    they are (run.observe), instead of a model copy with every weight inline, its serialized bytes
    and the session's own copy — three times the weights."""

    source: onnx.ModelProto  # the model as loaded: its external tensors are these
    arrays: dict[str, np.ndarray]
    loaded: int  # external tensors read from their data file
    synthesized: int  # external tensors whose data file is absent

    @functools.cached_property
    def model(self) -> onnx.ModelProto:
        """A copy of the model with every initializer inline (what a timing run loads)."""
        size = self.source.ByteSize() + sum(array.nbytes for array in self.arrays.values())
        if size > PROTOBUF_LIMIT:
            raise VerifyError(
                "the model with its weights inline, as a timed run loads it, exceeds protobuf's 2 GB limit on one model: "
                "verify it without --timing, or verify a smaller model"
            )
        copy = onnx.ModelProto()
        copy.CopyFrom(self.source)
        inline(copy, self.arrays)
        return copy


def materialize(model: onnx.ModelProto, base_dir: str | Path | None, seed: int = 0) -> Weights:
    """The values of `model`'s external initializers (`model` is not modified)."""
    arrays: dict[str, np.ndarray] = {}
    loaded = 0
    for tensor in initializers(model.graph):
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
        data = _load(tensor, Path(base_dir)) if base_dir is not None else None
        loaded += data is not None
        arrays[tensor.name] = synthetic(tensor, seed) if data is None else data
    return Weights(model, arrays, loaded, len(arrays) - loaded)


def inline(model: onnx.ModelProto, arrays: dict[str, np.ndarray]) -> None:
    """Puts these values into `model`'s initializers of their names (bodies' too), in place of their external data."""
    for tensor in initializers(model.graph):
        if tensor.name in arrays:
            del tensor.external_data[:]
            tensor.data_location = onnx.TensorProto.DEFAULT
            tensor.raw_data = numpy_helper.from_array(arrays[tensor.name], tensor.name).raw_data


def initializers(graph: onnx.GraphProto) -> Iterator[onnx.TensorProto]:
    """The graph's initializers, then those of every body in it (If branches, Loop and Scan bodies)."""
    yield from graph.initializer
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH:
                yield from initializers(attribute.g)
            elif attribute.type == onnx.AttributeProto.GRAPHS:
                for body in attribute.graphs:
                    yield from initializers(body)


def synthetic(tensor: onnx.TensorProto, seed: int) -> np.ndarray:
    """Deterministic per tensor name (not per position): floats N(0, 0.02²), integers zero (valid
    as indices), bools true (a mask that hides nothing). Floats are cut from one pool of normals
    at a name-dependent offset: drawing GPT-2's 124M values afresh takes seconds, copying them not."""
    dtype = helper.tensor_dtype_to_np_dtype(tensor.data_type)
    shape = tuple(tensor.dims)
    if dtype == np.bool_:
        return np.ones(shape, dtype=dtype)
    if not (
        np.issubdtype(dtype, np.floating) or dtype_name(tensor.data_type) == "bfloat16"
    ):  # ml_dtypes' bfloat16 is no np.floating
        return np.zeros(shape, dtype=dtype)
    pool = _pool(seed)
    return (
        _cyclic(pool, zlib.crc32(tensor.name.encode()) % pool.size, math.prod(shape))
        .reshape(shape)
        .astype(dtype, copy=False)
    )


def _cyclic(pool: np.ndarray, offset: int, count: int) -> np.ndarray:
    """pool[(offset + i) % pool.size] for i < count, as np.resize(np.roll(pool, -offset), count)
    gives it, in an array of its own size: np.resize returns a view of a copy rounded up to whole
    pools, 4 MB behind every bias of 768 floats."""
    rolled = np.roll(pool, -offset)
    values = np.empty(count, pool.dtype)
    for start in range(0, count, pool.size):
        values[start : start + pool.size] = rolled[: count - start]
    return values


@functools.lru_cache(maxsize=2)
def _pool(seed: int) -> np.ndarray:
    pool = WEIGHT_SCALE * np.random.default_rng(seed).standard_normal(POOL_SIZE, dtype=np.float32)
    pool.flags.writeable = False
    return pool


def _load(tensor: onnx.TensorProto, base_dir: Path) -> np.ndarray | None:
    """The tensor's value from its data file; None when that file is absent."""
    ref = files.locate(tensor, base_dir)
    if ref is None:
        return None
    expected = tensor_bytes(tensor)
    if ref.length != expected:
        raise VerifyError(
            f"tensor {tensor.name!r}: its external data is {ref.length} bytes, its dims and type need {expected} (in {ref.location!r})"
        )
    data = files.read_span(ref)
    dtype = RAW_DTYPES.get(tensor.data_type)
    if dtype is not None:  # the common case, without a copy
        return np.frombuffer(data, dtype).reshape(tuple(tensor.dims))
    return numpy_helper.to_array(
        onnx.TensorProto(name=tensor.name, data_type=tensor.data_type, dims=tensor.dims, raw_data=data)
    )
