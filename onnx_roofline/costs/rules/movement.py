"""Data movement and shape ops: views, copies, partial reads, scatters, generators, resampling,
containers. Almost none of them compute; what they cost is bytes, so the rules here are mostly
about which bytes an op really touches.

Conventions of this family (the rule docstrings below say which one each op follows):

- **Views** (Reshape, Squeeze, Unsqueeze, Flatten) move no data: 0 bytes written, and of what they
  read only their shape-only input (Reshape's `shape`, Squeeze/Unsqueeze's `axes` from opset 13),
  which DESIGN.md counts as tiny but real.
- **Copies** (Transpose, Concat, Split, Expand, Tile, Pad, DepthToSpace, ...) take the framework
  default: each distinct input read once — shape-only inputs such as Expand's `shape`, Pad's `pads`
  or Split's `split` included, whether they are attributes (older opsets, nothing to read) or
  inputs (newer ones) — and each output written once. 0 FLOPs: index arithmetic is not counted.
- **Partial reads** (Gather*, Slice, Compress, CenterCropPad, sampling ops): the op reads the data it
  keeps, `min(elements kept, whole input)` in the input's dtype, plus its index/shape inputs. Every
  element is counted once however many outputs reuse it (the cap), and strided keeps count only the
  elements kept, not the cache lines around them.
- **Metadata** (Shape, Size, EyeLike, Random*Like): reading an input's shape reads none of its data.
- **Comparisons** that are an op's purpose (NonZero, Unique's sort, NMS) are 1 FLOP each; masks and
  positions derived from indices (Trilu, OneHot, ReverseSequence) are address arithmetic, 0 FLOPs.
- **Interpolation** (Resize, Upsample, GridSample, RoiAlign): an output is a weighted sum of taps,
  2 FLOPs (one multiply-add) per tap; nearest is a copy, 0 FLOPs. Sampling positions and weights
  are per output *position* and shared across channels: not counted.
- **Data-dependent work** (adaptive RoiAlign sampling, MaxRoiPool bins): the lower bound (one sample
  per output), matching the roofline's lower-bound time. Data-dependent *output shapes* (NonZero,
  Unique, NMS, Compress, ImageDecoder) are usually unknown statically; such nodes are reported as
  unknown-shape by the walk before any rule runs.
- **Containers** (Sequence*, Optional*): only tensor-typed values are counted; a sequence or optional
  handle moves by reference, 0 bytes. Strings have data-dependent byte sizes: the string ops raise,
  so they are reported with status `data-dependent` and that reason, never a made-up zero.
"""

from __future__ import annotations

import math

from onnx_roofline.costs.cost import VIEW, Cost
from onnx_roofline.costs.rules.registry import register
from onnx_roofline.model.op_node import KnownNode
from onnx_roofline.model.status import DATA_DEPENDENT, Uncostable
from onnx_roofline.model.tensors import KnownTensor

"""Status of a node whose cost depends on tensor values the analysis does not have (string ops,
ImageDecoder): reported with the reason, never counted as zero."""


def _side_inputs_bytes(node: KnownNode) -> int:
    """Bytes of the inputs after the first (shape-only or index inputs), each distinct one once,
    leaving out any that is the first input itself."""
    data = node.input(0)
    side = {t.name: t.nbytes for t in node.inputs[1:] if t is not None and (data is None or t.name != data.name)}
    return sum(side.values())


