"""Elementwise ops: arithmetic, activations, comparisons, logical and bitwise ops, casts and views.

Counting (DESIGN.md), per output element: one FLOP for each basic operation the op's ONNX definition
performs — add, subtract, multiply, divide, remainder, negate, absolute value, rounding, compare,
min/max, select, logical and bitwise operations; multiplying by a constant (alpha, 1/√2) is a
multiply and a compare-and-select (max(0, x), `x if x > a else 0`) is one operation — and one
transcendental for each call of exp, log, sqrt, erf, tanh, sigmoid, pow or a trigonometric or
hyperbolic function, one each and never weighted, as XLA's HloCostAnalysis counts them.

Broadcasting: the FLOPs follow the output's element count; the bytes are the framework default,
each distinct input read once at its own size (a [C] bias broadcast over [N, C, H, W] is read as C
elements) and the output written once, so `Add(x, x)` reads x once."""

from __future__ import annotations

import math

from onnx_roofline.costs.cost import VIEW, Cost
from onnx_roofline.costs.rules.registry import register
from onnx_roofline.model.op_node import KnownNode


def per_element(op_type: str, flops: int, transcendentals: int, formula: str, **options) -> None:
    """Register `op_type` at a fixed count per output element; `formula` becomes the rule's doc."""

    def rule(node: KnownNode) -> Cost:
        outputs = node.result(0).numel
        return Cost(flops=flops * outputs, transcendentals=transcendentals * outputs)

    counts = [f"{flops} FLOP{'s' * (flops != 1)}"]
    if transcendentals:
        counts.append(f"{transcendentals} transcendental{'s' * (transcendentals != 1)}")
    rule.__name__ = rule.__qualname__ = f"elementwise_{op_type}"
    rule.__doc__ = f"{formula}: {' and '.join(counts)} per output element."
    register(op_type, **options)(rule)


# (op_type, FLOPs, transcendentals per output element, the definition counted)
_TABLE: tuple[tuple[str, int, int, str], ...] = (
    # arithmetic (binary ones broadcast; the count follows the output)
    ("Add", 1, 0, "a + b"),
    ("Sub", 1, 0, "a − b"),
    ("Mul", 1, 0, "a · b"),
    ("Div", 1, 0, "a / b"),
    ("Mod", 1, 0, "remainder of a / b (fmod or integer mod)"),
    ("Neg", 1, 0, "−x"),
    ("Abs", 1, 0, "|x|"),
    ("Reciprocal", 1, 0, "1 / x"),
    ("Floor", 1, 0, "floor(x)"),
    ("Ceil", 1, 0, "ceil(x)"),
    ("Round", 1, 0, "round half to even(x)"),
    ("Sign", 1, 0, "sign(x)"),
    # transcendental functions: one call each
    ("Sqrt", 0, 1, "sqrt(x)"),
    ("Exp", 0, 1, "exp(x)"),
    ("Log", 0, 1, "log(x)"),
    ("Erf", 0, 1, "erf(x)"),
    ("Tanh", 0, 1, "tanh(x)"),
    ("Sigmoid", 0, 1, "sigmoid(x) = 1 / (1 + exp(−x)), one transcendental as XLA's logistic"),
    ("Sin", 0, 1, "sin(x)"),
    ("Cos", 0, 1, "cos(x)"),
    ("Tan", 0, 1, "tan(x)"),
    ("Asin", 0, 1, "asin(x)"),
    ("Acos", 0, 1, "acos(x)"),
    ("Atan", 0, 1, "atan(x)"),
    ("Sinh", 0, 1, "sinh(x)"),
    ("Cosh", 0, 1, "cosh(x)"),
    ("Asinh", 0, 1, "asinh(x)"),
    ("Acosh", 0, 1, "acosh(x)"),
    ("Atanh", 0, 1, "atanh(x)"),
    # activations, counted from their ONNX definitions
    ("Relu", 1, 0, "max(0, x)"),
    ("LeakyRelu", 2, 0, "x if x ≥ 0 else alpha·x (multiply, select)"),
    ("PRelu", 2, 0, "x if x ≥ 0 else slope·x, slope broadcast (multiply, select)"),
    ("ThresholdedRelu", 1, 0, "x if x > alpha else 0 (compare-select)"),
    ("HardSigmoid", 4, 0, "max(0, min(1, alpha·x + beta)) (multiply, add, min, max)"),
    ("HardSwish", 5, 0, "x · max(0, min(1, x/6 + 1/2)) (multiply, add, min, max, multiply)"),
    ("Elu", 3, 1, "x if x ≥ 0 else alpha·(exp(x) − 1) (exp; subtract, multiply, select)"),
    ("Selu", 4, 1, "gamma·(x if x > 0 else alpha·exp(x) − alpha) (exp; multiply, subtract, select, multiply)"),
    ("Celu", 6, 1, "max(0, x) + min(0, alpha·(exp(x/alpha) − 1)) (exp; divide, subtract, multiply, min, max, add)"),
    ("Mish", 2, 3, "x · tanh(log(1 + exp(x))) (exp, log, tanh; add, multiply)"),
    ("Softplus", 1, 2, "log(exp(x) + 1) (exp, log; add)"),
    ("Softsign", 3, 0, "x / (1 + |x|) (abs, add, divide)"),
    ("Shrink", 3, 0, "x + bias if x < −lambd, x − bias if x > lambd, else 0 (two compares, one add)"),
    ("Swish", 2, 1, "x · sigmoid(alpha·x) (sigmoid; two multiplies)"),
    ("SwiGLU", 3, 1, "a · sigmoid(alpha·a) · b (sigmoid; three multiplies)"),
    # comparisons, logic, bits, classification: one operation each
    ("Equal", 1, 0, "a == b"),
    ("Less", 1, 0, "a < b"),
    ("Greater", 1, 0, "a > b"),
    ("LessOrEqual", 1, 0, "a ≤ b"),
    ("GreaterOrEqual", 1, 0, "a ≥ b"),
    ("And", 1, 0, "a and b"),
    ("Or", 1, 0, "a or b"),
    ("Xor", 1, 0, "a xor b"),
    ("Not", 1, 0, "not x"),
    ("BitShift", 1, 0, "a << b or a >> b"),
    ("BitwiseAnd", 1, 0, "a & b"),
    ("BitwiseOr", 1, 0, "a | b"),
    ("BitwiseXor", 1, 0, "a ^ b"),
    ("BitwiseNot", 1, 0, "~x"),
    ("IsNaN", 1, 0, "x != x"),
    ("IsInf", 1, 0, "x == ±inf"),
    # conversion: no arithmetic, but the data is read and written
    ("Cast", 0, 0, "a conversion to `to`, no arithmetic (bytes: the default, input read, output written)"),
)

