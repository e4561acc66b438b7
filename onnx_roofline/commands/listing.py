"""Each command's line in the top-level `--help`, here rather than in its module: listing the
commands imports none of them (gate and whatif bring onnx and numpy with their packages), and
each module's parser takes its help from this table, so the two never differ."""

from __future__ import annotations

COMMAND_HELP: dict[str, str] = {
    "check": "fail (exit 1) when a model breaks a latency, memory or regression limit",
    "verify": "run the model in onnxruntime and check the analysis node by node",
    "sweep": "re-bind dims over lists of values: latency, throughput, bound share per point",
    "critical": "solve the smallest batch (or other dim) at which each matmul kind turns compute-bound",
    "compare": "one model on several accelerators side by side",
    "fuse": "the graph as written beside its fusion plan alone, bytes and attention both ways",
    "context": "decode over context length: latency per step and the KV cache's share of bytes",
    "serve": "serving envelope of a decoder: decode latency, tokens/s, TTFT, memory per GPU, over batch sizes and tensor parallelism",
    "plot": "roofline plot of one or more saved JSON reports (`--format json`), overlaid",
    "inspect": "what a model is: inputs, outputs, symbolic dims, opsets, producer, ops, parameters, external data",
    "diff": "what changed between two saved reports (`analyze --format json`): totals, nodes, modules",
}
"""A command absent here (`calibrate`, the former name of `hw calibrate`) is not listed."""
