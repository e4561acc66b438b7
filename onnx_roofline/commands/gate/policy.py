"""The gate's policy: which limits a model must meet, read from TOML and validated up front.

A policy file's keys mirror the `check` flags (`--max-latency` is `max_latency`), so a limit can move
between a command line and a file unchanged. `pyproject.toml` holds the same keys under
`[tool.onnx-roofline]`. Every problem is a PolicyError (exit 2) that names the offending key.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from onnx_roofline.commands.gate.quantities import parse_amount, parse_count, parse_duration, parse_fraction
from onnx_roofline.costs.hardware import load_hardware
from onnx_roofline.errors import HardwareSpecError, RooflineError
from onnx_roofline.model import files

DEFAULT_HW = "default"  # the `max_latency` table's entry for hardware it does not name
METRICS = ("latency", "bytes", "flops")  # what a baseline regression is measured on


class PolicyError(RooflineError):
    """A policy file (or limit flag) that is missing, not TOML, or has a bad key or value."""


@dataclass(frozen=True)
class Budget:
    """Limits on one group of nodes: an op type, or a module and everything under it."""

    max_latency: float | None = None  # seconds
    max_time_share: float | None = None  # of the model's predicted time
    max_bytes: int | None = None
    max_flops: int | None = None


@dataclass(frozen=True)
class Policy:
    """Everything a `check` enforces. None (or empty) means "not checked"."""

    hw: str | None = None
    dims: Mapping[str, int] = field(default_factory=dict)
    nonzero_fraction: float | None = None  # --nonzero-fraction's assumption (selection.py), where the flag gives none
    expert_load: Any = None  # --expert-load's (routing.ExpertLoad), where the flag gives none
    max_latency: Mapping[str, float] = field(default_factory=dict)  # hardware key or "default" → seconds
    max_memory_bound_share: float | None = None
    max_bytes: int | None = None
    max_flops: int | None = None
    max_unsupported: int | None = None  # nodes with no cost rule, or whose rule failed
    max_unknown_shape: int | None = None  # nodes whose shapes could not be inferred
    max_uncosted: int | None = None  # nodes not costed, whatever the reason (check's default: 0)
    op_type: Mapping[str, Budget] = field(default_factory=dict)
    module: Mapping[str, Budget] = field(default_factory=dict)
    baseline: str | None = None  # path of a saved `analyze --format json` report
    max_regression: Mapping[str, float] = field(default_factory=dict)  # metric → tolerated growth

    def latency_budget(self, hardware_key: str) -> float | None:
        return self.max_latency.get(hardware_key, self.max_latency.get(DEFAULT_HW))

    def overridden(self, **limits: Any) -> Policy:
        """This policy with command-line limits on top (already parsed; None means not given)."""
        given = {key: value for key, value in limits.items() if value is not None}
        if "max_latency" in given:
            given["max_latency"] = {DEFAULT_HW: given["max_latency"]}
        if "max_regression" in given:
            given["max_regression"] = dict.fromkeys(METRICS, given["max_regression"])
        return replace(self, **given)


def load_policy(path: str | Path) -> Policy:
    """A policy from a TOML file, or from `[tool.onnx-roofline]` when the file is a pyproject.toml.
    A relative `baseline` is relative to the policy file's folder."""
    path = Path(path)
    data = files.read_toml(path, "policy file", PolicyError)
    if path.name == "pyproject.toml":
        tool = data.get("tool")
        data = tool.get("onnx-roofline") if isinstance(tool, dict) else None
        if data is None:
            raise PolicyError(f"policy {path}: no [tool.onnx-roofline] table")
    policy = parse_policy(data, str(path))
    if policy.baseline is not None and not Path(policy.baseline).is_absolute():
        policy = replace(policy, baseline=str(path.parent / policy.baseline))
    return policy


def parse_policy(data: Mapping[str, Any], origin: str) -> Policy:
    """Validate a policy table (as TOML parses it) and build the Policy."""
    return Policy(**_parse_table(data, _TOP_LEVEL, origin, ""))


# --- one parser per key; each takes (value, origin, key path) --------------------------------

Parser = Callable[[Any, str, str], Any]


def _scalar(parse: Callable[[Any], Any]) -> Parser:
    """A key holding one value: the value parser's ValueError becomes a PolicyError naming the key."""

    def run(value: Any, origin: str, where: str) -> Any:
        if isinstance(value, (dict, list)):
            shape = "table" if isinstance(value, dict) else "list"
            raise PolicyError(f"policy {origin}: `{where}` must be a single value, not a {shape}")
        try:
            return parse(value)
        except ValueError as exc:
            raise PolicyError(f"policy {origin}: `{where}`: {exc}") from None

    return run


def _string(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"expected a non-empty string, got {value!r}")
    return value


def _dim(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"expected a positive whole number, got {value!r}")
    return value


