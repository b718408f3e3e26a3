"""The predicate of a selective overwrite: Delta's ``replaceWhere`` option (Spark), the
``predicate=`` of ``IndexedTable.overwrite`` (delta-rs's ``write_deltalake(...,
predicate=)``). PROTOCOL.md §18 says what the commit holds.

An overwrite with a predicate replaces only the rows that make it true, in one commit:
every row written must make it true too (Delta's constraint check: a row for which it is
false or NULL fails the write with :class:`ReplaceWhereMismatchError`). When each of its
top-level AND conjuncts names only partition columns, whole files go (their partition
values decide); otherwise the rows it selects are deleted as ``DELETE WHERE`` deletes
them (Delta's ``spark.databricks.delta.replaceWhere.dataColumns.enabled``, on by
default). This module parses the predicate and evaluates it on rows and on files'
partition values; nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ReplaceWhereMismatchError

# The SQL parser loads when a predicate is parsed: every write's commit imports this module,
# and Spark's planner processes, which run those commits, start cold after an idle minute.
if TYPE_CHECKING:
    from .expressions import CompiledExpression

MAX_SHOWN_ROWS = 3
"""Rows a mismatch error shows (of those that fail the predicate)."""


@dataclass(frozen=True)
class ReplaceWhere:
    """A parsed selective-overwrite predicate over a table's columns."""

    text: str
    condition: CompiledExpression
    """The whole predicate (a SQL condition over the table's columns)."""
    partitions: CompiledExpression | None
    """The AND of the conjuncts that name partition columns only (None: there is none):
    a file whose partition values make it not true holds no row the predicate selects."""
    partition_only: bool
    """Every conjunct names partition columns only: the predicate selects whole files."""

    def check_rows(self, rows: pa.Table) -> None:
        """Refuse rows the predicate does not select (false or NULL), naming a few of them."""
        if rows.num_rows == 0:
            return
        bad = pc.invert(pc.fill_null(self.condition.evaluate(rows), False))
        n = pc.sum(bad).as_py() or 0
        if not n:
            return
        shown = rows.filter(bad).slice(0, MAX_SHOWN_ROWS).select(sorted(self.condition.columns_used)).to_pylist()
        raise ReplaceWhereMismatchError(
            f"the data written does not conform to the overwrite's predicate `{self.text}`: {n} of its "
            f"{rows.num_rows} rows do not make it true (for example {shown}). An overwrite with a predicate "
            "(replaceWhere) replaces only the rows the predicate selects and writes only such rows: filter the "
            "data by the predicate, or widen the predicate. Nothing was committed.", self.text, n)

    def selects(self, files: Sequence, schema: pa.Schema) -> list:
        """Those of ``files`` (AddFiles of a table of ``schema``) whose every row the
        predicate selects, judged by their partition values (``partition_only`` predicates)."""
        from .partition_filter import files_where

        return files_where(files, self.condition, schema)

    def may_select(self, files: Sequence, schema: pa.Schema) -> list:
        """Those of ``files`` that may hold a row the predicate selects: the files whose
        partition values do not rule it out."""
        from .partition_filter import files_where

        return files_where(files, self.partitions, schema)


def parse_replace_where(text: str, schema: pa.Schema, partition_columns: Sequence[str]) -> ReplaceWhere:
    """Parse ``text`` (Spark SQL) against the table's ``schema``; typed errors for what
    cannot be evaluated (``InvalidOptionError``) or names no column (``SchemaMismatchError``)."""
    from .partition_filter import split_filter

    split = split_filter(text, schema, partition_columns, context="replaceWhere predicate")
    return ReplaceWhere(text, split.condition, split.partitions, split.partition_only)
