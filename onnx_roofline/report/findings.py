"""What a report says beside its totals, as labelled lines every format shows: the other view's
estimate, the deployed view's assumptions, memory, the launch floor, foldable nodes, the branch
taken, and every warning. The terminal table, the HTML and the Markdown render these same lines,
so a finding added here reaches all three (the JSON carries each as data)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeGuard, cast

from onnx_roofline.report.costed import ok_rows
from onnx_roofline.report.units import duration, percent, si

if TYPE_CHECKING:
    from onnx_roofline.report.model import Report

WRITTEN, DEPLOYED = "written", "deployed"  # the two views (report.model re-exports them)
WHAT_TIME_IS = {WRITTEN: "every node its own kernel", DEPLOYED: "deployed bound"}
"""What a printed time is, per view: every time the tool prints says which it is. As written, the
sum of per-node bounds is a floor only for running every node as its own kernel; deployed, the sum
of per-kernel bounds is the floor no runtime beats (DESIGN.md, "A floor, and a prediction")."""
QUANTIZED_NOTE = "quantized: "
"""The deployed note of a quantized graph (views/quantized.py), which the written view's summary
repeats under the deployed estimate: what the QDQ units run as."""


@dataclass(frozen=True)
class Finding:
    """One labelled line. `loud`: the figures are partial, assumed or not runnable as they stand."""

    label: str  # "" continues the line above
    text: str
    loud: bool = False


FOLDABLE_WHY = "foldable: its inputs are all weights or constants, so a runtime computes it once at load"
"""What the `(foldable)` flag means, where a rendering has room to say it (a tooltip, Netron's sidebar)."""


@dataclass(frozen=True)
class Foldable:
    """The nodes a runtime computes once at load (all their inputs weights or constants)."""

    nodes: int
    bytes: int
    time_s: float
    time_share: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"nodes": self.nodes, "bytes": self.bytes, "time_s": self.time_s, "time_share": self.time_share}


def foldable(report: Report) -> Foldable | None:
    """As written, the constant-foldable nodes' total; None where there are none (deployed, a
    runtime has already folded them)."""
    folded = [n for n in ok_rows(report.nodes) if n.constant_foldable] if report.view == WRITTEN else []
    if not folded:
        return None
    spent, total = sum(n.time_s for n in folded), report.totals.time_s
    return Foldable(len(folded), sum(n.cost.bytes for n in folded), spent, spent / total if total else None)


def view_summary(report: Report) -> dict[str, Any]:
    """A view's totals as the JSON's `views` block gives them, for the report or its other view."""
    return {
        "totals": report.totals.to_dict(),
        "kernels": report.kernels,
        "kv_cache": report.kv_cache,
        "notes": list(report.notes) if report.view == DEPLOYED else [],
    }


@dataclass(frozen=True)
class Headline:
    """The first latency a user reads: `floor_s`, the deployed bound, which no runtime beats (None
    where the deployed view was not planned: a graph past the default table's size); beside it
    `predicted_s`, the deployed kernels at the fractions of peak real kernels reach, launched as
    `launch` says; then `every_node_s`, the as-written sum, every node its own kernel."""

    floor_s: float | None
    predicted_s: float | None
    launch: str | None
    every_node_s: float | None
    kernels: int | None
    kv_cache: str | None
    predicted_is_bound: bool  # the hardware entry gives no achievable figures: predicted = bound

    def to_dict(self) -> dict[str, Any]:
        """The keys the JSON's `totals` adds (docs/json-schema.md): the headline first."""
        return {"floor_time_s": self.floor_s, "predicted_time_s": self.predicted_s, "predicted_launch": self.launch,
                "every_node_own_kernel_time_s": self.every_node_s}  # fmt: skip


def headline(report: Report, other: Report | None = None) -> Headline:
    """The headline of a report and its other view (either may be the deployed one)."""
    views = [report, *([other] if other is not None else []), *([report.written] if report.written is not None else [])]
    deployed = next((v for v in views if v.view == DEPLOYED), None)
    written = next((v for v in views if v.view == WRITTEN), None)

    def costed(view: Report | None) -> TypeGuard[Report]:  # an uncosted total is unknown, not 0
        return view is not None and view.totals.costed_nodes > 0

    prediction = deployed.prediction if deployed is not None else None
    return Headline(
        floor_s=deployed.totals.time_s if costed(deployed) else None,
        predicted_s=prediction.time_s if prediction is not None and costed(deployed) else None,
        launch=prediction.launch if prediction is not None else None,
        every_node_s=written.totals.time_s if costed(written) else None,
        kernels=deployed.kernels if deployed is not None else None,
        kv_cache=deployed.kv_cache if deployed is not None else None,
        predicted_is_bound=prediction is not None and prediction.achievable is None,
    )


