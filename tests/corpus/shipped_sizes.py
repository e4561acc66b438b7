"""Models as converters ship them, for sizes and weights (issue 28):
``python -m tests.corpus.shipped_sizes --out tests/corpus/shipped``.

Each model is ``sz_<name>.onnx`` with its manifest ``sz_<name>.json`` (``README_sizes.md`` beside
them says what each one is). The families:

- ``img_*``: one small image classifier (convs, a depthwise conv, pooling, a classifier Gemm) whose
  input dims are named (``img_named``, the counterpart of all the others), empty, ``?``, ``unk__N``
  (tf2onnx), ``p2o.DynamicDimension.k`` (paddle2onnx 1.x) or ``dim_value: -1`` (paddle2onnx <= 1.0);
  ``img_nhwc_*`` takes ``[N, H, W, 3]`` and transposes it to NCHW, as tf2onnx writes Keras models.
- ``const_*``: weights held in ``Constant`` nodes (initializers rewritten, as Paddle and some torch
  exports ship them), with the int64 shape constants a TorchScript export writes anyway.
- ``vad*``: a 1-D audio front end (reflect Pad, then an STFT-like Conv1d) over ``[batch, samples]``
  whose samples dim has no name; onnxruntime cannot run it at 1 sample. ``vad_sr`` picks its front
  end with an ``If`` on its ``sr`` input, each branch with its own Constant-node weights.
- ``p2o_det*`` (needs ``--paddle-python``): a DB-like text detector exported by paddle2onnx
  (Constant-node weights, ``DynamicDimension.k`` dims), and the same graph with ``-1`` and named dims.
- ``tf2onnx_nhwc*`` (needs ``--tf-python``): the image classifier written in Keras, converted by tf2onnx.

Everything the manifests state is computed here, independently of ``onnx_roofline``: the FLOPs of
Conv/ConvTranspose/MatMul/Gemm by formula from the architecture specs below, the weights by walking
the graph's initializers and Constant nodes (``weight_census``). Every model is run in onnxruntime
with its real weights before it is written, and variants of one network are checked to compute the
same outputs.

The converters live in their own virtual environments (they pin numpy/protobuf versions of their
own); the jobs that need one are skipped, leaving the committed files as they are, unless its
interpreter is given::

    python -m venv /tmp/paddle-venv && /tmp/paddle-venv/bin/pip install paddlepaddle paddle2onnx packaging
    python -m venv /tmp/tf-venv && /tmp/tf-venv/bin/pip install tensorflow-cpu tf2onnx
    python -m tests.corpus.shipped_sizes --out tests/corpus/shipped \\
        --paddle-python /tmp/paddle-venv/bin/python --tf-python /tmp/tf-venv/bin/python

Options: ``--only PATTERN`` (fnmatch on names, repeatable), ``--list``, ``--keep-data``.
Needs torch and onnxruntime (the ``dev`` extra); seeded, nothing downloaded, a few seconds without the
converters. Every model is small enough to keep its weights inline (its file is what git holds, and it
runs as committed); one over ``MAX_BYTES`` with initializers would be saved weight-stripped
(``exporters.strip.save_stripped``, the ``.data`` file git-ignored), and a Constant-node model over
it is an error, since its weights must stay in its nodes.
"""

from __future__ import annotations

import argparse
import copy
import fnmatch
import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from math import prod
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")  # before onnxruntime loads

SCHEMA = 1
SEED = 0
MAX_BYTES = 300_000  # a committed graph file stays under ~300 kB
IMAGE_SIDE = 224  # the image side the manifests' expectations are computed at (batch 1)
SMALL_INT_ELEMENTS = 16  # an integer tensor of rank <= 1 and at most this many elements is a shape constant

Dim = int | str | None  # a dim as written: an int (a negative one included), a dim_param, or None (empty)


# --- the independent FLOP count ---------------------------------------------------------------------
# The project's convention (DESIGN.md), written out here without its code: one multiply-add is 2 FLOPs.
#   Conv:          2 * N * Cout * prod(out spatial) * (Cin / group) * prod(kernel)
#   ConvTranspose: 2 * N * Cin * prod(in spatial) * (Cout / group) * prod(kernel)   (each input pixel
#                  scatters a (Cout/group) x kernel block: the same multiply-adds as the Conv it transposes)
#   MatMul / Gemm: 2 * M * K * N
# plus one FLOP per output element for a bias that is an input of that node. A bias the converter wrote
# as a separate Add (paddle2onnx: Conv -> Reshape(bias) -> Add; tf2onnx: MatMul -> Add) is an
# elementwise op, not matrix work: the manifests list it apart as ``bias_outside``.


def conv_out(size: int, kernel: int, stride: int = 1, pad_total: int = 0) -> int:
    """Output length of a conv/pool window along one axis (dilation 1, floor mode)."""
    return (size + pad_total - kernel) // stride + 1


