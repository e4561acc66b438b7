"""`python -m onnx_roofline` and the `onnx-roofline` script: `run` imports the command line inside
its own handler, so a Ctrl-C while Python is still loading it is a quiet exit 130 too."""

import sys


def run() -> int:
    try:
        from onnx_roofline.cli import main
    except KeyboardInterrupt:
        return 130
    return main()


if __name__ == "__main__":
    sys.exit(run())