def headline_lines(report: Report, other: Report | None = None) -> list[Finding]:
    """The latency lines: the floor with the predicted time beside it, then the as-written sum
    named for what it is; the report's own view ends its line with the memory-bound share."""
    head = headline(report, other)
    share = f"  memory-bound share of time {percent(report.totals.memory_bound_time_share)}"
    written_line = f"{duration(head.every_node_s)} {WHAT_TIME_IS[WRITTEN]} (sum of per-node bounds, as written)"
    if head.floor_s is None:
        return [Finding("latency", f"{written_line}; the deployed floor: --view deployed{share}")]
    cache = f"; KV cache {head.kv_cache}" if head.kv_cache is not None else ""
    floor = (f"{duration(head.floor_s)} floor: the {WHAT_TIME_IS[DEPLOYED]}, which no runtime beats ({head.kernels} kernels at 100% of peak{cache})"
             f"  predicted {duration(head.predicted_s)} ({predicted_words(head)})")  # fmt: skip
    if report.view == DEPLOYED:
        return [
            Finding("latency", floor + share),
            Finding("", written_line + (": --view written" if head.every_node_s is not None else "")),
        ]
    return [Finding("latency", floor + ": --view deployed"), Finding("", written_line + share)]


def latency_text(head: Headline) -> str:
    """The headline in one line, as `check` states it: the floor, the prediction, the as-written sum."""
    written = f"{duration(head.every_node_s)} {WHAT_TIME_IS[WRITTEN]}"
    if head.floor_s is None:
        return written
    return (
        f"floor {duration(head.floor_s)} (the {WHAT_TIME_IS[DEPLOYED]}, which no runtime beats), "
        f"predicted {duration(head.predicted_s)} ({predicted_words(head)}); {written}"
    )


def predicted_words(head: Headline) -> str:
    """What the predicted time assumes, in a few words (the JSON's `prediction` has them all)."""
    if head.predicted_is_bound:
        return "= the bound: the hardware table gives no achievable fractions"
    return "CUDA graphs" if head.launch == "graphs" else "eager launches"


def findings(report: Report, other: Report | None = None) -> list[Finding]:
    """The lines after the totals and the headline (headline_lines), in the order the terminal
    prints them. `other`: the report's other view."""
    lines = []
    if other is not None and report.totals.costed_nodes and other.view == DEPLOYED:
        lines += [Finding("", note) for note in other.notes if note.startswith(QUANTIZED_NOTE)]
    if report.view == DEPLOYED:
        lines += [Finding("", note) for note in report.notes]
    lines.append(Finding("memory", memory_text(report, other)))
    if report.launches is not None:
        launch = report.launches
        launched = (
            f"{launch.kernels} kernels"
            if report.view == DEPLOYED
            else f"{launch.kernels} launches (every node its own kernel)"
        )
        lines.append(Finding("launches", f"{launched} × {duration(launch.per_kernel_s)} launch overhead = "
                             f"{duration(launch.floor_s)} floor for an eagerly launched run; each kernel ≥ one launch: "
                             f"{duration(launch.time_s)} (CUDA Graphs lower it)"))  # fmt: skip
    folded = foldable(report)
    if folded is not None:
        them = "them" if folded.nodes > 1 else "it"
        lines.append(Finding("foldable", f"{folded.nodes} constant-foldable node{'s' if folded.nodes > 1 else ''} (inputs all weights or "
                             f"constants; a runtime computes {them} once at load): {si(folded.bytes, 'B')}, {duration(folded.time_s)}, "
                             f"{percent(folded.time_share)} of the time"))  # fmt: skip
    model = report.model
    for branch in model.branches:  # where an If's branch was chosen, and why; BOTH where nothing said which
        lines.append(
            Finding("branch" if branch.other is None else "BOTH", branch.message, loud=branch.other is not None)
        )
    if model.experts is not None:  # an MoE: its layers and parameters, and the routing its figures assume
        lines.append(Finding("experts", model.experts.message))
        lines.append(Finding("ASSUMED", model.experts.assumption, loud=True))
    if model.assumed is not None:
        lines.append(Finding("ASSUMED", model.assumed.message, loud=True))
    if model.regulated is not None:  # a length regulator's frames per token (shapes/durations.py)
        lines.append(Finding("ASSUMED", model.regulated.message, loud=True))
    if model.strings is not None:  # the bytes a string counts (shapes/texts.py)
        lines.append(Finding("ASSUMED", model.strings.message, loud=True))
    if model.bounds:  # data-dependent sizes costed at the graph's bound: the figures downstream are upper bounds
        lines.append(Finding("at most", "; ".join(bound.message for bound in model.bounds)))
        marked, row = sum(node.at_most for node in report.nodes), "kernel" if report.view == DEPLOYED else "node"
        lines.append(
            Finding("", f"{marked} {row}{'s' if marked != 1 else ''} costed at sizes that are at most what a run has")
        )
    lines += [Finding("IMPLAUSIBLE", flag.message, loud=True) for flag in model.implausible]  # the defaults cannot run
    lines += [Finding("INVALID", str(flag), loud=True) for flag in model.invalid]  # a runtime would refuse the file
    if report.unsupported:
        listed = ", ".join(f"{op}×{count}" for op, count in report.unsupported.items())
        lines.append(
            Finding("UNCOSTED", cast(str, report.uncosted.message), loud=True)
        )  # nodes are uncosted: it has one
        lines.append(Finding("", f"not in the totals, which are a partial answer: {listed}", loud=True))
    return lines


