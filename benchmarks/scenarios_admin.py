"""Scenarios of table maintenance: lookups after many small appends, before and after
``optimize()``, against a table written at once with the same rows."""

from __future__ import annotations

import itertools
import shutil
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
from harness import Scenario

from indexeddf import IndexedTable

APPENDS = 1_000
ROWS_PER_APPEND = 100
BUCKETS = 16
KEYS_PER_LOOKUP = 10


def _batch(i: int) -> pa.Table:
    rng = np.random.default_rng(i)
    ids = np.arange(i * ROWS_PER_APPEND, (i + 1) * ROWS_PER_APPEND, dtype=np.int64)
    return pa.table({
        "user_id": pa.array(ids),
        "amount": pa.array(rng.random(ROWS_PER_APPEND) * 100),
        "event": pa.array(rng.choice(["click", "view", "buy"], ROWS_PER_APPEND)),
    })


def optimize_lookup(work: Path, args) -> Scenario:
    """Point lookups: fresh table vs 1,000 small appends, before and after optimize()."""
    fragmented = work / "admin_fragmented"
    t0 = time.perf_counter()
    t = IndexedTable.create(str(fragmented), _batch(0), index_columns=["user_id"], num_buckets=BUCKETS)
    for i in range(1, APPENDS):
        t.append(_batch(i))  # 100 rows hash into every one of the 16 buckets: 16 files each
    appended_s = time.perf_counter() - t0
    files_before = len(t.snapshot.files)
    index_files_before = len(t.snapshot.indexes["primary"].files)

    optimized_path = work / "admin_optimized"
    shutil.copytree(fragmented, optimized_path)
    optimized = IndexedTable.for_path(str(optimized_path))
    t0 = time.perf_counter()
    optimized.optimize(mode="quick")
    optimize_s = time.perf_counter() - t0
    files_after = len(optimized.snapshot.files)

    all_rows = pa.concat_tables([_batch(i) for i in range(APPENDS)])
    fresh = IndexedTable.create(str(work / "admin_fresh"), all_rows, index_columns=["user_id"], num_buckets=BUCKETS)

    rng = np.random.default_rng(7)
    n = APPENDS * ROWS_PER_APPEND
    key_sets = [rng.integers(0, n, KEYS_PER_LOOKUP).tolist() for _ in range(50)]
    for ks in key_sets[:1]:  # same answers everywhere
        want = sorted(fresh.lookup(ks).column("user_id").to_pylist())
        assert sorted(optimized.lookup(ks).column("user_id").to_pylist()) == want
        assert sorted(t.lookup(ks).column("user_id").to_pylist()) == want
    cycles = {name: itertools.cycle(key_sets) for name in ("fresh", "optimized", "fragmented")}
    return Scenario(
        name="optimize_lookup",
        description=(f"IndexedTable.lookup of {KEYS_PER_LOOKUP} keys (warm process) after {APPENDS:,} appends of "
                     f"{ROWS_PER_APPEND} rows into {BUCKETS} buckets, before and after optimize()"),
        baseline=("fresh table, same rows written at once (1 file per bucket)", lambda: fresh.lookup(next(cycles["fresh"]))),
        candidates=[
            (f"after optimize(): {files_after} data files", lambda: optimized.lookup(next(cycles["optimized"]))),
            (f"before optimize: {files_before} data files, {index_files_before} index files",
             lambda: t.lookup(next(cycles["fragmented"]))),
        ],
        target="after optimize() within 1.2x of the fresh table",
        notes=[f"Set-up: {APPENDS:,} appends took {appended_s:.1f} s; optimize(mode='quick') of {files_before:,} "
               f"files into {files_after} took {optimize_s:.1f} s."],
    )


SCENARIOS = {"optimize_lookup": optimize_lookup}
