"""Checking a report against a policy (and a baseline): a pure function, so it is tested without files.

Every limit becomes one Check, in a fixed order (model limits, op types, modules, regressions;
names sorted), each naming the nodes most responsible. Nodes that could not be costed are never
counted as zero: a sum that misses them says so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from onnx_roofline.commands.gate.baseline import Baseline, Comparison, NodeFigures, compare
from onnx_roofline.commands.gate.policy import METRICS, Budget, Policy
from onnx_roofline.commands.gate.result import FAIL, PASS, SKIP, Check, Contributor, GateResult, formatted
from onnx_roofline.costs.roofline import MEMORY
from onnx_roofline.model.conformance import refusal
from onnx_roofline.report.breakdown import in_module, module_path
from onnx_roofline.report.findings import Headline, headline, held_memory, predicted_words, qualifiers
from onnx_roofline.report.model import OK, RULE_ERROR, UNKNOWN_SHAPE, UNSUPPORTED, Report
from onnx_roofline.report.units import duration

KIND = {"latency": "time", "bytes": "bytes", "flops": "flops"}  # metric → how its values read
PREDICTED = "predicted latency"  # the budget's check, where the deployed view is planned
NAME = {
    "latency": "latency bound",
    "bytes": "bytes moved",
    "flops": "FLOPs",
}  # metric → for people: sums over the gated view's nodes
MEMORY_SHARE = "memory-bound time share"


def evaluate(
    report: Report, policy: Policy, baseline: Baseline | None = None, top: int = 5, deployed: Report | None = None
) -> GateResult:
    """`deployed`: the report's deployed view, where it is written, whose footprint the memory line
    gives (findings.held_memory: what every command judges fits by)."""
    gate = _Gate(tuple(NodeFigures.of(n) for n in report.nodes), top)
    head = headline(report, deployed)
    modules = {n.index: module_path(n) for n in report.nodes}  # name_scopes metadata, else the node name
    checks = [
        *_validity(report),
        *_model_checks(gate, report.hardware.key, policy, head),
        *_group_checks(gate, "op_type", policy.op_type, lambda node, name: node.op_type == name),
        *_group_checks(gate, "module", policy.module, lambda node, name: in_module(modules[node.index], name)),
    ]
    comparison = None
    if baseline is not None:
        comparison = compare(baseline.nodes, gate.nodes)
        checks += [_regression(gate, metric, baseline, comparison, policy) for metric in METRICS]
    return GateResult(
        model=report.model.path,
        hardware=report.hardware.key,
        dims=dict(report.model.dims),
        checks=tuple(checks),
        baseline=baseline.path if baseline else None,
        comparison=comparison,
        view=report.view,
        assumed=report.model.assumed,
        dim_roles=dict(report.model.dim_roles),
        implausible=report.model.implausible,
        qualifiers=tuple(qualifiers(report)),
        memory=held_memory(report, deployed),
        latency=head,
    )


class _Gate:
    """The figures of one report, and the one way every limit is judged and explained."""

    def __init__(self, nodes: tuple[NodeFigures, ...], top: int):
        self.nodes = nodes
        self.top = top
        self.total_latency = _sum(nodes, "latency")

    def limit(self, id: str, title: str, kind: str, measured, limit, contributors=(), caveat: str = "") -> Check:
        """PASS when measured ≤ limit; a failure says by how much."""
        failed = measured > limit
        text = f"{title} {formatted(kind, measured)} {'exceeds' if failed else 'within'} {formatted(kind, limit)}"
        if failed and kind == "share":
            text += f" (over by {100 * (measured - limit):.1f} points)"
        elif failed and kind != "count":
            relative = f", {measured / limit - 1:+.1%}" if limit else ""
            text += f" (over by {formatted(kind, measured - limit)}{relative})"
        return Check(id, title, FAIL if failed else PASS, kind, measured, limit, text + caveat, tuple(contributors))

    def ranked(self, nodes: Sequence[NodeFigures], metric: str, whole: float | int | None) -> list[Contributor]:
        """The `top` nodes by `metric`, each with its share of `whole`."""
        valued = sorted(((n, v) for n in nodes if (v := n.value(metric))), key=lambda pair: (-pair[1], pair[0].index))
        return [Contributor(n, KIND[metric], v, v / whole if whole else None) for n, v in valued[: self.top]]

    def metric(self, id: str, title: str, metric: str, nodes: Sequence[NodeFigures], limit) -> Check:
        """A sum of latency, bytes or FLOPs over `nodes` against its limit."""
        measured = _sum(nodes, metric)
        return self.limit(
            id, title, KIND[metric], measured, limit, self.ranked(nodes, metric, measured), _caveat(nodes)
        )

    def time_share(self, id: str, title: str, nodes: Sequence[NodeFigures], limit: float) -> Check:
        """The part of the model's predicted time that `nodes` take."""
        if not self.total_latency:
            return _skipped(id, title, "share", limit, "no costed node takes time")
        share = _sum(nodes, "latency") / self.total_latency
        ranked = self.ranked(nodes, "latency", self.total_latency)
        return self.limit(id, title, "share", share, limit, ranked, _caveat(self.nodes))

    def uncosted(self, id: str, title: str, statuses: tuple[str, ...] | None, limit: int) -> Check:
        """Nodes the analysis could not cost (of `statuses`; None: whatever the status), each listed
        with the reason."""
        hit = [n for n in self.nodes if (n.status != OK if statuses is None else n.status in statuses)]
        contributors = [Contributor(n, "count", None, note=n.reason) for n in hit[: self.top]]
        return self.limit(id, title, "count", len(hit), limit, contributors)


