"""ai.onnx.preview.training optimizers (onnx_roofline/costs/rules/training.py): per element of the
optimized tensors, one FLOP per operation of the spec's pseudo code. f32 = 4, int64 = 8 bytes."""

from __future__ import annotations

from onnx_roofline import analyze
from tests.conftest import analyze_node, one_node_model

TRAINING = "ai.onnx.preview.training"
SCALARS = [("R", "float32", []), ("T", "int64", [])]


def optimizer(op_type, tensors, outputs, attrs):
    return analyze_node(op_type, SCALARS + tensors, outputs, attrs=attrs, domain=TRAINING)


def test_adagrad():
    tensors = [("X", "float32", [3, 4]), ("G", "float32", [3, 4]), ("H", "float32", [3, 4])]
    outputs = [("X_new", "float32", [3, 4]), ("H_new", "float32", [3, 4])]
    node = optimizer("Adagrad", tensors, outputs, {})
    # H + G·G (2), sqrt (transcendental) + ε (1), X − r·G/H (3); r = R/(1 + T·decay) once (3)
    assert node.cost.flops == 6 * 12 + 3
    assert node.cost.transcendentals == 12
    assert node.cost.bytes_read == 4 + 8 + 3 * 12 * 4
    assert node.cost.bytes_written == 2 * 12 * 4
    regularized = optimizer("Adagrad", tensors, outputs, {"norm_coefficient": 0.1})
    assert regularized.cost.flops == (6 + 2) * 12 + 3  # + G + norm·X


def test_adam_two_tensors():
    shapes = {"1": [2], "2": [3]}
    tensors = [(f"{group}{i}", "float32", shape) for group in "XGVH" for i, shape in shapes.items()]
    outputs = [(f"{group}_new{i}", "float32", shape) for group in "XVH" for i, shape in shapes.items()]
    node = optimizer("Adam", tensors, outputs, {})
    # V: α·V + (1 − α)·G (3); H: β·H + (1 − β)·G² (4); sqrt + ε (1 + 1 transcendental); X − R·V/H (3)
    # once: R·sqrt(1 − β^T)/(1 − α^T): 4 FLOPs, 3 transcendentals
    assert node.cost.flops == 11 * (2 + 3) + 4
    assert node.cost.transcendentals == (2 + 3) + 3
    post = optimizer("Adam", tensors, outputs, {"norm_coefficient_post": 0.01})
    assert post.cost.flops == 12 * 5 + 4  # + (1 − post)·X_new


def test_momentum_standard_and_nesterov():
    tensors = [("X", "float32", [10]), ("G", "float32", [10]), ("V", "float32", [10])]
    outputs = [("X_new", "float32", [10]), ("V_new", "float32", [10])]
    attrs = {"alpha": 0.9, "beta": 1.0, "norm_coefficient": 0.0}
    standard = optimizer("Momentum", tensors, outputs, {**attrs, "mode": "standard"})
    assert standard.cost.flops == 5 * 10 + 1  # α·V + β·G (3), X − R·V (2); the β select once
    nesterov = optimizer("Momentum", tensors, outputs, {**attrs, "mode": "nesterov"})
    assert nesterov.cost.flops == 7 * 10 + 1  # α·V + β·G (3), X − R·(G + α·V) (4)


def test_gradient_is_not_costed_with_a_reason():
    model = one_node_model(
        "Gradient", [("x", "float32", [3])], [("dy_dx", "float32", [3])], attrs={"xs": ["x"], "y": "y"}, domain=TRAINING
    )
    (node,) = analyze(model).nodes
    assert node.status == "rule-error" and "differentiated" in node.reason