QUALIFIERS = frozenset({"branch", "BOTH", "experts", "ASSUMED", "at most", "IMPLAUSIBLE"})
"""The labels of findings that say what the figures rest on: a branch chosen, a routing or fraction
assumed, sizes at a bound, defaults that cannot run. A gate states them beside its verdict."""


def qualifiers(report: Report) -> list[Finding]:
    """The findings with a QUALIFIERS label, each with the lines that continue it."""
    kept, label = [], ""
    for line in findings(report):
        label = line.label or label
        if label in QUALIFIERS:
            kept.append(Finding(line.label or label, line.text, line.loud))
    return kept


def held_memory(report: Report, other: Report | None = None):
    """The footprint "fits" is judged on, in every command: the deployed view's (what a runtime
    holds, the KV cache as its mode says), the report's own where no deployed view was made."""
    deployed = report if report.view == DEPLOYED else other if other is not None and other.view == DEPLOYED else None
    return (deployed or report).memory


def memory_text(report: Report, other: Report | None = None) -> str:
    """The footprint the report's figures are judged by (held_memory), as footprint_text says it."""
    return footprint_text(held_memory(report, other))


def footprint_text(memory) -> str:
    """`weights … + KV cache … + peak activations … = … deployed; of 72 GB usable (90% of 80 GB): fits`."""
    made = (
        f" ({si(memory.folded_weight_bytes, 'B')} of them the outputs of folded nodes, which a runtime stores at load)"
    )
    parts = [f"weights {si(memory.weight_bytes, 'B')}" + (made if memory.folded_weight_bytes else "")]
    if memory.untaken_branch_weight_bytes:
        parts.append(f"{si(memory.untaken_branch_weight_bytes, 'B')} held for If branches not taken")
    if memory.kv_cache_bytes:
        each = memory.kv_cache_bytes_per_sequence
        per = f", {si(each, 'B')} per sequence" if each is not None and each != memory.kv_cache_bytes else ""
        mode = {"inplace": ", updated in place", "copy": ", copied"}.get(memory.kv_cache or "", "")
        parts.append(
            f"KV cache {si(memory.kv_cache_resident_bytes, 'B')} resident{mode} ({si(memory.kv_cache_bytes, 'B')} after this step{per})"
        )
    parts.append(f"peak activations {si(memory.peak_activation_bytes, 'B')}")
    verdict, budget = "", memory.budget
    if budget.usable is not None:
        verdict = (f"; of {si(float(budget.usable), 'B')} usable ({percent(budget.utilization)} of {si(budget.capacity, 'B')}): "
                   + ("fits" if memory.fits else "DOES NOT FIT"))  # fmt: skip
    return f"{' + '.join(parts)} = {si(memory.total_bytes, 'B')} {memory.view}{verdict}"
