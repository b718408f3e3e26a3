"""Join scenarios: ``IndexedTable.join`` against Spark's own joins of the same data.

The indexed side is the events table (``datasets.events(args.rows)``, 32 buckets on
``user_id``); probe sides hold existing keys (``datasets.some_keys``) and a row id,
read from a Parquet file: S, M, L and XL are rows/2000, rows/200, rows/20 and rows/2
rows (10K, 100K, 1M and 10M at the default 20M rows). Every query is
``join(...).agg(count(*), sum(amount)).collect()``.

Baselines in the same run: Spark's plan of ``probe.join(spark.read.parquet(the
table's files), "user_id")``, the same on a DataFrame cached in memory, and for L and
XL a Spark bucketed table (``bucketBy(32, "user_id").sortBy("user_id")``).
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from harness import Scenario
from scenarios_spark import _parquet_df, spark

from indexeddf import IndexedTable

SIZES = {"S": 2000, "M": 200, "L": 20, "XL": 2}
"""Probe rows = table rows / this."""
_STATE: dict = {}


def _probe(work: Path, path: str, n: int, seed: int):
    out = work / f"probe-{n}-{seed}.parquet"
    if not out.exists():
        keys = np.asarray(datasets.some_keys(path, n, seed=seed), dtype=np.int64)
        pq.write_table(pa.table({"user_id": keys, "probe_id": np.arange(n, dtype=np.int64)}), out)
    return spark().read.parquet(str(out))


def _query(df):
    from pyspark.sql import functions as F

    return df.agg(F.count("*"), F.sum("amount")).collect()


def _cached(path: str):
    if "cached" not in _STATE:
        df = _parquet_df(path).cache()
        df.count()
        _STATE["cached"] = df
    return _STATE["cached"]


def _bucketed(work: Path, path: str):
    if "bucketed" not in _STATE:
        name = "events_bucketed"
        spark().sql(f"DROP TABLE IF EXISTS {name}")
        (_parquet_df(path).write.bucketBy(datasets.NUM_BUCKETS, "user_id").sortBy("user_id")
         .option("path", str(work / "bucketed")).mode("overwrite").saveAsTable(name))
        _STATE["bucketed"] = spark().table(name)
    return _STATE["bucketed"]


def _join_scenario(work: Path, args, size: str) -> Scenario:
    path = datasets.events(args.rows)
    t = IndexedTable.for_path(path)
    n = max(1, args.rows // SIZES[size])
    probe = _probe(work, path, n, seed=21)
    parquet = _parquet_df(path)
    cached = _cached(path)
    candidates = [("t.join(probe, 'user_id') (auto)", lambda: _query(t.join(probe, on="user_id"))),
                  ("t.join(probe, 'user_id', columns=['amount']) (auto)",
                   lambda: _query(t.join(probe, on="user_id", columns=["amount"])))]
    notes = [t.explain_join(probe, on="user_id")]
    if size in ("S", "M"):
        empty = IndexedTable.for_path(datasets.events_empty())
        candidates += [
            ("the same join with an empty indexed table (fixed cost)",
             lambda: _query(empty.join(probe, on="user_id", strategy="shuffle"))),
            ("t.join(..., strategy='shuffle')", lambda: _query(t.join(probe, on="user_id", strategy="shuffle"))),
            ("t.join(..., strategy='broadcast')", lambda: _query(t.join(probe, on="user_id", strategy="broadcast"))),
        ]
    else:  # auto hands these to Spark's own join (spark_join_ratio): time the indexed shuffle too
        candidates += [
            ("t.join(..., strategy='shuffle')", lambda: _query(t.join(probe, on="user_id", strategy="shuffle"))),
            ("t.join(..., strategy='shuffle', columns=['amount'])",
             lambda: _query(t.join(probe, on="user_id", strategy="shuffle", columns=["amount"]))),
        ]
        bucketed = _bucketed(work, path)
        candidates.append(("probe.join(Spark bucketed table)", lambda: _query(probe.join(bucketed, "user_id"))))
    candidates.append(("probe.join(DataFrame cached in memory)", lambda: _query(probe.join(cached, "user_id"))))
    return Scenario(
        name=f"join_{size}",
        description=f"{n:,} probe rows (existing keys) joined with {args.rows:,} rows on user_id; count and sum(amount)",
        baseline=("probe.join(spark.read.parquet(the same files), 'user_id')", lambda: _query(probe.join(parquet, "user_id"))),
        candidates=candidates,
        target="indexed join faster than the parquet join; S and M: broadcast faster than shuffle",
        notes=notes,
    )


def _clear_worker_caches() -> None:
    """Empty the indexeddf caches of the driver and (as far as tasks reach) the Python workers."""
    from indexeddf.reader.cache import cache

    def clear(batches):
        from indexeddf.reader.cache import cache as worker_cache

        worker_cache().clear()
        for b in batches:
            yield b

    cache().clear()
    spark().range(0, 64, 1, 64).mapInArrow(clear, "id long").collect()


def repeat(work: Path, args) -> Scenario:
    """One join (the M probe) run 5 times from cold caches: runs 2..5 against run 1."""
    path = datasets.events(args.rows)
    t = IndexedTable.for_path(path)
    n = max(1, args.rows // SIZES["M"])
    probe = _probe(work, path, n, seed=22)
    parquet = _parquet_df(path)
    notes = []
    for label, fn in [("indexeddf shuffle join", lambda: _query(t.join(probe, on="user_id", strategy="shuffle"))),
                      ("indexeddf broadcast join", lambda: _query(t.join(probe, on="user_id", strategy="broadcast"))),
                      ("Spark parquet join", lambda: _query(probe.join(parquet, "user_id")))]:
        _clear_worker_caches()
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        later = statistics.median(times[1:])
        notes.append(f"{label}: run 1 {times[0]:.2f} s, runs 2..5 median {later:.2f} s "
                     f"({later / times[0]:.2f}x of run 1); all: {', '.join(f'{x:.2f}' for x in times)}")
    return Scenario(
        name="join_repeat",
        description=f"the same {n:,}-row join run repeatedly (warm caches) against {args.rows:,} rows; notes: 5 runs from cold",
        baseline=("probe.join(spark.read.parquet(the same files))", lambda: _query(probe.join(parquet, "user_id"))),
        candidates=[("t.join(probe, strategy='shuffle')", lambda: _query(t.join(probe, on="user_id", strategy="shuffle"))),
                    ("t.join(probe, strategy='broadcast')", lambda: _query(t.join(probe, on="user_id", strategy="broadcast")))],
        target="runs 2..5 faster than run 1 (tries and row groups cached in the workers)",
        notes=notes,
    )


SCENARIOS = {
    "join_S": lambda work, args: _join_scenario(work, args, "S"),
    "join_M": lambda work, args: _join_scenario(work, args, "M"),
    "join_L": lambda work, args: _join_scenario(work, args, "L"),
    "join_XL": lambda work, args: _join_scenario(work, args, "XL"),
    "join_repeat": repeat,
}
