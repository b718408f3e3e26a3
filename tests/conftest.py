"""Shared fixtures: one local Spark session per test run."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from standalone_cluster import cluster, cluster_app, cluster_started  # noqa: F401  (session fixtures: one cluster and one application on it for the run, started in the background)

# Spark's Python workers must run this interpreter (the virtual environment's), or
# they will not find the package.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
# Every JVM of the run (this session's, the Spark applications and the standalone cluster the
# tests start, their executors) compiles with C1 only: the suite runs thousands of short
# queries, and on a two-core machine C2's compiler threads take the cores from them (the
# Spark-heavy test files ran in about half the time). The benchmarks keep the JVM's default.
os.environ.setdefault("JAVA_TOOL_OPTIONS", "-XX:TieredStopAtLevel=1")


@pytest.fixture(scope="session")
def spark():
    """A real local Spark session, started once for the whole run, with the JVM connector
    (``indexeddf.configure``): ``format("indexeddf")`` is the connector in every Spark test."""
    import indexeddf

    session = indexeddf.local_session("indexeddf-tests", conf={
        "spark.default.parallelism": "2", "spark.sql.execution.arrow.pyspark.enabled": "true"})
    yield session
    session.stop()


@pytest.fixture
def table_path(tmp_path):
    """A fresh local folder path for a table."""
    return str(tmp_path / "table")


@pytest.fixture
def conf(spark):
    """Sets Spark confs for one test: ``conf(key, value)``; unset again after it."""
    changed = []

    def set_(key, value):
        changed.append(key)
        spark.conf.set(key, value)

    yield set_
    for key in changed:
        spark.conf.unset(key)


@pytest.fixture
def sql(spark):
    """SQL typed as a user types it, on the session with the connector: ``sql(statement)`` is
    the statement's rows as dicts; an indexeddf error it fails with is raised again as the
    typed Python error. ``sql.columns``: the (name, type)s of the last statement's result (a
    statement runs once: Spark runs a command when it is parsed). Catalog entries made by
    ``CREATE TABLE`` are dropped afterwards."""
    import indexeddf

    assert indexeddf.register(spark) == indexeddf.spark.CONNECTOR
    made = []

    def run(statement: str) -> list[dict]:
        if statement.upper().startswith("CREATE TABLE"):
            made.append(statement.split()[2])
        try:
            frame = spark.sql(statement)
            run.columns = [(f.name, f.dataType.simpleString()) for f in frame.schema]
            return [r.asDict(recursive=True) for r in frame.collect()]
        except Exception as e:  # noqa: BLE001 - the typed error the statement failed with
            typed = indexeddf.spark.typed_error(e)
            if typed is None:
                raise
            raise typed from None

    run.columns = []
    yield run
    for name in made:
        spark.sql(f"DROP TABLE IF EXISTS {name}")


DEMO_ROWS = 100_000
"""The rows of the demo's table in tests/test_demo.py (the README runs it at 3,000,000)."""


@pytest.fixture(scope="session", autouse=True)
def demo_started(request, tmp_path_factory):
    """The README's demo as a process of its own (its own Spark), started at the run's first
    test when some test of the run asks for :func:`demo_run`, so that it runs beside the
    tests before that one (which leave a core idle much of the time) instead of alone."""
    if not any("demo_run" in getattr(item, "fixturenames", ()) for item in request.session.items):
        yield None
        return
    folder = tmp_path_factory.mktemp("demo")
    with open(folder / "stdout", "w") as out, open(folder / "stderr", "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "indexeddf.demo", str(folder / "lake"), "--rows",
                                 str(DEMO_ROWS)], stdout=out, stderr=err, text=True)
    yield folder, proc
    if proc.poll() is None:
        proc.kill()
    proc.wait()


@pytest.fixture(scope="session")
def demo_run(demo_started) -> tuple[subprocess.CompletedProcess, str]:
    """The finished demo process (exit code, stdout, stderr) and the folder of its lake."""
    folder, proc = demo_started
    proc.wait(timeout=600)
    done = subprocess.CompletedProcess(proc.args, proc.returncode, (folder / "stdout").read_text(),
                                       (folder / "stderr").read_text())
    return done, str(folder / "lake")
