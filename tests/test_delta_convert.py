"""Indexing a Delta table another engine wrote (``IndexedTable.convert``), checked
against that engine: delta-rs writes the table (and keeps appending after the
conversion); indexeddf's lookups, Spark reads and joins must equal what delta-rs reads.
"""

from __future__ import annotations

import os
import random
import sys

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

deltalake = pytest.importorskip("deltalake")

import indexeddf  # noqa: E402
from indexeddf import IndexedTable  # noqa: E402
from indexeddf.errors import NotIndexedError, TableExistsError  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from test_delta_oracles import SCHEMA, batch, same_rows  # noqa: E402


def delta_rs_rows(path: str, where: str | None = None) -> pa.Table:
    """What delta-rs's own engine reads (DataFusion), optionally filtered."""
    dt = deltalake.DeltaTable(path)
    sql = "SELECT * FROM t" + (f" WHERE {where}" if where else "")
    return pa.table(deltalake.QueryBuilder().register("t", dt).execute(sql).read_all()).select(SCHEMA.names).cast(SCHEMA)


def foreign_table(path: str, rng: random.Random, commits: int) -> list[int]:
    """A table delta-rs writes in ``commits`` appends (one delete among them); its keys."""
    keys: list[int] = []
    for i in range(commits):
        new = [rng.randrange(0, 400) for _ in range(rng.randrange(1, 60))]
        deltalake.write_deltalake(path, batch(new, nan=i % 2 == 1), mode="append")
        keys += new
        if i == 1:
            deltalake.DeltaTable(path).delete("k < 20")
            keys = [k for k in keys if k >= 20]
    return keys


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), commits=st.integers(1, 4), buckets=st.sampled_from([1, 3, 8]),
       probes=st.lists(st.integers(-5, 450), min_size=1, max_size=20))
def test_lookups_of_a_converted_table_equal_delta_rs(tmp_path_factory, seed, commits, buckets, probes):
    path = str(tmp_path_factory.mktemp("conv") / "t")
    rng = random.Random(seed)
    foreign_table(path, rng, commits)
    with pytest.raises(NotIndexedError, match="IndexedTable.convert"):
        IndexedTable.for_path(path)
    t = IndexedTable.convert(path, ["k"], num_buckets=buckets)
    with pytest.raises(TableExistsError):
        IndexedTable.convert(path, ["k"], num_buckets=buckets)

    def check(t: IndexedTable) -> None:
        assert same_rows(t.to_arrow(), delta_rs_rows(path))
        where = f"k IN ({', '.join(map(str, probes))})"
        assert same_rows(t.lookup(probes), delta_rs_rows(path, where)), where
        narrow, theirs = t.lookup(probes, columns=["k", "s"]), delta_rs_rows(path, where)
        assert narrow.column_names == ["k", "s"]
        assert sorted(map(repr, zip(narrow["k"].to_pylist(), narrow["s"].to_pylist()))) == sorted(
            map(repr, zip(theirs["k"].to_pylist(), theirs["s"].to_pylist())))

    check(t)
    # delta-rs keeps appending after the conversion: unindexed appends, found anyway.
    deltalake.write_deltalake(path, batch([rng.randrange(0, 450) for _ in range(30)]), mode="append")
    t = IndexedTable.for_path(path)
    check(t)
    t.refresh()
    check(t)
    t.optimize(mode="full")  # rewrites the files into buckets (dataChange false)
    assert all(a.bucket is not None for a in t._snapshot.live_files())
    check(t)
    deltalake.write_deltalake(path, batch([1, 2, 3]), mode="append")
    t = IndexedTable.for_path(path)
    check(t)


def test_spark_reads_and_joins_of_a_converted_table_equal_delta_rs(spark, tmp_path):
    indexeddf.register(spark)
    path = str(tmp_path / "t")
    rng = random.Random(3)
    foreign_table(path, rng, 3)
    t = IndexedTable.convert(path, ["k"], num_buckets=4)
    deltalake.write_deltalake(path, batch(list(range(500, 520))), mode="append")
    t = IndexedTable.for_path(path)
    want = delta_rs_rows(path)
    for df in (t.to_df(spark), spark.read.format("indexeddf").load(path)):
        assert same_rows(want, pa.Table.from_pylist([r.asDict() for r in df.collect()], schema=want.schema))
    probe = spark.createDataFrame([(k, f"p{k}") for k in list(range(0, 60)) + list(range(505, 530))], "k long, tag string")
    for strategy in ("auto", "shuffle", "broadcast"):
        got = sorted((r.k, r.tag, r.s) for r in t.join(probe, on="k", strategy=strategy).collect())
        keys = pa.table({"k": pa.array(list(range(0, 60)) + list(range(505, 530)), pa.int64())})
        matched = want.join(keys, "k", join_type="inner")
        expected = sorted((k, f"p{k}", s) for k, s in zip(matched["k"].to_pylist(), matched["s"].to_pylist()))
        assert got == expected, strategy


def test_convert_refuses_what_indexeddf_does_not_implement(tmp_path):
    # Partitioned tables and tables with deletion vectors convert: tests/test_partitioned.py,
    # tests/test_dv_reads.py.
    plain = str(tmp_path / "plain")
    deltalake.write_deltalake(plain, batch(list(range(10))))
    with pytest.raises(Exception, match="not in the table"):
        IndexedTable.convert(plain, ["nope"], num_buckets=2)
    # Nothing was committed by the refusals.
    assert deltalake.DeltaTable(plain).version() == 0
    assert pc.sum(IndexedTable.convert(plain, ["k"], num_buckets=2).to_arrow()["k"]).as_py() == 45
