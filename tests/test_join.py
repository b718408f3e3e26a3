"""Indexed joins against Spark's own join of the version's Parquet files: every strategy, every ``how``.

The reference is ``spark.read.parquet`` of the version's live files (:func:`_parquet`), not
``to_df``: with the connector on, ``to_df`` is the connector's read, which ``t.join``'s
``spark`` strategy and ``join_table`` use, so it must not be its own reference.

Seeded random data with duplicate keys on both sides, null keys, keys missing from the
table, int probe keys against a bigint index column, composite keys given in another
order, a secondary index, an unindexed append (hybrid scan), a too-stale index
(bucketed scan), time travel, and ``join_table`` of co-bucketed and other tables.
"""

from __future__ import annotations

import collections
import datetime as dt
import math
import random

import pyarrow as pa
import pytest

import indexeddf
from indexeddf import IndexedTable
from indexeddf.errors import InvalidOptionError, SchemaMismatchError

HOWS = ["inner", "left", "semi"]
STRATEGIES = ["auto", "shuffle", "broadcast"]


@pytest.fixture(scope="module")
def s(spark):
    indexeddf.register(spark)
    return spark


def _norm(v):
    return ("NaN",) if isinstance(v, float) and math.isnan(v) else v


def _rows(df):
    return collections.Counter(tuple(_norm(v) for v in r) for r in df.collect())


def _same(got, want):
    assert [(f.name, f.dataType) for f in got.schema.fields] == [(f.name, f.dataType) for f in want.schema.fields]
    assert _rows(got) == _rows(want)


def _parquet(s, t, version=None, columns=None):
    """The version's rows as ``spark.read.parquet`` reads its live files, with the table's
    schema: the same answer as ``to_df`` for a table whose files need nothing more
    (no deletion vectors, partitions or column mapping, checked here), by another reader."""
    from indexeddf.spark.native import hadoop_path
    from indexeddf.spark.types import spark_schema

    snap = t.snapshot_at(version)
    files = snap.live_files()
    assert files and not snap.metadata.partitionColumns and all(a.deletionVector is None for a in files)
    assert "delta.columnMapping.mode" not in snap.metadata.configuration
    df = s.read.schema(spark_schema(snap.metadata.schema_)).parquet(*[hadoop_path(snap.storage, a.path) for a in files])
    return df if columns is None else df.select(*columns)


def _events(rng: random.Random, n: int, lo: int, hi: int, start: int = 0) -> pa.Table:
    keys = [None if rng.random() < 0.05 else rng.randrange(lo, hi) for _ in range(n)]
    return pa.table({
        "k": pa.array(keys, pa.int64()),
        "s": pa.array([rng.choice(["a", "b", "c", None]) for _ in range(n)]),
        "x": pa.array([float("nan") if rng.random() < 0.02 else rng.random() for _ in range(n)]),
        "ts": pa.array([dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(seconds=start + i) for i in range(n)],
                       pa.timestamp("us", tz="UTC")),
    })


def _probe(s, rng: random.Random, n: int, hi: int):
    rows = [(None if rng.random() < 0.1 else rng.randrange(0, hi), rng.choice(["p", "q"]), i) for i in range(n)]
    return s.createDataFrame(rows, "k int, s string, i bigint")


@pytest.fixture(scope="module")
def events(s, tmp_path_factory):
    """A table indexed on k (bigint, 4 buckets): two indexed commits, then an unindexed append."""
    rng = random.Random(7)
    path = str(tmp_path_factory.mktemp("join") / "events")
    t = IndexedTable.create(path, _events(rng, 300, 0, 40), index_columns=["k"], num_buckets=4)
    v1 = t.append(_events(rng, 200, 20, 60, start=300))
    t.set_properties({"indexeddf.index.autoRefresh": "false"})
    v3 = t.append(_events(rng, 40, 0, 70, start=500))
    assert t.indexes()[0].covered_version < v3
    return t, v1, v3


