"""A convolution whose dilated kernel exceeds its padded input (onnx_roofline/windows.py): ONNX's
inference still gives it an output; onnxruntime refuses to run it, which each case checks; the
analysis refuses too, in one line naming the node, the sizes and the dims. Where onnxruntime runs
(pads that make room, auto_pad SAME, a window that just fits, a pool in the same case), the
analysis agrees with its shape."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnx_roofline import analyze
from onnx_roofline.cli import main
from onnx_roofline.errors import DimensionError


def _model(op_type, x_shape, attrs, weight=None):
    inits = [numpy_helper.from_array(np.ones(weight, np.float32), "w")] if weight else []
    node = helper.make_node(op_type, ["x", *(["w"] if weight else [])], ["y"], **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=inits)  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _run(model, shape):
    """The output shape onnxruntime gives, or the exception it raises."""
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": np.ones(shape, np.float32)})[0].shape


TOO_SMALL = {
    "conv 2x2 stride 2 on 1x1": ("Conv", [1, 8, 1, 1], {"strides": [2, 2]}, (16, 8, 2, 2)),
    "dilated conv: a 5x5 window on 4x4": ("Conv", [1, 2, 4, 4], {"dilations": [2, 2]}, (4, 2, 3, 3)),
    "conv 1-d, stride 1: onnx says 0 wide": ("Conv", [1, 2, 3], {}, (4, 2, 4)),
}
FITS = {
    "pads make room": ("MaxPool", [1, 1, 2, 2], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, None),
    "auto_pad SAME": ("Conv", [1, 8, 1, 1], {"strides": [2, 2], "auto_pad": "SAME_UPPER"}, (16, 8, 2, 2)),
    "a dilated window that just fits": ("Conv", [1, 2, 5, 5], {"dilations": [2, 2]}, (4, 2, 3, 3)),
    "a max pool larger than its input (empty)": ("MaxPool", [1, 1, 2, 2], {"kernel_shape": [3, 3]}, None),
    "a strided average pool larger than its input": ("AveragePool", [1, 1, 2, 2], {"kernel_shape": [4, 4], "strides": [3, 3]}, None),
}


@pytest.mark.parametrize("case", sorted(TOO_SMALL))
def test_a_window_larger_than_its_input_is_refused_as_onnxruntime_refuses_it(case):
    op_type, shape, attrs, weight = TOO_SMALL[case]
    model = _model(op_type, shape, attrs, weight)
    with pytest.raises(Exception):  # noqa: B017 - onnxruntime raises its own Fail/InvalidArgument types
        _run(model, shape)
    with pytest.raises(DimensionError, match=r"cannot run at its declared shapes: its input 'x' is .* smaller than its"):
        analyze(model)


@pytest.mark.parametrize("case", sorted(FITS))
def test_a_window_that_fits_is_costed_at_onnxruntimes_shape(case):
    op_type, shape, attrs, weight = FITS[case]
    model = _model(op_type, shape, attrs, weight)
    (node,) = analyze(model).nodes
    assert node.status == "ok" and node.outputs[0].shape == _run(model, shape)


def test_dims_too_small_for_a_strided_stem_are_one_line_naming_them(tmp_path, capsys):
    """A ConvNeXt-like stem (4×4, stride 4) then a 2×2 stride-2 downsampling: at 7×7 pixels the
    second conv gets a 1×1 input; at 16×16, a 4×4 one and an output."""
    w1 = numpy_helper.from_array(np.ones((8, 3, 4, 4), np.float32), "w1")
    w2 = numpy_helper.from_array(np.ones((16, 8, 2, 2), np.float32), "w2")
    nodes = [helper.make_node("Conv", ["x", "w1"], ["h"], strides=[4, 4], name="stem"),
             helper.make_node("Conv", ["h", "w2"], ["y"], strides=[2, 2], name="down")]  # fmt: skip
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, "height", "width"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=[w1, w2])  # fmt: skip
    path = tmp_path / "stem.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    assert main([str(path), "--dim", "batch=1", "--dim", "height=7", "--dim", "width=7"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("onnx-roofline: error: node 'down' (Conv) cannot run at batch=1, height=7, width=7: its input 'h' is 1×1 "
                   "(padded 1×1), smaller than its 2×2 window (kernel 2×2, dilations [1, 1]); larger dims give it an output")  # fmt: skip
    report = analyze(path, dims={"batch": 1, "height": 16, "width": 16})
    assert report.nodes[1].outputs[0].shape == (1, 16, 2, 2)  # 16 / 4 = 4, then (4 - 2) / 2 + 1 = 2
