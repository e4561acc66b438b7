"""Shared test helpers: one-node models built with onnx.helper, analyzed end to end."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")  # before any test imports onnxruntime, the generators' included

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnx_roofline import analyze
from onnx_roofline.report.model import NodeResult

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"

DTYPES = {
    "float32": TensorProto.FLOAT,
    "float16": TensorProto.FLOAT16,
    "bfloat16": TensorProto.BFLOAT16,
    "float64": TensorProto.DOUBLE,
    "int64": TensorProto.INT64,
    "int32": TensorProto.INT32,
    "int8": TensorProto.INT8,
    "uint8": TensorProto.UINT8,
    "bool": TensorProto.BOOL,
    "int4": TensorProto.INT4,
    "uint4": TensorProto.UINT4,
    "float8e4m3fn": TensorProto.FLOAT8E4M3FN,
}

Spec = tuple  # (name, dtype, shape)


def one_node_model(
    op_type: str,
    inputs: Sequence[Spec | str],
    outputs: Sequence[Spec | str],
    attrs: dict | None = None,
    initializers: dict[str, np.ndarray] | None = None,
    opset: int = 21,
    domain: str = "",
    extra_opsets: dict[str, int] | None = None,
) -> onnx.ModelProto:
    """A model with one node. `inputs`/`outputs` entries are (name, dtype, shape) or a bare name
    (outputs: shape left to inference; inputs: "" for an absent optional input). Initializers carry
    real (small) values so rules that read constants (Slice starts, Pad pads) see them."""
    initializers = initializers or {}
    graph_inputs, names = [], []
    for spec in inputs:
        name = spec if isinstance(spec, str) else spec[0]
        names.append(name)
        if isinstance(spec, tuple) and name not in initializers:
            graph_inputs.append(helper.make_tensor_value_info(name, DTYPES[spec[1]], spec[2]))
    graph_outputs, out_names = [], []
    for spec in outputs:
        if isinstance(spec, str):
            out_names.append(spec)
            graph_outputs.append(helper.make_empty_tensor_value_info(spec))
        else:
            out_names.append(spec[0])
            graph_outputs.append(helper.make_tensor_value_info(spec[0], DTYPES[spec[1]], spec[2]))
    node = helper.make_node(op_type, names, out_names, domain=domain, **(attrs or {}))
    tensors = [numpy_helper.from_array(np.asarray(v), k) for k, v in initializers.items()]
    graph = helper.make_graph([node], "one_node", graph_inputs, graph_outputs, initializer=tensors)
    imports = [helper.make_opsetid("", opset)]
    imports += [helper.make_opsetid(d, v) for d, v in (extra_opsets or {}).items()]
    if domain and domain not in (extra_opsets or {}):
        imports.append(helper.make_opsetid(domain, 1))
    return helper.make_model(graph, opset_imports=imports)


def analyze_node(*args, hw: str = "h100", **kwargs) -> NodeResult:
    """The single node's result; fails the test unless it was costed."""
    report = analyze(one_node_model(*args, **kwargs), hw=hw)
    (node,) = report.nodes
    assert node.status == "ok", node.reason
    return node


@pytest.fixture
def fixtures_dir() -> Path:
    return FIXTURES


def fp16_graph(nodes, inputs, outputs, weights=None, opsets=(("", 21),)) -> onnx.ModelProto:
    """A small fp16 graph: inputs/outputs as (name, shape), weights as name → shape (zeros),
    `opsets` as (domain, version) pairs."""
    tensors = [numpy_helper.from_array(np.zeros(shape, np.float16), name) for name, shape in (weights or {}).items()]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT16, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT16, s) for n, s in outputs],
        initializer=tensors,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])


def symbolic_matmul() -> onnx.ModelProto:
    """[batch, sequence, 768] × [768, 3072], with batch and sequence symbolic."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT16, ["batch", "sequence", 768])
    w = helper.make_tensor_value_info("w", TensorProto.FLOAT16, [768, 3072])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT16, ["batch", "sequence", 3072])
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mlp")], "g", [x, w], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