@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_join_equals_spark_join(s, events, how, strategy):
    t, v1, v3 = events
    probe = _probe(s, random.Random(hash((how, strategy)) & 0xFFFF), 120, 90)
    for version in (None, v1):  # the newest (with its unindexed file) and an older version
        got = t.join(probe, on="k", how=how, strategy=strategy, version=version)
        _same(got, probe.join(_parquet(s, t, version), on="k", how=how))


def test_columns(s, events):
    t, _, _ = events
    probe = _probe(s, random.Random(4), 40, 80)
    for strategy in STRATEGIES:
        for how in ("inner", "left"):
            _same(t.join(probe, on="k", how=how, strategy=strategy, columns=["x"]),
                  probe.join(_parquet(s, t, columns=["k", "x"]), on="k", how=how))
    with pytest.raises(SchemaMismatchError):
        t.join(probe, on="k", columns=["nope"])


def test_unindexed_append_is_joined(s, events):
    t, _, v3 = events
    new_keys = [r for r in t.to_arrow(version=v3).column("k").to_pylist() if r is not None and r >= 60]
    assert new_keys  # only the unindexed append holds keys >= 60
    probe = s.createDataFrame([(k, "z", 0) for k in new_keys], "k int, s string, i bigint")
    for strategy in ("shuffle", "broadcast"):
        text = t.explain_join(probe, on="k", strategy=strategy)
        assert "unindexed file(s) scanned" in text and " 0 unindexed" not in text
        got = t.join(probe, on="k", strategy=strategy)
        assert sum(_rows(got).values()) > 0
        _same(got, probe.join(_parquet(s, t), on="k"))


@pytest.mark.parametrize("how", HOWS)
def test_left_on_right_on(s, events, how):
    t, _, _ = events
    rng = random.Random(3)
    probe = s.createDataFrame([(rng.randrange(0, 80), float(i)) for i in range(60)] + [(None, -1.0)], "uid bigint, k double")
    for strategy in ("shuffle", "broadcast"):
        got = t.join(probe, left_on="k", right_on="uid", how=how, strategy=strategy)
        table_df = _parquet(s, t)
        _same(got, probe.join(table_df, probe["uid"] == table_df["k"], how))


def test_secondary_index_and_unindexed_columns(s, tmp_path):
    rng = random.Random(11)
    t = IndexedTable.create(str(tmp_path / "sec"), _events(rng, 200, 0, 30), index_columns=["k"], num_buckets=4)
    t.create_index("by_s", ["s"], num_buckets=3)
    t.append(_events(rng, 50, 0, 30, start=200))
    probe = s.createDataFrame([("a", 1), ("c", 2), ("c", 3), (None, 4), ("zz", 5)], "s string, n int")
    assert "index 'by_s'" in t.explain_join(probe, on="s", strategy="shuffle")
    for how in HOWS:
        for strategy in STRATEGIES:
            _same(t.join(probe, on="s", how=how, strategy=strategy), probe.join(_parquet(s, t), on="s", how=how))
    # No index or bucketing on x: Spark's own join, and the strategies that need one refuse.
    probe_x = s.createDataFrame([(0.5,)], "x double")
    assert "strategy: spark" in t.explain_join(probe_x, on="x")
    _same(t.join(probe_x, on="x", how="left"), probe_x.join(_parquet(s, t), on="x", how="left"))
    with pytest.raises(InvalidOptionError):
        t.join(probe_x, on="x", strategy="shuffle")


def test_composite_keys_and_stale_index(s, tmp_path):
    rng = random.Random(5)

    def rows(n):
        return pa.table({"a": pa.array([rng.choice(["x", "y", "z", None]) for _ in range(n)]),
                         "b": pa.array([rng.randrange(0, 5) for _ in range(n)], pa.int32()),
                         "v": pa.array(range(n), pa.int64())})

    t = IndexedTable.create(str(tmp_path / "comp"), rows(150), index_columns=["a", "b"], num_buckets=3)
    probe = s.createDataFrame([(rng.randrange(0, 6), rng.choice(["x", "y", "w", None]), i) for i in range(50)],
                              "b smallint, a string, v int")
    for how in HOWS:
        for strategy in ("shuffle", "broadcast"):
            _same(t.join(probe, on=["b", "a"], how=how, strategy=strategy), probe.join(_parquet(s, t), on=["b", "a"], how=how))
    # bigint keys against the int column b: a value int cannot hold matches nothing
    # (Spark compares as bigint), never a wrapped-around int.
    wide = s.createDataFrame([(1, "x"), (2**32 + 1, "x"), (2**32 + 2, "y"), (None, "z")], "b bigint, a string")
    for how in ("inner", "left"):
        for strategy in ("shuffle", "broadcast"):
            _same(t.join(wide, on=["a", "b"], how=how, strategy=strategy), wide.join(_parquet(s, t), on=["a", "b"], how=how))
    # An unindexed append larger than maxAppendedRatio: the index is skipped, each task
    # scans its data bucket instead.
    t.set_properties({"indexeddf.index.autoRefresh": "false"})
    t.append(rows(300))
    text = t.explain_join(probe, on=["a", "b"], strategy="shuffle")
    assert "no index; the data is bucketed" in text and "maxAppendedRatio" in text
    for how in HOWS:
        _same(t.join(probe, on=["a", "b"], how=how, strategy="shuffle", partitions=2),
              probe.join(_parquet(s, t), on=["a", "b"], how=how))
    assert "task j joins the buckets b with b % 2 = j" in t.explain_join(probe, on=["a", "b"], strategy="shuffle", partitions=2)


def test_spread_values():
    from indexeddf.spark.join_exec import spread_values
    from indexeddf.spec.bucketing import bucket_ids

    for n, k in [(32, 4), (7, 3), (5, 5)]:
        values = spread_values(n, k)
        assert bucket_ids([pa.array(values, pa.int32())], k).tolist() == [b % k for b in range(n)]


def test_auto_chooses_by_size(s, events):
    t, _, _ = events
    never = float("inf")  # the table has 540 rows: any probe is over 1 % of it
    small = _probe(s, random.Random(1), 20, 50)
    assert "strategy: broadcast" in t.explain_join(small, on="k", spark_join_ratio=never)
    text = t.explain_join(small, on="k", broadcast_threshold_rows=5, spark_join_ratio=never)
    assert "strategy: shuffle" in text and "more than broadcast_threshold_rows=5 distinct keys" in text
    big = s.range(0, 500_000).selectExpr("cast(id % 50 as bigint) as k")  # Spark knows its size
    text = t.explain_join(big, on="k", spark_join_ratio=never)
    assert "strategy: shuffle" in text and "Spark estimates" in text
    _same(t.join(big.limit(1000), on="k", how="semi", broadcast_threshold_rows=10, spark_join_ratio=never),
          big.limit(1000).join(_parquet(s, t), on="k", how="semi"))


def test_auto_hands_large_probes_to_spark(s, events):
    t, _, _ = events
    big = s.range(0, 3_000).selectExpr("cast(id % 70 as bigint) as k", "id")  # 5.6x the table's rows
    text = t.explain_join(big, on="k")
    assert "strategy: spark" in text and "more than spark_join_ratio=0.01 of the table's 540 rows" in text
    # Spark broadcasts a DataFrame this small, so the table is read unbucketed.
    assert "not bucketed (Spark estimates the DataFrame at" in text and "autoBroadcastJoinThreshold" in text
    assert "strategy: shuffle" in t.explain_join(big, on="k", spark_join_ratio=10.0)  # 3,000 < 5,400
    for how in HOWS:
        _same(t.join(big, on="k", how=how), big.join(_parquet(s, t), on="k", how=how))
    with pytest.raises(InvalidOptionError, match="spark_join_ratio"):
        t.join(big, on="k", spark_join_ratio=0)


