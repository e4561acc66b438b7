"""Can the model run at these dims? What ONNX's inference lets through and onnxruntime refuses,
checked once the shapes are known: a result there would cost a model that cannot run, so each is
an error naming the node, the sizes and the dims (docs/hostile-inputs.md).

- A convolution whose window does not fit its input: the kernel, dilated, larger than the input
  padded. ONNX's inference divides the negative remainder toward zero and gives one output where
  there is none (a 2×2 kernel, stride 2, on a 1×1 input: [N, C, 1, 1]), or an empty one;
  onnxruntime refuses either ("Invalid input shape"). A ConvNeXt at 7×7 pixels (its stem divides
  by 4, its stages by 2). A pool runs where onnxruntime's output size, (padded − window) / stride
  + 1 divided toward zero, is 0 or more (a 2×2 window, stride 2, on 1×1 gives 1×1); where it is
  negative (a 3×3 window on 1×1), onnxruntime refuses it, and so does this check.
- A Pad its input's axis cannot take: a reflect pad as wide as the axis or wider (onnxruntime
  refuses a pad over size − 1: a 1-D audio front end reflect-pads 32 samples, which a 1-sample
  input cannot give), an edge pad of an empty axis, negative pads that crop more than the axis.
- A Reshape whose target does not hold its input's elements: ONNX's inference takes a target with
  no -1 as it is. A TorchScript export traces sizes into targets (MultiheadAttention with kdim:
  the key length it was traced at); bound to other sizes, the graph cannot run. Nor can a
  Reshape whose target's other sizes do not divide the input's elements (ONNX's inference leaves
  its output untyped: "incompatible shapes").
- A convolution whose input has other channels than its weight takes (× group): ONNX's inference
  types the output from the weight and lets it through. A DimensionConflict where the channels are a
  graph input's dim: a default taken for it is replaced by the weight's (roles.py states it first).
- An Expand whose input does not broadcast to its target: a buffer the graph holds (BERT's token
  types, as long as its position table) expanded to a longer sequence.
- A GroupQueryAttention whose past holds heads of another size than its query packs: the
  onnxruntime-genai builder names the head dim of its KV-cache inputs (`kv_cache_dim`), which
  the query's width and the op's head counts fix. That one is a DimensionConflict: a default
  taken for the dim is replaced by the size that runs (analysis.py).
- A broadcasting op (Add, Mul, Where, …) whose inputs do not broadcast: a size the exporter
  fixed against a bound dim (onnx-simplifier folding a position table for the shapes it was
  given, leaving the inputs symbolic). A DimensionConflict too where the dim is a graph input's."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterable, Mapping

import numpy as np
import onnx

from onnx_roofline.errors import DimensionConflict, DimensionError
from onnx_roofline.model.nodes import Node
from onnx_roofline.model.tensors import Dim, TensorInfo, known
from onnx_roofline.shapes.completion import BROADCASTING
from onnx_roofline.shapes.traced import TracedSize

WINDOW_OPS = {"Conv": 1, "ConvInteger": 1, "QLinearConv": 3}
"""The default-domain convolutions over NCHW… spatial dims: the input slot of the weight whose dims
past the second give the kernel where no kernel_shape says it."""


def check_runnable(
    nodes: Iterable[Node],
    values: Mapping[str, TensorInfo],
    dims: Mapping[str, int],
    dim_names: Mapping[tuple[str, int], str],
    defaulted: Iterable[str] = (),
    constant: Callable[[str], np.ndarray | None] | None = None,
) -> None:
    """Raises DimensionError (DimensionConflict where a dim the graph fixes was bound otherwise) at
    the first node that cannot run. `dim_names`: the graph inputs' symbolic dims by (input, axis);
    `defaulted`: the dims that took a default, which the message marks (`seq=512 (default)`);
    `constant`: a small constant's value by name (a Pad's pads, a Reshape's target), where known."""
    checks = _CHECKS
    constant = constant or _no_constant
    for node in nodes:  # one dict lookup for most nodes: this runs over every node of the graph
        check = checks.get(node.op_type)
        if check is None or check[0] != node.domain:
            continue
        problem = check[1](node, values, dim_names, constant)
        if problem is None:
            continue
        message = f"node {_label(node)} cannot run at {_at(dims, defaulted)}: {problem}"
        if isinstance(problem, _Traced):  # a size traced into the graph: the size that runs is solved for (traced.py)
            raise TracedSize(message, node.name, node.op_type, problem.first, problem.second, problem.axis)
        if isinstance(problem, _Solvable):
            raise DimensionConflict(f"{message}: pass Sizing(dims={{{problem.dim!r}: {problem.size}}})", problem.dim, problem.size,
                                    problem.why, cli=f"{message}: bind --dim {shlex.quote(f'{problem.dim}={problem.size}')}")  # fmt: skip
        raise DimensionError(message)


