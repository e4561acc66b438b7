"""onnxruntime runs that observe every intermediate value: each node output becomes a graph output,
and graph optimizations are off so that the values are the graph's own, one node to one kernel
(a fused kernel would not produce the values in between).

Memory stays at the weights and about twice the largest set of activations alive at once: the
weights are fed as the arrays `weights.materialize` made (one copy, where a model with them inline
costs three: the proto, its bytes and the session's), and the outputs are observed a chunk at a
time, each chunk's run returning at most `chunk_bytes` of them (their shapes and dtypes are kept,
the arrays dropped) while onnxruntime frees the rest as it goes.

The runs happen in a child process (model/isolation.py): onnxruntime crashing on a model (a
signal in its C++) is a VerifyError, exit 2 with one line, not the end of the tool. The child
shares the weights copy-on-write, and sends back only the observed shapes and dtypes."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import onnx

from onnx_roofline.commands.verify.budget import FED_TYPES
from onnx_roofline.commands.verify.errors import RunFailed, VerifyError
from onnx_roofline.model.isolation import PassCrashed, isolated
from onnx_roofline.model.tensors import TensorInfo, dtype_name

PROVIDERS = ["CPUExecutionProvider"]
CAST_OBSERVED = frozenset(
    {
        "bfloat16",
        "float8e4m3fn",
        "float8e4m3fnuz",
        "float8e5m2",
        "float8e5m2fnuz",
        "float8e8m0",
        "int4",
        "uint4",
        "float4e2m1",
        "int2",
        "uint2",
    }
)
"""Element types onnxruntime's Python API returns no array of (or a uint8 one, for some float8s):
a value of one is observed through a Cast of it to float32, which keeps its shape, and its dtype
is the session's own type for it."""
FED_AS_BITS = frozenset({"bfloat16", "float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz"})
"""Element types onnxruntime's Python API takes no array of: a feed of one (an ml_dtypes array)
is handed over as its bits, an OrtValue of that type (runtime_feeds)."""
CHUNK_FLOOR = 16 * 2**20
"""The least output bytes one run returns: a graph of small activations is observed in a few
runs, not one per node."""


def runtime_feeds(feeds: Mapping[str, Any]) -> dict[str, Any]:
    """The feeds as onnxruntime's `run` takes them: arrays of a FED_AS_BITS type as OrtValues of
    their bits, the rest as they are."""
    import onnxruntime as ort

    converted = dict(feeds)
    for name, array in feeds.items():
        kind = getattr(array, "dtype", None)
        if (
            kind is not None
            and kind.type.__module__ == "ml_dtypes"
            and dtype_name(onnx.helper.np_dtype_to_tensor_dtype(kind)) in FED_AS_BITS
        ):
            bits = np.ascontiguousarray(array).view(f"u{kind.itemsize}")
            converted[name] = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(
                bits, onnx.helper.np_dtype_to_tensor_dtype(kind)
            )
    return converted


def chunk_bytes(peak_activation_bytes: int) -> int:
    """The outputs one run returns: the largest live set the analysis finds (Footprint's peak)."""
    return max(peak_activation_bytes, CHUNK_FLOOR)


def session_options(optimize: bool = False, threads: int | None = None):
    import onnxruntime as ort

    ort.set_default_logger_severity(3)  # the process-wide logger too: its coloured warnings are not ours to print
    options = ort.SessionOptions()
    options.graph_optimization_level = (
        ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimize else ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    )
    options.log_severity_level = 4  # fatal only: an error comes back as an exception, which verify says in one line
    if threads:
        options.intra_op_num_threads = threads
    return options


def open_session(model: onnx.ModelProto, options):
    """An onnxruntime session on CPU; a model it refuses is the user's input problem (exit 2)."""
    import onnxruntime as ort

    try:
        return ort.InferenceSession(model.SerializeToString(), options, providers=PROVIDERS)
    except Exception as exc:  # onnxruntime raises its own untyped Fail/InvalidGraph/NotImplemented
        raise VerifyError(f"onnxruntime cannot load the model: {_first_line(exc)}") from None


def observe(
    model: onnx.ModelProto,
    feeds: Mapping[str, np.ndarray],
    weights: Mapping[str, np.ndarray],
    sizes: Mapping[str, int | None],
    chunk_bytes: int,
    threads: int | None = None,
) -> dict[str, TensorInfo]:
    """Every node output's runtime shape and dtype (tensors and sequences of tensors: maps are left out).
    `model` as loaded (external initializers without data), `weights` their values, `sizes` each
    node output's expected bytes (None where unknown) to cut the chunks by. Run in a child
    process: a crash of onnxruntime is a VerifyError."""
    return in_child("running the model", _observe, model, feeds, weights, sizes, chunk_bytes, threads)


def in_child(what: str, fn, *args):
    """`fn(*args)` in a child process (model/isolation.py), onnxruntime crashing in it a VerifyError."""
    try:
        return isolated(f"onnxruntime {what}", fn, *args)
    except PassCrashed as exc:
        raise VerifyError(f"onnxruntime crashed {what} ({exc.how}); nothing of it could be checked") from None


