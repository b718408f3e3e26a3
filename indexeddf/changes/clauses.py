"""The clauses of a MERGE, as Delta and delta-rs name them.

A clause says what happens to a row in one of three situations:

- ``matched``: a target row and a source row satisfy the merge predicate: update the
  target row or delete it;
- ``not_matched`` (by target): a source row matched no target row: insert it;
- ``not_matched_by_source``: a target row matched no source row: update or delete it.

Within each situation the clauses apply in the order they were given: a row takes the
first clause whose own ``predicate`` holds (no predicate: always), and no clause at all
when none holds (the target row is kept as it is, the source row is not inserted).
Expressions are SQL text: ``updates`` maps a target column to an expression over the
target's and the source's columns (qualified by their aliases).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import InvalidOptionError

MATCHED = "matched"
NOT_MATCHED = "not_matched"
NOT_MATCHED_BY_SOURCE = "not_matched_by_source"

UPDATE = "update"
DELETE = "delete"
INSERT = "insert"


@dataclass(frozen=True)
class Clause:
    """One WHEN clause: its situation, action, optional condition and assignments.

    ``updates`` None with ``all_columns``: every target column from the source column of
    the same name (``UPDATE SET *`` / ``INSERT *``)."""

    when: str
    action: str
    predicate: str | None = None
    updates: dict[str, str] = field(default_factory=dict)
    all_columns: bool = False

    def __post_init__(self):
        allowed = {MATCHED: (UPDATE, DELETE), NOT_MATCHED: (INSERT,), NOT_MATCHED_BY_SOURCE: (UPDATE, DELETE)}
        if self.action not in allowed[self.when]:
            raise InvalidOptionError(f"a WHEN {self.when.upper().replace('_', ' ')} clause cannot {self.action}")
        if self.action in (UPDATE, INSERT) and not self.updates and not self.all_columns:
            raise InvalidOptionError(f"an {self.action} clause needs updates={{column: expression}} (or the *_all form)")
        if self.predicate is not None and not isinstance(self.predicate, str):
            raise InvalidOptionError(f"a clause predicate is SQL text, got {type(self.predicate).__name__}")
        for column, expression in self.updates.items():
            if not isinstance(column, str) or not isinstance(expression, str):
                raise InvalidOptionError(f"updates map column names to SQL text, got {column!r}: {expression!r}")