def _no_constant(name: str) -> None:
    return None


class _Solvable(str):
    """A problem whose cure the graph fixes: input dim `dim` at `size`, `why` (what in the graph fixes it)."""

    dim: str
    size: int
    why: str

    def __new__(cls, problem: str, dim: str, size: int, why: str):
        solvable = super().__new__(cls, problem)
        solvable.dim, solvable.size, solvable.why = dim, size, why
        return solvable


def _window_problem(node: Node, values: Mapping[str, TensorInfo], *_) -> str | None:
    """Explicit pads (auto_pad SAME pads as needed; VALID none). ONNX's output of
    ⌊(padded − window) / stride⌋ + 1, with the division toward zero, is 2 or more only where the
    window fits: such a conv (most) is passed without reading an attribute. The attributes are
    read in one pass, their types as validation held them to the op's schema."""
    data = values.get(node.inputs[0]) if node.inputs else None
    if not known(data) or len(data.shape) < 3:
        return None
    result = values.get(node.outputs[0]) if node.outputs else None
    if known(result) and len(result.shape) == len(data.shape) and all(size >= 2 for size in result.shape[2:]):
        return None
    spatial = data.shape[2:]
    kernel = pads = dilations = None
    auto_pad = b"NOTSET"
    for attr in node.attributes:
        name = attr.name
        if name == "pads":
            pads = list(attr.ints)
        elif name == "dilations":
            dilations = list(attr.ints)
        elif name == "kernel_shape":
            kernel = list(attr.ints)
        elif name == "auto_pad":
            auto_pad = attr.s
    kernel = kernel or _weight_kernel(node, values)
    if auto_pad in (b"SAME_UPPER", b"SAME_LOWER") or kernel is None or len(kernel) != len(spatial):
        return None
    pads = [0] * 2 * len(spatial) if auto_pad == b"VALID" or pads is None else pads
    dilations = dilations or [1] * len(spatial)
    if len(pads) != 2 * len(spatial) or len(dilations) != len(spatial):
        return None  # ONNX's inference refuses these: not this check's to word
    padded = [size + pads[axis] + pads[axis + len(spatial)] for axis, size in enumerate(spatial)]
    extent = [(k - 1) * d + 1 for k, d in zip(kernel, dilations, strict=False)]
    if all(p >= e for p, e in zip(padded, extent, strict=False)):
        return None
    return (f"its input {data.name!r} is {_by(spatial)} (padded {_by(padded)}), smaller than its {_by(extent)} window "
            f"(kernel {_by(kernel)}, dilations {dilations}); larger dims give it an output")  # fmt: skip


class _Traced(str):
    """A size traced at export that these dims contradict: `first` against `second` (their
    elements; their sizes on `axis`, where given): traced.TracedSize."""

    first: str
    second: str
    axis: int | None

    def __new__(cls, problem: str, first: str, second: str, axis: int | None = None):
        traced = super().__new__(cls, problem)
        traced.first, traced.second, traced.axis = first, second, axis
        return traced


def _reshape_problem(node: Node, values: Mapping[str, TensorInfo], *_) -> str | None:
    data, result = (
        values.get(node.inputs[0]) if node.inputs else None,
        values.get(node.outputs[0]) if node.outputs else None,
    )
    if not known(data) or not known(result) or data.numel == result.numel:
        return None
    return _Traced(f"its input {data.name!r} {list(data.shape)} has {data.numel:,} elements, its target {list(result.shape)} "
                   f"{result.numel:,}: a size the graph fixed when it was exported (traced) disagrees with these dims",
                   data.name, result.name)  # fmt: skip


