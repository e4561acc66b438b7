"""`onnx-roofline verify MODEL` and `onnx-roofline hw calibrate -o spec.toml` (cli.py wires
`add_hw_calibrate` into the `hw` subcommands; `calibrate`, its former name, still works, unlisted)."""

from __future__ import annotations

import argparse
import sys

from onnx_roofline.commands.verify.limits import Budget
from onnx_roofline.errors import EXIT_FAIL, EXIT_OK, DimensionError
from onnx_roofline.report.output import check_destination, write_text

MAX_MATMUL_SIZE = 16384  # [N,N] fp32 is 1 GiB; calibration holds three
MAX_STREAM_MIB = 16384
MAX_REPEATS = 10_000
MAX_THREADS = 4096


def add_command(subparsers) -> None:
    from onnx_roofline.commands.arguments import add_model_arguments
    from onnx_roofline.commands.listing import COMMAND_HELP

    verify = subparsers.add_parser("verify", help=COMMAND_HELP["verify"])
    add_model_arguments(verify, assumptions=False)
    verify.add_argument("--seed", type=int, default=0, help="seed of the synthesized weights and inputs (default: 0)")
    verify.add_argument(
        "--threads", type=_up_to(MAX_THREADS), metavar="N", help="onnxruntime intra-op threads (default: its own)"
    )
    verify.add_argument(
        "--timing",
        action="store_true",
        help="also time every node against its roofline bound (use a `hw calibrate` spec as --hw)",
    )
    verify.add_argument("--runs", type=_positive, default=10, metavar="N", help="timed runs, median kept (default: 10)")
    verify.add_argument(
        "--warmup", type=_non_negative, default=3, metavar="N", help="untimed warm-up runs (default: 3)"
    )
    verify.add_argument(
        "--margin",
        type=_fraction,
        default=0.25,
        metavar="F",
        help="noise margin: a node beats its bound below bound/(1+F) (default: 0.25)",
    )
    verify.add_argument(
        "--optimized",
        action="store_true",
        help="time with onnxruntime's fusions on; fused kernels are attributed, not judged",
    )
    verify.add_argument(
        "--max-flops",
        type=_amount,
        default=Budget.max_flops,
        metavar="N",
        help=f"refuse a run the analysis costs above N FLOPs, e.g. 5e12 (default: {Budget.max_flops:.0e})",
    )
    verify.add_argument(
        "--max-memory",
        type=_amount,
        default=Budget.max_memory,
        metavar="BYTES",
        help="refuse a run needing more memory: weights, feeds, node outputs (default: 4GiB)",
    )
    verify.add_argument(
        "--max-node-runs",
        type=_amount,
        default=Budget.max_node_runs,
        metavar="N",
        help=f"refuse a run of more kernel launches, a Loop's body once per trip (default: {Budget.max_node_runs:.0e})",
    )
    verify.add_argument(
        "--strict",
        action="store_true",
        help="fail (exit 1) when any node could not be checked; without it the verdict is INCOMPLETE, exit 0",
    )
    verify.add_argument("--format", choices=("table", "json"), default="table", help="output format (default: table)")
    verify.add_argument(
        "-o", "--output", metavar="FILE", help="write the output to FILE (atomically) instead of stdout"
    )
    verify.set_defaults(run=run_verify)
    former = subparsers.add_parser(
        "calibrate", description="The former name of `onnx-roofline hw calibrate`."
    )  # no help: not listed
    _add_calibrate_arguments(former)
    former.set_defaults(former_name=True)


def add_hw_calibrate(hw_subparsers) -> None:
    """`onnx-roofline hw calibrate`: calibration's one home, beside the hardware table it writes for."""
    _add_calibrate_arguments(
        hw_subparsers.add_parser("calibrate", help="measure this machine's peak and bandwidth; write a --hw spec file")
    )


