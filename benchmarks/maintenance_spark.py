"""Index builds, refreshes and optimize in one Python process against the same operations as
Spark jobs (``spark=``, ``local[2]``): ``create_index("by_s", ["s"])``,
``refresh("primary", mode="full")`` and ``optimize(mode="full")``; the two index operations
also as SQL statements (``CREATE INDEX by_s ON ... (s)``, ``REFRESH INDEX primary ON ... FULL``:
the connector's command, whose tasks read, hash, sort and write as ``spark=``'s do).

    python benchmarks/maintenance_spark.py [--rows 20000000] [--buckets 32]
                                           [--ops create,refresh,optimize] [--record NAME]
                                           [--ways single,single1,spark,other] [--runs 2]

The table is the check table of ``benchmarks/changes.py`` (k bigint, v bigint, s 64
characters; optimized to one file per bucket). ``optimize`` gets the same rows written in
``--appends`` appends (a file per bucket each, not optimized) with a second index
(``by_s``): it rewrites every bucket's files into one and both indexes' files. Its anchor is
Spark alone on the same data (``local[2]``): read the table's data files as plain Parquet,
``repartition(buckets, "k")``, ``sortWithinPartitions("k")``, write Parquet (the rewrite
without statistics in a log, bloom filters or index entries). Each way runs in a child process of its own,
which runs the operation twice (``--runs``), each time on a fresh copy of the table (copies are not
timed, and are synced to disk first: a copy's gigabytes written back during a run took CPU
from it): "first" is the session's first job (the Spark child starts its session before the
clock, but Spark's Python workers start within it), "again" the same operation in the same
process. ``--ways`` picks the ways (``other`` is the anchor for optimize, the SQL statement
for the index operations); at 200M rows one run of the three ways the goals name
(``single1,spark,other``) takes half an hour where all of them twice take over an hour.
A child reports each run's wall time and CPU time (user + system, of every process
of the child: itself, the JVM, Spark's Python workers; on a loaded machine the CPU time is
the steadier figure; also apart: the child's own Python, the JVM, the other processes, i.e.
Spark's Python workers), the peak RSS (``VmHWM``) of its Python process and of the Spark
driver JVM, and the peak of the summed RSS of all its processes, sampled every 0.1 s. The
speed-up is the single process's wall time (the median of its runs after the first) over each
run's (above 1: faster);
"vs 1 core" is the same against the single process held to one core (``sched_setaffinity``:
its threads share that core), the comparison the goal states, two cores against one.
``--record NAME`` writes the printed lines into ``benchmarks/results/<date>-NAME.json``.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import add_record_arguments, record_run  # noqa: E402
from proctree import tree, tree_cpu  # noqa: E402

CHILD = "--child"
OPS = {"create": 'create_index("by_s", ["s"])', "refresh": 'refresh("primary", mode="full")',
       "optimize": 'optimize(mode="full")'}
WAYS = {"single": "single process", "single1": "single process, one core", "spark": "spark= (local[2])",
        "sql": "Spark SQL statement (local[2])",
        "anchor": "Spark read+repartition+sort+write"}
SQL = {"create": "CREATE INDEX by_s ON indexeddf.`{path}` (s)", "refresh": "REFRESH INDEX primary ON indexeddf.`{path}` FULL"}
"""The SQL statement of an index operation (the ``sql`` way)."""


def vm(pid, key: str = "VmHWM") -> float:
    """A /proc status figure of ``pid`` in MiB (0 when the process is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class TreePeak:
    """Samples the summed RSS of this process's tree every 0.1 s, on a thread."""

    def __init__(self):
        self.peak, self._stop = 0.0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            self.peak = max(self.peak, sum(vm(p, "VmRSS") for p in tree(os.getpid())))

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return self.peak


def java_child() -> int | None:
    """The Spark driver JVM this process started."""
    for pid in tree(os.getpid())[1:]:
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() == "java":
                    return pid
        except OSError:
            continue
    return None


def cpu_by_process(before: dict[int, float], after: dict[int, float]) -> dict[str, float]:
    """The CPU seconds between two ``tree_cpu`` readings of this process (the driver's
    Python), the JVM and the other processes (Spark's Python workers), apart: which process
    did the work."""
    out = {"python": 0.0, "jvm": 0.0, "workers": 0.0}
    jvm = java_child()
    for pid, secs in after.items():
        kind = "python" if pid == os.getpid() else "jvm" if pid == jvm else "workers"
        out[kind] += secs - before.get(pid, 0.0)
    return out


def child(paths: list[str], op: str, way: str) -> None:
    """``op`` on each copy in turn, in this process (the second run finds the session's
    Python workers started): prints the wall and CPU seconds of each and peak RSS figures as JSON."""
    from indexeddf import IndexedTable

    spark = None
    if way == "single1":  # the process and every thread it starts on one core (as if the machine had one)
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    if way in ("spark", "sql", "anchor"):
        import indexeddf

        spark = indexeddf.local_session("indexeddf-maintenance-benchmark", cores=2)
    sampler = TreePeak()
    runs = []
    for path in paths:
        t = IndexedTable.for_path(path)
        before, started = tree_cpu(), time.perf_counter()
        if way == "anchor":
            anchor(spark, t)
        elif way == "sql":
            spark.sql(SQL[op].format(path=path)).collect()
        elif op == "create":
            t.create_index("by_s", ["s"], spark=spark)
        elif op == "optimize":
            t.optimize(mode="full", spark=spark)
        else:
            t.refresh("primary", mode="full", spark=spark)
        seconds, after = time.perf_counter() - started, tree_cpu()
        runs.append({"seconds": seconds, "cpu_seconds": sum(after.values()) - sum(before.values()),
                     "cpu_by_process": cpu_by_process(before, after)})
    tree = sampler.stop()
    jvm = java_child()
    print(json.dumps({"runs": runs, "python_peak_mib": round(vm("self")),
                      "jvm_peak_mib": round(vm(jvm)) if jvm else None, "tree_peak_mib": round(tree)}))
    if spark is not None:
        spark.stop()


def anchor(spark, t) -> None:
    """Spark alone rewriting the table's rows one file a bucket, sorted by key: its data
    files read as plain Parquet, hash-partitioned by ``k`` into the table's bucket count,
    sorted within each partition, written as Parquet beside the table."""
    paths = [t.snapshot.storage.full(a.path) for a in t.snapshot.live_files()]
    (spark.read.parquet(*paths).repartition(t.num_buckets, "k").sortWithinPartitions("k")
     .write.mode("overwrite").parquet(t.snapshot.storage.full("anchor_out")))


def measure(base: Path, work: Path, op: str, way: str, runs: int) -> dict:
    """``op`` run ``way`` ``runs`` times, each on a fresh copy of the table, in one child process."""
    copies = [work / f"{op}-{way}-{i}" for i in range(1, runs + 1)]
    for c in copies:
        shutil.copytree(base, c)
    os.sync()  # the copies' dirty pages written back now, not by the kernel during a timed run
    try:
        out = subprocess.run([sys.executable, __file__, CHILD, op, way, *map(str, copies)],
                             capture_output=True, text=True)
        if out.returncode:
            sys.exit(out.stderr[-3000:])
        return json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        for c in copies:
            shutil.rmtree(c, ignore_errors=True)


def run(args) -> list[str]:
    from changes import build

    printed: list[str] = []

    def say(line: str) -> None:
        print(line, flush=True)
        printed.append(line)

    work = Path(tempfile.mkdtemp(prefix="maintenance-bench-", dir=args.work))
    try:
        ops = args.ops.split(",")
        bases = {}
        if set(ops) - {"optimize"}:
            bases["table"] = work / "table"
            t0 = time.perf_counter()
            build(bases["table"], args.rows, args.buckets)
            say(f"table: {args.rows:,} rows, {args.buckets} buckets, built in {time.perf_counter() - t0:.0f} s")
        if "optimize" in ops:
            bases["optimize"] = work / "fragmented"
            t0 = time.perf_counter()
            fragmented(bases["optimize"], args.rows, args.buckets, args.appends)
            say(f"optimize's table: {args.rows:,} rows in {args.appends} writes, {args.buckets} buckets, indexes "
                f"primary and by_s, built in {time.perf_counter() - t0:.0f} s")
        for op in ops:
            base = bases["optimize" if op == "optimize" else "table"]
            ways = [("anchor" if op == "optimize" else "sql") if w == "other" else w for w in args.ways.split(",")]
            runs = {way: measure(base, work, op, way, args.runs) for way in ways}
            report(say, OPS[op], runs)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return printed


def fragmented(path: Path, rows: int, buckets: int, appends: int) -> None:
    """The check table's rows in ``appends`` writes (a file per bucket each), indexed by_s."""
    from changes import build

    from indexeddf import IndexedTable

    build(path, rows, buckets, chunk_rows=-(-rows // appends), optimize=False)
    IndexedTable.for_path(str(path)).create_index("by_s", ["s"])


def reference(runs: list[dict]) -> dict:
    """What a way's runs are compared by: the median wall and CPU seconds (and CPU by process)
    of the runs after the first (the first pays the process's start: imports, Spark's Python
    workers, the JIT), the only run when there is one."""
    later = runs[1:] or runs
    out = {k: float(statistics.median(r[k] for r in later)) for k in ("seconds", "cpu_seconds")}
    out["cpu_by_process"] = {k: float(statistics.median(r["cpu_by_process"][k] for r in later))
                             for k in later[0]["cpu_by_process"]}
    return out


def report(say, title: str, runs: dict) -> None:
    """Each way's runs: wall and CPU seconds, the speed-up over the single process's later
    runs (:func:`reference`; on one core when the two-thread way did not run), and over its
    later runs on one core, its CPU over the single process's, and against the anchor's later
    runs; with three runs or more, also each way's median of its later runs."""
    one_core = reference(runs["single1"]["runs"]) if "single1" in runs else None
    anchor = reference(runs["anchor"]["runs"]) if "anchor" in runs else None
    base = reference(runs["single"]["runs"]) if "single" in runs else one_core
    say(title)
    say(f"{'way':<42} {'wall s':>7} {'CPU s':>7} {'speed-up':>9} {'vs 1 core':>10} {'CPU ratio':>10} {'vs anchor':>10} "
        f"{'python MiB':>11} {'JVM MiB':>8} {'all MiB':>8} {'CPU s: python/JVM/workers':>26}")
    for way, r in runs.items():
        n = len(r["runs"])
        lines = [(WAYS[way] + ("" if n == 1 else ", first" if i == 0 else ", again" if i == 1 else f", run {i + 1}"), one)
                 for i, one in enumerate(r["runs"])]
        if n >= 3:
            lines.append((WAYS[way] + f", runs 2-{n} median", reference(r["runs"])))
        for name, one in lines:
            versus = f"{anchor['seconds'] / one['seconds']:>9.2f}x" if anchor else f"{'-':>10}"
            single = f"{one_core['seconds'] / one['seconds']:>9.2f}x" if one_core else f"{'-':>10}"
            say(f"{name:<42} {one['seconds']:>7.2f} {one['cpu_seconds']:>7.1f} {base['seconds'] / one['seconds']:>8.2f}x "
                f"{single} {one['cpu_seconds'] / base['cpu_seconds']:>9.2f}x {versus} "
                f"{r['python_peak_mib']:>11} {r['jvm_peak_mib'] or '-':>8} {r['tree_peak_mib']:>8} "
                f"{'/'.join(f'{v:.1f}' for v in one['cpu_by_process'].values()):>26}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=20_000_000)
    ap.add_argument("--buckets", type=int, default=32)
    ap.add_argument("--ops", default="create,refresh,optimize")
    ap.add_argument("--ways", default="single,single1,spark,other",
                    help="ways to run: single, single1 (one core), spark, other (optimize's anchor, or the SQL statement)")
    ap.add_argument("--runs", type=int, default=2, help="runs of each way, each on a fresh copy in the same process")
    ap.add_argument("--appends", type=int, default=8, help="writes of optimize's table (files a bucket)")
    ap.add_argument("--work", default=None, help="folder for the tables (default: the system's temp)")
    add_record_arguments(ap)
    args = ap.parse_args()
    printed = run(args)
    if args.record:
        record_run("benchmarks/maintenance_spark.py", args, printed)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == CHILD:
        child(sys.argv[4:], sys.argv[2], sys.argv[3])
    else:
        main()