def _reshape_divides_problem(node: Node, values: Mapping[str, TensorInfo], dim_names, constant) -> str | None:
    """A target with a -1 whose other sizes do not divide the input's elements (ONNX's inference
    leaves the output untyped; onnxruntime refuses: "incompatible shapes")."""
    problem = _reshape_problem(node, values)
    if problem is not None or len(node.inputs) < 2 or not node.inputs[1]:
        return problem
    data, result = values.get(node.inputs[0]), values.get(node.outputs[0]) if node.outputs else None
    if not known(data) or known(result):
        return None
    target = constant(node.inputs[1])
    if target is None or target.ndim != 1 or target.dtype.kind not in "iu" or -1 not in target.tolist():
        return None
    allow_zero = any(attr.name == "allowzero" and attr.i for attr in node.attributes)
    sizes = [
        data.shape[axis] if size == 0 and not allow_zero and axis < len(data.shape) else size
        for axis, size in enumerate(target.tolist())
    ]
    others = 1
    for size in sizes:
        others *= size if size != -1 else 1
    if others and data.numel % others == 0:
        return None
    return (f"its input {data.name!r} {list(data.shape)} has {data.numel:,} elements, which its target {target.tolist()} "
            f"cannot divide ({others:,} elements besides the -1)")  # fmt: skip


def _pad_problem(node: Node, values: Mapping[str, TensorInfo], dim_names, constant) -> str | None:
    """A pad the input's axis cannot take, as onnxruntime checks it: reflect needs each pad under
    the axis' size (the mirrored samples must exist), edge a non-empty axis, and negative pads
    (a crop) must leave the axis 0 or more."""
    data = values.get(node.inputs[0]) if node.inputs else None
    if not known(data):
        return None
    mode, pads = b"constant", None
    for attr in node.attributes:
        if attr.name == "mode":
            mode = attr.s
        elif attr.name == "pads":
            pads = list(attr.ints)
    if pads is None and len(node.inputs) > 1 and node.inputs[1]:
        array = constant(node.inputs[1])
        pads = array.tolist() if array is not None and array.ndim == 1 else None
    rank = len(data.shape)
    axes = list(range(rank))
    if len(node.inputs) > 3 and node.inputs[3]:
        array = constant(node.inputs[3])
        if array is None or array.ndim != 1:
            return None
        axes = [axis + rank if axis < 0 else axis for axis in array.tolist()]
    if pads is None or len(pads) != 2 * len(axes) or not all(0 <= axis < rank for axis in axes):
        return None
    for index, axis in enumerate(axes):
        size, before, after = data.shape[axis], pads[index], pads[index + len(axes)]
        if mode == b"reflect" and (before > 0 or after > 0) and max(before, after) >= size:
            return (f"it reflect-pads {before} and {after} on axis {axis} of its input {data.name!r} {list(data.shape)}: "
                    f"a reflect pad must be smaller than its axis ({max(before, after) + 1} or more)")  # fmt: skip
        if mode == b"edge" and (before > 0 or after > 0) and size == 0:
            return f"it edge-pads axis {axis} of its input {data.name!r} {list(data.shape)}, which is empty"
        if size + before + after < 0:
            return f"its pads {before} and {after} crop axis {axis} of its input {data.name!r} {list(data.shape)} below nothing"
    return None


def _pool_problem(node: Node, values: Mapping[str, TensorInfo], *_) -> str | None:
    """A window that leaves onnxruntime's output size negative: (padded − extent (+ stride − 1 in
    ceil mode)) / stride + 1, divided toward zero, under 0. ONNX's inference types it all the same."""
    data = values.get(node.inputs[0]) if node.inputs else None
    if not known(data) or len(data.shape) < 3:
        return None
    spatial = data.shape[2:]
    kernel = pads = strides = dilations = None
    auto_pad, ceil = b"NOTSET", 0
    for attr in node.attributes:
        name = attr.name
        if name == "kernel_shape":
            kernel = list(attr.ints)
        elif name == "pads":
            pads = list(attr.ints)
        elif name == "strides":
            strides = list(attr.ints)
        elif name == "dilations":
            dilations = list(attr.ints)
        elif name == "auto_pad":
            auto_pad = attr.s
        elif name == "ceil_mode":
            ceil = attr.i
    if kernel is None or len(kernel) != len(spatial) or auto_pad in (b"SAME_UPPER", b"SAME_LOWER"):
        return None
    pads = [0] * 2 * len(spatial) if auto_pad == b"VALID" or pads is None else pads
    strides, dilations = strides or [1] * len(spatial), dilations or [1] * len(spatial)
    if len(pads) != 2 * len(spatial) or len(strides) != len(spatial) or len(dilations) != len(spatial) or 0 in strides:
        return None
    padded = [size + pads[axis] + pads[axis + len(spatial)] for axis, size in enumerate(spatial)]
    extent = [(k - 1) * d + 1 for k, d in zip(kernel, dilations, strict=False)]
    outputs = [int((p - e + (s - 1 if ceil else 0)) / s) + 1 for p, e, s in zip(padded, extent, strides, strict=False)]
    if all(out >= 0 for out in outputs):
        return None
    return (f"its input {data.name!r} is {_by(spatial)} (padded {_by(padded)}), smaller than its {_by(extent)} window "
            f"(kernel {_by(kernel)}, strides {strides}): onnxruntime's output size would be negative")  # fmt: skip


