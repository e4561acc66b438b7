"""Weights for the run: the real ones where the external data file is there, deterministic random
ones where it is absent (the fixtures ship without it). Always into an in-memory copy: the user's
file is never written. A data file is read only through `files` (a regular file inside the model's
folder, the span checked against it); the budget has been checked before this runs."""

from __future__ import annotations

import functools
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

from onnx_roofline import files
from onnx_roofline.verify.budget import PROTOBUF_LIMIT, tensor_bytes
from onnx_roofline.verify.errors import VerifyError

WEIGHT_SCALE = 0.02  # GPT-2's init std: keeps activations finite through many layers
POOL_SIZE = 1_000_003  # prime, so no tensor row lines up with the pool's period


@dataclass(frozen=True)
class Weights:
    model: onnx.ModelProto  # every initializer inline
    loaded: int  # external tensors read from their data file
    synthesized: int  # external tensors whose data file is absent


def materialize(model: onnx.ModelProto, base_dir: str | Path | None, seed: int = 0) -> Weights:
    """A copy of `model` whose external initializers all carry data inline."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    loaded = synthesized = 0
    size = model.ByteSize()
    for tensor in copy.graph.initializer:
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
        if base_dir is not None and _load(tensor, Path(base_dir)):
            loaded += 1
        else:
            _fill(tensor, synthetic(tensor, seed))
            synthesized += 1
        size += len(tensor.raw_data)
    if size > PROTOBUF_LIMIT:
        raise VerifyError("the model with its weights inline exceeds protobuf's 2 GB: bind smaller dims or verify a smaller model")
    return Weights(copy, loaded, synthesized)


def synthetic(tensor: onnx.TensorProto, seed: int) -> np.ndarray:
    """Deterministic per tensor name (not per position): floats N(0, 0.02²), integers zero (valid
    as indices), bools true (a mask that hides nothing). Floats are cut from one pool of normals
    at a name-dependent offset: drawing GPT-2's 124M values afresh takes seconds, copying them not."""
    dtype = helper.tensor_dtype_to_np_dtype(tensor.data_type)
    shape = tuple(tensor.dims)
    if dtype == np.bool_:
        return np.ones(shape, dtype=dtype)
    if not np.issubdtype(dtype, np.floating):
        return np.zeros(shape, dtype=dtype)
    pool = _pool(seed)
    offset = zlib.crc32(tensor.name.encode()) % pool.size
    return np.resize(np.roll(pool, -offset), shape).astype(dtype, copy=False)


@functools.lru_cache(maxsize=2)
def _pool(seed: int) -> np.ndarray:
    pool = WEIGHT_SCALE * np.random.default_rng(seed).standard_normal(POOL_SIZE, dtype=np.float32)
    pool.flags.writeable = False
    return pool


def _load(tensor: onnx.TensorProto, base_dir: Path) -> bool:
    """The tensor's bytes from its data file; False when that file is absent."""
    ref = files.locate(tensor, base_dir)
    if ref is None:
        return False
    expected = tensor_bytes(tensor)
    if ref.length != expected:
        raise VerifyError(
            f"tensor {tensor.name!r}: its external data is {ref.length} bytes, its dims and type need {expected} (in {ref.location!r})"
        )
    data = files.read_span(ref)
    del tensor.external_data[:]
    tensor.data_location = onnx.TensorProto.DEFAULT
    tensor.raw_data = data
    return True


def _fill(tensor: onnx.TensorProto, array: np.ndarray) -> None:
    del tensor.external_data[:]
    tensor.data_location = onnx.TensorProto.DEFAULT
    tensor.raw_data = numpy_helper.from_array(array, tensor.name).raw_data
