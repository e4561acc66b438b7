"""onnx-roofline: which node of an ONNX model is compute-bound and which memory-bound on a target accelerator.

    import onnx_roofline as r
    report = r.analyze("model.onnx", hw="h100", sizing=r.Sizing(dims={"batch": 1, "sequence": 1024}))
    report                      # one line: model, hardware, totals
    report.totals.time_s        # the lower bound, in seconds
    report.rows()               # one plain dict per node (report.to_dataframe() with pandas)
    r.by_module(report, depth=3), r.by_op_type(report), r.top_nodes(report, 10)
    r.inspect_model("model.onnx")  # inputs, dims, opsets, ops, parameters, external data

The public names load on first use: importing the package (as the command line does first)
loads neither onnx nor numpy, so a Ctrl-C during start-up reaches the command line's handler."""

from __future__ import annotations

import logging
import os

os.environ.setdefault(
    "ORT_DISABLE_TELEMETRY", "1"
)  # before any onnxruntime (or onnxruntime-genai) import: nothing leaves the machine

logging.getLogger(__name__).addHandler(
    logging.NullHandler()
)  # a pass's warning is the report's (and the CLI's prefixed line), not Python's last-resort print

TYPE_CHECKING = False  # typing's own constant, without importing typing at start-up
from onnx_roofline.version import __version__  # noqa: E402,F401 (the public name)

_PUBLIC = {  # name: the module that defines it
    "analyze": "onnx_roofline.views.public",  # analysis.analyze, its report planning the deployed view when asked
    "Sizing": "onnx_roofline.shapes.sizing",
    "Report": "onnx_roofline.report.model",
    "NodeResult": "onnx_roofline.report.model",
    "Totals": "onnx_roofline.report.model",
    "ModelInfo": "onnx_roofline.report.model",
    "Group": "onnx_roofline.report.breakdown",
    "breakdown": "onnx_roofline.report.breakdown",
    "by_op_type": "onnx_roofline.report.breakdown",
    "by_module": "onnx_roofline.report.breakdown",
    "top_nodes": "onnx_roofline.report.breakdown",
    "module_path": "onnx_roofline.report.breakdown",
    "json_schema": "onnx_roofline.report.schema",
    "inspect_model": "onnx_roofline.commands.inspect",
    "Inspection": "onnx_roofline.commands.inspect",
    "Hardware": "onnx_roofline.costs.hardware",
    "load_hardware": "onnx_roofline.costs.hardware",
    "list_hardware": "onnx_roofline.costs.hardware",
    "default_dims": "onnx_roofline.shapes.defaults",
    "RooflineError": "onnx_roofline.errors",
    "ModelLoadError": "onnx_roofline.errors",
    "HardwareSpecError": "onnx_roofline.errors",
    "DimensionError": "onnx_roofline.errors",
    "UnboundDimensionError": "onnx_roofline.errors",
}
__all__ = [  # _PUBLIC's names, sorted: a literal, as type checkers and linters read it
    "DimensionError",
    "Group",
    "Hardware",
    "HardwareSpecError",
    "Inspection",
    "ModelInfo",
    "ModelLoadError",
    "NodeResult",
    "Report",
    "RooflineError",
    "Sizing",
    "Totals",
    "UnboundDimensionError",
    "analyze",
    "breakdown",
    "by_module",
    "by_op_type",
    "default_dims",
    "inspect_model",
    "json_schema",
    "list_hardware",
    "load_hardware",
    "module_path",
    "top_nodes",
]

if TYPE_CHECKING:
    from onnx_roofline.commands.inspect import Inspection, inspect_model
    from onnx_roofline.costs.hardware import Hardware, list_hardware, load_hardware
    from onnx_roofline.errors import (
        DimensionError,
        HardwareSpecError,
        ModelLoadError,
        RooflineError,
        UnboundDimensionError,
    )
    from onnx_roofline.report.breakdown import Group, breakdown, by_module, by_op_type, module_path, top_nodes
    from onnx_roofline.report.model import ModelInfo, NodeResult, Report, Totals
    from onnx_roofline.report.schema import json_schema
    from onnx_roofline.shapes.defaults import default_dims
    from onnx_roofline.shapes.sizing import Sizing
    from onnx_roofline.views.public import analyze


def __getattr__(name: str):
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'onnx_roofline' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC})