def _add_calibrate_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", metavar="FILE", help="the spec file to write (TOML; default: print it)")
    parser.add_argument("--name", default="this CPU (calibrated)", help="the spec's name")
    parser.add_argument(
        "--runs", type=_positive, default=5, metavar="N", help="measured runs per kernel, best kept (default: 5)"
    )
    parser.add_argument(
        "--warmup", type=_non_negative, default=2, metavar="N", help="warm-up runs per kernel (default: 2)"
    )
    parser.add_argument(
        "--size",
        type=_up_to(MAX_MATMUL_SIZE, 256),
        default=2048,
        metavar="N",
        help=f"MatMul is [N,N]x[N,N], 256 to {MAX_MATMUL_SIZE} (default: 2048)",
    )
    parser.add_argument(
        "--stream-mib",
        type=_up_to(MAX_STREAM_MIB),
        default=512,
        metavar="MIB",
        help=f"size of each Add array, well above the last-level cache, at most {MAX_STREAM_MIB} (default: 512)",
    )
    parser.add_argument(
        "--threads", type=_up_to(MAX_THREADS), metavar="N", help="onnxruntime intra-op threads (default: its own)"
    )
    parser.set_defaults(run=run_calibrate)


def run_verify(options: argparse.Namespace) -> int:
    from onnx_roofline.commands.arguments import protected_files
    from onnx_roofline.commands.verify.errors import VerifyError
    from onnx_roofline.commands.verify.pipeline import verify
    from onnx_roofline.commands.verify.render import render_json, render_text
    from onnx_roofline.shapes.dims import parse_dim, parse_input_shape
    from onnx_roofline.shapes.input_values import parse_value

    if getattr(options, "dtype", None):
        raise VerifyError("--dtype is a what-if precision; verify checks the model as stored, without it")
    if getattr(options, "partial", False):
        raise VerifyError("--partial leaves dims unbound, and verify runs the model: bind every dim (--dim NAME=N)")
    dims = dict(parse_dim(text) for text in options.dim)
    if len(dims) != len(options.dim):
        raise DimensionError("the same --dim is given twice")
    shapes = dict(parse_input_shape(text) for text in options.input)
    timing = None
    if options.timing:
        timing = {
            "runs": options.runs,
            "warmup": options.warmup,
            "margin": options.margin,
            "optimize": options.optimized,
        }
    values = dict(parse_value(text) for text in options.value)
    budget = Budget(options.max_flops, options.max_memory, options.max_node_runs)
    result = verify(
        options.model,
        hw=options.hw,
        dims=dims,
        input_shapes=shapes,
        seed=options.seed,
        threads=options.threads,
        timing=timing,
        budget=budget,
        values=values,
        strict=options.strict,
    )
    text = render_json(result) if options.format == "json" else render_text(result)
    write_text(text, options.output, protect=protected_files(options))
    return EXIT_FAIL if result.verdict in ("fail", "invalid") else EXIT_OK


def run_calibrate(options: argparse.Namespace) -> int:
    from onnx_roofline.commands.verify.calibrate import calibrate
    from onnx_roofline.report.units import si

    if options.output not in (None, "-"):
        check_destination(options.output)  # a typo in -o is found before minutes of measuring, not after
    if getattr(options, "former_name", False):
        print("onnx-roofline: note: `calibrate` is now `hw calibrate`; the old name still works", file=sys.stderr)
    result = calibrate(
        runs=options.runs,
        warmup=options.warmup,
        matmul_size=options.size,
        stream_bytes=options.stream_mib * 2**20,
        threads=options.threads,
    )
    write_text(result.spec_toml(options.name), options.output)
    if options.output:
        peaks = ", ".join(f"{dtype} {si(m.rate, 'FLOP/s')}" for dtype, m in result.peaks.items())
        print(
            f"wrote {options.output}: {peaks}; bandwidth {si(result.bandwidth.rate, 'B/s')} "
            f"(best of {options.runs} runs); use it with --hw {options.output}"
        )
    return EXIT_OK


def _up_to(high: int, low: int = 1):
    """An argparse type: a whole number from `low` to `high` (ASCII digits: `isdigit` takes "²")."""

    def whole(text: str) -> int:
        digits = text.strip()
        if not (digits.isascii() and digits.isdigit()) or len(digits) > 12 or not low <= int(digits) <= high:
            kind = "non-negative integer" if low == 0 else "positive integer" + (f" from {low}" if low > 1 else "")
            raise argparse.ArgumentTypeError(f"expected a {kind} up to {high}, got {text[:40]!r}")
        return int(digits)

    whole.__name__ = "number"
    return whole


_positive = _up_to(MAX_REPEATS)
_non_negative = _up_to(MAX_REPEATS, 0)


def _amount(text: str) -> int:
    from onnx_roofline.commands.gate.quantities import parse_amount

    try:
        return parse_amount(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < 10:
        raise argparse.ArgumentTypeError(f"expected a margin like 0.25 (0 to 10), got {text!r}")
    return value
