"""The registry of shape rules: output shapes for ops ONNX's shape inference cannot type (contrib
ops it has no schema for, ops whose ONNX inference leaves outputs unknown).

One pure function per op, registered by (domain, op_type) like the cost rules: it reads the node's
input TensorInfos, attributes and constant input values through the same OpNode view a cost rule
gets, and returns one (shape, dtype) per output (None for an output it does not type). The shape
engine (`onnx_roofline.shapes.engine`) calls `infer_node` for a node whose inputs are all known."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from typing import cast

import numpy as np
import onnx

from onnx_roofline.model.op_node import KnownNode, OpNode
from onnx_roofline.model.schemas import normalize_domain
from onnx_roofline.model.tensors import TensorInfo

log = logging.getLogger(__name__)

Shape = tuple[int, ...]


class DataDependent(Exception):
    """An output whose size no shape of the inputs tells: it is in their values (Unique's uniques, a
    tokenizer's tokens, a loop's max_length given at run time) or in an EP's compiled blob. A shape
    rule returns one in that output's place, or raises one for every output, and its message is the
    root cause's reason."""


Output = tuple[Shape, str | None] | tuple[Shape, str | None, str | None] | TensorInfo | DataDependent | None
"""(shape, dtype) (None: a dtype the rule cannot name), or (shape, value dtype, key dtype) for a map or a sequence of maps, or a sequence
of tensors' TensorInfo (tensors.py); DataDependent (why) or None for an output it does not type."""
ShapeFunction = Callable[[KnownNode], Sequence[Output]]

MS = "com.microsoft"

_SHAPES: dict[tuple[str, str], ShapeFunction] = {}
_VALUE_INPUTS: dict[tuple[str, str], tuple[int, ...]] = {}


def shape_function(
    *op_types: str, domain: str = MS, value_inputs: tuple[int, ...] = ()
) -> Callable[[ShapeFunction], ShapeFunction]:
    """Register `function` as the output-shape function of each op type; a duplicate is a bug.
    `value_inputs`: the slots whose values (not only shapes) size the outputs (Pad's pads), which
    the engine names when they are not constants."""

    def decorate(function: ShapeFunction) -> ShapeFunction:
        for op_type in op_types:
            key = (normalize_domain(domain), op_type)
            if key in _SHAPES:
                raise ValueError(f"duplicate shape function for {key}")
            _SHAPES[key] = function
            if value_inputs:
                _VALUE_INPUTS[key] = value_inputs
        return function

    return decorate


def lookup(domain: str, op_type: str) -> ShapeFunction | None:
    return _SHAPES.get((normalize_domain(domain), op_type))


def value_inputs(domain: str, op_type: str) -> tuple[int, ...]:
    """The input slots whose values the op's shape function reads (shape_function's value_inputs)."""
    return _VALUE_INPUTS.get((normalize_domain(domain), op_type), ())


def registered() -> list[tuple[str, str]]:
    return sorted(_SHAPES)


def infer_node(
    node: onnx.NodeProto,
    inputs: tuple[TensorInfo | None, ...],
    constant: Callable[[str], np.ndarray | None],
    opset: int | None = None,
    reasons: dict[str, str] | None = None,
) -> dict[str, TensorInfo]:
    """The outputs the node's shape function types, given its (fully known) inputs; empty where it
    has none or fails on a malformed node (the engine then reports the node as the root cause).
    `reasons` receives why a data-dependent output is not typed (DataDependent), by name."""
    function = lookup(node.domain, node.op_type)
    if function is None:
        return {}
    try:
        results = function(
            cast(KnownNode, OpNode(node, opset, inputs, (), constant))
        )  # the engine calls it once they are known
    except DataDependent as exc:
        results = [exc] * len(node.output)
    except (ValueError, KeyError, IndexError, TypeError, ArithmeticError, AttributeError) as exc:
        log.info("no output shape for %s %s: %s", node.op_type, node.name, exc)
        return {}
    typed: dict[str, TensorInfo] = {}
    for name, result in zip(node.output, results, strict=False):
        if isinstance(result, DataDependent) and name and reasons is not None:
            reasons[name] = str(result)
        if not name or result is None or isinstance(result, DataDependent):
            continue
        if isinstance(result, TensorInfo):  # a sequence of tensors (sequences.py), named for its output
            typed[name] = dataclasses.replace(result, name=name)
            continue
        shape = tuple(int(d) for d in result[0])
        if any(d < 0 for d in shape):
            log.info("no output shape for %s %s: negative dim in %s", node.op_type, node.name, shape)
            continue
        typed[name] = TensorInfo(name, shape, *result[1:])
    return typed