def _grouped_heads_problem(
    node: Node, values: Mapping[str, TensorInfo], dim_names: Mapping[tuple[str, int], str], *_
) -> str | None:
    heads = _kv_head(node, values)
    if heads is None or heads[2][3] == heads[3]:
        return None
    query, past, shape, head = heads
    problem = f"its past {past.name!r} {list(shape)} holds heads of {shape[3]} where its query {query.name!r} packs heads of {head}"
    dim = dim_names.get((past.name, 3))
    return problem if dim is None else _Solvable(problem, dim, head, f"the head size of {_label(node)}")


def _broadcast_problem(
    node: Node, values: Mapping[str, TensorInfo], dim_names: Mapping[tuple[str, int], str], *_
) -> str | None:
    """Inputs that do not broadcast (ONNX's inference fails: "Incompatible dimensions"): a size the
    exporter fixed (onnxsim's folded position table [1, 8, 32]) against a bound dim. Where that
    dim is a graph input's own, the size it must take is the graph's (a DimensionConflict)."""
    result = values.get(node.outputs[0]) if node.outputs else None
    if known(result):
        return None
    present = [values.get(name) for name in node.inputs if name]
    inputs = [t for t in present if known(t) and not t.sequence]
    if len(present) < 2 or len(inputs) < len(present):
        return None  # a sequence where a tensor belongs (a mutated op type): ONNX's inference says so
    rank = max(len(t.shape) for t in inputs)
    for axis in range(-rank, 0):  # aligned from the last axis, as broadcasting aligns them
        sizes = {t.shape[axis] for t in inputs if len(t.shape) >= -axis} - {1}
        if len(sizes) < 2:
            continue
        shown = ", ".join(f"{t.name!r} {list(t.shape)}" for t in inputs)
        problem = (
            f"its inputs {shown} do not broadcast ({' against '.join(map(str, sorted(sizes)))} on axis {axis}): "
            f"a size the graph fixed when it was exported (traced) disagrees with these dims"
        )
        spanning = [(t, dim_names.get((t.name, len(t.shape) + axis))) for t in inputs if len(t.shape) >= -axis]
        named = {dim for _, dim in spanning if dim is not None}
        fixed = [t for t, dim in spanning if dim is None and t.shape[axis] != 1]
        if len(named) != 1 or len({t.shape[axis] for t in fixed}) != 1:
            first, second = [t for t in inputs if len(t.shape) >= -axis and t.shape[axis] != 1][:2]
            return _Traced(problem, first.name, second.name, axis)
        return _Solvable(
            problem,
            named.pop(),
            fixed[0].shape[axis],
            f"the size {fixed[0].name!r} {list(fixed[0].shape)} fixes, broadcast against it",
        )
    return None


def _channels_problem(
    node: Node, values: Mapping[str, TensorInfo], dim_names: Mapping[tuple[str, int], str], *_
) -> str | None:
    """An input whose channels are not its weight's (× group): ONNX's inference types the output
    from the weight alone, and onnxruntime refuses it. Where the channels are a graph input's dim,
    the weight fixes it (a DimensionConflict)."""
    slot = WINDOW_OPS[node.op_type]
    data = values.get(node.inputs[0]) if node.inputs else None
    weight = values.get(node.inputs[slot]) if slot < len(node.inputs) and node.inputs[slot] else None
    if not known(data) or not known(weight) or len(data.shape) < 3 or len(weight.shape) != len(data.shape):
        return None
    group = next((attr.i for attr in node.attributes if attr.name == "group"), 1) or 1
    channels = weight.shape[1] * group
    if data.shape[1] == channels:
        return None
    problem = (f"its input {data.name!r} {list(data.shape)} has {data.shape[1]} channels where its weight {weight.name!r} {list(weight.shape)} "
               f"takes {channels}" + (f" ({weight.shape[1]} × group {group})" if group > 1 else ""))  # fmt: skip
    dim = dim_names.get((data.name, 1))
    return (
        problem
        if dim is None
        else _Solvable(problem, dim, channels, f"the input channels of the weight of {_label(node)}")
    )


def _convolution_problem(node: Node, values: Mapping[str, TensorInfo], dim_names, constant) -> str | None:
    return _window_problem(node, values) or _channels_problem(node, values, dim_names)


