"""A column-mapped Delta table with nested columns, written by hand as Delta writers write it:
every field, nested ones too, has its own ``delta.columnMapping.physicalName`` and
``delta.columnMapping.id``, and the Parquet files use the physical names (and the ids as
field ids) at every level (a plain module beside the tests, not a test file)."""

from __future__ import annotations

import json
import os
import time
import uuid

import pyarrow as pa
import pyarrow.parquet as pq

FIELDS = [  # logical name, id, physical name; nested fields under their column
    ("k", 1), ("s", 2), ("s.a", 3), ("s.b", 4), ("arr", 5), ("arr.x", 6), ("arr.y", 7), ("m", 8), ("m.p", 9)]
PHYSICAL = {name: f"col-{i}-{name.replace('.', '_')}" for name, i in FIELDS}
IDS = dict(FIELDS)

LOGICAL = pa.schema([
    ("k", pa.int64()),
    ("s", pa.struct([("a", pa.int64()), ("b", pa.string())])),
    ("arr", pa.list_(pa.field("element", pa.struct([("x", pa.int64()), ("y", pa.string())])))),
    ("m", pa.map_(pa.string(), pa.struct([("p", pa.float64())]))),
])
"""The table's columns as readers return them."""


def _meta(name: str) -> dict:
    return {"delta.columnMapping.id": IDS[name], "delta.columnMapping.physicalName": PHYSICAL[name]}


def _field(name: str, kind, leaf: str | None = None) -> dict:
    return {"name": leaf or name, "type": kind, "nullable": True, "metadata": _meta(name)}


SCHEMA_JSON = {"type": "struct", "fields": [
    _field("k", "long"),
    _field("s", {"type": "struct", "fields": [_field("s.a", "long", "a"), _field("s.b", "string", "b")]}),
    _field("arr", {"type": "array", "containsNull": True, "elementType": {"type": "struct", "fields": [
        _field("arr.x", "long", "x"), _field("arr.y", "string", "y")]}}),
    _field("m", {"type": "map", "keyType": "string", "valueContainsNull": True,
                 "valueType": {"type": "struct", "fields": [_field("m.p", "double", "p")]}}),
]}


def _pf(name: str, t: pa.DataType, leaf: bool = True) -> pa.Field:
    return pa.field(PHYSICAL[name], t, metadata={b"PARQUET:field_id": str(IDS[name]).encode()})


PHYSICAL_SCHEMA = pa.schema([
    _pf("k", pa.int64()),
    _pf("s", pa.struct([_pf("s.a", pa.int64()), _pf("s.b", pa.string())])),
    _pf("arr", pa.list_(pa.field("element", pa.struct([_pf("arr.x", pa.int64()), _pf("arr.y", pa.string())])))),
    _pf("m", pa.map_(pa.string(), pa.struct([_pf("m.p", pa.float64())]))),
])
"""How the files store them: physical names and field ids at every level."""


def rows(keys) -> pa.Table:
    """Rows with NULLs at every level: a NULL struct, NULL fields, NULL and empty lists and maps."""
    return pa.table({
        "k": pa.array(keys, pa.int64()),
        "s": [None if k % 5 == 0 else {"a": k * 10, "b": None if k % 3 == 0 else f"b{k}"} for k in keys],
        "arr": [None if k % 4 == 0 else [{"x": k + j, "y": f"y{j}"} for j in range(k % 3)] for k in keys],
        "m": [None if k % 6 == 0 else [(f"m{j}", {"p": k / 2 + j}) for j in range(k % 2 + 1)] for k in keys],
    }, schema=LOGICAL)


def physical_rows(table: pa.Table, schema: pa.Schema = PHYSICAL_SCHEMA) -> pa.Table:
    """``table`` (logical names) as the files store it."""
    return pa.Table.from_arrays([c.combine_chunks().view(f.type) for c, f in zip(table.columns, schema)],
                                schema=schema)


SWAPPED_SCHEMA = pa.schema([
    PHYSICAL_SCHEMA.field(0),
    pa.field(PHYSICAL["s"], pa.struct([  # s.a under s.b's physical name and the other way round
        pa.field(PHYSICAL["s.b"], pa.int64(), metadata={b"PARQUET:field_id": b"3"}),
        pa.field(PHYSICAL["s.a"], pa.string(), metadata={b"PARQUET:field_id": b"4"})]),
        metadata={b"PARQUET:field_id": b"2"}),
    PHYSICAL_SCHEMA.field(2),
    PHYSICAL_SCHEMA.field(3),
])
"""A file of another writer whose nested names disagree with the ids: read by id, s.a is the
field named like s.b (a reader by name would read a string column as s.a's integers)."""


def commit_file(path: str, table: pa.Table, schema: pa.Schema) -> None:
    """One more commit, of one file holding ``table`` stored as ``schema`` says."""
    version = max(int(n[:20]) for n in os.listdir(os.path.join(path, "_delta_log")) if n.endswith(".json")) + 1
    _commit(path, version, [_add(path, table, schema)])


def _add(path: str, table: pa.Table, schema: pa.Schema = PHYSICAL_SCHEMA) -> dict:
    name = f"part-{uuid.uuid4()}.parquet"
    pq.write_table(physical_rows(table, schema), os.path.join(path, name))
    st = os.stat(os.path.join(path, name))
    return {"add": {"path": name, "partitionValues": {}, "size": st.st_size, "modificationTime": int(st.st_mtime * 1000),
                    "dataChange": True, "stats": json.dumps({"numRecords": table.num_rows})}}


def _commit(path: str, version: int, actions: list[dict]) -> None:
    actions = actions + [{"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "WRITE"}}]
    with open(os.path.join(path, "_delta_log", f"{version:020d}.json"), "x") as f:
        f.write("\n".join(json.dumps(a) for a in actions) + "\n")


def create(path: str, mode: str, batches: list[list[int]]) -> None:
    """The table at ``path`` in column mapping ``mode``: one commit per batch of keys."""
    os.makedirs(os.path.join(path, "_delta_log"))
    meta = {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
            "schemaString": json.dumps(SCHEMA_JSON), "partitionColumns": [],
            "configuration": {"delta.columnMapping.mode": mode, "delta.columnMapping.maxColumnId": str(len(FIELDS))},
            "createdTime": int(time.time() * 1000)}
    _commit(path, 0, [{"protocol": {"minReaderVersion": 2, "minWriterVersion": 5}}, {"metaData": meta},
                      _add(path, rows(batches[0]))])
    for v, keys in enumerate(batches[1:], start=1):
        _commit(path, v, [_add(path, rows(keys))])
