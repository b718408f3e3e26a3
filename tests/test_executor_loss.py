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

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_a_write_survives_a_lost_executor(cluster_app, tmp_path):
    path = str(tmp_path / "t")
    rows = 40_000
    cluster_app.send(cmd="write", path=path, rows=rows, parts=8, pause=3, conf={"spark.sql.shuffle.partitions": "4"})
    cluster_app.wait_for("running", 60)
    deadline = time.monotonic() + 120
    while len(executors(cluster_app.worker_dir)) < 2:
        assert time.monotonic() < deadline, "no executors came up"
        time.sleep(0.2)
    time.sleep(4)  # the first tasks are sleeping inside their partitions
    victim = executors(cluster_app.worker_dir)[0]
    os.kill(victim, signal.SIGKILL)
    assert cluster_app.wait_for(("done", "failed"), 300) == "done 0", cluster_app.stderr()
    t = IndexedTable.for_path(path)
    ids = t.to_arrow(columns=["id"])["id"]
    assert len(ids) == rows and pc.count_distinct(ids).as_py() == rows  # every row exactly once
    assert sorted(t.lookup([0, 12_345, rows - 1])["id"].to_pylist()) == [0, 12_345, rows - 1]
    t.vacuum(retention_hours=0, enforce_retention=False)  # the killed attempts' files are orphans at most
    data = {str(p.relative_to(path)) for p in Path(path, "data").rglob("*.parquet")}
    assert data == {a.path for a in t.snapshot.live_files()}
