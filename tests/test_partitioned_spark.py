"""Partitioned tables from Spark: ``df.write.format("indexeddf").partitionBy(...)`` creating
one (connector, Python data source, ``saveAsTable``, ``IndexedTable.create``), and the
Python data source skipping other partitions' files. Checked against DuckDB's delta
extension and delta-rs reading the same log."""

from __future__ import annotations

import os
import sys

import deltalake
import pyarrow as pa
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from test_delta_oracles import duckdb_delta  # noqa: E402

import indexeddf  # noqa: E402
from indexeddf import IndexedTable  # noqa: E402

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([("id", pa.int64()), ("day", pa.string()), ("n", pa.int32()), ("v", pa.string())])
DDL = "id long, day string, n int, v string"
DAYS = ["2026-11-01", "2026-11-02", "2026-11-03"]


def rows(ids) -> pa.Table:
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "day": pa.array([DAYS[i % 3] for i in ids]),
        "n": pa.array([None if i % 4 == 0 else i % 2 for i in ids], pa.int32()),
        "v": pa.array([f"v{i}" for i in ids]),
    }, schema=SCHEMA)


def ordered(t: pa.Table) -> list[dict]:
    return sorted(t.select(SCHEMA.names).cast(SCHEMA).to_pylist(), key=lambda r: r["id"])


def collected(df) -> list[dict]:
    return ordered(pa.Table.from_pylist([r.asDict() for r in df.collect()]))


def check(path: str, want: list[dict], partition_by: list[str]) -> None:
    """The table is partitioned by ``partition_by`` and every engine reads ``want``."""
    t = IndexedTable.for_path(path)
    assert list(t.snapshot.metadata.partitionColumns) == partition_by
    assert all(a.path.startswith(f"{partition_by[0]}=") for a in t.snapshot.live_files())
    assert deltalake.DeltaTable(path).metadata().partition_columns == partition_by
    assert ordered(deltalake.DeltaTable(path).to_pyarrow_table()) == want
    assert ordered(duckdb_delta().execute(f"SELECT * FROM delta_scan('{path}')").to_arrow_table()) == want
    assert ordered(t.to_arrow()) == want
    assert ordered(t.lookup([r["id"] for r in want])) == want


def test_partition_by_creates_a_partitioned_table(spark, tmp_path):
    indexeddf.register(spark)
    path = str(tmp_path / "t")
    df = spark.createDataFrame(rows(list(range(40))).to_pandas(), DDL)
    (df.write.format("indexeddf").partitionBy("day", "n").option("indexColumns", "id").option("numBuckets", 4)
     .mode("append").save(path))
    want = ordered(rows(list(range(40))))
    check(path, want, ["day", "n"])
    entry = IndexedTable.for_path(path).history()[0]
    assert entry.parameters["partitionBy"] == ["day", "n"]
    # Appends may repeat the partition columns or leave them out; nothing else.
    more = spark.createDataFrame(rows(list(range(40, 50))).to_pandas(), DDL)
    more.write.format("indexeddf").partitionBy("day", "n").mode("append").save(path)
    more2 = spark.createDataFrame(rows(list(range(50, 60))).to_pandas(), DDL)
    more2.write.format("indexeddf").mode("append").save(path)
    with pytest.raises(Exception, match=r"partitionBy\(n\): the table is partitioned by \[day, n\]"):
        more.write.format("indexeddf").partitionBy("n").mode("append").save(path)
    want = ordered(rows(list(range(60))))
    check(path, want, ["day", "n"])
    got = spark.read.format("indexeddf").load(path)
    assert collected(got) == want
    assert collected(got.where("day = '2026-11-02' AND id IN (1, 4, 7, 8)")) == \
        [r for r in want if r["day"] == "2026-11-02" and r["id"] in (1, 4, 7, 8)]
    # A new table partitioned by a column it lacks, or by all of its columns, is refused.
    with pytest.raises(Exception, match="not in the table"):
        df.write.format("indexeddf").partitionBy("nope").option("indexColumns", "id").mode("append").save(
            str(tmp_path / "u"))
    # An existing unpartitioned table is not repartitioned.
    flat = str(tmp_path / "flat")
    df.write.format("indexeddf").option("indexColumns", "id").mode("append").save(flat)
    with pytest.raises(Exception, match="not partitioned"):
        df.write.format("indexeddf").partitionBy("day").mode("append").save(flat)


def test_create_from_a_spark_dataframe_with_partition_by(spark, tmp_path):
    """``IndexedTable.create`` writes through the Python data source (no connector needed)."""
    indexeddf.register(spark)
    df = spark.createDataFrame(rows(list(range(30))).to_pandas(), DDL)
    path = str(tmp_path / "created")
    t = IndexedTable.create(path, df, index_columns=["id"], num_buckets=4, partition_by=["n"])
    assert t.version == 0
    check(path, ordered(rows(list(range(30)))), ["n"])


def test_save_as_table_with_partition_by(spark, tmp_path):
    indexeddf.register(spark)
    path = str(tmp_path / "cat")
    df = spark.createDataFrame(rows(list(range(24))).to_pandas(), DDL)
    try:
        (df.write.format("indexeddf").partitionBy("day").option("indexColumns", "id").option("path", path)
         .mode("overwrite").saveAsTable("parted"))
        want = ordered(rows(list(range(24))))
        check(path, want, ["day"])
        assert collected(spark.table("parted")) == want
        assert collected(spark.sql("SELECT * FROM parted WHERE day = '2026-11-03'")) == \
            [r for r in want if r["day"] == "2026-11-03"]
        spark.sql("INSERT INTO parted VALUES (100, '2026-11-09', 1, 'x')")
        want = want + [{"id": 100, "day": "2026-11-09", "n": 1, "v": "x"}]
        assert collected(spark.table("parted")) == want
        check(path, want, ["day"])
        # SQL: CREATE TABLE ... PARTITIONED BY, as a query's result and empty with columns.
        ctas = str(tmp_path / "ctas")
        spark.sql(f"CREATE TABLE parted_ctas USING indexeddf PARTITIONED BY (day, n) OPTIONS (indexColumns 'id') "
                  f"LOCATION '{ctas}' AS SELECT * FROM parted")
        check(ctas, want, ["day", "n"])
        empty = str(tmp_path / "empty")
        spark.sql(f"CREATE TABLE parted_empty (id bigint, day string, n int, v string) USING indexeddf "
                  f"PARTITIONED BY (day) OPTIONS (indexColumns 'id', numBuckets '2') LOCATION '{empty}'")
        spark.sql("INSERT INTO parted_empty SELECT * FROM parted")
        check(empty, want, ["day"])
        assert IndexedTable.for_path(empty).schema.names == SCHEMA.names  # the declared order, as Delta keeps it
        assert spark.table("parted_empty").columns == SCHEMA.names
        assert collected(spark.sql("SELECT * FROM parted_empty WHERE day = '2026-11-09'")) == want[-1:]
    finally:
        for name in ("parted", "parted_ctas", "parted_empty"):
            spark.sql(f"DROP TABLE IF EXISTS {name}")
