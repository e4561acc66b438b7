"""Builders of hostile inputs for tests/test_hostile.py, test_audit.py and test_fuzz.py: small
models made with onnx.helper (each wrong in one way), external-data references, special files."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


def model(nodes, inputs, outputs, initializers=(), opset: int | None = OPSET, **kwargs) -> onnx.ModelProto:
    """A model from (name, dtype, shape) inputs/outputs; `opset=None` imports none."""
    graph = helper.make_graph(
        nodes,
        "hostile",
        [helper.make_tensor_value_info(n, d, s) for n, d, s in inputs],
        [helper.make_tensor_value_info(n, d, s) for n, d, s in outputs],
        list(initializers),
    )
    made = helper.make_model(graph, opset_imports=[] if opset is None else [helper.make_opsetid("", opset)], **kwargs)
    return made


def relu(shape=(2, 4), **kwargs) -> onnx.ModelProto:
    """x → Relu → y: the smallest valid model."""
    return model(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        [("x", TensorProto.FLOAT, list(shape))],
        [("y", TensorProto.FLOAT, list(shape))],
        **kwargs,
    )


def one_node(op: str, inputs: list[str], attrs: dict, shape=(2, 4), **kwargs) -> onnx.ModelProto:
    node = helper.make_node(op, inputs, ["y"], name=op.lower(), **attrs)
    declared = [(name, TensorProto.FLOAT, list(shape)) for name in dict.fromkeys(inputs)]
    return model([node], declared, [("y", TensorProto.FLOAT, None)], **kwargs)


def external(location: str, name: str = "w", dims=(4, 8), **entries: str) -> TensorProto:
    """A float initializer whose bytes live at `location` (offset, length as given)."""
    tensor = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=list(dims), data_location=TensorProto.EXTERNAL)
    for key, value in (("location", location), *entries.items()):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    return tensor


def matmul_with(weight: TensorProto) -> onnx.ModelProto:
    """x[2,K] · w[K,N] → y, w being `weight` (external or inline)."""
    k, n = weight.dims
    return model(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
        [("x", TensorProto.FLOAT, [2, k])],
        [("y", TensorProto.FLOAT, [2, n])],
        [weight],
    )


def save(proto: onnx.ModelProto, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(proto.SerializeToString())
    return path


def weights_file(folder: Path, name: str = "w.bin", dims=(4, 8)) -> Path:
    path = folder / name
    path.write_bytes(np.arange(int(np.prod(dims)), dtype=np.float32).tobytes())
    return path


def sparse_file(path: Path, size: int, head: bytes = b"") -> Path:
    """`head`, then zeros up to `size` bytes, without using the disk (a hole)."""
    with open(path, "wb") as stream:
        stream.write(head)
        stream.truncate(size)
    return path


def fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def nested_json(depth: int) -> str:
    return "[" * depth + "]" * depth


def nested_toml(depth: int) -> str:
    return "memory_bandwidth = 1e12\nx = " + "[" * depth + "]" * depth + "\n"


def loop(trips: int, body_op: str = "Add") -> onnx.ModelProto:
    """y = x + 1, `trips` times, in a Loop whose trip count M is a constant."""
    one = numpy_helper.from_array(np.ones((2, 4), np.float32), "one")
    body_nodes = [helper.make_node("Identity", ["cond"], ["cond_out"], name="keep_going")]
    if body_op == "Add":
        body_nodes.append(helper.make_node("Add", ["acc", "one"], ["acc_out"], name="step"))
    else:
        body_nodes.append(helper.make_node("Identity", ["acc"], ["acc_out"], name="step"))
    body = helper.make_graph(
        body_nodes,
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
            helper.make_tensor_value_info("acc", TensorProto.FLOAT, [2, 4]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, [2, 4]),
        ],
    )
    m = numpy_helper.from_array(np.array(trips, np.int64), "M")
    c = numpy_helper.from_array(np.array(True), "c")
    node = helper.make_node("Loop", ["M", "c", "x"], ["y"], name="loop", body=body)
    return model([node], [("x", TensorProto.FLOAT, [2, 4])], [("y", TensorProto.FLOAT, [2, 4])], [m, c, one])


def recursive_functions() -> onnx.ModelProto:
    """Model-local functions f → g → f."""
    f = helper.make_function(
        "local",
        "f",
        ["a"],
        ["b"],
        [helper.make_node("g", ["a"], ["b"], domain="local")],
        [helper.make_opsetid("", OPSET), helper.make_opsetid("local", 1)],
    )
    g = helper.make_function(
        "local",
        "g",
        ["a"],
        ["b"],
        [helper.make_node("f", ["a"], ["b"], domain="local")],
        [helper.make_opsetid("", OPSET), helper.make_opsetid("local", 1)],
    )
    graph = helper.make_graph(
        [helper.make_node("f", ["x"], ["y"], domain="local", name="call")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    return helper.make_model(
        graph, functions=[f, g], opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid("local", 1)]
    )


def cycle() -> onnx.ModelProto:
    """a = Relu(b), b = Relu(a): each node's input is the other's output."""
    nodes = [
        helper.make_node("Add", ["x", "b"], ["a"], name="first"),
        helper.make_node("Relu", ["a"], ["b"], name="second"),
    ]
    return model(nodes, [("x", TensorProto.FLOAT, [2])], [("b", TensorProto.FLOAT, [2])])


def cycle_in_a_branch() -> onnx.ModelProto:
    """An If whose then-branch holds `cycle`'s two nodes, each also reading the outer `x` (a body
    reads an outer value many times: a merged decoder's attention mask, once a layer)."""
    branch_nodes = [
        helper.make_node("Add", ["x", "b"], ["a"], name="first"),
        helper.make_node("Mul", ["a", "x"], ["b"], name="second"),
    ]
    then_branch = helper.make_graph(
        branch_nodes, "then", [], [helper.make_tensor_value_info("b", TensorProto.FLOAT, [2])]
    )
    else_branch = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"], name="third")],
        "else",
        [],
        [helper.make_tensor_value_info("r", TensorProto.FLOAT, [2])],
    )
    node = helper.make_node("If", ["condition"], ["y"], name="if", then_branch=then_branch, else_branch=else_branch)
    return model(
        [node], [("x", TensorProto.FLOAT, [2]), ("condition", TensorProto.BOOL, [])], [("y", TensorProto.FLOAT, [2])]
    )


