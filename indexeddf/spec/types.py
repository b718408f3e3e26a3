"""Column types: the log's type of a column, and its Arrow type.

A column's type in the log (``Field.type``) is a string either way:

- a primitive type is its Delta / Spark type name (``"long"``, ``"decimal(10,2)"``);
- a nested type (struct, array, map, nested in one another to any depth) is the compact
  JSON text of its Delta serialization (Delta PROTOCOL.md, "Schema Serialization
  Format"): ``{"type":"struct","fields":[...]}``, ``{"type":"array","elementType":...,
  "containsNull":...}``, ``{"type":"map","keyType":...,"valueType":...,
  "valueContainsNull":...}``. The text is the one the log holds, so a schema read from
  a log is written back byte for byte (nested fields' metadata and key order included).

A string keeps every flat-column caller (names compared, hashed, shown in messages)
working unchanged; :func:`is_nested` tells the two apart, :func:`same_type` compares
types the way writes need (nested types up to nullability and metadata), and
:func:`display` renders a nested type as Spark's ``struct<a:long,...>`` for messages.
Nothing here does I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from ..errors import UnsupportedTypeError

_DECIMAL = re.compile(r"^decimal\((\d+),\s*(\d+)\)$")

# Type name in the log -> Arrow type used for reading and writing.
NAMED_TYPES: dict[str, pa.DataType] = {
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

NESTED_KINDS = ("struct", "array", "map")
"""The ``type`` of a nested type's JSON object."""

LIST_ELEMENT = "element"
"""The Arrow name of a list's element field: Parquet's (LIST, 3-level), which pyarrow reads back."""

_SUPPORTED = ("boolean, int8/16/32/64, float32/64, decimal up to precision 38 with 0 <= scale <= precision, "
              "string, binary, date, timestamp, and structs, lists and maps of these (nested to any depth)")


def is_nested(name: str) -> bool:
    """Whether a log type (``Field.type``) is a nested type's JSON text."""
    return name.startswith("{")


def type_text(value: Any) -> str:
    """``Field.type`` for a type as the schema JSON holds it (a name, or a nested type's object)."""
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def type_value(name: str) -> Any:
    """The schema JSON's value for a log type: the name, or the nested type's object."""
    return json.loads(name) if is_nested(name) else name


# -- checking a schema's nested types --------------------------------------------------------


class NestedTypeError(ValueError):
    """A nested type whose JSON is not Delta's serialization (the caller names the column)."""


def check_type_value(value: Any, where: str) -> None:
    """Refuse (:class:`NestedTypeError`) a type value that is not Delta's serialization of a
    type: a name, or a struct / array / map object with the keys the protocol gives it.
    Primitive names are not checked here (``arrow_type`` refuses unknown ones on use)."""
    if isinstance(value, str):
        return
    if not isinstance(value, dict):
        raise NestedTypeError(f"{where}: a type must be a name or a JSON object, got {json.dumps(value)[:60]}")
    kind = value.get("type")
    if kind == "struct":
        fields = value.get("fields")
        if not isinstance(fields, list):
            raise NestedTypeError(f"{where}: a struct type needs a list of fields")
        for f in fields:
            if not isinstance(f, dict) or not isinstance(f.get("name"), str) or "type" not in f:
                raise NestedTypeError(f"{where}: a struct field needs a name and a type")
            if not isinstance(f.get("nullable", True), bool) or not isinstance(f.get("metadata", {}), dict):
                raise NestedTypeError(f"{where}.{f['name']}: nullable must be a boolean and metadata an object")
            check_type_value(f["type"], f"{where}.{f['name']}")
    elif kind == "array":
        _check_flag(value, "containsNull", where)
        check_type_value(value.get("elementType"), f"{where}.element")
    elif kind == "map":
        _check_flag(value, "valueContainsNull", where)
        check_type_value(value.get("keyType"), f"{where}.key")
        check_type_value(value.get("valueType"), f"{where}.value")
    else:
        raise NestedTypeError(f"{where}: unknown nested type {kind!r}; Delta nests struct, array and map")


def _check_flag(value: dict, key: str, where: str) -> None:
    if not isinstance(value.get(key, True), bool):
        raise NestedTypeError(f"{where}: {key} must be a boolean")


# -- log type -> Arrow -----------------------------------------------------------------------


def arrow_type(name: str) -> pa.DataType:
    """The Arrow type for a log type (a name, or a nested type's JSON text)."""
    if is_nested(name):
        try:
            value = json.loads(name)
        except json.JSONDecodeError:
            raise UnsupportedTypeError(f"unknown type {name[:60]!r} in the table schema", []) from None
        return _arrow_of(value)
    if name in NAMED_TYPES:
        return NAMED_TYPES[name]
    m = _DECIMAL.match(name)
    if m and 0 <= int(m.group(2)) <= int(m.group(1)) <= 38 and int(m.group(1)) >= 1:
        return pa.decimal128(int(m.group(1)), int(m.group(2)))
    raise UnsupportedTypeError(f"unknown type name {name!r} in the table schema", [])


