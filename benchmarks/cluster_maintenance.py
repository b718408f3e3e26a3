"""Maintenance as Spark jobs on a standalone cluster: one worker against two.

    python benchmarks/cluster_maintenance.py [--rows 100000000] [--append-rows N] [--buckets 32]
                                             [--workers 1,2] [--memory 3g] [--warmup-rows 200000]
                                             [--rounds N] [--no-optimize] [--work DIR] [--record NAME]

A master and one-core workers (``--memory`` each, and each executor as much) are started
with pyspark's own ``bin/spark-class`` (``tests/standalone_cluster.py``). For each worker
count, a driver process of its own, connected to that cluster, runs the steps below on a table
of ``--warmup-rows`` rows (not counted: a pipeline's driver is warm, its JVM has compiled the
planning and commit code and the executors have started their Python workers), then runs and
times them on a table of ``--rows`` rows:

1. ``write``: the check table's shape generated in Spark (``k`` bigint, each key twice;
   ``v`` bigint; ``s`` 64 characters, the SHA-256 of the row's id in hex), repartitioned by
   ``k`` into the bucket count and written with ``df.write.format("indexeddf")`` (primary
   index on ``k``; the write creates the table);
2. ``create_index``: ``create_index("by_s", ["s"], spark=spark)``;
3. ``append``: ``--append-rows`` more rows (new keys) written through Spark, with the table's
   ``indexeddf.index.autoRefresh`` set to false first (not timed), so the append writes data
   only and leaves the indexes to the refreshes, as a pipeline deferring index work does;
4. ``refresh``: ``refresh("by_s", spark=spark)`` (incremental: the appended files), then
   ``refresh primary``, the same for the primary index (reported apart);
5. ``optimize``: ``optimize(mode="full", spark=spark)``: every bucket's files into one, both
   indexes' files rewritten (``--no-optimize`` leaves it out).

With ``--rounds N`` steps 3 and 4 run N times, each round appending ``--append-rows`` new keys
(reported as ``append 2``, ``refresh 2``, ``refresh primary 2``, ...): a pipeline that appends
and refreshes again and again, and several samples of each step on the same table.

While the steps run, every process's own CPU time and resident memory is sampled from
``/proc`` every 0.1 s: the driver's processes (its Python, its JVM and that JVM's Python
workers) against the executors' (the workers' JVMs, the executor JVMs and their Python
workers). Prints per step and worker count the wall time, both CPU totals, the driver's share
of the CPU, the peak RSS of the driver's Python and JVM and of the largest process anywhere
(sampled during the step), then the speed-up from the fewest workers to the most per step, and
per worker count the largest peak RSS (``VmHWM``) any process reached against 4 GiB. After
each worker count (not timed), the table is checked against delta-rs: its row count, and rows
looked up through the ``by_s`` index against delta-rs's scan for the same ``s``.
``--record NAME`` writes the printed lines into ``benchmarks/results/<UTC date-time>-NAME.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from harness import add_record_arguments, record_run  # noqa: E402
from proctree import TICKS, children, tree  # noqa: E402

LIMIT_MIB = 4096
"""No process may pass this resident size (MiB)."""


# -- the driver process ------------------------------------------------------------------------

def generated(spark, start: int, end: int, buckets: int):
    """Rows ``start .. end`` of the check table's shape, computed on the executors: ``k`` the
    row id halved (each key twice), ``v`` a bigint spread over 40 bits, ``s`` the SHA-256 of the
    id in hex (64 characters); hash-partitioned by ``k`` into ``buckets`` partitions, so each
    write task writes one bucket (docs/spark.md, "File count")."""
    return (spark.range(start, end, numPartitions=buckets)
            .selectExpr("id div 2 AS k", "(id * 2654435761) % 1099511627776 AS v",
                        "sha2(CAST(id AS string), 256) AS s")
            .repartition(buckets, "k"))


def driver(url: str, table: str, rows: int, append_rows: int, buckets: int, memory: str, warmup_rows: int,
           rounds: int = 1, optimize: bool = True) -> None:
    """The steps in this process, a driver of the cluster at ``url``: first on a table of
    ``warmup_rows`` rows beside ``table`` (not counted: a pipeline's driver is warm, its JVM has
    compiled the planning and commit code and its executors have started their Python
    workers), then on ``table``, printing ``start STEP`` before each and a JSON line of its
    wall time after it."""
    from pyspark.sql import SparkSession

    import indexeddf

    builder = (SparkSession.builder.master(url).appName("indexeddf-cluster-maintenance")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.executor.memory", memory).config("spark.sql.session.timeZone", "UTC"))
    spark = indexeddf.configure(builder).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    indexeddf.register(spark)
    if warmup_rows:
        run_steps(spark, table + "-warm", warmup_rows, warmup_rows // 10, buckets, lambda name, fn: fn(), 1, optimize)
    run_steps(spark, table, rows, append_rows, buckets, timed, rounds, optimize)
    spark.stop()


def timed(name: str, fn) -> None:
    """``fn()`` between the lines the parent reads: ``start NAME``, then its wall time as JSON."""
    print(f"start {name}", flush=True)  # the parent counts CPU and memory from here
    t0 = time.perf_counter()
    result = fn()
    print(json.dumps({"step": name, "seconds": time.perf_counter() - t0, "result": result}), flush=True)


def run_steps(spark, table: str, rows: int, append_rows: int, buckets: int, step, rounds: int = 1,
              optimize: bool = True) -> None:
    """The steps on a new table at ``table``, each through ``step(name, fn)``: the append and the
    refreshes ``rounds`` times (the later rounds' names numbered), the optimize when ``optimize``."""
    from indexeddf import IndexedTable

    step("write", lambda: generated(spark, 0, rows, buckets).write.format("indexeddf")
         .option("indexColumns", "k").option("numBuckets", buckets).mode("append").save(table))
    t = IndexedTable.for_path(table)
    step("create_index", lambda: t.create_index("by_s", ["s"], spark=spark))
    t.set_properties({"indexeddf.index.autoRefresh": "false"})  # the append leaves the indexes behind
    for r in range(rounds):
        first, last, suffix = rows + r * append_rows, rows + (r + 1) * append_rows, f" {r + 1}" if r else ""
        step("append" + suffix, lambda first=first, last=last: generated(spark, first, last, buckets)
             .write.format("indexeddf").mode("append").save(table))
        step("refresh" + suffix, lambda: t.refresh("by_s", spark=spark))
        step("refresh primary" + suffix, lambda: t.refresh("primary", spark=spark))
    if optimize:
        step("optimize", lambda: t.optimize(mode="full", spark=spark))


# -- sampling the processes --------------------------------------------------------------------

def own_cpu(pid: int) -> float | None:
    """A process's own CPU seconds (user + system, not its waited-for children's: a Python
    worker reaped by its daemon would otherwise count twice, in itself and in the daemon)."""
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / TICKS


def status_mib(pid: int) -> tuple[float, float]:
    """A process's resident size and its peak (``VmRSS``, ``VmHWM``) in MiB; zeros when gone."""
    out = {"VmRSS": 0.0, "VmHWM": 0.0}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key = line.split(":", 1)[0]
                if key in out:
                    out[key] = int(line.split()[1]) / 1024
    except (OSError, IndexError, ValueError):
        pass
    return out["VmRSS"], out["VmHWM"]


def kind_of(pid: int, side: str, driver_pid: int, worker_pids: list[int]) -> str:
    """What a process is: the driver's Python, JVM or Python workers; a worker's JVM, an
    executor's JVM or the executors' Python workers (by side and by ``argv[0]``)."""
    if pid == driver_pid:
        return "driver Python"
    if pid in worker_pids:
        return "worker JVM"
    try:
        java = open(f"/proc/{pid}/cmdline").read().split("\0")[0].endswith("java")
    except OSError:
        java = False
    if side == "driver":
        return "driver JVM" if java else "driver Python workers"
    return "executor JVM" if java else "executor Python"


class Sampler(threading.Thread):
    """Every 0.1 s, each process of the driver's tree and of the workers' trees: its own CPU
    seconds (the largest figure seen; a process ending between two samples loses at most 0.1 s),
    its RSS (the largest since :meth:`mark`) and its ``VmHWM`` (the largest over the run)."""

    def __init__(self, driver_pid: int, worker_pids: list[int]):
        super().__init__(daemon=True)
        self.driver_pid, self.worker_pids = driver_pid, worker_pids
        self.cpu: dict[int, float] = {}
        self.side: dict[int, str] = {}
        self.kind: dict[int, str] = {}
        self.window: dict[int, float] = {}
        self.hwm: dict[int, float] = {}
        self.lock = threading.Lock()
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.1):
            self.sample()

    def sample(self) -> None:
        kids = children()
        with self.lock:
            for side, roots in (("driver", [self.driver_pid]), ("executors", self.worker_pids)):
                for pid in (p for root in roots for p in tree(root, kids)):
                    secs = own_cpu(pid)
                    if secs is None:
                        continue
                    if "JVM" not in self.kind.get(pid, ""):  # a launcher script execs java later
                        self.kind[pid] = kind_of(pid, side, self.driver_pid, self.worker_pids)
                    rss, hwm = status_mib(pid)
                    self.side[pid] = side
                    self.cpu[pid] = max(self.cpu.get(pid, 0.0), secs)
                    self.window[pid] = max(self.window.get(pid, 0.0), rss)
                    self.hwm[pid] = max(self.hwm.get(pid, 0.0), hwm)

    def mark(self) -> dict[int, float]:
        """The CPU seconds so far, by process; the RSS window starts again."""
        self.sample()
        with self.lock:
            self.window = {}
            return dict(self.cpu)

    def since(self, before: dict[int, float]) -> dict:
        """CPU seconds of each side and kind since ``before``, and the window's peak RSS: the
        driver's Python, its JVM, and the largest process anywhere (with its kind)."""
        self.sample()
        with self.lock:
            out: dict = {"driver": 0.0, "executors": 0.0, "by kind": {}}
            for pid, secs in self.cpu.items():
                spent = secs - before.get(pid, 0.0)
                out[self.side[pid]] += spent
                out["by kind"][self.kind[pid]] = out["by kind"].get(self.kind[pid], 0.0) + spent
            peak = {}
            for pid, rss in self.window.items():
                peak[self.kind[pid]] = max(peak.get(self.kind[pid], 0.0), rss)
            top = max(self.window, key=self.window.get, default=None)
            out["peak MiB by kind"] = peak
            out["driver Python MiB"] = peak.get("driver Python", 0.0)
            out["driver JVM MiB"] = peak.get("driver JVM", 0.0)
            out["largest MiB"] = self.window.get(top, 0.0) if top else 0.0
            out["largest kind"] = self.kind.get(top, "-") if top else "-"
            return out

    def largest_hwm(self) -> tuple[float, str]:
        """The largest ``VmHWM`` any process reached over the run, and that process's kind."""
        with self.lock:
            top = max(self.hwm, key=self.hwm.get)
            return self.hwm[top], self.kind[top]


