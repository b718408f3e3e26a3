"""Before / after the Delta log (issue 12): the same operations, timed on the first
layout (``_indexeddf_log``, the code of commit ``--before``) and on the Delta layout
(this tree), interleaved round by round in one run.

    .venv/bin/python benchmarks/format_compare.py --rounds 15 --reps 7

Each code version runs in its own worker processes (two versions of one package cannot
share a process). A worker times one operation ``--reps`` times (``time.perf_counter``
around the call; interpreter start, imports and set-up are not counted) and reports the
median of its repetitions. In each round the two versions' workers run one after the
other on the same inputs, the order alternating from round to round, so drift of the
shared machine hits both alike. The table printed gives, per operation, the median over
the rounds of each version's figure, the median of the per-round ratios after / before
(above 1: the Delta layout is slower) and the smallest and largest per-round ratio.

The operations (tables are built once per version from identical rows under
``benchmarks/data/format_compare/``):

- ``open_1000_commits``: ``IndexedTable.for_path`` of a table of 1,000 commits in a
  warm process (one untimed open first pays the lazy imports), each repetition a full
  open (checkpoint plus the commits after it; nothing is cached between opens).
- ``open_1000_commits_first``: the first open in a new process (lazy imports
  included); a worker can time it only once, so the driver starts ``--reps`` workers
  per version and round and takes their median.
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


def _lookup_keys(n: int, reps: int, seed: int) -> list:
    """``reps`` lists of ``n`` distinct keys of the big table, no key in two lists."""
    import numpy as np

    present = np.unique(_rows(ROWS, 1).column("user_id").to_numpy())
    chosen = np.random.default_rng(seed).choice(present, n * reps, replace=False)
    return [chosen[i * n:(i + 1) * n].tolist() for i in range(reps)]


def worker(op: str, base: Path, reps: int, seed: int) -> list[tuple[float, float]]:
    """(wall, CPU) seconds of each repetition of the operation, timed here."""
    from indexeddf import IndexedTable

    if op == "open_1000_commits_first":
        return [_timed(lambda: IndexedTable.for_path(str(base / "long")))]
    if op == "open_1000_commits":
        IndexedTable.for_path(str(base / "long"))  # untimed: lazy imports, the OS's file cache
        return [_timed(lambda: IndexedTable.for_path(str(base / "long"))) for _ in range(reps)]
    if op in ("lookup_1", "lookup_1000"):
        from indexeddf.reader.cache import cache

        def drop_row_groups():
            cache().discard([k for k in cache().keys() if k[0] == "rowgroup"])

        t = IndexedTable.for_path(str(base / "big"))
        n = 1 if op == "lookup_1" else 1000
        warm, *keys = _lookup_keys(max(n, 2_000), 1, seed + 10_000) + _lookup_keys(n, reps, seed)
        t.lookup(warm)  # untimed: every bucket's trie and every file's footer are cached from here on
        times = []
        for ks in keys:
            drop_row_groups()
            got = []
            times.append(_timed(lambda: got.append(t.lookup(ks))))
            assert got[0].num_rows >= len(ks)
        return times
    if op == "append_1k":
        batch = _rows(1_000, 99)
        times = []
        for _ in range(reps):
            t = _fresh(base / "big")
            times.append(_timed(lambda: t.append(batch)))
        return times
    if op in ("refresh", "optimize_quick"):
        times = []
        for _ in range(reps):
            t = _fresh(base / "stale")
            times.append(_timed(t.refresh if op == "refresh" else lambda: t.optimize(mode="quick")))
        return times
    raise SystemExit(f"unknown op {op}")


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


def _measure(code: Path, op: str, base: Path, reps: int, seed: int) -> tuple[float, float]:
    """The median wall-clock and the median CPU seconds of ``reps`` repetitions of ``op``
    in code version ``code``."""
    if op in ONE_PER_PROCESS:
        times = [json.loads(_run(code, "--worker", op, str(base), "--reps", "1", "--seed", str(seed)))[0]
                 for _ in range(reps)]
    else:
        times = json.loads(_run(code, "--worker", op, str(base), "--reps", str(reps), "--seed", str(seed)))
    return statistics.median(w for w, _ in times), statistics.median(c for _, c in times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--before", default="b3325a0", help="commit of the first layout (default b3325a0)")
    p.add_argument("--rounds", type=int, default=15, help="rounds per operation (default 15)")
    p.add_argument("--reps", type=int, default=7, help="timed repetitions per worker (default 7)")
    p.add_argument("--only", default=",".join(OPS))
    p.add_argument("--worker", metavar="OP", help=argparse.SUPPRESS)
    p.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--build", nargs=2, metavar=("KIND", "PATH"), help=argparse.SUPPRESS)
    p.add_argument("base", nargs="?", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, Path(args.base), args.reps, args.seed)))
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
    print(f"{args.rounds} rounds, before/after interleaved (order alternating); a round's figure is the median "
          f"of {args.reps} repetitions in one worker (open_1000_commits_first: of one in each of {args.reps} workers)")
    print("ms: median over the rounds (wall clock); after/before: median of the per-round ratios, min and max of "
          "them; cpu: the same median ratio of CPU time")
    print(f"{'operation':<24} {'before ms':>10} {'after ms':>10} {'after/before':>13} {'min':>6} {'max':>6} {'cpu':>6}")
    results = {}
    for op in ops:
        wall = {"before": [], "after": []}
        cpu = {"before": [], "after": []}
        ratios, cpu_ratios = [], []
        for r in range(args.rounds):
            order = ("before", "after") if r % 2 == 0 else ("after", "before")
            for label in order:
                w, c = _measure(versions[label], op, bases[label], args.reps, seed=1000 * r)
                wall[label].append(w)
                cpu[label].append(c)
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
