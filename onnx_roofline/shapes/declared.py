"""Whether the shapes the engine inferred at the bound dims contradict what the file declares of
its values: the half of onnx's full check the bound graph no longer holds, since binding drops
those declarations (dims.bind). The analysis runs ONNX's checked inference once, as the engine's
first pass, instead of once more for the conformance check; where the two disagree, the file is
checked whole as before (analysis.bind_and_infer)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import onnx

from onnx_roofline.model.tensors import TensorInfo, dtype_name
from onnx_roofline.shapes.engine import declared_value


@dataclass(frozen=True)
class Declarations:
    """What a graph declares, before binding drops it: its outputs' types, and of its intermediate
    values (value_info) the element types alone — the shape a value_info declares is no finding of
    onnx's full check as conformance runs it (onnxruntime keeps the shape it infers:
    conformance._REWORKED)."""

    outputs: tuple[TensorInfo, ...]
    element_types: Mapping[str, int]  # value_info name → TensorProto element type (0: not said)

    @staticmethod
    def of(graph: onnx.GraphProto) -> Declarations:
        outputs = tuple(info for value in graph.output if (info := declared_value(value)) is not None)
        types = {value.name: value.type.tensor_type.elem_type for value in graph.value_info}  # 0 where not a tensor
        return Declarations(outputs, types)

    def disagreement(self, inferred: Mapping[str, TensorInfo]) -> str | None:
        """The first declared value the inferred one contradicts — an output's element type, rank or
        fixed dim (a declared symbol agrees with any size), an intermediate value's element type —
        or None."""
        for name, code in self.element_types.items():
            found = inferred.get(name)
            if code and found is not None and not found.sequence and found.dtype and found.dtype != dtype_name(code):
                return name
        for said in self.outputs:
            found = inferred.get(said.name)
            if found is None or said.sequence or found.sequence:
                continue
            if said.dtype and found.dtype and said.dtype != found.dtype:
                return said.name
            if (
                said.shape is not None
                and found.shape is not None
                and (
                    len(said.shape) != len(found.shape)
                    or any(
                        isinstance(a, int) and isinstance(b, int) and a != b
                        for a, b in zip(said.shape, found.shape, strict=True)
                    )
                )
            ):
                return said.name
        return None
