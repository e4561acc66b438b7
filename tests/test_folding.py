"""The folder's evaluators of small values (folding.py) against onnx's reference evaluator, and the
shape arithmetic TorchScript writes with them typed end to end."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from onnx_roofline import analyze
from onnx_roofline.shapes.folding import _EVALUATORS

I64 = np.int64
CASES = [
    ("ScatterElements", [np.array([5, 3], I64), np.array([0], I64), np.array([2], I64)], {"axis": 0}),
    ("ScatterElements", [np.zeros((2, 3), I64), np.array([[1, -1]], I64), np.array([[4, 5]], I64)], {"axis": 1}),
    (
        "ScatterElements",
        [np.ones((3,), I64), np.array([0, 0, 2], I64), np.array([2, 3, 4], I64)],
        {"axis": 0, "reduction": "add"},
    ),
    ("ScatterElements", [np.ones((3,), I64), np.array([1, 1], I64), np.array([5, 7], I64)], {"reduction": "max"}),
    ("ScatterND", [np.array([1, 2, 3, 4], I64), np.array([[1], [3]], I64), np.array([9, 8], I64)], {}),
    ("ScatterND", [np.zeros((2, 3), I64), np.array([[1]], I64), np.array([[7, 8, 9]], I64)], {}),
    ("ScatterND", [np.ones((2, 2), I64), np.array([[0, 1], [0, 1]], I64), np.array([3, 4], I64)], {"reduction": "mul"}),
    ("GatherElements", [np.array([[1, 2], [3, 4]], I64), np.array([[0, 0], [1, -2]], I64)], {"axis": 1}),
    ("GatherElements", [np.array([[1, 2], [3, 4]], I64), np.array([[1, 0]], I64)], {}),
    ("GatherND", [np.array([[1, 2], [3, 4]], I64), np.array([[0, 1], [1, 0]], I64)], {}),
    ("GatherND", [np.arange(8, dtype=I64).reshape(2, 2, 2), np.array([[1]], I64)], {}),
    ("CumSum", [np.array([1, 2, 3, 4], I64), np.array(0, I64)], {}),
    ("CumSum", [np.arange(6, dtype=I64).reshape(2, 3), np.array(-1, I64)], {"exclusive": 1}),
    ("CumSum", [np.arange(6, dtype=I64).reshape(2, 3), np.array(1, I64)], {"reverse": 1}),
    ("CumSum", [np.arange(6, dtype=I64).reshape(2, 3), np.array(0, I64)], {"reverse": 1, "exclusive": 1}),
]


@pytest.mark.parametrize(("op", "arrays", "attrs"), CASES, ids=[f"{op}-{i}" for i, (op, _, _) in enumerate(CASES)])
def test_an_evaluator_computes_what_the_reference_does(op, arrays, attrs):
    names = [f"in{i}" for i in range(len(arrays))]
    node = helper.make_node(op, names, ["y"], **attrs)
    graph = helper.make_graph([node], op, [helper.make_tensor_value_info(n, TensorProto.INT64, None) for n in names],
                              [helper.make_tensor_value_info("y", TensorProto.INT64, None)])  # fmt: skip
    (expected,) = ReferenceEvaluator(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])).run(
        None, dict(zip(names, arrays, strict=False))
    )
    folded = _EVALUATORS[op](
        arrays, {k: v.encode() if isinstance(v, str) else v for k, v in attrs.items()}
    )  # strings as onnx reads them
    assert folded.dtype == expected.dtype and np.array_equal(folded, expected)


def test_gather_nd_with_batch_dims_is_left_to_shape_inference():
    assert _EVALUATORS["GatherND"]([np.zeros((2, 2), I64), np.zeros((2, 1), I64)], {"batch_dims": 1}) is None


def test_torchscript_index_copy_is_typed_through_its_scatter_of_a_shape(tmp_path):
    """`x.index_copy(0, index, source)` exported by TorchScript sizes its Expand with a
    ScatterElements into Shape(x): folded, every node is costed, at the shapes onnxruntime gives."""
    torch = pytest.importorskip("torch")

    class IndexCopy(torch.nn.Module):
        def forward(self, x, index, source):
            return x.index_copy(0, index, source) * 2

    path = tmp_path / "index_copy.onnx"
    args = (torch.zeros(5, 3), torch.tensor([0, 4]), torch.ones(2, 3))
    torch.onnx.export(
        IndexCopy(), args, str(path), dynamo=False, input_names=["x", "index", "source"], opset_version=17
    )
    report = analyze(path)
    assert report.uncosted.count == 0
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (y,) = session.run(None, {"x": args[0].numpy(), "index": args[1].numpy(), "source": args[2].numpy()})
    assert report.nodes[-1].outputs[0].shape == y.shape == (5, 3)
    scatter = next(n for n in report.nodes if n.op_type == "ScatterElements" and n.inputs[0].name == "x")
    assert scatter.inputs[1].shape == (2, 3)  # the index expanded to the source's shape


@pytest.mark.parametrize(
    ("data", "sizes", "attrs", "opset"),
    [
        (np.arange(6, dtype=I64), np.array([1, 2, 3], I64), {}, 17),
        (np.arange(6, dtype=I64).reshape(2, 3), np.array([2, 1], I64), {"axis": -1}, 17),
        (np.arange(6, dtype=I64), None, {}, 17),  # equal pieces
        (np.arange(7, dtype=I64), None, {"num_outputs": 3}, 18),  # 3, 3, 1
        (np.arange(4, dtype=I64), None, {"split": [3, 1]}, 11),  # sizes as an attribute
    ],
)
def test_split_folds_every_piece_as_the_reference_does(data, sizes, attrs, opset):
    from onnx_roofline.model.nodes import read_nodes
    from onnx_roofline.shapes.folding import fold_node

    count = 3 if sizes is None and "split" not in attrs else len(sizes if sizes is not None else attrs["split"])
    outputs = [f"y{i}" for i in range(count)]
    names = ["x"] + (["sizes"] if sizes is not None else [])
    graph = helper.make_graph([helper.make_node("Split", names, outputs, **attrs)], "split",
                              [helper.make_tensor_value_info(n, TensorProto.INT64, None) for n in names],
                              [helper.make_tensor_value_info(o, TensorProto.INT64, None) for o in outputs])  # fmt: skip
    feeds = {"x": data, **({"sizes": sizes} if sizes is not None else {})}
    expected = ReferenceEvaluator(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])).run(
        None, feeds
    )
    (node,) = read_nodes(graph)
    for output, piece in zip(outputs, expected, strict=False):
        assert np.array_equal(fold_node(node, lambda name: None, feeds, output), piece)


def test_torchscript_repeat_interleave_by_a_tensor_is_typed_through_its_split_of_the_repeats(tmp_path):
    """`x.repeat_interleave(torch.tensor([1, 2, 0, 3]), 0)`: TorchScript splits the constant
    repeats into one Expand per row; folded, the output is [6, 5], as torch and onnx's reference
    evaluator compute it. (onnxruntime returns 7 rows: its Expand keeps the row repeated 0 times,
    broadcasting 1 against a target of 0 to 1.)"""
    torch = pytest.importorskip("torch")

    class Repeat(torch.nn.Module):
        def forward(self, x):
            return x.repeat_interleave(torch.tensor([1, 2, 0, 3]), 0)

    path = tmp_path / "repeat.onnx"
    x = torch.rand(4, 5)
    torch.onnx.export(Repeat(), (x,), str(path), dynamo=False, input_names=["x"], opset_version=17)
    report = analyze(path)
    assert report.uncosted.count == 0
    (y,) = ReferenceEvaluator(str(path)).run(None, {"x": x.numpy()})
    assert report.nodes[-1].outputs[0].shape == y.shape == tuple(Repeat()(x).shape) == (1 + 2 + 0 + 3, 5)
