"""`onnx-roofline serve MODEL --tp 1,2,4,8 --context N [--prompt N --prefill MODEL]`: the serving
envelope of a decoder over batch sizes and tensor-parallel degrees (serve.py)."""

from __future__ import annotations

import argparse

from onnx_roofline.commands.arguments import (
    add_kv_cache_argument,
    add_memory_argument,
    add_model_arguments,
    count,
    warn_invalid,
)
from onnx_roofline.commands.listing import COMMAND_HELP
from onnx_roofline.commands.whatif.command import _emit, _no_lists, _session, parse_dim_values

DEFAULT_BATCHES = "1,2,4,8,16,32,64,128,256,512"


def add_command(subparsers: argparse._SubParsersAction) -> None:
    help_text = COMMAND_HELP["serve"]
    parser = subparsers.add_parser("serve", help=help_text, description=(
        "Serving envelope of a decoder (decode graph or merged decoder), deployed view: per batch and tensor-parallel degree the "
        "decode step's latency and tokens/s, the time to first token, the memory each GPU holds and whether it fits; the largest "
        "batch that fits and the batch that turns compute-bound. The Megatron split is inferred from the graph's structure."))  # fmt: skip
    add_model_arguments(parser)
    parser.add_argument(
        "--tp", default="1", metavar="N1,N2,...", help="tensor-parallel degrees (default: 1), e.g. 1,2,4,8"
    )
    parser.add_argument(
        "--batch", default=DEFAULT_BATCHES, metavar="B1,B2,...", help=f"batch sizes (default: {DEFAULT_BATCHES})"
    )
    parser.add_argument("--context", type=count(1), default=1024, metavar="N",
                        help="tokens a decode step attends to, the past bound to N - 1 (default: 1024)")  # fmt: skip
    parser.add_argument(
        "--prompt", type=count(1), metavar="N", help="prompt tokens: the time to first token is their prefill"
    )
    parser.add_argument(
        "--prefill",
        metavar="MODEL",
        help="the prefill graph for --prompt (default: the model, where its sequence is symbolic)",
    )
    add_kv_cache_argument(parser)
    add_memory_argument(parser)
    parser.add_argument("--format", choices=("table", "json"), default="table", help="output format (default: table)")
    parser.add_argument(
        "-o", "--output", metavar="FILE", help="write the output to FILE (atomically) instead of stdout"
    )
    parser.add_argument(
        "--plot", metavar="FILE", help="also draw throughput against per-token latency to FILE (.png or .svg)"
    )
    parser.set_defaults(run=_run_serve)


def _run_serve(options: argparse.Namespace) -> int:
    from onnx_roofline.commands.whatif.serve import serve
    from onnx_roofline.commands.whatif.serve_plot import serve_figure
    from onnx_roofline.commands.whatif.serve_render import render_serve
    from onnx_roofline.commands.whatif.session import Session

    session, axes = _session(options)
    _no_lists(axes, "serve")
    degrees = parse_dim_values(f"tp={options.tp}")[1]
    batches = parse_dim_values(f"batch={options.batch}")[1]
    prefill = (
        None
        if options.prefill is None
        else Session(options.prefill, session.hardware, precision=options.dtype, kv_cache=session.kv_cache)
    )
    result = serve(session, degrees, batches, options.context, options.prompt, prefill)
    code = _emit(options, session, result, render_serve, serve_figure)
    if prefill is not None:
        warn_invalid(prefill.invalid, options.prefill)
    return code
