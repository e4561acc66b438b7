"""Signal ops (onnx_roofline/costs/rules/signal.py). FFT FLOPs are FFTW's convention: 5·N·log2(N) per
complex transform, 2.5·N·log2(N) per real-data one. f32 = 4 bytes, int64 = 8 bytes."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.conftest import analyze_node


def test_dft_20_real_input_default_axis():
    # x [2, 16, 1]: two real signals of 16 along axis −2 (= 1)
    node = analyze_node("DFT", [("x", "float32", [2, 16, 1])], [("y", "float32", [2, 16, 2])], opset=20)
    assert node.cost.flops == 2 * (2.5 * 16 * 4)  # real-data FFT, log2(16) = 4
    assert node.cost.transcendentals == 0  # twiddles come with the plan
    assert node.cost.bytes_read == 2 * 16 * 4
    assert node.cost.bytes_written == 2 * 16 * 2 * 4
    assert node.unit == "vector"


def test_dft_17_complex_inverse_axis_attribute():
    # x [3, 8, 2]: three complex signals of 8 along axis 1; the inverse scales by 1/N
    node = analyze_node(
        "DFT", [("x", "float32", [3, 8, 2])], [("y", "float32", [3, 8, 2])], attrs={"inverse": 1, "axis": 1}, opset=17
    )
    assert node.cost.flops == 3 * (5 * 8 * 3) + 3 * 8 * 2  # complex FFTs + one multiply per output scalar


def test_dft_onesided_with_constant_length_and_irfft():
    rfft = analyze_node(
        "DFT",
        [("x", "float32", [1, 8, 1]), ("n", "int64", [])],
        [("y", "float32", [1, 5, 2])],
        attrs={"onesided": 1},
        initializers={"n": np.array(8, np.int64)},
        opset=20,
    )
    assert rfft.cost.flops == 2.5 * 8 * 3  # N = 8 from dft_length; 5 bins kept
    irfft = analyze_node(
        "DFT",
        [("x", "float32", [1, 5, 2])],
        [("y", "float32", [1, 8, 1])],
        attrs={"onesided": 1, "inverse": 1},
        opset=20,
    )
    assert irfft.cost.flops == 2.5 * 8 * 3 + 8  # N = 2·(5 − 1), real output; 1/N on 8 samples


def test_dft_axis_input_and_non_power_of_two():
    node = analyze_node(
        "DFT",
        [("x", "float32", [10, 4, 2]), "", ("axis", "int64", [])],
        [("y", "float32", [10, 4, 2])],
        initializers={"axis": np.array(0, np.int64)},
        opset=20,
    )
    assert node.cost.flops == 4 * round(5 * 10 * math.log2(10))  # 4 complex transforms of 10, rounded


def test_stft_with_window():
    # signal [1, 64, 1], hop 16, window 16: (64 − 16)/16 + 1 = 4 frames of 9 one-sided bins
    node = analyze_node(
        "STFT",
        [("signal", "float32", [1, 64, 1]), ("step", "int64", []), ("window", "float32", [16])],
        [("y", "float32", [1, 4, 9, 2])],
        initializers={"step": np.array(16, np.int64)},
        opset=17,
    )
    assert node.cost.flops == 4 * (16 + 2.5 * 16 * 4)  # window multiply + real FFT of 16, per frame
    assert node.cost.bytes_read == 64 * 4 + 8 + 16 * 4  # signal once, hop, window


def test_stft_frame_length_without_window():
    node = analyze_node(
        "STFT",
        [("signal", "float32", [2, 64, 2]), ("step", "int64", []), "", ("length", "int64", [])],
        [("y", "float32", [2, 7, 16, 2])],
        attrs={"onesided": 0},
        initializers={"step": np.array(8, np.int64), "length": np.array(16, np.int64)},
        opset=17,
    )
    assert node.cost.flops == 2 * 7 * (5 * 16 * 4)  # complex signal, rectangular window: no multiply


@pytest.mark.parametrize(
    ("op_type", "flops", "transcendentals"),
    [
        ("HannWindow", 3, 1),  # n·(2π/N), cos, · 0.5, 0.5 − …
        ("HammingWindow", 3, 1),  # n·(2π/N), cos, · β, α − …
        ("BlackmanWindow", 6, 2),  # two angles, two cos, two multiplies, a subtract, an add
    ],
)
def test_windows(op_type, flops, transcendentals):
    node = analyze_node(
        op_type,
        [("size", "int32", [])],
        [("w", "float32", [10])],
        initializers={"size": np.array(10, np.int32)},
        opset=17,
    )
    assert node.cost.flops == flops * 10
    assert node.cost.transcendentals == transcendentals * 10
    assert node.cost.bytes_read == 4 and node.cost.bytes_written == 10 * 4


def test_mel_weight_matrix():
    scalars = {
        "bins": np.array(8, np.int32),
        "n": np.array(16, np.int32),
        "rate": np.array(8000, np.int32),
        "low": np.array(0.0, np.float32),
        "high": np.array(4000.0, np.float32),
    }
    node = analyze_node(
        "MelWeightMatrix",
        [
            ("bins", "int32", []),
            ("n", "int32", []),
            ("rate", "int32", []),
            ("low", "float32", []),
            ("high", "float32", []),
        ],
        [("m", "float32", [9, 8])],
        initializers=scalars,
        opset=17,
    )
    assert node.cost.flops == 6 * (16 // 2 + 1) * 8  # two ramps (sub, div each), min, max per weight
    assert node.cost.transcendentals == 8 + 2 + 2  # 10 edge exps back to hertz, 2 logs into mel
