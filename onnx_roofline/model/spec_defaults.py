"""Attribute defaults ONNX's shape inference reads otherwise than the operator spec says: the
nodes it infers are given them spelled out, so the shapes it returns are the ones onnxruntime (and
onnx's reference evaluator) produce. Found by ONNX's node test suite with the declared output
shapes cleared (tests/test_node_suite.py)."""

from __future__ import annotations

from collections.abc import Iterable

import onnx

from onnx_roofline.model.nodes import Node

SPEC_DEFAULTS: dict[str, tuple[tuple[str, int], ...]] = {
    "STFT": (
        ("onesided", 1),
    ),  # onnx 1.23's inference takes an absent onesided as 0: [.., frame_length, 2], not frame_length // 2 + 1
}
"""ai.onnx op → (attribute, the spec's default) that inference must be told."""


def lacks_defaults(nodes: Iterable[Node]) -> bool:
    """Whether any node leaves out an attribute whose default inference misreads."""
    return any(
        _missing(node.op_type, node.domain, (attr.name for attr in node.attributes))
        for node in nodes
        if node.op_type in SPEC_DEFAULTS
    )


def spell_out_defaults(stored: Iterable[onnx.NodeProto]) -> None:
    """Add the misread defaults to these nodes (copies made for inference: never the model's own)."""
    for node in stored:
        if node.op_type in SPEC_DEFAULTS:
            for name, value in _missing(node.op_type, node.domain, (attr.name for attr in node.attribute)):
                node.attribute.append(onnx.helper.make_attribute(name, value))


def with_defaults(node: onnx.NodeProto) -> onnx.NodeProto:
    """The node itself, or a copy with the misread defaults spelled out."""
    if node.op_type not in SPEC_DEFAULTS or not _missing(
        node.op_type, node.domain, (attr.name for attr in node.attribute)
    ):
        return node
    copy = onnx.NodeProto()
    copy.CopyFrom(node)
    spell_out_defaults([copy])
    return copy


def _missing(op_type: str, domain: str, present: Iterable[str]) -> list[tuple[str, int]]:
    if domain not in ("", "ai.onnx"):
        return []
    given = set(present)
    return [(name, value) for name, value in SPEC_DEFAULTS[op_type] if name not in given]
