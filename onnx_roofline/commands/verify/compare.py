"""The analysis against the runtime: every node output's observed shape and dtype against the
inferred one, and every costed node's bytes recomputed from the observed tensors.

Which byte count a node must match (its `basis`), first match wins:
  - a convention of `conventions.OBSERVERS` (views, metadata, partial reads, ...): that convention
    evaluated on the real tensors, whatever the rule computes;
  - `default` — every op of `conventions.DEFAULT_OPS` (arithmetic, matmul/conv, normalization,
    reduction, pooling, copies), any field the rule leaves to the framework, and any field of a
    rule whose docstring says "default bytes": each distinct input read once, each output written
    once, from the real tensors;
  - `rule-specific` — any other override (Resize's taps, an ML op's attribute weights): there is
    nothing independent to recompute, so the rule is re-run on the observed tensors (catching
    wrong shapes feeding it) and its claim must lie between 0 and every input (and numeric
    attribute) once. These nodes count as bounds-checked, not proven.
Control-flow nodes are not byte-checked: the run does not expose their bodies' values. A run's
string tensor counts the bytes the analysis assumed a string has (`_at_length`), at the run's shape."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

import onnx
from onnx import helper

from onnx_roofline.commands.verify.conventions import DEFAULT_OPS, OBSERVERS, attribute_bytes, distinct_bytes
from onnx_roofline.costs import rules
from onnx_roofline.model.constants import constant_array, constant_table
from onnx_roofline.model.op_node import KnownNode, OpNode
from onnx_roofline.model.schemas import opsets
from onnx_roofline.model.tensors import TensorInfo, dtype_name, sequence_of
from onnx_roofline.report.costed import is_ok
from onnx_roofline.report.model import NodeResult, Report

DEFAULT, RULE_SPECIFIC = "default", "rule-specific"
CHECKED, BOUNDS_ONLY, NOT_COSTED, NOT_OBSERVED, NOT_CHECKED = (
    "checked",
    "bounds-only",
    "not-costed",
    "not-observed",
    "not-checked",
)
UNCHECKED = frozenset({NOT_COSTED, NOT_OBSERVED})
"""The outcomes of a node the verdict counts as unchecked. NOT_CHECKED is not among them: a
control-flow node's body rows are checked as rows of their own, a call onnx cannot inline at its
outputs."""
_SAYS_DEFAULT = re.compile(r"\bdefault bytes\b", re.IGNORECASE)


@dataclass(frozen=True)
class Disagreement:
    index: int
    node: str
    op_type: str
    what: str  # "shape", "dtype", "bytes_read", "bytes_written", "rule"
    value: str | None  # the tensor, for shape/dtype
    inferred: Any
    observed: Any
    basis: str | None = None  # for bytes: what the observed figure follows
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class NodeCheck:
    index: int
    name: str
    op_type: str
    outcome: str  # checked | bounds-only | not-costed | not-observed | not-checked
    basis: tuple[str, str] | None = None  # (bytes_read basis, bytes_written basis)
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "basis": list(self.basis) if self.basis else None}


@dataclass(frozen=True)
class Comparison:
    disagreements: tuple[Disagreement, ...]
    nodes: tuple[NodeCheck, ...]
    values_checked: int  # node outputs whose inferred shape and dtype were fully known
    values_partly_inferred: tuple[str, ...]  # some dim or the dtype not inferred: checked where known
    values_unobserved: tuple[str, ...]  # the runtime gave no tensor (sequence, optional, absent)

    def count(self, outcome: str) -> int:
        return sum(1 for n in self.nodes if n.outcome == outcome)


def observed_infos(model: onnx.ModelProto, arrays: Mapping[str, Any]) -> dict[str, TensorInfo]:
    """TensorInfo of what the runtime used: initializers as declared (the run used exactly those),
    feeds (or any values) from their arrays."""
    infos = {
        t.name: TensorInfo(t.name, tuple(int(d) for d in t.dims), dtype_name(t.data_type))
        for t in model.graph.initializer
    }
    infos.update((name, observed_info(name, array)) for name, array in arrays.items())
    return infos


def observed_info(name: str, array: Any) -> TensorInfo:
    """A runtime value's shape and dtype; a sequence's (a list of arrays), its elements' as the
    analysis describes one: a dim they differ in unknown."""
    if isinstance(array, list):
        dtypes = {_dtype(element) for element in array}
        return sequence_of(
            name,
            [tuple(int(d) for d in element.shape) for element in array],
            dtypes.pop() if len(dtypes) == 1 else None,
        )
    return TensorInfo(name, tuple(int(d) for d in array.shape), _dtype(array))


def compare(
    report: Report, model: onnx.ModelProto, observed: Mapping[str, TensorInfo], folded: Mapping[str, Any] | None = None
) -> Comparison:
    """`model` is the graph the report analyzed (as loaded, weights need not be present); `folded`
    the values the shapes pass folded (its `ShapeResult.folded`), so that re-run rules see the same
    constants the analysis gave them."""
    found: list[Disagreement] = []
    partly, unobserved, checked = [], [], 0
    for node in report.nodes:
        for tensor in node.outputs:
            if tensor is None:
                continue
            seen = observed.get(tensor.name)
            if seen is None:
                unobserved.append(tensor.name)
                continue
            issues, complete = _compare_tensor(node, tensor, seen)
            found.extend(issues)
            checked += complete
            if not complete:
                partly.append(tensor.name)
    byte_check = _ByteCheck(model, folded or {})
    checks = []
    for node in report.nodes:
        check, issues = byte_check.node(node, observed)
        checks.append(check)
        found.extend(issues)
    return Comparison(tuple(found), tuple(checks), checked, tuple(partly), tuple(unobserved))


def _compare_tensor(node: NodeResult, inferred: TensorInfo, seen: TensorInfo) -> tuple[list[Disagreement], bool]:
    """Disagreements on one value, and whether the inference was complete (every dim and the dtype)."""
    issues = []
    where: dict[str, Any] = dict(index=node.index, node=node.name, op_type=node.op_type, value=inferred.name)
    complete = inferred.is_known
    if inferred.sequence != seen.sequence:
        issues.append(Disagreement(**where, what="dtype", inferred=_kind(inferred), observed=_kind(seen)))
    elif inferred.is_known and inferred.elements != seen.elements:
        issues.append(Disagreement(**where, what="shape", inferred=_elements(inferred), observed=_elements(seen)))
    elif inferred.shape is not None and seen.shape is not None:
        wrong_rank = len(inferred.shape) != len(seen.shape)
        if wrong_rank or any(isinstance(d, int) and d != o for d, o in zip(inferred.shape, seen.shape, strict=False)):
            issues.append(Disagreement(**where, what="shape", inferred=list(inferred.shape), observed=list(seen.shape)))
    if (
        inferred.dtype is not None and inferred.dtype != seen.dtype and not (seen.sequence and not seen.elements)
    ):  # an empty sequence shows none
        issues.append(Disagreement(**where, what="dtype", inferred=inferred.dtype, observed=seen.dtype))
    return issues, complete


def _kind(tensor: TensorInfo) -> str:
    return f"sequence of {tensor.dtype}" if tensor.sequence else str(tensor.dtype)


def _elements(tensor: TensorInfo) -> list:
    return tensor.to_dict()["elements"] or []


class _ByteCheck:
    """Recomputes one node's bytes from the observed tensors under the convention its op follows."""

    def __init__(self, model: onnx.ModelProto, folded: Mapping[str, Any]):
        self.graph = model.graph
        self.opsets = opsets(model)
        self.constants = {**folded, **constant_table(model.graph)}  # as analysis._Walk has them

    def constant(self, name: str):
        source = self.constants.get(name)
        return None if source is None else constant_array(source)

    def node(self, node: NodeResult, observed: Mapping[str, TensorInfo]) -> tuple[NodeCheck, list[Disagreement]]:
        base: dict[str, Any] = dict(index=node.index, name=node.name, op_type=node.op_type)
        if not is_ok(node):
            return NodeCheck(**base, outcome=NOT_COSTED, reason=node.reason or node.status), []
        inputs = [None if t is None else _at_length(observed.get(t.name), t) for t in node.inputs]
        outputs = [None if t is None else _at_length(observed.get(t.name), t) for t in node.outputs]
        missing = [
            t.name
            for t, o in zip((*node.inputs, *node.outputs), (*inputs, *outputs), strict=False)
            if t is not None and o is None
        ]
        if missing:
            return NodeCheck(**base, outcome=NOT_OBSERVED, reason=f"no runtime tensor for {missing[0]!r}"), []
        where: dict[str, Any] = dict(index=node.index, node=node.name, op_type=node.op_type, value=None)
        proto = cast(onnx.NodeProto, node.proto)  # a costed row keeps its graph's node
        if any(attr.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for attr in proto.attribute):
            return NodeCheck(
                **base,
                outcome=NOT_CHECKED,
                reason="control flow: its body's nodes are rows of their own, checked where the run exposes them",
            ), []
        rule = rules.lookup(node.domain, node.op_type, self.opsets.get(node.domain))
        if rule is None:  # a model-local function's call, costed by its body
            return NodeCheck(
                **base, outcome=NOT_CHECKED, reason="a function call: the values inside it are not exposed by the run"
            ), []
        try:
            rerun = rule.formula(
                cast(KnownNode, OpNode(proto, self.opsets.get(node.domain), inputs, outputs, self.constant))
            )  # a run's tensors are known
        except Exception as exc:  # a rule that fails on the real shapes is itself a finding
            issue = Disagreement(
                **where, what="rule", inferred="costed", observed=f"rule fails on the observed tensors: {exc}"
            )
            return NodeCheck(**base, outcome=CHECKED, basis=None), [issue]
        default = (distinct_bytes(inputs), sum(t.nbytes for t in outputs if t is not None))
        ceiling = (default[0] + attribute_bytes(proto), default[1])
        claims = (
            node.cost.bytes_read // node.trips,
            node.cost.bytes_written // node.trips,
        )  # a body row's figures are over its trips
        bases, issues = [], []
        for slot, field in enumerate(("bytes_read", "bytes_written")):
            basis, expected = _expected(
                node, rule.doc, (rerun.bytes_read, rerun.bytes_written)[slot], slot, inputs, outputs, default
            )
            bases.append(basis)
            if basis == RULE_SPECIFIC and not 0 <= claims[slot] <= ceiling[slot]:
                issues.append(
                    Disagreement(
                        **where,
                        what=field,
                        inferred=claims[slot],
                        observed=ceiling[slot],
                        basis=basis,
                        note="outside [0, every input/output once]",
                    )
                )
            elif claims[slot] != expected:
                issues.append(Disagreement(**where, what=field, inferred=claims[slot], observed=expected, basis=basis))
        outcome = BOUNDS_ONLY if RULE_SPECIFIC in bases else CHECKED
        return NodeCheck(**base, outcome=outcome, basis=(bases[0], bases[1])), issues


