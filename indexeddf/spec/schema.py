"""The table schema as it is written in the log, and its mapping to Arrow types.

The log stores a schema as Spark's JSON (Delta's ``schemaString``): a list of fields,
each with a Spark-style type name or, for struct, array and map columns, the nested
type's JSON (``spec/types.py`` maps both to Arrow). Spark maps it one to one.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from pydantic import BaseModel, ConfigDict

from ..errors import NestedIndexColumnError, SchemaMismatchError
from .types import arrow_type, display, is_nested, type_name

__all__ = ["Field", "arrow_type", "type_name", "fields_from_arrow", "check_columns", "check_index_types",
           "arrow_schema", "dictionary_columns"]


class Field(BaseModel):
    """One column: name, type (a type name, or a nested type's compact JSON: see
    ``spec/types.py`` and ``docs/PROTOCOL.md``), nullability, and the column's metadata as
    the schema JSON holds it (Delta keeps a column comment under ``"comment"``)."""

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

    @property
    def nested(self) -> bool:
        """Whether the column is a struct, array or map (its ``type`` is then JSON)."""
        return is_nested(self.type)


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


def check_index_types(fields, columns) -> None:
    """Refuse index (bucketing) ``columns`` that are struct, array or map columns: an index
    column is a top-level column of a primitive type (its values hash as Spark's do)."""
    nested = [f for f in fields if f.name in set(columns or ()) and f.nested]
    if nested:
        names = [f.name for f in nested]
        kinds = ", ".join(f"{f.name!r} is {display(f.type)}" for f in nested)
        raise NestedIndexColumnError(
            f"index columns must be top-level columns of a primitive type: {kinds}. Index by a primitive column, "
            "or copy the nested field into a column of its own and index by that.", names)


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
