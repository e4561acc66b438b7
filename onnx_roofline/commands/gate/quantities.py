"""Parsing thresholds: durations, fractions, amounts and counts.

One parser per kind, shared by the command-line flags and the policy file, so a flag and its
policy key accept exactly the same spellings. Each raises ValueError with a one-line message
that the caller prefixes with the flag or key it came from.
"""

from __future__ import annotations

import math
import re

_NUMBER = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"
_DURATION = re.compile(rf"^\s*({_NUMBER})\s*(s|ms|us|µs|μs|ns)?\s*$", re.IGNORECASE)
_FRACTION = re.compile(rf"^\s*({_NUMBER})\s*(%)?\s*$")
_AMOUNT = re.compile(rf"^\s*({_NUMBER})\s*([kmgtp]i?)?\s*(b|flops?)?\s*$", re.IGNORECASE)

_PER_SECOND = {"s": 1, "ms": 10**3, "us": 10**6, "µs": 10**6, "μs": 10**6, "ns": 10**9}  # divide: 20us is exactly 2e-05
_PREFIX = {"k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "p": 1e15}


def parse_duration(value: object) -> float:
    """Seconds from `2ms`, `500us`/`500µs`, `0.002s`, or a bare number (`1.5e-3`, seconds)."""
    expected = "expected e.g. 2ms, 500us, 0.002s or 1.5e-3 (seconds)"
    number, unit = _split(value, _DURATION, f"malformed duration {value!r}: {expected}")
    seconds = number / _PER_SECOND[(unit or "s").lower()]
    if seconds <= 0:
        raise ValueError(f"duration {value!r} must be positive")
    return seconds


def parse_fraction(value: object, *, over_one: bool) -> float:
    """`60%` or `0.6` → 0.6. A bare number above 1 is refused as ambiguous (did `5` mean 5%?);
    `over_one` allows percentages above 100% (a regression may be +150%, a share may not)."""
    expected = "expected e.g. 0.6 or 60%"
    number, percent = _split(value, _FRACTION, f"malformed fraction {value!r}: {expected}")
    fraction = number / 100 if percent else number
    if fraction < 0:
        raise ValueError(f"fraction {value!r} must not be negative")
    if not percent and fraction > 1:
        raise ValueError(f"ambiguous fraction {value!r}: write {number:g}% for {number:g} percent, or a number ≤ 1")
    if fraction > 1 and not over_one:
        raise ValueError(f"share {value!r} is above 100%")
    return fraction


def parse_amount(value: object) -> int:
    """Bytes or FLOPs: `1500000`, `1.5e9`, `1.5 GB`, `2GiB`, `300 GFLOP` (decimal SI or binary Ki/Mi/Gi)."""
    expected = "expected e.g. 1.5e9, 1.5 GB, 2 GiB or 300 GFLOP"
    if isinstance(value, str):
        match = _AMOUNT.match(value)
        if not match:
            raise ValueError(f"malformed amount {value!r}: {expected}")
        prefix = (match.group(2) or "").lower()
        scale = (
            1.0 if not prefix else (1024 ** (1 + "kmgtp".index(prefix[0])) if prefix.endswith("i") else _PREFIX[prefix])
        )
        amount = float(match.group(1)) * scale
    else:
        amount = _number(value, f"malformed amount {value!r}: {expected}")
    if not math.isfinite(amount) or amount < 0:
        raise ValueError(f"amount {value!r} must be a finite number ≥ 0")
    return round(amount)


def parse_count(value: object) -> int:
    """A whole number of nodes, ≥ 0."""
    text = value.strip() if isinstance(value, str) else value
    if isinstance(text, str) and text.isdigit():
        return int(text)
    if isinstance(text, int) and not isinstance(text, bool) and text >= 0:
        return text
    raise ValueError(f"malformed count {value!r}: expected a whole number ≥ 0")


def _split(value: object, pattern: re.Pattern, message: str) -> tuple[float, str | None]:
    """(number, suffix) from a string matching `pattern`, or (number, None) from a plain number."""
    if isinstance(value, str):
        match = pattern.match(value)
        if not match:
            raise ValueError(message)
        number, suffix = float(match.group(1)), match.group(2)
    else:
        number, suffix = _number(value, message), None
    if not math.isfinite(number):
        raise ValueError(message)
    return number, suffix


def _number(value: object, message: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(message)
    return float(value)
