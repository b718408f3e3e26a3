"""Renaming and dropping columns of a column-mapped table (``ALTER TABLE RENAME COLUMN`` /
``DROP COLUMN``), as Delta does them: one commit of a new ``metaData``, no data file
rewritten.

With column mapping (``delta.columnMapping.mode`` = ``name`` or ``id``) files name a column
by its physical name, which a rename keeps and a drop retires (a later column with the
dropped name gets a new physical name, ``spec/column_mapping.py``), so every Delta reader
that reads column mapping reads the new schema from the old files. Columns that bucket or
index the table are refused: index definitions and the bucketing name them. A partition
column is renamed as Delta renames it (``partitionColumns`` takes the new name, files and
``partitionValues`` keep the physical one) and never dropped (its ``partitionValues`` would be
left behind; Delta refuses that drop too). Fields
nested in struct columns are renamed and dropped the same way (:func:`column_path`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

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
from ..spec.schema import Field
from ..spec.types import type_text, type_value
from .operations import indexed_columns


def column_path(snapshot: Snapshot, column: str | Sequence[str]) -> tuple[str, ...]:
    """The table's field that ``column`` names, as its path of names in the table's own case:
    a top-level column's name, ``"s.a"`` (a field of struct column ``s``; a top-level name
    with a dot in it wins) or a sequence of names (``("s", "a")``; Spark's ``element``,
    ``key`` and ``value`` step into an array's elements and a map's keys and values). Names
    match exactly, else without case (as Spark resolves them); ``SchemaMismatchError`` naming
    the column when nothing matches."""
    fields = snapshot.metadata.schema_
    names = [f.name for f in fields]
    if isinstance(column, str):
        parts = [column] if column in names or "." not in column else column.split(".")
    elif isinstance(column, Sequence) and column and all(isinstance(c, str) for c in column):
        parts = list(column)
    else:
        raise InvalidOptionError(f"a column is a name, a dotted path or a sequence of names, not {column!r}")
    top = _match(parts[0], names)
    if top is None:
        raise SchemaMismatchError(f"the table has no column {parts[0]!r} (columns: {names})", [parts[0]])
    out = [top]
    value = type_value(next(f.type for f in fields if f.name == top))
    for part in parts[1:]:
        value, name = _step(value, part)
        if name is None:
            raise SchemaMismatchError(f"{'.'.join(out)} has no field {part!r}", [".".join(parts)])
        out.append(name)
    return tuple(out)


def _match(name: str, names: Sequence[str]) -> str | None:
    if name in names:
        return name
    folded = [n for n in names if n.lower() == name.lower()]
    return folded[0] if len(folded) == 1 else None


def _step(value: Any, part: str) -> tuple[Any, str | None]:
    """The type of ``value``'s child ``part`` and its name as the table spells it."""
    if isinstance(value, dict) and value.get("type") == "struct":
        name = _match(part, [f["name"] for f in value["fields"]])
        return (next(f["type"] for f in value["fields"] if f["name"] == name), name) if name else (None, None)
    child = {"array": {"element": "elementType"}, "map": {"key": "keyType", "value": "valueType"}}.get(
        value.get("type") if isinstance(value, dict) else None, {}).get(part.lower())
    return (value[child], part.lower()) if child else (None, None)


def rename_column(snapshot: Snapshot, old: str | Sequence[str], new: str) -> CommitResult:
    """Rename column (or nested field) ``old`` to ``new`` in one metadata commit."""
    meta = snapshot.metadata
    _check_mapped(snapshot, "rename")
    path = column_path(snapshot, old)
    if not isinstance(new, str) or not new:
        raise InvalidOptionError(f"the new name of {'.'.join(path)!r} must be a non-empty string, not {new!r}")
    if len(path) > 1:
        fields = _nested(meta.schema_, path, lambda struct, name: _rename_in(struct, name, new, path))
        metadata = evolve(meta, fields)
        return Transaction(snapshot, "RENAME COLUMN", {"oldColumnPath": ".".join(path),
                                                       "newColumnPath": ".".join((*path[:-1], new))},
                           read_buckets=()).commit([metadata])
    old = path[0]
    names = [f.name for f in meta.schema_]
    if new.lower() in {n.lower() for n in names if n != old}:
        raise ColumnCaseConflictError(f"cannot rename {old!r} to {new!r}: the table has a column of that name "
                                   "(names are compared without case, as Spark and Delta compare them)", [new])
    _check_free(snapshot, [old], "rename")
    fields = tuple(f.model_copy(update={"name": new, "metadata": _renamed_metadata(f.metadata, old, new)})
                   if f.name == old else f for f in meta.schema_)
    # A partition column keeps its physical name, which partitionValues (and folders) use.
    parts = tuple(new if c == old else c for c in meta.partitionColumns)
    metadata = evolve(meta.model_copy(update={"partitionColumns": parts}), fields)
    return Transaction(snapshot, "RENAME COLUMN", {"oldColumnPath": old, "newColumnPath": new},
                       read_buckets=()).commit([metadata])


