"""The what-if subcommands: sweep, critical, compare, fuse, context.

Each takes the model arguments every analysis takes (`--hw`, `--dim`, `--input`, `--dtype`,
`--partial`), prints a table or JSON (`--format`, `-o`), and can draw a picture (`--plot FILE`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from onnx_roofline.commands.arguments import (
    add_memory_argument,
    add_model_arguments,
    add_view_arguments,
    count,
    hardware_from,
    protected_files,
    warn_invalid,
)
from onnx_roofline.commands.listing import COMMAND_HELP
from onnx_roofline.commands.whatif.session import Session
from onnx_roofline.errors import EXIT_OK, DimensionError, one_line
from onnx_roofline.report.output import write_text
from onnx_roofline.shapes.dims import parse_dim, parse_input_shape
from onnx_roofline.shapes.input_values import parse_value
from onnx_roofline.shapes.routing import ExpertLoad

TYPE_CHECKING = False
if TYPE_CHECKING:
    from onnx_roofline.costs.hardware import Hardware

# The studies (and the fusion planner the fused and deployed views use) are imported by the command
# that runs them: building the parser, which every command does, imports none of them.

DEFAULT_COMPARE = "h100,h200,a100,l4"
FITS = ("sweep", "critical", "context")  # the studies that say what fits: they take --memory-utilization
DEFAULT_LENGTHS = "64,128,256,512,1024,2048,4096"


def add_command(subparsers: argparse._SubParsersAction) -> None:
    _parser(
        subparsers,
        "sweep",
        _run_sweep,
        COMMAND_HELP["sweep"],
        "--dim NAME=V1,V2,... sweeps NAME (several lists: every combination); --dim NAME=V binds it.",
    )
    _parser(
        subparsers,
        "critical",
        _run_critical,
        COMMAND_HELP["critical"],
        "--over DIM (default: the dim named as a batch) is solved for; bind the other dims with --dim.",
    ).add_argument(
        "--over", metavar="DIM", help="the dim to solve for (default: the graph's batch dim: batch, batch_size, N, ...)"
    )
    _parser(
        subparsers,
        "compare",
        _run_compare,
        COMMAND_HELP["compare"],
        f"--hw takes a comma-separated list (default {DEFAULT_COMPARE}).",
        hw=DEFAULT_COMPARE,
    )
    _parser(
        subparsers,
        "fuse",
        _run_fuse,
        COMMAND_HELP["fuse"],
        "Fused: elementwise chains and MatMul/Conv epilogues merged, decomposed attention as one "
        "FlashAttention-style kernel.",
        views=False,
    ).add_argument("--top", type=count(), default=10, metavar="N", help="fused kernels listed (default: 10)")
    _parser(
        subparsers,
        "context",
        _run_context,
        COMMAND_HELP["context"],
        "Bind the batch with --dim; the past-length dim is found from the KV-cache inputs.",
    ).add_argument(
        "--context",
        default=DEFAULT_LENGTHS,
        metavar="[DIM=]L1,L2,...",
        help=f"past lengths to evaluate, optionally naming the dim (default: {DEFAULT_LENGTHS})",
    )


def _parser(
    subparsers, name: str, run: Callable, help_text: str, description: str, views: bool = True, hw: str = "h100"
):
    parser = subparsers.add_parser(
        name, help=help_text, description=f"{help_text[0].upper()}{help_text[1:]}. {description}"
    )
    add_model_arguments(parser, hw=hw)
    parser.add_argument("--format", choices=("table", "json"), default="table", help="output format (default: table)")
    parser.add_argument(
        "-o", "--output", metavar="FILE", help="write the output to FILE (atomically) instead of stdout"
    )
    parser.add_argument("--plot", metavar="FILE", help="also draw the study to FILE (.png or .svg)")
    if views:
        add_view_arguments(parser)
    if name in FITS:
        add_memory_argument(parser)
    parser.set_defaults(run=run)
    return parser


def parse_dim_values(text: str) -> tuple[str, tuple[int, ...]]:
    """`batch=1,8,64` → ("batch", (1, 8, 64)); each value checked as --dim checks one."""
    name, _, values = text.partition("=")
    try:
        parsed = tuple(parse_dim(f"{name}={value}")[1] for value in values.split(","))
    except DimensionError:
        raise DimensionError(
            f"malformed --dim {text!r}: expected NAME=N or NAME=N1,N2,..., e.g. batch=1,8,64"
        ) from None
    return name.strip(), parsed


def _session(
    options: argparse.Namespace, hw: str | Hardware | None = None
) -> tuple[Session, dict[str, tuple[int, ...]]]:
    """The session (single-valued dims bound) and the lists to sweep."""
    if options.plot:
        from onnx_roofline.report.plot import check_plot_destination

        check_plot_destination(options.plot)
    pairs = [parse_dim_values(text) for text in options.dim]
    if len({name for name, _ in pairs}) != len(pairs):
        raise DimensionError("the same --dim is given twice")
    dims = {name: values[0] for name, values in pairs if len(values) == 1}
    axes = {name: values for name, values in pairs if len(values) > 1}
    shapes = dict(parse_input_shape(text) for text in options.input)
    values = dict(parse_value(text) for text in options.value)
    session = Session(options.model, hardware_from(options, hw), dims, shapes, options.dtype, options.partial, values,
                      kv_cache=getattr(options, "kv_cache", None) or "inplace",
                      fp32_matmul=getattr(options, "fp32_matmul", None) or "ieee", nonzero_fraction=options.nonzero_fraction,
                      expert_load=options.expert_load or ExpertLoad(), frames_per_token=options.frames_per_token,
                      string_bytes=options.string_bytes)  # fmt: skip
    return session, axes


def _no_lists(axes: dict, command: str) -> None:
    if axes:
        raise DimensionError(f"`{command}` takes one value per --dim; use `sweep` for lists")


def _emit(options: argparse.Namespace, session: Session, result, text: Callable, figure: Callable) -> int:
    """The study written as --format and -o say, its --plot drawn, and the file's findings said
    (a study of a file a runtime would refuse exits 0, as analyze does, but says so)."""
    from onnx_roofline.commands.whatif import plot, render

    output = render.render_json(result) if options.format == "json" else text(result)
    protect = protected_files(options)
    write_text(output, options.output, protect=protect)
    if options.plot:
        plot.save(figure(result), options.plot, protect=protect)
    warn_incomplete(session, options.quiet)
    warn_invalid(session.invalid)
    return EXIT_OK


def warn_incomplete(session: Session, quiet: bool) -> None:
    """A study some of whose points left nodes uncosted (`--partial`) says so on stderr, as analyze
    does, whatever the format (its JSON's `uncosted`): the point with the most, and why."""
    uncosted = session.uncosted
    if uncosted is None or quiet:
        return
    at = ", ".join(f"{name}={size}" for name, size in uncosted["dims"].items())
    print(f"onnx-roofline: warning: {one_line(uncosted['message'])} (at {at or 'the dims given'}); the study's figures "
          "leave them out", file=sys.stderr)  # fmt: skip


def _run_sweep(options: argparse.Namespace) -> int:
    from onnx_roofline.commands.whatif import plot, render
    from onnx_roofline.commands.whatif.sweep import sweep

    session, axes = _session(options)
    return _emit(options, session, sweep(session, axes, options.view), render.render_sweep, plot.sweep_figure)


def _run_critical(options: argparse.Namespace) -> int:
    from onnx_roofline.commands.whatif import plot, render
    from onnx_roofline.commands.whatif.critical import critical

    session, axes = _session(options)
    _no_lists(axes, "critical")
    return _emit(
        options, session, critical(session, options.over, options.view), render.render_critical, plot.critical_figure
    )


def _run_compare(options: argparse.Namespace) -> int:
    from onnx_roofline.commands.whatif import plot, render
    from onnx_roofline.commands.whatif.compare import compare, parse_hardware_list

    hardware = parse_hardware_list(options.hw)
    session, axes = _session(options, hw=hardware[0])
    _no_lists(axes, "compare")
    return _emit(options, session, compare(session, hardware, options.view), render.render_compare, plot.compare_figure)


def _run_fuse(options: argparse.Namespace) -> int:
    from onnx_roofline.commands.whatif import plot, render
    from onnx_roofline.commands.whatif.fuse_report import fusion_study

    session, axes = _session(options)
    _no_lists(axes, "fuse")
    return _emit(
        options, session, fusion_study(session), lambda s: render.render_fusion(s, options.top), plot.fusion_figure
    )


def _run_context(options: argparse.Namespace) -> int:
    from onnx_roofline.commands.whatif import plot, render
    from onnx_roofline.commands.whatif.context import context_study

    session, axes = _session(options)
    _no_lists(axes, "context")
    name, _, lengths = options.context.rpartition("=")
    dim, values = parse_dim_values(f"{name or 'context'}={lengths}")
    result = context_study(session, values, dim=name.strip() or None, view=options.view)
    return _emit(options, session, result, render.render_context, plot.context_figure)
