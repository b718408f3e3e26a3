"""A standalone Spark cluster on loopback for tests that need executors in their own JVMs:
a master and two one-core workers launched with pyspark's own ``bin/spark-class`` (a plain
module beside the tests; ``conftest.py`` makes :func:`cluster` a session fixture, so one
cluster serves every test that asks for it)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from s3_endpoint import free_port


def spark_home() -> Path:
    """The Spark that pyspark ships (its ``bin/`` and ``jars/``)."""
    import pyspark

    return Path(pyspark.__file__).parent


def executors(worker_dir: str | None = None) -> list[int]:
    """Pids of the executor JVMs running on this machine; with ``worker_dir`` (the
    cluster's ``SPARK_WORKER_DIR``), only that cluster's (a worker starts each executor
    in a folder below it), never another cluster's on the same machine."""
    # pgrep reads /proc: ps would cut the JVM's long command line before the class name
    out = subprocess.run(["pgrep", "-f", "CoarseGrainedExecutorBackend"], capture_output=True, text=True).stdout
    pids = [int(pid) for pid in out.split()]
    if worker_dir is None:
        return pids
    mine = []
    for pid in pids:
        try:
            if os.readlink(f"/proc/{pid}/cwd").startswith(os.path.realpath(worker_dir) + os.sep):
                mine.append(pid)
        except OSError:  # gone meanwhile, or not ours to inspect
            continue
    return mine


@contextlib.contextmanager
def standalone(folder: Path, workers: int = 2, cores: int = 1, memory: str = "1g"):
    """A master and ``workers`` workers of ``cores`` cores each, started with pyspark's own
    ``bin/spark-class`` on loopback (logs in ``folder``); yields the master's URL, the
    environment its applications run with, and the workers' processes. Stopped on exit."""
    home = spark_home()
    env = dict(os.environ, SPARK_HOME=str(home), SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable,
               SPARK_WORKER_DIR=str(folder / "work"))
    port = free_port()
    spark_class = str(home / "bin" / "spark-class")
    procs = [subprocess.Popen([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                               "--port", str(port), "--webui-port", str(free_port())],
                              stdout=open(folder / "master.log", "w"), stderr=subprocess.STDOUT, env=env)]
    url = f"spark://127.0.0.1:{port}"
    for i in range(workers):
        procs.append(subprocess.Popen([spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                                       "--cores", str(cores), "--memory", memory, "--webui-port", str(free_port()),
                                       url],
                                      stdout=open(folder / f"worker{i}.log", "w"), stderr=subprocess.STDOUT, env=env))
    try:
        deadline = time.monotonic() + 120
        while (folder / "master.log").read_text().count("Registering worker") < workers:
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                raise RuntimeError("the standalone cluster did not start:\n" + (folder / "master.log").read_text()[-2000:])
            time.sleep(0.5)
        yield url, env, procs[1:]
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    """The cluster's master URL, and the environment its applications (driver processes) run with."""
    with standalone(tmp_path_factory.mktemp("cluster")) as (url, env, _):
        yield url, env
