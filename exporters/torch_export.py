"""One torch -> ONNX path for both models: dtype cast, either exporter, post-passes, stripped save.

Both exporters get the same description of the signature (input names, which axes are symbolic
and their names, the declared output shapes), so the files they write differ only in what the
exporters themselves do.
"""

from __future__ import annotations

import inspect
import io
import logging
import sys
import warnings
from pathlib import Path

import onnx
import torch
from torch import nn

from exporters import DTYPE_NAMES, EXPORTERS
from exporters.strip import (
    name_nodes_by_module,
    relativize_stack_traces,
    save_stripped,
    set_io_shapes,
)

DTYPES = dict(zip(DTYPE_NAMES, (torch.float32, torch.float16, torch.bfloat16), strict=True))
REPO = Path(__file__).resolve().parent.parent

Shape = list[int | str]


def export_module(
    module: nn.Module,
    args: tuple[torch.Tensor, ...],
    path: str | Path,
    *,
    input_shapes: dict[str, Shape],
    output_shapes: dict[str, Shape],
    dtype: str = "fp32",
    exporter: str = "dynamo",
) -> Path:
    """Export ``module(*args)`` to ``path`` (weights in ``<path>.data``); return ``path``.

    ``input_shapes``/``output_shapes`` list every graph input/output in order, with a string
    for each symbolic axis (e.g. ``["batch", 3, 224, 224]``).  The module is cast to ``dtype``
    with ``.to()`` before export, floating inputs too, so the graph computes natively in that
    dtype (no Cast-to-fp16 wrapper around an fp32 graph).  The result must pass
    ``onnx.checker.check_model(full_check=True)``.
    """
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {sorted(DTYPES)}, not {dtype!r}")
    if exporter not in EXPORTERS:
        raise ValueError(f"exporter must be one of {EXPORTERS}, not {exporter!r}")
    module = module.to(DTYPES[dtype]).eval()
    args = tuple(a.to(DTYPES[dtype]) if a.is_floating_point() else a for a in args)
    input_names, output_names = list(input_shapes), list(output_shapes)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TracerWarnings and the TorchScript deprecation notice
        if exporter == "dynamo":
            model = _dynamo(module, args, input_names, output_names, input_shapes)
        else:
            model = _torchscript(module, args, input_names, output_names, input_shapes, output_shapes)
    set_io_shapes(model, {**input_shapes, **output_shapes})
    if exporter == "dynamo":
        name_nodes_by_module(model)
        relativize_stack_traces(model, _path_roots())
    # Strict check (types, shape inference) before writing: a mistyped graph fails here, not later.
    onnx.checker.check_model(model, full_check=True)
    return save_stripped(model, path)


def _dynamo(module, args, input_names, output_names, input_shapes) -> onnx.ModelProto:
    """``torch.onnx.export(dynamo=True)`` with one ``torch.export.Dim`` per symbolic dim name."""
    # Silence "torchvision is not installed, skipping torchvision::nms" and friends.
    logging.getLogger("torch.onnx._internal.exporter._registration").setLevel(logging.ERROR)
    dims: dict[str, torch.export.Dim] = {}  # one Dim per name: inputs sharing "batch" share it
    specs = []
    for shape in input_shapes.values():
        axes = {i: d for i, d in enumerate(shape) if isinstance(d, str)}
        specs.append({i: dims.setdefault(d, torch.export.Dim(d)) for i, d in axes.items()} or None)
    params = inspect.signature(module.forward).parameters.values()
    n_fixed = sum(p.kind != p.VAR_POSITIONAL for p in params)
    if any(p.kind == p.VAR_POSITIONAL for p in params):  # forward(x, *past): nest the varargs
        specs = [*specs[:n_fixed], tuple(specs[n_fixed:])]
    program = torch.onnx.export(
        module,
        args,
        dynamo=True,
        input_names=input_names,
        output_names=output_names,
        dynamic_shapes=tuple(specs),
        verbose=False,
    )
    return program.model_proto


def _torchscript(module, args, input_names, output_names, input_shapes, output_shapes) -> onnx.ModelProto:
    """``torch.onnx.export(dynamo=False)``: the legacy jit-trace exporter, still in torch 2.13."""
    dynamic_axes = {
        name: {i: d for i, d in enumerate(shape) if isinstance(d, str)}
        for name, shape in {**input_shapes, **output_shapes}.items()
    }
    buf = io.BytesIO()
    torch.onnx.export(
        module,
        args,
        buf,
        dynamo=False,
        input_names=input_names,
        output_names=output_names,
        dynamic_axes={k: v for k, v in dynamic_axes.items() if v},
    )
    return onnx.load_from_string(buf.getvalue())


def _path_roots() -> list[str]:
    """Prefixes to cut from stack traces: the checkout, then each sys.path entry (longest first)."""
    roots = {str(REPO) + "/"} | {p.rstrip("/") + "/" for p in sys.path if p and p.startswith("/")}
    return sorted(roots, key=len, reverse=True)
