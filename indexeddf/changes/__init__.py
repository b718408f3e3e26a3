"""Changing a table: MERGE, UPDATE and DELETE, one engine behind every entry point.

- :class:`TableMerger`: the MERGE builder, with delta-rs's names
  (``IndexedTable.merge(...)`` returns one);
- :func:`merge_change`, :func:`update_rows`, :func:`delete_matching`: the change a MERGE,
  an UPDATE or a DELETE makes (Spark SQL's statements come in through these);
- :mod:`.engine`: finding the rows (through the index where it can), rewriting the
  files that hold them, one commit.

This layer sits above the optimizer (it plans lookups) and the writer (it writes
files); ``table.py`` and ``spark/`` call it.

The names below load on first use (:mod:`.statements`): a module of this package, such as
:mod:`.commit` or :mod:`.model`, imports without the engine and the SQL parser.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .model import ChangeMetrics
    from .statements import TableMerger, delete_matching, merge_change, update_rows

__all__ = ["TableMerger", "ChangeMetrics", "merge_change", "update_rows", "delete_matching"]


def __getattr__(name: str):
    if name == "ChangeMetrics":
        from .model import ChangeMetrics

        return ChangeMetrics
    if name in __all__:
        from . import statements

        return getattr(statements, name)
    raise AttributeError(f"module 'indexeddf.changes' has no attribute {name!r}")
