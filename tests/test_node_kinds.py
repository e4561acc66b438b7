"""Passes that care about a few ops visit only their nodes (issue 44): nodes.of_kinds finds the
nodes of the kinds a pass wants, each distinct (domain, op_type) of a graph asked once, the kinds
found once per list of nodes within an analysis. These build graphs with onnx.helper where the one
node a pass must find sits among many plain ones, and check it is still found, in stored order,
and that a list (a slice, a graph read again after a change) answers for itself alone."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as h
import onnx.numpy_helper as nh
import pytest

from onnx_roofline import Sizing
from onnx_roofline.analysis import analyze
from onnx_roofline.errors import ModelLoadError
from onnx_roofline.model.conformance import CHECKER, EXTERNAL_DATA, conformance
from onnx_roofline.model.files import external_tensors
from onnx_roofline.model.loader import load_with_nodes
from onnx_roofline.model.memo import remembered
from onnx_roofline.model.nodes import of_kinds, read_fresh, read_nodes

TP = onnx.TensorProto
PLAIN = 300  # Relu nodes around the one a pass must find


def _chain(special: dict, extra_inputs=(), initializers=()) -> onnx.ModelProto:
    """x[2,4] through PLAIN Relus, the node `special[i](value, output)` builds inserted before the
    i-th (it reads the running value and writes `output`, which the next Relu reads)."""
    nodes, current = [], "x"
    for index in range(PLAIN):
        if index in special:
            nodes.append(special[index](current, f"s{index}"))
            current = f"s{index}"
        nodes.append(h.make_node("Relu", [current], [f"r{index}"]))
        current = f"r{index}"
    nodes.append(h.make_node("Identity", [current], ["y"]))
    graph = h.make_graph(
        nodes,
        "g",
        [h.make_tensor_value_info("x", TP.FLOAT, [2, 4]), *extra_inputs],
        [h.make_tensor_value_info("y", TP.FLOAT, [2, 4])],
        initializer=list(initializers),
    )
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)


def _op(domain: str, op_type: str, wanted: set[str]) -> bool:
    return not domain and op_type in wanted


def test_the_few_nodes_of_the_kinds_wanted_are_found_in_stored_order():
    """A Softmax before Relu 40 and a Transpose before Relu 250: positions 40 and 251 (the Softmax
    shifts what follows it by one); none of an op the graph lacks."""
    model = _chain({
        40: lambda v, out: h.make_node("Softmax", [v], [out], axis=1),
        250: lambda v, out: h.make_node("Transpose", [v], [out]),
    })  # fmt: skip
    with remembered():
        nodes = read_nodes(model.graph)
        found = of_kinds(nodes, lambda d, op: _op(d, op, {"Transpose", "Softmax"}))
        assert [(node.position, node.op_type) for node in found] == [(40, "Softmax"), (251, "Transpose")]
        assert of_kinds(nodes, lambda d, op: _op(d, op, {"If"})) == []
        assert len(of_kinds(nodes, lambda d, op: _op(d, op, {"Relu"}))) == PLAIN
        # a slice of the graph's nodes answers for itself, not for the graph it was cut from
        assert of_kinds(nodes[:40], lambda d, op: _op(d, op, {"Softmax", "Transpose"})) == []
        assert [n.position for n in of_kinds(nodes[41:], lambda d, op: _op(d, op, {"Transpose"}))] == [251]


def test_a_graph_read_again_after_a_change_is_not_answered_from_before():
    """Within one analysis, a graph reworked in place and read again (read_fresh: a new list) has
    the kinds it has now; the list read before keeps answering for the nodes it holds."""
    model = _chain({})
    with remembered():
        before = read_nodes(model.graph)
        assert of_kinds(before, lambda d, op: _op(d, op, {"Softmax"})) == []
        model.graph.node[123].op_type = "Softmax"
        after = read_fresh(model.graph)
        assert [node.position for node in of_kinds(after, lambda d, op: _op(d, op, {"Softmax"}))] == [123]
        assert of_kinds(before, lambda d, op: _op(d, op, {"Softmax"})) == []


def test_a_tolerated_op_and_a_branch_among_many_nodes_are_still_found():
    """SimplifiedLayerNormalization (onnxruntime registers it in the default domain, ONNX's checker
    refuses it) in the middle of the chain is moved aside for the check: no finding, the model as
    loaded after; an If there whose branch holds a Not of a float (onnxruntime refuses it) is
    checked through: a finding."""
    norm = lambda v, out: h.make_node("SimplifiedLayerNormalization", [v, "scale"], [out])  # noqa: E731
    scale = nh.from_array(np.ones(4, np.float32), "scale")
    proto, nodes = load_with_nodes(_chain({150: norm}, initializers=[scale]))
    before = proto.SerializeToString()
    assert conformance(proto, nodes, None) == ()
    assert proto.SerializeToString() == before

    def branch(op, v, out):
        return h.make_graph([h.make_node(op, [v], [out])], op, [], [h.make_tensor_value_info(out, TP.FLOAT, [2, 4])])

    cond = h.make_tensor_value_info("c", TP.BOOL, [])
    for op, flagged in (("Relu", False), ("Not", True)):

        def conditional(v, out, op=op):  # its branches read the running value from outside
            then, other = branch(op, v, f"{out}_then"), branch("Relu", v, f"{out}_else")
            return h.make_node("If", ["c"], [out], then_branch=then, else_branch=other)

        proto, nodes = load_with_nodes(_chain({200: conditional}, extra_inputs=[cond]))
        found = conformance(proto, nodes, None)
        assert (len(found) == 1 and found[0].source == CHECKER and "Not" in found[0].message) is flagged, found


def test_a_constants_external_tensor_among_many_nodes_is_found(tmp_path):
    """A Constant whose value is stored externally, in the middle of the chain: found by the
    external-data pass, and its location, which leaves the model's folder, flagged."""
    value = onnx.TensorProto(name="k", data_type=TP.FLOAT, dims=[2, 4], data_location=TP.EXTERNAL)
    value.external_data.add(key="location", value="../k.bin")
    model = _chain({100: lambda v, out: h.make_node("Add", [v, "k"], [out])})
    model.graph.node.insert(10, h.make_node("Constant", [], ["k"], value=value))
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    proto, nodes = load_with_nodes(str(path))
    assert [tensor.name for tensor in external_tensors(proto, nodes)] == ["k"]
    found = conformance(proto, nodes, str(path))
    assert any(flag.source == EXTERNAL_DATA and "leaves the model's folder" in flag.message for flag in found), found


def test_an_axis_out_of_range_among_many_nodes_is_refused():
    """Softmax axis=99 on a rank-2 value, before Relu 222: validation that needs the ranks visits
    only the nodes of ops with an axis, this one among them."""
    model = _chain({222: lambda v, out: h.make_node("Softmax", [v], [out], axis=99)})
    with pytest.raises(ModelLoadError, match="axis 99 is out of range for its rank-2 input"):
        analyze(model, sizing=Sizing(default_dims=True))
