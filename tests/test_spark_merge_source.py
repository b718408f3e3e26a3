"""``IndexedTable.merge(spark_df, ...)``: on a session with the connector, Spark SQL's
``MERGE INTO`` (``spark/statements.py``, ``txn`` too); without the connector or with fsspec
``storage_options``, the engine, for which the DataFrame's tasks stage its rows under the
table's staging folder (by bucket when the predicate fixes the bucketing columns) and the
engine reads them one part at a time; never collected to the driver. Every merge, either
way, equals DuckDB running the same MERGE, and DuckDB's delta extension reads the log the same."""

from __future__ import annotations

import os
import sys

import numpy as np
import pyarrow as pa
import pytest

sys.path.insert(0, os.path.dirname(__file__))

from oracles import duckdb_delta  # noqa: E402
from test_changes import Duck, ordered, rows  # noqa: E402

from indexeddf import IndexedTable  # noqa: E402
from indexeddf.changes import merge_change  # noqa: E402
from indexeddf.changes.clauses import MATCHED, UPDATE, Clause  # noqa: E402
from indexeddf.changes.parts import bucket_keys  # noqa: E402
from indexeddf.errors import InvalidOptionError  # noqa: E402
from indexeddf.spark.merge_source import SparkSource  # noqa: E402
from indexeddf.spec.bucketing import bucket_ids  # noqa: E402

pytestmark = pytest.mark.spark

# (clauses of the builder, the same as DuckDB's MERGE clauses)
MERGES = [
    (lambda m: m.when_matched_update_all().when_not_matched_insert_all(),
     "WHEN MATCHED THEN UPDATE SET k = s.k, v = s.v, s = s.s WHEN NOT MATCHED THEN INSERT (k, v, s) VALUES (s.k, s.v, s.s)"),
    (lambda m: m.when_matched_update({"v": "t.v + s.v"}, "s.v % 2 = 0").when_matched_delete()
     .when_not_matched_insert({"k": "s.k", "s": "upper(s.s)"}, "s.k > 300"),
     "WHEN MATCHED AND s.v % 2 = 0 THEN UPDATE SET v = t.v + s.v WHEN MATCHED THEN DELETE "
     "WHEN NOT MATCHED AND s.k > 300 THEN INSERT (k, s) VALUES (s.k, upper(s.s))"),
    (lambda m: m.when_matched_update({"s": "s.s"}).when_not_matched_by_source_delete("t.k < 20"),
     "WHEN MATCHED THEN UPDATE SET s = s.s WHEN NOT MATCHED BY SOURCE AND t.k < 20 THEN DELETE"),
]


def source_keys(seed: int) -> list[int]:
    r = np.random.default_rng(seed)
    return sorted(set(r.choice(np.arange(0, 600), size=120, replace=False).tolist()))


@pytest.mark.parametrize("vectors,via", [(False, "sql"), (True, "sql"), (False, "engine")])
@pytest.mark.parametrize("which", range(len(MERGES)))
def test_every_merge_of_a_spark_source_equals_duckdb(spark, tmp_path, vectors, via, which, monkeypatch):
    path = str(tmp_path / "t")
    first = rows(list(range(0, 400, 2)))
    t = IndexedTable.create(path, first, ["k"], num_buckets=4,
                            properties={"delta.enableDeletionVectors": str(vectors).lower()})
    t.create_index("by_s", ["s"], num_buckets=2)
    duck = Duck(first)
    build, duck_clauses = MERGES[which]
    staged = []
    stage = SparkSource.stage
    monkeypatch.setattr(SparkSource, "stage", lambda self, *a: staged.append(a) or stage(self, *a))
    for step in range(2):
        src = rows(source_keys(10 * which + step), 1000 * (step + 1), "b")
        # The source's key is an int: staged by Spark's hash of it cast to the table's bigint.
        df = spark.createDataFrame(src.to_pylist(), "k int, v bigint, s string").repartition(3)
        # fsspec storage options keep the engine (a statement reaches files through Hadoop)
        target = IndexedTable.for_path(path, storage_options={"auto_mkdir": True}) if via == "engine" else t
        m = build(target.merge(df, "t.k = s.k", source_alias="s", target_alias="t")).execute()
        assert m["num_source_rows"] == src.num_rows
        assert len(staged) == (step + 1 if via == "engine" else 0)
        assert IndexedTable.for_path(path).history(1)[0].operation == "MERGE"
        duck.run(f"MERGE INTO target AS t USING source_rows AS s ON t.k = s.k {duck_clauses}", src)
        want = ordered(duck.rows())
        assert ordered(IndexedTable.for_path(path).to_arrow()) == want, (which, step)
        assert ordered(duckdb_delta().execute(f"SELECT * FROM delta_scan('{path}')").to_arrow_table()) == want
        probes = source_keys(99)[:20]
        assert ordered(IndexedTable.for_path(path).lookup(probes)) == ordered(
            duck.rows(f"k IN ({', '.join(map(str, probes))})"))
    staging = os.path.join(path, "data", "_staging")
    assert not os.path.isdir(staging) or not any(files for _, _, files in os.walk(staging))


def test_the_source_is_staged_by_bucket_when_the_predicate_fixes_the_bucketing_columns(spark, tmp_path):
    path = str(tmp_path / "t")
    t = IndexedTable.create(path, rows(list(range(100))), ["k"], num_buckets=4)
    src = rows(list(range(50, 250)), 7, "n")
    source = SparkSource(spark.createDataFrame(src.to_pylist(), "k int, v bigint, s string").repartition(3))
    snap = t.snapshot
    change = merge_change(source, "t.k = s.k", [Clause(MATCHED, UPDATE, all_columns=True)], "s", "t")(snap)
    keys = bucket_keys(snap, change)
    assert keys == ["k"]
    try:
        parted = source.stage(snap, change, keys)
        assert parted.num_rows == 200 and all(p.buckets is not None for p in parted.parts)
        for part in parted.parts:
            rows_of = part.read()
            (bucket,) = part.buckets
            assert set(bucket_ids([rows_of.column("k").cast(pa.int64())], 4).tolist()) == {bucket}
        # A predicate that does not fix the bucketing column: one part of every bucket.
        other = merge_change(source, "t.s = s.s", [Clause(MATCHED, UPDATE, all_columns=True)], "s", "t")(snap)
        assert bucket_keys(snap, other) is None
    finally:
        source.drop()
    assert not any(files for _, _, files in os.walk(os.path.join(path, "data", "_staging")))


@pytest.mark.parametrize("txn", [None, ("app", 1)])
def test_two_source_rows_matching_one_target_row_fail_and_nothing_stays(spark, tmp_path, txn):
    path = str(tmp_path / "t")
    t = IndexedTable.create(path, rows(list(range(100))), ["k"], num_buckets=4)
    df = spark.createDataFrame([(5, 1, "a"), (5, 2, "b"), (7, 3, "c")], "k bigint, v bigint, s string")
    with pytest.raises(InvalidOptionError, match="multiple source rows matched"):
        t.merge(df, "t.k = s.k", "s", "t", txn=txn).when_matched_update_all().execute()
    assert IndexedTable.for_path(path).version == 0
    assert not any(files for _, _, files in os.walk(os.path.join(path, "data", "_staging")))


def test_schema_mode_merge_and_an_empty_source(spark, tmp_path, monkeypatch):
    """A source with a column the table lacks (``schema_mode="merge"``: ``MERGE WITH SCHEMA
    EVOLUTION``, the column added in the merge's commit), and an empty source, whose NOT
    MATCHED BY SOURCE clause still runs."""
    from test_merge_schema import ordered as ordered_by
    from test_merge_schema import with_w

    from indexeddf.spark import statements

    sqls = []
    run = statements.run
    monkeypatch.setattr(statements, "run",
                        lambda spark, snap, op, sql, txn=None: sqls.append(sql) or run(spark, snap, op, sql, txn))
    path = str(tmp_path / "t")
    first = rows(list(range(0, 100, 2)))
    t = IndexedTable.create(path, first, ["k"], num_buckets=4)
    src = with_w(list(range(40, 140, 3)), 500)
    df = spark.createDataFrame(src.to_pylist(), "k bigint, v bigint, s string, w string")
    t.merge(df, "t.k = s.k", "s", "t", schema_mode="merge").when_matched_update_all() \
        .when_not_matched_insert_all().execute()
    duck = Duck(first)
    duck.run("ALTER TABLE target ADD COLUMN w VARCHAR")
    duck.run("MERGE INTO target AS t USING source_rows AS s ON t.k = s.k "
             "WHEN MATCHED THEN UPDATE SET k = s.k, v = s.v, s = s.s, w = s.w "
             "WHEN NOT MATCHED THEN INSERT (k, v, s, w) VALUES (s.k, s.v, s.s, s.w)", src)
    assert len(sqls) == 1 and sqls[0].startswith("MERGE WITH SCHEMA EVOLUTION INTO indexeddf.")
    names = ["k", "v", "s", "w"]
    assert IndexedTable.for_path(path).schema.names == names
    assert ordered_by(IndexedTable.for_path(path).to_arrow(), names) == ordered_by(duck.rows(), names)
    empty = spark.createDataFrame([], "k bigint, v bigint, s string, w string")
    m = IndexedTable.for_path(path).merge(empty, "t.k = s.k", "s", "t") \
        .when_not_matched_by_source_delete("t.k < 30").execute()
    assert m["num_target_rows_deleted"] == 15
    assert sorted(IndexedTable.for_path(path).to_arrow().column("k").to_pylist()) == sorted(
        k for (k,) in duck.con.execute("SELECT k FROM target WHERE k >= 30").fetchall())
