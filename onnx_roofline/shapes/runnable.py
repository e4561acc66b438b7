"""Can the model run at these dims? What ONNX's inference lets through and onnxruntime refuses,
checked once the shapes are known: a result there would cost a model that cannot run, so each is
an error naming the node, the sizes and the dims (docs/hostile-inputs.md).

- A convolution whose window does not fit its input: the kernel, dilated, larger than the input
  padded. ONNX's inference divides the negative remainder toward zero and gives one output where
  there is none (a 2×2 kernel, stride 2, on a 1×1 input: [N, C, 1, 1]), or an empty one;
  onnxruntime refuses either ("Invalid input shape"). A ConvNeXt at 7×7 pixels (its stem divides
  by 4, its stages by 2). Pools in that case run, with the output ONNX gives them.
- A Reshape whose target does not hold its input's elements: ONNX's inference takes a target with
  no -1 as it is. A TorchScript export traces sizes into targets (MultiheadAttention with kdim:
  the key length it was traced at); bound to other sizes, the graph cannot run.
- A GroupQueryAttention whose past holds heads of another size than its query packs: the
  onnxruntime-genai builder names the head dim of its KV-cache inputs (`kv_cache_dim`), which
  the query's width and the op's head counts fix. That one is a DimensionConflict: a default
  taken for the dim is replaced by the size that runs (analysis.py).
- A broadcasting op (Add, Mul, Where, …) whose inputs do not broadcast: a size the exporter
  fixed against a bound dim (onnx-simplifier folding a position table for the shapes it was
  given, leaving the inputs symbolic). A DimensionConflict too where the dim is a graph input's."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import onnx

from onnx_roofline.shapes.completion import BROADCASTING
from onnx_roofline.errors import DimensionConflict, DimensionError
from onnx_roofline.model.nodes import Node
from onnx_roofline.model.tensors import TensorInfo

WINDOW_OPS = {"Conv": 1, "ConvInteger": 1, "QLinearConv": 3}
"""The default-domain convolutions over NCHW… spatial dims: the input slot of the weight whose dims
past the second give the kernel where no kernel_shape says it."""


def check_runnable(nodes: Iterable[Node], values: Mapping[str, TensorInfo], dims: Mapping[str, int], dim_names: Mapping[tuple[str, int], str],
                   defaulted: Iterable[str] = ()) -> None:
    """Raises DimensionError (DimensionConflict where a dim the graph fixes was bound otherwise) at
    the first node that cannot run. `dim_names`: the graph inputs' symbolic dims by (input, axis);
    `defaulted`: the dims that took a default, which the message marks (`seq=512 (default)`)."""
    checks = _CHECKS
    for node in nodes:  # one dict lookup for most nodes: this runs over every node of the graph
        check = checks.get(node.op_type)
        if check is None or check[0] != node.domain:
            continue
        problem = check[1](node, values, dim_names)
        if problem is None:
            continue
        message = f"node {_label(node)} cannot run at {_at(dims, defaulted)}: {problem}"
        if isinstance(problem, _Solvable):
            raise DimensionConflict(f"{message}: pass dims={{{problem.dim!r}: {problem.size}}}", problem.dim, problem.size,
                                    problem.why, cli=f"{message}: bind --dim {problem.dim}={problem.size}")  # fmt: skip
        raise DimensionError(message)


class _Solvable(str):
    """A problem whose cure the graph fixes: input dim `dim` at `size`, `why` (what in the graph fixes it)."""

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
    if data is None or not data.is_known or len(data.shape) < 3:
        return None
    result = values.get(node.outputs[0]) if node.outputs else None
    if result is not None and result.is_known and len(result.shape) == len(data.shape) and all(size >= 2 for size in result.shape[2:]):
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
    extent = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    if all(p >= e for p, e in zip(padded, extent)):
        return None
    return (f"its input {data.name!r} is {_by(spatial)} (padded {_by(padded)}), smaller than its {_by(extent)} window "
            f"(kernel {_by(kernel)}, dilations {dilations}); larger dims give it an output")  # fmt: skip


def _reshape_problem(node: Node, values: Mapping[str, TensorInfo], *_) -> str | None:
    data, result = values.get(node.inputs[0]) if node.inputs else None, values.get(node.outputs[0]) if node.outputs else None
    if data is None or result is None or not data.is_known or not result.is_known or data.numel == result.numel:
        return None
    return (f"its input {data.name!r} {list(data.shape)} has {data.numel:,} elements, its target {list(result.shape)} "
            f"{result.numel:,}: a size the graph fixed when it was exported (traced) disagrees with these dims")  # fmt: skip


def _grouped_heads_problem(node: Node, values: Mapping[str, TensorInfo], dim_names: Mapping[tuple[str, int], str]) -> str | None:
    heads = _kv_head(node, values)
    if heads is None or heads[1].shape[3] == heads[2]:
        return None
    query, past, head = heads
    problem = f"its past {past.name!r} {list(past.shape)} holds heads of {past.shape[3]} where its query {query.name!r} packs heads of {head}"
    dim = dim_names.get((past.name, 3))
    return problem if dim is None else _Solvable(problem, dim, head, f"the head size of {_label(node)}")


def _broadcast_problem(node: Node, values: Mapping[str, TensorInfo], dim_names: Mapping[tuple[str, int], str]) -> str | None:
    """Inputs that do not broadcast (ONNX's inference fails: "Incompatible dimensions"): a size the
    exporter fixed (onnxsim's folded position table [1, 8, 32]) against a bound dim. Where that
    dim is a graph input's own, the size it must take is the graph's (a DimensionConflict)."""
    result = values.get(node.outputs[0]) if node.outputs else None
    if result is not None and result.is_known:
        return None
    inputs = [values.get(name) for name in node.inputs if name]
    if len(inputs) < 2 or any(t is None or not t.is_known for t in inputs):
        return None
    rank = max(len(t.shape) for t in inputs)
    for axis in range(-rank, 0):  # aligned from the last axis, as broadcasting aligns them
        sizes = {t.shape[axis] for t in inputs if len(t.shape) >= -axis} - {1}
        if len(sizes) < 2:
            continue
        shown = ", ".join(f"{t.name!r} {list(t.shape)}" for t in inputs)
        problem = (f"its inputs {shown} do not broadcast ({' against '.join(map(str, sorted(sizes)))} on axis {axis}): "
                   f"a size the graph fixed when it was exported (traced) disagrees with these dims")
        spanning = [(t, dim_names.get((t.name, len(t.shape) + axis))) for t in inputs if len(t.shape) >= -axis]
        named = {dim for _, dim in spanning if dim is not None}
        fixed = [t for t, dim in spanning if dim is None and t.shape[axis] != 1]
        if len(named) != 1 or len({t.shape[axis] for t in fixed}) != 1:
            return problem
        return _Solvable(problem, named.pop(), fixed[0].shape[axis], f"the size {fixed[0].name!r} {list(fixed[0].shape)} fixes, broadcast against it")
    return None


_CHECKS = {
    **{op: ("", _window_problem) for op in WINDOW_OPS},
    "Reshape": ("", _reshape_problem),
    "GroupQueryAttention": ("com.microsoft", _grouped_heads_problem),
    **{op: ("", _broadcast_problem) for op in BROADCASTING},
}  # op type: (domain, the check: (node, values, dim_names) → the problem, or None)


def implied_sizes(nodes: Iterable[Node], values: Mapping[str, TensorInfo]) -> dict[str, int]:
    """Symbolic dims still unbound whose size the graph fixes: a GroupQueryAttention past's head
    dim, from its query. What an error asking for them suggests."""
    implied = {}
    for node in nodes:
        if node.domain == "com.microsoft" and node.op_type == "GroupQueryAttention" and (heads := _kv_head(node, values, symbolic=True)):
            if isinstance(heads[1].shape[3], str):
                implied[heads[1].shape[3]] = heads[2]
    return implied


def _kv_head(node: Node, values: Mapping[str, TensorInfo], symbolic: bool = False) -> tuple[TensorInfo, TensorInfo, int] | None:
    """(query, past key, the head size the query packs) of a GroupQueryAttention: query [B, S, H·dh],
    or packed QKV [B, S, (H + 2·Hkv)·dh] when key and value are absent. None where the query's
    width is not known, the past is absent or not of rank 4 (`symbolic`: its dims may be symbols)."""
    names = node.inputs
    query = values.get(names[0]) if names else None
    past = values.get(names[3]) if len(names) > 3 and names[3] else None
    if query is None or past is None or not query.shape or not isinstance(query.shape[-1], int) or past.shape is None or len(past.shape) != 4:
        return None
    if not symbolic and not past.is_known:
        return None
    attrs = {a.name: a.i for a in node.attributes if a.type == onnx.AttributeProto.INT}
    packed = not any(names[1:3])
    heads = attrs.get("num_heads", 0) + (2 * attrs.get("kv_num_heads", 0) if packed else 0)
    if not heads or query.shape[-1] % heads:
        return None
    return query, past, query.shape[-1] // heads


def _weight_kernel(node: Node, values: Mapping[str, TensorInfo]) -> list[int] | None:
    """The kernel where no kernel_shape gives it: the weight's dims past the second."""
    slot = WINDOW_OPS[node.op_type]
    weight = values.get(node.inputs[slot]) if slot < len(node.inputs) else None
    return list(weight.shape[2:]) if weight is not None and weight.is_known else None


def _label(node: Node) -> str:
    op = f"{node.domain}::{node.op_type}" if node.domain else node.op_type
    return f"{node.name!r} ({op})" if node.name else f"of type {op}"


def _at(dims: Mapping[str, int], defaulted: Iterable[str] = ()) -> str:
    defaulted = set(defaulted)
    return ", ".join(f"{k}={v}" + (" (default)" if k in defaulted else "") for k, v in sorted(dims.items())) or "its declared shapes"


def _by(sizes: Iterable[int]) -> str:
    return "×".join(map(str, sizes))

