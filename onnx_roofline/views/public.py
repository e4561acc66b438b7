"""The public `analyze`: the analysis (onnx_roofline.analysis) whose report plans its deployed view
when first asked, with the command line's defaults, so that `report.to_dict()` is the very object
`--format json` prints, both views (the walk sits below this wing and cannot plan it itself)."""

from __future__ import annotations

import dataclasses
import functools

from onnx_roofline import analysis
from onnx_roofline.report.model import Report
from onnx_roofline.views.deployed import INPLACE, deploy
from onnx_roofline.views.prediction import DEFAULT_LAUNCH

OTHER_VIEW_NODES = 50_000
"""Up to this many nodes every format also plans the deployed view for its summary line (about
0.1 ms a node); beyond, `--view deployed` (or `deploy(report)`) asks for it."""


def default_deployed(report: Report) -> Report | None:
    """The deployed view `--format json` shows beside a written report: the KV cache in place,
    CUDA graphs for the predicted time; None past OTHER_VIEW_NODES."""
    return deploy(report, INPLACE, launch=DEFAULT_LAUNCH) if len(report.nodes) <= OTHER_VIEW_NODES else None


@functools.wraps(analysis.analyze)
def analyze(*args, **kwargs) -> Report:
    return dataclasses.replace(analysis.analyze(*args, **kwargs), plan_deployed=default_deployed)


analyze.__module__ = __name__  # wraps took analysis's: a pickle (a process pool's) finds this function here
