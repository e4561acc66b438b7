"""What a report says beside its totals, as labelled lines every format shows: the other view's
estimate, the deployed view's assumptions, memory, the launch floor, foldable nodes, the branch
taken, and every warning. The terminal table, the HTML and the Markdown render these same lines,
so a finding added here reaches all three (the JSON carries each as data)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from onnx_roofline.model.status import OK
from onnx_roofline.report.units import duration, percent, si

if TYPE_CHECKING:
    from onnx_roofline.report.model import Report

WRITTEN, DEPLOYED = "written", "deployed"  # the two views (report.model re-exports them)
WHAT_TIME_IS = {WRITTEN: "lower bound, as written", DEPLOYED: "deployed estimate"}
"""What a printed time is, per view: every time the tool prints says which it is."""
QUANTIZED_NOTE = "quantized: "
"""The deployed note of a quantized graph (views/quantized.py), which the written view's summary
repeats under the deployed estimate: what the QDQ units run as."""


@dataclass(frozen=True)
class Finding:
    """One labelled line. `loud`: the figures are partial, assumed or not runnable as they stand."""

    label: str  # "" continues the line above
    text: str
    loud: bool = False


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
    folded = [n for n in report.nodes if n.constant_foldable and n.status == OK] if report.view == WRITTEN else []
    if not folded:
        return None
    spent, total = sum(n.time_s for n in folded), report.totals.time_s
    return Foldable(len(folded), sum(n.cost.bytes for n in folded), spent, spent / total if total else None)


def view_summary(report: Report) -> dict[str, Any]:
    """A view's totals as the JSON's `views` block gives them, for the report or its other view."""
    return {"totals": report.totals.to_dict(), "kernels": report.kernels, "kv_cache": report.kv_cache,
            "notes": list(report.notes) if report.view == DEPLOYED else []}


def findings(report: Report, other: Report | None = None) -> list[Finding]:
    """The lines after the totals, in the order the terminal prints them. `other`: the report's
    other view, whose estimate is the first line."""
    lines = []
    if other is not None and report.totals.costed_nodes:
        lines.append(_other_view(other))
        if other.view == DEPLOYED:
            lines += [Finding("", note) for note in other.notes if note.startswith(QUANTIZED_NOTE)]
    if report.view == DEPLOYED:
        lines += [Finding("", note) for note in report.notes]
    lines.append(Finding("memory", memory_text(report)))
    if report.launches is not None:
        launch = report.launches
        lines.append(Finding("launches", f"{launch.kernels} kernels × {duration(launch.per_kernel_s)} launch overhead = "
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
        lines.append(Finding("branch" if branch.other is None else "BOTH", branch.message, loud=branch.other is not None))
    if model.experts is not None:  # an MoE: its layers and parameters, and the routing its figures assume
        lines.append(Finding("experts", model.experts.message))
        lines.append(Finding("ASSUMED", model.experts.assumption, loud=True))
    if model.assumed is not None:
        lines.append(Finding("ASSUMED", model.assumed.message, loud=True))
    if model.bounds:  # data-dependent sizes costed at the graph's bound: the figures downstream are upper bounds
        lines.append(Finding("at most", "; ".join(bound.message for bound in model.bounds)))
        marked, row = sum(node.at_most for node in report.nodes), "kernel" if report.view == DEPLOYED else "node"
        lines.append(Finding("", f"{marked} {row}{'s' if marked != 1 else ''} costed at sizes that are at most what a run has"))
    lines += [Finding("IMPLAUSIBLE", flag.message, loud=True) for flag in model.implausible]  # the defaults cannot run
    lines += [Finding("INVALID", str(flag), loud=True) for flag in model.invalid]  # a runtime would refuse the file
    if report.unsupported:
        listed = ", ".join(f"{op}×{count}" for op, count in report.unsupported.items())
        lines.append(Finding("UNCOSTED", report.uncosted.message, loud=True))
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


def memory_text(report: Report) -> str:
    """`weights … + KV cache … + peak activations … = … of 80 GB: fits`."""
    memory = report.memory
    parts = [f"weights {si(memory.weight_bytes, 'B')}"]
    if memory.untaken_branch_weight_bytes:
        parts.append(f"{si(memory.untaken_branch_weight_bytes, 'B')} held for If branches not taken")
    if memory.kv_cache_bytes:
        each = memory.kv_cache_bytes_per_sequence
        per = f", {si(each, 'B')} per sequence" if each is not None and each != memory.kv_cache_bytes else ""
        parts.append(f"KV cache {si(memory.kv_cache_resident_bytes, 'B')} resident ({si(memory.kv_cache_bytes, 'B')} after this step{per})")
    parts.append(f"peak activations {si(memory.peak_activation_bytes, 'B')}")
    verdict = ""
    if memory.capacity is not None:
        verdict = f" of {si(memory.capacity, 'B')}: " + ("fits" if memory.fits else "DOES NOT FIT")
    return f"{' + '.join(parts)} = {si(memory.total_bytes, 'B')}{verdict}"


def _other_view(other: Report) -> Finding:
    """The other view's total: the default report shows both."""
    totals = other.totals
    if other.view == DEPLOYED:
        cache = f"; KV cache {other.kv_cache}" if other.kv_cache is not None else ""  # only a model with a cache
        return Finding(DEPLOYED, f"{duration(totals.time_s)} {WHAT_TIME_IS[DEPLOYED]} ({si(totals.bytes, 'B')}, {other.kernels} kernels{cache}): --view deployed")
    return Finding(WRITTEN, f"{duration(totals.time_s)} {WHAT_TIME_IS[WRITTEN]} ({si(totals.bytes, 'B')}, {other.kernels} kernels): --view written")
