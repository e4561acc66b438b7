"""The report: per-node results and model totals, and its JSON form (schema_version 1, DESIGN.md)."""

from __future__ import annotations

import functools
import shlex
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import onnx

from onnx_roofline.costs.cost import CompositeCost, Cost
from onnx_roofline.costs.hardware import Hardware
from onnx_roofline.costs.prediction import Prediction
from onnx_roofline.costs.roofline import UNKNOWN, Placement
from onnx_roofline.costs.rules.registry import MATRIX
from onnx_roofline.model.conformance import Invalid
from onnx_roofline.model.nodes import Node
from onnx_roofline.model.status import DATA_DEPENDENT, OK, RULE_ERROR, UNKNOWN_SHAPE, UNSUPPORTED  # noqa: F401 (the statuses, re-exported)
from onnx_roofline.model.tensors import TensorInfo
from onnx_roofline.model.text import as_text
from onnx_roofline.model.weights import Weight
from onnx_roofline.records import record
from onnx_roofline.report.experts import ExpertsSummary
from onnx_roofline.report.findings import DEPLOYED, WRITTEN, foldable, headline, held_memory, view_summary  # noqa: F401 (the views, re-exported)
from onnx_roofline.report.totals import Totals
from onnx_roofline.shapes.bounds import Bound
from onnx_roofline.shapes.durations import Regulated
from onnx_roofline.shapes.plausible import Implausible
from onnx_roofline.shapes.roles import DimDefault
from onnx_roofline.shapes.root_cause import RootCause
from onnx_roofline.shapes.texts import StringBytes

SCHEMA_VERSION = 1


