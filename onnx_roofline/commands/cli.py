"""The command line: `onnx-roofline MODEL --hw h100` and its subcommands.

Exit codes: 0 success, 1 a check found a problem, 2 bad input (one line on stderr, no traceback),
74 an output could not be written (a full disk, stdout closed), 130 interrupted, 141 the reader of
stdout left (`| head -1`: nothing said). Importing this module loads nothing heavy: onnx, numpy
and the analysis load inside `main`, so a Ctrl-C during start-up is an exit 130 too, not a
traceback from an import."""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
from collections.abc import Sequence

from onnx_roofline.commands.listing import COMMAND_HELP
from onnx_roofline.errors import (
    EXIT_BROKEN_PIPE,
    EXIT_OK,
    EXIT_OUTPUT,
    EXIT_USAGE,
    OutputError,
    RooflineError,
    one_line,
)
from onnx_roofline.report.stdout import Stdout, flush_stdout
from onnx_roofline.version import __version__

TYPE_CHECKING = False  # typing's own constant, without importing typing at start-up
if TYPE_CHECKING:
    from typing import Any

# The modules that add subcommands, by the commands each adds: each has `add_command(subparsers)`,
# which registers their parsers, whose `run(options) -> int` default does the work. A command
# line imports only the module of the command it runs (all of them for the top-level --help):
# `onnx-roofline MODEL` and --version load none. Add a feature's module and commands here.
COMMAND_MODULES: dict[str, tuple[str, ...]] = {
    "onnx_roofline.commands.gate.command": ("check",),
    "onnx_roofline.commands.verify.command": ("verify", "calibrate"),
    "onnx_roofline.commands.whatif.command": ("sweep", "critical", "compare", "fuse", "context"),
    "onnx_roofline.commands.whatif.serve_command": ("serve",),
    "onnx_roofline.commands.plot": ("plot",),
    "onnx_roofline.commands.inspect": ("inspect",),
    "onnx_roofline.commands.diff": ("diff",),
}


def main(argv: Sequence[str] | None = None) -> int:
    streams = sys.stdout, sys.stderr
    sys.stdout, stderr = Stdout(sys.stdout), _Stderr(sys.stderr)
    sys.stderr = stderr
    try:
        code = _main(argv)
    finally:
        sys.stdout, sys.stderr = streams
    if stderr.lost is not None and code == EXIT_OK:  # a warning could not be said: the run is not a clean one
        return EXIT_BROKEN_PIPE if isinstance(stderr.lost, BrokenPipeError) else EXIT_OUTPUT
    return code


