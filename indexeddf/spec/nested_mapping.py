"""Column mapping inside struct, array and map columns.

Delta gives every struct field, at any depth (inside structs, array elements, map keys and
values), its own ``delta.columnMapping.physicalName`` and ``delta.columnMapping.id`` in the
field's metadata in ``schemaString``; data files name nested fields physically (with the ids
as Parquet field ids). A nested column's type JSON (``Field.type``) holds those metadata, and
:mod:`~indexeddf.spec.column_mapping` hands it here: :func:`to_logical` renames a column read
from a file to the logical names, :func:`to_physical` renames one about to be written, and
:func:`assign` gives new nested fields their physical names and ids.

Within a struct a file's field is found as a top-level column is: in ``id`` mode by its field
id when the file's struct gives any of its fields one, else by physical name (the field's
name when it has none); a field the file lacks reads as NULL.
"""

from __future__ import annotations

import uuid
from typing import Any

import pyarrow as pa

from .types import arrow_type, type_text

PHYSICAL_NAME = "delta.columnMapping.physicalName"
COLUMN_ID = "delta.columnMapping.id"
_FIELD_ID = b"PARQUET:field_id"


def is_mapped_type(value: Any) -> bool:
    """Whether a type value (``Field.type`` parsed) names any nested field physically."""
    if isinstance(value, str):
        return False
    if value.get("type") == "struct":
        return any(PHYSICAL_NAME in f.get("metadata", {}) or is_mapped_type(f["type"]) for f in value["fields"])
    if value.get("type") == "array":
        return is_mapped_type(value["elementType"])
    if value.get("type") == "map":
        return is_mapped_type(value["keyType"]) or is_mapped_type(value["valueType"])
    return False


def _compact(arr: pa.Array) -> pa.Array:
    """``arr`` without a slice offset (Arrow rebuilds lists with a validity mask only then)."""
    return pa.concat_arrays([arr]) if arr.offset else arr


def _field_id(f: pa.Field) -> str | None:
    meta = f.metadata or {}
    return meta[_FIELD_ID].decode() if _FIELD_ID in meta else None


def _find(file_type: pa.StructType, field: dict, by_id: bool) -> int | None:
    """The index in the file's struct of the table's struct field ``field`` (its JSON), or None."""
    meta = field.get("metadata", {})
    if by_id and meta.get(COLUMN_ID) is not None:
        ids = {_field_id(f): i for i, f in enumerate(file_type)}
        if any(k is not None for k in ids):  # a struct with field ids: only the id decides
            return ids.get(str(int(meta[COLUMN_ID])))
    name = meta.get(PHYSICAL_NAME, field["name"])
    at = file_type.get_field_index(name)
    return at if at >= 0 else None


def _mask(arr: pa.Array) -> pa.Array | None:
    """Which of ``arr``'s values are NULL, as Arrow's builders take it (None: none is)."""
    return arr.is_null() if arr.null_count else None


def _logical_array(arr: pa.Array, value: Any, by_id: bool) -> pa.Array:
    """One array read from a file, renamed to the logical names of type ``value``. An array
    whose kind differs from the table's is left to the reader's cast."""
    if isinstance(value, str):
        return arr
    kind, t = value.get("type"), arr.type
    if kind == "struct" and pa.types.is_struct(t):
        children = arr.flatten()
        arrays, fields = [], []
        for field in value["fields"]:
            at = _find(t, field, by_id)
            if at is None:
                a = pa.nulls(len(arr), arrow_type(type_text(field["type"])))
            else:
                a = _logical_array(children[at], field["type"], by_id)
            arrays.append(a)
            fields.append(pa.field(field["name"], a.type, field.get("nullable", True)))
        if not fields:
            return arr
        return pa.StructArray.from_arrays(arrays, fields=fields, mask=_mask(arr))
    if kind == "array" and (pa.types.is_list(t) or pa.types.is_large_list(t)):
        arr = _compact(arr)
        values = _logical_array(arr.values, value["elementType"], by_id)
        build = pa.ListArray if pa.types.is_list(t) else pa.LargeListArray
        return build.from_arrays(arr.offsets, values, mask=_mask(arr))
    if kind == "map" and pa.types.is_map(t):
        arr = _compact(arr)
        keys = _logical_array(arr.keys, value["keyType"], by_id)
        items = _logical_array(arr.items, value["valueType"], by_id)
        return pa.MapArray.from_arrays(arr.offsets, keys, items, mask=_mask(arr))
    return arr


