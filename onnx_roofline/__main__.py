"""`python -m onnx_roofline` and the `onnx-roofline` script: `run` imports the command line inside
its own handler, so a Ctrl-C while Python is still loading it is a quiet exit 130 too."""

import os
import sys
from typing import NoReturn


def run() -> NoReturn:
    sys.unraisablehook = _exit_on_a_lost_interrupt
    try:
        from onnx_roofline.commands.cli import main
    except KeyboardInterrupt:
        _exit_now(130)
    _exit_now(main())


def _exit_now(code: int) -> NoReturn:
    """The process ended as the command returns, past the interpreter's teardown (freeing every
    module, onnx's and numpy's among them: ~40 ms, an eighth of a table on ResNet-50), as mypy
    ends. Nothing is left to it: the outputs are written and closed by then (report/output.py),
    a child beside reaped (model/isolation.py), a `-j` pool shut down (commands/summary.py).
    What is still buffered on stdout and stderr is flushed first; a flush that fails ends it
    with the interpreter's own status for that, 120."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            code = 120
    os._exit(code)


def _exit_on_a_lost_interrupt(unraisable) -> None:
    """A Ctrl-C that lands in code Python cannot raise from (a weakref callback of the import
    machinery, a finalizer) would be printed as "Exception ignored" and lost, the run going on:
    exit 130 there, quietly. What the user owns is safe: an output replaces its target only by a
    rename, so a write stopped here leaves at most the run's hidden folder beside it (report/output.py)."""
    if unraisable.exc_type is not None and issubclass(unraisable.exc_type, KeyboardInterrupt):
        os._exit(130)
    sys.__unraisablehook__(unraisable)


if __name__ == "__main__":
    run()
