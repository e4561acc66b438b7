"""A body's outer reads (what an If's branch or a Loop's body reads from the scope around it) are
found once in an analysis: validation finds them checking each body and remembers them, and the
shape engine and the walk ask for them again (model/scopes.py, issue 44). What validation
remembers must be what scopes' own reading of the graph gives, name for name and in order, on
every body of the shipped graphs that hold bodies (optimum's and TorchScript's merged decoders, a
Silero-style VAD's If, a scripted Loop, JAX's Scan)."""

from __future__ import annotations

import onnx
import pytest

from onnx_roofline.model import scopes
from onnx_roofline.model.loader import load_with_nodes
from onnx_roofline.model.memo import remembered
from onnx_roofline.model.scopes import _outer_reads, graph_outer_references
from tests.conftest import REPO

SHIPPED = REPO / "tests" / "corpus" / "shipped"
HOLDING_BODIES = sorted(
    path.name
    for path in SHIPPED.glob("*.onnx")
    if any(
        attr.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
        for node in onnx.load(path, load_external_data=False).graph.node
        for attr in node.attribute
    )
)


def bodies(graph: onnx.GraphProto):
    """Every body under the graph, nested ones included."""
    for node in graph.node:
        for attr in node.attribute:
            for body in [attr.g] if attr.type == onnx.AttributeProto.GRAPH else attr.graphs:
                yield body
                yield from bodies(body)


def test_the_shipped_graphs_hold_bodies_that_read_their_scope():
    assert len(HOLDING_BODIES) >= 10
    reading = [name for name in HOLDING_BODIES for body in bodies(load(name).graph) if _outer_reads(body)]
    assert len(set(reading)) >= 10


def load(name: str) -> onnx.ModelProto:
    return onnx.load(SHIPPED / name, load_external_data=False)


@pytest.mark.parametrize("name", HOLDING_BODIES)
def test_validation_remembers_each_bodys_outer_reads_as_scopes_reads_them(name, monkeypatch):
    read = [(body.name, _outer_reads(body)) for body in bodies(load(name).graph)]
    with remembered():
        model, _ = load_with_nodes(SHIPPED / name)  # validation runs here
        monkeypatch.setattr(scopes, "_outer_reads", lambda graph: pytest.fail("read again"))
        found = [(body.name, graph_outer_references(body)) for body in bodies(model.graph)]
    assert found == read
