"""The ONNX node test suite as a coverage sweep: every case analyzed, its inferred output shapes
compared with the expected outputs', every op type accounted for.

Small integer inputs (shapes, axes, indices, k, trip counts) become initializers carrying the
case's own values, as they are constants in real models; that lets shape inference see them.
Run `python -m tests.node_suite` for the figures."""

from __future__ import annotations

import functools
import warnings
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import numpy_helper

from onnx_roofline import analyze
from onnx_roofline.report.model import OK

SMALL_CONSTANT = 4096  # elements: larger integer inputs stay runtime data


@dataclass
class CaseResult:
    name: str
    ops: set[tuple[str, str]]
    error: str | None = None
    statuses: Counter = field(default_factory=Counter)
    uncosted: list[str] = field(default_factory=list)  # "op: reason"
    shape_mismatches: list[str] = field(default_factory=list)  # a known inferred shape that is wrong
    shapes_left_unknown: list[str] = field(default_factory=list)  # data-dependent outputs, reported unknown


@functools.lru_cache(maxsize=1)
def cases():
    from onnx.backend.test.loader import load_model_tests

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tuple(load_model_tests(kind="node"))


def with_constant_inputs(model: onnx.ModelProto, inputs: list) -> onnx.ModelProto:
    """A copy where small integer/bool inputs are initializers holding the case's values."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    graph = copy.graph
    initialized = {t.name for t in graph.initializer}
    feeds = [value for value in graph.input if value.name not in initialized]
    keep = []
    for value, data in zip(feeds, inputs, strict=False):
        data = (
            np.asarray(data) if isinstance(data, np.generic) else data
        )  # a scalar input (a window's size) is a numpy scalar
        if isinstance(data, np.ndarray) and data.dtype.kind in "iub" and data.size <= SMALL_CONSTANT:
            graph.initializer.append(numpy_helper.from_array(data, value.name))
        keep.append(value)
    return copy


def without_declared_shapes(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model with its outputs' shapes and its value_info cleared (types kept): what the shape
    engine must find by itself, as in a graph whose exporter declares nothing."""
    for value in model.graph.output:
        if value.type.HasField("tensor_type"):
            value.type.tensor_type.ClearField("shape")
    del model.graph.value_info[:]
    return model


def run_case(case, declared: bool = True) -> CaseResult:
    """The case analyzed and compared with its expected outputs; `declared=False`: with its graph's
    declared output shapes cleared first."""
    model = case.model
    inputs, outputs = case.data_sets[0] if case.data_sets else ([], [])
    result = CaseResult(case.name, {(n.domain or "", n.op_type) for n in model.graph.node})
    analyzed = with_constant_inputs(model, list(inputs))
    try:
        report = analyze(analyzed if declared else without_declared_shapes(analyzed), hw="h100", partial=True)
    except Exception as exc:  # the sweep's point: any exception is a finding
        result.error = f"{type(exc).__name__}: {exc}"
        return result
    result.statuses.update(n.status for n in report.nodes)
    result.uncosted = [f"{n.op_type}: {n.status}: {n.reason}" for n in report.nodes if n.status != OK]
    inferred = {t.name: t for n in report.nodes for t in n.outputs if t is not None}
    bounded = {
        t.name for n in report.nodes if n.at_most for t in n.outputs if t is not None
    }  # sizes at a bound (shapes/bounds.py)
    for value, expected in zip(model.graph.output, outputs, strict=False):
        if not isinstance(expected, np.ndarray) or value.name not in inferred:
            continue
        info = inferred[value.name]
        if not info.is_known:
            result.shapes_left_unknown.append(f"{value.name}: inferred {info.shape}, expected {list(expected.shape)}")
        elif value.name in bounded:  # the real size is at most the bound: the expected one must be
            if len(info.shape) != expected.ndim or any(
                at_most < size for at_most, size in zip(info.shape, expected.shape, strict=False)
            ):
                result.shape_mismatches.append(f"{value.name}: at most {info.shape}, expected {list(expected.shape)}")
        elif tuple(info.shape) != expected.shape:
            result.shape_mismatches.append(f"{value.name}: inferred {info.shape}, expected {list(expected.shape)}")
    return result


def sweep(declared: bool = True) -> list[CaseResult]:
    return [run_case(case, declared) for case in cases()]


def ruled_ops(results: list[CaseResult]) -> tuple[set, set]:
    """(every op type the suite uses, those with a cost rule)."""
    from onnx_roofline.costs import rules

    ops = {op for r in results for op in r.ops}
    return ops, {op for op in ops if rules.lookup(op[0], op[1], None) is not None}


def summarize(results: list[CaseResult]) -> str:
    ops, ruled = ruled_ops(results)
    lines = [
        f"cases {len(results)}; fully costed {sum(not r.error and not r.uncosted for r in results)}; "
        f"errors {sum(bool(r.error) for r in results)}; with uncosted nodes {sum(bool(r.uncosted) for r in results)}; "
        f"wrong shapes {sum(bool(r.shape_mismatches) for r in results)}; "
        f"outputs left unknown {sum(bool(r.shapes_left_unknown) for r in results)}",
        f"op types {len(ops)}; with a rule {len(ruled)}; without {len(ops - ruled)}: "
        + ", ".join(sorted(f"{d}::{o}" if d else o for d, o in ops - ruled)),
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    results = sweep()
    for r in results:
        if r.error or r.uncosted or r.shape_mismatches:
            print(r.name, r.error or "", "; ".join(r.uncosted[:2]), "; ".join(r.shape_mismatches[:2]))
    print(summarize(results))
