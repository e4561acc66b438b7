"""A node's status in the report, and `Uncostable`, which a shape or cost rule raises with one when
its node tells it too little: the lowest wing holds them, so that no rule imports the report."""

from __future__ import annotations

OK = "ok"
UNSUPPORTED = "unsupported"  # no cost rule for the op
UNKNOWN_SHAPE = "unknown-shape"  # an input or output shape is not fully known
RULE_ERROR = "rule-error"  # the rule could not cost this instance (reason says why)
DATA_DEPENDENT = "data-dependent"  # the cost depends on values: string sizes, decoded images


class Uncostable(Exception):
    """Raised by a rule whose cost is genuinely unknown for this instance (e.g. a Loop whose trip
    count is not a constant); the node is reported with `status` and the message as its reason."""

    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status = status
