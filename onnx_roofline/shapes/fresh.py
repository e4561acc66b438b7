"""A model loaded afresh, sized and inferred: what a retry at other sizes needs (plausible.py asks
whether the graph runs there, traced.py what a traced Reshape's gap is there), each on its own
copy, the caller's model untouched."""

from __future__ import annotations

import os

import onnx

from onnx_roofline.model.loader import LoadedModel, load_with_nodes
from onnx_roofline.model.nodes import Node
from onnx_roofline.shapes.dims import bind, input_dim_names, map_shapes
from onnx_roofline.shapes.engine import ShapeResult, infer
from onnx_roofline.shapes.input_values import bind_values
from onnx_roofline.shapes.sizing import Sizing


def inferred_at(
    model: str | os.PathLike | onnx.ModelProto | LoadedModel, sizing: Sizing
) -> tuple[onnx.ModelProto, list[Node], dict, ShapeResult]:
    """A fresh load of `model`, its values and the dims its inputs name bound as `sizing` says, and
    its shapes inferred: (proto, nodes, dim names, shapes). Raises what binding and inference raise."""
    proto, nodes = load_with_nodes(model)
    bind_values(proto, sizing.values)
    dim_names = input_dim_names(proto.graph)
    named = set(dim_names.values())
    bind(proto, {name: size for name, size in sizing.dims.items() if name in named}, sizing.input_shapes)
    return proto, nodes, dim_names, infer(proto, nodes, map_shapes(proto.graph, sizing.input_shapes), sizing)
