"""Column mapping of nested fields: a hand-written column-mapped table (``nested_mapped_table``)
whose struct, array-element and map-value fields have their own physical names and ids, and
whose files use them at every level. The Python readers, the writer and the JVM connector
are checked against DuckDB's delta extension and delta-rs's DataFusion reader, which both
read such a table in both modes."""

from __future__ import annotations

import json
import os
import sys

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

sys.path.insert(0, os.path.dirname(__file__))

from connector_helpers import physical, read  # noqa: E402
from nested_mapped_table import LOGICAL, SWAPPED_SCHEMA, commit_file, create, rows  # noqa: E402
from oracles import duckdb_delta  # noqa: E402

from indexeddf import IndexedTable  # noqa: E402


def canon(records) -> list[tuple]:
    """Rows as comparable tuples (a map as a sorted list of pairs, whatever engine gave it)."""
    def value(v):
        if isinstance(v, dict):
            return tuple(sorted((k, value(x)) for k, x in v.items()))
        if isinstance(v, list):
            return tuple(value(x) for x in v)
        if isinstance(v, tuple):
            return tuple(value(x) for x in v)
        return v

    def row(r):
        m = r["m"]
        m = None if m is None else tuple(sorted((k, value(x)) for k, x in (m.items() if isinstance(m, dict) else m)))
        return (r["k"], value(r["s"]), value(r["arr"]), m)

    return sorted((row(r) for r in records), key=lambda t: t[0])


def duck(path: str) -> list[tuple]:
    cur = duckdb_delta().execute(f"SELECT k, s, arr, m FROM delta_scan('{path}')")
    names = [d[0] for d in cur.description]
    return canon(dict(zip(names, r)) for r in cur.fetchall())


def delta_rs(path: str) -> list[tuple]:
    qb = deltalake.QueryBuilder().register("t", deltalake.DeltaTable(path))
    return canon(pa.table(qb.execute("SELECT k, s, arr, m FROM t").read_all()).to_pylist())


def names(t: pa.DataType):
    """The struct field names at every level of ``t``."""
    if pa.types.is_struct(t):
        return [(f.name, names(f.type)) for f in t]
    if pa.types.is_map(t):
        return (names(t.key_type), names(t.item_type))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return names(t.value_type)
    return None


@pytest.fixture(params=[("hand", "name"), ("hand", "id"), ("delta-rs", "name"), ("delta-rs", "id")],
                ids=lambda p: "-".join(p))
def table(tmp_path, request) -> str:
    """The table in both modes, hand-written or written by delta-rs (which maps nested fields
    the same way: names and ids at every level, ids in preorder)."""
    writer, mode = request.param
    path = str(tmp_path / mode)
    if writer == "hand":
        create(path, mode, [list(range(0, 20)), list(range(20, 30))])
    else:
        deltalake.write_deltalake(path, rows(list(range(0, 20))), configuration={"delta.columnMapping.mode": mode})
        deltalake.write_deltalake(path, rows(list(range(20, 30))), mode="append")
    return path


def stored_names(path: str) -> list:
    """The names at every level of the first data file's columns."""
    first = next(a.path for a in IndexedTable.for_path(path).snapshot.live_files())
    return [(f.name, names(f.type)) for f in pq.read_schema(os.path.join(path, first))]


def test_nested_fields_are_read_by_physical_name_or_id(table):
    want = canon(rows(list(range(30))).to_pylist())
    assert duck(table) == want and delta_rs(table) == want
    t = IndexedTable.convert(table, ["k"], num_buckets=2)
    got = t.to_arrow()
    assert got.schema == LOGICAL and canon(got.to_pylist()) == want
    assert canon(t.lookup([1, 7, 22, 99]).to_pylist()) == [r for r in want if r[0] in (1, 7, 22)]


def test_writes_name_nested_fields_physically(table):
    t = IndexedTable.convert(table, ["k"], num_buckets=2)
    physical = stored_names(table)  # what the other writer named them
    t.append(rows(list(range(30, 40))))
    t.delete("k = 3")
    t.optimize(mode="full")
    want = canon(rows([k for k in range(40) if k != 3]).to_pylist())
    assert canon(IndexedTable.for_path(table).to_arrow().to_pylist()) == want
    assert duck(table) == want and delta_rs(table) == want
    for a in IndexedTable.for_path(table).snapshot.live_files():
        stored = pq.read_schema(os.path.join(table, a.path))
        assert [(f.name, names(f.type)) for f in stored] == physical  # physical names at every level
        assert [x.metadata[b"PARQUET:field_id"] for x in stored.field(1).type] == [b"3", b"4"]
    deltalake.write_deltalake(table, rows([50]), mode="append")  # delta-rs appends after indexeddf
    assert canon(IndexedTable.for_path(table).to_arrow().to_pylist()) == delta_rs(table) == want + canon(
        rows([50]).to_pylist())