@record
class NodeResult:
    """One node's result: its tensors, status (and reason where not "ok"), cost (FLOPs,
    transcendentals, bytes), the unit and dtype whose peak applies, and its placement on the
    roofline (intensity, ridge, bound, time). Unknown is None, never 0."""

    index: int
    name: str
    op_type: str
    domain: str
    inputs: tuple[TensorInfo | None, ...]
    outputs: tuple[TensorInfo | None, ...]
    status: str
    reason: str | None = None
    cost: Cost | None = None
    parameters: int | None = None  # elements of the weights (initializers) the node reads
    unit: str | None = None
    dtype: str | None = None  # dtype class whose peak applies (fp16, int8, ...)
    peak: float | None = None
    placement: Placement | None = None
    graph_node: Node | None = field(
        default=None, repr=False, compare=False
    )  # the graph's node (its proto, fetched on use)
    constant_foldable: bool = False
    """Every input is a weight, a constant or the output of another such node: a runtime computes
    it once at load (onnxruntime's constant folding), so it costs 0 in the deployed view."""
    scope: str = ""
    """Where a body node lives: the control-flow node and body above it (`If_0/then_branch`,
    nested: `loop/body/if/else_branch`); "" in the main graph. Its `name` is `scope/own name`."""
    trips: int = 1
    """How many times the node runs per run of the model (a Loop's or Scan's trip count, nested
    ones multiplied): its cost and time are the totals over all of them."""
    at_most: bool = False
    """Its sizes rest on a bound the graph fixes for a data-dependent size (shapes/bounds.py): its
    figures are at most what a run costs."""

    def __repr__(self) -> str:
        """One line: index, name, op and figures (not the tensors and graph node it holds)."""
        from onnx_roofline.report.rows import node_repr

        return node_repr(self)

    @property
    def own_name(self) -> str:
        """The node's name in its own graph, without its scope."""
        return self.name[len(self.scope) + 1 :] if self.scope else self.name

    @property
    def proto(self) -> onnx.NodeProto | None:
        return None if self.graph_node is None else self.graph_node.proto

    @property
    def metadata(self) -> Mapping[str, str]:
        """The node's metadata_props as exported (dynamo's pkg.torch.onnx.name_scopes, ...); not in
        JSON. Read on demand: dynamo exports carry stack traces that the analysis itself never needs."""
        if self.graph_node is None or not self.graph_node.has_metadata:
            return {}
        return {as_text(entry.key): as_text(entry.value) for entry in self.graph_node.proto.metadata_props}

    @property
    def bound(self) -> str:
        return self.placement.bound if self.placement else UNKNOWN

    @property
    def time_s(self) -> float | None:
        return self.placement.time_s if self.placement else None

    @property
    def matrix_flops(self) -> int:
        """FLOPs on the matrix unit: all of them for a matrix op, a body's share for a Loop or If."""
        if isinstance(self.cost, CompositeCost):
            return self.cost.matrix_flops
        return self.cost.flops if self.cost is not None and self.unit == MATRIX else 0

    def to_dict(self) -> dict[str, Any]:
        return {**self.head(), **self.figures()}

    def head(self) -> dict[str, Any]:
        """to_dict's first keys: what the node is, and its tensors."""
        return {
            "index": self.index,
            "name": self.name,
            "op_type": self.op_type,
            "domain": self.domain,
            "scope": self.scope,
            "trips": self.trips,
            "inputs": [None if t is None else t.to_dict() for t in self.inputs],
            "outputs": [None if t is None else t.to_dict() for t in self.outputs],
        }

    @property
    def figures_key(self) -> tuple:
        """What `figures` reads: nodes with equal keys have equal figures. The cost and placement
        count by identity, as the walk gives the nodes it costed alike the same two records (the
        JSON renderer writes the figures of each key once, keeping its records alive)."""
        return (id(self.cost), id(self.placement), self.parameters, self.unit, self.dtype, self.peak, self.status, self.reason,
                self.constant_foldable, self.at_most)  # fmt: skip

    def figures(self) -> dict[str, Any]:
        """to_dict's other keys: the cost, the roofline placement, the status."""
        # Each object tested once rather than per figure: this runs for every node of the report.
        cost, place = self.cost, self.placement
        flops = useful = transcendentals = dequantize = bytes_read = bytes_written = total_bytes = None
        if cost is not None:
            flops, useful, transcendentals, dequantize = (
                cost.flops,
                cost.useful,
                cost.transcendentals,
                cost.dequantize_flops,
            )
            bytes_read, bytes_written, total_bytes = cost.bytes_read, cost.bytes_written, cost.bytes
        intensity = ridge = time_s = compute_time_s = memory_time_s = None
        bound = UNKNOWN
        if place is not None:
            intensity, ridge, bound = place.intensity, place.ridge, place.bound
            time_s, compute_time_s, memory_time_s = place.time_s, place.compute_time_s, place.memory_time_s
        return {
            "flops": flops,
            "useful_flops": useful,
            "transcendentals": transcendentals,
            "dequantize_flops": dequantize,
            "bytes_read": bytes_read,
            "bytes_written": bytes_written,
            "bytes": total_bytes,
            "parameters": self.parameters,
            "intensity": intensity,
            "unit": self.unit,
            "dtype": self.dtype,
            "peak": self.peak,
            "ridge": ridge,
            "bound": bound,
            "time_s": time_s,
            "compute_time_s": compute_time_s,
            "memory_time_s": memory_time_s,
            "status": self.status,
            "reason": self.reason,
            "constant_foldable": self.constant_foldable,
            "at_most": self.at_most,
        }


@dataclass(frozen=True)
class Assumed:
    """A size the analysis was told to assume because it is data (selection.py): the share of its
    candidates every NonZero and Compress selects, and the nodes it sized. The figures downstream
    of them are estimates under that assumption."""

    nonzero_fraction: float
    nodes: tuple[str, ...]

    @property
    def message(self) -> str:
        """One line: what was assumed, of how many nodes."""
        count = len(self.nodes)
        sized = f"{count} node{'s' if count != 1 else ''} sized by it" if count else "no node needed it"
        return f"NonZero/Compress select {self.nonzero_fraction:.4g} of their candidates (--nonzero-fraction): {sized}, the figures downstream are estimates"

    def to_dict(self) -> dict[str, Any]:
        return {"nonzero_fraction": self.nonzero_fraction, "nodes": list(self.nodes)}


