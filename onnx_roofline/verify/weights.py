"""Weights for the run: the real ones where the external data file is there, deterministic random
ones where it is absent (the fixtures ship without it). Always into an in-memory copy: the user's
file is never written."""

from __future__ import annotations

import functools
import math
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import external_data_helper, helper, numpy_helper

from onnx_roofline.tensors import DTYPE_BITS, dtype_name
from onnx_roofline.verify.errors import VerifyError

PROTOBUF_LIMIT = 2**31 - 1  # onnxruntime takes the model as one serialized protobuf
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
    info = external_data_helper.ExternalDataInfo(tensor)
    if not (base_dir / info.location).is_file():
        return False
    try:
        external_data_helper.load_external_data_for_tensor(tensor, str(base_dir))
    except (OSError, ValueError):
        return False
    expected = (math.prod(tensor.dims) * DTYPE_BITS.get(dtype_name(tensor.data_type) or "", 0) + 7) // 8
    if len(tensor.raw_data) != expected:  # truncated file: treat as absent rather than run garbage shapes
        tensor.ClearField("raw_data")
        return False
    tensor.data_location = onnx.TensorProto.DEFAULT
    del tensor.external_data[:]
    return True


def _fill(tensor: onnx.TensorProto, array: np.ndarray) -> None:
    del tensor.external_data[:]
    tensor.data_location = onnx.TensorProto.DEFAULT
    tensor.raw_data = numpy_helper.from_array(array, tensor.name).raw_data
