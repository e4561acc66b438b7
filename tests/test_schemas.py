"""onnx_roofline.model.schemas: what an op's schema says, which the passes over every node ask instead
of reading each node's attributes. Facts from the ONNX operator spec (Operators.md): Add had
`axis`/`broadcast` attributes up to opset 6 and none from 7; If has graph attributes; Constant
holds a tensor; Scatter was deprecated at opset 11."""

from __future__ import annotations

from onnx_roofline.model.schemas import may_have_attribute, may_have_bodies, may_hold_tensors


def test_an_ops_attributes_are_the_ones_its_schema_declares_at_the_models_opset():
    assert may_have_attribute("", "Add", 6, "axis") and not may_have_attribute("", "Add", 7, "axis")
    assert may_have_attribute("", "Softmax", 13, "axis") and may_have_attribute("ai.onnx", "Softmax", 13, "axis")
    assert not may_have_attribute("", "Relu", 14, "axis")


def test_bodies_and_tensors_are_only_where_the_schema_allows_them():
    assert may_have_bodies("", "If", 17) and may_have_bodies("", "Loop", 17) and may_have_bodies("", "Scan", 17)
    assert not may_have_bodies("", "MatMul", 17) and not may_have_bodies("", "Constant", 17)
    assert (
        may_hold_tensors("", "Constant", 17)
        and may_hold_tensors("", "ConstantOfShape", 17)
        and may_hold_tensors("", "If", 17)
    )
    assert not may_hold_tensors("", "MatMul", 17)


def test_an_op_validation_did_not_hold_to_a_schema_may_carry_anything():
    """Unknown ops, custom domains, ops onnxruntime registers in the default domain, deprecated
    ops and opsets the model does not import: their nodes' attributes must be read."""
    for domain, op, opset in (("com.microsoft", "Attention", 1), ("acme", "Mystery", 1), ("", "SimplifiedLayerNormalization", 17),
                              ("", "Scatter", 11), ("", "Add", None)):  # fmt: skip
        assert (
            may_have_bodies(domain, op, opset)
            and may_hold_tensors(domain, op, opset)
            and may_have_attribute(domain, op, opset, "x")
        )