# -- the parent --------------------------------------------------------------------------------

def one_cluster(n: int, args, work: Path) -> dict:
    """A cluster of ``n`` one-core workers and a driver process of its own running the steps on
    a fresh table: each step's wall time and what the sampler saw during it."""
    from standalone_cluster import standalone

    folder, table = work / f"cluster-{n}", work / f"table-{n}"
    folder.mkdir()
    with standalone(folder, workers=n, cores=1, memory=args.memory) as (url, env, workers):
        err = open(folder / "driver.err", "w")
        proc = subprocess.Popen([sys.executable, __file__, "--driver", url, str(table), str(args.rows),
                                 str(args.append_rows), str(args.buckets), args.memory, str(args.warmup_rows),
                                 str(args.rounds), str(int(args.optimize))],
                                env=env, stdout=subprocess.PIPE, stderr=err, text=True)
        sampler = Sampler(proc.pid, [w.pid for w in workers])
        sampler.start()
        steps: dict[str, dict] = {}
        for line in proc.stdout:
            if line.startswith("start "):
                before = sampler.mark()
            elif line.startswith("{"):
                got = json.loads(line)
                steps[got["step"]] = {"seconds": got["seconds"], "result": got["result"], **sampler.since(before)}
        proc.wait()
        sampler.done.set()
        sampler.join()
        if proc.returncode:
            raise SystemExit(f"the driver of {n} worker(s) failed:\n" + (folder / "driver.err").read_text()[-4000:])
    return {"steps": steps, "largest": sampler.largest_hwm(), "table": table}


