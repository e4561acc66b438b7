"""What the commands that analyze a model share: their arguments (model, hardware, dims, values,
assumptions, views, verbosity), the analysis those arguments ask for, and the files a command must
never write over. `cli` and every subcommand's module import it; it imports none of them."""

from __future__ import annotations

import argparse
import contextlib
import sys

from onnx_roofline.commands.terminal import elapsed
from onnx_roofline.errors import DimensionError, one_line


def add_model_arguments(
    parser: argparse.ArgumentParser, many: bool = False, hw: str = "h100", assumptions: bool = True
) -> None:
    """The arguments every subcommand that analyzes a model shares (`many`: one or more models or
    folders, as `analyze` takes; `hw`: the default hardware, a comma-separated list for `compare`;
    `assumptions`: --nonzero-fraction, --expert-load, --frames-per-token and --string-bytes, which `verify` does not
    take: it checks sizes a real run produces)."""
    from onnx_roofline.model.precisions import PRECISIONS

    if many:
        parser.add_argument("model", nargs="+", help="path to an .onnx file (external weight data need not be present); "
                            "several, or a folder, give one summary row per model")  # fmt: skip
    else:
        parser.add_argument("model", help="path to an .onnx file (external weight data need not be present)")
    parser.add_argument(
        "--hw",
        default=hw,
        help=f"hardware name (see `hw list`) or a spec file{'; several, comma-separated' if ',' in hw else ''} (default: {hw})",
    )
    parser.add_argument(
        "--dim", action="append", default=[], metavar="NAME=N", help="bind a symbolic dimension (repeatable)"
    )
    parser.add_argument(
        "--input", action="append", default=[], metavar="NAME=AxBxC", help="set an input's whole shape (repeatable)"
    )
    parser.add_argument(
        "--value",
        action="append",
        default=[],
        metavar="NAME=V",
        help="give a small graph input a value, e.g. a Loop's trip count: --value max_steps=16 (repeatable; N,N,... for a 1-D input)",
    )
    if assumptions:
        parser.add_argument(
            "--nonzero-fraction", type=_fraction, metavar="F",
            help="size every NonZero and Compress whose input is data as if F (0.125, 1/8) of its candidates were selected: "
                 "per NonZero: an MoE expert's chooses among its [top_k, tokens] mask, so 1/num_experts is uniform; "
                 "the report names it and the nodes it sized; it overrides --expert-load",
        )  # fmt: skip
        parser.add_argument(
            "--expert-load", type=_expert_load, metavar="LOAD",
            help="the routing an MoE's experts are sized by: uniform (tokens·k/E rows each, the default), skew=F "
                 "(the choices on E/F hot experts) or capacity=C (every expert at its capacity bound, ceil(C·tokens·k/E) rows); "
                 "the report names it",
        )  # fmt: skip
        parser.add_argument(
            "--frames-per-token", type=_frames, metavar="F",
            help="a length regulator (a TTS model's durations → frames: VITS, FastSpeech, Piper) as if each input token lasted "
                 "F frames (6, 52/8); default 6 (docs/cost-model.md); the report names it and the sums it sized",
        )  # fmt: skip
        parser.add_argument(
            "--string-bytes", type=_string_bytes, metavar="B",
            help="count every string element (a text pipeline's input, its tokens) as B bytes, its average length; "
                 "default 100, a sentence (docs/cost-model.md); also bounds a Tokenizer's tokens a string; the report names it",
        )  # fmt: skip
    parser.add_argument(
        "--partial", action="store_true", help="report nodes blocked by unbound dims as unknown instead of failing"
    )
    parser.add_argument(
        "--dtype",
        choices=sorted(PRECISIONS),
        help="cost every floating-point tensor (weights and activations) in this precision",
    )
    parser.add_argument(
        "--fp32-matmul",
        choices=("ieee", "tf32"),
        default="ieee",
        help="fp32 matmuls in full IEEE fp32 (the default, as cuBLAS and PyTorch run them) or on TF32 tensor cores "
        "(tf32: onnxruntime's CUDA provider and TensorFlow enable it by default)",
    )
    add_verbosity_arguments(parser)