def to_logical(column, value: Any, by_id: bool, target: pa.DataType):
    """A nested ``column`` (an array or a chunked array) read from a file, with the logical
    names of the table's type ``value`` (its JSON) at every level, ready to be cast to
    ``target`` (the table's Arrow type)."""
    if isinstance(column, pa.ChunkedArray):
        chunks = [_logical_array(c, value, by_id) for c in column.chunks]
        return pa.chunked_array(chunks) if chunks else pa.chunked_array([], target)
    return _logical_array(column, value, by_id)


def physical_type(t: pa.DataType, value: Any) -> pa.DataType:
    """The Arrow type ``t`` (logical names, of the table's type ``value``) with each struct
    field named physically and given its Parquet field id: what a file stores."""
    if isinstance(value, str):
        return t
    kind = value.get("type")
    if kind == "struct" and pa.types.is_struct(t):
        by_name = {f["name"]: f for f in value["fields"]}
        out = []
        for f in t:
            spec = by_name.get(f.name)
            if spec is None:
                out.append(f)
                continue
            meta = spec.get("metadata", {})
            ids = {_FIELD_ID: str(int(meta[COLUMN_ID])).encode()} if meta.get(COLUMN_ID) is not None else None
            out.append(pa.field(meta.get(PHYSICAL_NAME, f.name), physical_type(f.type, spec["type"]), f.nullable,
                                metadata=ids))
        return pa.struct(out)
    if kind == "array" and (pa.types.is_list(t) or pa.types.is_large_list(t)):
        element = t.value_field.with_type(physical_type(t.value_type, value["elementType"]))
        return pa.list_(element) if pa.types.is_list(t) else pa.large_list(element)
    if kind == "map" and pa.types.is_map(t):
        return pa.map_(t.key_field.with_type(physical_type(t.key_type, value["keyType"])),
                       t.item_field.with_type(physical_type(t.item_type, value["valueType"])))
    return t


def to_physical(column, value: Any):
    """A nested ``column`` (logical names) as a file stores it (:func:`physical_type`): the
    same buffers under the physical type."""
    target = physical_type(column.type, value)
    if target == column.type and str(target) == str(column.type):
        return column
    if isinstance(column, pa.ChunkedArray):
        return pa.chunked_array([c.view(target) for c in column.chunks], target)
    return column.view(target)


def assign(value: Any, top: int, new: bool, ids: bool = False) -> tuple[Any, int]:
    """Type ``value`` with a physical name and an id for each nested field without them, and
    the largest id given (from ``top``). In a column that is ``new`` they are Delta's
    (``col-<uuid>``, the next id); in an existing column a field without them (written
    before the table turned mapping on, or before nested fields were mapped) keeps its name
    as its physical name, so the files that hold it by that name are read as before, and gets
    the next id when ``ids`` (``name`` mode, where ids never decide a read: Delta's upgrade
    gives every field one)."""
    if isinstance(value, str):
        return value, top
    kind = value.get("type")
    if kind == "struct":
        fields = []
        for f in value["fields"]:
            meta = dict(f.get("metadata", {}))
            if PHYSICAL_NAME not in meta:
                if new:
                    top += 1
                    meta.setdefault(COLUMN_ID, top)
                    meta[PHYSICAL_NAME] = f"col-{uuid.uuid4()}"
                else:
                    meta[PHYSICAL_NAME] = f["name"]
            if ids and meta.get(COLUMN_ID) is None:
                top += 1
                meta[COLUMN_ID] = top
            inner, top = assign(f["type"], top, new, ids)
            fields.append({**f, "type": inner, "metadata": meta})
        return {**value, "fields": fields}, top
    if kind == "array":
        inner, top = assign(value["elementType"], top, new, ids)
        return {**value, "elementType": inner}, top
    if kind == "map":
        key, top = assign(value["keyType"], top, new, ids)
        item, top = assign(value["valueType"], top, new, ids)
        return {**value, "keyType": key, "valueType": item}, top
    return value, top


def max_id(value: Any) -> int:
    """The largest nested field id in type ``value`` (0 when none)."""
    if isinstance(value, str):
        return 0
    kind = value.get("type")
    if kind == "struct":
        return max([0] + [max(int(f.get("metadata", {}).get(COLUMN_ID) or 0), max_id(f["type"]))
                          for f in value["fields"]])
    if kind == "array":
        return max_id(value["elementType"])
    if kind == "map":
        return max(max_id(value["keyType"]), max_id(value["valueType"]))
    return 0
