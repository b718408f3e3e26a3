"""Incoming data: conversion to Arrow and enforcement of the table schema."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InvalidOptionError, SchemaMismatchError
from ..spec.schema import Field, arrow_schema, check_index_types, fields_from_arrow, type_name
from ..spec.schema_evolution import widened
from ..spec.types import display, has_timestamp, same_type


def to_arrow_table(data: Any) -> pa.Table:
    """A ``pyarrow.Table`` from a Table, RecordBatch, RecordBatchReader, pandas DataFrame
    or Spark DataFrame (collected to this process; ``IndexedTable`` writes Spark
    DataFrames from Spark's tasks instead, see ``docs/spark.md``)."""
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if isinstance(data, pa.RecordBatchReader):
        return data.read_all()
    if type(data).__module__.startswith("pandas") and hasattr(data, "columns"):
        return pa.Table.from_pandas(data, preserve_index=False)
    if type(data).__module__.startswith("pyspark.sql") and hasattr(data, "toArrow"):
        return data.toArrow()
    raise InvalidOptionError(
        f"cannot write data of type {type(data).__name__}; pass a pyarrow.Table, "
        "pyarrow.RecordBatchReader, pandas.DataFrame or Spark DataFrame"
    )


def table_fields(data: pa.Table, index_columns: list[str]) -> tuple[Field, ...]:
    """The log schema of a new table from its first data (validates the index columns)."""
    fields = fields_from_arrow(data.schema)
    missing = [c for c in index_columns if c not in data.schema.names]
    if missing:
        raise SchemaMismatchError(
            f"index columns {missing} are not in the data (columns: {data.schema.names})", missing
        )
    if not index_columns:
        raise InvalidOptionError("index_columns must name at least one column to bucket by")
    check_index_types(fields, index_columns)
    return fields


def conform(data: pa.Table, fields: tuple[Field, ...], merge: bool = False) -> pa.Table:
    """``data`` with the table's column order and exact Arrow types.

    Columns are matched by name. Representations of the same logical type are
    accepted and converted (large strings, other timestamp units or zones, dictionary
    encoding); anything else raises ``SchemaMismatchError`` naming every column that
    differs, before a single file is written. With ``merge`` (a write that evolves the
    schema, after ``merge_fields`` gave ``fields``), nullable table columns the data lacks
    are written as NULL and narrower integer columns are widened to the table's type.
    """
    expected = {f.name: f for f in fields}
    given = {name: data.schema.field(name) for name in data.schema.names}
    problems: list[str] = []
    details: list[str] = []
    for name in given:
        if name not in expected:
            problems.append(name)
            details.append(f"{name!r} is not in the table")
    for name, f in expected.items():
        if name not in given:
            if merge and f.nullable:
                continue
            problems.append(name)
            details.append(f"{name!r} is missing")
            continue
        got = _type_name_or_none(given[name].type)
        if pa.types.is_null(given[name].type) and f.nullable:
            continue  # an all-null column of unknown type fits any nullable column
        if not (got is not None and same_type(f.type, got)) \
                and not (merge and got is not None and widened(f.type, got) == f.type):
            problems.append(name)
            details.append(f"{name!r} is {display(got) if got else given[name].type}, the table has {display(f.type)}")
    if problems:
        raise SchemaMismatchError(
            "data does not match the table schema: " + "; ".join(details)
            + ". Cast or rename the columns to match; to evolve the schema, write with schema_mode='merge' "
            "(Spark: option mergeSchema) or overwrite with schema_mode='overwrite' (Spark: overwriteSchema).",
            problems,
        )
    target = arrow_schema(fields)
    columns = []
    for target_field in target:
        if target_field.name not in given:  # merge: a column the data lacks
            columns.append(pa.nulls(data.num_rows, target_field.type))
            continue
        col = data.column(target_field.name)
        if pa.types.is_dictionary(col.type):
            col = col.cast(col.type.value_type)
        if col.type != target_field.type:
            # Timestamp units (nested ones too): Spark keeps microseconds; finer units are
            # truncated as Spark does. Nested types take the table's field names and nullability.
            col = pc.cast(col, target_field.type, safe=not has_timestamp(col.type))
        if not target_field.nullable and col.null_count:
            raise SchemaMismatchError(f"column {target_field.name!r} is not nullable but has nulls", [target_field.name])
        columns.append(col)
    return pa.Table.from_arrays(columns, schema=target)


def _type_name_or_none(t: pa.DataType) -> str | None:
    try:
        return type_name(t)
    except SchemaMismatchError:
        return None