def test_a_new_nested_column_gets_names_and_ids_at_every_level(tmp_path):
    path = str(tmp_path / "t")
    t = IndexedTable.create(path, rows(list(range(10))), index_columns=["k"], num_buckets=2,
                            properties={"delta.columnMapping.mode": "id"})
    with open(os.path.join(path, "_delta_log", f"{0:020d}.json")) as f:
        meta = next(json.loads(x)["metaData"] for x in f if "metaData" in x)
    s = json.loads(meta["schemaString"])["fields"][1]
    assert [f["metadata"]["delta.columnMapping.id"] for f in s["type"]["fields"]] == [3, 4]
    assert all(f["metadata"]["delta.columnMapping.physicalName"].startswith("col-") for f in s["type"]["fields"])
    assert meta["configuration"]["delta.columnMapping.maxColumnId"] == "9"
    want = canon(rows(list(range(10))).to_pylist())
    assert canon(t.to_arrow().to_pylist()) == want == duck(path) == delta_rs(path)


@pytest.mark.spark
def test_the_connector_reads_nested_mapped_fields(spark, table):
    IndexedTable.convert(table, ["k"], num_buckets=2)
    want = canon(rows(list(range(30))).to_pylist())

    def spark_rows(df):
        return canon(r.asDict(recursive=True) for r in df.collect())

    df = read(spark, table)
    assert spark_rows(df) == want
    few = df.where("k IN (1, 7, 22)")
    assert "LocalTableScan" in physical(few)
    assert spark_rows(few) == [r for r in want if r[0] in (1, 7, 22)]
    assert spark_rows(df.select("k", "s", "arr", "m").where("s.a = 70")) == [r for r in want if r[0] == 7]
    # Spark prunes the struct to the one field read: it is found by its own physical name or id.
    pruned = sorted((r["k"], r["b"]) for r in df.select("k", "s.b").collect())
    assert pruned == [(r[0], None if r[1] is None else dict(r[1])["b"]) for r in want]
    spark.sql(f"CREATE TABLE nested_mapped USING indexeddf LOCATION '{table}'")  # a catalog entry reads alike
    try:
        assert spark_rows(spark.sql("SELECT * FROM nested_mapped")) == want
    finally:
        spark.sql("DROP TABLE nested_mapped")
    lookup = df.where("k IN (4, 5)").select("k", "arr.x", "m")
    assert "LocalTableScan" in physical(lookup)
    assert sorted((r["k"], r["x"]) for r in lookup.collect()) == \
        [(r[0], None if r[2] is None else [dict(e)["x"] for e in r[2]]) for r in want if r[0] in (4, 5)]


@pytest.mark.spark
def test_id_mode_finds_nested_fields_by_id_whatever_their_names(spark, tmp_path):
    """A file whose struct fields bear each other's physical names, with the right ids: in
    ``id`` mode both the Python readers and the connector read them by id (DuckDB's
    extension and delta-rs match by name, so the rows written are the reference)."""
    path = str(tmp_path / "t")
    create(path, "id", [list(range(0, 10))])
    commit_file(path, rows(list(range(10, 16))), SWAPPED_SCHEMA)
    t = IndexedTable.convert(path, ["k"], num_buckets=2)
    want = canon(rows(list(range(16))).to_pylist())
    assert canon(t.to_arrow().to_pylist()) == want
    assert canon(t.lookup([4, 11, 13]).to_pylist()) == [r for r in want if r[0] in (4, 11, 13)]
    df = read(spark, path)
    assert canon(r.asDict(recursive=True) for r in df.collect()) == want
    few = df.where("k IN (4, 11, 13)")
    assert "LocalTableScan" in physical(few)
    assert canon(r.asDict(recursive=True) for r in few.collect()) == [r for r in want if r[0] in (4, 11, 13)]
    assert sorted((r["k"], r["a"]) for r in df.select("k", "s.a").collect()) == \
        [(r[0], None if r[1] is None else dict(r[1])["a"]) for r in want]