def _observe(
    model: onnx.ModelProto,
    feeds: Mapping[str, np.ndarray],
    weights: Mapping[str, np.ndarray],
    sizes: Mapping[str, int | None],
    chunk_bytes: int,
    threads: int | None = None,
) -> dict[str, TensorInfo]:
    from onnx_roofline.commands.verify.compare import observed_info

    fed = {t.name: weights[t.name] for t in model.graph.initializer if t.name in weights and t.data_type in FED_TYPES}
    lean = _weights_as_inputs(model, weights, fed)
    names = list(dict.fromkeys(name for node in model.graph.node for name in node.output if name))
    taken = {*names, *(value.name for value in model.graph.input)}  # a Cast's output needs a name no value has
    options = session_options(optimize=False, threads=threads)
    observed: dict[str, TensorInfo] = {}
    for chunk in _chunks(names, sizes, chunk_bytes):
        session = open_session(_with_outputs(lean, chunk), options)
        types = {output.name: output.type.removeprefix("tensor(").removesuffix(")") for output in session.get_outputs()}
        cast = {name: _fresh(f"{name}/as_float32", taken) for name in chunk if types.get(name) in CAST_OBSERVED}
        if cast:
            try:
                session = open_session(_with_outputs(_with_casts(lean, cast), [*chunk, *cast.values()]), options)
            except VerifyError:  # a type onnxruntime cannot even Cast (float4 on CPU): those values go unobserved
                chunk = [name for name in chunk if name not in cast]
                cast = {}
        try:
            results = session.run([cast.get(name, name) for name in chunk], runtime_feeds({**feeds, **fed}))
        except Exception as exc:
            raise RunFailed(f"onnxruntime failed to run the model: {_first_line(exc)}") from None
        for name, value in zip(chunk, results, strict=False):
            if name in cast:
                observed[name] = TensorInfo(name, tuple(int(d) for d in value.shape), types[name])
            elif _tensor_or_sequence(value):
                observed[name] = observed_info(name, value)
        del session, results
    return observed


def _fresh(name: str, taken: set[str]) -> str:
    while name in taken:
        name += "_"
    return name


def _with_casts(model: onnx.ModelProto, cast: Mapping[str, str]) -> onnx.ModelProto:
    """A copy with a Cast to float32 of each value `cast` names, to the output name it gives."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    copy.graph.node.extend(
        onnx.helper.make_node("Cast", [name], [output], to=onnx.TensorProto.FLOAT) for name, output in cast.items()
    )
    return copy


def _tensor_or_sequence(value: Any) -> bool:
    return isinstance(value, np.ndarray) or (
        isinstance(value, list) and all(isinstance(element, np.ndarray) for element in value)
    )


def _weights_as_inputs(
    model: onnx.ModelProto, weights: Mapping[str, np.ndarray], fed: Mapping[str, np.ndarray]
) -> onnx.ModelProto:
    """A copy whose `fed` weights are graph inputs, given at each run; the other `weights` inline."""
    from onnx_roofline.commands.verify.weights import inline

    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    graph = copy.graph
    kept = [tensor for tensor in graph.initializer if tensor.name not in fed]
    declared = {value.name for value in graph.input}
    graph.input.extend(
        onnx.helper.make_tensor_value_info(t.name, t.data_type, t.dims)
        for t in graph.initializer
        if t.name in fed and t.name not in declared
    )
    del graph.initializer[:]
    graph.initializer.extend(kept)
    inline(copy, {name: array for name, array in weights.items() if name not in fed})
    return copy


def _with_outputs(model: onnx.ModelProto, names: Sequence[str]) -> onnx.ModelProto:
    """A copy whose graph outputs are these values (untyped: the runtime's own type is what gets
    observed, not the inferred one)."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    del copy.graph.output[:]
    copy.graph.output.extend(onnx.ValueInfoProto(name=name) for name in names)
    return copy


def _chunks(names: Sequence[str], sizes: Mapping[str, int | None], chunk_bytes: int) -> Iterator[list[str]]:
    """The names in order, cut where a chunk's expected bytes would pass `chunk_bytes` (a value of
    unknown size counts as the largest known one)."""
    largest = max((size for size in sizes.values() if size is not None), default=0)
    chunk: list[str] = []
    total = 0
    for name in names:
        size = sizes.get(name)
        size = largest if size is None else size
        if chunk and total + size > chunk_bytes:
            yield chunk
            chunk, total = [], 0
        chunk.append(name)
        total += size
    if chunk:
        yield chunk


_SOURCE_LOCATION = re.compile(
    r"/onnxruntime_src/\S+:\d+ (?:[\w:~<>]+\(.*?\) )?"
)  # where in onnxruntime, and the C++ signature


def _first_line(exc: BaseException) -> str:
    """onnxruntime's message on one line, whole: without the source location and C++ signature it
    starts with (`graph.cc:1357 onnxruntime::Graph::Graph(const onnxruntime::Model&, …)`, hundreds
    of characters before what went wrong). Never cut: its end says what went wrong."""
    text = str(exc).strip() or type(exc).__name__
    return _SOURCE_LOCATION.sub("", " ".join(line.strip() for line in text.splitlines() if line.strip()))