def _predicted_latency(gate: _Gate, head: Headline, budget: float) -> Check:
    """A latency budget judged on what a run takes, the predicted time of the deployed kernels
    (issue 40), the floor beside it; the contributors are the gated view's slowest nodes."""
    beside = f" (floor {duration(head.floor_s)}; {predicted_words(head)})"
    ranked = gate.ranked(gate.nodes, "latency", gate.total_latency)
    return gate.limit("latency", PREDICTED, "time", head.predicted_s, budget, ranked, beside + _caveat(gate.nodes))


def _validity(report: Report) -> list[Check]:
    """A model a runtime would refuse (report.model.invalid) fails the gate, whatever the policy:
    "costed fine" on a file no runtime loads is a false pass. No check where it is valid."""
    invalid = report.model.invalid
    if not invalid:
        return []
    return [Check("valid", "model validity", FAIL, "count", len(invalid), 0, refusal(invalid))]


def _model_checks(gate: _Gate, hardware: str, policy: Policy, head: Headline) -> list[Check]:
    checks = []
    if policy.max_latency:
        budget = policy.latency_budget(hardware)
        if budget is None:
            why = (
                f"no latency budget for {hardware} (the policy names {', '.join(policy.max_latency)}, and no `default`)"
            )
            checks.append(_skipped("latency", PREDICTED, "time", None, why))
        elif head.predicted_s is not None:
            checks.append(_predicted_latency(gate, head, budget))
        else:  # no deployed plan (a graph past its size): the gated view's own sum, named for what it is
            checks.append(gate.metric("latency", NAME["latency"], "latency", gate.nodes, budget))
    if policy.max_memory_bound_share is not None:
        memory_bound = [n for n in gate.nodes if n.bound == MEMORY]
        checks.append(gate.time_share("memory_bound_share", MEMORY_SHARE, memory_bound, policy.max_memory_bound_share))
    for metric, limit in (("bytes", policy.max_bytes), ("flops", policy.max_flops)):
        if limit is not None:
            checks.append(gate.metric(metric, NAME[metric], metric, gate.nodes, limit))
    if policy.max_unsupported is not None:
        checks.append(
            gate.uncosted("unsupported", "unsupported nodes", (UNSUPPORTED, RULE_ERROR), policy.max_unsupported)
        )
    if policy.max_unknown_shape is not None:
        checks.append(gate.uncosted("unknown_shape", "unknown-shape nodes", (UNKNOWN_SHAPE,), policy.max_unknown_shape))
    if policy.max_uncosted is not None:
        checks.append(gate.uncosted("uncosted", "uncosted nodes", None, policy.max_uncosted))
    return checks


