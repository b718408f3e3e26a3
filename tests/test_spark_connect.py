"""Spark Connect: a Connect client (no JVM in its process) reads, writes, looks up and
joins through a real Connect server started from pyspark's own jars on loopback. The
client runs in its own process: a Connect session switches pyspark to Connect mode for
the whole process, which would turn this test run's classic session against itself."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from s3_endpoint import free_port

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture(scope="module")
def connect(tmp_path_factory):
    import pyspark

    from indexeddf.spark.connector import EXTENSIONS, build_jar

    jar = build_jar()  # the server owns format("indexeddf") through the JVM connector
    home = Path(pyspark.__file__).parent
    port = free_port()
    log = tmp_path_factory.mktemp("connect") / "server.log"
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_HOME=str(home))
    with open(log, "w") as out:
        server = subprocess.Popen(
            [str(home / "bin" / "spark-submit"), "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
             "--master", "local[2]", "--jars", str(jar), "--conf", f"spark.sql.extensions={EXTENSIONS}", "--conf", f"spark.connect.grpc.binding.port={port}",
             "--conf", "spark.connect.grpc.binding.address=127.0.0.1", "--conf", "spark.ui.enabled=false",
             "--conf", "spark.sql.session.timeZone=UTC", "spark-internal"],
            stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + 180
        while "Spark Connect server started" not in log.read_text():
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the Connect server did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}"
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()


def test_a_connect_client_reads_writes_looks_up_and_joins(connect, tmp_path):
    done = subprocess.run([sys.executable, str(Path(__file__).parent / "workers" / "connect_client.py"), connect,
                           str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-4000:])
    assert "connect client: all checks passed" in done.stdout
