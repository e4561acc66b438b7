"""`@record`: a frozen, slotted dataclass that constructs twice as fast as `dataclass(frozen=True)`.

A frozen dataclass's generated `__init__` stores each field through `object.__setattr__` (its own
`__setattr__` raises), about 0.1 µs a field; the walk builds a NodeResult (15 fields), a Cost or
two and the TensorInfos of every node, and that tax was a tenth of an analysis. This `__init__`
stores each field through its slot's descriptor, bound once at class creation, which costs half
as much; reading a slot is as fast as ever. Everything else — the frozen `__setattr__` and
`__delattr__`, `__eq__`, `__hash__`, `__repr__`, `dataclasses.replace`, pickling — is the
dataclass's own."""

from __future__ import annotations

import dataclasses
from typing import TypeVar

T = TypeVar("T")


def record(cls: type[T]) -> type[T]:
    """`dataclasses.dataclass(frozen=True, slots=True)`, with an `__init__` of the same signature
    that stores through the slot descriptors (then calls `__post_init__`, where there is one)."""
    cls = dataclasses.dataclass(frozen=True, slots=True)(cls)
    namespace: dict[str, object] = {}
    parameters, stores = [], []
    for field in dataclasses.fields(cls):
        if not field.init:
            continue
        if field.default_factory is not dataclasses.MISSING:
            raise TypeError(f"@record does not support default_factory ({cls.__name__}.{field.name})")
        namespace[f"_set_{field.name}"] = getattr(cls, field.name).__set__
        if field.default is dataclasses.MISSING:
            parameters.append(field.name)
        else:
            namespace[f"_default_{field.name}"] = field.default
            parameters.append(f"{field.name}=_default_{field.name}")
        stores.append(f"    _set_{field.name}(self, {field.name})")
    post_init = ["    self.__post_init__()"] if hasattr(cls, "__post_init__") else []
    # Built from source as dataclasses builds its own __init__: the signature is known only here.
    exec("\n".join([f"def __init__(self, {', '.join(parameters)}):", *stores, *post_init]), namespace)
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    cls.__init__ = init
    return cls