@dataclass(frozen=True)
class Branch:
    """An If whose branch the analysis chose: which, and why. Where nothing says which (`other`
    set), both were analyzed: the heavier is counted, and `other` holds the totals of the one not
    counted, whose rows are not in the report."""

    node: str
    taken: str  # "then_branch" or "else_branch"
    why: str
    inputs: tuple[str, ...]  # the graph inputs its condition rests on
    other: Totals | None = None
    implied: tuple[str, int] | None = (
        None  # a default's: the graph input value it stands for (a run fed it takes this branch)
    )
    reads: frozenset[str] = field(default=frozenset(), repr=False, compare=False)
    """The names the branch not counted reads from outside it: weights held for it alone."""

    @property
    def not_taken(self) -> str:
        """Where the branch not counted lives (the scope its rows would have)."""
        return f"{self.node}/{'else_branch' if self.taken == 'then_branch' else 'then_branch'}"

    @property
    def message(self) -> str:
        line = f"{self.node}: {self.taken} ({self.why})"
        if self.other is not None:
            line += f"; the other branch, not counted: {self.other.flops:,} FLOPs, {self.other.time_s * 1e6:.2f} µs"
        return line

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "taken": self.taken,
            "why": self.why,
            "inputs": list(self.inputs),
            "other_branch": None if self.other is None else self.other.to_dict(),
        }


