"""Partition values of a partitioned Delta table: ``metaData.partitionColumns`` and each
file's ``add.partitionValues``.

A partitioned table's files do not hold the partition columns: every row of a file has
the value its add names, a string in Delta's partition value serialization (Delta's
PROTOCOL.md, "Partition Value Serialization"), JSON null for NULL. This module turns those
strings into typed values and Arrow columns (reads) and typed values into those strings
and Hive-style directory names (writes). Nothing here does I/O.

Timestamps written as ``YYYY-MM-DD HH:MM:SS[.ffffff]`` (no zone) are read as UTC, as
delta-rs and DuckDB read them; the ISO 8601 form with a zone (``...T...Z``) is read as
the instant it names.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation

import pyarrow as pa

from ..errors import CorruptLogError, InvalidOptionError, SchemaMismatchError
from .column_mapping import physical_name

HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
"""The directory name of a NULL partition value (Hive's, which Spark and delta-rs use)."""

PartitionValues = Mapping[str, "str | None"]

# Characters Hive (and so Spark and delta-rs) percent-encode in a partition directory name.
_HIVE_ESCAPED = set('"#%\'*/:=?\\\x7f{}[]^') | {chr(c) for c in range(0x20)}


def parse_value(text: str | None, arrow_type: pa.DataType, column: str = "?"):
    """The typed value of one serialized partition value (None for NULL) of a column of
    ``arrow_type`` (the table's); a value that does not parse is a corrupt log."""
    if text is None:
        return None
    try:
        return _parse(text, arrow_type)
    except (ValueError, InvalidOperation, OverflowError):
        raise CorruptLogError(f"partition value {text!r} of column {column!r} is not a {arrow_type}") from None


def _parse(text: str, t: pa.DataType):
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return text
    if pa.types.is_integer(t):
        return int(text)
    if pa.types.is_floating(t):
        return float(text)
    if pa.types.is_boolean(t):
        if text.lower() not in ("true", "false"):
            raise ValueError(text)
        return text.lower() == "true"
    if pa.types.is_date(t):
        return dt.date.fromisoformat(text)
    if pa.types.is_timestamp(t):
        value = dt.datetime.fromisoformat(text)
        if value.tzinfo is not None:
            value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return value.replace(tzinfo=dt.timezone.utc) if t.tz is not None else value
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return text.encode("latin-1")  # Delta: the bytes as a string of escaped code points
    if pa.types.is_decimal(t):
        return Decimal(text)
    raise ValueError(str(t))


def constant_column(text: str | None, arrow_type: pa.DataType, n: int, column: str = "?") -> pa.Array:
    """``n`` rows of one file's partition value, typed as the table's column."""
    value = parse_value(text, arrow_type, column)
    if value is None:
        return pa.nulls(n, arrow_type)
    return pa.repeat(pa.scalar(value, arrow_type), n)


def partition_expression(values: PartitionValues, schema: pa.Schema):
    """A file's partition values as a ``pyarrow.dataset`` partition expression (a conjunction
    of ``column == value`` and ``is_null``): a dataset fills the partition columns of the
    file's rows from it and skips the file when a filter contradicts it."""
    import pyarrow.compute as pc

    out = None
    for column, text in values.items():
        t = schema.field(column).type
        value = parse_value(text, t, column)
        term = pc.field(column).is_null() if value is None else pc.field(column) == pa.scalar(value, t)
        out = term if out is None else out & term
    return out


def serialize_value(value, arrow_type: pa.DataType) -> str | None:
    """A value of a column of ``arrow_type`` as ``add.partitionValues`` holds it (None: NULL;
    an empty string or binary is NULL too, as Spark's Delta writer stores it). Timestamps
    are written in UTC, without a zone, to the microsecond."""
    if value is None:
        return None
    t = arrow_type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return value or None
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return bytes(value).decode("latin-1") or None
    if pa.types.is_boolean(t):
        return "true" if value else "false"
    if pa.types.is_date(t):
        return value.isoformat()
    if pa.types.is_timestamp(t):
        if value.tzinfo is not None:
            value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return value.strftime("%Y-%m-%d %H:%M:%S.%f")
    if pa.types.is_floating(t):
        return repr(float(value)) if value == value else "NaN"
    return str(value)


def hive_escape(text: str | None) -> str:
    """A serialized partition value as a Hive-style directory name component."""
    if text is None:
        return HIVE_NULL
    return "".join(f"%{ord(c):02X}" if c in _HIVE_ESCAPED else c for c in text)


def partition_dir(columns: Sequence[str], values: PartitionValues) -> str:
    """The directory (``a=1/b=x``) of a file with ``values`` in a table partitioned by ``columns``."""
    return "/".join(f"{hive_escape(c)}={hive_escape(values.get(c))}" for c in columns)


def check_partition_columns(columns: Sequence[str], names: Sequence[str]) -> tuple[str, ...]:
    """``columns`` as a new table's partition columns (of the table's column ``names``):
    known, distinct, and not every column (a file must hold at least one)."""
    columns = tuple(columns)
    unknown = [c for c in columns if c not in names]
    if unknown:
        raise SchemaMismatchError(f"partition columns {unknown} are not in the table; it has {list(names)}", unknown)
    if len(set(columns)) != len(columns):
        raise InvalidOptionError(f"partition columns {list(columns)} name a column twice")
    if columns and len(columns) == len(names):
        raise InvalidOptionError("every column would be a partition column: the data files would hold none; "
                                 "leave at least one column out of partition_by")
    return columns


def check_values(columns: Sequence[str], values: PartitionValues, where: str) -> None:
    """Refuse an add whose ``partitionValues`` does not name exactly the table's partition
    columns (Delta requires every partition column, and no other)."""
    if set(values) != set(columns):
        raise CorruptLogError(f"{where}: partitionValues names {sorted(values)}, but the table is partitioned "
                              f"by {list(columns)}")


def prune(files, fixed: Mapping[str, Sequence], schema: pa.Schema) -> list:
    """Those of ``files`` (AddFiles) whose partition may hold rows whose columns take the
    values ``fixed`` (column -> the values it may equal, None among them: NULL). Columns
    that are not partition columns, or values that do not fit their column, exclude nothing.
    ``schema``: the table's ``file_schema``; ``partitionValues`` name a column-mapped table's
    columns by their physical names."""
    wanted = {}
    for column, values in fixed.items():
        t = schema.field(column).type
        typed = _typed(values, t)
        if typed is not None:
            wanted[physical_name(schema.field(column))] = (t, set(typed))
    out = []
    for a in files:
        pv = a.partitionValues
        if all(c not in pv or parse_value(pv[c], t, c) in ok for c, (t, ok) in wanted.items()):
            out.append(a)
    return out


def _typed(values, t: pa.DataType) -> list | None:
    """``values`` (an Arrow array or Python values, as a filter or lookup keys give them) as
    values of ``t``; text without an offset for a timestamp is UTC. None: they do not fit."""
    errors = (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, ValueError)
    try:
        arr = values if isinstance(values, (pa.Array, pa.ChunkedArray)) else pa.array(list(values))
        try:
            return arr.cast(t).to_pylist()
        except errors:
            if not (pa.types.is_timestamp(t) and t.tz is not None and pa.types.is_string(arr.type)):
                raise
            return arr.cast(pa.timestamp(t.unit)).cast(t).to_pylist()
    except errors:
        return None
