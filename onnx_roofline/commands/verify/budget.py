"""What a verification may cost, checked from the static analysis before a weight is synthesized
or a session opened: a Loop of 10^18 trips, a 50,000×50,000 absent weight or a bound dim of 2^40
is refused in one line instead of running for ever or filling memory. The flags `--max-flops`,
`--max-memory` and `--max-node-runs` raise the limits (docs/verify.md)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import onnx

from onnx_roofline.commands.verify.errors import VerifyError
from onnx_roofline.commands.verify.limits import Budget
from onnx_roofline.model.tensors import DTYPE_BITS, dtype_name
from onnx_roofline.report.model import Report
from onnx_roofline.report.units import si

PROTOBUF_LIMIT = 2**31 - 1  # onnxruntime takes the model as one serialized protobuf
FED_TYPES = frozenset(
    {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16, onnx.TensorProto.DOUBLE}
)
"""The external weights fed as arrays (bfloat16 as its bits: run.runtime_feeds); the others
(indices, quantized and packed weights, which some onnxruntime kernels need constant) go inline
into the model the session loads."""


@dataclass(frozen=True)
class Cost:
    """The run as the analysis predicts it."""

    flops: int
    memory: int
    node_runs: int
    weights: int  # bytes of every initializer


def check(
    report: Report,
    model: onnx.ModelProto,
    feeds: Mapping[str, tuple[tuple[int, ...], np.dtype]],
    constants: Mapping[str, np.ndarray],
    budget: Budget,
    chunk: int,
) -> Cost:
    """The predicted cost, or a VerifyError naming the limit it passes and what passes it. Memory,
    as the run spends it (verify/run.py): the fed weights once; the others inline in the model and
    in its session, twice; the feeds; and a run's outputs (`chunk` bytes) beside what is alive in it."""

    weights = sum(tensor_bytes(t) for t in model.graph.initializer)
    fed = sum(
        tensor_bytes(t)
        for t in model.graph.initializer
        if t.data_location == onnx.TensorProto.EXTERNAL and t.data_type in FED_TYPES
    )
    inputs = sum(math.prod(shape) * np.dtype(dtype).itemsize for shape, dtype in feeds.values())
    cost = Cost(
        report.totals.flops, fed + 2 * (weights - fed) + inputs + 2 * chunk, node_runs(model.graph, constants), weights
    )
    inlined = (
        weights
        - fed
        - sum(tensor_bytes(t) for t in model.graph.initializer if t.data_location != onnx.TensorProto.EXTERNAL)
    )
    if model.ByteSize() + inlined > PROTOBUF_LIMIT:  # the external weights that are not fed go into the model
        raise VerifyError(
            f"the model onnxruntime loads, with its integer, quantized and packed weights inline ({si(weights - fed, 'B')}), "
            "exceeds protobuf's 2 GB limit on one model; dims do not change weights: verify a smaller model (fewer layers)"
        )
    held = fed + 2 * (weights - fed)  # as cost.memory counts them
    smaller = "raise it, or bind smaller dims"
    weights_alone = f"its weights alone take {si(held, 'B')}, which no dim changes: raise it, or verify a smaller model"
    for value, limit, flag, what, fix in (
        (cost.flops, budget.max_flops, "--max-flops", "FLOPs", smaller),
        (
            cost.memory,
            budget.max_memory,
            "--max-memory",
            "bytes of memory (weights, feeds, activations)",
            weights_alone if held > budget.max_memory else smaller,
        ),
        (cost.node_runs, budget.max_node_runs, "--max-node-runs", "node runs", smaller),
    ):
        if value > limit:
            raise VerifyError(f"the run would take {value:.3g} {what}, over {flag} {limit:.3g}: {fix}")
    return cost


def tensor_bytes(tensor: onnx.TensorProto) -> int:
    bits = DTYPE_BITS.get(dtype_name(tensor.data_type) or "", 8) or 8
    return (math.prod(tensor.dims) * bits + 7) // 8


def node_runs(graph: onnx.GraphProto, constants: Mapping[str, np.ndarray], repeat: int = 1) -> int:
    """Kernel launches: one per node, a Loop's body once per trip, an If's costlier branch. A Loop
    whose trip count is not known before the run (absent, or computed from data) cannot be bounded
    and is refused; one fed by a graph input runs at most once (verify feeds small integers 0/1)."""
    known = {**constants, **{t.name: t for t in graph.initializer}}
    known.update(
        {
            n.output[0]: a.t
            for n in graph.node
            if n.op_type == "Constant" and n.output
            for a in n.attribute
            if a.name == "value"
        }
    )
    inputs = {value.name for value in graph.input}
    total = 0
    for node in graph.node:
        total += repeat
        if total > 2**63:
            return total
        bodies = {a.name: a.g for a in node.attribute if a.type == onnx.AttributeProto.GRAPH}
        if node.op_type == "Loop" and "body" in bodies:
            trips = _trip_count(node, known, inputs)
            total += node_runs(bodies["body"], constants, repeat * trips)
        elif bodies:
            total += max(node_runs(body, constants, repeat) for body in bodies.values())
    return total


def _trip_count(node: onnx.NodeProto, known: Mapping, inputs: set[str]) -> int:
    name = node.input[0] if node.input else ""
    label = f"Loop {node.name!r}" if node.name else "a Loop"
    if name in inputs and name not in known:
        return 1
    value = known.get(name) if name else None
    if isinstance(value, onnx.TensorProto):
        scalar = math.prod(value.dims) == 1 and value.data_location != onnx.TensorProto.EXTERNAL
        value = onnx.numpy_helper.to_array(value) if scalar else None
    if value is None or np.size(value) != 1:
        raise VerifyError(f"{label}: its trip count is not known before the run, so verify cannot bound it")
    return max(int(np.asarray(value).reshape(-1)[0]), 0)
