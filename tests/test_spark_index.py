"""Index lookups through Spark filter pushdown: Spark == lookup() == a filter over to_arrow()."""

from __future__ import annotations

import datetime as dt
import random
from collections import Counter

import pyarrow as pa
import pytest
from pyspark.sql import functions as F

import indexeddf
from indexeddf import IndexedTable
from indexeddf.spec.bucketing import bucket_ids

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def registered(spark):
    indexeddf.register(spark)
    return spark


def rows_of(df) -> Counter:
    return Counter(tuple(r) for r in df.collect())


def arrow_rows(table: pa.Table) -> Counter:
    return Counter(tuple(r.values()) for r in table.to_pylist())


def batch(rng: random.Random, n: int, start: int) -> pa.Table:
    ids = [rng.choice([None] + list(range(40))) for _ in range(n)]
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "email": pa.array([rng.choice(["a@x", "b@x", "c@x", None, "é@x"]) for _ in range(n)]),
            "day": pa.array([dt.date(2026, 1, 1 + rng.randrange(5)) for _ in range(n)], pa.date32()),
            "seq": pa.array(range(start, start + n), pa.int64()),
        }
    )


def test_pushdown_equals_lookup_and_full_read_at_every_version(registered, tmp_path):
    spark = registered
    rng = random.Random(7)
    path = str(tmp_path / "t")
    t = IndexedTable.create(path, batch(rng, 300, 0), index_columns=["id"], num_buckets=8)
    t.create_index("by_email_day", ["email", "day"], num_buckets=4)
    t.append(batch(rng, 200, 1000))
    t.set_properties({"indexeddf.index.autoRefresh": "false"})
    t.append(batch(rng, 50, 2000))  # not indexed: answered by the hybrid scan
    t.delete("seq < 100")
    queries = [
        ("id = 7", lambda r: r["id"] == 7, ["id"], [7]),
        ("id IN (1, 2, 39, 1000)", lambda r: r["id"] in (1, 2, 39, 1000), ["id"], [1, 2, 39, 1000]),
        ("id <=> NULL", lambda r: r["id"] is None, ["id"], [None]),
        ("id IS NULL AND seq > 50", lambda r: r["id"] is None and r["seq"] > 50, None, None),
        ("email = 'a@x' AND day = DATE '2026-01-03'",
         lambda r: r["email"] == "a@x" and r["day"] == dt.date(2026, 1, 3), None, None),
        ("email IN ('é@x', 'b@x') AND day IN (DATE '2026-01-01', DATE '2026-01-05')",
         lambda r: r["email"] in ("é@x", "b@x") and r["day"] in (dt.date(2026, 1, 1), dt.date(2026, 1, 5)), None, None),
    ]
    for v in range(t.version + 1):
        df = spark.read.format("indexeddf").option("versionAsOf", v).load(path)
        full = t.to_arrow(version=v).to_pylist()
        for sql, pred, _, keys in queries:
            want = Counter(tuple(r.values()) for r in full if pred(r))
            assert rows_of(df.where(sql)) == want, (v, sql)
            if keys is not None:
                assert arrow_rows(t.lookup(keys, version=v)) == want, (v, sql)


def test_a_point_lookup_reads_one_bucket(registered, tmp_path):
    spark = registered
    path = str(tmp_path / "t")
    data = pa.table({"user_id": pa.array(range(4000), pa.int64()), "v": pa.array(range(4000), pa.int64())})
    IndexedTable.create(path, data, index_columns=["user_id"], num_buckets=32)
    df = spark.read.format("indexeddf").load(path)
    one = df.where("user_id = 42")
    assert one.rdd.getNumPartitions() == 1 and one.collect()[0]["v"] == 42
    keys = [1, 2, 3, 500, 999]
    touched = len(set(bucket_ids([pa.array(keys, pa.int64())], 32).tolist()))
    assert touched == 5
    many = df.where(F.col("user_id").isin(keys))
    assert many.rdd.getNumPartitions() == 1  # one task probes up to 16 buckets
    all_keys = list(range(0, 4000, 7))  # touches all 32 buckets: two tasks of 16
    assert df.where(F.col("user_id").isin(all_keys)).rdd.getNumPartitions() == 2
    capped = spark.read.format("indexeddf").option("lookupPartitions", 1).load(path).where(F.col("user_id").isin(all_keys))
    assert capped.rdd.getNumPartitions() == 1
    assert sorted(r["v"] for r in capped.collect()) == all_keys
    assert sorted(r["v"] for r in many.collect()) == keys
    # A literal of another type is coerced by Spark before it reaches the source.
    assert [r["v"] for r in df.where(F.col("user_id") == F.lit(42).cast("int")).collect()] == [42]
    # A filter that no index answers is still right.
    assert df.where("v BETWEEN 10 AND 12").count() == 3


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
