"""The three acceptance checks on one corpus graph, shared by tests/test_corpus.py and the table
``python -m tests.corpus.check`` prints (model, nodes, uncosted, root cause, shape disagreements,
FLOP delta). Core install only: no torch."""

from __future__ import annotations

import argparse
import fnmatch
import sys
from dataclasses import dataclass, field
from typing import Any

from onnx_roofline import Sizing, analyze
from onnx_roofline.report.model import OK
from tests.corpus import cases

TOLERANCE = 0.01  # matrix FLOPs against the independent count
# op types that run on the matrix unit: an uncosted one leaves its FLOPs out of the sum
MATRIX_FAMILY = {
    "MatMul", "Gemm", "Conv", "ConvTranspose", "ConvInteger", "MatMulInteger", "QLinearMatMul", "QLinearConv",
    "Attention", "MultiHeadAttention", "GroupQueryAttention", "FusedMatMul", "FusedGemm", "FusedConv",
    "MatMulNBits", "DynamicQuantizeMatMul", "MatMulIntegerToFloat", "QAttention", "Einsum",
}  # fmt: skip


def analyzed(entry: dict[str, Any]):
    """The report at the entry's dims (``partial``: unbound dims leave nodes unknown rather than
    raising), or the exception the analysis raised."""
    try:
        return analyze(entry["path"], partial=True, sizing=Sizing(dims=entry["dims"]))
    except Exception as exc:
        return exc


def uncosted(report) -> list:
    return [n for n in report.nodes if n.status != OK]


def root_cause(report) -> str:
    """What the report names: how many nodes are uncosted, downstream of which node, and why."""
    return report.uncosted.message or "none"


def matrix_flops(report) -> int:
    return report.totals.matrix_flops  # Loop and If bodies' matrix work included


def flop_problem(report, expected: int) -> str | None:
    counted = matrix_flops(report)
    delta = (counted - expected) / expected
    if abs(delta) <= TOLERANCE:
        return None
    missing = [n for n in uncosted(report) if n.op_type in MATRIX_FAMILY]
    note = f"; {len(missing)} matrix-family nodes uncosted ({missing[0].op_type} first)" if missing else ""
    return f"matrix FLOPs {counted:,} vs independent {expected:,} ({delta:+.2%}){note}"


@dataclass
class ShapeCheck:
    error: str | None = None  # verify raised
    wrong: list = field(default_factory=list)  # shape/dtype disagreements
    partly: tuple = ()  # node outputs not fully inferred
    others: list = field(default_factory=list)  # bytes/rule disagreements (reported, not asserted here)
    observed: int = 0

    @property
    def passed(self) -> bool:
        return self.error is None and not self.wrong and not self.partly

    def message(self) -> str:
        if self.error:
            return self.error
        lines = [
            f"{len(self.wrong)} shape/dtype disagreements, {len(self.partly)} node outputs not fully inferred (of {self.observed} observed)"
        ]
        lines += [
            f"  #{d.index} {d.node} ({d.op_type}) {d.what} of {d.value}: inferred {d.inferred}, observed {d.observed}"
            for d in self.wrong[:8]
        ]
        if self.partly:
            lines.append(f"  not fully inferred, first: {', '.join(self.partly[:4])}")
        return "\n".join(lines)


def shapes(entry: dict[str, Any]) -> ShapeCheck:
    """``onnx_roofline.commands.verify`` at the entry's dims: onnxruntime's node outputs against the inferred ones."""
    from onnx_roofline.commands.verify import verify

    try:
        result = verify(entry["path"], dims=entry["dims"])
    except Exception as exc:
        return ShapeCheck(error=f"verify raised {type(exc).__name__}: {exc}")
    comparison = result.comparison
    wrong = [d for d in comparison.disagreements if d.what in ("shape", "dtype")]
    others = [d for d in comparison.disagreements if d.what not in ("shape", "dtype")]
    partly = comparison.values_partly_inferred
    return ShapeCheck(None, wrong, partly, others, comparison.values_checked + len(partly))


def main(argv: list[str] | None = None) -> int:
    """Print the acceptance table (markdown) for the corpus, or the models matching ``--only``."""
    parser = argparse.ArgumentParser(prog="python -m tests.corpus.check", description=main.__doc__)
    parser.add_argument("--only", action="append", default=[], help="fnmatch pattern on model names")
    args = parser.parse_args(argv)
    entries = [e for e in cases() if not args.only or any(fnmatch.fnmatch(e["id"], p) for p in args.only)]
    print(
        "| model | generator | nodes | uncosted | shape disagreements | not inferred | bytes disagreements | matrix FLOPs Δ | root cause |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---|")
    failing = 0
    for entry in entries:
        report = analyzed(entry)
        check = shapes(entry)
        if isinstance(report, Exception):
            failing += 1
            print(
                f"| {entry['id']} | {entry['generator']} | {entry['nodes']} | — | — | — | — | — | analyze raised {type(report).__name__}: {str(report)[:300]} |"
            )
            continue
        bad = uncosted(report)
        expected = entry["flops"]["matrix"]
        delta = (matrix_flops(report) - expected) / expected
        shape_cell = check.error[:120] if check.error else str(len(check.wrong))
        cause = root_cause(report) if bad else ""
        if check.wrong and not cause:
            d = check.wrong[0]
            cause = f"first disagreement #{d.index} {d.node} ({d.op_type}) {d.what} of {d.value}: inferred {d.inferred}, observed {d.observed}"
        ok = not bad and check.passed and abs(delta) <= TOLERANCE
        failing += not ok
        print(
            f"| {entry['id']} | {entry['generator']} | {len(report.nodes)} | {len(bad)} | {shape_cell} | {len(check.partly)} | "
            f"{len(check.others)} | {delta:+.2%} | {cause.replace('|', '/')} |",
            flush=True,
        )
    print(f"\n{len(entries) - failing} of {len(entries)} graphs pass all three checks")
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
