"""The JVM connector on column-mapped tables (``ColumnMapping.java``): ``name`` mode by
physical name, ``id`` mode by Parquet field id, on every read path (Spark's scan, driver
lookups, probing tasks, hybrid scans of unindexed files, joins, deletion vectors).

Answers are checked against delta-rs's DataFusion reader and DuckDB's delta extension where
they read the table (both match ``id``-mode files by physical name, so a file whose field ids
and names disagree is checked against the rows written and the Python reader, which resolves
field ids as delta-spark does).
"""

from __future__ import annotations

import os
import sys

import pyarrow as pa
import pytest

sys.path.insert(0, os.path.dirname(__file__))

import test_column_mapping  # noqa: E402
from connector_helpers import lineage, physical, read  # noqa: E402
from oracles import duckdb_delta  # noqa: E402
from test_column_mapping import SCHEMA, commit_physical_file, delta_rs, duck, mapping, ours, rows, rowsort  # noqa: E402

import indexeddf  # noqa: E402
from indexeddf import IndexedTable  # noqa: E402

pytestmark = pytest.mark.spark
converted = test_column_mapping.converted  # the fixture: delta-rs tables in both modes, converted


def spark_rows(df, columns=("k", "a b", "v")) -> list[tuple]:
    return rowsort(tuple(r[c] for c in columns) for r in df.collect())


def every_path(spark, conf, path: str, want: list[tuple], probes: list[int]) -> None:
    """Spark's scan, a driver lookup, probing tasks, a filter on another column and an indexed
    join of the table at ``path`` all give ``want`` (its rows), each through the path named."""
    df = read(spark, path)
    assert df.columns == SCHEMA.names
    assert spark_rows(df) == want  # Spark's scan
    in_list = ", ".join(map(str, probes))
    few = df.where(f"k IN ({in_list})")
    assert "LocalTableScan" in physical(few)  # the driver looked the keys up
    assert spark_rows(few) == [r for r in want if r[0] in probes]
    assert spark_rows(df.where("`a b` = 's1'")) == [r for r in want if r[1] == "s1"]
    probe = spark.createDataFrame(pa.table({"k": pa.array(probes, pa.int64())}))  # local rows
    joined = df.join(probe, "k")
    assert "FileScan parquet" not in physical(joined)  # the join read through the index
    assert spark_rows(joined) == [r for r in want if r[0] in probes]
    conf("spark.indexeddf.driverLookup.maxKeys", "2")  # past it: Spark tasks probe the index
    conf("spark.indexeddf.lookup.maxReadFraction", "1.0")  # a tiny table: any share of it may be read
    many = df.where(f"k IN ({in_list})")
    assert "ProbeRDD" in lineage(many)
    assert spark_rows(many) == [r for r in want if r[0] in probes]
    spark.conf.unset("spark.indexeddf.driverLookup.maxKeys")
    spark.conf.unset("spark.indexeddf.lookup.maxReadFraction")


def test_the_connector_reads_both_modes_on_every_path(spark, conf, converted):
    indexeddf.register(spark)  # the Python data source reads both modes too
    py = spark.read.format("indexeddf_python").load(converted)
    assert spark_rows(py) == ours(IndexedTable.for_path(converted).to_arrow())
    want = delta_rs(converted)
    assert ours(IndexedTable.for_path(converted).to_arrow()) == want
    if converted.endswith("name"):
        assert duck(converted) == want
    # covered, another engine's file, an append the index does not cover (hybrid), absent
    every_path(spark, conf, converted, want, [0, 3, 41, 59, 63, 69, 72, 79, 500])
    # Writes through the connector keep the mapping (the Python writer writes the files).
    spark.createDataFrame([(900, "w", 9.0)], "k bigint, `a b` string, v double").write.format("indexeddf") \
        .mode("append").save(converted)
    assert spark_rows(read(spark, converted)) == delta_rs(converted)
    if converted.endswith("name"):
        assert delta_rs(converted) == duck(converted)
    # A Spark write that adds a column gives it a physical name and the next id.
    spark.createDataFrame([(901, "x", 1.0, "new")], "k bigint, `a b` string, v double, `n c` string") \
        .write.format("indexeddf").mode("append").option("mergeSchema", "true").save(converted)
    assert mapping(converted)["n c"]["delta.columnMapping.physicalName"].startswith("col-")
    got = read(spark, converted).where("k = 901").collect()
    assert [(r["k"], r["n c"]) for r in got] == [(901, "new")]
    assert duckdb_delta().execute(f"SELECT \"n c\" FROM delta_scan('{converted}') WHERE k = 901").fetchall() == [("new",)]


