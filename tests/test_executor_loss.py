"""Writes and maintenance survive the loss of an executor: a standalone Spark cluster (master
and two workers launched with pyspark's own bin/spark-class on loopback; the run's application
on it, ``workers/cluster_app.py``), one executor SIGKILLed while the job's tasks run. Spark
reruns its tasks elsewhere; the table must hold every row exactly once, an index build or an
optimize must commit what it commits without the loss (or nothing), and the killed attempts'
files must be orphans that vacuum removes, never rows or index entries."""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from oracles import duckdb_delta
from standalone_cluster import executors, kill_an_executor_mid_task
from test_spark_maintenance import entries

from indexeddf import IndexedTable

pytestmark = [pytest.mark.spark, pytest.mark.spark_elsewhere, pytest.mark.slow]  # the cluster's application


def _executor_of(pid: int, candidates: list[int]) -> int | None:
    """The executor JVM among ``candidates`` that ``pid`` (a task's Python worker) runs under."""
    while pid > 1:
        if pid in candidates:
            return pid
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):  # gone meanwhile
            return None
    return None


def test_a_write_survives_a_lost_executor(cluster_app, tmp_path):
    path, started = str(tmp_path / "t"), tmp_path / "started"
    started.mkdir()
    rows = 40_000
    # Four parts of 2 s on two one-core executors: the kill lands inside a task's sleep (the
    # first task's file says it is there), with more tasks to run after it.
    cluster_app.send(cmd="write", path=path, rows=rows, parts=4, pause=2, started=str(started),
                     conf={"spark.sql.shuffle.partitions": "4"})
    cluster_app.wait_for("running", 60)
    deadline = time.monotonic() + 120
    while not any(started.iterdir()):
        assert time.monotonic() < deadline, "no task started"
        time.sleep(0.02)
    running = executors(cluster_app.worker_dir)
    marker = next(started.iterdir()).name
    victim = _executor_of(int(marker.split("-")[0]), running) or running[0]
    os.kill(victim, signal.SIGKILL)
    assert cluster_app.wait_for(("done", "failed"), 300) == "done 0", cluster_app.stderr()
    t = IndexedTable.for_path(path)
    ids = t.to_arrow(columns=["id"])["id"]
    assert len(ids) == rows and pc.count_distinct(ids).as_py() == rows  # every row exactly once
    assert sorted(t.lookup([0, 12_345, rows - 1])["id"].to_pylist()) == [0, 12_345, rows - 1]
    t.vacuum(retention_hours=0, enforce_retention=False)  # the killed attempts' files are orphans at most
    data = {str(p.relative_to(path)) for p in Path(path, "data").rglob("*.parquet")}
    assert data == {a.path for a in t.snapshot.live_files()}


def _table(path: str, rows: int) -> IndexedTable:
    """k bigint, v bigint, s a string of 64 characters; eight buckets, four writes (a file a
    bucket each), the primary index on k: enough rows that each of the two tasks of a build
    or an optimize reads files for a while on its one-core executor."""
    t = None
    for start in range(0, rows, rows // 4):
        ks = range(start, start + rows // 4)
        data = pa.table({"k": pa.array(ks, pa.int64()), "v": pa.array([k % 97 for k in ks], pa.int64()),
                         "s": pa.array([f"{k * 7919 % rows:064d}" for k in ks])})
        if t is None:
            t = IndexedTable.create(path, data, ["k"], num_buckets=8)
        else:
            t.append(data)
    return t


def _index_files_on_disk(path: str) -> set[str]:
    root = Path(path, "_indexes")
    return {str(p.relative_to(path)) for p in root.rglob("*.parquet") if not str(p.relative_to(root)).startswith("_")}


def _lookups_match_duckdb(t: IndexedTable, rows: int) -> None:
    keys = [0, 4_321, rows - 1]
    strings = [f"{k * 7919 % rows:064d}" for k in keys]
    for column, values, index in (("k", keys, None), ("s", strings, "by_s")):
        listed = ", ".join(repr(v) for v in values)
        want = sorted(duckdb_delta().execute(
            f"SELECT k, v, s FROM delta_scan('{t.path}') WHERE {column} IN ({listed})").fetchall())
        got = t.lookup(values, columns=["k", "v", "s"], index=index)
        assert want and sorted(zip(*(got.column(c).to_pylist() for c in ("k", "v", "s")))) == want


@pytest.mark.parametrize("op", ["create_index", "optimize"])
def test_maintenance_survives_a_lost_executor(cluster_app, tmp_path, op):
    """``create_index("by_s", ["s"], spark=)`` and ``optimize(mode="full", spark=)`` on the
    cluster, an executor and its Python workers SIGKILLed (a lost machine) while its task has
    a file of the table open: the operation commits once, with the index entries the single
    process writes (optimize: the same rows, a file a bucket, both indexes answering as
    DuckDB does), or fails and commits nothing; vacuum then leaves only what the log names."""
    rows = 800_000
    path = str(tmp_path / "t")
    t = _table(path, rows)
    if op == "optimize":
        t.create_index("by_s", ["s"])
    before, version = sorted(t.to_arrow(columns=["k", "v", "s"]).to_pylist(), key=lambda r: r["k"]), t.version
    shutil.copytree(path, tmp_path / "single")
    single = IndexedTable.for_path(str(tmp_path / "single"))
    single.create_index("by_s", ["s"]) if op == "create_index" else single.optimize(mode="full")
    indexes = _index_files_on_disk(path)

    cluster_app.send(cmd="maintain", path=path, op=op)
    cluster_app.wait_for("running", 60)
    lost = kill_an_executor_mid_task(path, cluster_app.worker_dir, 5, lambda: _index_files_on_disk(path) != indexes,
                                     whole_tree=True)
    line = cluster_app.wait_for(("done", "failed"), 300)
    now = IndexedTable.for_path(path)
    assert line.startswith("done"), (lost, line, cluster_app.stderr())  # Spark reran the lost tasks
    assert now.version > version
    assert sorted(now.to_arrow(columns=["k", "v", "s"]).to_pylist(), key=lambda r: r["k"]) == before
    if op == "create_index":
        assert now.snapshot.indexes["by_s"].state == "ACTIVE"
        assert entries(now, "by_s") == entries(single, "by_s")
    else:
        assert sorted(a.bucket for a in now.snapshot.live_files()) == list(range(8))
        for name in ("primary", "by_s"):
            assert len(entries(now, name)) == rows
    _lookups_match_duckdb(now, rows)
    now.vacuum(retention_hours=0, enforce_retention=False)
    named = {f.path for e in now.snapshot.indexes.values() for f in e.files}
    assert _index_files_on_disk(path) == named  # the lost attempt's index files were orphans
    data = {str(p.relative_to(path)) for p in Path(path, "data").rglob("*.parquet")}
    assert data == {a.path for a in now.snapshot.live_files()}
    print(f"lost attempt's open file: {lost}")
