"""Human-readable quantities for the terminal: decimal SI prefixes, as the hardware figures use."""

from __future__ import annotations

_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def si(value: float | None, unit: str) -> str:
    """1.5e9, "FLOP" → "1.50 GFLOP"; None → "?" (unknown is shown, never as 0)."""
    if value is None:
        return "?"
    for scale, prefix in _PREFIXES:
        if abs(value) >= scale:
            return f"{value / scale:.2f} {prefix}{unit}"
    return f"{value:.0f} {unit}" if float(value).is_integer() else f"{value:.2f} {unit}"


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if seconds >= scale:
            return f"{seconds / scale:.2f} {unit}"
    return f"{seconds / 1e-9:.1f} ns"


def percent(share: float | None) -> str:
    return "?" if share is None else f"{100 * share:.1f}%"


def number(value: float | None, digits: int = 1) -> str:
    return "?" if value is None else f"{value:,.{digits}f}"


def flops_text(flops: int, transcendentals: int) -> str:
    """`12.58 MFLOP`, and `+ 786.43 k transc.` where the node has transcendentals (exp, tanh,
    erf, ...: counted apart from FLOPs, never shown as free)."""
    text = si(flops, "FLOP")
    return f"{text} + {si(transcendentals, '').strip()} transc." if transcendentals else text
