"""stdout for the command line: a write that fails is one line (exit 74), not a traceback.

Apart from report/output.py (files written atomically), which imports what reading and writing
files needs: the command line wraps stdout in `Stdout` on every run, `--version` included, and
this module costs it nothing beyond the errors."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable

from onnx_roofline.errors import OutputError


def write_stdout(pieces: Iterable[str]) -> None:
    """Each piece to stdout, then flushed: what fails is said here, not by the interpreter at exit."""
    stream = sys.stdout if isinstance(sys.stdout, Stdout) else Stdout(sys.stdout)
    for piece in pieces:
        stream.write(piece)
    stream.flush()


def flush_stdout() -> None:
    """What a command printed, flushed while a failure can still be said in one line."""
    (sys.stdout if isinstance(sys.stdout, Stdout) else Stdout(sys.stdout)).flush()


class Stdout:
    """stdout, where a write that fails is an OutputError (one line, exit 74) rather than a
    traceback: a full disk, an I/O error, stdout closed at start (`>&-`, where Python's own is
    None). A reader that left (`| head -1`) stays the BrokenPipeError on which the command line
    ends quietly. The command line prints through one (cli.main)."""

    def __init__(self, stream) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        if self.stream is None:
            raise OutputError("cannot write the output: stdout is closed (give -o FILE to write it to a file)")
        _on_stdout(self.stream.write, text)
        return len(text)

    def flush(self) -> None:
        if self.stream is not None:
            _on_stdout(self.stream.flush)

    def isatty(self) -> bool:
        return self.stream is not None and self.stream.isatty()

    def __getattr__(self, name: str):
        return getattr(self.stream, name)


def _on_stdout(call: Callable, *args) -> None:
    try:
        call(*args)
    except BrokenPipeError:
        raise  # the reader left: the command line ends quietly
    except (OSError, ValueError) as exc:  # ValueError: stdout closed under us
        raise OutputError(f"cannot write the output to stdout: {os_reason(exc)}") from None


def os_reason(exc: BaseException) -> str:
    """An OSError's words (its strerror), else the exception's text."""
    return getattr(exc, "strerror", None) or str(exc)
