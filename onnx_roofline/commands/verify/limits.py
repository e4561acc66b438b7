"""The limits `verify` runs a model under by default: a module without numpy or onnx, so that the
command line shows them in --help without loading the checker."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Budget:
    max_flops: int = 10**12  # a few seconds to a minute of one CPU core
    max_memory: int = 4 * 2**30  # weights, feeds and activations, as budget.check counts what a run holds
    max_node_runs: int = 10**7  # kernel launches, a Loop's body counted once per trip


DEFAULT_BUDGET = Budget()  # frozen: one value every call may share
