"""Scenarios of the format core: append latency and opening a long log."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from harness import Scenario

from indexeddf import IndexedTable
from indexeddf.format.log import read_commit
from indexeddf.format.snapshot import initial_snapshot
from indexeddf.format.storage import TableStorage


def _rows(n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table(
        {
            "user_id": pa.array(rng.integers(0, 1_000_000, n), pa.int64()),
            "amount": pa.array(rng.random(n) * 100),
            "event": pa.array(rng.choice(["click", "view", "buy"], n)),
        }
    )


def append_api(work: Path, args) -> Scenario:
    """A 1,000-row append through IndexedTable.append, commit included."""
    path = work / "append_api"
    table = IndexedTable.create(str(path), _rows(10_000, 0), index_columns=["user_id"], num_buckets=16)
    batch = _rows(1_000, 1)
    raw = work / "raw.parquet"
    return Scenario(
        name="append_1k_python",
        description="append 1,000 rows (16 buckets) via IndexedTable.append, commit included",
        baseline=("pyarrow.parquet.write_table of the same rows to one local file", lambda: pq.write_table(batch, raw)),
        candidates=[("IndexedTable.append", lambda: table.append(batch))],
        target="median under 50 ms",
    )


def open_long_log(work: Path, args) -> Scenario:
    """Open a table with 1,000 commits: checkpoint + tail against replaying every commit."""
    path = work / "open_long_log"
    table = IndexedTable.create(str(path), _rows(100, 0), index_columns=["user_id"], num_buckets=16)
    batch = _rows(16, 2)
    t0 = time.perf_counter()
    while table.version < 1_000:
        table.append(batch)
    setup = time.perf_counter() - t0
    storage = TableStorage(str(path))

    def replay_all():
        snap = initial_snapshot(storage, read_commit(storage, 0))
        for v in range(1, 1_001):
            snap = snap.apply(v, read_commit(storage, v))
        return snap

    return Scenario(
        name="open_1000_commits",
        description=f"open a table with 1,000 commits and {len(table.snapshot.files)} live files",
        baseline=("replay of all 1,001 JSON commits (no checkpoint)", replay_all),
        candidates=[("IndexedTable.for_path (checkpoint + tail)", lambda: IndexedTable.for_path(str(path)))],
        target="under 0.5 s",
        notes=[f"Set-up (1,000 appends of 16 rows) took {setup:.1f} s."],
    )


SCENARIOS = {"append_1k_python": append_api, "open_1000_commits": open_long_log}


def workdir() -> Path:
    """A fresh scratch folder for the scenarios' tables."""
    return Path(tempfile.mkdtemp(prefix="indexeddf-bench-"))


def cleanup(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