def kept_bytes(data: KnownTensor, elements: int) -> int:
    """Bytes of `elements` elements of `data`, at most the whole tensor (each element read once)."""
    return min(data.nbytes, (elements * data.bits + 7) // 8)


def _attr_str(node: KnownNode, name: str, default: str) -> str:
    value = node.attrs.get(name, default)
    return value.decode() if isinstance(value, bytes) else value


# --- views ---------------------------------------------------------------------------------------


@register("Reshape", "Squeeze", "Unsqueeze")
def view_with_shape_input(node: KnownNode) -> Cost:
    """A view: 0 FLOPs, 0 bytes written; reads only its shape-only input (Reshape's `shape`, or the
    `axes` of Squeeze/Unsqueeze from opset 13), e.g. 4 int64 dims = 32 bytes. With axes as an
    attribute (older opsets) it reads nothing."""
    return Cost(bytes_read=_side_inputs_bytes(node), bytes_written=0)


@register("Flatten")
def flatten(node: KnownNode) -> Cost:
    """A view with no shape-only input: 0 FLOPs, 0 bytes."""
    return VIEW


@register("Constant")
def constant(node: KnownNode) -> Cost:
    """0 bytes: the value is baked into the program, like an initializer; the consumer's read of
    it is counted on the consumer, as for weights."""
    return VIEW


@register("Optional", "OptionalGetElement")
def optional_wrap(node: KnownNode) -> Cost:
    """Wrapping a tensor into an optional, or unwrapping it, is a reference move: 0 FLOPs, 0 bytes."""
    return VIEW


# --- metadata ------------------------------------------------------------------------------------


@register("Shape", "Size", "SequenceLength", "OptionalHasElement")
def metadata(node: KnownNode) -> Cost:
    """Reads no data, only the input's metadata; writes its small output (Shape: rank×8 bytes of
    int64, or end−start dims with start/end; Size and SequenceLength: one int64 = 8 bytes;
    OptionalHasElement: one bool = 1 byte). 0 FLOPs."""
    return Cost(bytes_read=0)


@register("EyeLike")
def eye_like(node: KnownNode) -> Cost:
    """Only the input's shape and dtype are used: reads 0 bytes, writes the output once. 0 FLOPs
    (which element is 1 is index arithmetic)."""
    return Cost(bytes_read=0)


# --- copies (the framework default) --------------------------------------------------------------


@register("Transpose", "Concat", "Split", "DepthToSpace", "SpaceToDepth", "ReverseSequence", "Trilu")
def copy(node: KnownNode) -> Cost:
    """A copy or permutation: 0 FLOPs; the default bytes (each distinct input once, Split's
    `split` sizes and Trilu's `k` included, each output once). ReverseSequence and Trilu choose
    positions by index arithmetic, which is not counted."""
    return Cost()


@register("Expand", "Tile", "ConstantOfShape", "OneHot")
def broadcast_copy(node: KnownNode) -> Cost:
    """Replicates its input into a larger output: reads the input once (plus the `shape`/`repeats`/
    `depth`/`values` inputs), writes the whole output; 0 FLOPs."""
    return Cost()


@register("Pad")
def pad(node: KnownNode) -> Cost:
    """Every mode (constant, reflect, edge, wrap) is a copy: 0 FLOPs; reads the input once (plus
    `pads`, `constant_value`, `axes` as inputs from opset 11, nothing as attributes before), writes
    the output once."""
    return Cost()


@register("Dropout")
def dropout(node: KnownNode) -> Cost:
    """Inference (the default, and whenever `training_mode` is not a constant true): an identity copy,
    0 FLOPs, default bytes (input, `ratio`, `training_mode` read; output and, when asked for, the
    bool mask written). Training: 2 FLOPs per element (compare a draw with the ratio, scale the
    kept value by 1/(1−ratio)); random bit generation is integer work, not counted."""
    flag = node.input_value(2)
    training = flag is not None and flag.size > 0 and bool(flag.reshape(-1)[0])
    return Cost(flops=2 * node.result(0).numel if training else 0)


# --- partial reads -------------------------------------------------------------------------------


@register("Gather", "GatherElements", "GatherND")
def gather(node: KnownNode) -> Cost:
    """Reads the selected elements plus the indices, not the whole table: an embedding lookup of 8
    tokens from a 50257×768 table reads 8×768 elements. Selected = output elements, capped at the
    table's size (a repeated row is read once). 0 FLOPs."""
    data = node.operand(0)
    return Cost(bytes_read=kept_bytes(data, node.result(0).numel) + _side_inputs_bytes(node))


@register("Slice")
def slice_(node: KnownNode) -> Cost:
    """Reads what it keeps: the output's elements, plus the `starts`/`ends`/`axes`/`steps` inputs
    (attributes before opset 10: nothing to read). Writes the output. 0 FLOPs."""
    data = node.operand(0)
    return Cost(bytes_read=kept_bytes(data, node.result(0).numel) + _side_inputs_bytes(node))


@register("Compress")
def compress(node: KnownNode) -> Cost:
    """Reads the kept slices (the output's elements) plus the whole bool `condition`; writes the
    output. 0 FLOPs. The output shape depends on the condition's values: the node is costed where
    the graph declares that shape."""
    data = node.operand(0)
    return Cost(bytes_read=kept_bytes(data, node.result(0).numel) + _side_inputs_bytes(node))


@register("CenterCropPad")
def center_crop_pad(node: KnownNode) -> Cost:
    """Crops where the target is smaller, pads where larger: reads the elements that survive the crop
    (per axis the smaller of input and output size) plus the `shape` input; writes the output."""
    data, out = node.operand(0), node.result(0)
    kept = math.prod(min(i, o) for i, o in zip(data.shape, out.shape, strict=False))
    return Cost(bytes_read=kept_bytes(data, kept) + _side_inputs_bytes(node))


# --- scatters ------------------------------------------------------------------------------------


@register("ScatterND", "ScatterElements", "Scatter")
def scatter(node: KnownNode) -> Cost:
    """The output is a new tensor: data copied and updates written over it, so the default bytes
    (data, indices, updates read once; output written once). FLOPs: 0 with reduction 'none' (a
    store), 1 per update element with 'add', 'mul', 'max' or 'min'."""
    reduction = _attr_str(node, "reduction", "none")
    return Cost(flops=0 if reduction == "none" else node.operand(2).numel)


@register("Col2Im")
def col2im(node: KnownNode) -> Cost:
    """The inverse of im2col: every element of the [N, C·∏block, L] input is added into its image
    position, 1 FLOP (an add) each. Default bytes (input, `image_shape`, `block_shape` read)."""
    return Cost(flops=node.operand(0).numel)


# --- generators ----------------------------------------------------------------------------------


@register("Range")
def range_(node: KnownNode) -> Cost:
    """ONNX's function body accumulates `prev + delta`: 1 FLOP per output. Reads the three scalars."""
    return Cost(flops=node.result(0).numel)


@register("RandomUniform", "RandomUniformLike")
def random_uniform(node: KnownNode) -> Cost:
    """Scale and shift a uniform draw, low + (high−low)·u: 2 FLOPs per output; the random bits are
    integer work, not counted. Reads nothing (the *Like input lends only shape and dtype)."""
    return Cost(flops=2 * node.result(0).numel, bytes_read=0)


@register("RandomNormal", "RandomNormalLike")
def random_normal(node: KnownNode) -> Cost:
    """Box–Muller: a pair of outputs costs ln, sqrt, cos, sin (4 transcendentals) and 4 FLOPs
    (−2·ln u₁, 2π·u₂, r·cos, r·sin); then mean + scale·z, 2 FLOPs each: per output 4 FLOPs and 2
    transcendentals. Reads nothing (the *Like input lends only shape and dtype)."""
    outputs = node.result(0).numel
    return Cost(flops=4 * outputs, transcendentals=2 * outputs, bytes_read=0)


@register("Bernoulli")
def bernoulli(node: KnownNode) -> Cost:
    """One compare of a uniform draw with the input probability: 1 FLOP per output. Default bytes."""
    return Cost(flops=node.result(0).numel)


@register("Multinomial")
def multinomial(node: KnownNode) -> Cost:
    """Input [batch, classes] of unnormalized log-probabilities: exp of each (a transcendental) and a
    running sum (1 FLOP) build the CDF; each of the [batch, samples] draws is scaled by the total
    (1 FLOP) and found by binary search, ceil(log2(classes)) compares."""
    batch, classes = node.operand(0).shape
    draws = node.result(0).numel
    return Cost(
        flops=batch * classes + draws * (1 + math.ceil(math.log2(max(classes, 1)))),
        transcendentals=batch * classes,
    )


# --- resampling ----------------------------------------------------------------------------------

_TAPS = {"nearest": 1, "linear": 2, "bilinear": 2, "cubic": 4, "bicubic": 4}


def _resampled_taps(node: KnownNode, mode: str, antialias: bool) -> int:
    """Taps per output element for Resize/Upsample: the product over resized axes (input size ≠
    output size, or an explicit crop by a constant `roi` under tf_crop_and_resize) of 2 (linear)
    or 4 (cubic); antialiased downscaling widens an axis's filter by in/out."""
    base = _TAPS[mode]
    data, out = node.operand(0), node.result(0)
    crop = _attr_str(node, "coordinate_transformation_mode", "") == "tf_crop_and_resize"
    cropped = _cropped_axes(node) if crop else set()
    taps = 1
    for axis, (size_in, size_out) in enumerate(zip(data.shape, out.shape, strict=False)):
        if size_in == size_out and axis not in cropped:
            continue
        if antialias and base > 1 and size_out < size_in:
            taps *= -(-base * size_in // size_out)  # ceil(base · in/out)
        else:
            taps *= base
    return taps


def _cropped_axes(node: KnownNode) -> set[int]:
    """Axes a constant `roi` (input 1) crops to other than [0, 1]."""
    roi = node.input_value(1)
    if roi is None or roi.size == 0:
        return set()
    rank = node.operand(0).rank
    axes = [a % rank for a in node.attrs.get("axes") or range(rank)]
    starts, ends = roi.reshape(-1)[: len(axes)], roi.reshape(-1)[len(axes) :]
    return {axis for axis, start, end in zip(axes, starts, ends, strict=False) if (start, end) != (0, 1)}


def interpolation_cost(node: KnownNode, taps: int) -> Cost:
    """2 FLOPs per tap per output (0 for a 1-tap copy); reads the taps touched, capped at the input."""
    outputs = node.result(0).numel
    return Cost(
        flops=0 if taps == 1 else 2 * taps * outputs,
        bytes_read=kept_bytes(node.operand(0), taps * outputs) + _side_inputs_bytes(node),
    )


@register("Resize", "Upsample")
def resize(node: KnownNode) -> Cost:
    """Per output element: nearest 0 FLOPs (a copy); linear 2 taps per resized axis (bilinear 4,
    trilinear 8), cubic 4 (bicubic 16), at 2 FLOPs (a multiply-add) per tap: bilinear 8 FLOPs,
    bicubic 32. Axes whose size is unchanged are copies (1 tap). With `antialias` (opset 18), a
    downscaled axis's filter spans in/out times as many taps. Coordinate transforms and weights are
    per position, shared across channels: not counted. Reads the taps touched (each input element
    once: upscaling reads the whole input, nearest downscaling only the picked elements) plus
    `roi`/`scales`/`sizes`; writes the output."""
    mode = _attr_str(node, "mode", "nearest")
    return interpolation_cost(node, _resampled_taps(node, mode, bool(node.attrs.get("antialias", 0))))


@register("GridSample")
def grid_sample(node: KnownNode) -> Cost:
    """Each output element samples the input at its grid point: nearest 1 tap (0 FLOPs), (bi)linear
    2 taps per spatial axis (4 in 2-D), (bi)cubic 4 per axis (16 in 2-D), 2 FLOPs per tap. Grid
    unnormalization and weights are per grid point, shared across channels: not counted. Reads the
    taps touched (capped at the whole input) plus the grid; writes the output."""
    mode = _attr_str(node, "mode", "linear")
    spatial = node.operand(0).rank - 2
    return interpolation_cost(node, _TAPS[mode] ** spatial)


@register("AffineGrid")
def affine_grid(node: KnownNode) -> Cost:
    """theta [N, d, d+1] maps each base-grid point to d coordinates, each a dot product with the
    homogeneous point: d multiply-adds, 2·d FLOPs per output element ([N, H, W, 2] in 2-D: 4 FLOPs
    each). The base grid (a linspace) is not counted. Default bytes (theta and `size` read)."""
    spatial = node.result(0).shape[-1]
    return Cost(flops=2 * spatial * node.result(0).numel)


@register("RoiAlign")
def roi_align(node: KnownNode) -> Cost:
    """Y [R, C, oh, ow]: each output averages (or maxes) s_h·s_w bilinear samples, each 4 taps at
    2 FLOPs (the 4 weighted taps and the accumulate: 8 FLOPs a sample), plus 1 divide for 'avg'.
    s = `sampling_ratio`; when it is 0 (adaptive, ceil(roi size / output size), data-dependent) the
    lower bound s = 1 is used. Reads the taps touched (capped at the whole feature map) plus rois
    and batch indices; writes Y."""
    ratio = node.attrs.get("sampling_ratio", 0)
    samples = ratio * ratio if ratio > 0 else 1
    outputs = node.result(0).numel
    average = _attr_str(node, "mode", "avg") == "avg"
    return Cost(
        flops=outputs * (8 * samples + (1 if average else 0)),
        bytes_read=kept_bytes(node.operand(0), 4 * samples * outputs) + _side_inputs_bytes(node),
    )


@register("MaxRoiPool")
def max_roi_pool(node: KnownNode) -> Cost:
    """Y [R, C, ph, pw]: each output is the max over its bin, whose size depends on the rois'
    values. The lower bound is used, like the roofline time it feeds: one element per bin, so 0
    compares, and a read of the output's elements (capped at the feature map) plus the rois."""
    return Cost(bytes_read=kept_bytes(node.operand(0), node.result(0).numel) + _side_inputs_bytes(node))


# --- data-dependent selection --------------------------------------------------------------------


@register("NonZero")
def non_zero(node: KnownNode) -> Cost:
    """One compare with zero per input element; default bytes. The output [rank, nnz] depends on the
    values: the node is costed where the graph declares that shape."""
    return Cost(flops=node.operand(0).numel)


@register("Unique")
def unique(node: KnownNode) -> Cost:
    """A sort: n·ceil(log2 n) compares over the n elements considered (the whole input, or with
    `axis` its slices along that axis); default bytes."""
    data = node.operand(0)
    axis = node.attrs.get("axis")
    n = data.numel if axis is None else data.shape[axis]
    per_compare = 1 if axis is None else data.numel // max(n, 1)  # slices compare element by element
    return Cost(flops=n * math.ceil(math.log2(max(n, 1))) * per_compare)


@register("NonMaxSuppression")
def non_max_suppression(node: KnownNode) -> Cost:
    """boxes [B, N, 4], scores [B, C, N]. Per box: its area, 3 FLOPs (6 more to turn a center box
    into corners). Per batch and class: 1 compare per score with the score threshold, a sort,
    N·ceil(log2 N) compares, and the IoU of every pair as a GPU kernel computes it (the full
    suppression bit matrix), N(N−1)/2 pairs at 13 FLOPs (4 min/max for the intersection's corners,
    2 subtracts and 2 clamps for its sides, 1 multiply for its area, 2 for the union, 1 divide, 1
    compare with the IoU threshold). The selection that follows is data-dependent, and so is the
    output's first dim: the node is costed only where that shape is known."""
    batch, boxes, _ = node.operand(0).shape
    classes = node.operand(1).shape[1]
    per_box = 3 + (6 if node.attrs.get("center_point_box", 0) else 0)
    per_class = boxes + boxes * math.ceil(math.log2(max(boxes, 1))) + 13 * boxes * (boxes - 1) // 2
    return Cost(flops=batch * (boxes * per_box + classes * per_class))


@register("Det")
def det(node: KnownNode) -> Cost:
    """[*, M, M]: Gaussian elimination (LU) then the product of the diagonal. Eliminating column k
    (1 ≤ j = M−k ≤ M−1 rows below it) costs j divides for the multipliers and j² multiply-adds:
    Σ (j + 2j²) = M(M−1)/2 + M(M−1)(2M−1)/3 FLOPs, ≈ 2M³/3; the diagonal product adds M−1.
    Pivot searches are compares of the elimination and not counted separately. Default bytes."""
    m = node.operand(0).shape[-1]
    matrices = node.operand(0).numel // (m * m) if m else 0
    per_matrix = m * (m - 1) // 2 + m * (m - 1) * (2 * m - 1) // 3 + max(m - 1, 0)
    return Cost(flops=matrices * per_matrix)


# --- containers ----------------------------------------------------------------------------------
# A sequence's bytes are its elements' (shape_rules/sequences.py tracks them): these rules count the
# copies an op makes into or out of it, never the elements it leaves where they are.


@register("SequenceEmpty")
def sequence_empty(node: KnownNode) -> Cost:
    """Creates an empty sequence handle: 0 FLOPs, 0 bytes."""
    return VIEW


@register("SequenceConstruct")
def sequence_construct(node: KnownNode) -> Cost:
    """Copies its tensor inputs into a new sequence: reads each distinct input once and writes as
    many bytes (every input, in order)."""
    return Cost(bytes_read=node.distinct_input_bytes(), bytes_written=sum(t.nbytes for t in node.present_inputs))


@register("SequenceInsert")
def sequence_insert(node: KnownNode) -> Cost:
    """Appends a copy of its tensor (input 1): reads it and the optional `position` scalar, writes
    the tensor's bytes. The existing elements stay where they are (a reference, 0 bytes)."""
    return Cost(bytes_read=_side_inputs_bytes(node), bytes_written=node.operand(1).nbytes)


@register("SequenceErase")
def sequence_erase(node: KnownNode) -> Cost:
    """Drops one element by reference: reads the optional `position` scalar, writes nothing."""
    return Cost(bytes_read=_side_inputs_bytes(node), bytes_written=0)


@register("SequenceAt")
def sequence_at(node: KnownNode) -> Cost:
    """Copies one element out: reads that element (the output's bytes) and the `position` scalar,
    writes the output."""
    return Cost(bytes_read=node.result(0).nbytes + _side_inputs_bytes(node))


@register("SplitToSequence")
def split_to_sequence(node: KnownNode) -> Cost:
    """Splits its input into a sequence of pieces: reads the input (and `split`) once and writes the
    input's bytes again as the pieces."""
    return Cost(bytes_read=node.distinct_input_bytes(), bytes_written=node.operand(0).nbytes)


@register("ConcatFromSequence")
def concat_from_sequence(node: KnownNode) -> Cost:
    """Concatenates every element into one tensor: the elements' bytes are the output's, read once
    and written once."""
    return Cost(bytes_read=node.result(0).nbytes)


# --- strings: every element at the length the analysis assumes (shapes/texts.py) -------------------


def string_bytes(tensor: KnownTensor) -> int:
    """The bytes a string tensor's element is counted at (TensorInfo.string_bytes); a string with
    none (a rule called on a bare tensor) is not costed, never counted as 0 bytes."""
    if tensor.string_bytes is None:
        raise Uncostable(DATA_DEPENDENT, f"string tensor {tensor.name!r} has no static byte size")
    return tensor.string_bytes


@register("StringNormalizer")
def string_normalizer(node: KnownNode) -> Cost:
    """X [C] or [1, C] of L-byte strings (L the length assumed): a case change (LOWER, UPPER) is
    one op per byte, C·L; NONE none; `stopwords`, one hash lookup per string, + C. Bytes: the
    default, X read, Y written, each string L bytes."""
    x = node.operand(0)
    case = node.attrs.get("case_change_action", "NONE")
    case = case.decode() if isinstance(case, bytes) else str(case)
    changed = x.numel * string_bytes(x) if case in ("LOWER", "UPPER") else 0
    return Cost(flops=changed + (x.numel if node.attrs.get("stopwords") else 0))


@register("RegexFullMatch", "StringSplit")
def scan_strings(node: KnownNode) -> Cost:
    """One automaton step per byte of X, X.numel·L (L the length assumed): RE2, onnxruntime's
    regex engine, matches in time linear in the text; a split scans each string for its delimiter
    once. Bytes: the default (the outputs: a bool per string; the pieces, L bytes each)."""
    x = node.operand(0)
    return Cost(flops=x.numel * string_bytes(x))


@register("StringConcat")
def string_concat(node: KnownNode) -> Cost:
    """0 FLOPs: each output string is a copy of its two inputs' bytes (broadcast). Bytes: the
    default, every string at the length assumed, the output's too."""
    for tensor in (node.operand(0), node.operand(1)):
        string_bytes(tensor)
    return Cost()


# --- not costed, with the reason ------------------------------------------------------------------


@register("ImageDecoder")
def image_decoder(node: KnownNode) -> Cost:
    """Not costed (status `data-dependent`): decoding (entropy decoding, inverse transforms, color
    conversion) depends on the encoded stream's format and content, the output's shape on its header."""
    raise Uncostable(DATA_DEPENDENT, "decoding cost depends on the encoded data's format and content")


# --- onnxruntime's contrib data movement ----------------------------------------------------------


@register("UnfoldTensor", domain="com.microsoft")
def unfold_tensor(node: KnownNode) -> Cost:
    """torch's unfold, materialized: a copy of the windows, 0 FLOPs; the default bytes (the input
    read once, the output written — larger than the input when the windows overlap, step < size)."""
    return Cost()


@register("RemovePadding", domain="com.microsoft")
def remove_padding(node: KnownNode) -> Cost:
    """Packs the real tokens of input [B, S, D] into [tokens, D]: 0 FLOPs (the offsets are a prefix
    sum of B counts, not counted). A partial read: the kept rows (output 0's size) and
    sequence_token_count; the outputs written."""
    return Cost(bytes_read=kept_bytes(node.operand(0), node.result(0).numel) + _side_inputs_bytes(node))


@register("RestorePadding", domain="com.microsoft")
def restore_padding(node: KnownNode) -> Cost:
    """Scatters [tokens, D] back to [B, S, D] at token_offset, zero-filling the padding: 0 FLOPs;
    the default bytes (input and token_offset read, the whole output written)."""
    return Cost()
