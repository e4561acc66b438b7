"""Values for small graph inputs: `--value max_steps=16` gives a Loop's trip count, a scalar that
sizes a Range, a shape tensor fed at run time. The analysis cannot cost what depends on a value
it does not know; given one, it folds and costs as if the model held it as a constant."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence

import numpy as np
import onnx
from onnx import numpy_helper

from onnx_roofline.errors import DimensionError
from onnx_roofline.model.constants import MAX_FOLDED_ELEMENTS

_NAME_VALUE = re.compile(r"^\s*([^=\s][^=]*?)\s*=\s*(.+?)\s*$")
_NUMBER = re.compile(r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?$")


def parse_value(text: str) -> tuple[str, tuple[float, ...] | float]:
    """`steps=16` → ("steps", 16); `shape=1,3,224` → ("shape", (1, 3, 224)): a scalar, or a
    1-D tensor written as a comma-separated list."""
    match = _NAME_VALUE.match(text)
    parts = [p.strip() for p in match.group(2).split(",")] if match else []
    if not match or not parts or not all(_NUMBER.match(p) for p in parts):
        raise DimensionError(f"malformed --value {text!r}: expected NAME=NUMBER or NAME=N,N,..., e.g. max_steps=16")
    numbers = tuple(float(p) if any(c in p for c in ".eE") else int(p) for p in parts)
    return match.group(1), numbers if "," in match.group(2) else numbers[0]


_RATE_WORDS = frozenset({"sr", "rate", "samplerate", "sample_rate", "sampling_rate", "sampling", "fs"})
SAMPLE_RATE = 16_000  # what a speech model's rate input (Silero VAD's `sr`) takes most often


MAX_LISTED = 16
"""The longest 1-D input a hint spells a value for (`--value sizes=N,N,N`)."""


def value_flag(name: str, shape: Sequence | None = ()) -> str | None:
    """The flag that gives a graph input its value, quoted for a shell, in the form its `shape`
    takes: `--value sr=16000` for a scalar sample rate (the 16 kHz speech models take), `--value
    'max steps=N'` for another scalar (a shape None: not known, a scalar assumed), `--value
    sizes=N,N,N` for a 1-D input of 3. None where --value cannot give it: an input of rank 2 or
    more (a token or pixel tensor), a 1-D one longer than MAX_LISTED or of a size not bound."""
    words = {w for w in re.split(r"[^a-z0-9]+", name.lower()) if w}
    example = SAMPLE_RATE if words & _RATE_WORDS or name.lower() in _RATE_WORDS else "N"
    if shape:
        if len(shape) > 1 or not isinstance(shape[0], int) or not 0 < shape[0] <= MAX_LISTED:
            return None
        example = ",".join(["N"] * shape[0]) if shape[0] > 1 else "N"
    return f"--value {shlex.quote(f'{name}={example}')}"


def if_conditions(graph: onnx.GraphProto, values: Mapping[str, Sequence[float] | float]) -> dict[str, bool]:
    """The values given to an If's condition computed in the graph (not a graph input): a score
    compared against a threshold, which is data. `--value COND=1` takes the then_branch of every If
    it conditions, 0 the else_branch; nothing else reads it. No value given: no walk."""
    if not values:
        return {}
    conditions, graphs = set(), [graph]
    while graphs:  # an If in a body (a detector's NMS tail) too
        for node in graphs.pop().node:
            if node.op_type == "If" and not node.domain and node.input:
                conditions.add(node.input[0])
            graphs.extend(attr.g for attr in node.attribute if attr.type == onnx.AttributeProto.GRAPH)
            graphs.extend(g for attr in node.attribute if attr.type == onnx.AttributeProto.GRAPHS for g in attr.graphs)
    inputs = {value.name for value in graph.input}
    chosen = {}
    for name, value in values.items():
        if name in conditions and name not in inputs:
            if isinstance(value, tuple) and len(value) != 1:
                raise _value_error(name, f"{len(value)} values for an If's condition, which holds one")
            chosen[name] = bool(value[0] if isinstance(value, tuple) else value)
    return chosen


def bind_values(model: onnx.ModelProto, values: Mapping[str, Sequence[float] | float]) -> set[str]:
    """Give graph inputs their values (in place, on the loader's copy): each becomes an
    initializer of the input's declared element type, which every pass reads as a constant.
    Returns the names bound, which are not weights."""
    inputs = {value.name: value for value in model.graph.input}
    for name, array in value_arrays(model, values).items():
        model.graph.initializer.append(numpy_helper.from_array(array, name))
        declared = inputs[name].type.tensor_type
        declared.shape.Clear()
        for size in array.shape:
            declared.shape.dim.add().dim_value = size
    return set(values)


def value_arrays(model: onnx.ModelProto, values: Mapping[str, Sequence[float] | float]) -> dict[str, np.ndarray]:
    """Each value as an array of its graph input's element type and rank: what bind_values makes
    a constant of, and what verify feeds the run."""
    inputs = {value.name: value for value in model.graph.input}
    initialized = {t.name for t in model.graph.initializer}
    arrays = {}
    for name, value in values.items():
        declared = inputs.get(name)
        if declared is None or name in initialized:
            listed = ", ".join(n for n in inputs if n not in initialized)
            raise DimensionError(
                f"values key {name!r} is not a model input (inputs: {listed})",
                cli=f"--value {name!r} is not a model input (inputs: {listed})",
            )
        arrays[name] = _typed(name, declared, value)
    return arrays


def _typed(name: str, declared: onnx.ValueInfoProto, value: Sequence[float] | float) -> np.ndarray:
    """The value as an array of the input's element type and rank (a scalar or a 1-D tensor)."""
    tensor_type = declared.type.tensor_type
    try:
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor_type.elem_type)
    except (KeyError, ValueError):
        dtype = None
    if dtype is None or dtype.kind not in "biuf":
        raise _value_error(name, "the input is not a numeric tensor")
    array = np.asarray(value)
    if array.size > MAX_FOLDED_ELEMENTS:
        raise _value_error(name, f"{array.size} elements; values are for small inputs (at most {MAX_FOLDED_ELEMENTS})")
    if dtype.kind in "biu" and not np.all(np.equal(np.mod(array, 1), 0)):
        raise _value_error(name, f"the input holds integers, {value!r} is not one")
    if dtype.kind in "iu" and (np.any(array < np.iinfo(dtype).min) or np.any(array > np.iinfo(dtype).max)):
        raise _value_error(name, f"{value!r} does not fit the input's {dtype.name}")
    if tensor_type.HasField("shape"):
        rank = len(tensor_type.shape.dim)
        if rank == 1 and array.ndim == 0:
            array = array.reshape(1)
        if rank != array.ndim:
            raise _value_error(name, f"a rank-{array.ndim} value for an input of rank {rank}")
        for dim, size in zip(tensor_type.shape.dim, array.shape, strict=False):
            if dim.HasField("dim_value") and dim.dim_value != size:
                raise _value_error(name, f"{size} elements where the model declares {dim.dim_value}")
    return array.astype(dtype)


def _value_error(name: str, what: str) -> DimensionError:
    """`values['x']: ...` for Python, `--value x: ...` for the command line."""
    return DimensionError(f"values[{name!r}]: {what}", cli=f"--value {shlex.quote(name)}: {what}")
