"""The streamed JSON report is, byte for byte, `json.dumps(report.to_dict(), indent=2, allow_nan=False)`
and a newline: on the fixtures, on a deployed view, and on the edge cases of json's encoder (the
encoder is our own, for speed: docs/performance.md)."""

from __future__ import annotations

import collections
import enum
import json
import math
from pathlib import Path

import pytest

from onnx_roofline import Sizing, analyze
from onnx_roofline.report import serialize
from onnx_roofline.report.serialize import _Encoder, iter_json, render_json

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _expected(report) -> str:
    return json.dumps(report.to_dict(), indent=2, allow_nan=False) + "\n"


@pytest.mark.parametrize(
    "name, dims",
    [
        ("resnet50_fp32.onnx", {"batch": 1}),
        ("gpt2_decode_fp16.onnx", {"batch": 2, "past_sequence": 31}),
        ("gpt2_prefill_fp32_torchscript.onnx", {"batch": 1, "sequence": 16}),
    ],
)
def test_the_streamed_report_is_json_dumps_of_to_dict(name, dims):
    report = analyze(FIXTURES / name, sizing=Sizing(dims=dims))
    assert render_json(report) == _expected(report)
    assert "".join(iter_json(report)) == _expected(report)


def test_a_report_streamed_in_many_pieces(monkeypatch):
    """Pieces of a few nodes each: the joins between pieces are where a comma or bracket goes missing."""
    monkeypatch.setattr(serialize, "CHUNK_ITEMS", 3)
    monkeypatch.setattr(_Encoder, "MAX_SHARED", 5)  # tensors' texts forgotten and written again
    monkeypatch.setattr(_Encoder, "MAX_FLOATS", 4)
    monkeypatch.setattr(_Encoder, "MAX_LAYOUTS", 2)  # dicts' writers forgotten and made again
    report = analyze(FIXTURES / "resnet50_fp32.onnx", sizing=Sizing(dims={"batch": 1}))
    pieces = list(iter_json(report))
    assert len(pieces) > 30
    assert "".join(pieces) == _expected(report)


@pytest.mark.parametrize("count", [0, 1, 6])
def test_the_nodes_list_ends_where_a_piece_ends(monkeypatch, count):
    """No nodes, and nodes that fill their last piece exactly (3 a piece): the list's brackets
    and commas where a piece starts and ends."""
    import dataclasses

    monkeypatch.setattr(serialize, "CHUNK_ITEMS", 3)
    report = analyze(FIXTURES / "resnet50_fp32.onnx", sizing=Sizing(dims={"batch": 1}))
    cut = dataclasses.replace(report, nodes=report.nodes[:count])
    assert "".join(iter_json(cut)) == _expected(cut)


def test_a_module_is_written_from_the_node_it_is_read_from():
    """A node's module is remembered by its name's folder (serialize._Modules): nodes of one folder
    with metadata, in a body, or named without the leading slash must each still get their own."""
    import dataclasses

    report = analyze(FIXTURES / "gpt2_decode_fp16.onnx", sizing=Sizing(dims={"batch": 1, "past_sequence": 7}))
    with_metadata = next(n for n in report.nodes if n.graph_node is not None and n.graph_node.has_metadata)
    plain = dataclasses.replace(with_metadata, graph_node=None)
    folder = "/model/h.0/attn"
    names = {"plain": f"{folder}/MatMul", "no slash": folder[1:] + "/MatMul", "bare": "MatMul", "root": "/MatMul"}
    nodes = [dataclasses.replace(plain, name=name) for name in names.values()]
    nodes += [
        dataclasses.replace(with_metadata, name=f"{folder}/Add"),  # its module from its metadata
        dataclasses.replace(plain, name=f"If_0/then_branch/{folder}/Add", scope="If_0/then_branch"),
        dataclasses.replace(plain, name=f"{folder}/Mul"),
    ]
    alike = dataclasses.replace(report, nodes=tuple(dataclasses.replace(n, index=i) for i, n in enumerate(nodes)))
    modules = [node["module"] for node in alike.node_dicts()]
    assert modules[0] == modules[-1] != modules[4]  # one folder, but the metadata's module
    assert modules[1] == modules[2] == modules[3] == ""  # no leading slash, no folder: no module
    assert render_json(alike) == _expected(alike)


def test_the_deployed_view_streams_its_members():
    from onnx_roofline.views.deployed import deploy

    report = deploy(analyze(FIXTURES / "gpt2_decode_fp16.onnx", sizing=Sizing(dims={"batch": 1, "past_sequence": 7})))
    assert render_json(report) == _expected(report)


class _Level(enum.IntEnum):
    HIGH = 3


class _Text(str):
    pass