def check(table: Path, rows: int, append_rows: int) -> str:
    """The table against delta-rs (not timed): its row count, and the rows of a few ``s``
    values, of the first write and of the append, looked up through ``by_s`` against delta-rs's
    scan of the same version filtered on ``s``."""
    import pyarrow.dataset as ds
    from deltalake import DeltaTable

    from indexeddf import IndexedTable

    t = IndexedTable.for_path(str(table))
    dataset = DeltaTable(str(table)).to_pyarrow_dataset()
    total = dataset.count_rows()
    assert total == rows + append_rows, (total, rows + append_rows)
    ids = [0, rows // 3, rows - 1, rows, rows + append_rows - 1]
    values = [hashlib.sha256(str(i).encode()).hexdigest() for i in ids]
    ours = t.lookup(values, index="by_s").sort_by("s").to_pylist()
    theirs = dataset.to_table(filter=ds.field("s").isin(values)).sort_by("s").to_pylist()
    assert ours == theirs and len(ours) == len(ids), (ours, theirs)
    assert {r["k"] for r in ours} == {i // 2 for i in ids}, ours
    states = {i.name: i.state for i in t.indexes()}
    assert states == {"primary": "ACTIVE", "by_s": "ACTIVE"}, states
    return f"checked against delta-rs: {total:,} rows; {len(ids)} lookups through by_s equal its scan"


def report(say, args, runs: dict[int, dict]) -> None:
    """A line per step and worker count, the speed-ups, the memory check."""
    say(f"{'step':<19} {'workers':>7} {'wall s':>8} {'driver CPU s':>13} {'executors CPU s':>16} "
        f"{'driver share':>13} {'driver Python MiB':>18} {'driver JVM MiB':>15} {'largest MiB':>12}  largest process")
    names = list(next(iter(runs.values()))["steps"])  # in the order they ran
    for name in names:
        for n, run in runs.items():
            s = run["steps"][name]
            share = s["driver"] / max(s["driver"] + s["executors"], 1e-9)
            say(f"{name:<19} {n:>7} {s['seconds']:>8.2f} {s['driver']:>13.1f} {s['executors']:>16.1f} "
                f"{share:>12.0%} {s['driver Python MiB']:>18.0f} {s['driver JVM MiB']:>15.0f} "
                f"{s['largest MiB']:>12.0f}  {s['largest kind']}")
    for n, run in runs.items():
        for name in names:
            kinds, peaks = run["steps"][name]["by kind"], run["steps"][name]["peak MiB by kind"]
            say(f"  {n} worker(s), {name}: CPU s by process: " + ", ".join(
                f"{k} {v:.1f}" for k, v in sorted(kinds.items(), key=lambda kv: -kv[1]) if v >= 0.05)
                + "; peak RSS MiB by process: " + ", ".join(f"{k} {v:.0f}" for k, v in sorted(peaks.items())))
    if len(runs) > 1:
        lo, hi = min(runs), max(runs)
        say(f"speed-up {lo} -> {hi} workers (wall): " + ", ".join(
            f"{name} {runs[lo]['steps'][name]['seconds'] / runs[hi]['steps'][name]['seconds']:.2f}x" for name in names))
        total = {n: sum(r["steps"][name]["seconds"] for name in names) for n, r in runs.items()}
        say(f"all steps: {lo} worker(s) {total[lo]:.1f} s, {hi} workers {total[hi]:.1f} s: "
            f"{total[lo] / total[hi]:.2f}x")
    for n, run in runs.items():
        mib, kind = run["largest"]
        verdict = "under" if mib < LIMIT_MIB else "OVER"
        say(f"{n} worker(s): largest peak RSS of any process {mib:.0f} MiB ({kind}), {verdict} {LIMIT_MIB} MiB; "
            f"{run['check']}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=100_000_000)
    p.add_argument("--append-rows", type=int, default=None, help="rows appended before the refresh (default: 10%%)")
    p.add_argument("--buckets", type=int, default=32)
    p.add_argument("--warmup-rows", type=int, default=200_000,
                   help="rows of the table each driver runs the steps on first, not counted (0: none)")
    p.add_argument("--rounds", type=int, default=1, help="times the append and the refreshes run (default 1)")
    p.add_argument("--no-optimize", dest="optimize", action="store_false", help="leave out the optimize step")
    p.add_argument("--workers", default="1,2", help="worker counts, one cluster each")
    p.add_argument("--memory", default="3g", help="each worker's memory, and each executor's")
    p.add_argument("--work", default=None, help="folder for the clusters and tables (default: the system's temp)")
    add_record_arguments(p)
    args = p.parse_args()
    if args.append_rows is None:
        args.append_rows = args.rows // 10

    printed: list[str] = []

    def say(line: str) -> None:
        print(line, flush=True)
        printed.append(line)

    work = Path(tempfile.mkdtemp(prefix="indexeddf-cluster-maintenance-", dir=args.work))
    say(f"maintenance as Spark jobs on a standalone cluster of one-core workers ({args.memory} each, executors as "
        f"much): {args.rows:,} rows written from Spark ({args.buckets} buckets, primary index on k), index by_s on "
        f"the 64-character s, {args.append_rows:,} rows appended and refreshed "
        f"{'once' if args.rounds == 1 else f'{args.rounds} times'}, "
        f"{'optimized (full)' if args.optimize else 'not optimized'}; each driver "
        f"ran the steps on {args.warmup_rows:,} rows first (not counted)")
    runs: dict[int, dict] = {}
    try:
        for n in (int(w) for w in args.workers.split(",")):
            runs[n] = one_cluster(n, args, work)
            runs[n]["check"] = check(runs[n]["table"], args.rows, args.append_rows * args.rounds)
            for t in (runs[n]["table"], Path(str(runs[n]["table"]) + "-warm")):
                shutil.rmtree(t, ignore_errors=True)  # a 100M-row table is several GB
        report(say, args, runs)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.record:
        record_run("benchmarks/cluster_maintenance.py", args, printed)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--driver":
        a = sys.argv[2:]
        driver(a[0], a[1], int(a[2]), int(a[3]), int(a[4]), a[5], int(a[6]), int(a[7]), a[8] == "1")
    else:
        main()