def _selected_share(value: Any) -> float:
    """`nonzero_fraction = 0.125` or `"1/8"`, as --nonzero-fraction takes it."""
    from onnx_roofline.shapes.selection import parse_fraction as parse_selected

    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f'expected a number in [0, 1] or a ratio such as "1/8", got {value!r}')
    return parse_selected(str(value))


def _expert_load(value: Any):
    """`expert_load = "skew=4"`, as --expert-load takes it."""
    from onnx_roofline.shapes.routing import ExpertLoad

    if not isinstance(value, str):
        raise ValueError(f"expected uniform, skew=F or capacity=C as a string, got {value!r}")
    return ExpertLoad.parse(value)


def _table_of(parse_entry: Parser, check_name: Callable[[str, str, str], str] | None = None) -> Parser:
    """A table whose keys the user names (dims, op types, modules), each value parsed alike."""

    def run(value: Any, origin: str, where: str) -> dict[str, Any]:
        table = _require_table(value, origin, where)
        parsed = {}
        for name in sorted(table):
            key = check_name(name, origin, where) if check_name else name
            parsed[key] = parse_entry(table[name], origin, f"{where}.{_quoted(name)}")
        return parsed

    return run


def _hardware_name(name: str, origin: str, where: str) -> str:
    """`max_latency` table keys: a built-in hardware name or alias (made canonical), or `default`."""
    if name == DEFAULT_HW:
        return name
    try:
        return load_hardware(name).key
    except HardwareSpecError:
        raise PolicyError(
            f"policy {origin}: `{where}.{_quoted(name)}`: not a built-in hardware name "
            f"(see `onnx-roofline hw list`; use `{DEFAULT_HW}` for any other hardware)"
        ) from None


def _latency_limits(value: Any, origin: str, where: str) -> dict[str, float]:
    """`max_latency = "2ms"` (any hardware) or a table per hardware: `{h100 = "1ms", default = "3ms"}`."""
    if isinstance(value, dict):
        return _table_of(_scalar(parse_duration), _hardware_name)(value, origin, where)
    return {DEFAULT_HW: _scalar(parse_duration)(value, origin, where)}


def _regression_limits(value: Any, origin: str, where: str) -> dict[str, float]:
    """`max_regression = "5%"` (every metric) or a table: `{latency = "5%", bytes = "10%"}`."""
    parse = _scalar(lambda v: parse_fraction(v, over_one=True))
    if isinstance(value, dict):
        return _parse_table(value, dict.fromkeys(METRICS, parse), origin, where)
    limit = parse(value, origin, where)
    return {metric: limit for metric in METRICS}


def _budget(value: Any, origin: str, where: str) -> Budget:
    return Budget(**_parse_table(value, _BUDGET, origin, where))


_SHARE = _scalar(lambda v: parse_fraction(v, over_one=False))

_BUDGET: dict[str, Parser] = {
    "max_latency": _scalar(parse_duration),
    "max_time_share": _SHARE,
    "max_bytes": _scalar(parse_amount),
    "max_flops": _scalar(parse_amount),
}

_TOP_LEVEL: dict[str, Parser] = {
    "hw": _scalar(_string),
    "dims": _table_of(_scalar(_dim)),
    "nonzero_fraction": _scalar(_selected_share),
    "expert_load": _scalar(_expert_load),
    "max_latency": _latency_limits,
    "max_memory_bound_share": _SHARE,
    "max_bytes": _scalar(parse_amount),
    "max_flops": _scalar(parse_amount),
    "max_unsupported": _scalar(parse_count),
    "max_unknown_shape": _scalar(parse_count),
    "max_uncosted": _scalar(parse_count),
    "op_type": _table_of(_budget),
    "module": _table_of(_budget),
    "baseline": _scalar(_string),
    "max_regression": _regression_limits,
}


def _parse_table(value: Any, schema: Mapping[str, Parser], origin: str, where: str) -> dict[str, Any]:
    """A table with a fixed set of keys: an unknown key is an error that suggests the closest one."""
    table = _require_table(value, origin, where)
    for key in sorted(table):
        if key not in schema:
            close = difflib.get_close_matches(key, schema, n=1)
            hint = f"did you mean `{close[0]}`?" if close else f"expected one of: {', '.join(schema)}"
            raise PolicyError(f"policy {origin}: unknown key `{_join(where, key)}` ({hint})")
    return {key: schema[key](table[key], origin, _join(where, key)) for key in sorted(table)}


def _require_table(value: Any, origin: str, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise PolicyError(f"policy {origin}: `{where or 'the policy'}` must be a table, got {value!r}")
    return value


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _quoted(name: str) -> str:
    """A TOML key as the user would write it: bare when it can be, else quoted."""
    return name if name.replace("_", "").replace("-", "").isalnum() else f'"{name}"'