@pytest.mark.parametrize(
    "value",
    [
        {},
        [],
        {"a": []},
        {"a": {}},
        [[], {}, [[]]],
        {"nested": {"deeper": {"list": [1, [2, [3, {"x": None}]]]}}},
        {"ints": [0, -1, 2**70], "floats": [0.0, -0.0, 1e-300, 1.5e300, 0.1, 5e-324], "bools": [True, False, None]},
        {"mixed shape": [1, "batch", None], "text": 'é ✓ "quoted" \\ \n\t\x00', "%s {0} %%": "{}"},
        {1: "int key", 2.5: "float key", None: "none key", -0.0: "negative zero key"},
        {True: "bool key"},  # apart: True is the key 1 in a dict
        {
            "tuple": (1, 2, (3,)),
            "enum": _Level.HIGH,
            "subclass": _Text("sub"),
            "ordered": collections.OrderedDict(b=1, a=[2]),
        },
        [
            {"same": 1, "layout": 2.0},
            {"same": "a", "layout": None},
            {"same": True, "layout": [1]},
            {"layout": 1, "same": 2},
        ],
    ],
)
def test_the_encoder_writes_what_json_writes(value):
    assert _Encoder().text(value, 0) == json.dumps(value, indent=2, allow_nan=False)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_the_encoder_refuses_what_json_refuses(bad):
    for value in ({"x": bad}, [1, bad], {"node": {"time_s": bad}}):
        with pytest.raises(ValueError) as ours:
            _Encoder().text(value, 0)
        with pytest.raises(ValueError) as theirs:
            json.dumps(value, indent=2, allow_nan=False)
        assert str(ours.value) == str(theirs.value)
    with pytest.raises(TypeError):
        _Encoder().text({"x": object()}, 0)
    with pytest.raises(TypeError):
        _Encoder().text({(1, 2): 0}, 0)


def test_nodes_alike_but_for_one_figure_are_written_each_with_its_own():
    """A node's text comes from a template shared by the nodes of one op and one
    NodeResult.figures_key: a node that differs from another in any one figure, or in what is
    its own (name, tensors, module), must not be written with the other's."""
    import dataclasses

    from onnx_roofline.model.tensors import TensorInfo

    report = analyze(FIXTURES / "resnet50_fp32.onnx", sizing=Sizing(dims={"batch": 1}))
    conv = next(n for n in report.nodes if n.op_type == "Conv" and n.cost is not None)
    cost, place = conv.cost, conv.placement
    variants = {
        "cost": dataclasses.replace(cost, flops=cost.flops + 1),
        "placement": dataclasses.replace(place, time_s=place.time_s * 2),
        "parameters": conv.parameters + 1,
        "unit": "vector",
        "dtype": "fp16",
        "peak": conv.peak / 2,
        "status": "rule-error",
        "reason": "100% of a %s reason",  # a template is %-formatted: its own % must stay text
        "constant_foldable": not conv.constant_foldable,
        "name": "/other/module/Conv_9",
        "outputs": (TensorInfo("y%d", (1, 2), "float16"),),
        "inputs": (conv.inputs[0], None, *conv.inputs[1:]),  # an absent optional input is null
        "scope": "If_0/then_branch",  # a body's node costed as the main graph's
        "trips": 3,
    }
    nodes = [conv] + [
        dataclasses.replace(conv, index=i + 1, **{field: value}) for i, (field, value) in enumerate(variants.items())
    ]
    alike = dataclasses.replace(report, nodes=tuple(nodes))
    assert len({json.dumps(node) for node in alike.node_dicts()}) == len(nodes)  # each differs from the first
    assert render_json(alike) == _expected(alike)


def test_the_analysis_holds_no_node_protos():
    """Protobuf's object for a node costs ~0.5 KB for as long as it is held (onnx_roofline/model/nodes.py):
    neither the graph's nodes nor the report's hold one, they fetch it when asked."""
    import dataclasses

    import onnx

    from onnx_roofline.model.loader import load_with_nodes

    _, nodes = load_with_nodes(FIXTURES / "gpt2_decode_fp16.onnx")
    assert not any(isinstance(value, onnx.NodeProto) for node in nodes for value in node)
    assert nodes[3].proto.name == nodes[3].name
    assert len(repr(nodes[3])) < 300  # not the graph's nodes, which a Node indexes
    report = analyze(FIXTURES / "gpt2_decode_fp16.onnx", sizing=Sizing(dims={"batch": 1, "past_sequence": 7}))
    fields = [f.name for f in dataclasses.fields(report.nodes[0])]
    assert not any(isinstance(getattr(node, f), onnx.NodeProto) for node in report.nodes for f in fields)
    assert report.nodes[3].proto.op_type == report.nodes[3].op_type
