"""Spark reads used the way people use them: one DataFrame loaded once and queried many
times, in any order, while another writer appends, deletes and refreshes.

Every answer is checked against DuckDB (an engine nobody here wrote) evaluating the
same query over ``to_arrow()`` of the version the DataFrame reads. The Python data
source reads the version it was loaded at (docs/spark.md) and plans no filter, so no
query can inherit an earlier query's plan. Where a query fixes key columns, the
Spark-free ``lookup`` answers it too, and ``explain`` names the same index it uses.
"""

from __future__ import annotations

import datetime as dt
import random
from collections import Counter

import duckdb
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

import indexeddf
from indexeddf import IndexedTable
from indexeddf.format.snapshot import update_snapshot
from indexeddf.optimizer import planner

pytestmark = pytest.mark.spark

KEYS = 60
"""Key values 0..KEYS-1 (and NULL); queries also ask for keys that are absent."""


@pytest.fixture(scope="module")
def registered(spark):
    indexeddf.register(spark)
    spark.createDataFrame([(1,)], "x int").createOrReplaceTempView("_warm")
    return spark


def rows_of(df) -> Counter:
    return Counter(tuple(r) for r in df.collect())


def arrow_rows(table: pa.Table) -> Counter:
    return Counter(tuple(r.values()) for r in table.to_pylist())


def duck(sql: str, **tables: pa.Table) -> Counter:
    """The rows DuckDB returns for ``sql`` over the given Arrow tables."""
    con = duckdb.connect()
    for name, table in tables.items():
        con.register(name, table)
    return Counter(tuple(r) for r in con.execute(sql).fetchall())


def rows(rng: random.Random, n: int, start: int) -> pa.Table:
    return pa.table({
        "k": pa.array([rng.choice([None] + list(range(KEYS))) for _ in range(n)], pa.int64()),
        "s": pa.array([rng.choice(["a", "b", "c", None, "é"]) for _ in range(n)]),
        "v": pa.array(range(start, start + n), pa.int64()),
    })


# -- query shapes: (Spark DataFrame, DuckDB SQL over table t, key constraints or None) ---------
def _in_list(rng: random.Random) -> list[int]:
    n = rng.choice([1, 2, 10, 100, 10_000])
    if n == 10_000:
        return list(range(-5_000, 5_000))  # every key, and many absent ones
    return [rng.randrange(-5, KEYS * 3) for _ in range(n)]


def query(rng: random.Random, df, spark, view: str):
    """A random query on ``df`` (registered as ``view``): its DataFrame, the same query
    in DuckDB's SQL over ``t``, and the key values it fixes on ``k`` (None: no index use)."""
    shape = rng.choice(["point", "in", "is_null", "null_safe", "null_safe_null", "all", "sum", "agg",
                        "non_index", "sql", "union", "self_join", "secondary"])
    x = rng.randrange(-2, KEYS + 2)
    if shape == "point":
        return shape, df.where(F.col("k") == x), f"SELECT * FROM t WHERE k = {x}", {"k": [x]}
    if shape == "in":
        keys = _in_list(rng)
        text = ", ".join(map(str, keys))
        return shape, df.where(F.col("k").isin(keys)), f"SELECT * FROM t WHERE k IN ({text})", {"k": sorted(set(keys))}
    if shape == "is_null":
        return shape, df.where(F.col("k").isNull()), "SELECT * FROM t WHERE k IS NULL", {"k": [None]}
    if shape == "null_safe":
        return shape, df.where(F.col("k").eqNullSafe(x)), f"SELECT * FROM t WHERE k IS NOT DISTINCT FROM {x}", {"k": [x]}
    if shape == "null_safe_null":
        return shape, df.where("k <=> NULL"), "SELECT * FROM t WHERE k IS NULL", {"k": [None]}
    if shape == "all":
        return shape, df, "SELECT * FROM t", None
    if shape == "sum":
        return shape, df.agg(F.sum("v"), F.count(F.lit(1))), "SELECT sum(v)::BIGINT, count(*) FROM t", None
    if shape == "agg":
        return (shape, df.groupBy("s").agg(F.count(F.lit(1)), F.max("v")),
                "SELECT s, count(*), max(v) FROM t GROUP BY s", None)
    if shape == "non_index":
        return shape, df.where(F.col("v") < x * 10), f"SELECT * FROM t WHERE v < {x * 10}", None
    if shape == "sql":
        return (shape, spark.sql(f"SELECT k, v FROM {view} WHERE k = {x} AND v >= 0"),
                f"SELECT k, v FROM t WHERE k = {x} AND v >= 0", {"k": [x]})
    if shape == "union":
        y = rng.randrange(KEYS)
        return (shape, df.where(F.col("k") == x).union(df.where(F.col("k") == y)),
                f"SELECT * FROM t WHERE k = {x} UNION ALL SELECT * FROM t WHERE k = {y}", None)
    if shape == "self_join":
        a, b = df.alias("a"), df.alias("b")
        joined = a.where(F.col("a.k") == x).join(b, F.col("a.k") == F.col("b.k")).select("a.v", "b.v")
        return shape, joined, f"SELECT a.v, b.v FROM t a JOIN t b ON a.k = b.k WHERE a.k = {x}", None
    letter = rng.choice(["a", "b", "é", "zz"])
    return shape, df.where(F.col("s") == letter), f"SELECT * FROM t WHERE s = '{letter}'", None