def test_errors(s, events):
    t, _, _ = events
    probe = _probe(s, random.Random(2), 5, 10)
    with pytest.raises(InvalidOptionError):
        t.join(probe, on="k", how="full")
    with pytest.raises(InvalidOptionError):
        t.join(probe, on="k", strategy="fast")
    with pytest.raises(SchemaMismatchError):
        t.join(probe, on="nope")
    with pytest.raises(InvalidOptionError):
        t.join(probe, on="k", left_on="k", right_on="k")
    # join and explain_join take one set of options: a misspelt one is named, not ignored.
    for call in (t.join, t.explain_join):
        with pytest.raises(InvalidOptionError, match=r"unknown join options \['stratgy'\]"):
            call(probe, on="k", stratgy="broadcast")
        with pytest.raises(InvalidOptionError, match="partitions must be an integer"):
            call(probe, on="k", partitions=0)
    # String keys against a bigint column: Spark coerces, so only Spark's join is exact.
    probe_s = s.createDataFrame([("3",), ("x",)], "k string")
    assert "key types differ" in t.explain_join(probe_s, on="k")
    with pytest.raises(InvalidOptionError):
        t.join(probe_s, on="k", strategy="broadcast")


@pytest.mark.parametrize("how", HOWS)
def test_join_table(s, tmp_path, events, how):
    t, _, _ = events
    rng = random.Random(13)
    other = pa.table({"k": pa.array([None if rng.random() < 0.1 else rng.randrange(0, 80) for _ in range(150)], pa.int64()),
                      "w": pa.array(range(150), pa.int64()), "s": pa.array(["o"] * 150)})
    same = IndexedTable.create(str(tmp_path / "same"), other, index_columns=["k"], num_buckets=4)
    differ = IndexedTable.create(str(tmp_path / "differ"), other, index_columns=["k"], num_buckets=5)
    from indexeddf.spark.join_exec import join_tables

    plan, got = join_tables(t.snapshot, same.snapshot, s, "k", how)
    assert plan.strategy == "buckets"
    _same(got, _parquet(s, same).join(_parquet(s, t), on="k", how=how))
    plan, got = join_tables(t.snapshot, differ.snapshot, s, "k", how)
    assert plan.strategy != "buckets" and "not co-bucketed" in plan.reasons[0]
    _same(got, _parquet(s, differ).join(_parquet(s, t), on="k", how=how))
    _same(t.join_table(same, on="k", how=how, spark=s), _parquet(s, same).join(_parquet(s, t), on="k", how=how))


