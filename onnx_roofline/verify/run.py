"""One onnxruntime run that returns every intermediate value: each node output becomes a graph
output, and graph optimizations are off so that the values are the graph's own, one node to one
kernel (a fused kernel would not produce the values in between)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import onnx

from onnx_roofline.verify.errors import VerifyError

PROVIDERS = ["CPUExecutionProvider"]


def session_options(optimize: bool = False, threads: int | None = None):
    import onnxruntime as ort

    ort.set_default_logger_severity(3)  # the process-wide logger too: its coloured warnings are not ours to print
    options = ort.SessionOptions()
    options.graph_optimization_level = (
        ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimize else ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    )
    options.log_severity_level = 3  # errors only: warnings about unused initializers are noise here
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


def expose_all(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy in which every node output is also a graph output (untyped: the runtime's own type
    is what gets observed, not the inferred one)."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    present = {value.name for value in copy.graph.output}
    for node in copy.graph.node:
        for name in node.output:
            if name and name not in present:
                copy.graph.output.append(onnx.ValueInfoProto(name=name))
                present.add(name)
    return copy


def run_all(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray], threads: int | None = None) -> dict[str, np.ndarray]:
    """Every node output's runtime value (tensors only: sequences and maps are left out)."""
    session = open_session(expose_all(model), session_options(optimize=False, threads=threads))
    names = [output.name for output in session.get_outputs()]
    try:
        results = session.run(names, dict(feeds))
    except Exception as exc:
        raise VerifyError(f"onnxruntime failed to run the model: {_first_line(exc)}") from None
    return {name: value for name, value in zip(names, results) if isinstance(value, np.ndarray)}


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]
