"""Writing outputs without ever losing what the user owns: atomic replace, never onto an input
(the model, its external-data files, a spec or baseline), every failure one line.

Files are written as a `Unit`: each in full into a hidden folder of this run's beside its
destination (`.onnx-roofline-XXXXXXXX/`), then all renamed into place, so `--annotate`'s model and
its Netron attachment land together or not at all. The folder goes when the unit ends, whatever
ends it but a SIGKILL; it is locked (flock) while the run lives, so that the next run writing into
that folder removes a killed run's. stdout is written by `write_stdout`: a full disk or a closed
stdout is an OutputError (one line, exit 74); a reader that left (`| head -1`) is the
BrokenPipeError on which the command line ends quietly."""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path

from onnx_roofline.errors import OutputError, RooflineError
from onnx_roofline.model import files
from onnx_roofline.report.stdout import Stdout, flush_stdout, write_stdout  # noqa: F401 (stdout's half, kept light for start-up)
from onnx_roofline.report.stdout import os_reason as _reason

try:
    import fcntl
except ImportError:  # Windows: no flock, so no folder is known to be a dead run's, and none is swept
    fcntl = None  # type: ignore[assignment]

_TEMP_STEM = 64  # characters of the target's name in its temporary name: a long name still fits
STAGING_PREFIX = ".onnx-roofline-"  # a run's hidden folder beside its outputs
_WRITE_FAILURES = {errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG}  # the disk's doing, not the path's: exit 74


def write_text(text: str | Iterable[str], destination: str | None, protect: Iterable[str | os.PathLike] = ()) -> None:
    """Print to stdout, or write `destination` atomically (a Unit of one file).
    `text` may come in pieces (a large JSON report, streamed): each is written as it comes."""
    pieces = (text,) if isinstance(text, str) else text
    if destination is None or destination == "-":
        write_stdout(pieces)
        return
    write_bytes(text.encode() if isinstance(text, str) else (piece.encode() for piece in pieces), destination, protect)


def write_bytes(
    data: bytes | Iterable[bytes], destination: str | os.PathLike, protect: Iterable[str | os.PathLike] = ()
) -> None:
    """One file, atomically (a Unit of one)."""
    with Unit(protect) as unit:
        unit.write(data, destination)


class Unit:
    """Files written as one: each in full into this run's hidden folder beside its destination;
    all renamed into place, in the order given, once every one is written. Where anything fails
    or is interrupted before, none is, and the hidden folders go. A symlink is written through
    (its target replaced, as a shell's `>` would write it), never replaced itself: `-o /dev/stdout`
    must not swap the system's link for a file. Outputs never replace a file in `protect`, and
    two outputs of a unit never name one file."""

    def __init__(self, protect: Iterable[str | os.PathLike] = ()) -> None:
        self._protect = tuple(protect)
        self._staging: dict[Path, _Staging] = {}
        self._pending: list[tuple[Path, Path]] = []  # (written in the hidden folder, destination)

    def __enter__(self) -> Unit:
        return self

    def __exit__(self, kind, value, traceback) -> None:
        try:
            if kind is None:
                for temp, target in self._pending:
                    try:
                        os.replace(temp, target)
                    except OSError as exc:
                        raise OutputError(f"cannot write {target}: {_reason(exc)}") from None
        finally:
            for staging in self._staging.values():
                staging.remove()

    def write(self, data: bytes | Iterable[bytes], destination: str | os.PathLike) -> None:
        target = check_destination(destination, self._protect)
        if (
            target.exists() and not target.is_file()
        ):  # /dev/null, a FIFO someone reads, /dev/stdout: written into, not replaced
            _write_into(data, target)
            return
        target = self._target(target)
        temp = self._temporary(target)
        try:
            _write_file(temp, data)
            os.chmod(temp, _mode_for(target))
        except OSError as exc:
            raise OutputError(f"cannot write {destination}: {_reason(exc)}") from None
        self._pending.append((temp, target))

    def link(self, source: files.DataRef, destination: Path) -> str:
        """Put the data file `source` at `destination`: a hard link costs nothing and leaves the
        source alone; across file systems, a copy of exactly the bytes checked. The file linked is
        the one opened and checked (not a symlink swapped in since). Says "linked" or "copied"."""
        if destination.exists() and os.path.samefile(source.path, destination):
            return "linked"  # annotated here before: the link is in place, nothing to write
        target = self._target(check_destination(destination, self._protect))
        temp = self._temporary(target)
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
            except OSError as exc:
                raise OutputError(f"cannot write {target}: {_reason(exc)}") from None
        self._pending.append((temp, target))
        return action

    def _target(self, checked: Path) -> Path:
        """The file a checked destination replaces: a symlink's target."""
        target = checked.resolve() if checked.is_symlink() else checked
        if any(_same_file(target, other) for _, other in self._pending):
            raise RooflineError(f"two outputs name the same file: {checked}")
        return target

    def _temporary(self, target: Path) -> Path:
        folder = target.parent
        if folder not in self._staging:
            try:
                self._staging[folder] = _Staging(folder)
            except (
                OSError
            ) as exc:  # a full disk is a failed write; a folder that takes no file (read-only, not ours), bad input
                error = OutputError if exc.errno in _WRITE_FAILURES else RooflineError
                raise error(f"cannot write {target}: {_reason(exc)}") from None
        return self._staging[folder].path / f"{len(self._pending)}.{target.name[:_TEMP_STEM]}"


