"""Real concurrent processes against one table: nothing lost, nothing half-committed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

from indexeddf import IndexedTable
from indexeddf.format.log import list_log

WORKER = str(Path(__file__).parent / "workers" / "append_loop.py")
pytestmark = pytest.mark.slow


def empty_table(path: str) -> IndexedTable:
    schema = pa.schema([("k", pa.int64()), ("worker", pa.int32())])
    return IndexedTable.create(path, schema.empty_table(), index_columns=["k"], num_buckets=4)


def test_four_processes_appending_lose_nothing(table_path):
    empty_table(table_path)
    procs = [
        subprocess.Popen([sys.executable, WORKER, table_path, str(w), "25", "10"], stdout=subprocess.PIPE, text=True)
        for w in range(4)
    ]
    outputs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0]
    versions = sorted(int(v) for out in outputs for v in out.split())
    assert versions == list(range(1, 101))  # every commit got its own version, no gap
    table = IndexedTable.for_path(table_path)
    assert table.version == 100
    keys = Counter(table.to_arrow(columns=["k"]).column("k").to_pylist())
    expected = {w * 1_000_000 + i * 1_000 + r for w in range(4) for i in range(25) for r in range(10)}
    assert set(keys) == expected and set(keys.values()) == {1}
    assert list_log(table.snapshot.storage)[0] == list(range(101))


def test_sigkill_during_appends_leaves_a_readable_table(table_path):
    empty_table(table_path)
    for round_ in range(3):
        proc = subprocess.Popen(
            [sys.executable, WORKER, table_path, str(round_ + 1), "1000", "200"],
            stdout=subprocess.PIPE, text=True,
        )
        proc.stdout.readline()  # at least one commit landed
        time.sleep(0.05 + 0.1 * round_)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    table = IndexedTable.for_path(table_path)
    assert table.version >= 3
    for v in range(table.version + 1):
        data = table.to_arrow(version=v)
        keys = data.column("k").to_pylist()
        assert len(keys) == len(set(keys))
        # Whole appends only: every (worker, append) group has all of its 200 rows.
        groups = Counter(k // 1_000 for k in keys)
        assert set(groups.values()) <= {200}
    # The table still takes writes after the crashes.
    assert table.append(pa.table({"k": pa.array([7], pa.int64()), "worker": pa.array([0], pa.int32())})) == table.version
