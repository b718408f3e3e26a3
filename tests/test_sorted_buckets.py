"""Data files in index-column order (PROTOCOL.md §4.3.1, the ``indexeddf.sorted`` tag): the
writer sorts each bucket's rows by the index columns the way Spark orders them, and the JVM
connector then gives Spark the index columns as the bucketing's sort columns, so a sort-merge
join on the key sorts only the other side while every bucket is one file.

The proof that the order is Spark's own: a merge join that trusts a wrongly ordered side
misses matches, so each join here is compared with DuckDB joining ``to_arrow()`` of the same
version, with string keys of any bytes (unsigned byte order), nulls, and two index columns.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from connector_helpers import physical
from connector_helpers import read as load
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import indexeddf
from indexeddf import IndexedTable, cli
from indexeddf.spark.connector import ORDERED_BUCKETS

pytestmark = pytest.mark.spark

# A merge join, Spark's own: no broadcast, no join through the index.
SMJ = {"spark.sql.autoBroadcastJoinThreshold": "-1", "spark.indexeddf.indexedJoin.enabled": "false",
       "spark.sql.adaptive.enabled": "false"}


@pytest.fixture(scope="module", autouse=True)
def connector(spark):
    assert indexeddf.register(spark) == "connector"


@pytest.fixture()
def merge_join(spark):
    for k, v in SMJ.items():
        spark.conf.set(k, v)
    yield
    for k in SMJ:
        spark.conf.unset(k)


def _files(path) -> list[tuple[object, pa.Table]]:
    t = IndexedTable.for_path(str(path))
    return [(a, pq.read_table(f"{path}/{a.path}")) for a in t.snapshot.live_files()]


def _sorts(plan: str) -> int:
    return plan.count("Sort [")


def test_the_writer_sorts_each_file_by_the_index_columns(tmp_path):
    keys = [5, None, 3, 3, 9, None, 1, 12, 7, 3]
    t = IndexedTable.create(str(tmp_path / "i"), pa.table({"k": pa.array(keys, pa.int64()),
                                                          "n": pa.array(range(len(keys)), pa.int64())}),
                            index_columns=["k"], num_buckets=2)
    for add, rows in _files(t.path):
        assert add.sorted
        got = rows.column("k").to_pylist()
        assert got == sorted(got, key=lambda v: (v is not None, v if v is not None else 0))  # nulls first
        # ties keep the order the rows were given in
        for k in set(got) - {None}:
            ns = [n for kk, n in zip(got, rows.column("n").to_pylist()) if kk == k]
            assert ns == sorted(ns)
    # Floating point keys: Spark orders NaN and -0.0 its own way, so those files stay in hash order, untagged
    f = IndexedTable.create(str(tmp_path / "f"), pa.table({"x": [2.5, float("nan"), -0.0, 0.0, 1.0]}),
                            index_columns=["x"], num_buckets=1)
    assert [a.sorted for a, _ in _files(f.path)] == [False]


def test_the_sorted_tag_survives_checkpoints_and_compaction(tmp_path):
    t = IndexedTable.create(str(tmp_path / "t"), pa.table({"k": pa.array([4, 1, 3], pa.int64())}),
                            index_columns=["k"], num_buckets=1)
    t.set_properties({"indexeddf.checkpointInterval": "1"})
    t.append(pa.table({"k": pa.array([2, 0], pa.int64())}))
    assert any(p.name.endswith(".checkpoint.parquet") for p in (tmp_path / "t" / "_delta_log").iterdir())
    reopened = IndexedTable.for_path(t.path)
    assert [a.sorted for a in reopened.snapshot.live_files()] == [True, True]
    reopened.optimize(mode="full")
    [(add, rows)] = _files(t.path)
    assert add.sorted and rows.column("k").to_pylist() == [0, 1, 2, 3, 4]


def test_single_file_buckets_skip_the_table_side_sort(spark, tmp_path, merge_join):
    assert spark.conf.get(ORDERED_BUCKETS) == "true"  # indexeddf.configure sets it
    path = tmp_path / "t"
    t = IndexedTable.create(str(path), pa.table({"k": pa.array(range(200), pa.int64()),
                                                 "v": pa.array(range(200), pa.int64())}),
                            index_columns=["k"], num_buckets=4)
    df = load(spark, path)
    probe = spark.range(0, 400, 3).selectExpr("id AS k", "id AS p")
    plan = physical(df.join(probe, "k"))
    assert "SortMergeJoin" in plan and _sorts(plan) == 1, plan  # only the probe is sorted
    assert df.join(probe, "k").count() == len(range(0, 200, 3))
    # An append makes two files in a bucket: Spark sorts the table's side again (its own check)
    t.append(pa.table({"k": pa.array([3, 300], pa.int64()), "v": pa.array([0, 0], pa.int64())}))
    again = load(spark, path)
    assert _sorts(physical(again.join(probe, "k"))) == 2
    assert again.join(probe, "k").count() == len(range(0, 200, 3)) + 2
    # With Spark's switch off, a bucketed scan reports no ordering, sorted files or not
    spark.conf.set(ORDERED_BUCKETS, "false")
    try:
        assert _sorts(physical(df.join(probe, "k"))) == 2
    finally:
        spark.conf.set(ORDERED_BUCKETS, "true")


_text = st.one_of(st.none(), st.text(alphabet=st.sampled_from(["a", "b", "Z", "é", "日", "\x00", "😀", "~"]),
                                     max_size=3))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.tuples(_text, st.integers(-3, 3)), min_size=1, max_size=60),
       picks=st.lists(st.integers(0, 59), max_size=30),
       others=st.lists(st.tuples(_text, st.integers(-3, 3)), max_size=10),
       buckets=st.sampled_from([1, 3]))
def test_merge_joins_on_sorted_files_answer_like_duckdb(spark, tmp_path_factory, merge_join, rows, picks, others,
                                                        buckets):
    """Two index columns (a string of any bytes, an int), nulls in both: the connector's sort-merge
    join, which trusts the files' order, finds exactly DuckDB's matches. The probe holds keys of
    the table (``picks``) and others."""
    probe = [rows[i % len(rows)] for i in picks] + others or [(None, 0)]
    path = tmp_path_factory.mktemp("sorted") / "t"
    schema = pa.schema([("s", pa.string()), ("i", pa.int64())])
    data = pa.Table.from_pylist([{"s": s, "i": i} for s, i in rows], schema=schema)
    data = data.append_column("n", pa.array(range(len(rows)), pa.int64()))
    IndexedTable.create(str(path), data, index_columns=["s", "i"], num_buckets=buckets)
    for add, file_rows in _files(path):
        assert add.sorted
        order = pc.sort_indices(file_rows, sort_keys=[("s", "ascending", "at_start"), ("i", "ascending", "at_start")])
        assert order.to_pylist() == list(range(file_rows.num_rows))
    probe_t = pa.Table.from_pylist([{"s": s, "i": i} for s, i in probe], schema=schema)
    df = load(spark, path)
    # A Parquet probe: Spark cannot fold it away during optimization (local rows it can)
    probe_path = path.parent / "probe.parquet"
    pq.write_table(probe_t.rename_columns(["ps", "pi"]), probe_path)
    other = spark.read.parquet(str(probe_path))
    joined = df.join(other, (df.s == other.ps) & (df.i == other.pi))
    plan = physical(joined)
    assert "SortMergeJoin" in plan and _sorts(plan) == 1, plan  # one file a bucket: the table's side is not sorted
    got = sorted((r.n, r.ps, r.pi) for r in joined.select("n", "ps", "pi").collect())
    con = duckdb.connect()
    con.register("t", IndexedTable.for_path(str(path)).to_arrow())
    con.register("p", probe_t)
    want = sorted(con.execute("SELECT t.n, p.s, p.i FROM t JOIN p ON t.s = p.s AND t.i = p.i").fetchall())
    assert got == want


def test_files_without_the_tag_keep_spark_sorting_the_table_side(spark, tmp_path, merge_join):
    # A table written before the tag (the first layout, upgraded in place): version 0 has one
    # file a bucket in key-hash order. Claiming an order there would make the merge join miss rows.
    path = tmp_path / "old"
    shutil.copytree(Path(__file__).parent / "data" / "first_layout", path)
    assert cli.main(["upgrade", str(path), "-q"]) == 0
    old = IndexedTable.for_path(str(path), version=0)
    files = old.snapshot.live_files()
    assert sorted(a.bucket for a in files) == [0, 1] and not any(a.sorted for a in files)
    keys = [pq.read_table(f"{path}/{a.path}").column("k").to_pylist() for a in files]
    assert any(k != sorted(k) for k in keys)  # the files are not in key order
    df = spark.read.format("indexeddf").option("versionAsOf", 0).load(str(path))
    probe = spark.createDataFrame([(k,) for k in old.to_arrow().column("k").to_pylist()[::2]], "k bigint")
    plan = physical(df.join(probe, "k"))
    assert "SortMergeJoin" in plan and "Bucketed: true" in plan and _sorts(plan) == 2, plan
    table_keys = old.to_arrow().column("k").to_pylist()
    want = sorted(k for k in table_keys if k in set(table_keys[::2]))
    assert sorted(r.k for r in df.join(probe, "k").select("k").collect()) == want