class _Staging:
    """A run's hidden folder in `folder`, locked while it lives; stale ones swept first."""

    def __init__(self, folder: Path) -> None:
        _sweep(folder)
        self.path = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=folder))
        try:
            self._lock = _locked(self.path)
        except OSError:
            _remove_folder(self.path)
            raise

    def remove(self) -> None:
        _remove_folder(self.path)
        if self._lock is not None:
            os.close(self._lock)


def _remove_folder(path: Path) -> None:
    """A hidden folder and the files in it (all it ever holds); anything else there keeps it."""
    try:
        for entry in os.scandir(path):
            os.remove(entry.path)
        os.rmdir(path)
    except OSError:
        pass


_LOCK = "lock"  # the file in a run's hidden folder that the run holds locked while it lives


def _locked(folder: Path) -> int | None:
    """A descriptor of `folder`'s lock file, holding its lock (flock: released by the kernel
    however the process ends), or None where the platform has no flock."""
    if fcntl is None:
        return None
    fd = os.open(folder / _LOCK, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def _sweep(folder: Path) -> None:
    """Remove the hidden folders that runs killed by SIGKILL left in `folder`: those whose lock no
    live process holds. (A run between creating its folder and locking it, a few microseconds,
    could lose its folder to a sweep and fail with one line.)"""
    if fcntl is None:
        return
    try:
        stale = [
            Path(entry.path)
            for entry in os.scandir(folder)
            if entry.name.startswith(STAGING_PREFIX) and entry.is_dir(follow_symlinks=False)
        ]
    except OSError:
        return
    for path in stale:
        try:
            fd = os.open(path / _LOCK, os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0))
        except FileNotFoundError:  # killed before it locked
            _remove_folder(path)
            continue
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # a live run's
        else:
            _remove_folder(path)
        finally:
            os.close(fd)


def _write_file(path: Path, data: bytes | Iterable[bytes]) -> None:
    """`data` (bytes, or its pieces as they come) into a new file at `path`."""
    with open(path, "xb") as stream:
        for piece in (data,) if isinstance(data, bytes) else data:
            stream.write(piece)


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


def check_destinations(outputs: dict[str, str | os.PathLike | None], protect: Iterable[str | os.PathLike] = ()) -> None:
    """A command's outputs by the flag that names each, before any work: each writable in principle
    and none an input (check_destination), and no two of them one file, where one would silently
    replace the other. (A character device, /dev/null, takes any number.)"""
    seen: list[tuple[str, Path]] = []
    for flag, path in outputs.items():
        if path is None or path == "-":
            continue
        target = check_destination(path, protect)
        if target.exists() and not target.is_file():
            continue
        for other_flag, other in seen:
            if _same_file(target, other):
                raise RooflineError(f"{other_flag} and {flag} name the same file: {os.fspath(path)}")
        seen.append((flag, target))


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
        raise RooflineError(f"cannot write {target}: {_reason(exc)}") from None
    try:
        os.set_blocking(fd, True)
        for piece in (data,) if isinstance(data, bytes) else data:
            view = memoryview(piece)
            while view:
                view = view[os.write(fd, view) :]
    except BrokenPipeError:
        raise  # the reader left: the command line ends quietly, as for stdout
    except OSError as exc:
        raise OutputError(f"cannot write {target}: {_reason(exc)}") from None
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
    (the privacy of the run's hidden folder, 0700, is for the file being written only)."""
    if target.exists():
        return target.stat().st_mode & 0o7777
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask
