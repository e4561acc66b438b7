"""Signal processing: DFT, STFT, the Hann/Hamming/Blackman windows and MelWeightMatrix. All run on
the vector unit (cuFFT does not use tensor cores for these transforms).

FFT FLOPs follow FFTW's benchmark convention (benchFFT's "mflops"): a complex transform of length N
counts 5·N·log2(N), a real-data transform (real input, or real output for an inverse) 2.5·N·log2(N),
whatever N is and whichever algorithm runs. It is the FFT's cost, not the O(N²) of the DFT's
definition: every runtime (cuFFT, pocketfft in numpy/onnxruntime, FFTW) uses an FFT, and the
roofline wants a lower bound. Twiddle factors are precomputed with the plan: no transcendentals.
Non-integer results (N not a power of two) are rounded to the nearest integer."""

from __future__ import annotations

import math

from onnx_roofline.costs.cost import Cost
from onnx_roofline.costs.rules.registry import register
from onnx_roofline.model.op_node import KnownNode


def fft_flops(length: int, real: bool) -> int:
    """FFTW's nominal count for one transform: 5·N·log2(N) complex, 2.5·N·log2(N) real-data."""
    if length <= 1:
        return 0
    return round((2.5 if real else 5) * length * math.log2(length))


def _scalar(node: KnownNode, index: int) -> int | None:
    value = node.input_value(index)
    return None if value is None else int(value.reshape(-1)[0])


def _dft(node: KnownNode, axis: int) -> Cost:
    x, y = node.operand(0), node.result(0)
    axis %= x.rank
    inverse, onesided = bool(node.attrs.get("inverse", 0)), bool(node.attrs.get("onesided", 0))
    length = _scalar(node, 1)
    if length is None:
        if node.input(1) is None:  # the reference's default: the input's length (irfft: 2·(n − 1))
            length = 2 * (x.shape[axis] - 1) if inverse and onesided else x.shape[axis]
        elif inverse or not onesided:  # the output holds all N bins (irfft: all N samples)
            length = y.shape[axis]
        else:
            raise ValueError("dft_length is not a constant and a one-sided output does not fix it")
    real = x.shape[-1] == 1 or y.shape[-1] == 1
    transforms = y.numel // (y.shape[axis] * y.shape[-1]) if y.numel else 0
    scale = y.numel if inverse else 0  # the inverse's 1/N, one multiply per output scalar
    return Cost(flops=transforms * fft_flops(length, real) + scale)


@register("DFT", since=17)
def dft_17(node: KnownNode) -> Cost:
    """One FFT of length N = dft_length (default: the signal's length along `axis` attribute,
    default 1) per line along it: 5·N·log2(N) complex or 2.5·N·log2(N) when the input (last dim
    1) or output (irfft) is real, FFTW's convention. `onesided` keeps half the bins of the same
    transform. The inverse adds its 1/N: one multiply per output scalar. Bytes: the default."""
    return _dft(node, node.attrs.get("axis", 1))


@register("DFT", since=20)
def dft_20(node: KnownNode) -> Cost:
    """As DFT-17 (5·N·log2(N) per complex FFT, 2.5·N·log2(N) real-data, inverse + one multiply per
    output scalar), with the axis now input 2 (default −2), which must be a constant."""
    if node.input(2) is None:
        axis = -2
    else:
        constant = _scalar(node, 2)
        if constant is None:
            raise ValueError("DFT axis is not a constant")
        axis = constant
    return _dft(node, axis)


@register("STFT", since=17)
def stft(node: KnownNode) -> Cost:
    """Per frame (output [batch, frames, bins, 2]): the window multiply, frame_length multiplies
    per real component of the signal (none without a window: rectangular), and one FFT of length
    N = frame_length: 2.5·N·log2(N) for a real signal, 5·N·log2(N) complex. N: the constant
    frame_length, else the window's length, else the signal's. Bytes: the default (the signal is
    read once, overlapping frames included)."""
    x, y = node.operand(0), node.result(0)
    length = _scalar(node, 3)
    if length is None:
        if node.input(3) is not None and node.input(2) is None:
            raise ValueError("STFT frame_length is not a constant")
        length = node.operand(2).shape[0] if node.input(2) is not None else x.shape[1]
    frames = y.shape[0] * y.shape[1]
    components = x.shape[-1]  # 1 real, 2 complex
    window = length * components if node.input(2) is not None else 0
    return Cost(flops=frames * (window + fft_flops(length, components == 1)))


_WINDOWS = (
    ("HannWindow", 3, 1, "0.5 − 0.5·cos(2πn/N)"),
    ("HammingWindow", 3, 1, "α − β·cos(2πn/N), α = 25/46, β = 21/46"),
    ("BlackmanWindow", 6, 2, "0.42 − 0.5·cos(2πn/N) + 0.08·cos(4πn/N)"),
)


def _window(op_type: str, flops: int, transcendentals: int, formula: str) -> None:
    def rule(node: KnownNode) -> Cost:
        n = node.result(0).numel
        return Cost(flops=flops * n, transcendentals=transcendentals * n)

    angles = "two angles n·(2π/N) and n·(4π/N)" if transcendentals == 2 else "the angle n·(2π/N)"
    rule.__doc__ = (
        f"w[n] = {formula} per output element: {flops} FLOPs ({angles}, a multiply per cosine, the "
        f"adds), {transcendentals} transcendental{'s' if transcendentals > 1 else ''} (cos); the "
        "scalar 2π/N is computed once. Bytes: the default (size read, window written)."
    )
    rule.__name__ = rule.__qualname__ = op_type.lower()
    register(op_type, since=17)(rule)


for _op_type, _flops, _transcendentals, _formula in _WINDOWS:
    _window(_op_type, _flops, _transcendentals, _formula)


@register("MelWeightMatrix", since=17)
def mel_weight_matrix(node: KnownNode) -> Cost:
    """Output [dft_length/2 + 1, num_mel_bins]: each weight is a triangle, max(0, min(rising,
    falling)) with rising = (f − lower)/(center − lower) and falling = (upper − f)/(upper − center):
    6 FLOPs per output element. The mel-scale edges cost 2 logs (the edge frequencies in mel) and
    num_mel_bins + 2 exps (back to hertz): num_mel_bins + 4 transcendentals; their few FLOPs per
    edge are not counted. Bytes: the default (five scalars read, the matrix written)."""
    y = node.result(0)
    return Cost(flops=6 * y.numel, transcendentals=y.shape[1] + 4)
