"""`@record`: a frozen, slotted dataclass, and declared as one to type checkers.

`typing.dataclass_transform` (PEP 681) tells mypy and pyright what the decorator makes, so they
check each record's constructor, fields and immutability as a dataclass's. It is the standard
library's own dataclass: the constructor, `__eq__`, `__hash__`, `__repr__`, `dataclasses.replace`
and pickling are all the dataclass's (benchmarks/bench_records.py weighs it against a constructor
built from source and against msgspec's structs; the README says why this one)."""

from __future__ import annotations

import dataclasses
import sys
from typing import TypeVar

if sys.version_info >= (3, 11):
    from typing import dataclass_transform
else:  # pragma: no cover - Python 3.10
    from typing_extensions import dataclass_transform

T = TypeVar("T")


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field, dataclasses.Field))
def record(cls: type[T]) -> type[T]:
    """`dataclasses.dataclass(frozen=True, slots=True)`: immutable results, slotted for the
    million records of a million-node graph."""
    return dataclasses.dataclass(frozen=True, slots=True)(cls)
