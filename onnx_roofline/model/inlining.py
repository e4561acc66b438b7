"""Model-local functions inlined at their call sites, with the attribute defaults a function
declares (`FunctionProto.attribute_proto`, IR 10: onnxscript's `def f(x, eps: float = 1e-5)`
called as `f(x)`) given to the calls that leave them out: onnx.inliner (onnx 1.23) drops them, and
a body node reading the attribute (`Constant(value_float=@eps)`) would come out with no value —
uncostable for the analysis, a model onnxruntime refuses for verify.

The inliner runs no operator's code (it renames and copies nodes; onnx refuses a recursive
function, and so does validation.py before it): it runs in a child process only where
ONNX_ROOFLINE_ISOLATION=all asks for every C++ pass to (isolation.py)."""

from __future__ import annotations

import onnx
import onnx.inliner

from onnx_roofline.model.isolation import isolated


def inline_functions(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model with every call of a local function inlined (the caller's model is not changed).
    Raises what onnx.inliner raises (PassCrashed where it crashed in a child process)."""
    defaults = {(f.domain, f.name): f.attribute_proto for f in model.functions if f.attribute_proto}
    if defaults:
        copy = onnx.ModelProto()
        copy.CopyFrom(model)
        _give_defaults(copy.graph.node, defaults)
        for function in copy.functions:
            _give_defaults(function.node, defaults)
        model = copy
    return isolated("ONNX's function inliner", onnx.inliner.inline_local_functions, model, risky=False)


def _give_defaults(nodes, defaults: dict[tuple[str, str], list[onnx.AttributeProto]]) -> None:
    """Each call among `nodes` (and in their bodies) gets the defaults of the attributes it does not set."""
    for node in nodes:
        declared = defaults.get((node.domain, node.op_type))
        if declared:
            present = {attribute.name for attribute in node.attribute}
            node.attribute.extend(default for default in declared if default.name not in present)
        for attribute in node.attribute:
            for body in [attribute.g] if attribute.type == onnx.AttributeProto.GRAPH else attribute.graphs:
                _give_defaults(body.node, defaults)
