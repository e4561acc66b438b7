"""`onnx-roofline plot a.json b.json -o x.png`: one roofline plot of saved JSON reports, overlaid."""

from __future__ import annotations

import argparse

from onnx_roofline.commands.listing import COMMAND_HELP
from onnx_roofline.errors import EXIT_OK, RooflineError
from onnx_roofline.model import files
from onnx_roofline.report.model import SCHEMA_VERSION
from onnx_roofline.report.plot import COLOR_BY, write_plot


def add_command(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("plot", help=COMMAND_HELP["plot"])
    parser.add_argument("reports", nargs="+", metavar="REPORT.json")
    parser.add_argument(
        "-o", "--output", required=True, metavar="FILE.png|svg", help="the plot (the format follows the extension)"
    )
    parser.add_argument(
        "--label", action="append", metavar="TEXT", help="a name per report, in order (default: the model files' names)"
    )
    parser.add_argument("--color-by", type=lambda text: text.replace("_", "-"), choices=[c.replace("_", "-") for c in COLOR_BY],
                        help="op-type (one report's default), bound, or report (an overlay's default); spelt as --by spells it")  # fmt: skip
    parser.add_argument("--title", help="the plot's title")
    parser.set_defaults(run=run_plot)


def run_plot(options: argparse.Namespace) -> int:
    if options.label and len(options.label) != len(options.reports):
        raise RooflineError(f"{len(options.label)} --label for {len(options.reports)} reports: give one per report")
    reports = [load_report(path) for path in options.reports]
    try:
        color_by = options.color_by.replace("-", "_") if options.color_by else None  # the plot's own name: op_type
        write_plot(
            reports,
            options.output,
            protect=options.reports,
            labels=options.label,
            color_by=color_by,
            title=options.title,
        )
    except ValueError as exc:
        raise RooflineError(str(exc)) from None
    return EXIT_OK


def load_report(path: str) -> dict:
    """A saved `--format json` report, checked to be one."""
    data = files.read_json(path, "report", RooflineError)
    if not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION or "nodes" not in data:
        raise RooflineError(f"not an onnx-roofline JSON report (schema_version {SCHEMA_VERSION}): {path}")
    return data
