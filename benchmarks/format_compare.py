"""Before / after the Delta log (issue 12): the same operations, timed on the first
layout (``_indexeddf_log``, the code of commit ``--before``) and on the Delta layout
(this tree), interleaved round by round in one run.

    .venv/bin/python benchmarks/format_compare.py --rounds 7

Each code version runs in its own worker processes (two versions of one package cannot
share a process); a worker times the operation itself (``time.perf_counter`` around
the call; interpreter start and set-up are not counted) and prints the figure. Tables
are built once per version from identical rows under ``benchmarks/data/format_compare/``
and copied before each mutating round. Ratios are after / before, median of the
per-round ratios (above 1: the Delta layout is slower).
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


def _copy(src: Path) -> Path:
    dst = src.parent / (src.name + ".work")
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    return dst


def worker(op: str, base: Path) -> float:
    """Seconds the operation took, timed here."""
    import pyarrow as pa

    from indexeddf import IndexedTable

    if op == "open_1000_commits":
        t0 = time.perf_counter()
        IndexedTable.for_path(str(base / "long"))
        return time.perf_counter() - t0
    if op in ("lookup_1", "lookup_1000"):
        t = IndexedTable.for_path(str(base / "big"))
        n = 1 if op == "lookup_1" else 1000
        keys = pa.array(list(range(7, 7 + 97 * n, 97)), pa.int64())
        t.lookup(pa.array([3], pa.int64()))  # warm: the first lookup loads what the process caches
        t0 = time.perf_counter()
        got = t.lookup(keys)
        took = time.perf_counter() - t0
        assert got.num_rows > 0
        return took
    if op == "append_1k":
        t = IndexedTable.for_path(str(_copy(base / "big")))
        batch = _rows(1_000, 99)
        t0 = time.perf_counter()
        t.append(batch)
        return time.perf_counter() - t0
    if op == "refresh":
        t = IndexedTable.for_path(str(_copy(base / "stale")))
        t0 = time.perf_counter()
        t.refresh()
        return time.perf_counter() - t0
    if op == "optimize_quick":
        t = IndexedTable.for_path(str(_copy(base / "stale")))
        t0 = time.perf_counter()
        t.optimize(mode="quick")
        return time.perf_counter() - t0
    raise SystemExit(f"unknown op {op}")


OPS = ["open_1000_commits", "append_1k", "lookup_1", "lookup_1000", "refresh", "optimize_quick"]

# -- the driver ----------------------------------------------------------------------------


def _tree(before: str) -> Path:
    """A checkout of ``before`` (git worktree) under benchmarks/data."""
    path = DATA / f"code-{before[:12]}"
    if not (path / "indexeddf").exists():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), before], check=True,
                       capture_output=True)
    return path


def _run(code: Path, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(code)}
    out = subprocess.run([sys.executable, str(HERE / "format_compare.py"), *args], env=env, check=True,
                         capture_output=True, text=True, cwd=str(code))
    return out.stdout.strip().splitlines()[-1]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--before", default="b3325a0", help="commit of the first layout (default b3325a0)")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--only", default=",".join(OPS))
    p.add_argument("--worker", nargs=2, metavar=("OP", "BASE"), help=argparse.SUPPRESS)
    p.add_argument("--build", nargs=2, metavar=("KIND", "PATH"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        print(worker(args.worker[0], Path(args.worker[1])))
        return
    if args.build:
        _build(args.build[0], Path(args.build[1]))
        print("built")
        return
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

    print(f"before: {args.before} (_indexeddf_log); after: {subprocess.run(['git', '-C', str(ROOT), 'rev-parse', '--short', 'HEAD'], capture_output=True, text=True).stdout.strip()} (_delta_log), indexeddf {indexeddf.__version__}")
    print(f"{ROWS:,} rows in {BUCKETS} buckets (lookups, append); 1,000 commits (open); 10 unindexed appends (refresh, optimize)")
    print(f"{'operation':<20} {'before ms':>10} {'after ms':>10} {'after/before':>13}")
    results = {}
    for op in args.only.split(","):
        times = {"before": [], "after": []}
        ratios = []
        for _ in range(args.rounds):
            pair = {}
            for label in ("before", "after"):
                pair[label] = float(_run(versions[label], "--worker", op, str(bases[label])))
                times[label].append(pair[label])
            ratios.append(pair["after"] / pair["before"])
        b, a = statistics.median(times["before"]) * 1000, statistics.median(times["after"]) * 1000
        results[op] = {"before_ms": b, "after_ms": a, "ratio": statistics.median(ratios)}
        print(f"{op:<20} {b:>10.1f} {a:>10.1f} {statistics.median(ratios):>12.2f}x", flush=True)
    out = HERE / "results" / "format_compare.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
