"""Renaming and dropping columns of a column-mapped table (``ALTER TABLE RENAME COLUMN`` /
``DROP COLUMN``), as Delta does them: one commit of a new ``metaData``, no data file
rewritten.

With column mapping (``delta.columnMapping.mode`` = ``name`` or ``id``) files name a column
by its physical name, which a rename keeps and a drop retires (a later column with the
dropped name gets a new physical name, ``spec/column_mapping.py``), so every Delta reader
that reads column mapping reads the new schema from the old files. Columns that bucket or
index the table, or partition it, are refused: index definitions and the bucketing name
them, and a dropped partition column would leave its ``partitionValues`` behind.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import (
    ColumnCaseConflictError,
    IndexColumnChangeError,
    InvalidOptionError,
    SchemaEvolutionError,
    SchemaMismatchError,
)
from ..format.snapshot import Snapshot
from ..format.transaction import CommitResult, Transaction
from ..spec.column_mapping import MODE, evolve, is_mapped
from ..spec.features import COLLATIONS
from .operations import indexed_columns


def rename_column(snapshot: Snapshot, old: str, new: str) -> CommitResult:
    """Rename column ``old`` to ``new`` in one metadata commit."""
    meta = snapshot.metadata
    _check_mapped(snapshot, "rename")
    names = [f.name for f in meta.schema_]
    if old not in names:
        raise SchemaMismatchError(f"cannot rename {old!r}: the table has no such column ({names})", [old])
    if not isinstance(new, str) or not new:
        raise InvalidOptionError(f"the new name of {old!r} must be a non-empty string, not {new!r}")
    if new.lower() in {n.lower() for n in names if n != old}:
        raise ColumnCaseConflictError(f"cannot rename {old!r} to {new!r}: the table has a column of that name "
                                   "(names are compared without case, as Spark and Delta compare them)", [new])
    _check_free(snapshot, [old], "rename")
    fields = tuple(f.model_copy(update={"name": new, "metadata": _renamed_metadata(f.metadata, old, new)})
                   if f.name == old else f for f in meta.schema_)
    metadata = evolve(meta, fields)
    return Transaction(snapshot, "RENAME COLUMN", {"oldColumnPath": old, "newColumnPath": new},
                       read_buckets=()).commit([metadata])


def drop_columns(snapshot: Snapshot, columns: Sequence[str]) -> CommitResult:
    """Drop ``columns`` in one metadata commit (the files keep their data; no reader sees it)."""
    meta = snapshot.metadata
    _check_mapped(snapshot, "drop")
    columns = [columns] if isinstance(columns, str) else list(columns)
    names = [f.name for f in meta.schema_]
    unknown = [c for c in columns if c not in names]
    if not columns or unknown:
        raise SchemaMismatchError(f"cannot drop {unknown or columns}: not columns of the table ({names})", unknown)
    if len(set(columns)) == len(names):
        raise SchemaEvolutionError("cannot drop every column of the table", columns)
    _check_free(snapshot, columns, "drop")
    metadata = evolve(meta, tuple(f for f in meta.schema_ if f.name not in columns))
    return Transaction(snapshot, "DROP COLUMNS", {"columns": columns}, read_buckets=()).commit([metadata])


def _check_mapped(snapshot: Snapshot, verb: str) -> None:
    if not is_mapped(snapshot.metadata.configuration):
        raise InvalidOptionError(
            f"cannot {verb} a column of {snapshot.storage.url} without column mapping: its files name columns by "
            f"their names. Set {MODE} = name first (set_properties; no file is rewritten), or rewrite the table "
            "with overwrite(..., schema_mode='overwrite')")


def _check_free(snapshot: Snapshot, columns: list[str], verb: str) -> None:
    """Refuse columns that bucket, index or partition the table."""
    meta = snapshot.metadata
    indexed = set(meta.indexColumns) | set(indexed_columns(snapshot))
    bound = [c for c in columns if c in indexed]
    if bound:
        raise IndexColumnChangeError(f"cannot {verb} {bound}: the table is bucketed or indexed by them; drop the "
                                     "index first (the bucketing columns stay for the table's life)", bound)
    parted = [c for c in columns if c in meta.partitionColumns]
    if parted:
        raise SchemaEvolutionError(f"cannot {verb} {parted}: the table is partitioned by them", parted)


def _renamed_metadata(metadata: dict, old: str, new: str) -> dict:
    """A column's metadata after its rename: Delta's collations name the column they apply to."""
    out = dict(metadata)
    named = out.get(COLLATIONS)
    if isinstance(named, dict) and old in named:
        out[COLLATIONS] = {(new if k == old else k): v for k, v in named.items()}
    return out
