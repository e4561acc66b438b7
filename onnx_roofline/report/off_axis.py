"""The nodes a log-intensity roofline cannot place (no FLOPs), and what every rendering calls them.

A node with no FLOPs is either data movement (a Transpose, a copy, a gather: only bytes) or
special-function work (Tanh, Sigmoid, Exp: transcendentals only, counted in their own column).
The second is not data movement; one function decides, so the HTML strip and the plot's note agree."""

from __future__ import annotations

from collections.abc import Iterable

MOVEMENT = "data movement"
TRANSCENDENTAL = "transcendentals only"


def kind(transcendentals: int | None) -> str:
    """What a costed node with no FLOPs does: MOVEMENT, or TRANSCENDENTAL where it has any."""
    return TRANSCENDENTAL if transcendentals else MOVEMENT


def described(nodes: Iterable[tuple[str, int | None]], short: bool = False) -> str:
    """`30 data movement (transposes, copies, gathers), 12 transcendentals only (Tanh: ...)` for the
    (op_type, transcendentals) of the no-FLOPs nodes, each kind said only when present; `short`
    (the plot's note): `30 data movement, 12 transcendentals only (Tanh)`."""
    moving = 0
    special: dict[str, int] = {}
    for op_type, transcendentals in nodes:
        if kind(transcendentals) == TRANSCENDENTAL:
            special[op_type] = special.get(op_type, 0) + 1
        else:
            moving += 1
    parts = [f"{moving} {MOVEMENT}" + ("" if short else " (transposes, copies, gathers)")] if moving else []
    if special:
        ops = ", ".join(sorted(special))
        parts.append(f"{sum(special.values())} {TRANSCENDENTAL} ({ops}{'' if short else ': special-function work'})")
    return ", ".join(parts)
