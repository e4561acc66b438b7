"""Folding of shape-computing subgraphs: the Shape → Gather → Concat → Range chains exporters emit.

ONNX's data propagation stops at ops like Range, so their outputs stay unknown. Here small values
are evaluated with numpy from constants and known shapes (never from weights), one node at a time
as the shape engine's sweep reaches it, so the nodes downstream see them. One rule bounds them:
a result of more than MAX_FOLDED_ELEMENTS is not folded, and where an op's result can outgrow its
inputs (a Range to a dim of 10^12) its size is computed before anything is allocated."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from itertools import zip_longest

import numpy as np
from onnx import helper

from onnx_roofline.model.constants import MAX_FOLDED_ELEMENTS, ConstantSource, constant_array, tensor_array
from onnx_roofline.model.nodes import Node
from onnx_roofline.model.tensors import TensorInfo, all_ints

Evaluator = Callable[[list, Mapping], np.ndarray | None]


def _axes(inputs: list, attrs: Mapping, index: int = 1):
    if len(inputs) > index and inputs[index] is not None:
        return tuple(int(a) for a in np.asarray(inputs[index]).reshape(-1))
    axes = attrs.get("axes")
    return None if axes is None else tuple(axes)


def _slice(inputs: list, attrs: Mapping) -> np.ndarray:
    data = inputs[0]
    if len(inputs) > 1:  # opset ≥ 10: starts, ends, axes, steps are inputs
        starts, ends = inputs[1], inputs[2]
        axes = inputs[3] if len(inputs) > 3 and inputs[3] is not None else range(len(starts))
        steps = inputs[4] if len(inputs) > 4 and inputs[4] is not None else [1] * len(starts)
    else:
        starts, ends = attrs["starts"], attrs["ends"]
        axes, steps = attrs.get("axes", range(len(starts))), [1] * len(starts)
    index = [slice(None)] * data.ndim
    for start, end, axis, step in zip(starts, ends, axes, steps, strict=False):
        index[int(axis)] = slice(int(start), int(end), int(step))
    return data[tuple(index)]


def _reshape(inputs: list, attrs: Mapping) -> np.ndarray:
    data, shape = inputs[0], [int(s) for s in inputs[1]]
    if not attrs.get("allowzero", 0):
        shape = [data.shape[i] if s == 0 else s for i, s in enumerate(shape)]
    return data.reshape(shape)


def _unsqueeze(data: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    rank = data.ndim + len(axes)
    return np.expand_dims(data, tuple(axis % rank for axis in axes))


def _flatten(data: np.ndarray, axis: int) -> np.ndarray:
    axis = axis + data.ndim if axis < 0 else axis
    return data.reshape(math.prod(data.shape[:axis]), -1)


def _one_hot(inputs: list, attrs: Mapping) -> np.ndarray | None:
    """OneHot(indices, depth, [off, on]): a new axis of `depth` (at `axis`, -1 last) holding `on`
    where it equals the index (a negative index counts from `depth`; one out of range, none)."""
    indices, depth, values = inputs
    depth = int(np.asarray(depth).reshape(-1)[0])
    if depth < 0:
        return None
    indices = np.asarray(indices).astype(np.int64)
    indices = np.where(indices < 0, indices + depth, indices)
    chosen = np.arange(depth) == indices[..., None]
    result = np.where(chosen, values.reshape(-1)[1], values.reshape(-1)[0]).astype(values.dtype)
    axis = attrs.get("axis", -1)
    return np.moveaxis(result, -1, axis if axis >= 0 else result.ndim + axis)


def _constant_of_shape(inputs: list, attrs: Mapping) -> np.ndarray | None:
    """ConstantOfShape(shape): its one-element `value` everywhere (0.0 as float32 without one)."""
    value = tensor_array(attrs["value"]) if "value" in attrs else np.zeros(1, np.float32)
    if value is None or value.size != 1:
        return None  # an unreadable value: shape inference says what it can
    return np.full([int(s) for s in inputs[0]], value.reshape(-1)[0])


_COMBINE: dict[str, Callable[..., np.ndarray]] = {
    "none": lambda old, new: new,
    "add": np.add,
    "mul": np.multiply,
    "max": np.maximum,
    "min": np.minimum,
}
"""ScatterElements' and ScatterND's `reduction`: how an update meets the value it lands on."""


def _combine(attrs: Mapping) -> Callable:
    reduction = attrs.get("reduction", "none")
    return _COMBINE[reduction.decode() if isinstance(reduction, bytes) else reduction]


def _scatter_elements(inputs: list, attrs: Mapping) -> np.ndarray:
    """ScatterElements(data, indices, updates): each update written at its own position with the
    index put in along `axis` (a TorchScript export's shape arithmetic: `shape[i] = n`)."""
    data, indices, updates = inputs
    axis = attrs.get("axis", 0) % data.ndim
    indices = np.where(indices < 0, indices + data.shape[axis], indices)
    result, combine = data.copy(), _combine(attrs)
    for position in np.ndindex(indices.shape):
        target = (*position[:axis], int(indices[position]), *position[axis + 1 :])
        result[target] = combine(result[target], updates[position])
    return result


def _scatter_nd(inputs: list, attrs: Mapping) -> np.ndarray:
    """ScatterND(data, indices, updates): each index tuple of `indices` (its last axis) receives
    the update slice at the same position."""
    data, indices, updates = inputs
    result, combine = data.copy(), _combine(attrs)
    for position in np.ndindex(indices.shape[:-1]):
        target = tuple(int(i) for i in indices[position])
        result[target] = combine(result[target], updates[position])
    return result


def _gather_nd(inputs: list, attrs: Mapping) -> np.ndarray | None:
    """GatherND(data, indices) without batch dims: the slices the index tuples name."""
    if attrs.get("batch_dims", 0):
        return None
    data, indices = inputs
    return data[tuple(np.moveaxis(indices.astype(np.int64), -1, 0))]


def _cum_sum(inputs: list, attrs: Mapping) -> np.ndarray:
    """CumSum(x, axis): the running sum, `exclusive` (each element left out of its own) and `reverse`."""
    data, axis = inputs[0], int(np.asarray(inputs[1]).reshape(-1)[0]) % max(inputs[0].ndim, 1)
    flipped = np.flip(data, axis) if attrs.get("reverse", 0) else data
    total = np.cumsum(flipped, axis=axis, dtype=data.dtype)
    if attrs.get("exclusive", 0):
        total = total - flipped
    return np.flip(total, axis) if attrs.get("reverse", 0) else total


def _integer_div(a, b):
    return np.trunc(np.true_divide(a, b)).astype(np.result_type(a, b)) if np.result_type(a, b).kind in "iu" else a / b


def _reduce(fn):
    def evaluate(inputs: list, attrs: Mapping) -> np.ndarray:
        return fn(inputs[0], axis=_axes(inputs, attrs), keepdims=bool(attrs.get("keepdims", 1)))

    return evaluate


_EVALUATORS: dict[str, Evaluator] = {
    "Identity": lambda i, a: i[0],
    "Cast": lambda i, a: i[0].astype(helper.tensor_dtype_to_np_dtype(a["to"])),
    "CastLike": lambda i, a: i[0].astype(i[1].dtype),
    "Floor": lambda i, a: np.floor(i[0]),
    "Ceil": lambda i, a: np.ceil(i[0]),
    "Round": lambda i, a: np.round(i[0]),
    "Sqrt": lambda i, a: np.sqrt(i[0]),
    "Pow": lambda i, a: np.power(i[0], i[1]).astype(i[0].dtype),
    "Reciprocal": lambda i, a: np.reciprocal(i[0]),
    "Gather": lambda i, a: np.take(i[0], i[1], axis=a.get("axis", 0)),
    "Unsqueeze": lambda i, a: _unsqueeze(i[0], _axes(i, a)),
    "Squeeze": lambda i, a: np.squeeze(i[0], axis=_axes(i, a)),
    "Concat": lambda i, a: np.concatenate([np.atleast_1d(x) for x in i], axis=a["axis"]),
    "Slice": _slice,
    "Reshape": _reshape,
    "Add": lambda i, a: i[0] + i[1],
    "Sub": lambda i, a: i[0] - i[1],
    "Mul": lambda i, a: i[0] * i[1],
    "Div": lambda i, a: _integer_div(i[0], i[1]),
    "Mod": lambda i, a: np.fmod(i[0], i[1]) if a.get("fmod", 0) else np.mod(i[0], i[1]),
    "Neg": lambda i, a: -i[0],
    "Abs": lambda i, a: np.abs(i[0]),
    "Min": lambda i, a: np.minimum.reduce(i),
    "Max": lambda i, a: np.maximum.reduce(i),
    "Equal": lambda i, a: np.equal(i[0], i[1]),
    "Less": lambda i, a: np.less(i[0], i[1]),
    "Greater": lambda i, a: np.greater(i[0], i[1]),
    "LessOrEqual": lambda i, a: np.less_equal(i[0], i[1]),
    "GreaterOrEqual": lambda i, a: np.greater_equal(i[0], i[1]),
    "Not": lambda i, a: np.logical_not(i[0]),
    "And": lambda i, a: np.logical_and(i[0], i[1]),
    "Or": lambda i, a: np.logical_or(i[0], i[1]),
    "Where": lambda i, a: np.where(i[0], i[1], i[2]),
    "Range": lambda i, a: np.arange(i[0], i[1], i[2]).astype(np.result_type(i[0], i[1], i[2])),
    "ConstantOfShape": _constant_of_shape,
    "Expand": lambda i, a: i[0] * np.ones([int(s) for s in i[1]], dtype=i[0].dtype),
    "NonZero": lambda i, a: np.array(np.nonzero(i[0]), dtype=np.int64).reshape(np.ndim(i[0]), -1),
    "Transpose": lambda i, a: np.transpose(i[0], a.get("perm")),
    "Tile": lambda i, a: np.tile(i[0], [int(r) for r in i[1]]),
    "OneHot": _one_hot,
    "Flatten": lambda i, a: _flatten(i[0], a.get("axis", 1)),
    "Sign": lambda i, a: np.sign(i[0]),
    "Clip": lambda i, a: np.clip(i[0], *[None if len(i) <= k or i[k] is None else i[k] for k in (1, 2)]),
    "ScatterElements": _scatter_elements,
    "ScatterND": _scatter_nd,
    "GatherElements": lambda i, a: np.take_along_axis(
        i[0], np.where(i[1] < 0, i[1] + i[0].shape[a.get("axis", 0)], i[1]), a.get("axis", 0)
    ),
    "GatherND": _gather_nd,
    "CumSum": _cum_sum,
    "ReduceProd": _reduce(np.prod),
    "ReduceSum": _reduce(np.sum),
    "ReduceMax": _reduce(np.max),
    "ReduceMin": _reduce(np.min),
}


_BROADCASTING = {"Add", "Sub", "Mul", "Div", "Mod", "Pow", "Min", "Max", "Where", "And", "Or"}
_BROADCASTING |= {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"}


def _result_size(op: str, inputs: list, attrs: Mapping) -> int:
    """How many elements the op's result will have, in Python ints (no overflow), for the ops whose
    result can be far larger than their inputs: a Range to a dim of 10^12, a ConstantOfShape of
    [2^32, 2^32], a broadcast of two ranges. 0 for the rest, whose inputs, small, bound it. An
    upper bound where broadcasting is involved (inputs that do not broadcast: the evaluator says)."""
    if op == "Range":
        start, limit, delta = (float(np.asarray(x).reshape(-1)[0]) for x in inputs)
        return max(0, math.ceil((limit - start) / delta))  # delta 0, inf or nan raise: not folded
    if op == "ConstantOfShape":
        return math.prod(int(d) for d in inputs[0].reshape(-1))
    if op == "Expand":
        return _broadcast_bound([inputs[0].shape, [int(d) for d in inputs[1].reshape(-1)]])
    if op == "Tile":
        return inputs[0].size * math.prod(int(r) for r in inputs[1].reshape(-1))
    if op == "OneHot":
        return np.size(inputs[0]) * int(np.asarray(inputs[1]).reshape(-1)[0])
    if op == "Gather":
        data, indices = inputs
        axis = attrs.get("axis", 0) % max(data.ndim, 1)
        return np.size(indices) * math.prod(d for i, d in enumerate(data.shape) if i != axis)
    if op == "GatherND":
        data, indices = inputs
        return math.prod(indices.shape[:-1]) * math.prod(data.shape[indices.shape[-1] if indices.ndim else 0 :])
    if op in _BROADCASTING:
        return _broadcast_bound([np.shape(x) for x in inputs])
    return 0


def _broadcast_bound(shapes: list) -> int:
    """At most how many elements the broadcast of these shapes has: the largest dim on each axis."""
    return math.prod(max(dims) for dims in zip_longest(*(reversed(list(s)) for s in shapes), fillvalue=1))


class Folder:
    """Small values computed on demand: asked for a value, it evaluates the producing node, and
    first, iteratively, the producers of that node's inputs, back to constants and known shapes
    (never weights). Only the chains something asks about are evaluated: in a TorchScript export,
    a few dozen of its thousand shape nodes.

    `tensor(name)` gives a value's TensorInfo as the caller knows it now (Shape and Size read it);
    `constants` are the graph's small constants, converted when first read. A value that cannot be
    folded yet is remembered until `retry()`, which the caller calls when it has learned more;
    `assume`, where set, gives the value of a node whose inputs are data (a sum of predicted
    durations: durations.py), asked only where the node cannot be folded."""

    def __init__(
        self, nodes: list[Node], tensor: Callable[[str], TensorInfo | None], constants: Mapping[str, ConstantSource]
    ):
        self.producers = {output: node for node in nodes if not node.domain and (len(node.outputs) == 1 or node.op_type == "Split")
                          for output in node.outputs if output}  # fmt: skip
        self.tensor = tensor
        self.constants = constants  # converted to numpy when a chain first reaches one
        self.known: dict[str, np.ndarray] = {}  # constants converted and values folded
        self.folded: dict[str, np.ndarray] = {}  # the values computed, for the cost rules
        self._failed: set[str] = set()
        self.assume: Callable[[Node, Mapping[str, np.ndarray]], np.ndarray | None] | None = (
            None  # a value that is data, assumed (durations.py)
        )
        self.assumed: set[str] = set()  # the values `assume` gave, and those folded from them

    def retry(self) -> None:
        self._failed.clear()

    def value(self, name: str) -> np.ndarray | None:
        known, failed = self.known, self._failed
        if name in known or name in failed:
            return known.get(name)
        stack, entered = [name], set()
        while stack:
            top = stack[-1]
            if top in known or top in failed:
                stack.pop()
                continue
            if top in self.constants:
                self._convert(top)
                stack.pop()
                continue
            node = self.producers.get(top)
            if node is None or not _foldable(node):
                failed.add(top)
                stack.pop()
                continue
            missing = (
                []
                if node.op_type in _METADATA
                else [i for i in node.inputs if i and i not in known and i not in failed]
            )
            if missing and top not in entered:  # evaluate the inputs first (a cycle ends here too)
                entered.add(top)
                stack.extend(missing)
                continue
            stack.pop()
            result = fold_node(node, self.tensor, known, top)
            if result is not None and result.dtype == object:  # text (a Cast to string): as _convert, not a value
                result = None
            if result is not None and self.assumed and not self.assumed.isdisjoint(node.inputs):
                self.assumed.add(top)  # computed from an assumed value: assumed too
            elif result is None and self.assume is not None:
                result = self.assume(node, known)
                if result is not None:
                    self.assumed.add(top)
            if result is None:
                failed.add(top)
            else:
                known[top] = self.folded[top] = result
        return known.get(name)

    def _convert(self, name: str) -> None:
        """A constant's value, where it has one to compute with: a string tensor's is text, which
        no fold computes with (a Concat with a number would be an array of neither)."""
        array = constant_array(self.constants[name])
        if array is None or array.dtype == object:
            self._failed.add(name)
        else:
            self.known[name] = array


_METADATA = ("Shape", "Size")


def _foldable(node: Node) -> bool:
    return node.op_type in _METADATA or node.op_type in _EVALUATORS or node.op_type == "Split"


def _attributes(node: Node) -> dict:
    return {a.name: helper.get_attribute_value(a) for a in node.attributes}


def _split(inputs: list, attrs: Mapping, count: int) -> list[np.ndarray] | None:
    """Split's pieces along `axis`: the sizes of its `split` input (an attribute before opset 13),
    else `count` equal pieces, the last shorter where they do not divide (opset 18's num_outputs)."""
    data = inputs[0]
    axis = attrs.get("axis", 0) % max(data.ndim, 1)
    sizes = inputs[1] if len(inputs) > 1 and inputs[1] is not None else attrs.get("split")
    length = data.shape[axis]
    if sizes is None:
        piece = -(-length // count)
        sizes = [max(0, min(piece, length - piece * index)) for index in range(count)]
    sizes = [int(size) for size in np.asarray(sizes).reshape(-1)]
    if len(sizes) != count or sum(sizes) != length or min(sizes) < 0:
        return None  # not a split this data allows: shape inference says why
    bounds = np.cumsum([0, *sizes])
    return [
        np.take(data, np.arange(start, end), axis=axis) for start, end in zip(bounds[:-1], bounds[1:], strict=False)
    ]


def fold_node(
    node: Node, tensor: Callable[[str], TensorInfo | None], known: Mapping[str, np.ndarray], output: str
) -> np.ndarray | None:
    """The value of the node's (small) `output`, where it is computable from the values known so
    far (constants and folded outputs) and from known shapes; None otherwise."""
    if node.op_type in _METADATA:
        result = _metadata_value(node, tensor(node.inputs[0]))
    elif node.op_type == "Split" and _all_known(node.inputs, known):
        pieces = _split([known[name] if name else None for name in node.inputs], _attributes(node), len(node.outputs))
        result = None if pieces is None else pieces[node.outputs.index(output)]
    elif node.op_type in _EVALUATORS and len(node.outputs) == 1 and _all_known(node.inputs, known):
        result = _evaluate(node, known)
    else:
        return None
    return None if result is None or result.size > MAX_FOLDED_ELEMENTS else result


def _all_known(names: list[str], known: Mapping[str, np.ndarray]) -> bool:
    """Every present input has a value (a plain loop: this runs for every node of the graph)."""
    for name in names:  # noqa: SIM110 (the loop is the point: see the docstring)
        if name and name not in known:
            return False
    return True


def _metadata_value(node: Node, source: TensorInfo | None) -> np.ndarray | None:
    """Shape or Size of an input whose shape is known (None past int64: a runtime could not say it)."""
    shape = None if source is None else source.shape
    if shape is None or not all_ints(shape):
        return None
    if node.op_type == "Size":
        values = [math.prod(shape)]
    else:
        attrs = {a.name: a.i for a in node.attributes}
        values = list(shape[attrs.get("start", 0) : attrs.get("end")])
    if any(v >= 2**63 for v in values):
        return None
    return np.array(values[0] if node.op_type == "Size" else values, dtype=np.int64)


def _evaluate(node: Node, known: Mapping[str, np.ndarray]) -> np.ndarray | None:
    """The node's output from its inputs' values, or None where it is large or an unusual form."""
    inputs, attrs = [known[name] if name else None for name in node.inputs], _attributes(node)
    if any(value is not None and np.iscomplexobj(value) for value in inputs):
        return None  # no shape is complex: a stranger's file typed one so (numpy would warn on stderr casting it)
    try:
        if _result_size(node.op_type, inputs, attrs) > MAX_FOLDED_ELEMENTS:
            return None  # a large tensor (a mask, a broadcast, a Range to a huge dim) is data, not a shape: never allocated
        with np.errstate(all="ignore"):  # a division by zero, a NaN cast: a value, not a line on the user's stderr
            result = _EVALUATORS[node.op_type](inputs, attrs)
    except (ValueError, TypeError, IndexError, KeyError, OverflowError, ZeroDivisionError):
        return None  # an unusual form (a Range of step 0): leave it to shape inference
    return None if result is None else np.asarray(result)