def self_loop() -> onnx.ModelProto:
    return model(
        [helper.make_node("Add", ["x", "y"], ["y"], name="selfish")],
        [("x", TensorProto.FLOAT, [2])],
        [("y", TensorProto.FLOAT, [2])],
    )


def two_writers() -> onnx.ModelProto:
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="one"), helper.make_node("Neg", ["x"], ["y"], name="two")]
    return model(nodes, [("x", TensorProto.FLOAT, [2])], [("y", TensorProto.FLOAT, [2])])


def with_dim(dim: int) -> onnx.ModelProto:
    """x declared [dim, 4] (dim_value written raw: helper refuses nothing)."""
    proto = relu()
    proto.graph.input[0].type.tensor_type.shape.dim[0].dim_value = dim
    return proto


def with_weight_dim(dim: int) -> onnx.ModelProto:
    """x [2, 4] + w, w an initializer declared [dim, 4] (written raw): a negative dim that is not a
    graph input's or output's, which no converter writes for a dynamic one."""
    proto = model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], [("x", TensorProto.FLOAT, [2, 4])], [("y", TensorProto.FLOAT, [2, 4])],
                  [numpy_helper.from_array(np.zeros((1, 4), np.float32), "w")])  # fmt: skip
    proto.graph.initializer[0].dims[0] = dim
    return proto


def named(name: str) -> onnx.ModelProto:
    proto = relu()
    proto.graph.node[0].name = name
    return proto