def _at_length(seen: TensorInfo | None, inferred: TensorInfo) -> TensorInfo | None:
    """A run's string tensor at the length the analysis counted its strings at: that length is an
    assumption (shapes/texts.py), so the bytes are checked at the run's shapes and the assumed
    length, as a data-dependent size is checked at the run's."""
    if seen is None or seen.dtype != "string" or inferred.string_bytes is None:
        return seen
    return dataclasses.replace(seen, string_bytes=inferred.string_bytes)


def _expected(
    node: NodeResult, doc: str, recomputed: int | None, slot: int, inputs, outputs, default: tuple[int, int]
) -> tuple[str, int]:
    """(basis, the byte count field `slot` must have: 0 read, 1 written), first match wins (module doc).
    `recomputed` is the rule's own figure on the observed tensors (None: left to the framework)."""
    standard = node.domain == ""
    if standard and node.op_type in OBSERVERS:
        name, observer = OBSERVERS[node.op_type]
        value = observer(inputs, outputs)[slot]
        return f"convention: {name}", default[slot] if value is None else value
    if (standard and node.op_type in DEFAULT_OPS) or recomputed is None:
        return DEFAULT, default[slot]
    if _SAYS_DEFAULT.search(doc):
        return f"{DEFAULT} (docstring)", default[slot]
    return RULE_SPECIFIC, recomputed


def _dtype(array: Any) -> str | None:
    if array.dtype == object:
        return "string"
    try:
        return dtype_name(helper.np_dtype_to_tensor_dtype(array.dtype))
    except (KeyError, TypeError, ValueError):
        return None