@dataclass(frozen=True)
class ModelInfo:
    """What the report says of the model: path, node count, opsets, the dims bound (and which
    took a default), the precision override, parameters, the shape passes that ran."""

    path: str | None
    node_count: int
    opsets: dict[str, int]
    dims: dict[str, int]
    precision: str | None  # the --dtype override, when the graph is costed in another precision
    parameters: int  # elements of every weight, each once: initializers and Constant-node tensors, bodies' too (model/weights.py)
    shape_inference: str
    shape_root_cause: RootCause | None = None  # why shapes stayed unknown, where they did
    shape_warnings: tuple[str, ...] = ()  # shape passes that failed
    graph_inputs: tuple[str, ...] = field(default=(), repr=False, compare=False)  # not initializers
    graph_outputs: tuple[str, ...] = field(default=(), repr=False, compare=False)
    weights: frozenset[str] = field(
        default=frozenset(), repr=False, compare=False
    )  # initializer names (--value ones excepted)
    defaulted_dims: tuple[
        str, ...
    ] = ()  # the dims in `dims` bound to a default (onnx_roofline.shapes.defaults), not by the caller
    solved_dims: Mapping[str, str] = field(
        default_factory=dict
    )  # defaulted dims the graph fixes (runnable.py), and what fixes each
    dim_roles: Mapping[str, DimDefault] = field(
        default_factory=dict
    )  # each defaulted dim's size, role and source (shapes/roles.py)
    implausible: tuple[
        Implausible, ...
    ] = ()  # a node the defaults cannot run, and the sizes that fix it (shapes/plausible.py)
    invalid: tuple[
        Invalid, ...
    ] = ()  # why a runtime would refuse the file (model/conformance.py): flagged, `check` fails
    weight_tensors: tuple[Weight, ...] = field(
        default=(), repr=False, compare=False
    )  # every weight (model/weights.py), bodies' too
    assumed: Assumed | None = None  # a data-dependent size assumed (--nonzero-fraction), and the nodes it sized
    bounds: tuple[Bound, ...] = ()  # the data-dependent sizes costed at the bound the graph fixes (shapes/bounds.py)
    regulated: Regulated | None = (
        None  # the frames per token a length regulator's durations were assumed (shapes/durations.py)
    )
    experts: ExpertsSummary | None = (
        None  # the MoE layers, parameters total and active, the routing load (report/experts.py)
    )
    strings: StringBytes | None = None  # the bytes a string was counted at, where there are any (shapes/texts.py)
    branches: tuple[Branch, ...] = ()  # the If branches taken, and why (control flow)
    body_outputs: tuple[tuple[str, str], ...] = field(
        default=(), repr=False, compare=False
    )  # (body output, the node output it is): one buffer
    source: onnx.ModelProto | None = field(default=None, repr=False, compare=False)
    """The model as loaded (no weight bytes; its nodes' protos keep it alive anyway): what a command
    reads of it later, as Report.data_files."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "node_count": self.node_count,
            "opsets": dict(sorted(self.opsets.items())),
            "dims": dict(sorted(self.dims.items())),
            "defaulted_dims": sorted(self.defaulted_dims),
            "solved_dims": dict(sorted(self.solved_dims.items())),
            "dim_roles": {name: self.dim_roles[name].to_dict() for name in sorted(self.dim_roles)},
            "implausible": [flag.to_dict() for flag in self.implausible],
            "invalid": [flag.to_dict() for flag in self.invalid],
            "precision": self.precision,
            "parameters": self.parameters,
            "shape_inference": self.shape_inference,
            "shape_warnings": list(self.shape_warnings),
            "assumed": None if self.assumed is None else self.assumed.to_dict(),
            "bounds": [bound.to_dict() for bound in self.bounds],
            "frames": None if self.regulated is None else self.regulated.to_dict(),
            "strings": None if self.strings is None else self.strings.to_dict(),
            "experts": None if self.experts is None else self.experts.to_dict(),
            "branches": [branch.to_dict() for branch in self.branches],
        }


@dataclass(frozen=True)
class Report:
    """The analysis of one model. As written (`view` "written", the default), `nodes` are the
    graph's nodes; deployed (onnx_roofline.deployed), they are the kernels a runtime would run, in
    execution order, each naming the graph nodes it covers (`members`), and `written` is the report
    they were made from."""

    model: ModelInfo
    hardware: Hardware
    nodes: tuple[NodeResult, ...]
    view: str = WRITTEN
    kv_cache: str | None = None  # deployed: "copy" or "inplace"; None without a KV cache
    written: Report | None = field(default=None, repr=False, compare=False)
    members: tuple[tuple[int, ...], ...] = field(default=(), repr=False, compare=False)  # deployed: per kernel
    notes: tuple[str, ...] = field(default=(), compare=False)  # deployed: the assumptions taken
    prediction: Prediction | None = field(
        default=None, repr=False, compare=False
    )  # deployed: the predicted run (views/prediction.py)
    plan_deployed: Callable[[Report], Report | None] | None = field(default=None, repr=False, compare=False)
    """Written: how the deployed view is planned, with --format json's defaults (views/public.py,
    which the public `analyze` attaches); None where the caller plans it (the command line)."""

    @functools.cached_property
    def other(self) -> Report | None:
        """The other view, as every format shows it beside this one: deployed, the written report
        it was made from; written, the deployed view `plan_deployed` makes (planned once, when first asked)."""
        if self.view == DEPLOYED:
            return self.written
        return self.plan_deployed(self) if self.plan_deployed is not None else None

    @functools.cached_property
    def totals(self) -> Totals:
        """Computed once: every renderer asks (the report is immutable)."""
        return Totals.over(self.nodes)

    @functools.cached_property
    def data_files(self) -> tuple[str, ...]:
        """The external-data locations the model names, as written: what an output must not
        replace. Found when first asked (reading a TorchScript export's thousand Constants costs
        more than a command that writes no file should pay)."""
        from onnx_roofline.model.files import data_locations

        source = self.model.source
        rows = (self.written or self).nodes
        return (
            ()
            if source is None
            else data_locations(source, [row.graph_node for row in rows if not row.scope and row.graph_node])
        )

    @functools.cached_property
    def uncosted(self) -> Uncosted:
        return Uncosted.of(self)

    def advice_when_nothing_costed(self) -> str:
        """What to do when no node could be costed: bind the symbolic dims graph inputs still carry
        (a partial analysis), or else see the root cause of what is uncosted."""
        inputs = set(self.model.graph_inputs)
        unbound = sorted({d for n in self.nodes for t in n.inputs if t is not None and t.name in inputs and t.shape
                          for d in t.shape if isinstance(d, str)})  # fmt: skip
        if unbound:
            return f"bind the dims ({', '.join('--dim ' + shlex.quote(d + '=N') for d in unbound)}), or drop --partial to take the defaults"
        return "see why in the uncosted nodes' root cause"

    @property
    def node_rows(self) -> int:
        """The graph's nodes as the written table lists them: the main graph's and those of the
        bodies walked (a merged decoder's If and the 625 nodes of its branch taken), whatever the
        view: the one node count of the header, the table and the JSON's `model.node_count`."""
        return len((self.written if self.view == DEPLOYED and self.written is not None else self).nodes)

    @property
    def kernels(self) -> int:
        """Kernels launched per run: deployed, each kernel's `launches`; as written, every node but
        the pure views (Reshape, Squeeze, … move nothing and launch nothing)."""
        from onnx_roofline.costs.memory import VIEW_OPS

        return sum([getattr(n, "launches", 0 if n.op_type in VIEW_OPS else 1) for n in self.nodes])

    @functools.cached_property
    def launches(self) -> Launches | None:
        """The launch floor beside the bound, where the hardware gives a per-kernel overhead."""
        return Launches.of(self)

    @functools.cached_property
    def memory(self):
        """Weights, KV cache and peak activations, and whether they fit (onnx_roofline.costs.memory)."""
        from onnx_roofline.costs.memory import footprint

        return footprint(self, kv_inplace=self.kv_cache == "inplace")

    def __repr__(self) -> str:
        """One line: the model, the hardware, the view and the totals (not the nodes)."""
        from onnx_roofline.report.rows import report_repr

        return report_repr(self)

    def rows(self) -> list[dict[str, Any]]:
        """One plain dict per node (onnx_roofline.report.rows.ROW_KEYS): name, op_type, module,
        flops, bytes, intensity, bound, time_s, time_share, ...; None where a node is not costed."""
        from onnx_roofline.report.rows import rows

        return rows(self)

    def to_dataframe(self):
        """`rows()` as a pandas DataFrame indexed by node index (pandas is optional, not a dependency)."""
        from onnx_roofline.report.rows import to_dataframe

        return to_dataframe(self)

    def breakdown(self, by: str = "op_type", depth: int = 3) -> list:
        """Groups of nodes by "op_type" or "module" (at `depth` scopes), heaviest first: each a
        `Group` with `key`, `totals` and `nodes` (onnx_roofline.report.breakdown)."""
        from onnx_roofline.report.breakdown import breakdown

        return breakdown(self, by, depth)

    @property
    def unsupported(self) -> dict[str, int]:
        """Nodes whose cost is unknown, by op type (never counted as zero in the totals)."""
        return dict(sorted(Counter(n.op_type for n in self.nodes if n.status != OK).items()))

    @property
    def status_counts(self) -> dict[str, int]:
        return dict(sorted(Counter(n.status for n in self.nodes).items()))

    def to_dict(self) -> dict[str, Any]:
        """The report's JSON object (schema_version 1, docs/json-schema.md): what --format json prints,
        both views (`other`) where the report knows its other view."""
        return self.to_dict_with(list(self.node_dicts()), self.other)

    def node_dicts(self) -> Iterator[dict[str, Any]]:
        """Each node's JSON object in order (a deployed kernel's with its `members`): the "nodes"
        of to_dict, one at a time, so that a renderer can stream a large report."""
        model_time, bandwidth = self.totals.time_s, self.hardware.memory_bandwidth
        for index, node in enumerate(self.nodes):
            yield self.node_dict(index, node, model_time, bandwidth)

    def node_dict(self, index: int, node: NodeResult, model_time: float, bandwidth: float) -> dict[str, Any]:
        """One of node_dicts: the node's own, then its module, time_share, attainable_flops and
        (deployed) members. `model_time`, `bandwidth`: the report's, asked once by the caller."""
        from onnx_roofline.report.breakdown import module_path
        from onnx_roofline.report.rows import roofline_extras

        data = node.to_dict()
        data["module"] = module_path(node)
        data.update(roofline_extras(node, model_time, bandwidth))
        if index < len(self.members):
            data["members"] = list(self.members[index])
        if self.prediction is not None:
            data["predicted_time_s"] = self.prediction.per_kernel[index]
        return data

    def to_dict_with(self, nodes: Any, other: Report | None = None) -> dict[str, Any]:
        """The report's JSON object, with `nodes` as its "nodes" value (to_dict gives the list);
        `other`, the report's other view, gives its block in "views" as the terminal gives its line."""
        folded = foldable(self)
        predicted = self.prediction if self.prediction is not None else other.prediction if other is not None else None
        data = {
            "schema_version": SCHEMA_VERSION,
            "view": self.view,
            "model": {**self.model.to_dict(), "node_count": self.node_rows, "main_graph_nodes": self.model.node_count},
            "hardware": self.hardware.to_dict(),
            "nodes": nodes,
            "totals": {**self.totals.to_dict(), **headline(self, other).to_dict()},
            "prediction": None if predicted is None else predicted.to_dict(),
            "unsupported": self.unsupported,
            "status_counts": self.status_counts,
            "uncosted": self.uncosted.to_dict(),
            "memory": held_memory(self, other).to_dict(),
            "launches": self.launches.to_dict() if self.launches is not None else None,
            "foldable": folded.to_dict() if folded is not None else None,
            "views": {
                view.view: view_summary(view)
                for view in sorted((self, *([other] if other is not None else [])), key=lambda r: r.view != WRITTEN)
            },
        }
        if self.view == DEPLOYED:
            data["kv_cache"] = self.kv_cache
            data["notes"] = list(self.notes)
            data["written_totals"] = self.written.totals.to_dict() if self.written is not None else None
        return data


@dataclass(frozen=True)
class Launches:
    """Kernel launches per run against a per-kernel launch overhead: `floor_s` = kernels ×
    overhead, below which an eagerly launched run cannot go however fast its kernels, and
    `time_s` = Σ max(kernel bound, overhead) over the kernels launched, the bound with every
    kernel taking at least one launch interval. CUDA Graphs and persistent kernels lower the
    overhead; the roofline bound (`totals.time_s`) assumes it hidden."""

    kernels: int
    per_kernel_s: float
    floor_s: float
    time_s: float

    @classmethod
    def of(cls, report: Report) -> Launches | None:
        from onnx_roofline.costs.memory import VIEW_OPS

        per = report.hardware.launch_overhead
        if per is None:
            return None
        time_s = 0.0
        for node in report.nodes:
            if node.placement is None:
                continue
            launched = getattr(node, "launches", 0 if node.op_type in VIEW_OPS else 1)
            time_s += max(node.placement.time_s, per) if launched else node.placement.time_s
        kernels = report.kernels
        return cls(kernels, per, kernels * per, time_s)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kernels": self.kernels,
            "per_kernel_s": self.per_kernel_s,
            "floor_s": self.floor_s,
            "time_s": self.time_s,
        }


