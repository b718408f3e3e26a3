"""The table schema as it is written in the log, and its mapping to Arrow types.

The log stores a schema as a list of fields, each with a Spark-style type name, so a
person can read it and Spark maps it one to one. Only flat (primitive) columns are
supported in this protocol version.
"""

from __future__ import annotations

import re
from typing import Any

import pyarrow as pa
from pydantic import BaseModel, ConfigDict

from ..errors import SchemaMismatchError, UnsupportedTypeError

_DECIMAL = re.compile(r"^decimal\((\d+),\s*(\d+)\)$")

# Type name in the log -> Arrow type used for reading and writing.
_NAMED_TYPES: dict[str, pa.DataType] = {
    "boolean": pa.bool_(),
    "byte": pa.int8(),
    "short": pa.int16(),
    "integer": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "string": pa.string(),
    "binary": pa.binary(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "timestamp_ntz": pa.timestamp("us"),
}


class Field(BaseModel):
    """One column: name, type name (see ``docs/PROTOCOL.md``), nullability, and the
    column's metadata as the schema JSON holds it (Delta keeps a column comment under
    ``"comment"``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    type: str
    nullable: bool = True
    metadata: dict[str, Any] = {}

    def __hash__(self) -> int:  # the metadata dict is not hashable; equal fields still hash alike
        return hash((self.name, self.type, self.nullable))

    @property
    def comment(self) -> str | None:
        """The column's comment (``COMMENT`` in SQL), or None."""
        c = self.metadata.get("comment")
        return c if isinstance(c, str) else None


def type_name(arrow_type: pa.DataType, column: str = "?") -> str:
    """The log's type name for an Arrow type; raises ``UnsupportedTypeError`` when none."""
    t = arrow_type
    if pa.types.is_dictionary(t):
        t = t.value_type
    if pa.types.is_boolean(t):
        return "boolean"
    for name in ("byte", "short", "integer", "long", "float", "double"):
        if t == _NAMED_TYPES[name]:
            return name
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return "binary"
    if pa.types.is_date32(t) or pa.types.is_date64(t):
        return "date"
    if pa.types.is_timestamp(t):
        return "timestamp" if t.tz is not None else "timestamp_ntz"
    if pa.types.is_decimal(t) and 0 <= t.scale <= t.precision <= 38:  # decimal256 too: stored as 128
        return f"decimal({t.precision},{t.scale})"
    raise UnsupportedTypeError(
        f"column {column!r} has type {arrow_type}, which indexeddf cannot store; supported: "
        "boolean, int8/16/32/64, float32/64, decimal up to precision 38 with 0 <= scale <= precision, "
        "string, binary, "
        "date, timestamp. Cast the column first.",
        [column],
    )


def arrow_type(name: str) -> pa.DataType:
    """The Arrow type for a log type name."""
    if name in _NAMED_TYPES:
        return _NAMED_TYPES[name]
    m = _DECIMAL.match(name)
    if m and 0 <= int(m.group(2)) <= int(m.group(1)) <= 38 and int(m.group(1)) >= 1:
        return pa.decimal128(int(m.group(1)), int(m.group(2)))
    raise UnsupportedTypeError(f"unknown type name {name!r} in the table schema", [])


def fields_from_arrow(schema: pa.Schema) -> tuple[Field, ...]:
    """Log fields for an Arrow schema (refuses duplicate and unsupported columns)."""
    names = schema.names
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise SchemaMismatchError(f"duplicate column names {dupes}; rename them first", dupes)
    return tuple(Field(name=f.name, type=type_name(f.type, f.name), nullable=f.nullable) for f in schema)


def check_columns(names: list[str], columns) -> None:
    """Refuse ``columns`` that are not among the table's column ``names``."""
    unknown = [c for c in (columns or []) if c not in names]
    if unknown:
        raise SchemaMismatchError(f"unknown columns {unknown}; the table has {list(names)}", unknown)


def arrow_schema(fields: tuple[Field, ...] | list[Field]) -> pa.Schema:
    """The Arrow schema that the table's Parquet files are written with and read as."""
    return pa.schema([pa.field(f.name, arrow_type(f.type), nullable=f.nullable) for f in fields])


def dictionary_columns(schema: pa.Schema, columns=None) -> list[str]:
    """The string and binary columns of ``schema`` (of ``columns`` when given, in that
    order): data files store them dictionary-encoded, everything else plain, and the
    reader keeps them dictionary-encoded in its cache."""
    kinds = (pa.types.is_string, pa.types.is_large_string, pa.types.is_binary, pa.types.is_large_binary)
    names = schema.names if columns is None else columns
    return [c for c in names if any(k(schema.field(c).type) for k in kinds)]