def _expand_problem(node: Node, values: Mapping[str, TensorInfo], dim_names, constant) -> str | None:
    """An Expand whose input does not broadcast to its target (ONNX's inference fails:
    "Incompatible dimensions"): a traced buffer sliced to the table it holds (BERT's token types,
    `max_position_embeddings` of them) expanded to a longer sequence. The table cannot grow."""
    data = values.get(node.inputs[0]) if node.inputs else None
    result = values.get(node.outputs[0]) if node.outputs else None
    if not known(data) or known(result) or len(node.inputs) < 2:
        return None
    target = constant(node.inputs[1])
    if target is None or target.ndim != 1 or target.dtype.kind not in "iu":
        return None
    for have, want in zip(reversed(data.shape), reversed(target.tolist()), strict=False):
        if have != want and 1 not in (have, want):
            return (f"its input {data.name!r} {list(data.shape)} does not broadcast to its target {target.tolist()} ({have} against {want}): "
                    f"a size the graph holds (a table, a traced buffer) is shorter than these dims")  # fmt: skip
    return None


_CHECKS = {
    **{op: ("", _convolution_problem) for op in WINDOW_OPS},
    "Expand": ("", _expand_problem),
    "Reshape": ("", _reshape_divides_problem),
    "Pad": ("", _pad_problem),
    **{op: ("", _pool_problem) for op in ("MaxPool", "AveragePool", "LpPool")},
    "GroupQueryAttention": ("com.microsoft", _grouped_heads_problem),
    **{op: ("", _broadcast_problem) for op in BROADCASTING},
}  # op type: (domain, the check: (node, values, dim_names, constant) → the problem, or None)


def implied_sizes(nodes: Iterable[Node], values: Mapping[str, TensorInfo]) -> dict[str, int]:
    """Symbolic dims still unbound whose size the graph fixes: a GroupQueryAttention past's head
    dim, from its query. What an error asking for them suggests."""
    implied = {}
    for node in nodes:
        gqa = node.domain == "com.microsoft" and node.op_type == "GroupQueryAttention"
        if gqa and (heads := _kv_head(node, values, symbolic=True)) and isinstance(symbol := heads[2][3], str):
            implied[symbol] = heads[3]
    return implied


def _kv_head(
    node: Node, values: Mapping[str, TensorInfo], symbolic: bool = False
) -> tuple[TensorInfo, TensorInfo, tuple[Dim, ...], int] | None:
    """(query, past key, its shape, the head size the query packs) of a GroupQueryAttention: query [B, S, H·dh],
    or packed QKV [B, S, (H + 2·Hkv)·dh] when key and value are absent. None where the query's
    width is not known, the past is absent or not of rank 4 (`symbolic`: its dims may be symbols)."""
    names = node.inputs
    query = values.get(names[0]) if names else None
    past = values.get(names[3]) if len(names) > 3 and names[3] else None
    if (
        query is None
        or past is None
        or not query.shape
        or not isinstance(query.shape[-1], int)
        or past.shape is None
        or len(past.shape) != 4
    ):
        return None
    if not symbolic and not past.is_known:
        return None
    width = query.shape[-1]
    attrs = {a.name: a.i for a in node.attributes if a.type == onnx.AttributeProto.INT}
    packed = not any(names[1:3])
    heads = attrs.get("num_heads", 0) + (2 * attrs.get("kv_num_heads", 0) if packed else 0)
    if not heads or width % heads:
        return None
    return query, past, past.shape, width // heads


def _weight_kernel(node: Node, values: Mapping[str, TensorInfo]) -> list[int] | None:
    """The kernel where no kernel_shape gives it: the weight's dims past the second."""
    slot = WINDOW_OPS[node.op_type]
    weight = values.get(node.inputs[slot]) if slot < len(node.inputs) else None
    return list(weight.shape[2:]) if known(weight) else None


def _label(node: Node) -> str:
    op = f"{node.domain}::{node.op_type}" if node.domain else node.op_type
    return f"{node.name!r} ({op})" if node.name else f"of type {op}"


def _at(dims: Mapping[str, int], defaulted: Iterable[str] = ()) -> str:
    defaulted = set(defaulted)
    return (
        ", ".join(f"{k}={v}" + (" (default)" if k in defaulted else "") for k, v in sorted(dims.items()))
        or "its declared shapes"
    )


def _by(sizes: Iterable[int]) -> str:
    return "×".join(map(str, sizes))