def _main(argv: Sequence[str] | None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    typed = tuple(args)  # as the user typed them: an error's suggested command starts from these
    try:
        if args and args[0] not in _COMMANDS and args[0] not in ("-h", "--help", "--version"):
            args.insert(0, "analyze")  # `onnx-roofline model.onnx` is `onnx-roofline analyze model.onnx`
        parser = _parser(args[0] if args else None)
        options = parser.parse_args(args)
        if not hasattr(options, "run"):
            parser.print_help()
            return EXIT_USAGE
        if args[0] != "hw":  # every command but `hw` reads a model
            _import_onnx()
        code = options.run(options)
        flush_stdout()  # what a command printed: a full disk said here, not by the interpreter at exit
        return code
    except RooflineError as exc:
        if isinstance(exc, OutputError):
            _discard_stdout()
        print(f"onnx-roofline: error: {one_line(exc.for_command_line(typed))}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `onnx-roofline ... | head`: the reader left, nothing more to say
        _discard_stdout()
        return EXIT_BROKEN_PIPE


def _discard_stdout() -> None:
    """stdout failed (a full disk, a reader gone): what is still buffered goes to /dev/null, so that
    the interpreter's own flush at exit has nothing to say. (A stream that is not a file, a test's
    capture, has no such flush.)"""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (AttributeError, OSError, ValueError):
        pass


class _Stderr:
    """stderr as the commands write it: a line that cannot be written (a full disk, a reader gone,
    stderr closed at start) is dropped, where a traceback could not be printed either, and the
    failure is remembered (`lost`): the run then exits EXIT_OUTPUT rather than 0."""

    def __init__(self, stream) -> None:
        self.stream = stream
        self.lost: BaseException | None = None

    def write(self, text: str) -> int:
        if self.stream is not None and self.lost is None:
            try:
                self.stream.write(text)
                self.stream.flush()
            except (OSError, ValueError) as exc:
                self.lost = exc
        return len(text)

    def flush(self) -> None:
        pass  # each write is flushed

    def isatty(self) -> bool:
        return self.stream is not None and self.stream.isatty()

    def __getattr__(self, name: str):
        return getattr(self.stream, name)


def _import_onnx() -> None:
    """onnx's C++ extension registers its enums by calling back into Python while it loads: a
    Ctrl-C landing there cannot unwind through C++, and the process aborts (std::terminate, a
    traceback on stderr). The import runs with the interrupt held; one that came is raised after."""
    held: list[int] = []
    try:
        previous = signal.signal(signal.SIGINT, lambda signum, frame: held.append(signum))
    except ValueError:  # not the main thread: signals are not ours to handle
        import onnx  # noqa: F401

        return
    try:
        import onnx  # noqa: F401
    finally:
        signal.signal(signal.SIGINT, previous)
    if held:
        raise KeyboardInterrupt


class _Parser(argparse.ArgumentParser):
    """argparse, with its usage errors on one line and exit code 2 like every other input error."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"onnx-roofline: error: {one_line(message)} (see --help)\n")


_COMMANDS = {"analyze", "hw", *(command for commands in COMMAND_MODULES.values() for command in commands)}


def _parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser, with the subcommands `command` (the first argument) needs: for the help that
    lists them (no argument, -h, --help) each one's name and line alone, none for --version."""
    parser = _Parser(
        prog="onnx-roofline",
        description="Roofline analysis of ONNX models: FLOPs, bytes and compute/memory bound per node.",
    )
    parser.add_argument("--version", action="version", version=f"onnx-roofline {__version__}")
    if command == "--version":
        return parser  # argparse prints it before reading any command: building them is start-up spent for nothing
    from onnx_roofline.commands.arguments import add_memory_argument, add_model_arguments, add_view_arguments, count

    sub = parser.add_subparsers(parser_class=_Parser, metavar="COMMAND")

    run = sub.add_parser("analyze", help="analyze a model (the default: `onnx-roofline MODEL` is the same)")
    add_model_arguments(run, many=True)
    run.add_argument(
        "-j",
        "--jobs",
        type=count(1),
        default=1,
        metavar="N",
        help="several models: analyze N at a time, in processes (default: 1)",
    )
    run.add_argument(
        "--format",
        choices=("table", "json", "csv", "markdown", "html"),
        default="table",
        help="output format (default: table)",
    )
    run.add_argument("-o", "--output", metavar="FILE", help="write the output to FILE (atomically) instead of stdout")
    run.add_argument("--top", type=count(), default=15, metavar="N", help="nodes listed in the table (default: 15)")
    run.add_argument(
        "--by",
        action="append",
        choices=("op-type", "module"),
        help="breakdowns in table/markdown/html (repeatable; default: op-type)",
    )
    run.add_argument(
        "--depth",
        type=count(1),
        default=3,
        metavar="N",
        help="module level of --by module: 3 = GPT-2 layers, 4 = attn/mlp (default: 3)",
    )
    run.add_argument(
        "--annotate",
        metavar="OUT.onnx",
        help="also write the model annotated for Netron (+ OUT.netron.json); see docs/outputs.md",
    )
    run.add_argument("--plot", metavar="FILE.png|svg", help="also write the roofline plot")
    run.add_argument("--group", action="store_true",
                     help="table: alike nodes of different layers as one row (c_fc/Gemm ×12), modules totalled across layers (h.*.mlp)")  # fmt: skip
    add_view_arguments(run)
    add_memory_argument(run)
    run.set_defaults(run=_run_analyze)

    hw = sub.add_parser("hw", help="the hardware table")
    hw_sub = hw.add_subparsers(parser_class=_Parser, metavar="{list,show,calibrate}")
    hw_list = hw_sub.add_parser("list", help="every built-in hardware entry, with its source")
    hw_list.set_defaults(run=_run_hw_list)
    hw_show = hw_sub.add_parser("show", help="one entry (built-in name or spec file) in full")
    hw_show.add_argument("name")
    hw_show.set_defaults(run=_run_hw_show)
    if command in (
        None,
        "-h",
        "--help",
    ):  # the list alone, each command's line from COMMAND_HELP: no command module imported
        for name in (name for commands in COMMAND_MODULES.values() for name in commands):
            listed: dict[str, Any] = {"help": COMMAND_HELP[name]} if name in COMMAND_HELP else {}
            sub.add_parser(name, **listed)
        return parser
    if command == "hw":
        importlib.import_module("onnx_roofline.commands.verify.command").add_hw_calibrate(hw_sub)
    for module, commands in COMMAND_MODULES.items():
        if command in commands:
            importlib.import_module(module).add_command(sub)
    return parser


def _run_analyze(options: argparse.Namespace) -> int:
    from onnx_roofline.commands.arguments import (
        analyze_from_options,
        other_view,
        protected_files,
        refuse_if_nothing_costed,
        warn_invalid,
    )
    from onnx_roofline.commands.terminal import terminal_colours
    from onnx_roofline.report.breakdown import MODULE, OP_TYPE
    from onnx_roofline.report.output import write_text

    if len(options.model) > 1 or os.path.isdir(options.model[0]):
        return _run_summary(options)
    options.model = options.model[0]
    _check_outputs(options)
    report = analyze_from_options(options, default_dims=True)
    refuse_if_nothing_costed(report)  # exit 2, the root cause and the fix: not a table of unknowns
    by = [OP_TYPE if b == "op-type" else MODULE for b in options.by or ["op-type"]]

    def other():  # the table, JSON, HTML and Markdown show both views' totals (the deployed one planned for graphs of a usual size)
        return other_view(report, options)

    def table(r):
        from onnx_roofline.report.table import render_table

        return render_table(
            r,
            top=options.top,
            by=by,
            depth=options.depth,
            other=other(),
            group=options.group,
            colour=options.output in (None, "-") and terminal_colours(sys.stdout),
        )

    def serialized(name, **options_of):  # JSON in pieces (iter_json): a large report is never one string
        return lambda r: getattr(importlib.import_module("onnx_roofline.report.serialize"), name)(r, **options_of)

    def document(name, **options_of):
        module = importlib.import_module(f"onnx_roofline.report.{name}")
        return lambda r: getattr(module, f"render_{name}")(
            r, by=by if options.by else (OP_TYPE, MODULE), depth=options.depth, other=other(), **options_of
        )

    renderers = {  # each loads its module when its format is asked for
        "table": lambda: table,
        "json": lambda: serialized("iter_json", other=other()),
        "csv": lambda: serialized("render_csv"),
        "markdown": lambda: document("markdown", top=options.top),
        "html": lambda: document("html"),
    }
    protect = protected_files(options, report=report)
    write_text(renderers[options.format]()(report), options.output, protect=protect)
    warn_if_incomplete(report, options.quiet)
    if options.plot:
        from onnx_roofline.report.plot import write_plot

        write_plot([report], options.plot, protect=protect)
    if options.annotate:
        from onnx_roofline.report.annotate import annotate

        done = annotate(
            report.written if report.view == "deployed" else report, options.annotate
        )  # per graph node: as written
        if not options.quiet:
            print(
                f"onnx-roofline: annotated model: {done.model} (weights: {done.data_action}); Netron attachment: {done.sidecar}",
                file=sys.stderr,
            )
    warn_invalid(report.model.invalid)
    return EXIT_OK


def _check_outputs(options: argparse.Namespace) -> None:
    """Every output path checked before the analysis runs: a typo, two outputs named to one file
    (`-o X --annotate X`) or the model named as an output costs nothing, and nothing is printed
    before the error. (The model's data files are known once it is read: they are checked then.)"""
    from onnx_roofline.report.output import check_destinations

    sidecar = None
    if options.annotate:  # the annotating module loaded only where it is asked for
        from onnx_roofline.report.annotate import sidecar_path

        sidecar = sidecar_path(options.annotate)
    outputs = {
        "-o": options.output,
        "--annotate": options.annotate,
        "--plot": options.plot,
        "--annotate's Netron attachment": sidecar,
    }
    check_destinations(outputs, protect=(options.model,))
    if options.plot:
        from onnx_roofline.report.plot import check_plot_destination

        check_plot_destination(options.plot)


def _run_summary(options: argparse.Namespace) -> int:
    """Several models (or a folder): one row each (onnx_roofline.commands.summary)."""
    from onnx_roofline.commands.summary import model_paths, render, summarize
    from onnx_roofline.commands.terminal import model_progress
    from onnx_roofline.report.output import write_text

    if options.format not in ("table", "json", "csv"):
        raise RooflineError(f"--format {options.format} is for one model; several models give a table, json or csv")
    if options.plot or options.annotate:
        raise RooflineError("--plot and --annotate are for one model at a time")
    paths = model_paths(options.model)
    progress = model_progress(sys.stderr) if sys.stderr.isatty() and not options.quiet else None  # silent when piped
    rows = summarize(paths, options, max(options.jobs, 1), progress)
    write_text(render(rows, options.format), options.output, protect=paths)
    if not options.quiet:
        for row in rows:
            if row.uncosted:
                print(
                    f"onnx-roofline: warning: {row.model}: {row.uncosted} of {row.nodes} nodes uncosted",
                    file=sys.stderr,
                )
    return EXIT_USAGE if any(row.error for row in rows) else EXIT_OK


def warn_if_incomplete(report, quiet: bool = False) -> None:
    """A partial answer is said on stderr too, whatever the format: a script reading JSON sees
    it in the report's `uncosted`, a person in the terminal. `quiet` (--quiet): not said."""
    if quiet:
        return
    for warning in report.model.shape_warnings:
        print(f"onnx-roofline: warning: {one_line(warning)}", file=sys.stderr)
    if report.model.assumed is not None:
        print(f"onnx-roofline: warning: assumed: {report.model.assumed.message}", file=sys.stderr)
    for branch in report.model.branches:
        if branch.other is not None:
            print(f"onnx-roofline: warning: branch: {branch.message}", file=sys.stderr)
        elif branch.why.startswith("default"):
            print(f"onnx-roofline: note: branch taken: {branch.message}", file=sys.stderr)
    if report.uncosted.count:
        print(
            f"onnx-roofline: warning: {one_line(report.uncosted.message)}; the totals leave them out", file=sys.stderr
        )
    if report.nodes and not report.totals.costed_nodes:
        print(
            f"onnx-roofline: warning: no node could be costed, so there are no totals: {report.advice_when_nothing_costed()}",
            file=sys.stderr,
        )


def _run_hw_list(options: argparse.Namespace) -> int:
    from onnx_roofline.costs.hardware import list_hardware
    from onnx_roofline.report.units import si

    entries = list_hardware()
    key_width, name_width = (
        max(len(text) for text in column) for column in zip(*((hw.key, hw.name) for hw in entries), strict=False)
    )
    for hw in entries:
        matrix = hw.peaks.get("matrix", {})
        headline = max(matrix.items(), key=lambda kv: kv[1]) if matrix else ("fp32", hw.peaks["vector"]["fp32"])
        main_dtype = "bf16" if "bf16" in matrix else headline[0]
        print(
            f"{hw.key:<{key_width}}  {hw.name:<{name_width}}  {si(hw.memory_bandwidth, 'B/s'):>11}  "
            f"{main_dtype} {si(hw.peak('matrix', main_dtype)[0], 'FLOP/s'):>14}  ridge {hw.ridge('matrix', main_dtype):7.1f}"
        )
        print(f"{'':<{key_width}}  source: {hw.source}")
    return EXIT_OK


def _run_hw_show(options: argparse.Namespace) -> int:
    from onnx_roofline.costs.hardware import load_hardware
    from onnx_roofline.report.units import si

    hw = load_hardware(options.name)
    sources: dict[str, int] = {}  # each source once, numbered: a figure's line names its number

    def cite(text: str) -> str:
        return f"[{sources.setdefault(text, len(sources) + 1)}]"

    lines = [
        f"{hw.key}: {hw.name}",
        f"memory bandwidth {si(hw.memory_bandwidth, 'B/s')}  {cite(hw.figure_source('memory_bandwidth'))}",
    ]
    if hw.memory_capacity is not None:
        lines.append(f"memory capacity {si(hw.memory_capacity, 'B')}  {cite(hw.figure_source('memory_capacity'))}")
    for unit, peaks in hw.peaks.items():
        for dtype, value in peaks.items():
            lines.append(
                f"  {unit:<6} {dtype:<5} {si(value, 'FLOP/s'):>14}  ridge {value / hw.memory_bandwidth:8.1f}  {cite(hw.figure_source(unit, dtype))}"
            )
    lines += ["sources:"] + [f"  [{number}] {text}" for text, number in sources.items()]
    print("\n".join(lines))
    return EXIT_OK
