"""What a change is and what it did: :class:`Change` (built by the entry points in
``changes/__init__.py``) and :class:`ChangeMetrics` (what ``execute`` returns)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import pyarrow as pa

from .clauses import Clause

ROW = "__row"
"""A target row's ordinal in its file (pairs keep it to tell target rows apart)."""
SOURCE_ROW = "__source_row"
"""A source row's ordinal in the source (to know which source rows matched)."""


@dataclass
class ChangeMetrics:
    """What a change did (delta-rs's names for a MERGE's metrics)."""

    num_source_rows: int = 0
    num_target_rows_inserted: int = 0
    num_target_rows_updated: int = 0
    num_target_rows_deleted: int = 0
    num_target_rows_copied: int = 0
    num_output_rows: int = 0
    num_target_files_added: int = 0
    num_target_files_removed: int = 0
    num_target_files_scanned: int = 0
    num_deletion_vectors_added: int = 0
    rows_found_by: str = "scan"
    """``index`` when the index located the matched rows, ``scan`` when every file was read."""
    execution_time_ms: int = 0
    scan_time_ms: int = 0
    rewrite_time_ms: int = 0
    version: int | None = None
    """The version committed (None: nothing changed, nothing committed)."""

    def add(self, other: "ChangeMetrics") -> None:
        """Add the row and file counts of ``other`` (one file's) to these."""
        for name in ("num_target_rows_inserted", "num_target_rows_updated", "num_target_rows_deleted",
                     "num_target_rows_copied", "num_output_rows", "num_target_files_added",
                     "num_target_files_removed", "num_target_files_scanned", "num_deletion_vectors_added"):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def as_dict(self) -> dict:
        """The metrics as a plain dict (the commit's ``operationMetrics`` take it)."""
        return dict(self.__dict__)


@dataclass
class Inserted:
    """Rows a change adds whatever it finds (a selective overwrite's new data): ``rows``
    to write with the change's other rows, or files written already (a Spark write's
    tasks: their ``adds``, ``index_files`` per index and every path ``written``)."""

    rows: pa.Table | None = None
    adds: list = field(default_factory=list)
    index_files: dict = field(default_factory=dict)
    written: list[str] = field(default_factory=list)


@dataclass
class Change:
    """One change to run: the source (None for UPDATE / DELETE), the equality key pairs
    (target column, source column) and the rest of the predicate, and the clauses."""

    operation: str
    parameters: dict
    clauses: list[Clause]
    source: pa.Table | None = None
    target_alias: str = "t"
    source_alias: str = "s"
    keys: list[tuple[str, str]] = field(default_factory=list)
    residual: str | None = None
    fixed: dict | None = None
    """UPDATE / DELETE: literal values the predicate fixes per column (planner's keys)."""
    txn: tuple[str, int] | None = None
    """(app id, version): commit only if this application has not committed that version."""
    new_fields: tuple | None = None
    """The table's fields after the change when it evolves the schema (a MERGE with
    ``schema_mode="merge"``): committed as a new ``metaData`` with the change."""
    inserted: Inserted | None = None
    """Rows added with the change (a selective overwrite's data)."""
    candidates: Callable[[list], list] | None = None
    """Narrows the live files that can hold a target row (by their partition values)."""