def check_planner_agrees(table: IndexedTable, version: int, fixed: dict, want: Counter) -> None:
    """``lookup`` answers a key query as DuckDB does, through the index ``explain`` names."""
    snap = table.snapshot_at(version)
    latest = update_snapshot(snap)
    keys = fixed["k"]
    got = table.lookup(keys, version=version)
    assert arrow_rows(got) == want
    plan = planner.plan_keys(snap, keys, None, latest)
    choice = planner.plan_filter(snap, fixed, latest)
    used_by_lookup = plan.index.name if plan.why_not is None else None
    used_by_filter = choice.index.name if choice.index is not None else None
    assert used_by_lookup == used_by_filter, (plan.why_not, choice.why_not)
    text = ", ".join("NULL" if k is None else str(k) for k in keys)
    explained = table.explain(f"k IN ({text})" if keys != [None] else "k IS NULL", version=version)
    assert (f"index: '{used_by_filter}'" in explained) if used_by_filter else ("index: none" in explained), explained


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**31 - 1))
def test_a_reused_dataframe_answers_every_query_right(registered, tmp_path_factory, seed):
    spark = registered
    rng = random.Random(seed)
    path = str(tmp_path_factory.mktemp("reuse") / "t")
    table = IndexedTable.create(path, rows(rng, 400, 0), index_columns=["k"], num_buckets=4)
    table.create_index("by_s", ["s"], num_buckets=2)
    writer = IndexedTable.for_path(path)  # another writer, with its own handle
    writer.append(rows(rng, 100, 1000))
    old_version = rng.randrange(table.snapshot_at(None).version + 1)

    df = spark.read.format("indexeddf").load(path)
    loaded_at = IndexedTable.for_path(path).version
    old = spark.read.format("indexeddf").option("versionAsOf", old_version).load(path)
    df.createOrReplaceTempView("reused")
    old.createOrReplaceTempView("reused_old")
    next_v = 2000
    for step in range(10):
        action = rng.random()
        if action < 0.3:  # the other writer moves the table on
            op = rng.choice(["append", "append_unindexed", "delete", "refresh"])
            if op == "append":
                writer.append(rows(rng, 50, next_v))
            elif op == "append_unindexed":
                writer.set_properties({"indexeddf.index.autoRefresh": "false"})
                writer.append(rows(rng, 50, next_v))
                writer.set_properties({"indexeddf.index.autoRefresh": "true"})
            elif op == "delete":
                writer.delete(f"k = {rng.randrange(KEYS)}")
            else:
                writer.refresh(mode="incremental")
            next_v += 100
            continue
        target, version, view = (df, loaded_at, "reused") if action < 0.8 else (old, old_version, "reused_old")
        shape, frame, sql, fixed = query(rng, target, spark, view)
        data = table.to_arrow(version=version)
        want = duck(sql, t=data)
        assert rows_of(frame) == want, (seed, step, shape, version)
        if fixed is not None and shape != "sql":
            check_planner_agrees(table, version, fixed, want)


def test_the_reported_reuse_case(registered, tmp_path):
    """The case of the report: a sum, three point lookups, the sum again, on one DataFrame;
    then a union and a self-join of filtered copies of it."""
    spark = registered
    path = str(tmp_path / "t")
    n = 5000
    IndexedTable.create(path, pa.table({"k": pa.array(range(n), pa.int64()), "v": pa.array(range(n), pa.int64())}),
                        index_columns=["k"], num_buckets=8)
    r = spark.read.format("indexeddf").load(path)
    total = sum(range(n))
    assert r.agg(F.sum("v")).collect()[0][0] == total
    for k in (5, 77, 1234):
        assert [tuple(x) for x in r.where(F.col("k") == k).collect()] == [(k, k)]
    assert r.agg(F.sum("v")).collect()[0][0] == total
    assert r.count() == n
    both = r.where(F.col("k") == 5).union(r.where(F.col("k") == 77))
    assert sorted(x.k for x in both.collect()) == [5, 77]
    a, b = r.alias("a"), r.alias("b")
    pairs = a.where(F.col("a.k") == 5).join(b.where(F.col("b.k") == 77), F.col("a.v") < F.col("b.v"))
    assert [(x[0], x[2]) for x in pairs.collect()] == [(5, 77)]