def _plan(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


@pytest.fixture()
def no_broadcast(s):
    """Sort-merge joins, so Spark's use (or not) of the table's bucketing shows in the plan."""
    old = s.conf.get("spark.sql.autoBroadcastJoinThreshold")
    s.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
    yield
    s.conf.set("spark.sql.autoBroadcastJoinThreshold", old)


def _shuffles(df) -> int:
    return _plan(df).count("Exchange hashpartitioning")


def test_to_df_joins_without_shuffling_the_table(s, events, no_broadcast):
    """With the connector on, to_df is its read, which tells Spark the table's bucketing
    whether or not ``bucketed`` asks: a join or aggregation on k shuffles only the other
    side, where the same files read by ``spark.read.parquet`` are shuffled too."""
    t, v1, v3 = events
    for a in t.snapshot.live_files():  # writers name the bucket where Spark reads it
        assert a.path.endswith(f"_{a.bucket:05d}.parquet")
    probe = _probe(s, random.Random(5), 300, 80).selectExpr("cast(k as bigint) as k", "s", "i")
    for version in (v1, v3):
        parquet = _parquet(s, t, version)
        assert "Bucketed: true" not in _plan(probe.join(parquet, on="k")) and _shuffles(probe.join(parquet, on="k")) == 2
        assert _shuffles(parquet.groupBy("k").count()) == 1
        for bucketed in (True, False):
            df = t.to_df(s, version=version, bucketed=bucketed)
            joined = probe.join(df, on="k")
            assert "Bucketed: true" in _plan(joined) and _shuffles(joined) == 1  # the probe's
            assert _shuffles(df.groupBy("k").count()) == 0
            for how in HOWS:
                _same(probe.join(df, on="k", how=how), probe.join(parquet, on="k", how=how))
    assert t.to_df(s, bucketed=True).count() == t.snapshot.num_records()
    big = s.range(0, 3_000).selectExpr("cast(id % 70 as bigint) as k", "id")  # Spark knows its size
    text = t.explain_join(big, on="k")
    assert "strategy: spark" in text and "bucketed: Spark knows the table's 4 buckets on ['k']" in text
    assert "table side: the connector's read of the version" in text
    _same(t.join(big, on="k", how="left"), big.join(_parquet(s, t), on="k", how="left"))


def test_without_the_connector_bucketed_to_df_is_the_bucketed_relation(s, events, no_broadcast, monkeypatch):
    """A session without the connector (no JDK): to_df reads the files with Spark's Parquet
    reader, and ``bucketed=True`` builds the bucketed relation through py4j, which spares
    the table's shuffle as the connector's read does; ``bucketed=False`` is a plain scan."""
    from indexeddf.spark import session

    t, v1, v3 = events
    monkeypatch.setattr(session, "register_quietly", lambda spark: session.PYTHON)
    probe = _probe(s, random.Random(6), 300, 80).selectExpr("cast(k as bigint) as k", "s", "i")
    for version in (v1, v3):
        bucketed, plain = t.to_df(s, version=version, bucketed=True), t.to_df(s, version=version)
        for df in (bucketed, plain):
            assert "SnapshotFileIndex" not in _plan(df) and "InMemoryFileIndex" in _plan(df)
        assert "Bucketed: true" in _plan(probe.join(bucketed, on="k")) and _shuffles(probe.join(bucketed, on="k")) == 1
        assert "Bucketed: true" not in _plan(probe.join(plain, on="k")) and _shuffles(probe.join(plain, on="k")) == 2
        for how in HOWS:
            _same(probe.join(bucketed, on="k", how=how), probe.join(_parquet(s, t, version), on="k", how=how))
            _same(probe.join(plain, on="k", how=how), probe.join(_parquet(s, t, version), on="k", how=how))


def test_unbucketed_fallbacks(s, tmp_path, monkeypatch, no_broadcast):
    from indexeddf.spark.bucketed import bucketed_scan_reason
    from indexeddf.writer import files

    rng = random.Random(9)
    doubles = IndexedTable.create(str(tmp_path / "d"), _events(rng, 50, 0, 9), index_columns=["x"], num_buckets=2)
    assert "floating point" in bucketed_scan_reason(doubles.snapshot)
    # Files named as writers before the bucket suffix named them.
    new_name = files.new_data_file

    def old_name(bucket):
        path, file_id = new_name(bucket)
        return path.rsplit("_", 1)[0] + ".parquet", file_id

    monkeypatch.setattr(files, "new_data_file", old_name)
    t = IndexedTable.create(str(tmp_path / "old"), _events(rng, 200, 0, 30), index_columns=["k"], num_buckets=4)
    monkeypatch.undo()
    assert "named without their bucket" in bucketed_scan_reason(t.snapshot)
    probe = s.range(0, 3_000).selectExpr("cast(id % 40 as bigint) as k", "id")
    joined = probe.join(t.to_df(s, bucketed=True), on="k")
    assert "Bucketed: true" not in _plan(joined)
    _same(joined, probe.join(_parquet(s, t), on="k"))
    assert "not bucketed (" in t.explain_join(probe, on="k")
    t.optimize(mode="full", progress=None)
    assert bucketed_scan_reason(t.snapshot) is None
    assert "Bucketed: true" in _plan(probe.join(t.to_df(s, bucketed=True), on="k"))
