"""Index builds and refreshes in one Python process against the same operations as Spark jobs
(``spark=``, ``local[2]``): ``create_index("by_s", ["s"])`` and ``refresh("primary", mode="full")``.

    python benchmarks/maintenance_spark.py [--rows 20000000] [--buckets 32] [--rounds 1]
                                           [--ops create,refresh] [--record NAME]

The table is the check table of ``benchmarks/changes.py`` (k bigint, v bigint, s 64
characters; optimized to one file per bucket). Each operation runs on a fresh copy of it
(the copy is not timed) in a child process of its own; the Spark child starts its session
before the clock. A child reports the operation's wall time, the peak RSS (``VmHWM``) of
its Python process and of the Spark driver JVM, and the peak of the summed RSS of all its
processes (itself, the JVM, Spark's Python workers), sampled every 0.1 s. Prints a row per
way with the ratio of the single-process time to the Spark time (above 1: Spark is faster).
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
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

CHILD = "--child"
OPS = {"create": 'create_index("by_s", ["s"])', "refresh": 'refresh("primary", mode="full")'}


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


def descendants(root: int) -> list[int]:
    """``root`` and every process below it (the JVM, and Spark's Python workers below that)."""
    parents: dict[int, list[int]] = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        parents.setdefault(ppid, []).append(int(pid))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += parents.get(pid, [])
    return out


class TreePeak:
    """Samples the summed RSS of this process's tree every 0.1 s, on a thread."""

    def __init__(self):
        self.peak, self._stop = 0.0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            self.peak = max(self.peak, sum(vm(p, "VmRSS") for p in descendants(os.getpid())))

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return self.peak


def java_child() -> int | None:
    """The Spark driver JVM this process started."""
    for pid in descendants(os.getpid())[1:]:
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() == "java":
                    return pid
        except OSError:
            continue
    return None


def child(path: str, op: str, way: str) -> None:
    """One operation in this process: prints its wall time and peak RSS figures as JSON."""
    from indexeddf import IndexedTable

    spark = None
    if way == "spark":
        import indexeddf

        spark = indexeddf.local_session("indexeddf-maintenance-benchmark", cores=2)
    t = IndexedTable.for_path(path)
    sampler = TreePeak()
    started = time.perf_counter()
    if op == "create":
        t.create_index("by_s", ["s"], spark=spark)
    else:
        t.refresh("primary", mode="full", spark=spark)
    took = time.perf_counter() - started
    tree = sampler.stop()
    jvm = java_child()
    print(json.dumps({"seconds": took, "python_peak_mib": round(vm("self")),
                      "jvm_peak_mib": round(vm(jvm)) if jvm else None, "tree_peak_mib": round(tree)}))
    if spark is not None:
        spark.stop()


def measure(base: Path, work: Path, op: str, way: str) -> dict:
    """``op`` run ``way`` on a fresh copy of the table, in a child process."""
    copy = work / f"{op}-{way}"
    shutil.copytree(base, copy)
    try:
        out = subprocess.run([sys.executable, __file__, CHILD, str(copy), op, way], capture_output=True, text=True)
        if out.returncode:
            sys.exit(out.stderr[-3000:])
        return json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(copy, ignore_errors=True)


def run(args) -> list[str]:
    from changes import build

    printed: list[str] = []

    def say(line: str) -> None:
        print(line, flush=True)
        printed.append(line)

    work = Path(tempfile.mkdtemp(prefix="maintenance-bench-", dir=args.work))
    try:
        base = work / "table"
        t0 = time.perf_counter()
        build(base, args.rows, args.buckets)
        say(f"table: {args.rows:,} rows, {args.buckets} buckets, built in {time.perf_counter() - t0:.0f} s")
        for op in args.ops.split(","):
            runs = {way: [measure(base, work, op, way) for _ in range(args.rounds)] for way in ("single", "spark")}
            base_s = statistics.median(r["seconds"] for r in runs["single"])
            say(f"{OPS[op]}, {args.rounds} round(s)")
            say(f"{'way':<22} {'median s':>9} {'min..max s':>14} {'speed-up':>9} "
                f"{'python MiB':>11} {'JVM MiB':>8} {'all MiB':>8}")
            for way, rs in runs.items():
                secs = [r["seconds"] for r in rs]
                med = statistics.median(secs)
                name = "single process" if way == "single" else "spark= (local[2])"
                jvm = max((r["jvm_peak_mib"] or 0) for r in rs)
                say(f"{name:<22} {med:>9.2f} {min(secs):>6.2f}..{max(secs):<6.2f} {base_s / med:>8.2f}x "
                    f"{max(r['python_peak_mib'] for r in rs):>11} {jvm or '-':>8} {max(r['tree_peak_mib'] for r in rs):>8}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return printed


def record(args, printed: list[str]) -> None:
    """The printed lines as a results JSON (the shape tests/test_benchmark_results.py reads)."""
    now = datetime.now(timezone.utc)
    name = f"{now:%Y-%m-%d-%H%M}-{args.record}"
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).parent).stdout.strip() or None
    doc = {"run": name, "kind": "benchmarks/maintenance_spark.py", "date": f"{now:%Y-%m-%d}",
           "command": "python benchmarks/maintenance_spark.py " + " ".join(sys.argv[1:]), "commit": commit,
           "machine": "2 cores, shared with other helpers' test runs (loaded: timings are noisy)",
           "source": "benchmarks/maintenance_spark.py", "notes": [args.note] if args.note else [],
           "printed": printed}
    out = Path(__file__).parent / "results" / f"{name}.json"
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"recorded {out}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=20_000_000)
    ap.add_argument("--buckets", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--ops", default="create,refresh")
    ap.add_argument("--work", default=None, help="folder for the tables (default: the system's temp)")
    ap.add_argument("--record", default=None, help="write benchmarks/results/<date>-RECORD.json")
    ap.add_argument("--note", default=None, help="a note kept in the recorded JSON")
    args = ap.parse_args()
    printed = run(args)
    if args.record:
        record(args, printed)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == CHILD:
        child(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        main()