def test_a_dataframe_reads_the_version_it_was_loaded_at(registered, tmp_path):
    spark = registered
    path = str(tmp_path / "t")
    t = IndexedTable.create(path, pa.table({"k": pa.array([1, 2], pa.int64())}), index_columns=["k"], num_buckets=2)
    df = spark.read.format("indexeddf").load(path)
    t.append(pa.table({"k": pa.array([3], pa.int64())}))
    assert df.count() == 2 and df.where("k = 3").count() == 0
    assert spark.read.format("indexeddf").load(path).count() == 3


def test_pushdown_equals_lookup_and_full_read_at_every_version(registered, tmp_path):
    spark = registered
    rng = random.Random(7)
    path = str(tmp_path / "t")
    t = IndexedTable.create(path, _mixed(rng, 300, 0), index_columns=["id"], num_buckets=8)
    t.create_index("by_email_day", ["email", "day"], num_buckets=4)
    t.append(_mixed(rng, 200, 1000))
    t.set_properties({"indexeddf.index.autoRefresh": "false"})
    t.append(_mixed(rng, 50, 2000))  # not indexed: answered by the hybrid scan
    t.delete("seq < 100")
    queries = [
        ("id = 7", lambda r: r["id"] == 7, [7]),
        ("id IN (1, 2, 39, 1000)", lambda r: r["id"] in (1, 2, 39, 1000), [1, 2, 39, 1000]),
        ("id <=> NULL", lambda r: r["id"] is None, [None]),
        ("id IS NULL AND seq > 50", lambda r: r["id"] is None and r["seq"] > 50, None),
        ("email = 'a@x' AND day = DATE '2026-01-03'",
         lambda r: r["email"] == "a@x" and r["day"] == dt.date(2026, 1, 3), None),
        ("email IN ('é@x', 'b@x') AND day IN (DATE '2026-01-01', DATE '2026-01-05')",
         lambda r: r["email"] in ("é@x", "b@x") and r["day"] in (dt.date(2026, 1, 1), dt.date(2026, 1, 5)), None),
    ]
    for v in range(t.version + 1):
        df = spark.read.format("indexeddf").option("versionAsOf", v).load(path)
        full = t.to_arrow(version=v).to_pylist()
        for sql, pred, keys in queries:
            want = Counter(tuple(r.values()) for r in full if pred(r))
            assert rows_of(df.where(sql)) == want, (v, sql)
            if keys is not None:
                assert arrow_rows(t.lookup(keys, version=v)) == want, (v, sql)


def _mixed(rng: random.Random, n: int, start: int) -> pa.Table:
    ids = [rng.choice([None] + list(range(40))) for _ in range(n)]
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "email": pa.array([rng.choice(["a@x", "b@x", "c@x", None, "é@x"]) for _ in range(n)]),
        "day": pa.array([dt.date(2026, 1, 1 + rng.randrange(5)) for _ in range(n)], pa.date32()),
        "seq": pa.array(range(start, start + n), pa.int64()),
    })


def test_time_travel_through_a_vacuumed_index_scans(registered, tmp_path):
    spark = registered
    path = str(tmp_path / "vac")
    data = pa.table({"user_id": pa.array(range(300), pa.int64()), "email": [f"u{i % 50}@x" for i in range(300)]})
    t = IndexedTable.create(path, data, index_columns=["user_id"], num_buckets=4)
    t.create_index("by_email", ["email"], num_buckets=4)
    indexed_version = t.version
    t.drop_index("by_email")
    t.vacuum_index("by_email")  # deletes the files that indexed_version's state names
    old = spark.read.format("indexeddf").option("versionAsOf", indexed_version).load(path).where("email = 'u7@x'")
    want = t.to_arrow(version=indexed_version).filter(pa.compute.equal(t.to_arrow(version=indexed_version)["email"], "u7@x"))
    assert rows_of(old) == arrow_rows(want) and len(want) == 6
    assert arrow_rows(t.lookup(["u7@x"], version=indexed_version, index="by_email")) == arrow_rows(want)
