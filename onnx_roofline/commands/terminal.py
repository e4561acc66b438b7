"""What only a terminal shows: colour, progress over several models, and the time a long analysis
has taken. Each checks that its stream is a terminal (never a file or a pipe) and honours NO_COLOR
and TERM=dumb; a few ANSI codes, so no terminal library is imported at start-up."""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator

CLEAR_LINE = "\r\033[K"


def terminal_colours(stream) -> bool:
    """Colour only on a terminal, and never where NO_COLOR is set (no-color.org) or TERM is dumb."""
    return (
        stream is not None and stream.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
    )


def model_progress(stream) -> Callable[[int, int, str], None]:
    """`[3/10] model.onnx` rewritten in place, the line cleared after the last."""

    def say(done: int, total: int, model: str) -> None:
        stream.write(CLEAR_LINE + _fitted(f"[{done}/{total}] {model}") + (CLEAR_LINE if done == total else ""))
        stream.flush()

    return say


@contextlib.contextmanager
def elapsed(what: str, stream, after: float = 1.0, every: float = 0.5) -> Iterator[None]:
    """While the block runs: on a terminal, once it has taken `after` seconds, `what… 3 s`
    rewritten every `every` seconds and cleared when it ends. Nothing for a quick block."""
    if not stream.isatty():
        yield
        return
    done, shown = threading.Event(), threading.Event()
    started = time.monotonic()

    def tick() -> None:
        wait = after
        while not done.wait(wait):
            stream.write(CLEAR_LINE + _fitted(f"{what}… {time.monotonic() - started:.0f} s"))
            stream.flush()
            shown.set()
            wait = every

    thread = threading.Thread(target=tick, name="onnx-roofline elapsed", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        if shown.is_set():
            stream.write(CLEAR_LINE)
            stream.flush()


def _fitted(text: str) -> str:
    """`text` cut to the terminal's width, so rewriting the line never wraps it."""
    return text[: max(shutil.get_terminal_size().columns - 1, 10)]
