"""A write survives the loss of an executor: a standalone Spark cluster (master and two
workers launched with pyspark's own bin/spark-class on loopback), one executor
SIGKILLed while the write's tasks run. Spark reruns its tasks elsewhere; the table
must hold every row exactly once, and the killed attempts' files must be orphans that
vacuum removes, never rows."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.compute as pc
import pytest

from indexeddf import IndexedTable

from s3_endpoint import free_port

pytestmark = [pytest.mark.spark, pytest.mark.slow]
WORKER = str(Path(__file__).parent / "workers" / "cluster_write.py")


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def executors() -> list[int]:
    """Pids of the executor JVMs running on this machine."""
    # pgrep reads /proc: ps would cut the JVM's long command line before the class name
    out = subprocess.run(["pgrep", "-f", "CoarseGrainedExecutorBackend"], capture_output=True, text=True).stdout
    return [int(pid) for pid in out.split()]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    home = spark_home()
    logs = tmp_path_factory.mktemp("cluster")
    env = dict(os.environ, SPARK_HOME=str(home), SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable,
               SPARK_WORKER_DIR=str(logs / "work"))
    port = free_port()
    spark_class = str(home / "bin" / "spark-class")
    procs = [subprocess.Popen([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                               "--port", str(port), "--webui-port", str(free_port())],
                              stdout=open(logs / "master.log", "w"), stderr=subprocess.STDOUT, env=env)]
    url = f"spark://127.0.0.1:{port}"
    for i in range(2):
        procs.append(subprocess.Popen([spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                                       "--cores", "1", "--memory", "1g", "--webui-port", str(free_port()), url],
                                      stdout=open(logs / f"worker{i}.log", "w"), stderr=subprocess.STDOUT, env=env))
    try:
        deadline = time.monotonic() + 120
        while (logs / "master.log").read_text().count("Registering worker") < 2:
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                raise RuntimeError("the standalone cluster did not start:\n" + (logs / "master.log").read_text()[-2000:])
            time.sleep(0.5)
        yield url, env
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()


def test_a_write_survives_a_lost_executor(cluster, tmp_path):
    url, env = cluster
    path = str(tmp_path / "t")
    rows = 40_000
    driver = subprocess.Popen([sys.executable, WORKER, url, path, str(rows), "8", "3"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env)
    assert driver.stdout.readline().strip() == "writing"
    deadline = time.monotonic() + 120
    while len(executors()) < 2:
        assert time.monotonic() < deadline, "no executors came up"
        time.sleep(0.2)
    time.sleep(4)  # the first tasks are sleeping inside their partitions
    victim = executors()[0]
    os.kill(victim, signal.SIGKILL)
    out, err = driver.communicate(timeout=300)
    assert driver.returncode == 0, err[-3000:]
    assert "committed 0" in out
    t = IndexedTable.for_path(path)
    ids = t.to_arrow(columns=["id"])["id"]
    assert len(ids) == rows and pc.count_distinct(ids).as_py() == rows  # every row exactly once
    assert sorted(t.lookup([0, 12_345, rows - 1])["id"].to_pylist()) == [0, 12_345, rows - 1]
    t.vacuum(retention_hours=0, enforce_retention=False)  # the killed attempts' files are orphans at most
    data = {str(p.relative_to(path)) for p in Path(path, "data").rglob("*.parquet")}
    assert data == {a.path for a in t.snapshot.live_files()}
