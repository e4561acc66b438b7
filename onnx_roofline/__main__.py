"""`python -m onnx_roofline` and the `onnx-roofline` script: `run` imports the command line inside
its own handler, so a Ctrl-C while Python is still loading it is a quiet exit 130 too."""

import os
import sys


def run() -> int:
    sys.unraisablehook = _exit_on_a_lost_interrupt
    try:
        from onnx_roofline.commands.cli import main
    except KeyboardInterrupt:
        return 130
    return main()


def _exit_on_a_lost_interrupt(unraisable) -> None:
    """A Ctrl-C that lands in code Python cannot raise from (a weakref callback of the import
    machinery, a finalizer) would be printed as "Exception ignored" and lost, the run going on:
    exit 130 there, quietly. What the user owns is safe: an output replaces its target only by a
    rename, so a write stopped here leaves at most the run's hidden folder beside it (report/output.py)."""
    if unraisable.exc_type is not None and issubclass(unraisable.exc_type, KeyboardInterrupt):
        os._exit(130)
    sys.__unraisablehook__(unraisable)


if __name__ == "__main__":
    sys.exit(run())
