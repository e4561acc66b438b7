"""Generated graphs for the scaling benchmark: a chain of N nodes, and decoder-shaped graphs whose
weights are declared (external data) but absent. Built with onnx.helper; nothing here reads weights.

    python benchmarks/models.py chain 100000 /tmp/chain.onnx
    python benchmarks/models.py ifs 2000 /tmp/ifs.onnx
    python benchmarks/models.py decoder 70b /tmp/llama70b.onnx
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 18
WIDTH = 64
CHAIN_BLOCK = ("MatMul", "Add", "Relu", "Mul")  # a layer of four: a matmul, a bias, an activation, a scale


def chain(nodes: int, width: int = WIDTH) -> onnx.ModelProto:
    """A chain of `nodes` nodes, MatMul → Add → Relu → Mul repeated, on a [batch, width] activation;
    the three weights are shared (inline, small), so the file grows with the nodes alone. Node
    names follow TorchScript's `/layers.K/Op_J` form, so `--by module` has something to group."""
    weight = numpy_helper.from_array(np.full((width, width), 0.01, np.float32), "weight")
    bias = numpy_helper.from_array(np.zeros((width,), np.float32), "bias")
    scale = numpy_helper.from_array(np.ones((width,), np.float32), "scale")
    graph = onnx.GraphProto(name="chain")
    previous = "x"
    for index in range(nodes):
        op = CHAIN_BLOCK[index % len(CHAIN_BLOCK)]
        output = "y" if index == nodes - 1 else f"t{index}"
        inputs = {
            "MatMul": [previous, "weight"],
            "Add": [previous, "bias"],
            "Relu": [previous],
            "Mul": [previous, "scale"],
        }[op]
        node = graph.node.add()
        node.op_type, node.name = op, f"/layers.{index // len(CHAIN_BLOCK)}/{op}"
        node.input.extend(inputs)
        node.output.append(output)
        previous = output
    graph.input.append(helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", width]))
    graph.output.append(helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", width]))
    graph.initializer.extend([weight, bias, scale])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=9)


def ifs(blocks: int, width: int = WIDTH) -> onnx.ModelProto:
    """`blocks` × (Relu, then an If on a graph input whose branches read the Relu's output from
    the enclosing scope): control flow all along a long graph, whose bodies see every outer value."""
    graph = onnx.GraphProto(name="ifs")
    previous = "x"
    for index in range(blocks):
        relu = f"r{index}"
        graph.node.append(helper.make_node("Relu", [previous], [relu], name=f"/blocks.{index}/Relu"))
        branches = {}
        for branch, op in (("then_branch", "Identity"), ("else_branch", "Neg")):
            out = f"{branch[:4]}{index}"
            body = helper.make_graph(
                [helper.make_node(op, [relu], [out])],
                f"{branch}{index}",
                [],
                [helper.make_tensor_value_info(out, TensorProto.FLOAT, ["batch", width])],
            )
            branches[branch] = body
        output = "y" if index == blocks - 1 else f"i{index}"
        graph.node.append(helper.make_node("If", ["condition"], [output], name=f"/blocks.{index}/If", **branches))
        previous = output
    graph.input.extend(
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", width]),
            helper.make_tensor_value_info("condition", TensorProto.BOOL, []),
        ]
    )
    graph.output.append(helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", width]))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=9)


# (layers, hidden, query heads, key/value heads, intermediate, vocabulary): Llama-shaped decoders.
DECODERS = {
    "7b": (32, 4096, 32, 8, 14336, 128256),
    "70b": (80, 8192, 64, 8, 28672, 128256),
}


class _Decoder:
    """A decode step of a Llama-shaped decoder: one new token per sequence, the KV cache as inputs
    and outputs, RMSNorm, rotary embedding, grouped-query attention, SwiGLU. Weights are fp16, as
    the activations (a Mul of fp16 by bf16 is no valid ONNX: the file would be flagged INVALID),
    and external data in a file that does not exist: the analysis must not need it."""

    def __init__(self, layers: int, hidden: int, heads: int, kv_heads: int, intermediate: int, vocab: int):
        self.layers, self.hidden, self.heads, self.kv_heads = layers, hidden, heads, kv_heads
        self.intermediate, self.vocab, self.head_dim = intermediate, vocab, hidden // heads
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.offset = 0

    def weight(self, name: str, shape: list[int]) -> str:
        tensor = TensorProto(name=name, data_type=TensorProto.FLOAT16, dims=shape, data_location=TensorProto.EXTERNAL)
        size = math.prod(shape) * 2
        for key, value in (("location", "weights.bin"), ("offset", str(self.offset)), ("length", str(size))):
            entry = tensor.external_data.add()
            entry.key, entry.value = key, value
        self.offset += size
        self.initializers.append(tensor)
        return name

    def const(self, name: str, values, dtype=np.int64) -> str:
        self.initializers.append(numpy_helper.from_array(np.array(values, dtype=dtype), name))
        return name

    def op(self, op_type: str, inputs: list[str], name: str, outputs: int = 1, **attrs) -> list[str] | str:
        names = [f"{name}_out{i}" if outputs > 1 else f"{name}_out" for i in range(outputs)]
        self.nodes.append(helper.make_node(op_type, inputs, names, name=name, **attrs))
        return names if outputs > 1 else names[0]

    def rms_norm(self, x: str, prefix: str) -> str:
        squared = self.op("Mul", [x, x], f"{prefix}/Mul")
        mean = self.op("ReduceMean", [squared, "axes_last"], f"{prefix}/ReduceMean", keepdims=1)
        shifted = self.op("Add", [mean, "epsilon"], f"{prefix}/Add")
        root = self.op("Sqrt", [shifted], f"{prefix}/Sqrt")
        normed = self.op("Div", [x, root], f"{prefix}/Div")
        return self.op("Mul", [normed, self.weight(f"{prefix}.weight", [self.hidden])], f"{prefix}/Mul_1")

    def rotary(self, x: str, prefix: str) -> str:
        """x·cos + rotate_half(x)·sin, x: [batch, heads, 1, head_dim]."""
        half = self.head_dim // 2
        first = self.op("Slice", [x, "zero", self.const(f"{prefix}/half", [half]), "axes_last"], f"{prefix}/Slice")
        second = self.op("Slice", [x, f"{prefix}/half", "big", "axes_last"], f"{prefix}/Slice_1")
        negated = self.op("Neg", [second], f"{prefix}/Neg")
        rotated = self.op("Concat", [negated, first], f"{prefix}/Concat", axis=-1)
        return self.op(
            "Add",
            [self.op("Mul", [x, "cos"], f"{prefix}/Mul"), self.op("Mul", [rotated, "sin"], f"{prefix}/Mul_1")],
            f"{prefix}/Add",
        )

    def heads_of(self, x: str, heads: int, prefix: str) -> str:
        shaped = self.op(
            "Reshape", [x, self.const(f"{prefix}/shape", [0, 0, heads, self.head_dim])], f"{prefix}/Reshape"
        )
        return self.op("Transpose", [shaped], f"{prefix}/Transpose", perm=[0, 2, 1, 3])

    def layer(self, x: str, index: int) -> str:
        p = f"/model/layers.{index}"
        h, kvh, d, groups = self.hidden, self.kv_heads, self.head_dim, self.heads // self.kv_heads
        normed = self.rms_norm(x, f"{p}/input_layernorm")
        q = self.op("MatMul", [normed, self.weight(f"{p}.q_proj", [h, h])], f"{p}/attn/q_proj/MatMul")
        k = self.op("MatMul", [normed, self.weight(f"{p}.k_proj", [h, kvh * d])], f"{p}/attn/k_proj/MatMul")
        v = self.op("MatMul", [normed, self.weight(f"{p}.v_proj", [h, kvh * d])], f"{p}/attn/v_proj/MatMul")
        q = self.rotary(self.heads_of(q, self.heads, f"{p}/attn/q"), f"{p}/attn/q_rotary")
        k = self.rotary(self.heads_of(k, kvh, f"{p}/attn/k"), f"{p}/attn/k_rotary")
        v = self.heads_of(v, kvh, f"{p}/attn/v")
        keys = self.op("Concat", [f"past_key_values.{index}.key", k], f"{p}/attn/Concat_k", axis=2)
        values = self.op("Concat", [f"past_key_values.{index}.value", v], f"{p}/attn/Concat_v", axis=2)
        self.nodes.append(helper.make_node("Identity", [keys], [f"present.{index}.key"], name=f"{p}/attn/present_k"))
        self.nodes.append(
            helper.make_node("Identity", [values], [f"present.{index}.value"], name=f"{p}/attn/present_v")
        )
        # grouped-query attention: each key/value head serves `groups` query heads
        grouped = self.op("Reshape", [q, self.const(f"{p}/attn/grouped", [0, kvh, groups, d])], f"{p}/attn/Reshape_q")
        keys_t = self.op("Transpose", [keys], f"{p}/attn/Transpose_k", perm=[0, 1, 3, 2])
        keys_t = self.op("Unsqueeze", [keys_t, "axis_2"], f"{p}/attn/Unsqueeze_k")
        scores = self.op(
            "MatMul",
            [self.op("Unsqueeze", [grouped, "axis_3"], f"{p}/attn/Unsqueeze_q"), keys_t],
            f"{p}/attn/MatMul_qk",
        )
        scaled = self.op("Mul", [scores, "attn_scale"], f"{p}/attn/Mul_scale")
        probs = self.op("Softmax", [scaled], f"{p}/attn/Softmax", axis=-1)
        context = self.op(
            "MatMul", [probs, self.op("Unsqueeze", [values, "axis_2"], f"{p}/attn/Unsqueeze_v")], f"{p}/attn/MatMul_v"
        )
        merged = self.op(
            "Reshape", [context, self.const(f"{p}/attn/merged", [0, self.heads, 1, d])], f"{p}/attn/Reshape_ctx"
        )
        merged = self.op("Transpose", [merged], f"{p}/attn/Transpose_ctx", perm=[0, 2, 1, 3])
        merged = self.op("Reshape", [merged, self.const(f"{p}/attn/flat", [0, 0, h])], f"{p}/attn/Reshape_out")
        attended = self.op("MatMul", [merged, self.weight(f"{p}.o_proj", [h, h])], f"{p}/attn/o_proj/MatMul")
        x = self.op("Add", [x, attended], f"{p}/Add")
        normed = self.rms_norm(x, f"{p}/post_attention_layernorm")
        gate = self.op(
            "MatMul", [normed, self.weight(f"{p}.gate_proj", [h, self.intermediate])], f"{p}/mlp/gate_proj/MatMul"
        )
        up = self.op("MatMul", [normed, self.weight(f"{p}.up_proj", [h, self.intermediate])], f"{p}/mlp/up_proj/MatMul")
        activated = self.op("Mul", [gate, self.op("Sigmoid", [gate], f"{p}/mlp/Sigmoid")], f"{p}/mlp/Mul")
        down = self.op(
            "MatMul",
            [self.op("Mul", [activated, up], f"{p}/mlp/Mul_1"), self.weight(f"{p}.down_proj", [self.intermediate, h])],
            f"{p}/mlp/down_proj/MatMul",
        )
        return self.op("Add", [x, down], f"{p}/Add_1")

    def model(self) -> onnx.ModelProto:
        h, d = self.hidden, self.head_dim
        self.const("axes_last", [-1])
        self.const("axis_2", [2])
        self.const("axis_3", [3])
        self.const("zero", [0])
        self.const("big", [2**62])
        self.const("epsilon", [1e-5], np.float16)
        self.const("attn_scale", [d**-0.5], np.float16)
        self.const("cos", np.ones((1, 1, 1, d)), np.float16)
        self.const("sin", np.zeros((1, 1, 1, d)), np.float16)
        embedded = self.op(
            "Gather", [self.weight("embed_tokens", [self.vocab, h]), "input_ids"], "/model/embed_tokens/Gather"
        )
        x = self.op("Cast", [embedded], "/model/embed_tokens/Cast", to=TensorProto.FLOAT16)
        for index in range(self.layers):
            x = self.layer(x, index)
        x = self.rms_norm(x, "/model/norm")
        self.op("MatMul", [x, self.weight("lm_head", [h, self.vocab])], "/lm_head/MatMul")
        self.nodes[-1].output[0] = "logits"
        f16, kv = TensorProto.FLOAT16, ["batch", self.kv_heads, "past_sequence", d]
        present = ["batch", self.kv_heads, "past_sequence + 1", d]  # as optimum declares it
        inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", 1])]
        outputs = [helper.make_tensor_value_info("logits", f16, ["batch", 1, self.vocab])]
        for index in range(self.layers):
            for kind in ("key", "value"):
                inputs.append(helper.make_tensor_value_info(f"past_key_values.{index}.{kind}", f16, kv))
                outputs.append(helper.make_tensor_value_info(f"present.{index}.{kind}", f16, present))
        graph = helper.make_graph(self.nodes, "decoder", inputs, outputs, initializer=self.initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=9)
        model.metadata_props.add(key="declared_weight_bytes", value=str(self.offset))
        return model


def decoder(size: str) -> onnx.ModelProto:
    """A Llama-shaped decode step (DECODERS[size]), fp16 activations and weights, the weights declared
    external and absent: --dim batch=B --dim past_sequence=P."""
    return _Decoder(*DECODERS[size]).model()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kind", choices=("chain", "ifs", "decoder"))
    parser.add_argument("size", help="nodes of a chain; blocks of Relu + If; 7b or 70b for a decoder")
    parser.add_argument("path")
    args = parser.parse_args()
    model = {
        "chain": lambda: chain(int(args.size)),
        "ifs": lambda: ifs(int(args.size)),
        "decoder": lambda: decoder(args.size),
    }[args.kind]()
    with open(args.path, "wb") as stream:
        stream.write(model.SerializeToString())


if __name__ == "__main__":
    main()