def _arrow_of(value: Any) -> pa.DataType:
    if isinstance(value, str):
        return arrow_type(value)
    if not isinstance(value, dict):
        raise UnsupportedTypeError(f"unknown type {json.dumps(value)[:60]} in the table schema", [])
    kind = value.get("type")
    if kind == "struct":
        return pa.struct([pa.field(f["name"], _arrow_of(f["type"]), nullable=f.get("nullable", True))
                          for f in value.get("fields", [])])
    if kind == "array":
        element = pa.field(LIST_ELEMENT, _arrow_of(value.get("elementType")), nullable=value.get("containsNull", True))
        return pa.list_(element)
    if kind == "map":
        return pa.map_(pa.field("key", _arrow_of(value.get("keyType")), nullable=False),
                       pa.field("value", _arrow_of(value.get("valueType")),
                                nullable=value.get("valueContainsNull", True)))
    raise UnsupportedTypeError(f"unknown nested type {kind!r} in the table schema", [])


# -- Arrow -> log type -----------------------------------------------------------------------


def type_name(arrow: pa.DataType, column: str = "?") -> str:
    """The log's type for an Arrow type (a nested one's JSON text); raises
    ``UnsupportedTypeError`` naming ``column`` when there is none."""
    return type_text(_value_of(arrow, column, column))


def _value_of(arrow: pa.DataType, column: str, root: str) -> Any:
    t = arrow.value_type if pa.types.is_dictionary(arrow) else arrow
    name = _primitive_name(t)
    if name is not None:
        return name
    if pa.types.is_struct(t):
        return {"type": "struct", "fields": [
            {"name": f.name, "type": _value_of(f.type, f"{column}.{f.name}", root), "nullable": f.nullable, "metadata": {}}
            for f in t]}
    if pa.types.is_map(t):
        return {"type": "map", "keyType": _value_of(t.key_type, f"{column}.key", root),
                "valueType": _value_of(t.item_type, f"{column}.value", root), "valueContainsNull": t.item_field.nullable}
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t) \
            or pa.types.is_list_view(t) or pa.types.is_large_list_view(t):
        return {"type": "array", "elementType": _value_of(t.value_type, f"{column}.element", root),
                "containsNull": t.value_field.nullable}
    what = f"column {root!r} has type {arrow}" if column == root else \
        f"column {root!r} holds {column!r} of type {arrow}"
    raise UnsupportedTypeError(f"{what}, which indexeddf cannot store; supported: {_SUPPORTED}. Cast the column first.",
                               [root])


def _primitive_name(t: pa.DataType) -> str | None:
    if pa.types.is_boolean(t):
        return "boolean"
    for name in ("byte", "short", "integer", "long", "float", "double"):
        if t == NAMED_TYPES[name]:
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
    return None


# -- comparing and showing -------------------------------------------------------------------


def _shape(value: Any) -> Any:
    """A type value without what writes need not match: nullability and field metadata."""
    if isinstance(value, str) or not isinstance(value, dict):
        return value
    kind = value.get("type")
    if kind == "struct":
        return ("struct", tuple((f.get("name"), _shape(f.get("type"))) for f in value.get("fields", [])))
    if kind == "array":
        return ("array", _shape(value.get("elementType")))
    return ("map", _shape(value.get("keyType")), _shape(value.get("valueType")))


def same_type(a: str, b: str) -> bool:
    """Whether data of log type ``b`` is written into a column of type ``a`` as is: equal
    names, or nested types of the same shape (field names, order and leaf types; their
    nullability and metadata are the table's)."""
    if a == b:
        return True
    return is_nested(a) and is_nested(b) and _shape(type_value(a)) == _shape(type_value(b))


def leaf_types(name: str) -> Iterator[str]:
    """The primitive type names inside a log type (the name itself when primitive)."""
    stack = [type_value(name)]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            yield v
        elif v.get("type") == "struct":
            stack.extend(f["type"] for f in v.get("fields", []))
        elif v.get("type") == "array":
            stack.append(v.get("elementType"))
        else:
            stack.extend((v.get("keyType"), v.get("valueType")))


def display(name: str) -> str:
    """A log type for people: a name as is, a nested type as Spark's ``struct<a:long,...>``,
    ``array<string>``, ``map<string,long>``."""
    return _display(type_value(name))


def _display(v: Any) -> str:
    if isinstance(v, str):
        return v
    kind = v.get("type")
    if kind == "struct":
        return "struct<" + ",".join(f"{f['name']}:{_display(f['type'])}" for f in v.get("fields", [])) + ">"
    if kind == "array":
        return f"array<{_display(v.get('elementType'))}>"
    return f"map<{_display(v.get('keyType'))},{_display(v.get('valueType'))}>"


def has_timestamp(t: pa.DataType) -> bool:
    """Whether an Arrow type is or holds a timestamp (casts of those truncate units, unsafely)."""
    if pa.types.is_timestamp(t):
        return True
    if pa.types.is_struct(t):
        return any(has_timestamp(f.type) for f in t)
    if pa.types.is_map(t):
        return has_timestamp(t.key_type) or has_timestamp(t.item_type)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return has_timestamp(t.value_type)
    return False


def is_nested_arrow(t: pa.DataType) -> bool:
    """Whether an Arrow type is a struct, list or map."""
    return pa.types.is_nested(t)