def _group_checks(
    gate: _Gate, family: str, budgets: Mapping[str, Budget], member: Callable[[NodeFigures, str], bool]
) -> list[Check]:
    """Budgets per op type or per module. A budget that matches no node is skipped, visibly (a typo
    in a module path must not pass silently)."""
    checks = []
    for name in sorted(budgets):
        budget = budgets[name]
        group = [n for n in gate.nodes if member(n, name)]
        label = name if family == "op_type" else f"module {name}"
        limits = [(metric, getattr(budget, f"max_{metric}")) for metric in METRICS]
        for metric, limit in [*limits, ("time_share", budget.max_time_share)]:
            if limit is None:
                continue
            id, title = f"{family}[{name}].{metric}", f"{label} {NAME.get(metric, 'time share')}"
            if not group:
                checks.append(
                    _skipped(id, title, KIND.get(metric, "share"), limit, f"no node matches {family} {name!r}")
                )
            elif metric == "time_share":
                checks.append(gate.time_share(id, title, group, limit))
            else:
                checks.append(gate.metric(id, title, metric, group, limit))
    return checks


def _regression(gate: _Gate, metric: str, baseline: Baseline, comparison: Comparison, policy: Policy) -> Check:
    """Growth of a model total over the baseline's; the contributors are the nodes that grew most."""
    before, after = baseline.totals[metric], _sum(gate.nodes, metric)
    tolerance = policy.max_regression.get(metric, 0.0)
    growth = (after - before) / before if before else (0.0 if after == 0 else None)
    failed = growth is None or growth > tolerance
    kind, name = KIND[metric], NAME[metric]
    if growth is None:
        text = f"{name} grew from nothing to {formatted(kind, after)} against the baseline"
    else:
        text = (
            f"{name} {formatted('growth', growth)} against the baseline ({formatted(kind, before)} → "
            f"{formatted(kind, after)}), {'more than' if failed else 'within'} the {formatted('growth', tolerance)} allowed"
        )
    deltas = [(a, (a.value(metric) or 0) - (b.value(metric) or 0)) for b, a in comparison.pairs]
    deltas += [(a, a.value(metric) or 0) for a in comparison.added]
    grew = sorted(((n, d) for n, d in deltas if d > 0), key=lambda nd: (-nd[1], nd[0].index))
    increase = after - before
    contributors = tuple(
        Contributor(n, kind, d, d / increase if increase > 0 else None, growth=True) for n, d in grew[: gate.top]
    )
    status = FAIL if failed else PASS
    return Check(f"regression.{metric}", f"{name} regression", status, "growth", growth, tolerance, text, contributors)


def _skipped(id: str, title: str, kind: str, limit, why: str) -> Check:
    return Check(id, title, SKIP, kind, None, limit, f"{title}: skipped, {why}")


def _sum(nodes: Sequence[NodeFigures], metric: str) -> float | int:
    return sum(v for n in nodes if (v := n.value(metric)) is not None)


def _caveat(nodes: Sequence[NodeFigures]) -> str:
    """Said wherever a sum misses nodes: unknown is never zero."""
    uncosted = sum(1 for n in nodes if n.latency is None)
    if not uncosted:
        return ""
    return f" ({uncosted} node{'s' if uncosted != 1 else ''} could not be costed and {'are' if uncosted != 1 else 'is'} not counted)"
