"""How many frames a length regulator makes, where the durations it sums are data.

A text-to-speech model (VITS, Piper, FastSpeech) predicts how many frames each input token lasts,
rounds the prediction to whole frames (Ceil, Round, Floor), and sums the durations (ReduceSum over
the tokens, or CumSum along them) into the number of frames it then makes: a Range to that sum
(`torch.arange(lengths.max())`), a mask, the attention of frames to tokens, and the whole decoder
(the vocoder) at that length. The sum is data, and no static analysis knows it. The shape engine
assumes every rounded duration is `frames_per_token` (FRAMES_PER_TOKEN unless --frames-per-token
says otherwise): a sum over n tokens is ceil(n·F) frames, a running sum ceil(k·F) at the k-th
token; the rest is folded as any other small value (the Max over the batch, the clamp to one
frame). The report names the assumption and every sum it sized (`Regulated`).

FRAMES_PER_TOKEN = 6: LJSpeech, the corpus VITS and FastSpeech 2 were trained on, holds ≈ 24 h of
speech read at ≈ 15 characters a second (13,100 clips, ≈ 1.3 M characters: Ito, "The LJ Speech
Dataset", 2017), framed at 22,050 Hz with a 256-sample hop: 86.1 frames a second ÷ 15 ≈ 5.7 frames
per character, ≈ 6 per phoneme. A model with another hop or rate takes the flag."""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from onnx import helper

from onnx_roofline.model.constants import MAX_FOLDED_ELEMENTS
from onnx_roofline.model.nodes import Node
from onnx_roofline.model.tensors import TensorInfo, elem_type
from onnx_roofline.model.tensors import known as known_tensor
from onnx_roofline.shapes.folding import fold_node

FRAMES_PER_TOKEN = 6.0
"""The frames each token lasts where the flag says nothing (the module's docstring derives it)."""

SUMMING_OPS = frozenset({"ReduceSum", "CumSum"})
"""The ai.onnx ops a length regulator sums its durations with."""

_ROUNDING = frozenset({"Ceil", "Round", "Floor"})
_PASSING = frozenset(
    {"Cast", "Identity", "Reshape", "Squeeze", "Unsqueeze", "Flatten", "Transpose", "Mul", "Clip", "Max", "Relu"}
)
"""Ops between a rounded prediction and its sum: a mask or a speed multiplied in, a clamp at zero."""
_DEPTH = 8


@dataclass(frozen=True)
class Regulated:
    """The frames per token assumed (given, or the default), and the sums of durations it sized."""

    frames_per_token: float
    given: bool  # --frames-per-token said it; else FRAMES_PER_TOKEN
    nodes: tuple[str, ...]
    sized: tuple[
        str, ...
    ] = ()  # the nodes a value folded from those sums sizes (the Range to the frames): what verify checks at the run's sizes

    @property
    def message(self) -> str:
        count = len(self.nodes)
        source = "--frames-per-token" if self.given else "the default; --frames-per-token F for another"
        return (f"each token lasts {self.frames_per_token:.4g} frames ({source}): {count} sum{'s' if count != 1 else ''} of predicted durations "
                f"sized by it, the frames and everything made from them are estimates")  # fmt: skip

    def to_dict(self) -> dict:
        return {
            "frames_per_token": self.frames_per_token,
            "given": self.given,
            "nodes": list(self.nodes),
            "sized": list(self.sized),
        }


def parse_frames(text: str) -> float:
    """--frames-per-token's value: a positive number, as a decimal (6.5) or a ratio (52/8: the frames
    a run made over its tokens). Raises ValueError saying what is wrong."""
    try:
        value = float(Fraction(text.strip()))
    except (ValueError, ZeroDivisionError):
        raise ValueError(f"malformed frames per token {text!r}: expected a positive number, e.g. 6 or 52/8") from None
    if not 0 < value < 1e6:
        raise ValueError(f"the frames per token must be positive (and under a million), not {text.strip()!r}")
    return value


def is_duration(name: str, producer: Callable[[str], Node | None]) -> bool:
    """Whether `name` holds durations: computed, through a mask or speed multiplied in, a clamp or
    a cast, from a prediction rounded to whole frames. A mask summed into a length (an
    attention_mask's) is no rounded prediction: it is not one."""
    frontier, seen = [(name, 0)], set()
    while frontier:
        value, depth = frontier.pop()
        node = producer(value)
        if node is None or node.domain or value in seen or depth > _DEPTH:
            continue
        seen.add(value)
        if node.op_type in _ROUNDING:
            return True
        if node.op_type in _PASSING:
            inputs = node.inputs if node.op_type in ("Mul", "Max") else node.inputs[:1]
            frontier.extend((i, depth + 1) for i in inputs if i)
    return False


def assumed_sum(
    node: Node,
    data: TensorInfo,
    known: Mapping[str, np.ndarray],
    tensor: Callable[[str], TensorInfo | None],
    frames_per_token: float,
) -> np.ndarray | None:
    """The node's sum, every duration it sums `frames_per_token`, rounded up to whole frames; None
    where its other inputs (the axes) are not known or the durations are too many to hold."""
    if not known_tensor(data) or data.numel > MAX_FOLDED_ELEMENTS * 1024 or data.dtype is None:
        return None
    dtype = helper.tensor_dtype_to_np_dtype(elem_type(data.dtype))
    durations = np.full(data.shape, frames_per_token, np.float64)
    values = ChainMap({node.inputs[0]: durations}, known)  # type: ignore[arg-type]  # typeshed asks every map be mutable; ChainMap writes only the first
    result = fold_node(node, tensor, values, node.outputs[0])
    return None if result is None else np.ceil(result - 1e-9).astype(dtype)