def test_the_connector_reads_partitioned_name_mode(spark, tmp_path):
    import deltalake

    path = str(tmp_path / "p")
    data = rows(range(30)).append_column("p", pa.array([f"x{k % 3}" for k in range(30)]))
    deltalake.write_deltalake(path, data, partition_by=["p"], configuration={"delta.columnMapping.mode": "name"})
    IndexedTable.convert(path, ["k"], num_buckets=2)
    cols = ("k", "a b", "v", "p")
    want = delta_rs(path, "k, \"a b\", v, p")
    df = read(spark, path)
    assert spark_rows(df, cols) == want
    assert spark_rows(df.where("p = 'x1'"), cols) == [r for r in want if r[3] == "x1"]
    assert spark_rows(df.where("k IN (4, 5)"), cols) == [r for r in want if r[0] in (4, 5)]


@pytest.mark.parametrize("vectors", [False, True])
def test_id_mode_finds_columns_by_field_id_whatever_the_files_call_them(spark, conf, tmp_path, vectors):
    """Files of an ``id``-mode table whose names are not the physical ones: k's and v's names
    swapped (a reader by name would read v's values as k's), names no column has, a file
    with k only (the others read as NULL), and a file with the physical names but no field
    ids at all (read by name, as the Python reader reads it). Indexed ones and one the index
    does not cover (hybrid scan); with deletion vectors, rows deleted from the odd files."""
    path = str(tmp_path / ("dv" if vectors else "t"))
    props = {"delta.columnMapping.mode": "id"}
    if vectors:
        props["delta.enableDeletionVectors"] = "true"
    t = IndexedTable.create(path, rows(range(0, 20)), index_columns=["k"], num_buckets=2, properties=props)
    assert duck(path) == ours(t.to_arrow())  # DuckDB reads the files indexeddf writes (physical names)
    meta = mapping(path)
    phys = {c: meta[c]["delta.columnMapping.physicalName"] for c in SCHEMA.names}
    ids = {c: meta[c]["delta.columnMapping.id"] for c in SCHEMA.names}
    swapped = {**phys, "k": phys["v"], "v": phys["k"]}
    commit_physical_file(path, rows(range(20, 30)), swapped, ids)
    commit_physical_file(path, rows(range(30, 35)), {c: f"other_{i}" for i, c in enumerate(SCHEMA.names)}, ids)
    commit_physical_file(path, rows(range(35, 38)).select(["k"]), {"k": phys["v"]}, {"k": ids["k"]})
    commit_physical_file(path, rows(range(38, 42)), phys, None)  # no field ids: by physical name
    t = IndexedTable.for_path(path)
    t.refresh()  # the index covers them
    commit_physical_file(path, rows(range(42, 46)), swapped, ids)  # the index does not: a hybrid scan
    want = ours(rows(list(range(0, 35)) + list(range(38, 46)))) + [(k, None, None) for k in range(35, 38)]
    if vectors:
        t = IndexedTable.for_path(path)
        t.delete("k IN (3, 21, 31, 36, 39, 43)")
        want = [r for r in want if r[0] not in (3, 21, 31, 36, 39, 43)]
    want = rowsort(want)
    assert ours(IndexedTable.for_path(path).to_arrow()) == want
    every_path(spark, conf, path, want, [1, 3, 21, 25, 31, 36, 37, 39, 40, 43, 44, 500])


@pytest.mark.spark
@pytest.mark.parametrize("bucketed", [False, True])
def test_to_df_reads_by_logical_name(spark, converted, bucketed):
    # Spark's Parquet reader over the bare files would read every column as NULL.
    indexeddf.register(spark)
    t = IndexedTable.for_path(converted)
    assert spark_rows(t.to_df(spark, bucketed=bucketed)) == delta_rs(converted)
