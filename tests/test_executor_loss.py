"""A write survives the loss of an executor: a standalone Spark cluster (master and two
workers launched with pyspark's own bin/spark-class on loopback; the run's application on
it, ``workers/cluster_app.py``), one executor SIGKILLed while the write's tasks run. Spark
reruns its tasks elsewhere; the table must hold every row exactly once, and the killed
attempts' files must be orphans that vacuum removes, never rows."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pyarrow.compute as pc
import pytest
from standalone_cluster import executors

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
