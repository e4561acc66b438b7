"""`onnx-roofline check`: analyze a model and fail (exit 1) when it breaks a limit; exit 2 on bad input.

Limits come from a policy file and/or flags; a flag overrides the policy's value for that limit.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import replace
from functools import partial

from onnx_roofline.commands.arguments import (
    add_memory_argument,
    add_model_arguments,
    add_view_arguments,
    analyze_from_options,
    deployed_from,
    protected_files,
)
from onnx_roofline.commands.gate.baseline import Baseline, dims_text, ensure_comparable, load_baseline
from onnx_roofline.commands.gate.evaluate import evaluate
from onnx_roofline.commands.gate.policy import Policy, PolicyError, load_policy
from onnx_roofline.commands.gate.quantities import parse_amount, parse_count, parse_duration, parse_fraction
from onnx_roofline.commands.gate.render import RENDERERS, render_junit
from onnx_roofline.commands.listing import COMMAND_HELP
from onnx_roofline.errors import EXIT_FAIL, EXIT_OK
from onnx_roofline.report.output import check_destinations, write_text
from onnx_roofline.shapes.dims import parse_dim

DEFAULT_HW = "h100"

# (policy key, parser, metavar, help): each flag is its policy key with dashes, parsed the same way.
LIMITS: tuple[tuple[str, Callable, str, str], ...] = (
    ("max_latency", parse_duration, "TIME", "predicted latency budget: 2ms, 500us, 0.002s, 1.5e-3 (s)"),
    (
        "max_memory_bound_share",
        partial(parse_fraction, over_one=False),
        "SHARE",
        "most of the predicted time memory-bound nodes may take: 0.6 or 60%%",
    ),
    ("max_bytes", parse_amount, "BYTES", "most bytes the model may move: 1.5e9, 1.5GB, 2GiB"),
    ("max_flops", parse_amount, "FLOPS", "most FLOPs the model may do: 3e11, 300GFLOP"),
    ("max_unsupported", parse_count, "N", "most nodes with no cost rule (or whose rule failed)"),
    ("max_unknown_shape", parse_count, "N", "most nodes whose shapes could not be inferred"),
    (
        "max_uncosted",
        parse_count,
        "N",
        "most nodes not costed, whatever the reason (default 0 when no such limit is set)",
    ),
    (
        "max_regression",
        partial(parse_fraction, over_one=True),
        "GROWTH",
        "tolerated growth of latency, bytes and FLOPs over --baseline: 5%% or 0.05 (default 0)",
    ),
)


def add_command(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "check",
        help=COMMAND_HELP["check"],
        description="Analyze MODEL and check it against limits from --policy and flags. "
        "Exit 0: every check passed; 1: a check failed; 2: bad input (model, policy, baseline, flag).",
    )
    add_model_arguments(parser)
    add_view_arguments(parser)  # --view deployed gates the deployed estimate
    add_memory_argument(parser)
    parser.set_defaults(hw=None, run=run)  # no --hw: the policy's `hw`, else h100
    parser.add_argument("--policy", metavar="FILE", help="TOML policy, or a pyproject.toml with [tool.onnx-roofline]")
    for key, parse, metavar, text in LIMITS:
        parser.add_argument("--" + key.replace("_", "-"), type=_argument(parse), metavar=metavar, help=text)
    parser.add_argument(
        "--no-unsupported",
        action="store_true",
        help="fail if any node could not be costed: the default, unless the policy or "
        "--max-unsupported/--max-unknown-shape allow some",
    )
    parser.add_argument("--baseline", metavar="REPORT", help="a saved `analyze --format json` report to compare with")
    parser.add_argument("--format", choices=("table", "json", "github", "text"), default="table",
                        help="output format (default: table, as every command names it; `text` is its former name)")  # fmt: skip
    parser.add_argument(
        "-o", "--output", metavar="FILE", help="write the output to FILE (atomically) instead of stdout"
    )
    parser.add_argument("--junit", metavar="FILE", help="also write a JUnit XML report to FILE")
    parser.add_argument(
        "--top", type=_argument(parse_count), default=5, metavar="N", help="nodes named per failed check (default: 5)"
    )


def run(options: argparse.Namespace) -> int:
    check_destinations(
        {"-o": options.output, "--junit": options.junit}, protect=[p for p in (options.model, options.policy) if p]
    )  # before the analysis
    policy = _policy(options)
    baseline = load_baseline(policy.baseline) if policy.baseline else None
    report = analyze_from_options(_analysis_options(options, policy, baseline))
    if baseline is not None:
        ensure_comparable(baseline, report)
    deployed = (
        deployed_from(report, options) if report.view == "written" else None
    )  # the footprint every command judges by
    result = evaluate(report, policy, baseline, top=options.top, deployed=deployed)
    protect = protected_files(options, options.policy, policy.baseline, report=report)
    if options.junit:
        write_text(render_junit(result), options.junit, protect)
    write_text(RENDERERS["text" if options.format == "table" else options.format](result), options.output, protect)
    return EXIT_OK if result.passed else EXIT_FAIL


def _policy(options: argparse.Namespace) -> Policy:
    """The policy file's limits with the flags on top. With none, `check MODEL` asks whether the
    analysis can vouch for the model at all: the one check that every node is costed."""
    policy = load_policy(options.policy) if options.policy else Policy()
    policy = policy.overridden(baseline=options.baseline, **{key: getattr(options, key) for key, *_ in LIMITS})
    if options.no_unsupported:
        policy = policy.overridden(max_unsupported=0, max_unknown_shape=0)
    if policy.max_regression and policy.baseline is None:
        raise PolicyError("a regression limit needs a baseline: --baseline REPORT (or `baseline` in the policy)")
    return _strict_about_uncosted(policy)


def _strict_about_uncosted(policy: Policy) -> Policy:
    """A gate cannot vouch for figures that leave nodes out: unless the policy or a flag sets a
    limit on uncosted nodes, one check requires every node to be costed."""
    if (policy.max_uncosted, policy.max_unsupported, policy.max_unknown_shape) == (None, None, None):
        return replace(policy, max_uncosted=0)
    return policy


def _analysis_options(options: argparse.Namespace, policy: Policy, baseline: Baseline | None) -> argparse.Namespace:
    """The options `analyze` reads, with the policy's hw, dims and nonzero_fraction where the flags
    give none; a dim neither gives is the baseline's (a comparison is only made at its dims)."""
    given = {parse_dim(text)[0] for text in options.dim}
    dims = [f"{name}={size}" for name, size in policy.dims.items() if name not in given] + list(options.dim)
    if baseline is not None:
        taken = {name: size for name, size in baseline.dims.items() if name not in given and name not in policy.dims}
        dims += [f"{name}={size}" for name, size in taken.items()]
        if taken and not getattr(options, "quiet", False):
            print(f"onnx-roofline: note: dims from the baseline {baseline.path}: {dims_text(taken)}", file=sys.stderr)
    fraction = options.nonzero_fraction if options.nonzero_fraction is not None else policy.nonzero_fraction
    load = options.expert_load or policy.expert_load
    return argparse.Namespace(
        **{
            **vars(options),
            "dim": dims,
            "hw": options.hw or policy.hw or DEFAULT_HW,
            "nonzero_fraction": fraction,
            "expert_load": load,
        }
    )


def _argument(parse: Callable) -> Callable:
    """An argparse type: the parser's one-line message becomes argparse's (exit 2)."""

    def convert(text: str):
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = getattr(parse, "__name__", "value")
    return convert
