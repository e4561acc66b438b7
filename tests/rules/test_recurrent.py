"""Recurrent layers (onnx_roofline/costs/rules/recurrent.py): RNN, GRU, LSTM as one-node models, every
expected number written as the arithmetic of the spec's equations. f32 = 4 bytes.
Per step, batch element and direction: GEMMs 2·(I + H)·G·H; biases 2·G·H; activations per gate
element; cell arithmetic one FLOP per operation."""

from __future__ import annotations

import numpy as np

from tests.conftest import analyze_node


def test_rnn_forward_defaults():
    # X [T=5, B=3, I=4], H = 6, no bias: Ht = tanh(Xt·Wᵀ + Ht−1·Rᵀ)
    node = analyze_node(
        "RNN",
        [("X", "float32", [5, 3, 4]), ("W", "float32", [1, 6, 4]), ("R", "float32", [1, 6, 6])],
        [("Y", "float32", [5, 1, 3, 6]), ("Y_h", "float32", [1, 3, 6])],
        attrs={"hidden_size": 6},
    )
    steps = 5 * 3  # time steps × batch
    assert node.cost.flops == steps * (2 * (4 + 6) * 6)  # one dot of length I + H per hidden unit
    assert node.cost.transcendentals == steps * 6  # tanh per hidden unit
    assert node.cost.bytes_read == (5 * 3 * 4 + 6 * 4 + 6 * 6) * 4  # X, W, R once
    assert node.cost.bytes_written == (5 * 3 * 6 + 3 * 6) * 4  # Y, Y_h
    assert node.unit == "matrix"


def test_rnn_bias_relu_and_clip():
    node = analyze_node(
        "RNN",
        [
            ("X", "float32", [5, 3, 4]),
            ("W", "float32", [1, 6, 4]),
            ("R", "float32", [1, 6, 6]),
            ("B", "float32", [1, 12]),
        ],
        [("Y", "float32", [5, 1, 3, 6])],
        attrs={"hidden_size": 6, "activations": ["Relu"], "clip": 1.0},
    )
    per_step = 2 * (4 + 6) * 6 + 2 * 6 + 2 * 6 + 6  # GEMMs, Wb + Rb, clip (min, max), relu
    assert node.cost.flops == 5 * 3 * per_step
    assert node.cost.transcendentals == 0


GRU_INPUTS = [
    ("X", "float32", [2, 1, 3]),
    ("W", "float32", [2, 12, 3]),
    ("R", "float32", [2, 12, 4]),
    ("B", "float32", [2, 24]),
]


def test_gru_bidirectional_both_reset_orders():
    # T=2, B=1, I=3, H=4, two directions; G = 3 gates (z, r, h)
    per_step = (
        2 * (3 + 4) * 3 * 4  # GEMMs
        + 2 * 3 * 4  # Wb + Rb
        + 4  # the reset multiply rt ⊙ Ht−1 (or rt ⊙ (Ht−1·Rhᵀ + Rbh))
        + 4 * 4  # (1 − z) ⊙ h + z ⊙ H: subtract, two multiplies, add
    )
    for linear_before_reset in (0, 1):
        node = analyze_node(
            "GRU",
            GRU_INPUTS,
            [("Y", "float32", [2, 2, 1, 4])],
            attrs={"hidden_size": 4, "direction": "bidirectional", "linear_before_reset": linear_before_reset},
        )
        assert node.cost.flops == 2 * 1 * 2 * per_step  # steps × batch × directions
        assert node.cost.transcendentals == 2 * 1 * 2 * (2 * 4 + 4)  # sigmoid on z, r; tanh on h


def test_gru_other_activations():
    # f = HardSigmoid (4 FLOPs) on z and r, g = Softsign (3 FLOPs) on h, per direction
    node = analyze_node(
        "GRU",
        GRU_INPUTS,
        [("Y", "float32", [2, 2, 1, 4])],
        attrs={"hidden_size": 4, "direction": "bidirectional", "activations": ["HardSigmoid", "Softsign"] * 2},
    )
    per_step = 2 * 7 * 12 + 2 * 12 + 4 + 16 + 4 * 2 * 4 + 3 * 4
    assert node.cost.flops == 4 * per_step
    assert node.cost.transcendentals == 0


def test_lstm_peepholes_layout_1():
    # layout 1: X [B=2, T=3, I=5]; H = 4; G = 4 gates
    node = analyze_node(
        "LSTM",
        [
            ("X", "float32", [2, 3, 5]),
            ("W", "float32", [1, 16, 5]),
            ("R", "float32", [1, 16, 4]),
            ("B", "float32", [1, 32]),
            "",
            "",
            "",
            ("P", "float32", [1, 12]),
        ],
        [("Y", "float32", [2, 3, 1, 4])],
        attrs={"hidden_size": 4, "layout": 1},
    )
    per_step = (
        2 * (5 + 4) * 16  # GEMMs
        + 2 * 16  # Wb + Rb
        + 3 * 2 * 4  # Pi ⊙ C, Pf ⊙ C, Po ⊙ C, each a multiply and an add
        + 3 * 4  # Ct = f ⊙ Ct−1 + i ⊙ c
        + 4  # Ht = o ⊙ h(Ct)
    )
    assert node.cost.flops == 2 * 3 * per_step
    assert node.cost.transcendentals == 2 * 3 * 5 * 4  # sigmoid on i, f, o; tanh on c and on Ct


def test_lstm_constant_sequence_lens_and_input_forget():
    inputs = [
        ("X", "float32", [4, 2, 2]),
        ("W", "float32", [1, 12, 2]),
        ("R", "float32", [1, 12, 3]),
        "",
        ("sequence_lens", "int32", [2]),
    ]
    lens = {"sequence_lens": np.array([4, 1], np.int32)}
    node = analyze_node("LSTM", inputs, [("Y", "float32", [4, 1, 2, 3])], attrs={"hidden_size": 3}, initializers=lens)
    batch_steps = 4 + 1  # element 0 runs 4 steps, element 1 one
    per_step = 2 * (2 + 3) * 12 + 3 * 3 + 3
    assert node.cost.flops == batch_steps * per_step
    assert node.cost.transcendentals == batch_steps * 5 * 3

    coupled = analyze_node(
        "LSTM", inputs, [("Y", "float32", [4, 1, 2, 3])], attrs={"hidden_size": 3, "input_forget": 1}, initializers=lens
    )
    assert coupled.cost.flops == batch_steps * (per_step + 3)  # i = 1 − f: a subtract per unit
    assert coupled.cost.transcendentals == batch_steps * 4 * 3  # no sigmoid on i


def test_runtime_sequence_lens_counts_every_step():
    node = analyze_node(
        "RNN",
        [
            ("X", "float32", [5, 3, 4]),
            ("W", "float32", [1, 6, 4]),
            ("R", "float32", [1, 6, 6]),
            "",
            ("sequence_lens", "int32", [3]),
        ],
        [("Y", "float32", [5, 1, 3, 6])],
        attrs={"hidden_size": 6},
    )
    assert node.cost.flops == 5 * 3 * 2 * 10 * 6  # all T = 5 steps for the 3 elements
