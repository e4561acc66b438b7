"""Errors the user can act on: each carries the one-line message and the CLI exit code."""

EXIT_OK = 0
EXIT_FAIL = 1  # a check or verification ran and found a problem
EXIT_USAGE = 2  # bad input: missing/unreadable model, bad flag, bad spec, unbound dim


class RooflineError(Exception):
    """A problem with the user's input, reported as one line without a traceback."""

    exit_code = EXIT_USAGE


class ModelLoadError(RooflineError):
    """The model file is missing, unreadable, or not a valid ONNX model."""


class HardwareSpecError(RooflineError):
    """Unknown hardware name, or a spec file that is malformed."""


class DimensionError(RooflineError):
    """A malformed --dim/--input, or a symbolic dimension left unbound that blocks a cost."""


class ExternalDataError(ModelLoadError):
    """An external-data reference that may not be followed: absolute, escaping the model's folder,
    not a regular file, or an offset/length that does not fit the file."""


def one_line(text: str) -> str:
    """The message with every control character escaped (`\\n`, `\\x1b`): a path or a name from a
    stranger's file cannot break the one-line promise or colour the terminal."""
    return "".join(c if c.isprintable() or c == " " else c.encode("unicode_escape").decode("ascii") for c in text)
