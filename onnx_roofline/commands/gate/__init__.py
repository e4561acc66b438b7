"""The CI gate: check a report against a policy and a baseline, and say what failed and why.

`policy` reads the limits, `baseline` a saved report, `evaluate` judges (pure), `render` writes
the outputs, `command` is `onnx-roofline check`.
"""

from onnx_roofline.commands.gate.evaluate import evaluate
from onnx_roofline.commands.gate.policy import Budget, Policy, PolicyError, load_policy, parse_policy

__all__ = ["Budget", "Policy", "PolicyError", "evaluate", "load_policy", "parse_policy"]
