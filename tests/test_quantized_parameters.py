"""`parameters` of weight-only quantized ops count the logical weights, not the packed bytes:
a 4-bit MatMulNBits [K=4096, N=11008] holds 4096·11008 weights though its B, scales and zero
points hold 24,657,920 stored elements. The weights are initializers whose data lives in an
external file that does not exist: the analysis never reads weight bytes."""

from __future__ import annotations

import math

from onnx import TensorProto, helper

from onnx_roofline import analyze

MS = "com.microsoft"


def external(name: str, dtype: int, dims: list[int]) -> TensorProto:
    """An initializer of that shape whose bytes are in an (absent) external file."""
    tensor = TensorProto(name=name, data_type=dtype, dims=dims)
    tensor.data_location = TensorProto.EXTERNAL
    entry = tensor.external_data.add()
    entry.key, entry.value = "location", "absent.bin"
    return tensor


def one_node(op_type, inputs, initializers, outputs, attrs):
    graph = helper.make_graph(
        [
            helper.make_node(
                op_type, [n for n, _, _ in inputs] + [t.name for t in initializers], outputs, domain=MS, **attrs
            )
        ],
        "g",
        [helper.make_tensor_value_info(n, d, s) for n, d, s in inputs],
        [helper.make_empty_tensor_value_info(o) for o in outputs],
        initializer=initializers,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(MS, 1)])


def test_matmul_nbits_parameters_are_the_weights_not_the_packed_elements():
    k, n, block = 4096, 11008, 32
    k_blocks = k // block
    packed = [
        external("b", TensorProto.UINT8, [n, k_blocks, block * 4 // 8]),  # two 4-bit weights a byte
        external("scales", TensorProto.FLOAT16, [n * k_blocks]),
        external("zp", TensorProto.UINT8, [n * math.ceil(k_blocks / 2)]),  # packed 4-bit zero points
    ]
    model = one_node("MatMulNBits", [("a", TensorProto.FLOAT16, [1, 1, k])], packed, ["y"],
                     {"K": k, "N": n, "bits": 4, "block_size": block})  # fmt: skip
    report = analyze(model)
    (node,) = report.nodes
    stored = n * k_blocks * 16 + n * k_blocks + n * (k_blocks // 2)
    assert stored == 24_657_920  # what was counted before: packed bytes, scales, zero points
    assert node.parameters == k * n == 45_088_768  # the weights; scales and zero points are metadata
    assert report.model.parameters == k * n


def test_matmul_nbits_bias_still_counts():
    k, n, block = 256, 64, 32
    weights = [
        external("b", TensorProto.UINT8, [n, k // block, block // 2]),
        external("scales", TensorProto.FLOAT16, [n * k // block]),
    ]
    bias = external("bias", TensorProto.FLOAT16, [n])
    graph = helper.make_graph(
        [
            helper.make_node(
                "MatMulNBits",
                ["a", "b", "scales", "", "", "bias"],
                ["y"],
                domain=MS,
                K=k,
                N=n,
                bits=4,
                block_size=block,
            )
        ],
        "g",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT16, [4, k])],
        [helper.make_empty_tensor_value_info("y")],
        initializer=[*weights, bias],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(MS, 1)])
    (node,) = analyze(model).nodes
    assert node.parameters == k * n + n  # the weights and the bias


def test_matmul_bnb4_parameters():
    k, n, block = 256, 128, 64
    weights = [
        external("b", TensorProto.UINT8, [k * n // 2]),
        external("absmax", TensorProto.FLOAT16, [k * n // block]),
    ]
    model = one_node("MatMulBnb4", [("a", TensorProto.FLOAT16, [8, k])], weights, ["y"],
                     {"K": k, "N": n, "block_size": block, "quant_type": 1})  # fmt: skip
    (node,) = analyze(model).nodes
    assert node.parameters == k * n  # not k·n/2 packed bytes + k·n/64 absmax


def test_gather_block_quantized_parameters_are_the_table_values():
    vocab, hidden, block = 1000, 768, 32
    graph = helper.make_graph(
        [
            helper.make_node(
                "GatherBlockQuantized",
                ["table", "ids", "scales"],
                ["y"],
                domain=MS,
                bits=4,
                block_size=block,
                gather_axis=0,
                quantize_axis=1,
            )
        ],  # fmt: skip
        "g",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [2, 16, hidden])],
        initializer=[
            external("table", TensorProto.UINT8, [vocab, hidden // 2]),
            external("scales", TensorProto.FLOAT16, [vocab, hidden // block]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(MS, 1)])
    report = analyze(model)
    (node,) = report.nodes
    assert node.status == "ok", node.reason
    assert node.parameters == vocab * hidden  # two 4-bit values a byte; scales are metadata
    assert report.model.parameters == vocab * hidden
