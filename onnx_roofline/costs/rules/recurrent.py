"""Recurrent layers: RNN, GRU, LSTM. They run on the matrix unit (cuDNN runs their GEMMs on tensor
cores).

Counting, per time step, per batch element and per direction, with I the input size, H the hidden
size and G the gate count (RNN 1, GRU 3, LSTM 4):
- the input and recurrent GEMMs, Xt·Wᵀ + Ht−1·Rᵀ, are one dot product of length I + H per gate
  element: 2·(I + H)·G·H FLOPs (the MatMul convention, 2·K per output);
- the biases Wb and Rb (input B) are one add each per gate element: 2·G·H, only when B is given;
- the gate activations cost what the elementwise rules charge for the same function (Sigmoid and
  Tanh: one transcendental each; Relu: 1 FLOP; ...), per gate element they apply to;
- `clip` bounds each activation's input: a min and a max, 2 FLOPs per gate element;
- the cell arithmetic of each op's equations, one FLOP per basic operation (in the rule docstrings).

Time steps: X's sequence dim (axis 0, or 1 with layout=1). A constant `sequence_lens` runs batch
element b for min(sequence_lens[b], T) steps; a runtime one is unknown statically, so every
element is counted for all T steps (the padded work cuDNN's padded layout does).

Bytes: the default — X, W, R, B, initial states and P read once, each output written once. A
persistent kernel keeps W and R on chip across steps; one that does not re-reads them every step,
T times the weight bytes, which the unfused default does not show."""

from __future__ import annotations

from collections.abc import Sequence

from onnx_roofline.costs.cost import Cost
from onnx_roofline.costs.rules.registry import MATRIX, register
from onnx_roofline.model.op_node import KnownNode

# (FLOPs, transcendentals) per element of each activation ONNX's recurrent ops allow, matching the
# elementwise rules for the standalone ops of the same name.
ACTIVATIONS: dict[str, tuple[int, int]] = {
    "relu": (1, 0),  # max(0, x)
    "tanh": (0, 1),
    "sigmoid": (0, 1),  # one transcendental, as XLA's logistic
    "affine": (2, 0),  # alpha·x + beta
    "leakyrelu": (2, 0),  # multiply, select
    "thresholdedrelu": (1, 0),  # compare-select
    "scaledtanh": (2, 1),  # alpha·tanh(beta·x): two multiplies, one tanh
    "hardsigmoid": (4, 0),  # max(0, min(1, alpha·x + beta))
    "elu": (3, 1),  # exp; subtract, multiply, select
    "softsign": (3, 0),  # abs, add, divide
    "softplus": (1, 2),  # exp, log; add
}

DEFAULT_ACTIVATIONS = {"RNN": ("Tanh",), "GRU": ("Sigmoid", "Tanh"), "LSTM": ("Sigmoid", "Tanh", "Tanh"),
                       "DynamicQuantizeLSTM": ("Sigmoid", "Tanh", "Tanh"), "AttnLSTM": ("Sigmoid", "Tanh", "Tanh")}  # fmt: skip


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _activation(name: str | bytes) -> tuple[int, int]:
    key = _text(name).lower()
    if key not in ACTIVATIONS:
        raise ValueError(f"unknown recurrent activation {_text(name)!r}")
    return ACTIVATIONS[key]


def _directions(node: KnownNode) -> list[Sequence[str | bytes]]:
    """The activation names each direction uses (forward first, then reverse when bidirectional)."""
    per_direction = len(DEFAULT_ACTIVATIONS[node.op_type])
    count = node.operand(1).shape[0]  # W: [num_directions, G·H, I]
    names = node.attrs.get("activations") or []
    if len(names) >= per_direction * count:
        return [names[d * per_direction : (d + 1) * per_direction] for d in range(count)]
    if len(names) >= per_direction:  # one set given for a bidirectional layer: reuse it
        return [names[:per_direction]] * count
    return [DEFAULT_ACTIVATIONS[node.op_type]] * count


def sequence_steps(node: KnownNode) -> int:
    """Σ over batch elements of the time steps each runs (T·batch when sequence_lens is unknown)."""
    x = node.operand(0).shape
    steps, batch = (x[1], x[0]) if node.attrs.get("layout", 0) else (x[0], x[1])
    lens = node.input_value(4)
    if lens is None:
        return steps * batch
    return sum(min(max(int(n), 0), steps) for n in lens.reshape(-1)[:batch])


