"""Why indexeddf exists, shown on this machine: ``python -m indexeddf.demo [FOLDER] [--rows N]``.

Builds an events table of a few million rows with Spark, then times, there and then,
what the indexes buy: point and IN-list lookups (Spark-free ``lookup()``, through
Spark, and ``spark.read.parquet`` of the very same files), ``explain``, an indexed join,
an unindexed append answered by a hybrid scan, ``refresh``, time travel, ``optimize``,
``vacuum --dry-run`` and the history. Each step says in one line what it proves. The
table stays in FOLDER for the ``indexeddf`` command (printed at the end).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa

from . import IndexedTable

DEFAULT_ROWS = 3_000_000
USERS_PER_ROW = 4
"""About this many events per user id."""


def step(title: str, proves: str) -> None:
    """Print a step's title and the one line of what it proves."""
    print(f"\n== {title}\n   proves: {proves}", flush=True)


def timed(fn, runs: int = 3) -> tuple[float, object]:
    """Median seconds of ``runs`` calls (after one warm-up call), and the last result."""
    result = fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def ms(seconds: float) -> str:
    """Seconds as right-aligned milliseconds."""
    return f"{seconds * 1000:8.1f} ms"


def start_spark():
    """A quiet local Spark session (2 cores, no UI), workers on this interpreter."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    import indexeddf

    spark = indexeddf.local_session("indexeddf-demo")
    return spark


def build(spark, path: Path, rows: int) -> IndexedTable:
    """Write the events table with Spark and compact it: one file per bucket."""
    step(f"build a table of {rows:,} events with Spark, bucketed by user_id into 16 buckets",
         "a Spark DataFrame becomes a versioned table with its primary index in one write")
    users = max(1, rows // USERS_PER_ROW)
    df = spark.range(rows).selectExpr(
        f"(id * 7919) % {users} AS user_id",
        "CASE id % 3 WHEN 0 THEN 'click' WHEN 1 THEN 'view' ELSE 'buy' END AS event",
        "CAST(id % 10000 AS DOUBLE) / 100 AS amount",
        "id AS seq",
    )
    t0 = time.perf_counter()
    t = IndexedTable.create(str(path), df, index_columns=["user_id"], num_buckets=16)
    t.optimize(mode="full")  # one file per bucket, clustered by key hash
    t = IndexedTable.for_path(str(path))
    print(f"   {t.snapshot.num_records():,} rows in {len(t.snapshot.files)} files, version {t.version}, "
          f"{time.perf_counter() - t0:.1f} s")
    return t


def lookups(spark, t: IndexedTable, path: Path, rows: int) -> None:
    """Time a point lookup and an IN-list every way a user can run them."""
    from pyspark.sql import functions as F

    import indexeddf

    which = indexeddf.register(spark)
    files = [str(path / a.path) for a in t.snapshot.live_files()]
    parquet = spark.read.parquet(*files)
    source = spark.read.format("indexeddf").load(str(path))
    users = max(1, rows // USERS_PER_ROW)
    key = 4242 % users
    keys = [(k * 104_729) % users for k in range(100)]
    for title, spark_filter, python_keys in (("a point lookup", F.col("user_id") == key, [key]),
                                             ("an IN-list of 100 keys", F.col("user_id").isin(keys), keys)):
        step(f"{title}: Spark-free lookup() vs Spark's Parquet scan of the same files",
             "the index reads only the keys' buckets and row groups, so a lookup costs milliseconds, not a scan")
        scan_s, scan_rows = timed(lambda: parquet.where(spark_filter).collect())
        look_s, looked = timed(lambda: t.lookup(python_keys))
        to_spark_s, _ = timed(lambda: spark.createDataFrame(t.lookup(python_keys).to_pandas()).collect())
        src_s, src_rows = timed(lambda: source.where(spark_filter).collect(), runs=1)
        assert looked.num_rows == len(scan_rows) == len(src_rows)
        print(f"   spark.read.parquet(files).where(...)      {ms(scan_s)}   {len(scan_rows)} rows")
        print(f"   t.lookup(keys)                            {ms(look_s)}   {scan_s / look_s:6.0f}x faster")
        print(f"   spark.createDataFrame(t.lookup(keys))     {ms(to_spark_s)}   {scan_s / to_spark_s:6.1f}x faster")
        if which == "connector":
            print(f"   spark.read.format('indexeddf').where(...) {ms(src_s)}   (JVM connector: few keys are looked up "
                  "through the index on the driver, with no Spark job; docs/spark.md)")
        else:
            print(f"   spark.read.format('indexeddf').where(...) {ms(src_s)}   (Python data source: a filtered scan; "
                  "Spark 4.3 shares one read plan per DataFrame, docs/spark.md)")


def explain_and_join(spark, t: IndexedTable, path: Path, rows: int) -> None:
    """Show explain of two filters, then time an indexed join against Spark's."""
    step("explain an indexed and a non-indexed filter", "explain says which index answers, what it reads, and why not")
    print("   " + t.explain("user_id IN (7, 8, 9) AND amount > 10").replace("\n", "\n   "))
    print("   " + t.explain("amount > 99.5").replace("\n", "\n   "))

    step("join 10,000 probe keys with the table: t.join vs Spark's join of the Parquet files",
         "the table is a pre-built build side: only the probe is shuffled, only matching row groups are read")
    users = max(1, rows // USERS_PER_ROW)
    probe = spark.range(10_000).selectExpr(f"(id * 31) % {users} AS user_id").distinct().cache()
    probe.count()
    files = [str(path / a.path) for a in t.snapshot.live_files()]
    parquet = spark.read.parquet(*files)
    plain_s, plain_n = timed(lambda: parquet.join(probe, "user_id").count(), runs=2)
    joined_s, joined_n = timed(lambda: t.join(probe, on="user_id").count(), runs=2)
    assert plain_n == joined_n
    print(f"   parquet.join(probe)  {ms(plain_s)}   {plain_n:,} rows")
    print(f"   t.join(probe)        {ms(joined_s)}   {plain_s / joined_s:5.1f}x   ({t.explain_join(probe, on='user_id').splitlines()[0]})")


def lifecycle(t: IndexedTable, path: Path) -> int:
    """An unindexed append, refresh, time travel and optimize; returns the version before the append."""
    step("append 3 rows with index maintenance off, then look them up",
         "appends stay cheap; a lookup still finds them through a hybrid scan of the unindexed file")
    t.set_properties({"indexeddf.index.autoRefresh": "false"})
    before = t.version
    new = pa.table({"user_id": pa.array([-1, -1, -2], pa.int64()), "event": ["new"] * 3,
                    "amount": pa.array([1.0, 2.0, 3.0]), "seq": pa.array([-1, -2, -3], pa.int64())})
    t.append(new)
    print(f"   lookup([-1]) -> {t.lookup([-1]).num_rows} rows")
    print("   " + [line for line in t.explain("user_id = -1").splitlines() if "unindexed files scanned" in line][0])

    step("refresh the index incrementally", "the index catches up with one commit, indexing only the appended file")
    t.set_properties({"indexeddf.index.autoRefresh": "true"})
    t.refresh(mode="incremental")
    print("   " + [line for line in t.explain("user_id = -1").splitlines() if "unindexed files scanned" in line][0])

    step("time travel", "every version stays readable: before the append, user -1 did not exist")
    print(f"   version {before}: lookup([-1]) -> {t.lookup([-1], version=before).num_rows} rows; "
          f"version {t.version}: {t.lookup([-1]).num_rows} rows")

    step("optimize", "small appended files are compacted per bucket (indexes in step), with no change of data")
    files_before = len(t.snapshot.files)
    t.optimize(mode="quick")
    print(f"   data files: {files_before} -> {len(t.snapshot.files)}; rows unchanged: {t.snapshot.num_records():,}")
    return before


def upsert(spark, t: IndexedTable) -> None:
    """A MERGE INTO in Spark SQL: one existing user updated, one new user inserted."""
    import indexeddf

    step("upsert with MERGE: MERGE INTO indexeddf.`path` USING changes ... WHEN MATCHED THEN UPDATE SET * "
         "WHEN NOT MATCHED THEN INSERT *",
         "the index finds the matched rows, only their files are rewritten, and a lookup sees the change at once")
    t.set_properties({"indexeddf.index.autoRefresh": "true"})
    spark.createDataFrame([(-1, "refund", -5.0, -10), (-7, "new", 7.0, -11)],
                          "user_id bigint, event string, amount double, seq bigint").createOrReplaceTempView("changes")
    before = len(t.snapshot.live_files())
    statement = (f"MERGE INTO indexeddf.`{t.path}` AS t USING changes AS s ON t.user_id = s.user_id AND t.seq = -1 "
                 "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")
    if indexeddf.register(spark) == indexeddf.spark.CONNECTOR:
        spark.sql(statement)
    else:  # no JVM connector (no javac): the same change through the Python API
        t.merge(spark.table("changes"), "t.user_id = s.user_id AND t.seq = -1", source_alias="s", target_alias="t") \
            .when_matched_update_all().when_not_matched_insert_all().execute()
    t.update_incremental()
    entry = t.history()[0]
    m = entry.metrics
    print(f"   {m['numTargetRowsUpdated']} updated, {m['numTargetRowsInserted']} inserted in version {entry.version}: "
          f"{m['numTargetFilesRemoved']} of {before} files rewritten, {m['executionTimeMs']} ms in the change engine")
    print(f"   lookup([-1, -7]) -> {sorted(t.lookup([-1, -7]).column('event').to_pylist())}")


def cli(path: Path) -> None:
    """Vacuum's dry run and the history, through the indexeddf command."""
    command = [sys.executable, "-m", "indexeddf.cli"]
    step("vacuum --dry-run and the history, through the indexeddf command",
         "the files optimize replaced are what vacuum would delete; the history says who did what")
    dry = subprocess.run([*command, "vacuum", str(path), "--dry-run", "--retention-hours", "0",
                          "--no-enforce-retention", "-q"], capture_output=True, text=True)
    print("   " + dry.stdout.strip().splitlines()[-1])
    history = subprocess.run([*command, "history", str(path), "--limit", "6"], capture_output=True, text=True)
    print("   " + history.stdout.strip().replace("\n", "\n   "))


def main(argv: list[str] | None = None) -> int:
    """Run the demo; returns the exit code."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("folder", nargs="?", default="./demo-lake", help="where the table goes (default ./demo-lake)")
    p.add_argument("--rows", type=int, default=DEFAULT_ROWS, help=f"events to generate (default {DEFAULT_ROWS:,})")
    args = p.parse_args(argv)
    path = Path(args.folder).resolve() / "events"
    if path.exists():
        shutil.rmtree(path)
    started = time.perf_counter()
    spark = start_spark()
    try:
        t = build(spark, path, args.rows)
        lookups(spark, t, path, args.rows)
        explain_and_join(spark, t, path, args.rows)
        lifecycle(t, path)
        upsert(spark, t)
    finally:
        spark.stop()
    cli(path)
    print(f"\nDone in {time.perf_counter() - started:.0f} s. The table is in {path}. Explore it:")
    for c in ("describe", "history", "index list", "lookup"):
        extra = " 42" if c == "lookup" else ""
        print(f"   .venv/bin/indexeddf {c} {path}{extra}")
    print(f"   .venv/bin/indexeddf vacuum {path} --dry-run --retention-hours 0 --no-enforce-retention")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
