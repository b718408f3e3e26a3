"""The floor of ``refresh("primary", mode="full", spark=)`` on two cores: what its parts cost
on their own, against the single process on one core.

    python benchmarks/refresh_floor.py [--rows 20000000] [--buckets 32] [--rounds 5] [--record NAME]

The table is ``changes.py``'s check table (optimized: a file per bucket). Each figure is the
median of ``--rounds`` rounds after a first, warm-up round:

- ``one half alone``: a build task's work (``spark/index_tasks.py``: read the keys, hash,
  sort and write the index files) over half the data files, in a process of its own;
- ``two halves side by side``: both halves at once, each in a process of its own, started
  together (the slower one's wall time): the two cores' work with no Spark in it;
- ``empty job``: a Spark job of two Python tasks that do nothing, ``mapInArrow`` over
  ``spark.range`` (what the build runs) and ``mapPartitions`` of an RDD (``local[2]``);
- ``single process, one core``: ``refresh(..., mode="full")`` in a process held to one core;
- ``spark=``: the refresh as a Spark job.

The two halves side by side are the floor of any two-core build that splits the work so: the
one-core refresh over them is the most ``spark=`` could gain were its Spark job free (it is not:
the empty job's cost is partly overlapped by the tasks' work, partly added to it).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import add_record_arguments, record_run  # noqa: E402

HALF, REFRESH = "--half", "--refresh"


def half(path: str, which: int, start_at: float, out_dir: str) -> None:
    """One build task's work over half the table's files (``which``: 0 or 1), once to warm up,
    then once more from ``start_at`` (a wall-clock time): prints its wall seconds."""
    from indexeddf import IndexedTable
    from indexeddf.spark.index_tasks import balanced_groups, files_entries, task_add, write_entry_batches
    from indexeddf.spark.job_fence import JobFence
    from indexeddf.spark.options import shared_storage
    from indexeddf.spec.column_mapping import table_schema

    snap = IndexedTable.for_path(path).snapshot
    adds = list(snap.live_files())
    group = [task_add(adds[i]) for i in balanced_groups([a.size for a in adds], 2)[which]]
    storage = shared_storage(snap.storage.url, snap.storage.storage_options)
    schema, fence = table_schema(snap.metadata), JobFence.new()
    entry = snap.indexes["primary"]

    def run() -> None:
        entries = files_entries(storage, group, schema, list(entry.columns), entry.numBuckets, snap.version, fence)
        write_entry_batches(storage, f"{out_dir}{which}", entries, fence)

    run()
    while time.time() < start_at:
        time.sleep(0.001)
    started = time.perf_counter()
    run()
    print(json.dumps({"seconds": time.perf_counter() - started}))


def halves(path: str, which: list[int]) -> float:
    """The wall seconds of the halves ``which`` run at once, each in its own process (the slowest)."""
    start_at = time.time() + 6  # after both processes have imported and warmed up
    procs = [subprocess.Popen([sys.executable, __file__, HALF, path, str(w), str(start_at), "_floor_tmp"],
                              stdout=subprocess.PIPE, text=True) for w in which]
    outs = [json.loads(p.communicate()[0].strip().splitlines()[-1])["seconds"] for p in procs]
    for w in which:
        shutil.rmtree(Path(path) / "_indexes" / f"_floor_tmp{w}", ignore_errors=True)
    return max(outs)


def refresh_child(base: str, work: str, rounds: int, way: str) -> None:
    """The refresh ``rounds + 1`` times on fresh copies (``way``: ``one-core`` or ``spark``):
    prints the wall seconds of each."""
    from indexeddf import IndexedTable

    spark = None
    if way == "one-core":
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    else:
        import indexeddf

        spark = indexeddf.local_session("indexeddf-refresh-floor", cores=2)
    times = []
    for i in range(rounds + 1):
        copy = Path(work) / f"{way}-{i}"
        shutil.copytree(base, copy)
        os.sync()  # the copy's dirty pages written back now, not during the timed refresh
        started = time.perf_counter()
        IndexedTable.for_path(str(copy)).refresh("primary", mode="full", spark=spark)
        times.append(time.perf_counter() - started)
        shutil.rmtree(copy)
    if way == "spark":
        times += empty_jobs(spark, rounds)
    print(json.dumps(times))


def empty_jobs(spark, rounds: int) -> list[float]:
    """Wall seconds of empty two-task jobs, ``rounds + 1`` of each kind: mapInArrow, then an RDD's mapPartitions."""
    import pyarrow as pa

    schema = pa.schema([("x", pa.int64())])

    def arrow(batches):
        for _ in batches:
            yield pa.RecordBatch.from_pylist([{"x": 1}], schema=schema)

    def count(rows):
        yield sum(1 for _ in rows)

    out = []
    for job in (lambda: spark.range(0, 2, 1, numPartitions=2).mapInArrow(arrow, "x long").collect(),
                lambda: spark.sparkContext.parallelize(range(2), 2).mapPartitions(count).collect()):
        for _ in range(rounds + 1):
            started = time.perf_counter()
            job()
            out.append(time.perf_counter() - started)
    return out


def median_later(times: list[float]) -> float:
    """The median of the rounds after the first."""
    return statistics.median(times[1:])


def run(args) -> list[str]:
    from changes import build

    printed: list[str] = []

    def say(line: str) -> None:
        print(line, flush=True)
        printed.append(line)

    work = Path(tempfile.mkdtemp(prefix="refresh-floor-"))
    try:
        base = work / "table"
        build(base, args.rows, args.buckets)
        say(f"table: {args.rows:,} rows, {args.buckets} buckets; medians of {args.rounds} rounds after a first")
        alone = median_later([halves(str(base), [0]) for _ in range(args.rounds + 1)])
        both = median_later([halves(str(base), [0, 1]) for _ in range(args.rounds + 1)])
        ways = {}
        for way in ("one-core", "spark"):
            out = subprocess.run([sys.executable, __file__, REFRESH, str(base), str(work), str(args.rounds), way],
                                 capture_output=True, text=True)
            if out.returncode:
                sys.exit(out.stderr[-3000:])
            ways[way] = json.loads(out.stdout.strip().splitlines()[-1])
        n = args.rounds + 1
        spark_times = ways["spark"]
        refresh_spark, arrow_job, rdd_job = (median_later(spark_times[i * n:(i + 1) * n]) for i in range(3))
        one_core = median_later(ways["one-core"])
        say(f"one half alone                         {alone:>7.3f} s")
        say(f"two halves side by side (slower one)   {both:>7.3f} s  ({both / alone:.2f}x one alone)")
        say(f"empty two-task job: mapInArrow          {arrow_job:>7.3f} s")
        say(f"empty two-task job: RDD mapPartitions   {rdd_job:>7.3f} s")
        say(f"refresh, single process on one core    {one_core:>7.3f} s")
        say(f"refresh, spark= (local[2])              {refresh_spark:>7.3f} s  ({one_core / refresh_spark:.2f}x one core)")
        say(f"ceiling: one core over the two halves side by side (a Spark job of no cost) {one_core / both:.2f}x")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return printed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=20_000_000)
    ap.add_argument("--buckets", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=5)
    add_record_arguments(ap)
    args = ap.parse_args()
    printed = run(args)
    if args.record:
        record_run("benchmarks/refresh_floor.py", args, printed)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == HALF:
        half(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5])
    elif len(sys.argv) > 1 and sys.argv[1] == REFRESH:
        refresh_child(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
    else:
        main()