def same_pad_total(size: int, kernel: int, stride: int) -> int:
    """TensorFlow's ``padding="same"``: the output is ceil(size / stride); this is the padding it takes."""
    return max((-(-size // stride) - 1) * stride + kernel - size, 0)


@dataclass(frozen=True)
class Layer:
    """One matrix-unit node of a spec walked at some size: its formula's terms and its FLOPs."""

    name: str
    op: str
    formula: str
    flops: int  # the matrix FLOPs, bias included when the bias is the node's own input
    bias_outside: int = 0  # FLOPs of a bias the converter wrote as its own Add


def conv_layer(
    name: str,
    n: int,
    cin: int,
    cout: int,
    out: tuple[int, ...],
    kernel: tuple[int, ...],
    group: int = 1,
    bias: str = "node",
) -> Layer:
    """``bias``: "node" (an input of the Conv), "add" (a separate Add) or "none"."""
    macs = n * cout * prod(out) * (cin // group) * prod(kernel)
    outputs = n * cout * prod(out)
    flops = 2 * macs + (outputs if bias == "node" else 0)
    formula = f"2*{n}*{cout}*{'*'.join(map(str, out))}*({cin}/{group})*{'*'.join(map(str, kernel))}" + (
        f" + {outputs} (bias)" if bias == "node" else ""
    )
    return Layer(name, "Conv", formula, flops, outputs if bias == "add" else 0)


def conv_transpose_layer(
    name: str,
    n: int,
    cin: int,
    cout: int,
    inp: tuple[int, ...],
    out: tuple[int, ...],
    kernel: tuple[int, ...],
    bias: str = "node",
) -> Layer:
    macs = n * cin * prod(inp) * cout * prod(kernel)
    outputs = n * cout * prod(out)
    flops = 2 * macs + (outputs if bias == "node" else 0)
    formula = f"2*{n}*{cin}*{'*'.join(map(str, inp))}*{cout}*{'*'.join(map(str, kernel))}" + (
        f" + {outputs} (bias)" if bias == "node" else ""
    )
    return Layer(name, "ConvTranspose", formula, flops, outputs if bias == "add" else 0)


def gemm_layer(name: str, m: int, k: int, n: int, bias: str = "node", op: str = "Gemm") -> Layer:
    flops = 2 * m * k * n + (m * n if bias == "node" else 0)
    formula = f"2*{m}*{k}*{n}" + (f" + {m * n} (bias)" if bias == "node" else "")
    return Layer(name, op, formula, flops, m * n if bias == "add" else 0)


def flops_entry(layers: list[Layer], at: dict, method: str) -> dict:
    return {
        "at": at,
        "matrix": sum(layer.flops for layer in layers),
        "bias_outside": sum(layer.bias_outside for layer in layers),
        "layers": [
            {
                "name": layer.name,
                "op": layer.op,
                "flops": layer.flops,
                "formula": layer.formula,
                **({"bias_outside": layer.bias_outside} if layer.bias_outside else {}),
            }
            for layer in layers
        ],
        "method": method,
    }


# --- the architectures ------------------------------------------------------------------------------
# The image classifier (every img_* model, const_cnn, and the Keras model of tf2onnx_nhwc):
#   conv1 3->16 k3 s2 p1, ReLU, MaxPool k2 s2, conv2 16->32 k3 p1, ReLU,
#   dw 32->32 k3 s2 p1 group 32, pw 32->32 k1, ReLU, GlobalAveragePool, Reshape(-1, 32), fc 32->10.
IMAGE_CONVS = [  # name, cin, cout, kernel, stride, pad (each side; Keras: "same"), group
    ("conv1", 3, 16, 3, 2, 1, 1),
    ("conv2", 16, 32, 3, 1, 1, 1),
    ("dw", 32, 32, 3, 2, 1, 32),
    ("pw", 32, 32, 1, 1, 0, 1),
]
IMAGE_POOL_AFTER = "conv1"  # MaxPool k2 s2 after conv1's ReLU
IMAGE_FEATURES, IMAGE_CLASSES = 32, 10


def image_flops(
    n: int, h: int, w: int, same: bool = False, conv_bias: str = "node", fc_bias: str = "node", fc_op: str = "Gemm"
) -> list[Layer]:
    """The classifier's matrix layers at ``[n, 3, h, w]``: torch's explicit pads, or Keras' ``same``."""
    layers = []
    for name, cin, cout, k, s, p, g in IMAGE_CONVS:
        ph, pw = (same_pad_total(h, k, s), same_pad_total(w, k, s)) if same else (2 * p, 2 * p)
        h, w = conv_out(h, k, s, ph), conv_out(w, k, s, pw)
        layers.append(conv_layer(name, n, cin, cout, (h, w), (k, k), g, conv_bias))
        if name == IMAGE_POOL_AFTER:
            h, w = conv_out(h, 2, 2), conv_out(w, 2, 2)
    layers.append(gemm_layer("fc", n, IMAGE_FEATURES, IMAGE_CLASSES, fc_bias, fc_op))
    return layers


# The MLP of const_mlp / init_mlp: x [batch, 8, 8] -> Reshape(-1, 64) -> *0.5 -> fc1 64->128, ReLU,
# fc2 128->128, ReLU, fc2 again (one weight, two Gemms), ReLU, fc3 128->10.
MLP_IN, MLP_HIDDEN, MLP_OUT = 64, 128, 10


def mlp_flops(batch: int) -> list[Layer]:
    return [
        gemm_layer("fc1", batch, MLP_IN, MLP_HIDDEN),
        gemm_layer("fc2", batch, MLP_HIDDEN, MLP_HIDDEN),
        gemm_layer("fc2 (again)", batch, MLP_HIDDEN, MLP_HIDDEN),
        gemm_layer("fc3", batch, MLP_HIDDEN, MLP_OUT),
    ]


# The VAD front end: input [batch, samples] -> Unsqueeze -> Pad reflect (VAD_PAD each side) ->
# Conv1d 1->2*VAD_BINS, kernel VAD_FFT, stride VAD_HOP, no bias (an STFT basis) -> magnitude
# sqrt(re^2 + im^2) -> conv 33->16 k3 p1, ReLU -> conv 16->16 k3 s2 p1, ReLU -> mean over time -> fc 16->1 -> Sigmoid.
VAD_FFT, VAD_HOP, VAD_PAD = 64, 32, 32
VAD_BINS = VAD_FFT // 2 + 1
VAD_CHANNELS = 16
VAD_MIN_SAMPLES = VAD_PAD + 1  # a reflect pad needs more samples than it pads: pad < length


def vad_flops(batch: int, samples: int) -> list[Layer]:
    t1 = conv_out(samples, VAD_FFT, VAD_HOP, 2 * VAD_PAD)
    t2 = conv_out(t1, 3, 1, 2)
    t3 = conv_out(t2, 3, 2, 2)
    return [
        conv_layer("stft", batch, 1, 2 * VAD_BINS, (t1,), (VAD_FFT,), bias="none"),
        conv_layer("conv1", batch, VAD_BINS, VAD_CHANNELS, (t2,), (3,)),
        conv_layer("conv2", batch, VAD_CHANNELS, VAD_CHANNELS, (t3,), (3,)),
        gemm_layer("fc", batch, VAD_CHANNELS, 1),
    ]


# vad_sr: an If on sr == 16000 picks the front end; both make [batch, 16, T] features.
VAD_SR_BRANCHES = {  # sr: (pad each side, kernel, hop); then a ReLU and a conv 32->16 k3 p1 (with bias)
    16000: (32, 64, 32),
    8000: (16, 32, 16),
}
VAD_SR_FILTERS = 32


def vad_sr_flops(batch: int, samples: int, sr: int) -> list[Layer]:
    pad, kernel, hop = VAD_SR_BRANCHES[sr]
    t1 = conv_out(samples, kernel, hop, 2 * pad)
    t2 = conv_out(t1, 3, 1, 2)
    return [
        conv_layer(f"sr{sr}/stft", batch, 1, VAD_SR_FILTERS, (t1,), (kernel,), bias="none"),
        conv_layer(f"sr{sr}/conv", batch, VAD_SR_FILTERS, VAD_CHANNELS, (t2,), (3,)),
        gemm_layer("fc", batch, VAD_CHANNELS, 1),
    ]


# The DB-like text detector of p2o_det (PaddlePaddle): conv3x3 + BatchNorm + ReLU stages (no conv
# bias, as PaddleOCR's backbones), a neck conv, two ConvTranspose k2 s2 up to the input size, Sigmoid.
DET_STAGES = [
    ("stage1", 3, 8, 2),
    ("stage2", 8, 16, 2),
    ("stage3", 16, 16, 1),
    ("neck", 16, 8, 1),
]  # name, cin, cout, stride
DET_UPS = [("up1", 8, 8), ("up2", 8, 1)]  # ConvTranspose k2 s2 with bias; BatchNorm + ReLU after up1
DET_SIZES = [(224, 224), (736, 960)]  # the default side, and the size an OCR package feeds its detector


def det_flops(n: int, h: int, w: int) -> list[Layer]:
    layers = []
    for name, cin, cout, s in DET_STAGES:
        h, w = conv_out(h, 3, s, 2), conv_out(w, 3, s, 2)
        layers.append(conv_layer(name, n, cin, cout, (h, w), (3, 3), bias="none"))
    for name, cin, cout in DET_UPS:  # paddle2onnx writes the bias as Reshape + Add
        layers.append(conv_transpose_layer(name, n, cin, cout, (h, w), (2 * h, 2 * w), (2, 2), bias="add"))
        h, w = 2 * h, 2 * w
    return layers


# --- the independent weight count -------------------------------------------------------------------


def _dtype_bits(data_type: int) -> int:
    if data_type in (TensorProto.INT4, TensorProto.UINT4):
        return 4
    if data_type == TensorProto.STRING:
        raise ValueError("a string tensor has no fixed size")
    return 8 * np.dtype(helper.tensor_dtype_to_np_dtype(data_type)).itemsize


INTEGER_TYPES = {
    TensorProto.INT8,
    TensorProto.INT16,
    TensorProto.INT32,
    TensorProto.INT64,
    TensorProto.UINT8,
    TensorProto.UINT16,
    TensorProto.UINT32,
    TensorProto.UINT64,
}


def _constant_tensor(node: onnx.NodeProto) -> tuple[int, list[int]]:
    """The (dtype, shape) of a Constant node's output, from whichever attribute holds it."""
    attr = node.attribute[0]
    if attr.name == "value":
        return attr.t.data_type, list(attr.t.dims)
    if attr.name == "sparse_value":
        return attr.sparse_tensor.values.data_type, list(attr.sparse_tensor.dims)
    return {
        "value_float": (TensorProto.FLOAT, []),
        "value_int": (TensorProto.INT64, []),
        "value_floats": (TensorProto.FLOAT, [len(attr.floats)]),
        "value_ints": (TensorProto.INT64, [len(attr.ints)]),
        "value_string": (TensorProto.STRING, []),
        "value_strings": (TensorProto.STRING, [len(attr.strings)]),
    }[attr.name]


def weight_census(model: onnx.ModelProto) -> dict:
    """Every weight tensor of the model, counted once, with its bytes.

    A weight is an initializer or the tensor of a ``Constant`` node, in the main graph and in every
    subgraph (If branches, Loop/Scan bodies), unless it is a small integer shape constant: an integer
    tensor of rank <= 1 with at most ``SMALL_INT_ELEMENTS`` elements (a Reshape's shape, Unsqueeze's
    axes, Pad's pads, Slice's starts, a scalar compared with an input). A float scalar (a scale, an
    epsilon) is a weight. Each tensor is one entry even when several nodes read it. Bytes are
    elements x element size (sub-byte types by bits). This reads the tensors' dims, never their values.
    """
    weights, shape_constants = [], []

    def visit(graph: onnx.GraphProto, where: str) -> None:
        found = [(t.name, t.data_type, list(t.dims), "initializer") for t in graph.initializer]
        for node in graph.node:
            if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
                found.append((node.output[0], *_constant_tensor(node), "Constant"))
            for attr in node.attribute:
                for sub in [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs):
                    visit(sub, f"{where}/{node.name or node.op_type}/{attr.name}")
        for name, data_type, shape, kind in found:
            entry = {
                "name": name,
                "where": where,
                "kind": kind,
                "dtype": helper.tensor_dtype_to_string(data_type).removeprefix("TensorProto."),
                "shape": shape,
                "bytes": prod(shape) * _dtype_bits(data_type) // 8,
            }
            small_int = data_type in INTEGER_TYPES and len(shape) <= 1 and prod(shape) <= SMALL_INT_ELEMENTS
            (shape_constants if small_int else weights).append(entry)

    visit(model.graph, "main")
    return {
        "count": len(weights),
        "bytes": sum(w["bytes"] for w in weights),
        "elements": sum(prod(w["shape"]) for w in weights),
        "by_kind": {
            kind: {
                "count": sum(w["kind"] == kind for w in weights),
                "bytes": sum(w["bytes"] for w in weights if w["kind"] == kind),
            }
            for kind in ("initializer", "Constant")
        },
        "rule": (
            f"initializers and Constant-node tensors in every graph and subgraph, each once, bytes = elements x "
            f"element size; integer tensors of rank <= 1 with <= {SMALL_INT_ELEMENTS} elements are shape constants, not weights"
        ),
        "tensors": weights,
        "shape_constants": {
            "count": len(shape_constants),
            "bytes": sum(s["bytes"] for s in shape_constants),
            "tensors": [f"{s['where']}:{s['name']} {s['kind']} {s['dtype']}{s['shape']}" for s in shape_constants],
        },
    }


# --- rewrites: how a converter writes dims and weights ---------------------------------------------


def set_dims(model: onnx.ModelProto, shapes: dict[str, list[Dim]]) -> None:
    """Write each graph input/output's dims as given: int (negative too), dim_param, or None (empty).

    A converter's ``-1`` is written literally as ``dim_value: -1`` (``helper`` would do the same).
    ``value_info`` is dropped: the shipped graphs these mimic carry none."""
    ios = {v.name: v for v in list(model.graph.input) + list(model.graph.output)}
    for name, dims in shapes.items():
        shape = ios[name].type.tensor_type.shape
        if len(shape.dim) != len(dims):
            raise ValueError(f"{name}: rank {len(shape.dim)}, asked {dims}")
        for d, want in zip(shape.dim, dims, strict=False):
            d.Clear()
            if isinstance(want, int):
                d.dim_value = want
            elif want is not None:
                d.dim_param = want
    del model.graph.value_info[:]


def initializers_to_constants(model: onnx.ModelProto) -> None:
    """Move every initializer of the main graph into a ``Constant`` node at the top of the graph, its
    output named as the initializer was (what paddle2onnx writes without its optimizer)."""
    nodes = [
        helper.make_node("Constant", [], [t.name], name=f"Constant_{t.name}", value=t) for t in model.graph.initializer
    ]
    for node in reversed(nodes):
        model.graph.node.insert(0, node)
    del model.graph.initializer[:]


# --- torch models -----------------------------------------------------------------------------------


def _torch_image_net(nhwc: bool):
    import torch
    from torch import nn

    class ImageNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.convs = nn.ModuleDict(
                {name: nn.Conv2d(cin, cout, k, s, p, groups=g) for name, cin, cout, k, s, p, g in IMAGE_CONVS}
            )
            self.fc = nn.Linear(IMAGE_FEATURES, IMAGE_CLASSES)

        def forward(self, x):
            if nhwc:
                x = x.permute(0, 3, 1, 2)
            for name, conv in self.convs.items():
                x = conv(x)
                if name != "dw":  # the depthwise conv feeds the pointwise one directly
                    x = torch.relu(x)
                if name == IMAGE_POOL_AFTER:
                    x = nn.functional.max_pool2d(x, 2)
            x = nn.functional.adaptive_avg_pool2d(x, 1)
            return self.fc(x.reshape(-1, IMAGE_FEATURES))

    torch.manual_seed(SEED)
    return ImageNet().eval()


def _torch_mlp():
    import torch
    from torch import nn

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2, self.fc3 = (
                nn.Linear(MLP_IN, MLP_HIDDEN),
                nn.Linear(MLP_HIDDEN, MLP_HIDDEN),
                nn.Linear(MLP_HIDDEN, MLP_OUT),
            )

        def forward(self, x):
            x = x.reshape(-1, MLP_IN) * 0.5
            x = torch.relu(self.fc1(x))
            x = torch.relu(self.fc2(x))
            x = torch.relu(self.fc2(x))  # the same weight twice: one tensor, read by two Gemms
            return self.fc3(x)

    torch.manual_seed(SEED)
    return MLP().eval()


def _torch_vad():
    import torch
    from torch import nn

    class VAD(nn.Module):
        def __init__(self):
            super().__init__()
            self.stft = nn.Conv1d(1, 2 * VAD_BINS, VAD_FFT, VAD_HOP, bias=False)
            self.conv1 = nn.Conv1d(VAD_BINS, VAD_CHANNELS, 3, padding=1)
            self.conv2 = nn.Conv1d(VAD_CHANNELS, VAD_CHANNELS, 3, stride=2, padding=1)
            self.fc = nn.Linear(VAD_CHANNELS, 1)

        def forward(self, x):
            x = nn.functional.pad(x.unsqueeze(1), (VAD_PAD, VAD_PAD), mode="reflect")
            spec = self.stft(x)
            re, im = spec[:, :VAD_BINS], spec[:, VAD_BINS:]
            x = torch.sqrt(re * re + im * im)
            x = torch.relu(self.conv1(x))
            x = torch.relu(self.conv2(x))
            return torch.sigmoid(self.fc(x.mean(-1)))

    torch.manual_seed(SEED)
    return VAD().eval()


def torch_export(
    module, example: tuple, names: tuple[list[str], list[str]], dynamic: dict, opset: int = 17
) -> onnx.ModelProto:
    """TorchScript export (``dynamo=False``), as most torch models shipped inside packages were made."""
    import torch

    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path = Path(tmp) / "m.onnx"
        torch.onnx.export(
            module,
            example,
            str(path),
            dynamo=False,
            input_names=names[0],
            output_names=names[1],
            dynamic_axes=dynamic,
            opset_version=opset,
        )
        return onnx.load(path)


TORCH_TOOL = "torch.onnx.export(dynamo=False, opset_version=17)"


# --- models built with onnx.helper ------------------------------------------------------------------


def _const(name: str, array: np.ndarray) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name], name=f"Constant_{name}", value=numpy_helper.from_array(array, name))


def vad_sr_model() -> onnx.ModelProto:
    """A Silero-like VAD: ``input`` [batch, <empty>] float, ``sr`` [] int64. ``If(sr == 16000)`` picks
    the 16 kHz or the 8 kHz front end; each branch holds its own weights as Constant nodes; the shared
    classifier's weights are initializers of the main graph."""
    rng = np.random.default_rng(SEED)

    def branch(sr: int) -> onnx.GraphProto:
        pad, kernel, hop = VAD_SR_BRANCHES[sr]
        p = f"sr{sr}_"
        nodes = [
            _const(p + "axes", np.array([1], np.int64)),
            _const(p + "pads", np.array([0, 0, pad, 0, 0, pad], np.int64)),
            _const(p + "stft_w", (rng.standard_normal((VAD_SR_FILTERS, 1, kernel)) / kernel).astype(np.float32)),
            _const(p + "conv_w", (rng.standard_normal((VAD_CHANNELS, VAD_SR_FILTERS, 3)) * 0.1).astype(np.float32)),
            _const(p + "conv_b", (rng.standard_normal(VAD_CHANNELS) * 0.1).astype(np.float32)),
            helper.make_node("Unsqueeze", ["input", p + "axes"], [p + "x3"], name=p + "Unsqueeze"),
            helper.make_node("Pad", [p + "x3", p + "pads"], [p + "padded"], name=p + "Pad", mode="reflect"),
            helper.make_node(
                "Conv",
                [p + "padded", p + "stft_w"],
                [p + "spec"],
                name=p + "stft/Conv",
                kernel_shape=[kernel],
                strides=[hop],
            ),
            helper.make_node("Relu", [p + "spec"], [p + "act"], name=p + "Relu"),
            helper.make_node(
                "Conv",
                [p + "act", p + "conv_w", p + "conv_b"],
                [p + "feats"],
                name=p + "conv/Conv",
                kernel_shape=[3],
                pads=[1, 1],
            ),
        ]
        out = helper.make_tensor_value_info(p + "feats", TensorProto.FLOAT, None)
        return helper.make_graph(nodes, f"sr{sr}", [], [out])

    fc_w = (rng.standard_normal((1, VAD_CHANNELS)) * 0.3).astype(np.float32)
    fc_b = np.array([0.1], np.float32)
    nodes = [
        _const("sr16k", np.array(16000, np.int64)),
        helper.make_node("Equal", ["sr", "sr16k"], ["is16k"], name="Equal"),
        helper.make_node("If", ["is16k"], ["feats"], name="If_sr", then_branch=branch(16000), else_branch=branch(8000)),
        helper.make_node("ReduceMean", ["feats"], ["pooled"], name="ReduceMean", axes=[2], keepdims=0),
        helper.make_node("Gemm", ["pooled", "fc.weight", "fc.bias"], ["logit"], name="fc/Gemm", transB=1),
        helper.make_node("Sigmoid", ["logit"], ["prob"], name="Sigmoid"),
    ]
    graph = helper.make_graph(
        nodes,
        "vad_sr",
        [
            helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", None]),
            helper.make_tensor_value_info("sr", TensorProto.INT64, []),
        ],
        [helper.make_tensor_value_info("prob", TensorProto.FLOAT, ["batch", 1])],
        [numpy_helper.from_array(fc_w, "fc.weight"), numpy_helper.from_array(fc_b, "fc.bias")],
    )
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8, producer_name="tests.corpus.shipped_sizes"
    )


# --- converters, each in its own interpreter -----------------------------------------------------------

PADDLE_SCRIPT = """
import json, os, sys, warnings
warnings.simplefilter("ignore")
import numpy as np
import paddle, paddle.nn as nn, paddle2onnx
from importlib import metadata
work, spec = sys.argv[1], json.loads(sys.argv[2])
paddle.seed(spec["seed"])

class Det(nn.Layer):  # a DB-like text detector: conv-BN-ReLU stages, a neck, two ConvTranspose ups
    def __init__(self):
        super().__init__()
        self.convs = nn.LayerList([nn.Conv2D(ci, co, 3, stride=s, padding=1, bias_attr=False) for _, ci, co, s in spec["stages"]])
        self.bns = nn.LayerList([nn.BatchNorm2D(co) for _, ci, co, s in spec["stages"]])
        (_, a, b), (_, c, d) = spec["ups"]
        self.up1, self.bn_up, self.up2 = nn.Conv2DTranspose(a, b, 2, stride=2), nn.BatchNorm2D(b), nn.Conv2DTranspose(c, d, 2, stride=2)

    def forward(self, x):
        for conv, bn in zip(self.convs, self.bns):
            x = nn.functional.relu(bn(conv(x)))
        x = nn.functional.relu(self.bn_up(self.up1(x)))
        return nn.functional.sigmoid(self.up2(x))

model = Det()
for layer in model.sublayers():  # random BatchNorm statistics, so the normalization is not an identity
    if isinstance(layer, nn.BatchNorm2D):
        layer._mean.set_value(paddle.randn(layer._mean.shape) * 0.1)
        layer._variance.set_value(paddle.rand(layer._variance.shape) + 0.5)
model.eval()
paddle.jit.save(model, os.path.join(work, "det", "inference"), input_spec=[paddle.static.InputSpec([None, 3, None, None], "float32", "x")])
paddle2onnx.export(os.path.join(work, "det", "inference.json"), os.path.join(work, "det", "inference.pdiparams"),
                   os.path.join(work, "p2o_det.onnx"), opset_version=11, optimize_tool="None")
x = np.random.default_rng(spec["seed"]).standard_normal((1, 3, 64, 96)).astype("float32")
np.save(os.path.join(work, "ref_x.npy"), x)
np.save(os.path.join(work, "ref_y.npy"), model(paddle.to_tensor(x)).numpy())
json.dump({d: metadata.version(d) for d in ("paddlepaddle", "paddle2onnx")}, open(os.path.join(work, "versions.json"), "w"))
"""

TF_SCRIPT = """
import json, os, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import numpy as np
import tensorflow as tf, tf2onnx
from importlib import metadata
work, spec = sys.argv[1], json.loads(sys.argv[2])
tf.keras.utils.set_random_seed(spec["seed"])
bias = lambda: tf.keras.initializers.RandomNormal(stddev=0.1)  # tf2onnx drops zero biases: keep them real
x = inp = tf.keras.Input((None, None, 3), name="image")
for name, cin, cout, k, s, p, g in spec["convs"]:
    if g == 1:
        x = tf.keras.layers.Conv2D(cout, k, strides=s, padding="same", bias_initializer=bias(), name=name)(x)
    else:
        x = tf.keras.layers.DepthwiseConv2D(k, strides=s, padding="same", bias_initializer=bias(), name=name)(x)
    if name != "dw":
        x = tf.keras.layers.ReLU()(x)
    if name == spec["pool_after"]:
        x = tf.keras.layers.MaxPooling2D(2)(x)
x = tf.keras.layers.GlobalAveragePooling2D()(x)
out = tf.keras.layers.Dense(spec["classes"], bias_initializer=bias(), name="fc")(x)
model = tf.keras.Model(inp, out)
signature = (tf.TensorSpec((None, None, None, 3), tf.float32, name="image"),)
tf2onnx.convert.from_keras(model, input_signature=signature, opset=13, output_path=os.path.join(work, "tf2onnx_nhwc.onnx"))
x = np.random.default_rng(spec["seed"]).standard_normal((2, 97, 131, 3)).astype("float32")
np.save(os.path.join(work, "ref_x.npy"), x)
np.save(os.path.join(work, "ref_y.npy"), model(x).numpy())
json.dump({d: metadata.version(d) for d in ("tensorflow-cpu", "tf2onnx", "keras")}, open(os.path.join(work, "versions.json"), "w"))
"""


def run_converter(python: str, script: str, work: Path, spec: dict) -> dict:
    """Run ``script`` under ``python`` in ``work``; return the versions it reports."""
    (work / "det").mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "ORT_DISABLE_TELEMETRY": "1", "PYTHONHASHSEED": "0"}
    (work / "convert.py").write_text(textwrap.dedent(script))  # a file: Paddle's dy2static reads the source
    result = subprocess.run(
        [python, "convert.py", str(work), json.dumps(spec)],
        check=False,
        env=env,
        cwd=work,
        capture_output=True,
        text=True,
    )
    if result.returncode:
        raise RuntimeError(f"{python} failed:\n{result.stderr[-3000:]}")
    return json.loads((work / "versions.json").read_text())