for _op_type, _flops, _transcendentals, _formula in _TABLE:
    per_element(_op_type, _flops, _transcendentals, _formula)
per_element(
    "Where", 1, 0, "condition ? x : y (a select; the peak follows x's dtype, not the bool condition's)", compute_dtype=1
)


@register("Gelu")
def gelu(node: KnownNode) -> Cost:
    """approximate="none": 0.5·x·(1 + erf(x/√2)) — 1 transcendental (erf) and 4 FLOPs (divide, add,
    two multiplies) per output element. approximate="tanh": 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
    — 1 transcendental (tanh) and 8 FLOPs (x³ two multiplies, then multiply, add, multiply, add and
    two multiplies)."""
    approximate = node.attrs.get("approximate", "none")
    approximate = approximate.decode() if isinstance(approximate, bytes) else approximate
    outputs = node.result(0).numel
    return Cost(flops=(8 if approximate == "tanh" else 4) * outputs, transcendentals=outputs)


@register("Pow")
def pow_(node: KnownNode) -> Cost:
    """x^y. A constant exponent with one integer value n costs the multiplies of exponentiation by
    squaring per output element, bit_length(|n|) + popcount(|n|) − 2 FLOPs (x² is 1 multiply, x³ 2,
    x⁴ 2, x⁰ and x¹ none), plus one divide when n < 0. Any other exponent (a tensor of values, a
    fraction) is one transcendental per output element: pow as XLA counts kPower (sqrt or rsqrt
    for ±0.5)."""
    outputs = node.result(0).numel
    exponent = node.input_value(1)
    if exponent is None or exponent.size == 0 or not (exponent == exponent.flat[0]).all():
        return Cost(transcendentals=outputs)
    value = float(exponent.flat[0])
    if not math.isfinite(value) or value != int(value):
        return Cost(transcendentals=outputs)
    n = abs(int(value))
    multiplies = n.bit_length() + n.bit_count() - 2 if n > 1 else 0
    return Cost(flops=(multiplies + (1 if value < 0 else 0)) * outputs)


@register("Sum", "Max", "Min")
def variadic(node: KnownNode) -> Cost:
    """k inputs broadcast to the output: k − 1 adds (or compares) per output element; one input is a
    copy (0 FLOPs, bytes still moved). The same tensor passed twice is two operands but one read."""
    return Cost(flops=(len(node.present_inputs) - 1) * node.result(0).numel)


@register("Mean")
def mean(node: KnownNode) -> Cost:
    """k inputs broadcast to the output: k − 1 adds and one divide by k per output element, k FLOPs."""
    return Cost(flops=len(node.present_inputs) * node.result(0).numel)


@register("Clip", since=1)
def clip_attributes(node: KnownNode) -> Cost:
    """Before opset 11 the bounds are attributes (from opset 6 both default to ∓FLT_MAX, so both
    apply): one min or max per bound per output element."""
    bounds = sum(name in node.attrs for name in ("min", "max"))
    return Cost(flops=bounds * node.result(0).numel)


@register("Clip", since=11)
def clip_inputs(node: KnownNode) -> Cost:
    """From opset 11 the bounds are optional inputs `min`, `max`: one max or min per bound given,
    per output element; no bound given is a copy (0 FLOPs). Bound tensors are read (default bytes)."""
    bounds = sum(node.input(index) is not None for index in (1, 2))
    return Cost(flops=bounds * node.result(0).numel)


@register("CastLike")
def cast_like(node: KnownNode) -> Cost:
    """A conversion to target_type's dtype, no arithmetic. Bytes: reads the input and writes the
    output; target_type contributes only its dtype, so its data is not counted as read."""
    return Cost(bytes_read=node.operand(0).nbytes)


@register("Identity", "BitCast")
def view(node: KnownNode) -> Cost:
    """A pure view: no arithmetic, no data moved (BitCast reinterprets the same bits as a dtype of
    the same width, as a reinterpret_cast does)."""
    return VIEW
