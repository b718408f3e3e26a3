"""Shared fixtures: one local Spark session per test run. Self-contained processes the run's
tests only wait for (each with its own Spark: the demo, a session without the connector, the
crash soaks, two concurrent applications, a killed stream), the standalone cluster and the
Connect server start at the run's first test, beside the tests before the ones that need
them, and only when the run includes those."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from standalone_cluster import cluster, cluster_app, cluster_started  # noqa: F401  (session fixtures: one cluster and one application on it for the run, started in the background)

# Spark's Python workers must run this interpreter (the virtual environment's), or
# they will not find the package.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
# Every JVM of the run (this session's, the Spark applications and the standalone cluster the
# tests start, their executors) compiles with C1 only: the suite runs thousands of short
# queries, and on a two-core machine C2's compiler threads take the cores from them (the
# Spark-heavy test files ran in about half the time), and it does not verify the bytecode of the
# classes it loads from jars (Spark's, mostly: a session's start and first statements took 10%
# less CPU). The benchmarks keep the JVM's default.
os.environ.setdefault("JAVA_TOOL_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:+UnlockDiagnosticVMOptions "
                                         "-XX:-BytecodeVerificationRemote")


SHARD_VARIABLE = "INDEXEDDF_TEST_SHARD"
"""``./dev.sh test`` runs the whole suite as two pytest processes side by side, this variable
telling each its half: ``spark``, the tests that use this process's Spark session (the
``spark`` fixture or mark), and ``other``, the rest (some start Spark applications of their own,
as a user's program would). Most of the run is Spark's, which leaves one of the two cores idle
much of the time; the other half runs on it. Unset: every test, in this one process."""
SHARD = os.environ.get(SHARD_VARIABLE, "")


def uses_the_session(item) -> bool:
    """Whether a test needs the run's Spark session in this process: it asks for the fixture, or
    is marked ``spark`` (a fixture may ask for the session late) and not ``spark_elsewhere``."""
    if "spark" in getattr(item, "fixturenames", ()):
        return True
    return item.get_closest_marker("spark") is not None and item.get_closest_marker("spark_elsewhere") is None


def pytest_collection_modifyitems(config, items):
    if SHARD not in ("spark", "other"):
        return
    keep = [item for item in items if uses_the_session(item) == (SHARD == "spark")]
    if len(keep) < len(items):
        kept = set(keep)
        config.hook.pytest_deselected(items=[item for item in items if item not in kept])
        items[:] = keep


@pytest.fixture(scope="session")
def spark():
    """A real local Spark session, started once for the whole run, with the JVM connector
    (``indexeddf.configure``): ``format("indexeddf")`` is the connector in every Spark test."""
    import indexeddf

    if SHARD == "other":  # one session a run: a test that asks for it late must say so
        pytest.fail("this test asked for the Spark session in the suite's half that has none: mark it "
                    "@pytest.mark.spark (or its fixture's parameter)")

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


HERE = Path(__file__).parent
EARLY = {
    # The README's demo on a small table (tests/test_demo.py; the README runs it at 3,000,000 rows).
    "demo_run": lambda folder: [sys.executable, "-m", "indexeddf.demo", str(folder / "lake"), "--rows", "100000"],
    # A session without the JVM connector (tests/test_connector.py).
    "fallback_run": lambda folder: [sys.executable, str(HERE / "workers" / "fallback_session.py"), str(folder)],
    # The crash soaks of tests/test_crash_soak.py, local and on S3, one after another.
    "crash_soaks": lambda folder: [sys.executable, str(HERE / "test_crash_soak.py"), str(folder)],
    # Two Spark applications appending to one table at once (tests/test_spark_source.py).
    "two_apps": lambda folder: [sys.executable, str(HERE / "test_spark_source.py"), str(folder)],
    # A streaming query killed with SIGKILL mid-stream (tests/test_spark_stream.py).
    "killed_stream_run": lambda folder: [sys.executable, str(HERE / "test_spark_stream.py"), str(folder)],
}
"""Self-contained processes (each its own Spark) that tests only wait for and check: the
fixture of each name gives the finished process and its folder."""


class _Early:
    """The processes of :data:`EARLY` that the run's tests ask for, run one after another in a
    thread from the run's first test on, beside the tests (which leave a core idle much of the
    time), one at a time so that they take no more than that core."""

    def __init__(self, names: list[str], folders: dict[str, Path]):
        self.folders, self.done = folders, {name: threading.Event() for name in names}
        self.procs: dict[str, subprocess.Popen] = {}
        self.stopped, self.lock = False, threading.Lock()  # no process starts once stop() ran
        threading.Thread(target=self._run, args=(names,), daemon=True).start()

    def _run(self, names: list[str]) -> None:
        for name in names:
            folder = self.folders[name]
            try:
                with self.lock:
                    if self.stopped:
                        continue
                    with open(folder / "stdout", "w") as out, open(folder / "stderr", "w") as err:
                        self.procs[name] = subprocess.Popen(EARLY[name](folder), stdout=out, stderr=err, text=True)
                self.procs[name].wait()
            finally:
                self.done[name].set()

    def finished(self, name: str) -> tuple[subprocess.CompletedProcess, Path]:
        """The process once it ended (exit code, stdout, stderr as text) and its folder."""
        assert self.done[name].wait(timeout=900), f"{name} did not end in 15 minutes"
        folder = self.folders[name]
        proc = self.procs[name]
        return subprocess.CompletedProcess(proc.args, proc.returncode, (folder / "stdout").read_text(),
                                           (folder / "stderr").read_text()), folder

    def stop(self) -> None:
        with self.lock:
            self.stopped = True
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.fixture(scope="session", autouse=True)
def early_processes(request, tmp_path_factory):
    """Starts the :data:`EARLY` processes the run's tests ask for at the run's first test."""
    names = []  # in the order the run's tests need them
    for item in request.session.items:
        names += [name for name in getattr(item, "fixturenames", ()) if name in EARLY and name not in names]
    early = _Early(names, {name: tmp_path_factory.mktemp(name) for name in names}) if names else None
    yield early
    if early is not None:
        early.stop()


@pytest.fixture(scope="session")
def demo_run(early_processes) -> tuple[subprocess.CompletedProcess, Path]:
    """``python -m indexeddf.demo LAKE --rows 100000``, finished; LAKE is ``folder / "lake"``."""
    return early_processes.finished("demo_run")


@pytest.fixture(scope="session")
def fallback_run(early_processes) -> tuple[subprocess.CompletedProcess, Path]:
    """``python tests/workers/fallback_session.py FOLDER``, finished."""
    return early_processes.finished("fallback_run")


@pytest.fixture(scope="session")
def crash_soaks(early_processes) -> tuple[subprocess.CompletedProcess, Path]:
    """``python tests/test_crash_soak.py FOLDER``, finished: a JSON line a soak."""
    return early_processes.finished("crash_soaks")


@pytest.fixture(scope="session")
def two_apps(early_processes) -> tuple[subprocess.CompletedProcess, Path]:
    """``python tests/test_spark_source.py FOLDER``, finished: one JSON line."""
    return early_processes.finished("two_apps")


@pytest.fixture(scope="session")
def killed_stream_run(early_processes) -> tuple[subprocess.CompletedProcess, Path]:
    """``python tests/test_spark_stream.py FOLDER``, finished: one JSON line."""
    return early_processes.finished("killed_stream_run")


@pytest.fixture(scope="session", autouse=True)
def connect_server_started(request, tmp_path_factory):
    """The Spark Connect server of tests/test_connect.py (``launch_server``), launched at the
    run's first test when the run includes a test that needs it, so that its JVM starts beside
    the tests before them; that module's ``server`` fixture waits for it and stops it. None
    when no test of the run needs it."""
    if not any("server" in getattr(item, "fixturenames", ()) and item.module.__name__ == "test_connect"
               for item in request.session.items):
        yield None
        return
    from test_connect import launch_server

    proc, port, log = launch_server(tmp_path_factory.mktemp("connect"))
    yield proc, port, log
    if proc.poll() is None:  # the module stops it; a run stopped before that module gets here
        proc.kill()
        proc.wait()