def _expert_load(text: str):
    from onnx_roofline.shapes.routing import ExpertLoad

    try:
        return ExpertLoad.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _string_bytes(text: str) -> int:
    from onnx_roofline.shapes.texts import parse_string_bytes

    try:
        return parse_string_bytes(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _frames(text: str) -> float:
    from onnx_roofline.shapes.durations import parse_frames

    try:
        return parse_frames(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _fraction(text: str) -> float:
    from onnx_roofline.shapes.selection import parse_fraction

    try:
        return parse_fraction(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def count(minimum: int = 0):
    """An argparse type: a whole number of at least `minimum`, refused (exit 2) before any work."""

    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}: {value}")
        return value

    convert.__name__ = "count"
    return convert


def add_verbosity_arguments(parser: argparse.ArgumentParser) -> None:
    """-q/--quiet and -v/--verbose: how much goes to stderr besides errors."""
    loud = parser.add_mutually_exclusive_group()
    loud.add_argument("-q", "--quiet", action="store_true", help="no notes or warnings on stderr (errors still print)")
    loud.add_argument("-v", "--verbose", action="store_true",
                      help="also say on stderr why each default dim was chosen, which shape passes ran and what they typed, and the time taken")  # fmt: skip


def add_view_arguments(parser: argparse.ArgumentParser) -> None:
    """--view and --kv-cache (docs/cost-model.md, "Two views"). The studies' former words for the
    views, `unfused` and `fused`, are taken for `written` and `deployed`."""
    former = {"unfused": "written", "fused": "deployed"}
    parser.add_argument("--view", type=lambda text: former.get(text, text), choices=("written", "deployed"), default="written",
                        help="written: the graph as written, every node round-tripping memory (a lower bound); deployed: folded, "
                             "fused, FlashAttention-style attention, the --kv-cache choice: an estimate of what a runtime runs "
                             "(default: written; unfused and fused, former names, are taken for them)")  # fmt: skip
    parser.add_argument("--launch-overhead", metavar="TIME",
                        help="per-kernel launch overhead for the launch floor reported beside the bound, e.g. 4us, 0 for none "
                             "(default: the hardware entry's)")  # fmt: skip
    parser.add_argument("--launch", choices=("graphs", "eager"), default="graphs",
                        help="the predicted time's kernel launches: replayed from a CUDA graph (graphs, the default: what serving "
                             "engines do for decode) or submitted one by one from the host (eager)")  # fmt: skip
    add_kv_cache_argument(parser)


def add_kv_cache_argument(parser: argparse.ArgumentParser) -> None:
    """--kv-cache: in place by default, in every command (docs/cost-model.md, "KV cache")."""
    parser.add_argument("--kv-cache", choices=("inplace", "copy"), default="inplace",
                        help="a graph that updates a KV cache: updated in place, only the new rows written and one buffer held "
                             "(inplace, the default: what serving engines do) or copied into a new present each step, past and "
                             "present both held (copy: what the graph as written says)")  # fmt: skip


def add_memory_argument(parser: argparse.ArgumentParser) -> None:
    """--memory-utilization: the share of the accelerator's memory a model may hold (costs/capacity.py)."""
    from onnx_roofline.costs.capacity import DEFAULT_MEMORY_UTILIZATION

    parser.add_argument("--memory-utilization", type=_utilization, default=DEFAULT_MEMORY_UTILIZATION, metavar="F",
                        help="what fits: the model's footprint within F × the memory capacity, the rest left to the runtime's "
                             f"workspace, as vLLM's gpu_memory_utilization (default: {DEFAULT_MEMORY_UTILIZATION})")  # fmt: skip


def _utilization(text: str) -> float:
    from onnx_roofline.costs.capacity import checked_utilization

    try:
        return checked_utilization(float(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc) if "utilization" in str(exc) else f"not a number: {text!r}") from None


def hardware_from(options: argparse.Namespace, hw=None):
    """The hardware the options name (`hw`: instead of --hw), with --launch-overhead and
    --memory-utilization applied; as named where neither is given."""
    hardware = with_launch_overhead(hw or options.hw, getattr(options, "launch_overhead", None))
    utilization = getattr(options, "memory_utilization", None)
    if utilization is None:
        return hardware
    from onnx_roofline.costs.hardware import Hardware, load_hardware

    return (hardware if isinstance(hardware, Hardware) else load_hardware(hardware)).with_memory_utilization(
        utilization
    )


def with_launch_overhead(hw, text: str | None):
    """The hardware with --launch-overhead applied (a name or path is loaded first); as is without it."""
    if text is None:
        return hw
    import dataclasses

    from onnx_roofline.commands.gate.quantities import parse_duration
    from onnx_roofline.costs.hardware import Hardware, load_hardware
    from onnx_roofline.errors import HardwareSpecError

    hardware = hw if isinstance(hw, Hardware) else load_hardware(hw)
    try:
        seconds = 0.0 if text.strip() in ("0", "0s", "none") else parse_duration(text)
    except ValueError as exc:
        raise HardwareSpecError(f"--launch-overhead: {exc}") from None
    return dataclasses.replace(hardware, launch_overhead=seconds or None)


def other_view(report, options: argparse.Namespace):
    """The report's other view, which every format shows beside it (the deployed one planned for
    graphs of a usual size, None past OTHER_VIEW_NODES)."""
    from onnx_roofline.views.public import OTHER_VIEW_NODES

    if report.view == "deployed":
        return report.written
    return deployed_from(report, options) if len(report.nodes) <= OTHER_VIEW_NODES else None


def deployed_from(report, options: argparse.Namespace):
    """The deployed view of a written report, with the options' --kv-cache (in place by default)
    and --launch (CUDA graphs by default) for its predicted time."""
    from onnx_roofline.views.deployed import INPLACE, deploy
    from onnx_roofline.views.prediction import DEFAULT_LAUNCH

    return deploy(
        report, getattr(options, "kv_cache", None) or INPLACE, launch=getattr(options, "launch", None) or DEFAULT_LAUNCH
    )


def analyze_from_options(options: argparse.Namespace, default_dims: bool = False):
    """The report the options ask for. `default_dims`: bind the dims left unbound to their
    defaults (onnx_roofline.shapes.defaults) and say so on stderr, unless --partial is given (which
    leaves them unbound); `check` and `verify` stay strict."""
    import time

    from onnx_roofline.analysis import analyze
    from onnx_roofline.shapes.dims import parse_dim, parse_input_shape
    from onnx_roofline.shapes.input_values import parse_value
    from onnx_roofline.shapes.routing import UNIFORM_LOAD
    from onnx_roofline.shapes.sizing import Sizing

    started = time.perf_counter()
    dims = dict(parse_dim(text) for text in options.dim)
    shapes = dict(parse_input_shape(text) for text in options.input)
    values = dict(parse_value(text) for text in options.value)
    if len(dims) != len(options.dim):
        raise DimensionError("the same --dim is given twice")
    quiet = getattr(options, "quiet", False)
    with (
        contextlib.nullcontext() if quiet else elapsed(f"onnx-roofline: analyzing {options.model}", sys.stderr)
    ):  # a long one says so
        sizing = Sizing(dims=dims, input_shapes=shapes, values=values, default_dims=default_dims and not options.partial,
                        nonzero_fraction=getattr(options, "nonzero_fraction", None), expert_load=getattr(options, "expert_load", None) or UNIFORM_LOAD,
                        frames_per_token=getattr(options, "frames_per_token", None), string_bytes=getattr(options, "string_bytes", None))  # fmt: skip
        report = analyze(options.model, hardware_from(options), sizing, partial=options.partial, precision=options.dtype,
                         fp32_matmul=getattr(options, "fp32_matmul", None) or "ieee")  # fmt: skip
    if report.model.defaulted_dims and not quiet:
        _notice_defaults(report)
    if getattr(options, "verbose", False):
        _say_what_ran(report, time.perf_counter() - started)
    return deployed_from(report, options) if getattr(options, "view", None) == "deployed" else report


def refuse_if_nothing_costed(report) -> None:
    """No node at all costed is not an answer: a RooflineError (exit 2, one line) naming the root
    cause and the fix. A partial answer is one (its UNCOSTED block says what it leaves out)."""
    from onnx_roofline.errors import RooflineError
    from onnx_roofline.report.model import UNSUPPORTED

    written = report.written if getattr(report, "written", None) is not None else report
    if not written.nodes or written.totals.costed_nodes:
        return
    cause = written.uncosted.root_cause
    where = f"{cause.name} ({cause.op_type}): {cause.reason}" if cause is not None else "no node to blame"
    advice = written.advice_when_nothing_costed()
    if advice.startswith(
        "see why"
    ):  # the root cause's own reason says what to give, where an input's value or shape would do
        statuses = {node.status for node in written.nodes}
        if statuses == {UNSUPPORTED}:
            advice = "a cost rule for its ops (docs/architecture.md says where one goes; docs/operators.md lists the ops that have one)"
        elif (
            "--value " in where or "--input" in where or "--nonzero-fraction" in where
        ):  # a flag with its argument: "(--value) is given only to ..." names none
            advice = "give what the root cause names"
        else:
            advice = (
                "bind the input shapes (--dim NAME=N, --input NAME=AxB) or see docs/cost-model.md on uncosted nodes"
            )
    raise RooflineError(
        f"none of the {len(written.nodes)} nodes could be costed, so there is no answer: the root cause is {where}; fix: {advice}"
    )


def warn_invalid(invalid, model: str | None = None) -> None:
    """A file a runtime would refuse (model/conformance.py: `invalid`, its findings), said last,
    once every output is written (a refused output is the one line then), and even with --quiet:
    by analyze, and by every study of one model (what-if sessions check the file once). `model`:
    the file named, where a command reads a second one (serve's --prefill)."""
    named = "" if model is None else f"{model}: "
    for flag in invalid:
        print(f"onnx-roofline: warning: INVALID: {named}{one_line(str(flag))}", file=sys.stderr)


def protected_files(options: argparse.Namespace, *more: str | None, report=None) -> tuple:
    """What a command's outputs must never replace: the model and its external-data files (as the
    analysis `report` of it found them; else read again, only when some output goes to a file),
    and `more` (a policy, a baseline)."""
    from onnx_roofline.model.files import named_files
    from onnx_roofline.model.loader import referenced_files

    outputs = [getattr(options, name, None) for name in ("output", "plot", "annotate", "junit")]
    if report is not None and report.model.path == str(options.model):
        model = named_files(options.model, report.data_files)
    else:
        model = referenced_files(options.model) if any(o not in (None, "-") for o in outputs) else (options.model,)
    return (*model, *(path for path in more if path))


def _notice_defaults(report) -> None:
    """One line on stderr naming each default taken with its role (unless --quiet), and a warning
    for a node the defaults cannot run (model.implausible)."""
    from onnx_roofline.shapes.defaults import notice

    why = _default_reasons(report.model)
    notice_text = notice({name: (report.model.dims[name], why[name]) for name in report.model.defaulted_dims})
    print(f"onnx-roofline: note: {one_line(notice_text)}", file=sys.stderr)
    for flag in report.model.implausible:
        print(f"onnx-roofline: warning: IMPLAUSIBLE: {one_line(flag.message)}", file=sys.stderr)


def _default_reasons(model) -> dict[str, str]:
    """Why each defaulted dim took its size: its role (shapes/roles.py) where its name does not say
    it, or what in the graph fixes it (model.solved_dims); "name" where the name says it."""
    said = {name: role.said for name, role in model.dim_roles.items() if role.said}
    return {
        name: model.solved_dims.get(name) or (f"{said[name]}" if name in said else "name")
        for name in model.defaulted_dims
    }


def _say_what_ran(report, seconds: float) -> None:
    """--verbose: the dims and where each came from, the shape passes and what they typed, the
    nodes by status, the hardware figures' source, the time taken."""
    model = report.model
    why = _default_reasons(model)
    why = {
        k: model.dim_roles[k].role if reason == "name" and k in model.dim_roles else reason for k, reason in why.items()
    }  # the name's rule: its role
    dims = ", ".join(
        f"{k}={v}" + (f" (default: {why[k]})" if k in why else " (given)") for k, v in sorted(model.dims.items())
    )
    outputs = [t for node in report.nodes for t in node.outputs if t is not None]
    typed = sum(1 for t in outputs if t.is_known)
    statuses = ", ".join(f"{status} {count}" for status, count in report.status_counts.items())
    lines = [
        f"dims: {dims or 'none'}",
        f"shape passes: {model.shape_inference} (ONNX's inference{', then the sweep: our shape rules, per-node inference, folding' if 'sweep' in model.shape_inference else ''}); "
        f"{typed:,} of {len(outputs):,} node outputs typed"
        + (f"; failed: {'; '.join(model.shape_warnings)}" if model.shape_warnings else ""),
        f"nodes: {statuses}",
        f"hardware: {report.hardware.key} ({report.hardware.name}), figures from {report.hardware.source}",
        f"analyzed in {seconds:.2f} s",
    ]
    for line in lines:
        print(f"onnx-roofline: {one_line(line)}", file=sys.stderr)
