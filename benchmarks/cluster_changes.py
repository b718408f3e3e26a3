"""Where a Spark SQL MERGE runs: the driver's share of the CPU, and the speed-up from one
worker to two, on a standalone cluster on loopback.

    python benchmarks/cluster_changes.py [--rows 2000000] [--buckets 32] [--source 200000]
                                         [--workers 1,2] [--rounds 2] [--warmups 12] [--vectors]

A master and one-core workers (2 GiB each) are started with pyspark's own ``bin/spark-class``
(``tests/standalone_cluster.py``). Each round copies the table built by ``changes.py``'s
``build`` (not timed) and runs, in a driver process of its own, the upsert ``changes.py``
times (half the source's keys in the table, half new) as Spark SQL's ``MERGE INTO``: into
``--warmups`` copies to warm the driver up (not counted, as a pipeline's driver is warm: its
JVM has compiled the planning and commit code), then into one more, the one measured. While
it runs, every process's CPU time is sampled from ``/proc``: the driver's processes (its
Python, its JVM and that JVM's Python workers) against the executors' (the workers' JVMs,
the executor JVMs and their Python workers). Prints per worker count the MERGE's wall time,
both CPU totals, the driver's share and the driver processes' largest resident memory.
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
import threading
import time
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from proctree import TICKS, children, cpu_and_rss, tree  # noqa: E402

SQL = ("MERGE INTO indexeddf.`{path}` AS t USING src AS s ON t.k = s.k "
       "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")


WARM_COPIES = 3
"""Copies of the table the warm-up MERGEs go into, in turn."""


def driver(url: str, warm: str, table: str, source: str, java_options: str = "") -> None:
    """One MERGE in this process, a driver of the cluster at ``url``, after the same MERGE
    into each copy of ``warm`` (comma-separated; not counted: a pipeline's driver has planned
    many statements before, and the first statements' class loading and JIT compilation are
    not the MERGE's work): prints its wall time. ``java_options``: the driver JVM's
    ``spark.driver.extraJavaOptions``."""
    from pyspark.sql import SparkSession

    import indexeddf

    builder = (SparkSession.builder.master(url).appName("indexeddf-cluster-merge")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.executor.memory", "1500m").config("spark.sql.session.timeZone", "UTC"))
    if java_options:
        builder = builder.config("spark.driver.extraJavaOptions", java_options)
    spark = indexeddf.configure(builder).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    assert indexeddf.register(spark) == indexeddf.spark.CONNECTOR
    spark.read.parquet(source).createOrReplaceTempView("src")
    for copy in filter(None, warm.split(",")):
        spark.sql(SQL.format(path=copy)).collect()
    print("start", flush=True)  # the parent counts CPU from here
    t0 = time.perf_counter()
    row = spark.sql(SQL.format(path=table)).collect()[0]
    print(json.dumps({"seconds": time.perf_counter() - t0, "updated": row.num_updated_rows,
                      "inserted": row.num_inserted_rows}), flush=True)
    spark.stop()


class Sampler(threading.Thread):
    """Samples the CPU time of two process trees (the driver's, the workers') every 0.1 s:
    the largest figure each process reached is its total (a process that ends between two
    samples loses at most 0.1 s of its time)."""

    def __init__(self, driver_pid: int, worker_pids: list[int]):
        super().__init__(daemon=True)
        self.driver_pid, self.worker_pids = driver_pid, worker_pids
        self.cpu: dict[str, dict[int, float]] = {"driver": {}, "executors": {}}
        self.peak_rss = 0
        self.kind: dict[int, str] = {}
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            kids = children()
            for side, roots in (("driver", [self.driver_pid]), ("executors", self.worker_pids)):
                for root in roots:
                    for pid in tree(root, kids):
                        got = cpu_and_rss(pid)
                        if got is None:
                            continue
                        self.cpu[side][pid] = max(self.cpu[side].get(pid, 0.0), got[0])
                        if side == "driver" and self.kind.get(pid, "other") in ("other", "Python workers"):
                            self.kind[pid] = _kind(pid, self.driver_pid)  # a launcher script becomes java
                        if side == "driver":
                            self.peak_rss = max(self.peak_rss, got[1])
            time.sleep(0.1)

    def totals(self) -> dict[str, float]:
        """CPU seconds of each side so far, and of each kind of the driver's processes."""
        time.sleep(0.15)  # one more sample
        out = {side: sum(v.values()) for side, v in self.cpu.items()}
        for pid, secs in self.cpu["driver"].items():
            k = "driver: " + self.kind.get(pid, "other")
            out[k] = out.get(k, 0.0) + secs
        return out


def _kind(pid: int, driver_pid: int) -> str:
    """What a driver-side process is: the driver's Python, its JVM, or a Python worker of that
    JVM by the module it runs (Spark starts planner and commit workers by module name)."""
    if pid == driver_pid:
        return "Python"
    try:
        argv = open(f"/proc/{pid}/cmdline").read().split("\0")
    except OSError:
        return "other"
    if argv and argv[0].endswith("java"):
        return "JVM"
    module = next((a for a in argv if a.startswith("pyspark.sql.worker.")), None)
    return ("worker " + module.rsplit(".", 1)[1]) if module else "Python workers"


def one_round(url: str, env: dict, workers: list, table: Path, work: Path, src: Path, warmups: int,
              java_options: str = "") -> dict:
    """One driver process: ``warmups`` MERGEs into copies of ``table`` (at most
    :data:`WARM_COPIES` of them, merged into in turn: a warm-up is not measured, and a 20M-row
    table's copies weigh a gigabyte each), then the measured one."""
    copy, warm = work / "copy", [work / f"warm-{i}" for i in range(min(warmups, WARM_COPIES))]
    for c in (copy, *warm):
        shutil.rmtree(c, ignore_errors=True)
        shutil.copytree(table, c)
    os.sync()
    turns = [str(warm[i % len(warm)]) for i in range(warmups)]
    proc = subprocess.Popen([sys.executable, __file__, "--driver", url, ",".join(turns), str(copy), str(src),
                             java_options],
                            env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sampler = Sampler(proc.pid, [w.pid for w in workers])
    sampler.start()
    lines = []
    for line in proc.stdout:  # the MERGE's CPU: from the driver's "start" to its result
        lines.append(line)
        if line.strip() == "start":
            before = sampler.totals()
            threads_before = _jvm_threads(sampler)
        elif line.startswith("{"):
            after = sampler.totals()
            threads = _jvm_threads(sampler, threads_before)
    err = proc.stderr.read()
    proc.wait()
    sampler.done.set()
    sampler.join()
    if proc.returncode:
        raise SystemExit(err[-3000:])
    out = "".join(lines)
    cpu = {side: after[side] - before.get(side, 0.0) for side in after}
    result = json.loads(out.strip().splitlines()[-1])
    return {**result, **cpu, "peak_rss": sampler.peak_rss, "jvm_threads": threads}


def _jvm_threads(sampler: Sampler, since: dict[str, float] | None = None) -> dict[str, float]:
    """CPU seconds of the driver JVM's threads by kind (the thread's name without its
    numbers: ``C2 CompilerThre``, ``dag-scheduler-e``, ``GC Thread#``, ...), less ``since``."""
    import re

    out: dict[str, float] = {}
    for pid, kind in list(sampler.kind.items()):
        if kind != "JVM":
            continue
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:  # a thread's own user and system time (its cutime and cstime are the process's)
                fields = open(f"/proc/{pid}/task/{tid}/stat").read().rsplit(")", 1)[1].split()
                name = re.sub(r"[0-9]+", "", open(f"/proc/{pid}/task/{tid}/comm").read().strip())
            except (OSError, IndexError):
                continue
            out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / TICKS
    return {k: v - (since or {}).get(k, 0.0) for k, v in out.items()}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--driver":
        driver(*sys.argv[2:7])
        return
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--buckets", type=int, default=32)
    p.add_argument("--source", type=int, default=200_000)
    p.add_argument("--workers", default="1,2")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--warmups", type=int, default=12,
                   help="MERGEs each driver runs before the measured one (a pipeline's driver is warm: after 3, "
                        "the driver JVM's JIT compiler still spent 0.74 CPU-s in the measured MERGE, after 12 0.22)")
    p.add_argument("--vectors", action="store_true", help="the table has delta.enableDeletionVectors = true")
    p.add_argument("--driver-java-options", default="",
                   help="the driver JVM's spark.driver.extraJavaOptions, e.g. -XX:TieredStopAtLevel=1 (C1 only: "
                        "less JIT compilation on the driver)")
    args = p.parse_args()

    import pyarrow.parquet as pq
    from changes import build, source
    from standalone_cluster import standalone

    from indexeddf import IndexedTable

    work = Path(tempfile.mkdtemp(prefix="indexeddf-cluster-"))
    table = work / "table"
    build(table, args.rows, args.buckets)
    if args.vectors:
        IndexedTable.for_path(str(table)).set_properties({"delta.enableDeletionVectors": "true"})
    src = work / "source.parquet"
    pq.write_table(source(args.rows, args.source), src)
    mode = "deletion vectors" if args.vectors else "copy on write"
    print(f"Spark SQL MERGE INTO of {args.source:,} source rows into {args.rows:,} rows ({args.buckets} buckets, "
          f"{mode}), standalone cluster of one-core workers, {args.rounds} rounds after a warm-up, "
          f"each driver warmed by {args.warmups} MERGEs")
    print(f"{'workers':>7} {'median s':>9} {'min..max s':>14} {'driver CPU s':>13} {'executors CPU s':>16} "
          f"{'driver share':>13} {'driver peak RSS MiB':>20}")
    medians = {}
    for n in (int(w) for w in args.workers.split(",")):
        folder = work / f"cluster-{n}"
        folder.mkdir()
        with standalone(folder, workers=n, cores=1, memory="2g") as (url, env, workers):
            rounds = [one_round(url, env, workers, table, work, src, args.warmups, args.driver_java_options)
                      for _ in range(args.rounds + 1)][1:]
        want = (args.source // 2, args.source - args.source // 2)
        assert all((r["updated"], r["inserted"]) == want for r in rounds), rounds
        secs = [r["seconds"] for r in rounds]
        drv = statistics.median(r["driver"] for r in rounds)
        exe = statistics.median(r["executors"] for r in rounds)
        medians[n] = statistics.median(secs)
        print(f"{n:>7} {medians[n]:>9.2f} {min(secs):>6.2f}..{max(secs):<6.2f} {drv:>13.1f} {exe:>16.1f} "
              f"{drv / (drv + exe):>12.0%} {max(r['peak_rss'] for r in rounds) / 2**20:>20.0f}")
        kinds = sorted({k for r in rounds for k in r if k.startswith("driver: ")})
        print("        driver CPU s by process: " + ", ".join(
            f"{k[8:]} {statistics.median(r.get(k, 0.0) for r in rounds):.2f}" for k in kinds))
        names = sorted({k for r in rounds for k in r["jvm_threads"]},
                       key=lambda k: -statistics.median(r["jvm_threads"].get(k, 0.0) for r in rounds))
        print("        driver JVM CPU s by thread: " + ", ".join(
            f"{k} {statistics.median(r['jvm_threads'].get(k, 0.0) for r in rounds):.2f}" for k in names[:8]))
    if len(medians) > 1:
        lo, hi = min(medians), max(medians)
        print(f"{lo} worker(s) / {hi} workers: {medians[lo] / medians[hi]:.2f}x")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
