"""The view of one node that a cost rule sees: typed inputs/outputs, attributes with the schema's
defaults filled in (as ONNX's reference evaluator passes them), and constant input values."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, TypeVar, cast

import numpy as np
import onnx
from onnx import helper

from onnx_roofline.model.tensors import KnownTensor, TensorInfo

TYPE_CHECKING = False
if TYPE_CHECKING:
    from onnx_roofline.costs.cost import CompositeCost  # the walk's callback returns one: a type, not an import

TENSORS, ATTRIBUTES, ANYTHING = 0, 1, 2
"""What a rule read of its node beyond the op type and opset (`OpNode.reads`): the tensors'
shapes, dtypes and names only; their attributes too; or more (the proto, a constant, a body)."""

T = TypeVar("T", bound=TensorInfo)


@functools.cache
def schema_defaults(op_type: str, domain: str, opset: int | None) -> Mapping[str, Any]:
    """Attribute defaults from the ONNX schema in force at `opset` (empty for ops ONNX doesn't define)."""
    try:
        schema = onnx.defs.get_schema(op_type, opset if opset is not None else onnx.defs.onnx_opset_version(), domain)
    except onnx.defs.SchemaError:
        return {}
    return {
        name: helper.get_attribute_value(attr.default_value)
        for name, attr in schema.attributes.items()
        if attr.default_value.type != onnx.AttributeProto.UNDEFINED
    }


def _no_walk(*args: object, **kwargs: object) -> CompositeCost:
    """`subgraph` of a node viewed outside the walk (verify's rerun of one rule): no body to cost."""
    raise TypeError("no walk to cost a body in")


class OpNode(Generic[T]):
    """One node as its cost rule sees it. `inputs`/`outputs` hold None for absent optional slots.
    `constant(name)` is a value's constant array, or None. `subgraph(body, inputs=None)` costs a
    body graph in this node's scope (control flow); raises Uncostable if any node is unknown.
    `inputs`: the body's inputs as this call site types them (TensorInfo or None, in the body's
    input order), from which its shapes are inferred.

    `reads` says what the rule read: TENSORS while it reads nothing but its tensors (shapes,
    dtypes, names) and the op type and opset; ATTRIBUTES once it reads `attrs`; ANYTHING once it
    reads the proto, a constant or a subgraph. A rule is a pure function of what it read, so a
    TENSORS result holds for every node whose tensors look alike, and an ATTRIBUTES one for every
    such node with the same attributes: the walk costs a model's repeated layers once.

    A view built for every node of the walk, not a result: a plain class with slots, which costs
    a fraction of a frozen dataclass to construct.

    Generic in what its tensors are known to be: a rule gets a KnownNode, whose present tensors all
    have concrete shapes and dtypes (the walk and the shape engine call a rule only then)."""

    __slots__ = ("_proto", "opset", "inputs", "outputs", "_constant", "_subgraph", "_attrs", "reads")

    def __init__(
        self,
        proto: onnx.NodeProto,
        opset: int | None,
        inputs: Sequence[T | None],
        outputs: Sequence[T | None],
        constant: Callable[[str], np.ndarray | None],
        subgraph: Callable[..., CompositeCost] | None = None,
    ) -> None:
        self._proto = proto
        self.opset = opset
        self.inputs = inputs
        self.outputs = outputs
        self._constant = constant
        self._subgraph = subgraph or _no_walk
        self._attrs: Mapping[str, Any] | None = None
        self.reads = TENSORS

    def __repr__(self) -> str:
        return f"OpNode(proto={self._proto!r}, opset={self.opset!r}, inputs={self.inputs!r}, outputs={self.outputs!r})"

    @property
    def op_type(self) -> str:
        return self._proto.op_type

    @property
    def domain(self) -> str:
        return self._proto.domain

    @property
    def proto(self) -> onnx.NodeProto:
        self.reads = ANYTHING
        return self._proto

    @property
    def constant(self) -> Callable[[str], np.ndarray | None]:
        self.reads = ANYTHING
        return self._constant

    @property
    def subgraph(self) -> Callable[..., CompositeCost]:
        self.reads = ANYTHING
        return self._subgraph

    @property
    def attrs(self) -> Mapping[str, Any]:
        """The node's attributes over the schema's defaults, read on first use."""
        self.reads = max(self.reads, ATTRIBUTES)
        if self._attrs is None:
            values = dict(schema_defaults(self.op_type, self.domain, self.opset))
            values.update((attr.name, helper.get_attribute_value(attr)) for attr in self._proto.attribute)
            self._attrs = values
        return self._attrs

    def input(self, index: int) -> T | None:
        """Input `index`, or None when the slot is absent or beyond the node's inputs."""
        return self.inputs[index] if index < len(self.inputs) else None

    def output(self, index: int) -> T | None:
        return self.outputs[index] if index < len(self.outputs) else None

    def operand(self, index: int) -> T:
        """Input `index`, which the op requires: `inputs[index]`, typed as present. A malformed node
        that lacks it fails its rule as it always did (an IndexError, or an AttributeError on None)."""
        return cast(T, self.inputs[index])

    @property
    def operands(self) -> Sequence[T]:
        """`inputs`, typed as all present: for an op without optional inputs (as `operand`)."""
        return cast("Sequence[T]", self.inputs)

    def result(self, index: int) -> T:
        """Output `index`, which the op always has: `outputs[index]`, typed as present (as `operand`)."""
        return cast(T, self.outputs[index])

    def input_value(self, index: int) -> np.ndarray | None:
        """The constant value feeding input `index` (initializer with inline data or Constant node), else None."""
        tensor = self.input(index)
        return None if tensor is None else self.constant(tensor.name)

    @property
    def present_inputs(self) -> list[T]:
        return [t for t in self.inputs if t is not None]

    @property
    def present_outputs(self) -> list[T]:
        return [t for t in self.outputs if t is not None]

    def distinct_input_bytes(self) -> int:
        """Bytes of every distinct input tensor, read once each (the framework default)."""
        return sum({t.name: t.nbytes for t in self.inputs if t is not None}.values())

    def output_bytes(self) -> int:
        return sum([t.nbytes for t in self.outputs if t is not None])


KnownNode = OpNode[KnownTensor]
"""The node a cost or shape rule gets: every tensor present in it known (KnownTensor)."""
