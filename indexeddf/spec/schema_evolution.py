"""Schema evolution: the new table schema of a write that evolves it, or of ADD COLUMNS.

Delta's rules, as Delta's ``mergeSchema`` and delta-rs's ``schema_mode`` apply them, in
the profile of ``docs/PROTOCOL.md``:

- a column the data has and the table lacks is added at the end, nullable (rows
  written before it read it as NULL, in every Delta reader); so is a struct field, at the
  end of its struct (structs inside arrays and maps too);
- a table column the data lacks stays, and the new rows hold NULL in it;
- a type changes only by the widenings ``byte`` -> ``short`` -> ``integer``: the three
  are stored as the same Parquet type (INT32), so every reader reads the old files as
  the wider type. Any other change (``integer`` -> ``long``, decimals, ...) needs
  Delta's ``typeWidening`` feature, which this profile does not implement;
- a name that differs from an existing one only by case is refused (Spark resolves
  names case-insensitively and could not tell the two apart);
- the columns the table is bucketed or indexed by are never dropped, renamed or retyped.

Every function here only computes and checks; nothing is written. Refusals are typed
(``errors.SchemaEvolutionError`` and its subclasses) and name the columns.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa

from ..errors import (
    ColumnCaseConflictError,
    IndexColumnChangeError,
    InvalidOptionError,
    SchemaEvolutionError,
    TypeChangeError,
)
from .schema import Field, arrow_type, fields_from_arrow, type_name
from .types import display, is_nested, same_type, type_text, type_value

SCHEMA_MODES = ("merge", "overwrite")
"""delta-rs's ``schema_mode`` values: ``merge`` adds the data's new columns, ``overwrite``
(overwrites only) replaces the schema with the data's."""

_INT32_WIDTHS = {"byte": 1, "short": 2, "integer": 4}
"""Types stored as Parquet INT32, by width: widening among them needs no rewrite."""


def check_schema_mode(mode: str | None, overwrite: bool) -> str | None:
    """``mode`` validated (None: the schema must match, no evolution)."""
    if mode is None:
        return None
    allowed = SCHEMA_MODES if overwrite else ("merge",)
    if mode not in allowed:
        what = "overwrite" if overwrite else "append"
        raise InvalidOptionError(f"schema_mode for {what} must be one of {list(allowed)} or None, got {mode!r}")
    return mode


def widened(old: str, new: str) -> str | None:
    """The type a column of type ``old`` has after data of type ``new`` is merged into
    it, or None when the change is refused. Structs (also inside arrays and maps) gain the
    data's new fields at their end, as Delta's mergeSchema adds them."""
    if same_type(old, new):
        return old
    if is_nested(old) and is_nested(new):
        merged = _merged_value(type_value(old), type_value(new))
        return None if merged is None else type_text(merged)
    if old in _INT32_WIDTHS and new in _INT32_WIDTHS:
        return old if _INT32_WIDTHS[old] >= _INT32_WIDTHS[new] else new
    return None


def _merged_value(old: Any, new: Any) -> Any:
    """:func:`widened` on the schema JSON's values of two types (None: refused)."""
    if isinstance(old, str) or isinstance(new, str):
        if isinstance(old, str) and isinstance(new, str):
            return widened(old, new)
        return None
    kind = old.get("type")
    if kind != new.get("type"):
        return None
    if kind == "array":
        element = _merged_value(old["elementType"], new["elementType"])
        return None if element is None else {**old, "elementType": element}
    if kind == "map":
        key, value = _merged_value(old["keyType"], new["keyType"]), _merged_value(old["valueType"], new["valueType"])
        return None if key != old["keyType"] or value is None else {**old, "valueType": value}
    fields, ours = [], {f["name"] for f in old["fields"]}
    by_lower = {name.lower() for name in ours}
    theirs = {f["name"]: f for f in new["fields"]}
    for f in old["fields"]:  # the table's fields, in its order; the data may lack some (NULL)
        typ = f["type"] if f["name"] not in theirs else _merged_value(f["type"], theirs[f["name"]]["type"])
        if typ is None:
            return None
        fields.append({**f, "type": typ})
    for f in new["fields"]:
        if f["name"] in ours:
            continue
        if f["name"].lower() in by_lower:
            return None  # differs from a field only by case
        fields.append({**f, "nullable": True})  # rows written before have no value for it
    return {**old, "fields": fields}


