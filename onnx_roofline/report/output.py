"""Writing outputs without ever losing what the user owns: atomic replace, never onto an input
(the model, its external-data files, a spec or baseline), every failure one line."""

from __future__ import annotations

import os
import stat
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

from onnx_roofline.model import files
from onnx_roofline.errors import RooflineError

_TEMP_STEM = 64  # characters of the target's name in its temporary name: a long name still fits


def write_text(text: str | Iterable[str], destination: str | None, protect: Iterable[str | os.PathLike] = ()) -> None:
    """Print to stdout, or write `destination` atomically (a temp file in the same folder, then rename).
    `text` may come in pieces (a large JSON report, streamed): each is written as it comes."""
    pieces = (text,) if isinstance(text, str) else text
    if destination is None or destination == "-":
        for piece in pieces:
            sys.stdout.write(piece)
        return
    write_bytes(text.encode() if isinstance(text, str) else (piece.encode() for piece in pieces), destination, protect)


def write_bytes(data: bytes | Iterable[bytes], destination: str | os.PathLike, protect: Iterable[str | os.PathLike] = ()) -> None:
    """A symlink is written through (its target replaced, as a shell's `>` would write it), never
    replaced itself: `-o /dev/stdout` must not swap the system's link for a file."""
    target = check_destination(destination, protect)
    if target.exists() and not target.is_file():  # /dev/null, a FIFO someone reads: written into, not replaced
        _write_into(data, target)
        return
    if target.is_symlink():
        target = target.resolve()
    try:
        handle, temp = tempfile.mkstemp(prefix=f".{target.name[:_TEMP_STEM]}.", dir=target.parent)
    except OSError as exc:
        raise RooflineError(f"cannot write {destination}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(handle, "wb") as stream:
            for piece in (data,) if isinstance(data, bytes) else data:
                stream.write(piece)
        os.chmod(temp, _mode_for(target))
        os.replace(temp, target)
    except OSError as exc:
        Path(temp).unlink(missing_ok=True)
        raise RooflineError(f"cannot write {destination}: {exc.strerror or exc}") from None
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def check_destination(destination: str | os.PathLike, protect: Iterable[str | os.PathLike] = ()) -> Path:
    """The output path, once it is known to be writable in principle: its folder exists, it is not
    a directory, its name fits the file system, and it is none of the files in `protect` (by
    path, symlinks followed, or by inode: a hard link is the same file). Commands call it before
    long work (a calibration) so that a typo costs nothing."""
    text = os.fspath(destination)
    if "\0" in text:
        raise RooflineError(f"output path contains a null byte: {text!r}")
    target = Path(text)
    if not target.parent.is_dir():
        raise RooflineError(f"output folder does not exist: {target.parent}")
    limit = _name_max(target.parent)
    if len(os.fsencode(target.name)) > limit:
        raise RooflineError(f"cannot write {text[:80]}...: the file name is longer than {limit} bytes")
    if target.is_dir():
        raise RooflineError(f"cannot write {text}: it is a directory")
    if target.exists() and not target.is_file():
        mode = target.stat().st_mode
        if not (stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)):
            raise RooflineError(f"cannot write {text}: {files.file_kind(mode)}")
    for path in protect:
        if _same_file(target, Path(path)):
            raise RooflineError(f"refusing to overwrite the input {path} with an output")
    return target


def link_or_copy(source: files.DataRef, target: Path, protect: Iterable[str | os.PathLike] = ()) -> str:
    """Put the data file `source` at `target`: a hard link costs nothing and leaves the source
    alone; across file systems, a copy of exactly the bytes checked. Atomic, like every output;
    the file linked is the one opened and checked (not a symlink swapped in since)."""
    if target.exists() and os.path.samefile(source.path, target):
        return "linked"  # annotated here before: the link is in place, nothing to write
    target = check_destination(target, protect)
    temp = target.with_name(f".{target.name[:_TEMP_STEM]}.{os.getpid()}.tmp")
    where = f"external data {source.location!r}"
    with files.open_regular(source.path, where, follow=False) as (fd, info):
        try:
            try:
                os.link(source.path, temp, follow_symlinks=False)
                linked = os.lstat(temp)
                if (linked.st_dev, linked.st_ino) != (info.st_dev, info.st_ino):
                    raise RooflineError(f"{where} changed while being linked: refused")
                action = "linked"
            except OSError:
                temp.unlink(missing_ok=True)
                _copy(fd, info.st_size, temp)
                action = "copied"
            os.replace(temp, target)
        except OSError as exc:
            temp.unlink(missing_ok=True)
            raise RooflineError(f"cannot write {target}: {exc.strerror or exc}") from None
        except BaseException:
            temp.unlink(missing_ok=True)
            raise
    return action


def _copy(fd: int, size: int, target: Path) -> None:
    """`size` bytes of `fd` into a new file: no more, whatever the source does meanwhile."""
    with open(target, "xb") as out:
        offset = 0
        while offset < size:
            chunk = os.pread(fd, min(2**24, size - offset), offset)
            if not chunk:
                break
            out.write(chunk)
            offset += len(chunk)


def _write_into(data: bytes | Iterable[bytes], target: Path) -> None:
    """A character device or FIFO as output: written like a shell redirection (a FIFO without a
    reader is refused rather than waited on)."""
    try:
        fd = os.open(target, os.O_WRONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise RooflineError(f"cannot write {target}: {exc.strerror or exc}") from None
    try:
        os.set_blocking(fd, True)
        for piece in (data,) if isinstance(data, bytes) else data:
            view = memoryview(piece)
            while view:
                view = view[os.write(fd, view):]
    except BrokenPipeError:
        raise  # the reader left: the command line ends quietly, as for stdout
    except OSError as exc:
        raise RooflineError(f"cannot write {target}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def _same_file(target: Path, protected: Path) -> bool:
    try:
        if target.resolve() == protected.resolve():
            return True
        return target.exists() and protected.exists() and os.path.samefile(target, protected)
    except (OSError, RuntimeError, ValueError):
        return False


def _name_max(folder: Path) -> int:
    try:
        return os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError, AttributeError):
        return 255


def _mode_for(target: Path) -> int:
    """An existing file keeps its permissions; a new one gets the umask's, as open() would give
    (mkstemp's private 0600 is for the temporary name only)."""
    if target.exists():
        return target.stat().st_mode & 0o7777
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask
