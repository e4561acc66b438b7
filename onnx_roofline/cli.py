"""The command line: `onnx-roofline MODEL --hw h100` and its subcommands.

Exit codes: 0 success, 1 a check found a problem, 2 bad input (one line on stderr, no traceback)."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from onnx_roofline import __version__
from onnx_roofline.analysis import analyze
from onnx_roofline.dims import parse_dim, parse_input_shape
from onnx_roofline.errors import EXIT_OK, EXIT_USAGE, DimensionError, RooflineError
from onnx_roofline.hardware import list_hardware, load_hardware
from onnx_roofline.output import write_text
from onnx_roofline.report.annotate import annotate
from onnx_roofline.report.breakdown import MODULE, OP_TYPE
from onnx_roofline.report.html import render_html
from onnx_roofline.report.markdown import render_markdown
from onnx_roofline.report.plot import write_plot
from onnx_roofline.report.serialize import render_csv, render_json
from onnx_roofline.report.table import render_table
from onnx_roofline.report.units import si
from onnx_roofline.tensors import PRECISIONS

# Modules that add a subcommand: each has `add_command(subparsers)`, which registers a parser
# whose `run(options) -> int` default does the work. Add a feature's module here.
COMMAND_MODULES: tuple[str, ...] = ("onnx_roofline.gate.command", "onnx_roofline.verify.command", "onnx_roofline.whatif.command", "onnx_roofline.report.plot_command")


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    parser, subcommands = _parser()
    if args and args[0] not in subcommands and args[0] not in ("-h", "--help", "--version"):
        args.insert(0, "analyze")  # `onnx-roofline model.onnx` is `onnx-roofline analyze model.onnx`
    options = parser.parse_args(args)
    if not hasattr(options, "run"):
        parser.print_help()
        return EXIT_USAGE
    try:
        return options.run(options)
    except RooflineError as exc:
        print(f"onnx-roofline: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `onnx-roofline ... | head`: the reader left, nothing more to say
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (keeps the interpreter's final flush quiet)
        return EXIT_OK


class _Parser(argparse.ArgumentParser):
    """argparse, with its usage errors on one line and exit code 2 like every other input error."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"onnx-roofline: error: {message} (see --help)\n")


def _parser() -> tuple[argparse.ArgumentParser, list[str]]:
    parser = _Parser(prog="onnx-roofline", description="Roofline analysis of ONNX models: FLOPs, bytes and compute/memory bound per node.")
    parser.add_argument("--version", action="version", version=f"onnx-roofline {__version__}")
    sub = parser.add_subparsers(parser_class=_Parser, metavar="COMMAND")

    run = sub.add_parser("analyze", help="analyze a model (the default: `onnx-roofline MODEL` is the same)")
    add_model_arguments(run)
    run.add_argument("--format", choices=("table", "json", "csv", "markdown", "html"), default="table", help="output format (default: table)")
    run.add_argument("-o", "--output", metavar="FILE", help="write the output to FILE (atomically) instead of stdout")
    run.add_argument("--top", type=int, default=15, metavar="N", help="nodes listed in the table (default: 15)")
    run.add_argument("--by", action="append", choices=("op-type", "module"), help="breakdowns in table/markdown/html (repeatable; default: op-type)")
    run.add_argument("--depth", type=int, default=3, metavar="N", help="module level of --by module: 3 = GPT-2 layers, 4 = attn/mlp (default: 3)")
    run.add_argument("--annotate", metavar="OUT.onnx", help="also write the model annotated for Netron (+ OUT.netron.json); see docs/outputs.md")
    run.add_argument("--plot", metavar="FILE.png|svg", help="also write the roofline plot")
    run.set_defaults(run=_run_analyze)

    hw = sub.add_parser("hw", help="the hardware table")
    hw_sub = hw.add_subparsers(parser_class=_Parser, metavar="{list,show,calibrate}")
    hw_list = hw_sub.add_parser("list", help="every built-in hardware entry, with its source")
    hw_list.set_defaults(run=_run_hw_list)
    hw_show = hw_sub.add_parser("show", help="one entry (built-in name or spec file) in full")
    hw_show.add_argument("name")
    hw_show.set_defaults(run=_run_hw_show)
    importlib.import_module("onnx_roofline.verify.command").add_hw_calibrate(hw_sub)
    for module in COMMAND_MODULES:
        importlib.import_module(module).add_command(sub)
    return parser, list(sub.choices)


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments every subcommand that analyzes a model shares."""
    parser.add_argument("model", help="path to an .onnx file (external weight data need not be present)")
    parser.add_argument("--hw", default="h100", help="hardware name (see `hw list`) or a spec file (default: h100)")
    parser.add_argument("--dim", action="append", default=[], metavar="NAME=N", help="bind a symbolic dimension (repeatable)")
    parser.add_argument("--input", action="append", default=[], metavar="NAME=AxBxC", help="set an input's whole shape (repeatable)")
    parser.add_argument("--partial", action="store_true", help="report nodes blocked by unbound dims as unknown instead of failing")
    parser.add_argument(
        "--dtype", choices=sorted(PRECISIONS), help="cost every floating-point tensor (weights and activations) in this precision"
    )


def analyze_from_options(options: argparse.Namespace):
    dims = dict(parse_dim(text) for text in options.dim)
    shapes = dict(parse_input_shape(text) for text in options.input)
    if len(dims) != len(options.dim):
        raise DimensionError("the same --dim is given twice")
    return analyze(
        options.model, hw=options.hw, dims=dims, input_shapes=shapes, partial=options.partial, precision=options.dtype
    )


def _run_analyze(options: argparse.Namespace) -> int:
    report = analyze_from_options(options)
    by = [OP_TYPE if b == "op-type" else MODULE for b in options.by or ["op-type"]]
    renderers = {
        "table": lambda r: render_table(r, top=options.top, by=by, depth=options.depth), "json": render_json, "csv": render_csv,
        "markdown": lambda r: render_markdown(r, top=options.top, by=by if options.by else (OP_TYPE, MODULE), depth=options.depth),
        "html": lambda r: render_html(r, by=by if options.by else (OP_TYPE, MODULE), depth=options.depth),
    }
    write_text(renderers[options.format](report), options.output, protect=[options.model])
    warn_if_incomplete(report)
    if options.plot:
        write_plot([report], options.plot, protect=[options.model])
    if options.annotate:
        done = annotate(report, options.annotate)
        print(f"annotated model: {done.model} (weights: {done.data_action}); Netron attachment: {done.sidecar}", file=sys.stderr)
    return EXIT_OK


def warn_if_incomplete(report) -> None:
    """A partial answer is said on stderr too, whatever the format: a script reading JSON sees
    it in the report's `uncosted`, a person in the terminal."""
    for warning in report.model.shape_warnings:
        print(f"onnx-roofline: warning: {warning}", file=sys.stderr)
    if report.uncosted.count:
        print(f"onnx-roofline: warning: {report.uncosted.message}; the totals leave them out", file=sys.stderr)


def _run_hw_list(options: argparse.Namespace) -> int:
    for hw in list_hardware():
        matrix = hw.peaks.get("matrix", {})
        headline = max(matrix.items(), key=lambda kv: kv[1]) if matrix else ("fp32", hw.peaks["vector"]["fp32"])
        main_dtype = "bf16" if "bf16" in matrix else headline[0]
        print(
            f"{hw.key:<11} {hw.name:<34} {si(hw.memory_bandwidth, 'B/s'):>11}  "
            f"{main_dtype} {si(hw.peak('matrix', main_dtype)[0], 'FLOP/s'):>14}  ridge {hw.ridge('matrix', main_dtype):7.1f}"
        )
        print(f"{'':<11} source: {hw.source}")
    return EXIT_OK


def _run_hw_show(options: argparse.Namespace) -> int:
    hw = load_hardware(options.name)
    print(f"{hw.key}: {hw.name}\nmemory bandwidth {si(hw.memory_bandwidth, 'B/s')}\nsource: {hw.source}")
    for unit, peaks in hw.peaks.items():
        for dtype, value in peaks.items():
            print(f"  {unit:<6} {dtype:<5} {si(value, 'FLOP/s'):>14}  ridge {value / hw.memory_bandwidth:8.1f}  [{hw.figure_source(unit, dtype)}]")
    return EXIT_OK
