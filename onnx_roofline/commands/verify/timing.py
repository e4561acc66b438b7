"""Per-node kernel times from onnxruntime's profiler: `<node>_kernel_time` events, warm-up runs
dropped, the median over the measured runs. Optimizations off, each graph node is one kernel
(nodes are renamed `v<index>` in the timed copy, so the mapping is exact). Optimizations on
(ORT_ENABLE_EXTENDED: fusions, but not the NCHWc layout pass, which renames every value), each
kernel of the optimized graph is attributed by dataflow to the original nodes it replaced.

The session runs in a child process (run.in_child): onnxruntime crashing is a VerifyError. The
child writes its profile and optimized graph in a folder this process made and removes."""

from __future__ import annotations

import json
import os
import re
import statistics
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import onnx

from onnx_roofline.commands.verify.errors import VerifyError
from onnx_roofline.commands.verify.run import in_child, open_session, runtime_feeds, session_options

RESOLUTION_S = 1e-6  # the profiler's `dur` is in whole microseconds, truncated
_TIMED_NAME = re.compile(r"^v(\d+)$")


@dataclass(frozen=True)
class Kernel:
    name: str  # the node name in the executed graph
    op_type: str
    originals: tuple[int, ...]  # indices of the graph nodes it computes (several when fused)
    seconds: float  # median over the measured runs
    runs: int


@dataclass(frozen=True)
class Profile:
    kernels: tuple[Kernel, ...]
    runs: int
    warmup: int
    optimized: bool
    not_run: tuple[int, ...]  # original nodes no kernel computes (Constant nodes, folded constants)
    unattributed: tuple[str, ...]  # executed kernels that map to no original node


def profile(
    model: onnx.ModelProto,
    feeds: Mapping[str, np.ndarray],
    runs: int = 10,
    warmup: int = 3,
    optimize: bool = False,
    threads: int | None = None,
) -> Profile:
    """Time every kernel of `model` (weights inline) over `warmup + runs` runs of one session."""
    if runs < 1 or warmup < 0:
        raise VerifyError("timing needs --runs ≥ 1 and --warmup ≥ 0")
    timed = _indexed_copy(model)
    with tempfile.TemporaryDirectory(prefix="onnx-roofline-profile-") as folder:
        optimized = os.path.join(folder, "optimized.onnx")
        written = in_child(
            "timing the model",
            _profiled_runs,
            timed,
            feeds,
            runs + warmup,
            optimized if optimize else None,
            threads,
            folder,
        )
        with open(written) as stream:
            events = json.load(stream)
        executed = onnx.load(optimized, load_external_data=False) if optimize else timed
    per_run = _kernel_times(events)[warmup:]
    if len(per_run) != runs:
        raise VerifyError(f"the profile holds {len(per_run) + warmup} runs, expected {runs + warmup}")
    groups = attribute(timed, executed)
    ops = {node.name: node.op_type for node in executed.graph.node}
    names = sorted({name for run in per_run for name in run}, key=lambda n: min(groups.get(n) or (1 << 60,)))
    kernels = tuple(
        Kernel(
            name,
            ops.get(name, "?"),
            groups.get(name, ()),
            statistics.median(run.get(name, 0.0) for run in per_run),
            runs,
        )
        for name in names
    )
    unattributed = tuple(k.name for k in kernels if not k.originals)
    covered = {index for kernel in kernels for index in kernel.originals}
    not_run = tuple(i for i in range(len(model.graph.node)) if i not in covered)
    return Profile(kernels, runs, warmup, optimize, not_run, unattributed)


def _profiled_runs(
    model: onnx.ModelProto,
    feeds: Mapping[str, np.ndarray],
    runs: int,
    optimized: str | None,
    threads: int | None,
    folder: str,
) -> str:
    """Run `model` `runs` times in one profiled session; the profile's path (in `folder`). With
    `optimized`, graph optimizations are on and the optimized graph is written there."""
    options = session_options(optimize=optimized is not None, threads=threads)
    if optimized is not None:
        import onnxruntime as ort

        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        options.optimized_model_filepath = optimized
    options.enable_profiling = True
    options.profile_file_prefix = os.path.join(folder, "profile")
    session = open_session(model, options)
    for _ in range(runs):
        session.run(None, runtime_feeds(feeds))
    return session.end_profiling()


def _indexed_copy(model: onnx.ModelProto) -> onnx.ModelProto:
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for index, node in enumerate(copy.graph.node):
        node.name = f"v{index}"
    return copy


def _kernel_times(events: list[dict]) -> list[dict[str, float]]:
    """Seconds per kernel, one dict per run (runs delimited by the `model_run` session events)."""
    runs = sorted(
        (e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"
    )
    result: list[dict[str, float]] = [{} for _ in runs]
    for event in events:
        name = event.get("name", "")
        if event.get("cat") != "Node" or not name.endswith("_kernel_time"):
            continue
        for slot, (start, end) in enumerate(runs):
            if start <= event["ts"] <= end:
                node = name[: -len("_kernel_time")]
                result[slot][node] = result[slot].get(node, 0.0) + event["dur"] * 1e-6
                break
    return result


def attribute(original: onnx.ModelProto, executed: onnx.ModelProto) -> dict[str, tuple[int, ...]]:
    """Executed node name → the indices of the original nodes it computes.

    A kernel computes the original nodes between its inputs and its outputs: walk up from the
    producers of its outputs, stopping at any value the executed graph still has (another
    kernel's output, an input, a folded constant). Optimizations off, that is the node itself."""
    producer = {value: index for index, node in enumerate(original.graph.node) for value in node.output if value}
    nodes = original.graph.node
    named = {node.name: index for index, node in enumerate(nodes)}
    surviving = {v.name for v in executed.graph.input} | {t.name for t in executed.graph.initializer}
    surviving |= {value for node in executed.graph.node for value in node.output}
    groups: dict[str, tuple[int, ...]] = {}
    claimed: set[int] = set()
    for node in executed.graph.node:
        match = _TIMED_NAME.match(node.name)
        if match and named.get(node.name) == int(match.group(1)) and nodes[int(match.group(1))].op_type == node.op_type:
            start = [int(match.group(1))]
        else:
            start = [producer[v] for v in node.output if v in producer]
        group, stack = set(), list(start)
        while stack:
            index = stack.pop()
            if index in group or index in claimed:
                continue
            group.add(index)
            stack.extend(producer[v] for v in nodes[index].input if v in producer and v not in surviving)
        claimed |= group
        groups[node.name] = tuple(sorted(group))
    return groups