def merge_fields(fields: Sequence[Field], data: pa.Schema, index_columns: Iterable[str],
                 indexed_columns: Iterable[str] = ()) -> tuple[Field, ...]:
    """The table schema after merging the data schema ``data`` into ``fields``.

    ``index_columns``: the bucketing columns; ``indexed_columns``: the columns of every
    other index. Their types never change, and the data must hold the bucketing columns.
    Returns ``fields`` itself (the same tuple) when nothing changes.
    """
    fields = tuple(fields)
    by_name = {f.name: f for f in fields}
    by_lower = {f.name.lower(): f.name for f in fields}
    protected = set(index_columns) | set(indexed_columns)
    _refuse_duplicates(data.names)
    missing_keys = [c for c in index_columns if c not in data.names]
    if missing_keys:
        raise IndexColumnChangeError(
            f"the data lacks the index columns {missing_keys}: every row needs its bucketing key", missing_keys)
    case, types, type_details = [], [], []
    changed: dict[str, Field] = {}
    added: list[Field] = []
    for f in data:
        old = by_name.get(f.name)
        if old is None:
            if f.name.lower() in by_lower:
                case.append(f.name)
                continue
            # New columns are nullable: the rows already in the table have no value for them.
            added.append(Field(name=f.name, type=type_name(f.type, f.name), nullable=True))
            continue
        if pa.types.is_null(f.type):
            continue  # an all-null column of unknown type fits the table's type
        new_type = type_name(f.type, f.name)
        merged = widened(old.type, new_type)
        if merged is None or (merged != old.type and f.name in protected):
            types.append(f.name)
            type_details.append(f"{f.name!r} is {display(new_type)}, the table has {display(old.type)}")
        elif merged != old.type:
            changed[f.name] = old.model_copy(update={"type": merged})
    if case:
        _refuse_case(case, by_lower)
    if types:
        raise TypeChangeError(
            "the data changes column types in a way indexeddf does not allow: " + "; ".join(type_details)
            + ". Only byte -> short -> integer widen in place (the same Parquet type), never for an index "
            "column, and struct, array and map columns keep their fields and types; cast the data to the "
            "table's types, or rewrite the table with schema_mode='overwrite' (Spark: overwriteSchema).", types)
    if not changed and not added:
        return fields
    return tuple(changed.get(f.name, f) for f in fields) + tuple(added)


def overwrite_fields(fields: Sequence[Field], data: pa.Schema, index_columns: Iterable[str],
                     indexed_columns: Iterable[str] = ()) -> tuple[Field, ...]:
    """The table schema of an overwrite that replaces the schema with the data's
    (``schema_mode="overwrite"``, Spark's ``overwriteSchema``): every row is rewritten,
    so any change is allowed except losing a column the table is bucketed or indexed by."""
    _refuse_duplicates(data.names)
    new = fields_from_arrow(data)
    names = [f.name for f in new]
    lost = [c for c in dict.fromkeys([*index_columns, *indexed_columns]) if c not in names]
    if lost:
        raise IndexColumnChangeError(
            f"the new schema drops the index columns {lost} (columns: {names}); the table is bucketed or "
            "indexed by them. Keep them in the data, or delete the secondary indexes on them first.", lost)
    old = {f.name: f for f in fields}
    # A surviving column keeps its comment and other metadata, as a rename-free overwrite
    # should (a nested one of the same shape too: its type is the data's).
    return tuple(f.model_copy(update={"metadata": old[f.name].metadata})
                 if f.name in old and same_type(old[f.name].type, f.type) else f for f in new)