def drop_columns(snapshot: Snapshot, columns: Sequence[str] | str) -> CommitResult:
    """Drop ``columns`` (top-level columns or nested fields) in one metadata commit (the files
    keep their data; no reader sees it)."""
    meta = snapshot.metadata
    _check_mapped(snapshot, "drop")
    columns = [columns] if isinstance(columns, str) else list(columns)
    if not columns:
        raise SchemaMismatchError("drop_columns needs at least one column", [])
    paths = list(dict.fromkeys(column_path(snapshot, c) for c in columns))
    top = [p[0] for p in paths if len(p) == 1]
    if len(top) == len(meta.schema_):
        raise SchemaEvolutionError("cannot drop every column of the table", top)
    _check_free(snapshot, top, "drop")
    fields = tuple(f for f in meta.schema_ if f.name not in top)
    for path in paths:
        if len(path) > 1 and path[0] not in top:
            fields = _nested(fields, path, lambda struct, name, path=path: _drop_in(struct, name, path))
    metadata = evolve(meta, fields)
    return Transaction(snapshot, "DROP COLUMNS", {"columns": [".".join(p) for p in paths]},
                       read_buckets=()).commit([metadata])


def _nested(fields: tuple[Field, ...], path: tuple[str, ...], change) -> tuple[Field, ...]:
    """``fields`` with ``change(struct, name)`` applied to the struct (its JSON) that holds
    the nested field ``path`` (a path :func:`column_path` gave)."""
    def walk(value: Any, rest: tuple[str, ...]) -> Any:
        if len(rest) == 1:
            return change(value, rest[0])
        if value["type"] == "struct":
            return {**value, "fields": [{**f, "type": walk(f["type"], rest[1:])} if f["name"] == rest[0] else f
                                        for f in value["fields"]]}
        key = {"element": "elementType", "key": "keyType", "value": "valueType"}[rest[0]]
        return {**value, key: walk(value[key], rest[1:])}

    return tuple(f.model_copy(update={"type": type_text(walk(type_value(f.type), path[1:]))})
                 if f.name == path[0] else f for f in fields)


def _rename_in(struct: Any, name: str, new: str, path: tuple[str, ...]) -> Any:
    if not isinstance(struct, dict) or struct.get("type") != "struct":
        raise SchemaEvolutionError(f"cannot rename {'.'.join(path)!r}: only struct fields and columns have names",
                                   [".".join(path)])
    if new.lower() in {f["name"].lower() for f in struct["fields"] if f["name"] != name}:
        raise ColumnCaseConflictError(f"cannot rename {'.'.join(path)!r} to {new!r}: the struct has a field of that "
                                   "name (names are compared without case)", [new])
    return {**struct, "fields": [{**f, "name": new} if f["name"] == name else f for f in struct["fields"]]}


def _drop_in(struct: Any, name: str, path: tuple[str, ...]) -> Any:
    if not isinstance(struct, dict) or struct.get("type") != "struct":
        raise SchemaEvolutionError(f"cannot drop {'.'.join(path)!r}: an array's elements and a map's keys and values "
                                   "cannot be dropped; drop the column", [".".join(path)])
    if len(struct["fields"]) == 1:
        raise SchemaEvolutionError(f"cannot drop {'.'.join(path)!r}: it is its struct's only field (Delta keeps a "
                                   "struct non-empty); drop the struct instead", [".".join(path)])
    return {**struct, "fields": [f for f in struct["fields"] if f["name"] != name]}


def _check_mapped(snapshot: Snapshot, verb: str) -> None:
    if not is_mapped(snapshot.metadata.configuration):
        raise InvalidOptionError(
            f"cannot {verb} a column of {snapshot.storage.url} without column mapping: its files name columns by "
            f"their names. Enable column mapping with mode 'name' first (no file is rewritten; the table's protocol "
            f"becomes reader 2 / writer 5, as Delta's): ALTER TABLE <table> SET TBLPROPERTIES ('{MODE}' = 'name') in "
            f"SQL (Delta's form with 'delta.minReaderVersion' = '2', 'delta.minWriterVersion' = '5' works too), "
            f"or set_properties({{'{MODE}': 'name'}}) in Python. Or rewrite the table with "
            "overwrite(..., schema_mode='overwrite')")


def _check_free(snapshot: Snapshot, columns: list[str], verb: str) -> None:
    """Refuse columns that bucket, index or partition the table."""
    meta = snapshot.metadata
    indexed = set(meta.indexColumns) | set(indexed_columns(snapshot))
    bound = [c for c in columns if c in indexed]
    if bound:
        raise IndexColumnChangeError(f"cannot {verb} {bound}: the table is bucketed or indexed by them; drop the "
                                     "index first (the bucketing columns stay for the table's life)", bound)
    parted = [c for c in columns if c in meta.partitionColumns]
    if parted and verb == "drop":  # a rename keeps the physical name partitionValues use
        raise SchemaEvolutionError(f"cannot drop {parted}: the table is partitioned by them (Delta refuses it too: "
                                   "every file's partitionValues name them)", parted)


def _renamed_metadata(metadata: dict, old: str, new: str) -> dict:
    """A column's metadata after its rename: Delta's collations name the column they apply to."""
    out = dict(metadata)
    named = out.get(COLLATIONS)
    if isinstance(named, dict) and old in named:
        out[COLLATIONS] = {(new if k == old else k): v for k, v in named.items()}
    return out
