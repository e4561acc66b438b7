"""Groupings over a report: by op type, by module (at a chosen depth), and the top-k nodes.

A grouping partitions the nodes, so its groups' totals add up to the model's totals exactly
(FLOPs and bytes are Python ints; times are float sums of the same terms).

The module of a node, outermost scope first:
1. dynamo exports carry `pkg.torch.onnx.name_scopes` in node metadata, e.g.
   `['', 'model', 'model.transformer', 'model.transformer.h.0', 'model.transformer.h.0.attn', 'matmul_3']`:
   the root module (''), the qualified name of each module entered, then the FX node's own name;
2. otherwise the node name's path: TorchScript (and our exporters) name nodes
   `/model/transformer/h.0/attn/MatMul`. A Sequential child written `/layer2/layer2.0/conv2/Conv`
   repeats its parent's name; it is qualified once: `layer2.0.conv2`.
Both give the same scopes for a GPT-2 block: `model`, `model.transformer`, `model.transformer.h.0`,
`model.transformer.h.0.attn`; depth 3 groups per layer, depth 4 per block (attn, mlp, ln_1, ...).
One wart, kept visible: onnxscript's Conv+BatchNorm fusion gives the fused Conv the BatchNorm's
scopes (`layer1.0.bn1`, where the node name says `layer1.0.conv1`).
"""

from __future__ import annotations

import ast
import functools
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from onnx_roofline.report.costed import ok_rows
from onnx_roofline.report.totals import Totals

TYPE_CHECKING = False
if TYPE_CHECKING:
    from onnx_roofline.report.costed import CostedNode
    from onnx_roofline.report.model import NodeResult, Report

OP_TYPE, MODULE = "op_type", "module"  # the breakdown families
NAME_SCOPES = "pkg.torch.onnx.name_scopes"
NO_MODULE = ""  # the key of nodes outside any module (shown as "(top level)")
REWRITTEN = "pkg.onnxscript.rewriter.rule_name"  # set on a node onnxscript's optimizer made from others
_NOT_A_MODULE = "_empty_nn_module_stack"  # torch's placeholder scope for nodes it could not place


@dataclass(frozen=True)
class Group:
    """Nodes that share a key (an op type, a module): their summed `totals`, and the nodes."""

    key: str
    totals: Totals
    nodes: tuple[NodeResult, ...]

    def share(self, model_time: float) -> float | None:
        return self.totals.time_s / model_time if model_time else None

    def __repr__(self) -> str:
        """`<Group MatMul: 48 nodes, 1.21 GFLOP, 3.40 MB, 5.62 µs>`: a breakdown's row, not its nodes."""
        from onnx_roofline.report.units import duration, si

        t = self.totals
        return f"<Group {self.key}: {len(self.nodes)} nodes, {si(t.flops, 'FLOP')}, {si(t.bytes, 'B')}, {duration(t.time_s)}>"


def scopes(node: NodeResult) -> tuple[str, ...]:
    """The qualified module names the node sits in, outermost first; () for a top-level node."""
    graph_node = node.graph_node
    from_metadata = _metadata_scopes(node.metadata) if graph_node is not None and graph_node.has_metadata else None
    if from_metadata is not None and REWRITTEN not in node.metadata:
        return from_metadata
    own = _name_scopes(node.own_name)  # a body node: its own name, not its scope
    # a node an optimizer fused keeps one source's metadata (a Conv, its folded BatchNorm's): its name is its own
    return own if own or from_metadata is None else from_metadata


def module_path(node: NodeResult) -> str:
    """The node's innermost module, dotted (`model.transformer.h.0.attn`), or "" for none."""
    path = scopes(node)
    return path[-1] if path else NO_MODULE


def module_at(node: NodeResult, depth: int) -> str:
    """The node's module at `depth` scopes (1 = outermost); a shallower node keeps its own."""
    path = scopes(node)[: max(depth, 1)]
    return path[-1] if path else NO_MODULE


def module_of(node_name: str) -> str:
    """The dotted module path read from a node name alone (no metadata), or "" for none."""
    path = _name_scopes(node_name)
    return path[-1] if path else NO_MODULE


