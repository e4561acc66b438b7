"""Why nodes stay uncosted: the node to blame, shared by the shape engine and the report."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RootCause:
    """The first node whose inputs are known but whose outputs are not, and why."""

    index: int
    name: str
    op_type: str
    domain: str
    reason: str

    def to_dict(self) -> dict:
        return {
            "index": self.index,
            "name": self.name,
            "op_type": self.op_type,
            "domain": self.domain,
            "reason": self.reason,
        }