@dataclass(frozen=True)
class Uncosted:
    """How many nodes have no cost and the root cause: the first node, in graph order, that is
    uncosted for a reason of its own (no rule, outputs that could not be typed) rather than
    because something upstream is unknown."""

    count: int
    node_count: int
    root_cause: RootCause | None

    @classmethod
    def of(cls, report: Report) -> Uncosted:
        count = sum(1 for n in report.nodes if n.status != OK)
        if not count:
            return cls(0, len(report.nodes), None)
        causes = [report.model.shape_root_cause] if report.model.shape_root_cause is not None else []
        own = next((n for n in report.nodes if n.status not in (OK, UNKNOWN_SHAPE)), None)
        if own is not None:
            causes.append(RootCause(own.index, own.name, own.op_type, own.domain, own.reason or own.status))
        if not causes:  # unknown shapes with no node to blame (a graph input left unbound)
            first = next(n for n in report.nodes if n.status != OK)
            causes.append(RootCause(first.index, first.name, first.op_type, first.domain, first.reason or first.status))
        return cls(count, len(report.nodes), min(causes, key=lambda cause: cause.index))

    @property
    def message(self) -> str | None:
        """One line: "328 of 1061 nodes uncosted, downstream of X (Op): reason"."""
        if not self.count:
            return None
        cause = cast(RootCause, self.root_cause)  # of() names one wherever a node is uncosted
        return f"{self.count} of {self.node_count} nodes uncosted, downstream of {cause.name} ({cause.op_type}): {cause.reason}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "root_cause": self.root_cause.to_dict() if self.root_cause else None,
            "message": self.message,
        }