def added_fields(fields: Sequence[Field], columns: Any) -> tuple[Field, ...]:
    """The table schema after ``ADD COLUMNS``: ``columns`` appended at the end.

    ``columns``: ``pyarrow.Field`` objects or ``(name, type)`` / ``(name, type, comment)``
    tuples, where type is a ``pyarrow.DataType`` or a type name of the protocol
    (``"long"``, ``"decimal(10,2)"``). A comment (argument, or ``b"comment"`` in a
    pyarrow field's metadata) is kept in the column's metadata under ``"comment"``, as
    Delta keeps it. New columns must be nullable: the rows already in the table have none.
    """
    if isinstance(columns, (pa.Field, tuple)) or not isinstance(columns, Iterable) or isinstance(columns, str):
        raise InvalidOptionError(f"add_columns takes a list of columns, got {columns!r}")
    new = [_column(c) for c in columns]
    if not new:
        raise InvalidOptionError("add_columns needs at least one column")
    _refuse_duplicates([f.name for f in new])
    existing = [f.name for f in fields if f.name in {n.name for n in new}]
    if existing:
        raise SchemaEvolutionError(f"columns {existing} already exist in the table", existing)
    by_lower = {f.name.lower(): f.name for f in fields}
    case = [f.name for f in new if f.name.lower() in by_lower]
    if case:
        _refuse_case(case, by_lower)
    strict = [f.name for f in new if not f.nullable]
    if strict:
        raise SchemaEvolutionError(
            f"new columns {strict} are declared NOT NULL, but the rows already in the table have no value for "
            "them; add them nullable (Delta refuses NOT NULL in ADD COLUMNS too)", strict)
    return tuple(fields) + tuple(new)


def _column(c: Any) -> Field:
    """One ``add_columns`` entry as a log field."""
    if isinstance(c, pa.Field):
        meta = {k.decode(): v.decode() for k, v in (c.metadata or {}).items()}
        comment = meta.get("comment")
        return _field(c.name, c.type, comment, c.nullable)
    if isinstance(c, (tuple, list)) and len(c) in (2, 3) and isinstance(c[0], str):
        return _field(c[0], c[1], c[2] if len(c) == 3 else None, True)
    raise InvalidOptionError(
        f"a column to add must be a pyarrow.Field or a (name, type[, comment]) tuple, got {c!r}")


def _field(name: str, typ: Any, comment: Any, nullable: bool) -> Field:
    if not name:
        raise InvalidOptionError("a column name must not be empty")
    if comment is not None and not isinstance(comment, str):
        raise InvalidOptionError(f"the comment of column {name!r} must be a string, got {comment!r}")
    if isinstance(typ, str):
        arrow_type(typ)  # refuses an unknown type name
        tname = typ
    elif isinstance(typ, pa.DataType):
        tname = type_name(typ, name)
    else:
        raise InvalidOptionError(f"the type of column {name!r} must be a pyarrow type or a type name, got {typ!r}")
    return Field(name=name, type=tname, nullable=nullable, metadata={"comment": comment} if comment else {})


def _refuse_duplicates(names: Sequence[str]) -> None:
    seen: dict[str, str] = {}
    clash = []
    for n in names:
        if n.lower() in seen:
            clash += [seen[n.lower()], n]
        seen.setdefault(n.lower(), n)
    if clash:
        clash = list(dict.fromkeys(clash))
        raise ColumnCaseConflictError(
            f"the columns {clash} have the same name up to case; Spark could not tell them apart. Rename them.",
            clash)


def _refuse_case(case: list[str], by_lower: dict[str, str]) -> None:
    pairs = ", ".join(f"{n!r} (the table has {by_lower[n.lower()]!r})" for n in case)
    raise ColumnCaseConflictError(
        f"new columns differ from existing ones only by case: {pairs}. Spark resolves column names "
        "case-insensitively and could not tell them apart: rename the data's column to the table's name, "
        "or choose another name.", case)
