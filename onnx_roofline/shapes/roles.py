"""What a symbolic dim is for, where its name does not say: the defaults by role.

`defaults.py` reads a dim's name (`batch`, `sequence`, `height`). Converters name dims after
nothing: tf2onnx's `unk__12`, paddle2onnx's `p2o.DynamicDimension.1`, a `?`, or no name at all
(`x_dim2`, anonymous_dims.py). Defaulted to 1, an OCR detector was costed on a 1×1-pixel image.
Where the name gives no default, the graph says what the dim is, in this order:

1. **A size the model states**: a Reshape of the input to a constant target with no -1 (its
   elements fix the one dim the input leaves open: `x [N, 784]` reshaped to `[1, 1, 28, 28]`);
   for image sides, the size exporters write into the model's metadata (`imgsz`, `image_size`,
   `img_size`, `input_size`: ultralytics writes `imgsz: [640, 640]`); a dim a Conv, MatMul or Gemm
   consumes against a constant weight (a ViT's `num_channels`: its patch embedding's weight has 3
   input channels). A stated size applies whatever the dim's name, since the model runs at no
   other (the metadata only to image sides).
2. **Its role in the graph**:
   - the sides of an image: a 4-D input of a float type (or uint8), with 1, 3 or 4 channels in
     NCHW (axis 1) or NHWC (axis 3) position, a convolution or pooling downstream: height and
     width take `SPATIAL` (224, the ImageNet side the name defaults use for `height`/`width`);
   - the samples of an audio signal: a float input [N, T], or [N, C, T] with 1 or 2 channels, a
     convolution, STFT or DFT downstream: `AUDIO_SAMPLES` (16,000: one second at 16 kHz, the rate
     speech models take); [N, C, T] with more channels is a 1-D signal of `SEQUENCE` (512) steps;
   - the sequence of a token input: an integer input that is the indices of a Gather from a
     weight (an embedding), through casts and reshapes, or an onnxruntime EmbedLayerNormalization:
     [batch, sequence] (the sequence 512, or 1 in a model with a past: a decode step); the
     other integer inputs of the same rank in that model (attention mask, position ids) alike;
   - the batch: the leading dim of such an input, or a leading dim that several inputs share: 1.
3. Else 1, said as "no role found".

Every default is reported with its role (`p2o.DynamicDimension.1=224 (image height, default)`):
in the table's summary, the JSON (`model.dim_roles`), the HTML and on stderr."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import onnx

from onnx_roofline.model.constants import MAX_FOLDED_ELEMENTS, constant_array, constant_table
from onnx_roofline.model.nodes import Node, read_nodes
from onnx_roofline.model.scopes import outer_references
from onnx_roofline.model.tensors import dtype_name
from onnx_roofline.shapes.defaults import BATCH, DECODE_STEP, NO_DEFAULT, SEQUENCE, SPATIAL, default_dims, name_kind

AUDIO_SAMPLES = 16_000
"""Samples of an audio input with no size: one second at 16 kHz (Whisper's, Silero VAD's and
wav2vec2's rate)."""

NAME, GRAPH, MODEL, SOLVED, NONE = "name", "graph", "model", "solved", "none"
"""Where a default came from: the dim's name, its role in the graph, a size the model states,
what a node that cannot run otherwise fixes (runnable.py), or nowhere."""

NO_ROLE = "no role found"

_RULE_ROLES = {"batch": "batch", "past": "past sequence", "encoder": "encoder sequence", "sequence": "sequence", "decode step": "decode step",
               "spatial": "image side", "past + sequence": "past + sequence", "expression": "expression", NO_DEFAULT: NO_ROLE}  # fmt: skip

_FLOATS = frozenset({"float32", "float16", "bfloat16", "float64"})
_IMAGE_DTYPES = _FLOATS | {"uint8"}
_INTEGERS = frozenset({"int32", "int64", "int16", "int8", "uint8", "uint16", "uint32", "uint64"})
_CHANNELS = frozenset({1, 3, 4})
_PASS_THROUGH = frozenset(
    {"Cast", "Reshape", "Unsqueeze", "Squeeze", "Flatten", "Identity", "Transpose", "Clip", "Add", "Sub"}
)
"""What a token input goes through on its way to its embedding's Gather (a cast to int64, a reshape
to [B·S], an offset)."""
_KEEPS_AXES = frozenset({"Cast", "Identity", "Sub", "Div", "Mul", "Add", "Clip", "Relu"})
"""What an input goes through to a weight that fixes its axes, every axis kept where it is (a
cast to the weights' type, a normalization by constant mean and deviation)."""
_SEARCH_LIMIT = 4096  # nodes visited downstream of one input: a convolution is within a few of an image
_METADATA_KEYS = ("imgsz", "image_size", "img_size", "input_size")


@dataclass(frozen=True)
class DimDefault:
    """The size a dim left unbound takes, its role (`image height`) and where that came from
    (`source`: NAME, GRAPH, MODEL, SOLVED or NONE); `why`: what in the model states it, for MODEL
    and SOLVED."""

    size: int
    role: str
    source: str
    why: str | None = None

    def text(self) -> str:
        """`image height, default`; `fixed by Reshape 'r' to [1, 784], default`."""
        return f"{self.why or self.role}, default"

    @property
    def said(self) -> str | None:
        """What a listing says of it beyond its size: nothing where its name gave the default (the
        name says what it is: `batch=1`), else its role or what states it (`image height`)."""
        return None if self.source == NAME else self.why or self.role

    def to_dict(self) -> dict:
        return {"size": self.size, "role": self.role, "source": self.source, "why": self.why}


def choose_defaults(
    graph: onnx.GraphProto,
    nodes: list[Node],
    dim_names: Mapping[tuple[str, int], str],
    unbound: Sequence[str],
    given: Mapping[str, int],
    metadata: Mapping[str, str] | None = None,
) -> dict[str, DimDefault]:
    """The default of each name in `unbound`: by its name (defaults.py) where that gives one, else
    by its role in the graph (the module docstring); a size the model states first.
    `dim_names`: the graph inputs' symbolic dims by (input, axis); `given`: the dims bound."""
    if not unbound:
        return {}
    by_name = default_dims(unbound, given)
    roles = _Roles(graph, nodes, dim_names)
    graph_roles = roles.roles() if any(why in (NO_DEFAULT, "spatial") for _, why in by_name.values()) else {}
    stated = roles.stated(set(unbound), given)
    decode = any(name_kind(name) == "past" for name in (*unbound, *given))
    side = _metadata_side(metadata or {})
    chosen: dict[str, DimDefault] = {}
    for name in unbound:
        size, rule = by_name[name]
        role = graph_roles.get(name)
        if name in stated:
            size, why = stated[name]
            chosen[name] = DimDefault(size, role or _RULE_ROLES.get(rule, NO_ROLE), MODEL, why)
        elif rule == "spatial" or (rule == NO_DEFAULT and role in ("image height", "image width")):
            role = role if role in ("image height", "image width") else _side_from_name(name)
            if side is not None:
                chosen[name] = DimDefault(
                    side[0] if role == "image height" else side[1],
                    role,
                    MODEL,
                    f"{role}, {side[2]} in the model's metadata",
                )
            else:
                chosen[name] = DimDefault(SPATIAL, role, NAME if rule == "spatial" else GRAPH)
        elif rule != NO_DEFAULT:
            chosen[name] = DimDefault(size, _RULE_ROLES.get(rule, rule), NAME)
        elif role is not None:
            chosen[name] = DimDefault(_ROLE_SIZES[role](decode), role, GRAPH)
        else:
            chosen[name] = DimDefault(size, NO_ROLE, NONE)
    return chosen


def listed(dims: Mapping[str, int], roles: Mapping[str, DimDefault]) -> str:
    """The dims bound, each default marked with its role where its name does not say it:
    `batch=1 (default), p2o.DynamicDimension.1=224 (image height, default), x=8`."""
    parts = []
    for name, size in sorted(dims.items()):
        role = roles.get(name)
        parts.append(
            f"{name}={size}"
            + ("" if role is None else " (default)" if role.said is None else f" ({role.said}, default)")
        )
    return ", ".join(parts)


def suggested_defaults(
    model: onnx.ModelProto,
    nodes: list[Node],
    unbound: Sequence[str],
    given: Mapping[str, int],
    implied: Mapping[str, int],
) -> dict[str, DimDefault]:
    """What an error naming unbound dims suggests for each (a strict command takes no default): its
    default by role, or the size the graph fixes (`implied`, runnable.implied_sizes)."""
    from onnx_roofline.shapes.dims import input_dim_names

    metadata = {entry.key: entry.value for entry in model.metadata_props}
    chosen = choose_defaults(model.graph, nodes, input_dim_names(model.graph), unbound, given, metadata)
    for dim, size in implied.items():
        chosen[dim] = DimDefault(
            size, chosen[dim].role if dim in chosen else NO_ROLE, SOLVED, "the size the graph fixes"
        )
    return chosen


_ROLE_SIZES = {
    "batch": lambda decode: BATCH,
    "sequence": lambda decode: DECODE_STEP if decode else SEQUENCE,
    "audio samples": lambda decode: AUDIO_SAMPLES,
    "signal length": lambda decode: SEQUENCE,
}


def _side_from_name(name: str) -> str:
    from onnx_roofline.shapes.defaults import words

    named = set(words(name))
    return "image height" if named & {"height", "h"} else "image width" if named & {"width", "w"} else "image side"


def _metadata_side(metadata: Mapping[str, str]) -> tuple[int, int, str] | None:
    """(height, width, the key) of the image size a model's metadata states (`imgsz: [640, 640]`,
    `image_size: 384`), where one does."""
    for key in _METADATA_KEYS:
        text = metadata.get(key)
        if not text:
            continue
        numbers = [int(n) for n in re.findall(r"[0-9]+", text)[:3]]
        if len(numbers) == 1 and 0 < numbers[0] <= 65536:
            return numbers[0], numbers[0], f"{key}={text.strip()}"
        if len(numbers) == 2 and all(0 < n <= 65536 for n in numbers):
            return numbers[0], numbers[1], f"{key}={text.strip()}"
    return None


class _Roles:
    """The roles of a graph's input dims, read from what is downstream of each input."""

    def __init__(self, graph: onnx.GraphProto, nodes: list[Node], dim_names: Mapping[tuple[str, int], str]):
        self.graph, self.nodes, self.dim_names = graph, nodes, dim_names
        initialized = {t.name for t in graph.initializer}
        self.inputs: dict[str, tuple[str | None, list[int | str | None]]] = {}
        for value in graph.input:
            if value.name in initialized or value.type.WhichOneof("value") != "tensor_type":
                continue
            tensor_type = value.type.tensor_type
            dims = (
                [d.dim_value if d.HasField("dim_value") else d.dim_param or None for d in tensor_type.shape.dim]
                if tensor_type.HasField("shape")
                else []
            )
            self.inputs[value.name] = (dtype_name(tensor_type.elem_type), dims)
        self.initialized = initialized
        self._consumers: dict[str, list[tuple[int, int]]] | None = None
        self._constants: dict | None = None
        self._weights: dict[str, tuple[int, ...]] | None = None

    @property
    def consumers(self) -> dict[str, list[tuple[int, int]]]:
        """Each value's readers: (node position, input slot)."""
        if self._consumers is None:
            consumers: dict[str, list[tuple[int, int]]] = {}
            for position, node in enumerate(self.nodes):
                for slot, name in enumerate(node.inputs):
                    if name:
                        consumers.setdefault(name, []).append((position, slot))
                if _has_bodies(node):  # what its bodies read from this scope: read by the node (slot -1)
                    for name in outer_references(node.proto):
                        consumers.setdefault(name, []).append((position, -1))
            self._consumers = consumers
        return self._consumers

    @property
    def constants(self) -> dict:
        if self._constants is None:
            self._constants = constant_table(self.graph, self.nodes)
        return self._constants

    def roles(self) -> dict[str, str]:
        """The role of each symbolic input dim the graph shows one for (the first found: image,
        audio, token, then batch)."""
        found: dict[str, str] = {}
        leading: dict[str, list[str]] = {}

        def say(name: str | None, role: str) -> None:
            if isinstance(name, str) and name not in found:
                found[name] = role

        tokens = [
            name
            for name, (dtype, dims) in self.inputs.items()
            if dtype in _INTEGERS and dims and self._is_token_input(name)
        ]
        token_ranks = {len(self.inputs[name][1]) for name in tokens}
        for name, (dtype, dims) in self.inputs.items():
            rank = len(dims)
            names = [self.dim_names.get((name, axis)) for axis in range(rank)]
            if rank >= 2:
                leading.setdefault(names[0] or "", []).append(name)
            if rank == 4 and dtype in _IMAGE_DTYPES:
                layout = "NCHW" if dims[1] in _CHANNELS else "NHWC" if dims[3] in _CHANNELS else None
                if layout is not None and self._reaches(name, _is_window_op):
                    height, width = (2, 3) if layout == "NCHW" else (1, 2)
                    say(names[0], "batch")
                    say(names[height], "image height")
                    say(names[width], "image width")
                    continue
            if (
                dtype in _FLOATS
                and (rank == 2 or (rank == 3 and isinstance(dims[1], int)))
                and self._reaches(name, _is_signal_op)
            ):
                say(names[0], "batch")
                say(names[-1], "audio samples" if rank == 2 or dims[1] in (1, 2) else "signal length")
                continue
            if rank == 1 and dtype in _FLOATS and self._reaches(name, _is_signal_op):
                say(names[0], "audio samples")
                continue
            if dtype in _INTEGERS and (name in tokens or (rank >= 2 and rank in token_ranks)) and rank in (1, 2):
                if rank == 2:
                    say(names[0], "batch")
                say(names[-1], "sequence")
        for dim, users in leading.items():
            if dim and len(users) >= 2:
                say(dim, "batch")
        return found

    def _reaches(self, source: str, wanted, through: frozenset[str] | None = None) -> bool:
        """Whether a node `wanted(node, slot)` is downstream of `source` (through any node, or
        only the op types `through`), visiting at most _SEARCH_LIMIT nodes."""
        consumers, nodes = self.consumers, self.nodes
        pending, seen = [source], {source}
        visited = 0
        while pending and visited < _SEARCH_LIMIT:
            value = pending.pop()
            for position, slot in consumers.get(value, ()):
                node = nodes[position]
                visited += 1
                if wanted(node, slot, self) or (
                    slot == -1 and any(wanted(inner, -1, self) for inner in _body_nodes(node))
                ):
                    return True
                if through is not None and (node.domain or node.op_type not in through):
                    continue
                for output in node.outputs:
                    if output and output not in seen:
                        seen.add(output)
                        pending.append(output)
        return False

    def _is_token_input(self, name: str) -> bool:
        return self._reaches(name, _is_embedding_lookup, through=_PASS_THROUGH)

    def stated(self, unbound: set[str], given: Mapping[str, int]) -> dict[str, tuple[int, str]]:
        """Sizes the graph fixes for dims in `unbound`: a graph input reshaped (directly, or after a
        Cast) to a constant target with no -1 leaves one dim open, whose size the target's elements
        fix; a dim a convolution or matrix product consumes against a constant weight takes the
        weight's size (weight_fixed). {dim: (size, why)}. A few scans of the op types, no more:
        this runs on every model."""
        open_inputs = {
            name
            for name, (_, dims) in self.inputs.items()
            if any(self.dim_names.get((name, axis)) in unbound for axis in range(len(dims)))
        }
        if not open_inputs:
            return {}
        stated = self.weight_fixed(open_inputs, unbound)
        nodes = self.nodes
        sources = {
            n.outputs[0]: n.inputs[0]
            for n in nodes
            if n.op_type == "Cast" and n.inputs and n.inputs[0] in open_inputs and n.outputs
        }
        sources.update((name, name) for name in open_inputs)
        for node in nodes:
            if node.op_type != "Reshape" or node.domain or len(node.inputs) < 2 or node.inputs[0] not in sources:
                continue
            name = sources[node.inputs[0]]
            target = self._constant_vector(node.inputs[1])
            if target is None or -1 in target or 0 in target:
                continue
            dims = self.inputs[name][1]
            sizes = [
                d if isinstance(d, int) else given.get(self.dim_names.get((name, axis)) or "")
                for axis, d in enumerate(dims)
            ]
            open_axes = [axis for axis, size in enumerate(sizes) if size is None]
            if len(open_axes) != 1:
                continue
            dim = self.dim_names.get((name, open_axes[0]))
            known = math.prod(size for size in sizes if size is not None)
            elements = math.prod(target)
            if dim in unbound and dim not in stated and known and elements % known == 0 and elements // known > 0:
                label = f"{node.name!r}" if node.name else "a Reshape"
                stated[dim] = (elements // known, f"fixed by {label}, which reshapes {name!r} to {target}")
        return stated

    def weight_fixed(self, open_inputs: set[str], unbound: set[str]) -> dict[str, tuple[int, str]]:
        """Dims of `open_inputs` that a Conv, MatMul or Gemm consumes against a constant weight, as
        the weight's size: a Conv's input channels are its weight's second dim × group (a ViT's
        patch embedding: 3 channels, whatever its dim is named), a MatMul's or Gemm's contracted
        axis its weight's rows (a tabular model's features). Reached through the ops that keep
        every axis where it is (a cast, a normalization by constants)."""
        fixed: dict[str, tuple[int, str]] = {}
        for name in open_inputs:
            rank = len(self.inputs[name][1])
            pending, seen = [name], {name}
            while pending:
                value = pending.pop()
                for position, slot in self.consumers.get(value, ()):
                    node = self.nodes[position]
                    consumed = self._weight_axis(node, slot, rank) if not node.domain else None
                    if consumed is not None:
                        axis, size, why = consumed
                        dim = self.dim_names.get((name, axis))
                        if dim in unbound and dim not in fixed and size > 0:
                            fixed[dim] = (size, why)
                    elif (
                        not node.domain and node.op_type in _KEEPS_AXES and node.outputs and node.outputs[0] not in seen
                    ):
                        seen.add(node.outputs[0])
                        pending.append(node.outputs[0])
        return fixed

    def _weight_axis(self, node: Node, slot: int, rank: int) -> tuple[int, int, str] | None:
        """(the input's axis, the size the node's constant weight gives it, why) where `node`
        consumes its input at `slot` against one: None otherwise."""
        label = f"{node.op_type} {node.name!r}" if node.name else node.op_type
        if node.op_type == "Conv" and slot == 0 and len(node.inputs) > 1 and rank >= 3:
            weight = self._weight_dims(node.inputs[1])
            if weight is None or len(weight) != rank:
                return None
            group = next((attr.i for attr in node.attributes if attr.name == "group"), 1) or 1
            return (
                1,
                weight[1] * group,
                f"the input channels of the weight {list(weight)} of {label}"
                + (f" × group {group}" if group > 1 else ""),
            )
        if node.op_type in ("MatMul", "Gemm") and slot == 0 and len(node.inputs) > 1:
            weight = self._weight_dims(node.inputs[1])
            if weight is None or len(weight) != 2 or (node.op_type == "Gemm" and rank != 2):
                return None
            attrs = {attr.name: attr.i for attr in node.attributes}
            axis = (0 if attrs.get("transA") else 1) if node.op_type == "Gemm" else rank - 1
            return (
                axis,
                weight[1] if attrs.get("transB") else weight[0],
                f"the rows of the weight {list(weight)} of {label}",
            )
        return None

    def _weight_dims(self, name: str) -> tuple[int, ...] | None:
        """A constant weight's dims (an initializer no input overrides, or a Constant's tensor),
        read from its header: never its bytes."""
        if self._weights is None:
            self._weights = {t.name: tuple(t.dims) for t in self.graph.initializer if t.name not in self.inputs}
            for node in self.nodes:
                if node.op_type == "Constant" and not node.domain and node.outputs:
                    value = next((attr.t for attr in node.attributes if attr.name == "value"), None)
                    if value is not None:
                        self._weights[node.outputs[0]] = tuple(value.dims)
        return self._weights.get(name)

    def _constant_vector(self, name: str) -> list[int] | None:
        """A small 1-D integer constant's values (a Reshape's target), or None."""
        constant = self.constants.get(name)
        if constant is None or (
            isinstance(constant, onnx.TensorProto) and math.prod(constant.dims) > MAX_FOLDED_ELEMENTS
        ):
            return None
        array = constant_array(constant)
        return [int(v) for v in array] if array is not None and array.ndim == 1 and array.dtype.kind in "iu" else None


def _has_bodies(node: Node) -> bool:
    return (
        bool(node.attributes)
        and (node.op_type in ("If", "Loop", "Scan", "SequenceMap") or bool(node.domain))
        and node.holds_body
    )


def _body_nodes(node: Node) -> list[Node]:
    """The nodes of a node's bodies, nested ones included."""
    found, pending = [], [node]
    while pending:
        current = pending.pop()
        for attr in current.attributes if _has_bodies(current) else ():
            for graph in (
                [attr.g]
                if attr.type == onnx.AttributeProto.GRAPH
                else attr.graphs
                if attr.type == onnx.AttributeProto.GRAPHS
                else ()
            ):
                inner = read_nodes(graph)
                found += inner
                pending += inner
    return found


def _is_window_op(node: Node, slot: int, roles: _Roles) -> bool:
    """A convolution or a pooling (any domain: onnxruntime's NhwcConv, QLinearConv, FusedConv…)."""
    return "Conv" in node.op_type or "Pool" in node.op_type


def _is_signal_op(node: Node, slot: int, roles: _Roles) -> bool:
    return "Conv" in node.op_type or node.op_type in ("STFT", "DFT")


def _is_embedding_lookup(node: Node, slot: int, roles: _Roles) -> bool:
    """The indices of a Gather from a weight (an initializer or a Constant: an embedding table), or
    onnxruntime's EmbedLayerNormalization's ids."""
    if node.op_type == "Gather" and not node.domain and slot == 1:
        data = node.inputs[0]
        return data in roles.initialized or data in roles.constants
    return node.op_type == "EmbedLayerNormalization" and node.domain == "com.microsoft" and slot in (0, 1)
