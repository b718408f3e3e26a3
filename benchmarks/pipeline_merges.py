"""A pipeline's upserts: Spark SQL ``MERGE INTO`` every so often, with the session idle between.

    python benchmarks/pipeline_merges.py [--rows 20000000] [--buckets 32] [--source 10000]
                                         [--idle 65] [--rounds 3] [--copy-on-write]

A pipeline upserts a batch every few minutes. Spark kills a Python worker idle for a minute
(its ``PythonWorkerFactory``), so every statement of such a pipeline starts new Python workers.
This times that: one Spark session per way (each in a child process), ``--rounds`` MERGEs of
``--source`` rows (half existing keys, half new) into one table, each after ``--idle`` seconds
of nothing (the first MERGE warms the session up and is not counted), with deletion vectors
unless ``--copy-on-write``. The ways: the workers
forked from indexeddf's daemon (``spark.python.daemon.module = indexeddf.spark.daemon``, what
``indexeddf.configure`` sets on a local master), and from PySpark's own daemon. The anchor is
delta-rs's MERGE of the same batches into a copy of the same table (copy on write: delta-rs
writes no deletion vectors), in a process of its own, at the same cadence. The floor: the same
source rows written at the same cadence, with indexeddf's daemon, to a Python data source that
writes and commits nothing (``noop_python``, defined here): what Spark spends on a Python data
source's write statement after an idle minute (its plan, its driver-side Python workers for the
writer and the commit, a task), which any change through a Python data source pays.
Prints the median wall time and CPU seconds (the process tree's) per MERGE.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from proctree import cpu_between, tree_cpu

SQL = ("MERGE INTO indexeddf.`{path}` AS t USING src AS s ON t.k = s.k "
       "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")
WAYS = {"preloaded": "indexeddf's daemon (indexeddf.spark.daemon)", "pyspark": "PySpark's daemon (pyspark.daemon)",
        "delta-rs": "delta-rs MERGE (anchor)", "floor": "floor: a write to a Python source of nothing"}


def noop_source():
    """A Python data source whose write reads its rows and commits nothing (the floor's)."""
    from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage

    class Done(WriterCommitMessage):
        pass

    class NoopWriter(DataSourceArrowWriter):
        def write(self, iterator):
            for _ in iterator:
                pass
            return Done()

        def commit(self, messages):
            pass

    class NoopSource(DataSource):
        @classmethod
        def name(cls):
            return "noop_python"

        def writer(self, schema, overwrite):
            return NoopWriter()

    return NoopSource


def child(way: str, table: str, sources: str, idle: float) -> None:
    """The MERGEs of one way in this process; prints each one's wall and CPU seconds as JSON."""
    if way == "delta-rs":
        import deltalake
        import pyarrow.parquet as pq

        def prepared(path: str):  # the source read before the clock, as the Spark ways' view
            src = pq.read_table(path)
            return lambda: deltalake.DeltaTable(table).merge(src, "t.k = s.k", source_alias="s", target_alias="t") \
                .when_matched_update_all().when_not_matched_insert_all().execute()
    else:
        import indexeddf

        daemon = "pyspark.daemon" if way == "pyspark" else "indexeddf.spark.daemon"
        spark = indexeddf.local_session("indexeddf-pipeline-merges", driver_memory="4g",
                                        conf={"spark.python.daemon.module": daemon})
        if way == "floor":
            spark.dataSource.register(noop_source())

        def prepared(path: str):
            spark.read.parquet(path).createOrReplaceTempView("src")
            if way == "floor":
                return lambda: spark.table("src").write.format("noop_python").mode("append").save()
            return lambda: spark.sql(SQL.format(path=table)).collect()
    out = []
    for i, path in enumerate(sources.split(",")):
        time.sleep(idle if i else 0)
        merge = prepared(path)
        before, t0 = tree_cpu(), time.perf_counter()
        merge()
        out.append({"seconds": time.perf_counter() - t0, "cpu": cpu_between(before, tree_cpu())})
    print(json.dumps(out[1:]))  # the first MERGE warmed the session up


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5]))
        return
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=20_000_000)
    p.add_argument("--buckets", type=int, default=32)
    p.add_argument("--source", type=int, default=10_000)
    p.add_argument("--idle", type=float, default=65.0, help="seconds between two MERGEs (Spark's worker timeout: 60)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--copy-on-write", action="store_true", help="no deletion vectors (the table's default)")
    p.add_argument("--work", default=None, help="folder for the tables (default: the system's temp folder)")
    args = p.parse_args()

    import pyarrow.parquet as pq
    from changes import build, source

    from indexeddf import IndexedTable

    work = Path(tempfile.mkdtemp(prefix="pipeline-merges-", dir=args.work))
    try:
        table = work / "table"
        build(table, args.rows, args.buckets)
        paths = []
        for i in range(args.rounds + 1):
            paths.append(str(work / f"source-{i}.parquet"))
            pq.write_table(source(args.rows, args.source, seed=100 + i), paths[-1])
        mode = "copy on write" if args.copy_on_write else "deletion vectors"
        print(f"Spark SQL MERGE INTO of {args.source:,} rows into {args.rows:,} rows ({args.buckets} buckets, {mode}), "
              f"every {args.idle:.0f} s, {args.rounds} MERGEs after one that warms the session up")
        print(f"{'way':<46} {'median s':>9} {'min..max s':>14} {'CPU s':>7} {'vs delta-rs':>12}")
        results = {}
        for way in ("delta-rs", "preloaded", "pyspark", "floor"):
            copy = work / "copy"
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(table, copy)
            if way != "delta-rs" and not args.copy_on_write:  # delta-rs writes no table with deletion vectors
                IndexedTable.for_path(str(copy)).set_properties({"delta.enableDeletionVectors": "true"})
            out = subprocess.run([sys.executable, __file__, "--child", way, str(copy), ",".join(paths), str(args.idle)],
                                 capture_output=True, text=True, check=True).stdout
            results[way] = json.loads(out.strip().splitlines()[-1])
        anchor = statistics.median(r["seconds"] for r in results["delta-rs"])
        for way, rounds in results.items():
            secs = [r["seconds"] for r in rounds]
            med = statistics.median(secs)
            print(f"{WAYS[way]:<46} {med:>9.3f} {min(secs):>6.3f}..{max(secs):<6.3f} "
                  f"{statistics.median(r['cpu'] for r in rounds):>7.2f} {anchor / med:>11.2f}x")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
