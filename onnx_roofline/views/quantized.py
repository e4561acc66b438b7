"""Quantized graphs as deployed: a QDQ graph's DequantizeLinear → op → QuantizeLinear runs as one
kernel on the quantized tensors.

A QDQ graph (onnxruntime's `quantize_static` with QuantFormat.QDQ, TensorRT's explicit
quantization) writes each quantized op in float between a DequantizeLinear on every input and a
QuantizeLinear on its output. As written each DQ and Q is a node of its own and a Conv or MatMul
computes in fp32: the same model comes out several times slower than its QOperator twin
(QLinearConv, QLinearMatMul). A runtime runs each such node unit as one kernel (onnxruntime's QDQ
transformers turn it into its QLinear op; TensorRT fuses the layer), so deployed:

1. **A DequantizeLinear is read by its readers** (`quantize`): each node reading a DQ's output reads
   the quantized tensor, its scale and zero point instead, and the DQ runs no kernel. A constant's
   DQ is folded at load: the weight is stored at its quantized dtype and read at it, and what only
   weights feed (an Identity of a dequantized weight, the Q of a bias) is folded with it. An
   activation's DQ goes into every kernel that reads it, as onnxruntime gives each node unit a DQ
   of its own. A reader computing in float dequantizes in registers: the DQ's FLOPs become its
   `dequantize_flops` (the column MatMulNBits keeps them in), outside the time bound.
2. **A matrix op whose two operands are both dequantized computes at their integer (or fp8) peak**:
   the wider operand's dtype class (int4 where the matrix unit has no int4 peak runs as int8). One
   whose weight alone is dequantized (weight-only quantization, float activations) computes at its
   float peak and reads the quantized weight bytes, as MatMulNBits does.
3. **Data movement runs on the quantized tensor**: an op that only moves data (MOVES: a Reshape, a
   Transpose, a Gather, a MaxPool) between a DQ and Qs of the same scale and zero point reads and
   writes the quantized dtype, and those Qs, which restore what the DQ undid, run nothing
   (onnxruntime drops such Q/DQ pairs; the QOperator format runs these ops on int8 as they stand).
4. **A QuantizeLinear ends its producer's kernel** (fusion.py): it is fused into the kernel of the
   op it quantizes, whatever op that is (a Conv with its Relu, a Softmax, a LayerNorm), and nothing
   joins a kernel through a quantized tensor: the tensor between two units is stored quantized, as
   onnxruntime's node units and the QOperator format's QLinear ops store it. But:
5. **An activation joins its producer across a Q → DQ pair of one scale** (`Quantized.across`):
   `Conv → Q → DQ → Relu → Q`, the DQ naming the Q's own scale and zero point, is one kernel, the
   Relu in the Conv's epilogue, writing only the last Q's tensor. onnxruntime drops a Relu or Clip
   before a QuantizeLinear, whose saturation clamps it (ReluQuantFusion, ClipQuantFusion), then
   the Q1 → DQ1 → Q2 → DQ2 left becomes Q1 → DQ2 (DoubleQDQPairsRemover) and the Conv's node unit
   ends at Q1; TensorRT fuses its activation layers into the Conv or GEMM before them (ACTIVATIONS).
6. **An integer matrix kernel requantizes on its integer unit** (`requantizing`): its
   QuantizeLinears (the int32 accumulator scaled to the output's scale) and the Relu or Clip that
   quantize's saturation performs count at the kernel's integer peak, as the QOperator rules count
   QLinearConv's and QGemm's requantize. A 3-channel stem Conv (54 FLOPs of products per output
   beside a 5-FLOP requantize that the vector unit would take longer over) stays on the matrix
   unit; so does a 16-wide final Gemm. An int32 bias is read as it is (`_reading`).

The written view keeps the graph as written; the deployed notes say what changed."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from onnx_roofline.analysis import NOT_FOLDED
from onnx_roofline.costs.cost import Cost
from onnx_roofline.costs.hardware import dtype_class
from onnx_roofline.costs.roofline import place
from onnx_roofline.costs.rules.registry import MATRIX
from onnx_roofline.model.tensors import TensorInfo
from onnx_roofline.report.findings import QUANTIZED_NOTE
from onnx_roofline.report.model import OK, NodeResult, Report
from onnx_roofline.report.units import si
from onnx_roofline.views.graph import matched, name_of
from onnx_roofline.views.ops import VIEWS

if TYPE_CHECKING:
    from onnx_roofline.report.costed import CostedNode, PlacedCost

DEQUANTIZE, QUANTIZE = "DequantizeLinear", "QuantizeLinear"
DOMAINS = frozenset({"", "com.microsoft"})
MOVES = VIEWS | {"Transpose", "Gather", "GatherElements", "GatherND", "Slice", "Split", "MaxPool", "Expand", "Tile",
                 "DepthToSpace", "SpaceToDepth"}  # fmt: skip
"""ai.onnx ops that only move or select elements: on a quantized tensor they compute the same in its dtype."""
QUANTIZED_CLASSES = frozenset({"int8", "int4", "fp8"})
WIDENED = {"int4": "int8"}
"""An operand class the matrix unit may lack, and the class it is widened to (H100 has no int4
tensor cores: int4 operands are unpacked to int8)."""
ACTIVATIONS = frozenset({"Relu", "Clip", "LeakyRelu", "Sigmoid", "HardSigmoid", "Tanh", "Elu", "Selu", "Softsign",
                         "Softplus", "ThresholdedRelu", "Gelu"})  # fmt: skip
"""Activation functions a runtime applies in the epilogue of the kernel that produces their input:
TensorRT's activation layer types (nvinfer1::ActivationType: RELU, SIGMOID, TANH, LEAKY_RELU, ELU,
SELU, SOFTSIGN, SOFTPLUS, CLIP, HARD_SIGMOID, THRESHOLDED_RELU, GELU_ERF/GELU_TANH), which it fuses
into a Conv or GEMM; onnxruntime's ReluQuantFusion and ClipQuantFusion drop a Relu or Clip before a
QuantizeLinear."""
CLAMPS = frozenset({"Relu", "Clip"})
"""Activations a QuantizeLinear's saturation performs (onnxruntime removes them: ReluQuantFusion,
ClipQuantFusion in onnxruntime/core/optimizer/qdq_transformer)."""


def is_quantize(node: NodeResult) -> bool:
    return node.op_type == QUANTIZE and node.domain in DOMAINS


@dataclass(frozen=True)
class Quantized:
    """A report as its quantized units run: `report` with every read-through applied (and the
    nodes only weights feed once the DQs are read through marked constant_foldable), `through` the
    DQs and Qs that run nothing (their readers read the quantized tensor), `across` the
    activations that join the kernel of the Q they read through a DQ of its own scale."""

    report: Report
    through: frozenset[int] = frozenset()
    across: frozenset[int] = frozenset()


@dataclass(frozen=True)
class _Source:
    """What a reader of a read-through tensor reads instead: `tensor` (the quantized one), `extra`
    (the DQ's scale and zero point), `node` (the DQ or Q that runs nothing)."""

    tensor: TensorInfo
    extra: tuple[TensorInfo | None, ...]
    node: NodeResult

    @property
    def dequantizes(self) -> bool:
        return self.node.op_type == DEQUANTIZE


def quantize(report: Report) -> Quantized:
    """`report` with its DQs (and the Qs that undo them) read through by their readers, each
    reader re-placed (the integer peak for a matrix op whose operands both are); see the module
    docstring. A report with no DequantizeLinear comes back as it is."""
    if not any(n.op_type == DEQUANTIZE and n.domain in DOMAINS for n in report.nodes):
        return Quantized(report)
    readers = _readers(report)
    readable = _readable(report, readers)
    producer = {t.name: n for n in report.nodes for t in n.outputs if t is not None}
    sources: dict[str, _Source] = {}
    nodes = list(report.nodes)
    through: set[int] = set()
    across: set[int] = set()
    constant = _Constants(report)
    for node in report.nodes:
        if node.index in through:  # a Q undoing a DQ: its output is the moved tensor
            constant.follow(node, sources[name_of(node.outputs[0])].tensor.name)
            continue
        if (
            node.op_type == DEQUANTIZE
            and node.domain in DOMAINS
            and node.status == OK
            and name_of(node.outputs[0]) in readable
        ):
            data = matched(node.inputs[0])
            quantized = sources[data.name].tensor if data.name in sources else data
            sources[name_of(node.outputs[0])] = _Source(quantized, node.inputs[1:], node)
            through.add(node.index)
            constant.follow(node, quantized.name, *(t.name for t in node.inputs[1:] if t is not None))
            continue
        read = {t.name: sources[t.name] for t in node.inputs if t is not None and t.name in sources}
        undone = _undone(node, read, readers, readable)
        if _activation_across(node, read, producer):
            across.add(node.index)
        if read and node.status == OK:  # an uncosted reader stays as it is: no cost to rescale
            node = nodes[node.index] = _reading(node, read, report.hardware)
        if undone:
            node = nodes[node.index] = _moved(node, matched(node.inputs[0]).dtype, report.hardware)
            for q in undone:
                sources[name_of(q.outputs[0])] = _Source(matched(node.outputs[0]), (), q)
                through.add(q.index)
        if constant.folds(node):
            nodes[node.index] = dataclasses.replace(node, constant_foldable=True)
    return Quantized(dataclasses.replace(report, nodes=tuple(nodes)), frozenset(through), frozenset(across))


def requantizing(nodes, anchor) -> list:
    """A kernel's members (`nodes`) as its integer matrix op `anchor` runs them: where the anchor
    computes on quantized operands, its QuantizeLinears and the Relu or Clip their saturation
    performs are its requantize, placed on the anchor's unit at its peak (module docstring, 6);
    otherwise `nodes` as they are."""
    if anchor.unit != MATRIX or anchor.dtype not in QUANTIZED_CLASSES:
        return list(nodes)
    return [dataclasses.replace(n, unit=anchor.unit, dtype=anchor.dtype, peak=anchor.peak)
            if is_quantize(n) or (n.op_type in CLAMPS and not n.domain) else n for n in nodes]  # fmt: skip


def note(quantized: Quantized, kernels) -> str | None:
    """The deployed note: the DQs read through, the activations joined across a Q → DQ pair, and
    the matrix kernels on quantized operands, by dtype and peak."""
    if not quantized.through:
        return None
    counts: dict[tuple[str, float], int] = defaultdict(int)
    for kernel in kernels:
        for share in kernel.units:
            if share.unit == MATRIX and share.dtype in QUANTIZED_CLASSES:
                counts[share.dtype, share.peak] += 1
    integer = ", ".join(f"{count} {dtype} at {si(peak, 'op/s')}" for (dtype, peak), count in counts.items()) or "none"
    nodes = quantized.report.nodes
    dequantized = sum(nodes[i].op_type == DEQUANTIZE for i in quantized.through)
    across = f", {len(quantized.across)} activation(s) joined to it across a Q → DQ pair" if quantized.across else ""
    return (f"{QUANTIZED_NOTE}{dequantized} DequantizeLinear read at the stored dtype by their readers "
            f"(weights stored quantized), each QuantizeLinear in its producer's kernel{across}; "
            f"matrix kernels on quantized operands: {integer}")  # fmt: skip


# --- who reads what ---------------------------------------------------------------------------------


def _readers(report: Report) -> dict[str, list[NodeResult]]:
    readers: dict[str, list[NodeResult]] = defaultdict(list)
    for node in report.nodes:
        for name in dict.fromkeys(t.name for t in node.inputs if t is not None):
            readers[name].append(node)
    return readers


def _readable(report: Report, readers: dict[str, list[NodeResult]]) -> frozenset[str]:
    """The tensors every reader of which can be costed reading another in its place: no graph
    output (someone needs it as it is), read only by costed main-graph nodes."""
    outputs = frozenset(report.model.graph_outputs)
    return frozenset(name for name, nodes in readers.items()
                     if name not in outputs and all(n.status == OK and not n.scope and type(n.cost) is Cost for n in nodes))  # fmt: skip


class _Constants:
    """The values only weights feed, followed in graph order: an initializer, a folded node's
    output, a dequantized weight, and what nodes compute from them alone (which a runtime folds at
    load, under the analysis's rules: NOT_FOLDED)."""

    def __init__(self, report: Report):
        computed = {t.name for n in report.nodes if not n.constant_foldable for t in n.outputs if t is not None}
        self.variable = computed | set(report.model.graph_inputs)

    def follow(self, node: NodeResult, *inputs: str) -> bool:
        """Whether `node`'s outputs are constant, reading `inputs` (its own by default); they are
        then constant from here on."""
        if node.constant_foldable or node.scope:
            return False
        inputs = inputs or tuple(t.name for t in node.inputs if t is not None)
        if not inputs or any(name in self.variable for name in inputs):
            return False
        self.variable -= {t.name for t in node.outputs if t is not None}
        return True

    def folds(self, node: NodeResult) -> bool:
        """Whether a runtime folds `node` at load, now that it may compute from constants alone: an
        ai.onnx op not in NOT_FOLDED (its outputs are then constant)."""
        return node.domain == "" and node.op_type not in NOT_FOLDED and self.follow(node)


# --- a reader reading the quantized tensor ---------------------------------------------------------------


def _reading(node: NodeResult, read: dict[str, _Source], hardware) -> NodeResult:
    """`node` reading each source of `read` (tensor name → _Source) in place of the tensor: its
    inputs the quantized tensors (scales and zero points appended), its bytes read scaled to them,
    the DQs' FLOPs its `dequantize_flops` unless it computes on the quantized operands, its
    placement redone. An integer kernel reads an int32 bias as it is, already at its accumulator's
    scale (x_scale·w_scale, zero point 0, as onnxruntime's quantizer writes it): not its DQ's scale
    and zero point, which QLinearConv and QGemm do not take either."""
    integer = _integer_class(node, read)
    inputs = [t if t is None or t.name not in read else read[t.name].tensor for t in node.inputs]
    present = {t.name for t in inputs if t is not None}
    for source in read.values():
        if integer and source.dequantizes and source.tensor.dtype == "int32":
            continue
        for extra in source.extra:
            if extra is not None and extra.name not in present:
                inputs.append(extra)
                present.add(extra.name)
    costed = cast("CostedNode", node)  # the view rewrites a costed reader, as it always assumed
    cost = costed.cost
    before, after = _distinct_bytes(node.inputs), _distinct_bytes(inputs)
    share = (
        min(1.0, cost.bytes_read / before) if before else 1.0
    )  # a rule reading part of its inputs (Gather's rows) reads that part of the quantized ones
    dequantize = (
        0
        if integer
        else round(share * sum(cast("PlacedCost", s.node.cost).flops for s in read.values() if s.dequantizes))
    )  # an ok DQ's
    cost = dataclasses.replace(cost, bytes_read=max(cost.bytes_read + round(share * (after - before)), 0),
                               dequantize_flops=cost.dequantize_flops + dequantize)  # fmt: skip
    peak, unit, dtype = costed.peak, costed.unit, costed.dtype
    if integer:
        peak, unit, dtype = hardware.peak(MATRIX, integer)
        if unit != MATRIX and integer in WIDENED:
            peak, unit, dtype = hardware.peak(MATRIX, WIDENED[integer])
    placement = place(cost.flops, cost.bytes, peak, hardware.memory_bandwidth)
    parameters = (node.parameters or 0) + sum(s.node.parameters or 0 for s in read.values())
    return dataclasses.replace(node, inputs=tuple(inputs), cost=cost, unit=unit, peak=peak, dtype=dtype, placement=placement,
                               parameters=parameters)  # fmt: skip


def _integer_class(node: NodeResult, read: dict[str, _Source]) -> str | None:
    """The dtype class a matrix op computes in when both its operands (its first two inputs) are
    dequantized: the wider quantized operand's; else None."""
    if node.unit != MATRIX or len(node.inputs) < 2 or any(t is None or t.name not in read for t in node.inputs[:2]):
        return None
    wider = max((read[name_of(t)].tensor for t in node.inputs[:2]), key=lambda t: t.bits)
    return dtype_class(wider.dtype)


def _activation_across(node: NodeResult, read: dict[str, _Source], producer: dict[str, NodeResult]) -> bool:
    """Whether `node` is an activation (ACTIVATIONS) reading, through a DQ, a QuantizeLinear's
    output with that Q's own scale and zero point: the Q → DQ pair a runtime removes, the
    activation then in the epilogue of the Q's kernel."""
    if node.domain or node.op_type not in ACTIVATIONS or not node.inputs or node.inputs[0] is None:
        return False
    source = read.get(node.inputs[0].name)
    if source is None or not source.dequantizes:
        return False
    q = producer.get(source.tensor.name)
    return q is not None and is_quantize(q) and _names(q.inputs[1:]) == _names(source.extra)


def _names(tensors) -> list[str]:
    """The names of a Q's or DQ's scale and zero point ("" for an absent one)."""
    return [t.name if t is not None else "" for t in tensors]


def _undone(node: NodeResult, read: dict[str, _Source], readers, readable: frozenset[str]) -> list[NodeResult]:
    """The Qs that undo the DQ a data-movement op reads (MOVES: its data input dequantized, every
    output read only by Qs of that DQ's scale and zero point); [] where it is not such an op."""
    if node.op_type not in MOVES or node.domain or node.status != OK or not node.inputs or node.inputs[0] is None:
        return []  # an uncosted move has no bytes to rescale: its Qs stay kernels of their own
    source = read.get(node.inputs[0].name)
    if source is None or not source.dequantizes or any(t is not None and t.name in read for t in node.inputs[1:]):
        return []
    scale = _names(source.extra)
    undone = []
    for output in node.outputs:
        if output is None or output.name not in readable:
            return []
        for q in readers[output.name]:
            if not is_quantize(q) or _names(q.inputs[1:]) != scale:
                return []
            undone.append(q)
    return undone


def _moved(node: NodeResult, dtype: str | None, hardware) -> NodeResult:
    """A data-movement op writing its outputs in the quantized `dtype`: its bytes written scaled."""
    outputs = tuple(t if t is None else TensorInfo(t.name, t.shape, dtype) for t in node.outputs)
    before, after = _distinct_bytes(node.outputs), _distinct_bytes(outputs)
    costed = cast("CostedNode", node)  # a data-movement op the view rewrites is costed, as it always assumed
    cost = dataclasses.replace(
        costed.cost, bytes_written=costed.cost.bytes_written * after // before if before else costed.cost.bytes_written
    )
    placement = place(cost.flops, cost.bytes, costed.peak, hardware.memory_bandwidth)
    return dataclasses.replace(node, outputs=outputs, cost=cost, placement=placement)


def _distinct_bytes(tensors) -> int:
    return sum({t.name: t.nbytes for t in tensors if t is not None and t.is_known}.values())


__all__ = (
    "ACTIVATIONS",
    "CLAMPS",
    "DEQUANTIZE",
    "QUANTIZE",
    "Quantized",
    "is_quantize",
    "note",
    "quantize",
    "requantizing",
)
