"""Command line: ``python -m exporters {resnet50,gpt2,all} --out DIR [options]``.

Bad input prints one ``error:`` line and exits 2; each written file is printed with its export time.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from exporters import DTYPE_NAMES, EXPORTERS

# Every committed fixture: (model, options).  ``all`` regenerates exactly these.
FIXTURES = [
    ("resnet50", {"dtype": "fp32"}),
    ("resnet50", {"dtype": "fp16"}),
    ("gpt2", {"phase": "prefill", "dtype": "fp32"}),
    ("gpt2", {"phase": "prefill", "dtype": "fp16"}),
    ("gpt2", {"phase": "decode", "dtype": "fp32"}),
    ("gpt2", {"phase": "decode", "dtype": "fp16"}),
    ("resnet50", {"dtype": "fp32", "exporter": "torchscript"}),
    ("gpt2", {"phase": "prefill", "dtype": "fp32", "exporter": "torchscript"}),
    ("gpt2", {"phase": "decode", "dtype": "fp32", "exporter": "torchscript"}),
]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, not usage + message
        self.exit(2, f"error: {message}\n")


def _batch(value: str) -> int | str:
    if value == "dynamic":
        return value
    if value.isdigit() and int(value) > 0:
        return int(value)
    raise argparse.ArgumentTypeError(f"expected a positive integer or 'dynamic', got {value!r}")


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--out", type=Path, required=True, help="output directory")
    common.add_argument("--seed", type=int, default=0, help="weight seed (default 0)")
    typed = argparse.ArgumentParser(add_help=False)
    typed.add_argument("--dtype", choices=DTYPE_NAMES, default="fp32")
    typed.add_argument("--exporter", choices=EXPORTERS, default="dynamo")

    parser = _Parser(prog="python -m exporters", description="Export the case-study ONNX graphs.")
    sub = parser.add_subparsers(dest="model", required=True, parser_class=_Parser)
    resnet = sub.add_parser("resnet50", parents=[common, typed], help="ResNet-50, input [batch,3,224,224]")
    resnet.add_argument("--batch", type=_batch, default="dynamic", help="N or 'dynamic' (default)")
    gpt2 = sub.add_parser("gpt2", parents=[common, typed], help="GPT-2 small, prefill or decode")
    gpt2.add_argument("--phase", choices=("prefill", "decode"), required=True)
    sub.add_parser("all", parents=[common], help="regenerate every committed fixture")
    return parser


def _export(model: str, out: Path, seed: int, **options) -> Path:
    # Imported here so `--help` and argument errors do not pay for importing torch.
    if model == "resnet50":
        from exporters.resnet import export_resnet50

        return export_resnet50(out, seed=seed, **options)
    from exporters.gpt2 import export_gpt2

    return export_gpt2(out, seed=seed, **options)


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.model == "resnet50" and args.dtype == "bf16":
        parser.error("resnet50 does not support --dtype bf16 (see docs/exporters.md, Dtypes)")
    if args.model == "all":
        jobs = FIXTURES
    else:
        options = {"dtype": args.dtype, "exporter": args.exporter}
        options.update({"batch": args.batch} if args.model == "resnet50" else {"phase": args.phase})
        jobs = [(args.model, options)]
    for model, options in jobs:
        start = time.perf_counter()
        path = _export(model, args.out, args.seed, **options)
        print(f"{path}  ({time.perf_counter() - start:.1f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
