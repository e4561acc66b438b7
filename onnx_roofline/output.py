"""Writing outputs without ever losing what the user owns: atomic replace, never onto an input."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

from onnx_roofline.errors import RooflineError


def write_text(text: str, destination: str | None, protect: Iterable[str] = ()) -> None:
    """Print to stdout, or write `destination` atomically (a temp file in the same folder, then rename)."""
    if destination is None or destination == "-":
        sys.stdout.write(text)
        return
    write_bytes(text.encode(), destination, protect)


def write_bytes(data: bytes, destination: str, protect: Iterable[str] = ()) -> None:
    target = Path(destination)
    for path in protect:
        if Path(path).exists() and target.exists() and target.resolve() == Path(path).resolve():
            raise RooflineError(f"refusing to overwrite the input {path} with an output")
    if not target.parent.is_dir():
        raise RooflineError(f"output folder does not exist: {target.parent}")
    handle, temp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        os.chmod(temp, _mode_for(target))
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def _mode_for(target: Path) -> int:
    """An existing file keeps its permissions; a new one gets the umask's, as open() would give
    (mkstemp's private 0600 is for the temporary name only)."""
    if target.exists():
        return target.stat().st_mode & 0o7777
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask
