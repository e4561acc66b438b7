"""Errors the user can act on: each carries the one-line message and the CLI exit code."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

EXIT_OK = 0
EXIT_FAIL = 1  # a check or verification ran and found a problem
EXIT_USAGE = 2  # bad input: missing/unreadable model, bad flag, bad spec, unbound dim
EXIT_OUTPUT = 74  # an output could not be written: a full disk, a closed stdout (sysexits.h's EX_IOERR)
EXIT_BROKEN_PIPE = (
    141  # the reader of stdout left (`| head -1`): quiet, and what a shell reports for a tool SIGPIPE ended (128 + 13)
)


class RooflineError(Exception):
    """A problem with the user's input, reported as one line without a traceback.

    `str(error)` speaks Python (`dims={'batch': 1}`), as a library caller reads it; `cli`, where
    given, is the same message in the command line's terms (`--dim batch=1`)."""

    exit_code = EXIT_USAGE

    def __init__(self, *args: object, cli: str | None = None) -> None:
        super().__init__(*args)
        self.cli_message = cli

    def for_command_line(self, argv: Sequence[str] = ()) -> str:
        """The message the command line prints; `argv`, the arguments it was given."""
        return self.cli_message or str(self)


class OutputError(RooflineError):
    """An output the analysis made could not be written (a full disk, an I/O error, stdout closed):
    the input was fine, so it is not exit 2."""

    exit_code = EXIT_OUTPUT


class ModelLoadError(RooflineError):
    """The model file is missing, unreadable, or not a valid ONNX model."""


class HardwareSpecError(RooflineError):
    """Unknown hardware name, or a spec file that is malformed."""


class DimensionError(RooflineError):
    """A malformed --dim/--input, or a symbolic dimension left unbound that blocks a cost."""


class UnboundDimensionError(DimensionError):
    """Symbolic dims left unbound that block a cost (Python: `dims={...}`; the command line: `--dim`).

    `dims`: the blocking dims, the one named first first; `inputs`: the graph inputs that use each;
    `suggested`: a size for each (the command line's defaults, by name or role: shapes/roles.py),
    used to print a call or a command that would work; `roles`: what each is (`image height`)."""

    def __init__(
        self,
        dims: Sequence[str],
        inputs: Mapping[str, Sequence[str]],
        suggested: Mapping[str, int],
        roles: Mapping[str, str] | None = None,
    ) -> None:
        self.dims = tuple(dims)
        self.inputs = {dim: tuple(inputs.get(dim, ())) for dim in self.dims}
        self.suggested = {dim: suggested.get(dim, 1) for dim in self.dims}
        self.roles = {dim: roles[dim] for dim in self.dims if roles and dim in roles}
        given = ", ".join(f"{dim!r}: {size}" for dim, size in self.suggested.items())
        super().__init__(
            f"{self._head()}: pass sizing=Sizing(dims={{{given}}}) (any sizes{self._roles_text()}), or partial=True to report the nodes "
            f"{'it blocks' if len(self.dims) == 1 else 'they block'} as unknown"
        )

    def __reduce__(self):
        return (type(self), (self.dims, self.inputs, self.suggested, self.roles))

    def _roles_text(self) -> str:
        """`; image height, image width`: what the suggested sizes are for, where a role says."""
        said = [f"{dim}: {role}" for dim, role in self.roles.items() if role and role != dim]
        return f"; {', '.join(said)}" if said else ""

    def _head(self) -> str:
        first, *others = self.dims
        uses = self.inputs[first]
        used = ", ".join(repr(name) for name in uses[:2]) + (f" and {len(uses) - 2} more" if len(uses) > 2 else "")
        also = f" (also unbound: {', '.join(others)})" if others else ""
        return f"dimension {first!r} is unbound (used by input{'s' if len(uses) > 1 else ''} {used}){also}"

    def for_command_line(self, argv: Sequence[str] = ()) -> str:
        import shlex

        flags = [part for dim, size in self.suggested.items() for part in ("--dim", f"{dim}={size}")]
        command = shlex.join(
            ["onnx-roofline", *argv, *flags] if argv else flags
        )  # quoted: a dim named `?` is a glob to a shell
        roles = self._roles_text()
        return (
            f"{self._head()}: bind {'it' if len(self.dims) == 1 else 'them'}, e.g. `{command}`{f' ({roles[2:]})' if roles else ''}, "
            f"or pass --partial to report the nodes blocked as unknown"
        )


class DimensionConflict(DimensionError):
    """A symbolic dim bound to a size the graph itself rules out, where the graph fixes the one
    that runs (a KV cache's head size, which the attention op's query packs): `dim`, `size` (the
    size that runs) and `why` (what fixes it). A default the analysis took is replaced by it."""

    def __init__(self, message: str, dim: str, size: int, why: str, cli: str | None = None) -> None:
        super().__init__(message, cli=cli)
        self.dim, self.size, self.why = dim, size, why

    def __reduce__(self):
        return (type(self), (str(self), self.dim, self.size, self.why, self.cli_message))


class ExternalDataError(ModelLoadError):
    """An external-data reference that may not be followed: absolute, escaping the model's folder,
    not a regular file, or an offset/length that does not fit the file."""


def one_line(text: str) -> str:
    """The message with every control character escaped (`\\n`, `\\x1b`): a path or a name from a
    stranger's file cannot break the one-line promise or colour the terminal."""
    return "".join(c if c.isprintable() or c == " " else c.encode("unicode_escape").decode("ascii") for c in text)
