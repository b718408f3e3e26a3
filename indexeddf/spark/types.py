"""The Spark schema of a table: its log fields as Spark SQL types."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pyarrow as pa
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
    _parse_datatype_json_value,
)

from ..errors import SchemaMismatchError
from ..spec.schema import Field, arrow_type
from ..spec.types import is_nested

_SPARK_TYPES: dict[str, DataType] = {
    "boolean": BooleanType(),
    "byte": ByteType(),
    "short": ShortType(),
    "integer": IntegerType(),
    "long": LongType(),
    "float": FloatType(),
    "double": DoubleType(),
    "string": StringType(),
    "binary": BinaryType(),
    "date": DateType(),
    "timestamp": TimestampType(),
    "timestamp_ntz": TimestampNTZType(),
}


def spark_type(name: str) -> DataType:
    """The Spark type of a log type (``spec/types.py``): a struct, array or map type's JSON
    is Spark's own serialization, which Spark parses."""
    if is_nested(name):
        arrow_type(name)  # refuses a leaf type indexeddf does not store
        return _parse_datatype_json_value(json.loads(name))
    if name in _SPARK_TYPES:
        return _SPARK_TYPES[name]
    t = arrow_type(name)  # raises UnsupportedTypeError for an unknown name
    if pa.types.is_decimal(t):
        return DecimalType(t.precision, t.scale)
    raise SchemaMismatchError(f"type {name!r} has no Spark equivalent", [])


def spark_schema(fields: Sequence[Field]) -> StructType:
    """The Spark schema of a table's log fields."""
    return StructType([StructField(f.name, spark_type(f.type), f.nullable) for f in fields])