# --- onnxruntime ------------------------------------------------------------------------------------


def ort_run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 4  # the failed runs of smallest_runnable are expected
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def ort_error(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> str | None:
    """None if onnxruntime runs ``feeds``, else the first line of its error."""
    try:
        ort_run(model, feeds)
        return None
    except Exception as error:  # noqa: BLE001 - onnxruntime raises its own exception types
        return str(error).strip().splitlines()[0][:300]


def smallest_runnable(
    model: onnx.ModelProto, feeds_at: Callable[[int], dict], upto: int = 256
) -> tuple[int, str | None]:
    """The smallest length onnxruntime runs (checking every length from 1), and its error at length 1."""
    first_error = ort_error(model, feeds_at(1))
    for length in range(1, upto + 1):
        if ort_error(model, feeds_at(length)) is None:
            return length, first_error
    raise RuntimeError(f"nothing up to {upto} runs")


def _rand(shape, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def same_outputs(a: list[np.ndarray], b: list[np.ndarray], what: str) -> None:
    for x, y in zip(a, b, strict=True):
        if x.shape != y.shape or not np.allclose(x, y, rtol=1e-4, atol=1e-5):
            raise AssertionError(f"{what}: outputs differ")


# --- the jobs ---------------------------------------------------------------------------------------


@dataclass
class Built:
    model: onnx.ModelProto  # with its weights
    generator: str
    tool: str
    expect: dict  # what the analysis should find: sizes, roles, FLOPs at them
    ran: list  # onnxruntime runs made with the real weights: input shapes, and the checks
    notes: str
    named_counterpart: str | None = None
    versions: dict = field(default_factory=dict)


class Context:
    """Shared state of one run: the work folder, the converters' interpreters, built models by name."""

    def __init__(self, work: Path, paddle_python: str | None, tf_python: str | None):
        self.work, self.paddle_python, self.tf_python = work, paddle_python, tf_python
        self.cache: dict[str, object] = {}

    def once(self, key: str, make: Callable[[], object]):
        if key not in self.cache:
            self.cache[key] = make()
        return self.cache[key]


class Skip(Exception):
    """A job that cannot run here (its converter's interpreter was not given)."""


JOBS: dict[str, Callable[[Context], Built]] = {}


def job(name: str):
    def register(fn):
        if name in JOBS:
            raise ValueError(f"duplicate model {name!r}")
        JOBS[name] = fn
        return fn

    return register


def image_expect(
    input_name: str,
    shape: list[int],
    dims: dict | None,
    roles: dict,
    same: bool = False,
    fc_bias: str = "node",
    fc_op: str = "Gemm",
) -> dict:
    at = {"input_shapes": {input_name: shape}, **({"dims": dims} if dims else {})}
    nhwc = shape[-1] == 3
    n, h, w = (shape[0], shape[1], shape[2]) if nhwc else (shape[0], shape[2], shape[3])
    method = (
        "formula in tests/corpus/shipped_sizes.py (image_flops): 2*N*Cout*Hout*Wout*(Cin/group)*kH*kW per Conv, "
        "2*M*K*N per Gemm/MatMul, + one FLOP per output for a bias input of the node"
    )
    return {
        "image_side": IMAGE_SIDE,
        "batch": 1,
        "layout": "NHWC" if nhwc else "NCHW",
        "roles": roles,
        "flops": [flops_entry(image_flops(n, h, w, same, fc_bias=fc_bias, fc_op=fc_op), at, method)],
    }


IMAGE_STYLES: dict[str, tuple[list[Dim], list[Dim], str]] = {
    # style: input dims [N, 3, H, W], output dims [N, 10], what writes them
    "named": (
        ["batch", 3, "height", "width"],
        ["batch", 10],
        "the named counterpart: torch.onnx.export with dynamic_axes names",
    ),
    "empty": (
        [None, 3, None, None],
        [None, 10],
        "empty dims (neither dim_param nor dim_value), as converters that only know 'unknown' write them",
    ),
    "qmark": (
        ["?", 3, "?", "?"],
        ["?", 10],
        "every unknown dim named '?': by the letter of ONNX one symbol, so N = H = W; the converter means three unknowns",
    ),
    "unk": (
        ["unk__12", 3, "unk__13", "unk__14"],
        ["unk__15", 10],
        "tf2onnx's names for unknown dims (unk__N, a counter)",
    ),
    "p2o": (
        ["p2o.DynamicDimension.0", 3, "p2o.DynamicDimension.1", "p2o.DynamicDimension.2"],
        ["p2o.DynamicDimension.3", 10],
        "paddle2onnx 1.x's names for dynamic dims (p2o.DynamicDimension.k; 2.x writes DynamicDimension.k)",
    ),
    "neg1": (
        [-1, 3, -1, -1],
        [-1, 10],
        (
            "dim_value: -1, as paddle2onnx <= 1.0 wrote dynamic dims (Paddle2ONNX issues #269, #928, #1137); "
            "the torch fallback for a paddle2onnx export (p2o_det_neg1 is the converter's graph)"
        ),
    ),
}
IMAGE_ROLES = {
    "named": {"batch": "batch", "height": "image height", "width": "image width"},
    "qmark": {"?": "batch, image height and image width (one name)"},
    "unk": {"unk__12": "batch", "unk__13": "image height", "unk__14": "image width", "unk__15": "batch (output)"},
    "p2o": {
        "p2o.DynamicDimension.0": "batch",
        "p2o.DynamicDimension.1": "image height",
        "p2o.DynamicDimension.2": "image width",
        "p2o.DynamicDimension.3": "batch (output)",
    },
    "empty": {"x[0]": "batch", "x[2]": "image height", "x[3]": "image width"},
    "neg1": {"x[0]": "batch", "x[2]": "image height", "x[3]": "image width"},
}


def _image_export(ctx: Context, nhwc: bool) -> onnx.ModelProto:
    """The image classifier's TorchScript export (NCHW, or NHWC with the permute), made once; its FLOPs
    checked against torch's own counter."""

    def make():
        import torch

        net = _torch_image_net(nhwc)
        example = torch.randn(1, 32, 32, 3) if nhwc else torch.randn(1, 3, 32, 32)
        axes = {0: "batch", 1: "height", 2: "width"} if nhwc else {0: "batch", 2: "height", 3: "width"}
        model = torch_export(net, (example,), (["x"], ["logits"]), {"x": axes, "logits": {0: "batch"}})
        _check_torch_flops(net, nhwc)
        return model

    return ctx.once(f"image_{nhwc}", make)


def _check_torch_flops(net, nhwc: bool) -> None:
    """The formula's FLOPs without biases equal torch's FlopCounterMode at 224 (it counts no bias)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    x = torch.zeros(1, IMAGE_SIDE, IMAGE_SIDE, 3) if nhwc else torch.zeros(1, 3, IMAGE_SIDE, IMAGE_SIDE)
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        net(x)
    no_bias = sum(layer.flops for layer in image_flops(1, IMAGE_SIDE, IMAGE_SIDE, conv_bias="none", fc_bias="none"))
    if counter.get_total_flops() != no_bias:
        raise AssertionError(
            f"image net: FlopCounterMode {counter.get_total_flops()} != formula without bias {no_bias}"
        )


def _image_job(style: str, nhwc: bool = False):
    def run(ctx: Context) -> Built:
        model = copy.deepcopy(_image_export(ctx, nhwc))
        dims_in, dims_out, how = IMAGE_STYLES[style]
        if nhwc:
            dims_in = [dims_in[0], dims_in[2], dims_in[3], 3]
        set_dims(model, {"x": dims_in, "logits": dims_out})
        shape = [1, IMAGE_SIDE, IMAGE_SIDE, 3] if nhwc else [1, 3, IMAGE_SIDE, IMAGE_SIDE]
        named = {"batch": 1, "height": IMAGE_SIDE, "width": IMAGE_SIDE} if style == "named" else None
        roles = dict(IMAGE_ROLES[style])
        if nhwc and style in ("empty", "neg1"):
            roles = {"x[0]": "batch", "x[1]": "image height", "x[2]": "image width"}
        ran = image_runs(ctx, model, nhwc)
        notes = how + (
            "; the input is NHWC and a Transpose(perm 0,3,1,2) makes it NCHW, as tf2onnx writes Keras models"
            if nhwc
            else ""
        )
        counterpart = None if style == "named" else ("sz_img_nhwc_named" if nhwc else "sz_img_named")
        return Built(
            model,
            "torch-export+dims",
            f"{TORCH_TOOL}; graph input/output dims rewritten ({style})",
            image_expect("x", shape, named, roles),
            ran,
            notes,
            counterpart,
        )

    return run


def image_runs(ctx: Context, model: onnx.ModelProto, nhwc: bool) -> list:
    """Run at [1, 3, 224, 224] and [2, 3, 97, 131] (NHWC: the same, transposed); every style and layout
    must give the named NCHW model's outputs."""
    reference = _image_export(ctx, False)
    runs = []
    for shape in ([1, 3, IMAGE_SIDE, IMAGE_SIDE], [2, 3, 97, 131]):
        x = _rand(shape)
        ref = ctx.once(f"image_ref_{shape}", lambda x=x: ort_run(reference, {"x": x}))
        feed = x.transpose(0, 2, 3, 1).copy() if nhwc else x
        same_outputs(ort_run(model, {"x": feed}), ref, "image variant vs the named NCHW export")
        runs.append({"input_shapes": {"x": list(feed.shape)}, "check": "outputs equal sz_img_named's"})
    return runs


for _style in IMAGE_STYLES:
    job(f"img_{_style}")(_image_job(_style))
job("img_nhwc_named")(_image_job("named", nhwc=True))
job("img_nhwc_unk")(_image_job("unk", nhwc=True))


@job("const_cnn")
def const_cnn(ctx: Context) -> Built:
    model = copy.deepcopy(_image_export(ctx, False))
    set_dims(model, {"x": ["batch", 3, "height", "width"], "logits": ["batch", 10]})
    initializers_to_constants(model)
    ran = image_runs(ctx, model, False)
    notes = (
        "sz_img_named with every initializer moved into a Constant node at the top of the graph (paddle2onnx writes "
        "weights this way). The Reshape(-1, 32) shape is an int64 Constant TorchScript wrote: a shape constant, not a weight."
    )
    return Built(
        model,
        "torch-export+constants",
        f"{TORCH_TOOL}; initializers rewritten as Constant nodes",
        image_expect(
            "x",
            [1, 3, IMAGE_SIDE, IMAGE_SIDE],
            {"batch": 1, "height": IMAGE_SIDE, "width": IMAGE_SIDE},
            IMAGE_ROLES["named"],
        ),
        ran,
        notes,
        "sz_img_named",
    )


def _mlp_export(ctx: Context) -> onnx.ModelProto:
    def make():
        import torch

        return torch_export(
            _torch_mlp(), (torch.randn(2, 8, 8),), (["x"], ["logits"]), {"x": {0: "batch"}, "logits": {0: "batch"}}
        )

    return ctx.once("mlp", make)


def _mlp_job(constants: bool):
    def run(ctx: Context) -> Built:
        model = copy.deepcopy(_mlp_export(ctx))
        if constants:
            initializers_to_constants(model)
        runs = []
        for batch in (1, 4):
            x = _rand([batch, 8, 8])
            same_outputs(ort_run(model, {"x": x}), ort_run(_mlp_export(ctx), {"x": x}), "mlp")
            runs.append({"input_shapes": {"x": [batch, 8, 8]}})
        method = "formula in tests/corpus/shipped_sizes.py (mlp_flops): 2*M*K*N + M*N per Gemm"
        expect = {"roles": {"batch": "batch"}, "flops": [flops_entry(mlp_flops(1), {"dims": {"batch": 1}}, method)]}
        notes = (
            "fc2 is applied twice: one weight tensor read by two Gemms, counted once. The input scale (* 0.5) is a float "
            "scalar Constant TorchScript wrote: a weight of 4 bytes by the rule; the Reshape shape is an int64 Constant: not a weight."
        )
        if constants:
            return Built(
                model,
                "torch-export+constants",
                f"{TORCH_TOOL}; initializers rewritten as Constant nodes",
                expect,
                runs,
                "sz_init_mlp with every initializer moved into a Constant node. " + notes,
                "sz_init_mlp",
            )
        return Built(
            model, "torch-export", TORCH_TOOL, expect, runs, "The initializer counterpart of sz_const_mlp. " + notes
        )

    return run


job("const_mlp")(_mlp_job(True))
job("init_mlp")(_mlp_job(False))


def _vad_job(named: bool):
    def run(ctx: Context) -> Built:
        import torch

        model = torch_export(
            _torch_vad(),
            (torch.randn(1, 512),),
            (["input"], ["prob"]),
            {"input": {0: "batch", 1: "samples"}, "prob": {0: "batch"}},
        )
        set_dims(model, {"input": ["batch", "samples" if named else None], "prob": ["batch", 1]})
        smallest, error_at_1 = smallest_runnable(model, lambda n: {"input": _rand([1, n])})
        if smallest != VAD_MIN_SAMPLES:
            raise AssertionError(f"vad: onnxruntime runs from {smallest} samples, expected {VAD_MIN_SAMPLES}")
        runs = [{"input_shapes": {"input": [b, n]}} for b, n in ((1, 512), (2, 16000), (1, VAD_MIN_SAMPLES))]
        for r in runs:
            ort_run(model, {"input": _rand(r["input_shapes"]["input"])})
        method = "formula in tests/corpus/shipped_sizes.py (vad_flops): 2*N*Cout*Tout*(Cin/group)*k per Conv (+ bias), 2*M*K*N + M*N per Gemm"
        samples_role = {"samples" if named else "input[1]": "audio samples"}
        expect = {
            "roles": {"batch": "batch", **samples_role},
            "min_runnable": {
                "samples": VAD_MIN_SAMPLES,
                "why": f"Pad mode=reflect pads {VAD_PAD} on each side of the samples axis, "
                f"and a reflect pad must be smaller than the axis",
                "onnxruntime_error_at_1": error_at_1,
            },
            "flops": [
                flops_entry(vad_flops(1, 512), {"input_shapes": {"input": [1, 512]}}, method),
                flops_entry(vad_flops(1, 16000), {"input_shapes": {"input": [1, 16000]}}, method),
            ],
        }
        notes = (
            "A VAD-like front end: a reflect Pad (its pads built by the TorchScript exporter from int64 Constants through "
            "ConstantOfShape, Concat, Reshape, Slice, Transpose and Cast), an STFT "
            f"as a Conv1d (kernel {VAD_FFT}, hop {VAD_HOP}), magnitude, two Conv1d, mean over time, Gemm, Sigmoid. "
            f"onnxruntime cannot run it below {VAD_MIN_SAMPLES} samples (checked length by length)."
        )
        if named:
            return Built(model, "torch-export", TORCH_TOOL, expect, runs, "The named counterpart of sz_vad. " + notes)
        return Built(
            model,
            "torch-export+dims",
            f"{TORCH_TOOL}; the samples dim emptied",
            expect,
            runs,
            "The samples dim has no name (empty). " + notes,
            "sz_vad_named",
        )

    return run


job("vad")(_vad_job(False))
job("vad_named")(_vad_job(True))


@job("vad_sr")
def vad_sr(ctx: Context) -> Built:
    model = vad_sr_model()
    onnx.checker.check_model(model, full_check=True)
    runs, minimum = [], {}
    for sr in VAD_SR_BRANCHES:
        sr_feed = np.array(sr, np.int64)
        smallest, error = smallest_runnable(model, lambda n, sr_feed=sr_feed: {"input": _rand([1, n]), "sr": sr_feed})
        pad = VAD_SR_BRANCHES[sr][0]
        if smallest != pad + 1:
            raise AssertionError(f"vad_sr at {sr}: runs from {smallest}, expected {pad + 1}")
        minimum[str(sr)] = {"samples": smallest, "onnxruntime_error_at_1": error}
        for n in (512, sr):
            ort_run(model, {"input": _rand([1, n]), "sr": sr_feed})
            runs.append({"input_shapes": {"input": [1, n], "sr": []}, "values": {"sr": sr}})
    method = "formula in tests/corpus/shipped_sizes.py (vad_sr_flops): the taken branch's Convs, then the Gemm"
    expect = {
        "roles": {"batch": "batch", "input[1]": "audio samples"},
        "values_needed": {
            "sr": "selects the If branch (16000: then_branch, else: else_branch); give it with --value sr=16000"
        },
        "min_runnable": {
            "by_sr": minimum,
            "why": "a reflect pad must be smaller than the samples axis (32 at 16 kHz, 16 at 8 kHz)",
        },
        "flops": [
            flops_entry(vad_sr_flops(1, 512, sr), {"input_shapes": {"input": [1, 512]}, "values": {"sr": sr}}, method)
            for sr in VAD_SR_BRANCHES
        ],
    }
    notes = (
        "Silero-like: the sample rate is an int64 scalar input; If(sr == 16000) picks a front end whose weights are "
        "Constant nodes inside its branch; the classifier's weights are main-graph initializers. Weights counted over both "
        "branches. The scalar 16000 compared with sr is an integer constant: not a weight."
    )
    return Built(model, "onnx.helper", "onnx.helper.make_model (opset 17, IR 8)", expect, runs, notes)


# --- paddle2onnx ------------------------------------------------------------------------------------


def _paddle(ctx: Context) -> tuple[onnx.ModelProto, dict, np.ndarray, np.ndarray]:
    if not ctx.paddle_python:
        raise Skip("needs --paddle-python (an interpreter with paddlepaddle and paddle2onnx)")

    def make():
        work = ctx.work / "paddle"
        spec = {"seed": SEED, "stages": DET_STAGES, "ups": DET_UPS}
        versions = run_converter(ctx.paddle_python, PADDLE_SCRIPT, work, spec)
        return onnx.load(work / "p2o_det.onnx"), versions, np.load(work / "ref_x.npy"), np.load(work / "ref_y.npy")

    return ctx.once("paddle", make)


P2O_DIMS = {  # style: (input dims, output dims)
    "converter": None,  # as paddle2onnx 2.1 wrote them: DynamicDimension.0..5
    "neg1": ([-1, 3, -1, -1], [-1, 1, -1, -1]),
    "named": (["batch", 3, "height", "width"], ["batch", 1, "height", "width"]),
}


def _p2o_job(style: str):
    def run(ctx: Context) -> Built:
        base, versions, ref_x, ref_y = _paddle(ctx)
        model = copy.deepcopy(base)
        if P2O_DIMS[style]:
            set_dims(model, {"x": P2O_DIMS[style][0], model.graph.output[0].name: P2O_DIMS[style][1]})
        onnx.checker.check_model(model, full_check=True)
        same_outputs(ort_run(model, {"x": ref_x}), [ref_y], "paddle2onnx export vs paddle")
        runs = [{"input_shapes": {"x": list(ref_x.shape)}, "check": "outputs equal Paddle's own"}]
        for h, w in DET_SIZES:
            ort_run(model, {"x": _rand([1, 3, h, w])})
            runs.append({"input_shapes": {"x": [1, 3, h, w]}})
        dims = [d.dim_param or d.dim_value for d in base.graph.input[0].type.tensor_type.shape.dim]
        roles = {
            "named": {"batch": "batch", "height": "image height", "width": "image width"},
            "neg1": {"x[0]": "batch", "x[2]": "image height", "x[3]": "image width"},
            "converter": {dims[0]: "batch", dims[2]: "image height", dims[3]: "image width"},
        }[style]
        method = (
            "formula in tests/corpus/shipped_sizes.py (det_flops): Conv 2*N*Cout*Hout*Wout*Cin*9 (no bias), ConvTranspose "
            "2*N*Cin*Hin*Win*Cout*4; their biases are separate Adds (bias_outside)"
        )
        expect = {
            "image_side": IMAGE_SIDE,
            "batch": 1,
            "layout": "NCHW",
            "roles": roles,
            "flops": [
                flops_entry(det_flops(1, h, w), {"input_shapes": {"x": [1, 3, h, w]}}, method) for h, w in DET_SIZES
            ],
        }
        _check_det_graph(model)
        tool = (
            f"paddle.jit.save (paddlepaddle {versions['paddlepaddle']}, InputSpec [None, 3, None, None]) + paddle2onnx "
            f"{versions['paddle2onnx']} export(opset_version=11, optimize_tool='None'), i.e. the CLI's --optimize_tool None"
        )
        notes = (
            "A DB-like text detector: weights, BatchNorm statistics and biases are Constant nodes, as paddle2onnx writes them "
            "without an optimizer (with onnxoptimizer/polygraphy they become initializers). The stage convs have no bias "
            "(BatchNorm follows); each ConvTranspose reads its weight through an Identity and adds its bias as Reshape + Add "
            "(bias_outside). The int64 Constants are shape constants, not weights: two [4] Reshape shapes, and two empty "
            "int64[0] (full_int_array) that no node reads."
        )
        if style == "converter":
            notes = f"Dims as the converter wrote them: input {dims}, output dims DynamicDimension.3-5. " + notes
            return Built(model, "paddle2onnx", tool, expect, runs, notes, "sz_p2o_det_named", versions)
        if style == "neg1":
            notes = (
                "sz_p2o_det with its dynamic I/O dims written dim_value: -1, as paddle2onnx <= 1.0 wrote them "
                "(Paddle2ONNX issues #269, #928, #1137); onnx.checker full_check accepts it and onnxruntime runs it. "
                + notes
            )
            return Built(
                model,
                "paddle2onnx+dims",
                tool + "; I/O dims rewritten to -1",
                expect,
                runs,
                notes,
                "sz_p2o_det_named",
                versions,
            )
        return Built(
            model,
            "paddle2onnx+dims",
            tool + "; I/O dims named batch/height/width",
            expect,
            runs,
            "The named counterpart of sz_p2o_det and sz_p2o_det_neg1 (output dims named as the input's: the "
            "detector's map is the input's size when H and W are multiples of 4). " + notes,
            None,
            versions,
        )

    return run


def _check_det_graph(model: onnx.ModelProto) -> None:
    """The FLOP formula assumes what the converter wrote: 4 Convs and 2 ConvTransposes, none with a bias input."""
    matrix = [n for n in model.graph.node if n.op_type in ("Conv", "ConvTranspose")]
    if [n.op_type for n in matrix] != ["Conv"] * len(DET_STAGES) + ["ConvTranspose"] * len(DET_UPS) or any(
        len(n.input) != 2 for n in matrix
    ):
        raise AssertionError(f"paddle2onnx wrote another graph: {[(n.op_type, len(n.input)) for n in matrix]}")


for _style in P2O_DIMS:
    job("p2o_det" if _style == "converter" else f"p2o_det_{_style}")(_p2o_job(_style))


# --- tf2onnx ----------------------------------------------------------------------------------------


def _tf(ctx: Context) -> tuple[onnx.ModelProto, dict, np.ndarray, np.ndarray]:
    if not ctx.tf_python:
        raise Skip("needs --tf-python (an interpreter with tensorflow and tf2onnx)")

    def make():
        work = ctx.work / "tf"
        spec = {"seed": SEED, "convs": IMAGE_CONVS, "pool_after": IMAGE_POOL_AFTER, "classes": IMAGE_CLASSES}
        versions = run_converter(ctx.tf_python, TF_SCRIPT, work, spec)
        return onnx.load(work / "tf2onnx_nhwc.onnx"), versions, np.load(work / "ref_x.npy"), np.load(work / "ref_y.npy")

    return ctx.once("tf", make)


def _tf_job(named: bool):
    def run(ctx: Context) -> Built:
        base, versions, ref_x, ref_y = _tf(ctx)
        model = copy.deepcopy(base)
        dims = [d.dim_param for d in base.graph.input[0].type.tensor_type.shape.dim]
        out_dims = [d.dim_param or d.dim_value for d in base.graph.output[0].type.tensor_type.shape.dim]
        if named:
            set_dims(
                model, {"image": ["batch", "height", "width", 3], base.graph.output[0].name: ["batch", IMAGE_CLASSES]}
            )
        same_outputs(ort_run(model, {"image": ref_x}), [ref_y], "tf2onnx export vs Keras")
        ort_run(model, {"image": _rand([1, IMAGE_SIDE, IMAGE_SIDE, 3])})
        runs = [
            {"input_shapes": {"image": list(ref_x.shape)}, "check": "outputs equal Keras' own"},
            {"input_shapes": {"image": [1, IMAGE_SIDE, IMAGE_SIDE, 3]}},
        ]
        roles = (
            {"batch": "batch", "height": "image height", "width": "image width"}
            if named
            else {dims[0]: "batch", dims[1]: "image height", dims[2]: "image width", out_dims[0]: "batch (output)"}
        )
        ops = [n.op_type for n in model.graph.node]
        fc_op = "MatMul" if "MatMul" in ops else "Gemm"
        fc_bias = "add" if fc_op == "MatMul" else "node"
        dims_at = {"batch": 1, "height": IMAGE_SIDE, "width": IMAGE_SIDE} if named else None
        expect = image_expect(
            "image", [1, IMAGE_SIDE, IMAGE_SIDE, 3], dims_at, roles, same=True, fc_bias=fc_bias, fc_op=fc_op
        )
        tool = (
            f"tf.keras (keras {versions['keras']}, tensorflow-cpu {versions['tensorflow-cpu']}) + tf2onnx {versions['tf2onnx']} "
            f"convert.from_keras(opset=13, input_signature (None, None, None, 3))"
        )
        notes = (
            f"The image classifier in Keras (padding 'same'; at 224 the sizes equal the torch model's), converted by tf2onnx: "
            f"input [{', '.join(dims[:3])}, 3] then a Transpose to NCHW; the Dense layer is {fc_op}"
            f"{' + Add' if fc_bias == 'add' else ''}. tf2onnx {versions['tf2onnx']} writes the weights as initializers, "
            f"not Constant nodes (checked), so this model covers dims and layout, not Constant weights. "
            f"The Squeeze axes initializer is an int64 shape constant."
        )
        if named:
            return Built(
                model,
                "tf2onnx+dims",
                tool + "; I/O dims named batch/height/width",
                expect,
                runs,
                "The named counterpart of sz_tf2onnx_nhwc. " + notes,
                None,
                versions,
            )
        return Built(model, "tf2onnx", tool, expect, runs, notes, "sz_tf2onnx_nhwc_named", versions)

    return run


job("tf2onnx_nhwc")(_tf_job(False))
job("tf2onnx_nhwc_named")(_tf_job(True))


# --- writing ----------------------------------------------------------------------------------------


def version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def io_dims(values) -> dict:
    """Each graph input/output's dims as written: ints (negative included), names, and null for an empty dim."""
    out = {}
    for v in values:
        if not v.type.HasField("tensor_type"):
            continue
        t = v.type.tensor_type
        dims = (
            None
            if not t.HasField("shape")
            else [
                d.dim_value if d.HasField("dim_value") else d.dim_param if d.HasField("dim_param") else None
                for d in t.shape.dim
            ]
        )
        out[v.name] = {"dtype": helper.tensor_dtype_to_string(t.elem_type).removeprefix("TensorProto."), "dims": dims}
    return out


def dumps(entry: dict) -> str:
    """JSON with one key per line, and each list of plain values (a shape, dims) on one line."""
    text = json.dumps(entry, indent=1)
    return re.sub(r"\[\s*([^\[\]{}]*?)\s*\]", lambda m: "[" + re.sub(r"\s*\n\s*", " ", m.group(1)) + "]", text)


def emit(name: str, built: Built, out: Path, keep_data: bool) -> dict:
    """Write ``sz_<name>.onnx`` and ``sz_<name>.json``; return the manifest."""
    model = built.model
    onnx.checker.check_model(model, full_check=True)
    census = weight_census(model)  # on the full model, before any stripping
    path = out / f"sz_{name}.onnx"
    stripped = False
    if model.ByteSize() > MAX_BYTES:
        if any(n.op_type == "Constant" and n.attribute[0].t.ByteSize() > 1024 for n in model.graph.node):
            raise ValueError(f"{name}: {model.ByteSize()} bytes with Constant-node weights: make the model smaller")
        from exporters.strip import save_stripped

        save_stripped(model, path)
        stripped = True
        if not keep_data:
            path.with_name(path.name + ".data").unlink(missing_ok=True)
    else:
        path.with_name(path.name + ".data").unlink(missing_ok=True)
        onnx.save(model, path)
    entry = {
        "schema": SCHEMA,
        "name": f"sz_{name}",
        "generator": built.generator,
        "tool": built.tool,
        "inputs": io_dims(model.graph.input),
        "outputs": io_dims(model.graph.output),
        "expect": built.expect,
        "weights": census,
        "named_counterpart": built.named_counterpart,
        "onnxruntime": {"ran": built.ran, "note": "run with the real weights before writing"},
        "nodes": len(model.graph.node),
        "opsets": {o.domain or "ai.onnx": o.version for o in model.opset_import},
        "bytes": path.stat().st_size,
        "weights_stripped": stripped,
        "versions": {**{d: version(d) for d in ("torch", "onnx", "onnxruntime")}, **built.versions},
        "notes": built.notes,
    }
    (out / f"sz_{name}.json").write_text(dumps(entry) + "\n")
    return entry


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.corpus.shipped_sizes", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="output folder (tests/corpus/shipped)")
    parser.add_argument(
        "--only", action="append", default=[], help="fnmatch pattern on model names without sz_ (repeatable)"
    )
    parser.add_argument("--list", action="store_true", help="list the model names and exit")
    parser.add_argument("--keep-data", action="store_true", help="keep the weights file of a stripped model")
    parser.add_argument(
        "--paddle-python", help="an interpreter with paddlepaddle, paddle2onnx (and packaging): makes p2o_det*"
    )
    parser.add_argument("--tf-python", help="an interpreter with tensorflow and tf2onnx: makes tf2onnx_nhwc*")
    args = parser.parse_args(argv)
    names = [n for n in JOBS if not args.only or any(fnmatch.fnmatch(n, p) for p in args.only)]
    if args.list:
        print("\n".join(f"sz_{n}" for n in names))
        return 0
    if args.out is None:
        parser.error("--out is required")
    args.out.mkdir(parents=True, exist_ok=True)
    failed = []
    with tempfile.TemporaryDirectory(prefix="shipped-sizes-") as tmp:
        ctx = Context(Path(tmp), args.paddle_python, args.tf_python)
        for name in names:
            try:
                entry = emit(name, JOBS[name](ctx), args.out, args.keep_data)
            except Skip as why:
                print(f"sz_{name}: skipped ({why}); the committed files stay as they are")
                continue
            except Exception as error:  # noqa: BLE001 - report every failure, then exit 1
                failed.append(name)
                print(f"sz_{name}: FAILED: {type(error).__name__}: {error}", file=sys.stderr)
                continue
            w = entry["weights"]
            print(
                f"sz_{name}: {entry['bytes']:,} B, {entry['nodes']} nodes, weights {w['count']} tensors / {w['bytes']:,} B"
            )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
