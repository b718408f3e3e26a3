"""Peak memory of ``IndexedTable.merge(spark_df, ...)``: a Spark DataFrame source staged by
Spark's tasks and read one bucket at a time, against the same merge with the DataFrame
collected to the driver first (``df.toArrow()``, what the merge did before). ``staged`` opens the
table with fsspec ``storage_options``, which keep the engine's staged path (without them, a
session with the connector runs the merge as Spark SQL's ``MERGE INTO``: the way ``sql``, not in
the default ways).

    python benchmarks/merge_spark_source.py [--rows 2000000] [--source 3000000] [--buckets 8]

Builds one table (``--rows`` rows, k bigint, v bigint, s 40 characters), then for each way,
in a child process of its own on a fresh copy of the table: starts Spark (local[2]), makes
the source with ``spark.range`` (k = id + rows/2: half the table's keys updated, the rest
inserted), runs ``merge(...).when_matched_update_all().when_not_matched_insert_all()``, and
prints the wall time and the peak RSS (``VmHWM``) of the driver's Python process and of the
Spark driver JVM. Prints one JSON line per way.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = "--child"


def peak_rss_mib(pid: int | str = "self") -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def spark_jvm_pid() -> int | None:
    """The Spark driver JVM this process started (a child named java)."""
    import os

    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().split()
        except OSError:
            continue
        if fields[1] == "(java)" and int(fields[3]) == os.getpid():
            return int(pid)
    return None


def build(path: str, rows: int, buckets: int) -> None:
    import numpy as np
    import pyarrow as pa

    from indexeddf import IndexedTable

    chunk = 1_000_000
    t = None
    for start in range(0, rows, chunk):
        k = np.arange(start, min(rows, start + chunk), dtype=np.int64)
        data = pa.table({"k": k, "v": k * 3, "s": pa.array([f"{x:040d}" for x in k])})
        t = IndexedTable.create(path, data, ["k"], num_buckets=buckets) if t is None else t
        if start:
            t.append(data)


def child(path: str, way: str, rows: int, source: int) -> None:
    from pyspark.sql import functions as F

    import indexeddf
    from indexeddf import IndexedTable

    spark = indexeddf.local_session("indexeddf-merge-source-benchmark", driver_memory="4g")
    df = spark.range(source).select((F.col("id") + rows // 2).alias("k"), (F.col("id") * 7).alias("v"),
                                    F.format_string("%040d", F.col("id")).alias("s"))
    # fsspec storage options keep the engine's staged path (a statement reaches files through Hadoop)
    t = IndexedTable.for_path(path, storage_options={"auto_mkdir": True} if way == "staged" else None)
    started = time.perf_counter()
    src = df.toArrow() if way == "collected" else df
    m = t.merge(src, "t.k = s.k", "s", "t").when_matched_update_all().when_not_matched_insert_all().execute()
    took = time.perf_counter() - started
    jvm = spark_jvm_pid()
    print(json.dumps({"way": way, "seconds": round(took, 1), "python_peak_rss_mib": round(peak_rss_mib()),
                      "jvm_peak_rss_mib": round(peak_rss_mib(jvm)) if jvm else None,
                      "updated": m["num_target_rows_updated"], "inserted": m["num_target_rows_inserted"]}))
    spark.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--source", type=int, default=3_000_000)
    ap.add_argument("--buckets", type=int, default=8)
    ap.add_argument("--ways", default="collected,staged", help="comma-separated: collected, staged, sql")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = str(Path(tmp) / "base")
        build(base, args.rows, args.buckets)
        for way in args.ways.split(","):
            copy = str(Path(tmp) / way)
            shutil.copytree(base, copy)
            out = subprocess.run([sys.executable, __file__, CHILD, copy, way, str(args.rows), str(args.source)],
                                 capture_output=True, text=True)
            if out.returncode:
                sys.exit(out.stderr[-3000:])
            print(out.stdout.strip().splitlines()[-1], flush=True)
            shutil.rmtree(copy)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == CHILD:
        child(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    else:
        main()