def in_module(path: str, module: str) -> bool:
    """Whether a module path is `module` or under it (`transformer.h.0` holds `.attn`, not `h.01`)."""
    return path == module or path.startswith(module + ".")


def _metadata_scopes(metadata: Mapping[str, str]) -> tuple[str, ...] | None:
    text = metadata.get(NAME_SCOPES)
    if text is None:
        return None
    entries = _literal_list(text)
    if entries is None:
        return None
    if not isinstance(entries, list) or not entries or not all(isinstance(e, str) for e in entries):
        return None
    if entries[0] != "":  # no root module: torch could not place the node (a runtime assert, a sym_size)
        return ()
    return tuple(e for e in entries[1:-1] if e and not e.startswith(_NOT_A_MODULE))


def _literal_list(text: str):
    """The Python list literal dynamo writes (`['', 'model', 'model.h.0']`): by json where the
    quotes allow it, ten times faster than ast.literal_eval (every node of a report asks), else
    by ast.literal_eval; None when it is not a literal."""
    if text.startswith("['") and '"' not in text and "\\" not in text:
        try:
            return json.loads(text.replace("'", '"'))
        except ValueError:
            pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None


def _name_scopes(node_name: str) -> tuple[str, ...]:
    if not node_name.startswith("/"):
        return ()
    return _folder_scopes(node_name.rsplit("/", 1)[0])


@functools.lru_cache(maxsize=4096)
def _folder_scopes(folder: str) -> tuple[str, ...]:
    """The scopes of a node name's folder (`/model/transformer/h.0/attn`): the nodes of one
    module share it, so it is worked out once per module."""
    qualified: list[str] = []
    for part in (p for p in folder.split("/")[1:] if p):
        parent = qualified[-1] if qualified else ""
        last = parent.rsplit(".", 1)[-1]
        if parent and part.startswith(last + "."):
            part = part[len(last) + 1 :]  # `layer2` then `layer2.0`: the child is `0`
        qualified.append(f"{parent}.{part}" if parent else part)
    return tuple(qualified)


def group_by(nodes: Iterable[NodeResult], key: Callable[[NodeResult], str]) -> list[Group]:
    """Groups in order of total time, heaviest first (ties by key); uncosted nodes count, never as 0."""
    members: dict[str, list[NodeResult]] = {}
    for node in nodes:
        members.setdefault(key(node), []).append(node)
    groups = [Group(k, Totals.over(v), tuple(v)) for k, v in members.items()]
    return sorted(groups, key=lambda g: (-g.totals.time_s, natural_key(g.key)))


def natural_key(text: str) -> tuple[tuple[int, int | str], ...]:
    """Sorts `h.2` before `h.10`: digit runs compare as numbers."""
    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", text) if part)


def by_op_type(report: Report) -> list[Group]:
    """The report's nodes grouped by op type, heaviest first."""
    return group_by(report.nodes, lambda n: n.op_type)


def by_module(report: Report, depth: int = 3) -> list[Group]:
    """The report's nodes grouped by module at `depth` scopes (GPT-2: 3 = layers, 4 = attn/mlp), heaviest first."""
    return group_by(report.nodes, lambda n: module_at(n, depth))


def top_nodes(report: Report, k: int) -> list[CostedNode]:
    """The k costed nodes with the largest time lower bound (ties in graph order)."""
    return sorted(ok_rows(report.nodes), key=lambda n: (-n.time_s, n.index))[: max(k, 0)]


def breakdown(report: Report, family: str, depth: int = 3) -> list[Group]:
    """The groups of one family: OP_TYPE, or MODULE at `depth`."""
    if family == MODULE:
        return by_module(report, depth)
    if family == OP_TYPE:
        return by_op_type(report)
    raise ValueError(f"unknown breakdown {family!r} (expected {OP_TYPE!r} or {MODULE!r})")


def group_label(family: str, key: str) -> str:
    return "(top level)" if family == MODULE and key == NO_MODULE else key
