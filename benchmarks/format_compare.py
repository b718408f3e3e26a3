"""Before / after the Delta log: the same operations, timed on the first
layout (``_indexeddf_log``, the code of commit ``--before``) and on the Delta layout
(this tree), interleaved in one run.

    .venv/bin/python benchmarks/format_compare.py --rounds 25 --reps 5

Each code version runs in its own worker processes (two versions of one package cannot
share a process). A round starts one worker per version; each times one repetition each
time the driver asks, after setting the operation up (untimed) at the first request
(``time.perf_counter`` and ``time.process_time`` around the call; interpreter start,
imports and set-up are not counted). The driver asks the two workers in turn, ``--reps`` times each, who goes
first alternating, so the two figures of a pair are taken moments apart and a burst of
load from other jobs on the machine hits both alike. A round's figure per version is the
median of its repetitions. The table printed gives, per operation, the median over the
rounds of each version's figure, the median of the per-round ratios after / before (above
1: the Delta layout is slower), the smallest and largest per-round ratio (the spread),
and the median per-round ratio of CPU time (all threads of the worker), which a busy
machine disturbs less than wall-clock time. On a shared machine most of the noise is per
process (the same worker stays fast or slow through a round), so rounds count for more
than repetitions.

The operations (tables are built once per version from identical rows under
``benchmarks/data/format_compare/``):

- ``open_1000_commits``: ``IndexedTable.for_path`` of a table of 1,000 commits in a
  warm process (one untimed open first pays the lazy imports), each repetition a full
  open (checkpoint plus the commits after it; nothing is cached between opens).
- ``open_1000_commits_first``: the first open in a new process (lazy imports
  included); a worker can time it only once, so each repetition starts a new worker
  per version (both started, then timed in turn).
- ``append_1k``: ``append`` of 1,000 rows to the 400,000-row table; every repetition
  appends to a fresh copy of the table (copied outside the timed region), so each
  creates the same version.
- ``lookup_1`` / ``lookup_1000``: ``lookup`` of 1 / 1,000 keys of the 400,000-row table in
  a warm process: the tries of every bucket and the files' footers are loaded first (a
  2,000-key lookup), then each repetition looks up keys that exist and that no earlier
  repetition used, and the decoded row groups cached by the previous repetition are
  dropped (untimed) before it: what is timed is a service answering new keys (probe the
  cached tries, read the rows' row groups from the files), not a cache of returned rows.
  Keys depend on the round and repetition only, so both versions look up the same keys.
- ``refresh`` / ``optimize_quick``: ``refresh()`` / ``optimize(mode="quick")`` of a table
  whose indexes are 10 appends behind; a fresh copy per repetition, copied untimed.
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

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DATA = HERE / "data" / "format_compare"

ROWS = 400_000
BUCKETS = 16

# -- the worker: runs inside one code version ----------------------------------------------


def _rows(n: int, seed: int):
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    return pa.table({
        "user_id": pa.array(rng.integers(0, n // 4 + 1, n), pa.int64()),
        "amount": pa.array(rng.random(n) * 100),
        "country": pa.array(rng.choice(["DE", "FR", "US", "JP", "BR"], n)),
    })


def _build(kind: str, path: Path) -> None:
    from indexeddf import IndexedTable

    if kind == "big":
        t = IndexedTable.create(str(path), _rows(ROWS, 1), index_columns=["user_id"], num_buckets=BUCKETS)
        t.optimize(mode="full")
    elif kind == "long":  # 1,000 commits
        t = IndexedTable.create(str(path), _rows(100, 0), index_columns=["user_id"], num_buckets=BUCKETS)
        batch = _rows(16, 2)
        while t.version < 1_000:
            t.append(batch)
    elif kind == "stale":  # indexes behind by 10 appends, 10 small files per bucket
        t = IndexedTable.create(str(path), _rows(ROWS // 4, 3), index_columns=["user_id"], num_buckets=BUCKETS)
        t.create_index("by_country", ["country"])
        t.set_properties({"indexeddf.index.autoRefresh": "false"})
        for i in range(10):
            t.append(_rows(2_000, 10 + i))


def _fresh(src: Path):
    """An ``IndexedTable`` on a fresh copy of ``src``, and an empty reader cache (the
    copies share the table id and file names, so cached segments would carry over)."""
    from indexeddf import IndexedTable
    from indexeddf.reader.cache import cache

    dst = src.parent / f"{src.name}.work"
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    cache().clear()
    return IndexedTable.for_path(str(dst))


def _timed(fn) -> tuple[float, float]:
    """Wall-clock and CPU seconds (``process_time``: every thread of the process) of ``fn()``."""
    c0, t0 = time.process_time(), time.perf_counter()
    fn()
    return time.perf_counter() - t0, time.process_time() - c0


def _lookup_keys(n: int, reps: int, seed: int) -> tuple[list, list[list]]:
    """2,000 keys to warm up with, then ``reps`` lists of ``n`` keys: keys of the big
    table, no key in two lists."""
    import numpy as np

    present = np.unique(_rows(ROWS, 1).column("user_id").to_numpy())
    chosen = np.random.default_rng(seed).choice(present, 2_000 + n * reps, replace=False).tolist()
    return chosen[:2_000], [chosen[2_000 + i * n:2_000 + (i + 1) * n] for i in range(reps)]


def repetitions(op: str, base: Path, reps: int, seed: int):
    """Set up ``op`` (untimed), then each ``next()`` runs one repetition and returns its
    (wall, CPU) seconds; untimed preparation (a fresh copy) happens inside ``next()``
    before the timed call."""
    from indexeddf import IndexedTable

    if op == "open_1000_commits_first":
        yield _timed(lambda: IndexedTable.for_path(str(base / "long")))
        return
    if op == "open_1000_commits":
        IndexedTable.for_path(str(base / "long"))  # untimed: lazy imports, the OS's file cache
        while True:
            yield _timed(lambda: IndexedTable.for_path(str(base / "long")))
    if op in ("lookup_1", "lookup_1000"):
        from indexeddf.reader.cache import cache

        t = IndexedTable.for_path(str(base / "big"))
        warm, keys = _lookup_keys(1 if op == "lookup_1" else 1000, reps, seed)
        t.lookup(warm)  # untimed: every bucket's trie and every file's footer are cached from here on
        for ks in keys:
            # Untimed: drop the row groups the previous repetition decoded.
            cache().discard([k for k in cache().keys() if k[0] == "rowgroup"])
            got = []
            yield _timed(lambda: got.append(t.lookup(ks)))
            assert got[0].num_rows >= len(ks)
        return
    if op == "append_1k":
        batch = _rows(1_000, 99)
        while True:
            t = _fresh(base / "big")
            yield _timed(lambda: t.append(batch))
    if op in ("refresh", "optimize_quick"):
        while True:
            t = _fresh(base / "stale")
            yield _timed(t.refresh if op == "refresh" else lambda: t.optimize(mode="quick"))
    raise SystemExit(f"unknown op {op}")


def serve(op: str, base: Path, reps: int, seed: int) -> None:
    """The worker's loop: say ``ready``, then run one repetition per ``go`` read from stdin
    (the first also sets the operation up, untimed) and print its (wall, CPU) seconds as JSON."""
    runs = repetitions(op, base, reps, seed)
    print("ready", flush=True)
    for line in sys.stdin:
        if line.strip() != "go":
            break
        print(json.dumps(next(runs)), flush=True)


OPS = ["open_1000_commits", "open_1000_commits_first", "append_1k", "lookup_1", "lookup_1000", "refresh",
       "optimize_quick"]
ONE_PER_PROCESS = {"open_1000_commits_first"}

# -- the driver ----------------------------------------------------------------------------


def _tree(before: str) -> Path:
    """A checkout of ``before`` (git worktree) under benchmarks/data."""
    path = DATA / f"code-{before[:12]}"
    if not (path / "indexeddf").exists():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--force", "--detach", str(path), before],
                       check=True, capture_output=True)
    return path


def _run(code: Path, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(code)}
    out = subprocess.run([sys.executable, str(HERE / "format_compare.py"), *args], env=env, check=True,
                         capture_output=True, text=True, cwd=str(code))
    return out.stdout.strip().splitlines()[-1]


class _Worker:
    """A worker process of one code version serving repetitions of one operation."""

    def __init__(self, code: Path, op: str, base: Path, reps: int, seed: int):
        self.log = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "format_compare.py"), "--serve", op, str(base), "--reps", str(reps),
             "--seed", str(seed)],
            env={**os.environ, "PYTHONPATH": str(code)}, cwd=str(code), stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self.log, text=True)

    def _line(self) -> str:
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait()
            self.log.seek(0)
            raise SystemExit(f"worker failed (exit {self.proc.returncode}):\n{self.log.read()}")
        return line.strip()

    def ready(self) -> "_Worker":
        if self._line() != "ready":
            raise SystemExit("worker did not start")
        return self

    def rep(self) -> tuple[float, float]:
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        return tuple(json.loads(self._line()))

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()
        self.log.close()


def _round(versions: dict, bases: dict, op: str, reps: int, r: int) -> dict:
    """One round: ``reps`` repetitions of ``op`` per version, before and after taking
    turns repetition by repetition (who goes first alternates), so the two figures of a
    pair are timed moments apart. Returns each version's (wall, CPU) per repetition."""
    def start():
        workers = {label: _Worker(versions[label], op, bases[label], reps, 1000 * r) for label in versions}
        return {label: w.ready() for label, w in workers.items()}

    out = {label: [] for label in versions}
    workers = None if op in ONE_PER_PROCESS else start()
    for k in range(reps):
        if op in ONE_PER_PROCESS:  # a new process per repetition (both started, then timed in turn)
            workers = start()
        for label in (("before", "after") if (r + k) % 2 == 0 else ("after", "before")):
            out[label].append(workers[label].rep())
        if op in ONE_PER_PROCESS:
            for w in workers.values():
                w.close()
    if op not in ONE_PER_PROCESS:
        for w in workers.values():
            w.close()
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--before", default="b3325a0", help="commit of the first layout (default b3325a0)")
    p.add_argument("--rounds", type=int, default=25, help="rounds per operation (default 25)")
    p.add_argument("--reps", type=int, default=5, help="timed repetitions per worker and round (default 5)")
    p.add_argument("--only", default=",".join(OPS))
    p.add_argument("--serve", nargs=2, metavar=("OP", "BASE"), help=argparse.SUPPRESS)
    p.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--build", nargs=2, metavar=("KIND", "PATH"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.serve:
        serve(args.serve[0], Path(args.serve[1]), args.reps, args.seed)
        return
    if args.build:
        _build(args.build[0], Path(args.build[1]))
        print("built")
        return
    ops = args.only.split(",")
    unknown = sorted(set(ops) - set(OPS))
    if unknown:
        p.error(f"unknown operation(s) {unknown}; known: {OPS}")
    DATA.mkdir(parents=True, exist_ok=True)
    versions = {"before": _tree(args.before), "after": ROOT}
    bases = {}
    for label, code in versions.items():
        base = DATA / f"tables-{label}"
        bases[label] = base
        for kind in ("big", "long", "stale"):
            if not (base / kind).exists():
                t0 = time.perf_counter()
                _run(code, "--build", kind, str(base / kind))
                print(f"# built {label}/{kind} in {time.perf_counter() - t0:.1f} s", flush=True)
    import indexeddf

    head = subprocess.run(['git', '-C', str(ROOT), 'rev-parse', '--short', 'HEAD'], capture_output=True,
                          text=True).stdout.strip()
    print(f"before: {args.before} (_indexeddf_log); after: {head} (_delta_log), indexeddf {indexeddf.__version__}")
    print(f"{ROWS:,} rows in {BUCKETS} buckets (lookups, append); 1,000 commits (open); "
          "10 unindexed appends (refresh, optimize)")
    print(f"{args.rounds} rounds; per round and version the median of {args.reps} repetitions, before and after "
          f"taking turns (open_1000_commits_first: one per worker, {args.reps} workers)")
    print("ms: median over the rounds (wall clock); after/before: median of the per-round ratios, min and max of "
          "them; cpu: the same median ratio of CPU time")
    print(f"{'operation':<24} {'before ms':>10} {'after ms':>10} {'after/before':>13} {'min':>6} {'max':>6} {'cpu':>6}")
    results = {}
    for op in ops:
        wall = {"before": [], "after": []}
        cpu = {"before": [], "after": []}
        ratios, cpu_ratios = [], []
        for r in range(args.rounds):
            got = _round(versions, bases, op, args.reps, r)
            for label, runs in got.items():
                wall[label].append(statistics.median(w for w, _ in runs))
                cpu[label].append(statistics.median(c for _, c in runs))
            ratios.append(wall["after"][-1] / wall["before"][-1])
            cpu_ratios.append(cpu["after"][-1] / cpu["before"][-1])
        b, a = statistics.median(wall["before"]) * 1000, statistics.median(wall["after"]) * 1000
        ratio, cpu_ratio = statistics.median(ratios), statistics.median(cpu_ratios)
        results[op] = {"before_ms": b, "after_ms": a, "ratio": ratio, "min_ratio": min(ratios),
                       "max_ratio": max(ratios), "cpu_ratio": cpu_ratio, "wall_s": wall, "cpu_s": cpu,
                       "ratios": ratios, "cpu_ratios": cpu_ratios}
        print(f"{op:<24} {b:>10.1f} {a:>10.1f} {ratio:>12.2f}x {min(ratios):>5.2f}x {max(ratios):>5.2f}x "
              f"{cpu_ratio:>5.2f}x", flush=True)
    out = HERE / "results" / "format_compare.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"rounds": args.rounds, "reps": args.reps, "ops": results}, indent=1))


if __name__ == "__main__":
    main()