def _recurrent(node: KnownNode, gates: int, cell_flops, activations, sizes: tuple[int, int] | None = None) -> Cost:
    """Shared frame: `cell_flops(H)` is the per-step elementwise arithmetic besides GEMMs, biases,
    clipping and activations; `activations(names, H)` returns (FLOPs, transcendentals) per step.
    `sizes`: (I, H) where W and R are not ONNX's [D, G·H, I] and [D, G·H, H]."""
    w, r = node.operand(1), node.operand(2)
    inputs, hidden = sizes or (w.shape[-1], r.shape[-1])
    bias = 2 * gates * hidden if node.input(3) is not None else 0
    clip = 2 * gates * hidden if node.attrs.get("clip") is not None else 0
    per_step = 2 * (inputs + hidden) * gates * hidden + bias + clip + cell_flops(hidden)
    batch_steps = sequence_steps(node)
    flops = transcendentals = 0
    for names in _directions(node):
        act_flops, act_transcendentals = activations(names, hidden)
        flops += batch_steps * (per_step + act_flops)
        transcendentals += batch_steps * act_transcendentals
    return Cost(flops=flops, transcendentals=transcendentals)


def _apply(name: str | bytes, elements: int) -> tuple[int, int]:
    flops, transcendentals = _activation(name)
    return flops * elements, transcendentals * elements


def _sum(*pairs: tuple[int, int]) -> tuple[int, int]:
    return sum(p[0] for p in pairs), sum(p[1] for p in pairs)


@register("RNN", unit=MATRIX)
def rnn(node: KnownNode) -> Cost:
    """Ht = f(Xt·Wᵀ + Ht−1·Rᵀ + Wb + Rb), per step, batch element and direction: 2·(I + H)·H FLOPs
    for the GEMMs, 2·H for the two biases when B is given, f on H elements (default Tanh: H
    transcendentals), 2·H for `clip`. Steps: X's sequence dim, or a constant `sequence_lens`."""
    return _recurrent(node, 1, lambda h: 0, lambda names, h: _apply(names[0], h))


@register("GRU", unit=MATRIX)
def gru(node: KnownNode) -> Cost:
    """Per step, batch element and direction: 2·(I + H)·3H FLOPs for the GEMMs, 2·3H for Wb + Rb
    when B is given, H for the reset multiply — rt ⊙ Ht−1 before Rh (linear_before_reset=0) or
    rt ⊙ (Ht−1·Rhᵀ + Rbh) after it (=1): the same count either way — and 4·H for
    Ht = (1 − zt) ⊙ ht + zt ⊙ Ht−1 (subtract, two multiplies, add). Activations: f on zt and rt
    (2H), g on ht (H); defaults Sigmoid, Tanh: 3H transcendentals. `clip`: 2·3H."""
    return _recurrent(node, 3, lambda h: h + 4 * h, lambda names, h: _sum(_apply(names[0], 2 * h), _apply(names[1], h)))


def lstm_cost(node: KnownNode, sizes: tuple[int, int] | None = None, quantized: int = 0) -> Cost:
    """LSTM's count; `quantized`: FLOPs a dynamically quantized kernel adds per step, batch
    element and direction."""
    peepholes = node.input(7) is not None
    coupled = bool(node.attrs.get("input_forget", 0))

    def cell(h: int) -> int:
        return (6 * h if peepholes else 0) + 3 * h + h + (h if coupled else 0) + quantized

    def activations(names, h: int) -> tuple[int, int]:
        return _sum(_apply(names[0], (2 if coupled else 3) * h), _apply(names[1], h), _apply(names[2], h))

    return _recurrent(node, 4, cell, activations, sizes)


@register("LSTM", unit=MATRIX)
def lstm(node: KnownNode) -> Cost:
    """Per step, batch element and direction: 2·(I + H)·4H FLOPs for the GEMMs, 2·4H for Wb + Rb
    when B is given, 6·H for the peepholes Pi ⊙ Ct−1, Pf ⊙ Ct−1, Po ⊙ Ct (multiply, add each) when
    P is given, 3·H for Ct = ft ⊙ Ct−1 + it ⊙ ct, H for Ht = ot ⊙ h(Ct). Activations: f on it, ft,
    ot (3H), g on ct (H), h on Ct (H); defaults Sigmoid, Tanh, Tanh: 5H transcendentals.
    input_forget=1 couples it = 1 − ft: one subtract instead of f on it. `clip`: 2·4H."""
    return lstm_cost(node)


@register("DynamicQuantizeLSTM", domain="com.microsoft", unit=MATRIX, compute_dtype=1)
def dynamic_quantize_lstm(node: KnownNode) -> Cost:
    """onnxruntime's LSTM on 8-bit W [D, I, 4H] and R [D, H, 4H] (quantize_dynamic's): LSTM's count,
    with I and H read from those layouts, plus per step, batch element and direction what the
    dynamic quantization adds: Xt and Ht−1 quantized (DynamicQuantizeLinear, 7 per element:
    7·(I + H)) and the two int32 GEMM results dequantized (one multiply per gate element: 2·4H).
    Computes in W's 8-bit dtype."""
    inputs, hidden = node.operand(1).shape[1], node.operand(2).shape[1]
    return lstm_cost(node, (inputs, hidden), 7 * (inputs + hidden) + 2 * 4 * hidden)
