"""A standalone Spark cluster on loopback for tests that need executors in their own JVMs:
a master and two one-core workers launched with pyspark's own ``bin/spark-class`` (a plain
module beside the tests; ``conftest.py`` makes :func:`cluster` a session fixture, so one
cluster serves every test that asks for it), and :func:`cluster_app`, the one Spark application
on it that those tests send their work to. Both start in the background at the run's first
test when any test of the run needs them (:func:`cluster_started`)."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
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


def children() -> dict[int, list[int]]:
    """Every process's children, by parent id (from ``/proc``)."""
    out: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                ppid = int(Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            out.setdefault(ppid, []).append(int(d))
    return out


def descendants(pid: int, kids: dict[int, list[int]]) -> list[int]:
    """Every process under ``pid`` (an executor's Python daemon and workers)."""
    out, todo = [], list(kids.get(pid, []))
    while todo:
        p = todo.pop()
        out.append(p)
        todo += kids.get(p, [])
    return out


def file_open_under(path: str, executor: int, kids: dict[int, list[int]]) -> str | None:
    """A file below ``path`` (a table) that a process under ``executor`` (its Python
    workers) has open, relative to ``path``: the executor is running one of the table's tasks."""
    root = os.path.realpath(path) + os.sep
    for pid in descendants(executor, kids):
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith(root):
                    return target[len(root):]
        except OSError:
            continue
    return None


def kill_an_executor_mid_task(path: str, worker_dir: str, patience: float, started, whole_tree: bool = False,
                              timeout: float = 240) -> str | None:
    """SIGKILL the executor of the cluster at ``worker_dir`` whose task has a file of the
    table at ``path`` open (its attempt is lost part way) and return that file; ``patience``
    seconds after ``started()`` (a callable: has the job begun writing?) first holds with no
    such moment seen, SIGKILL one executor anyway (None). ``whole_tree``: its Python workers
    too, as when its machine is lost (else they end when they next talk to the dead JVM)."""
    first = None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        kids = children()
        running = executors(worker_dir)
        for pid in running:
            file = file_open_under(path, pid, kids)
            if file is not None:
                _kill(pid, kids, whole_tree)
                return file
        if first is None and started():
            first = time.monotonic()
        if first is not None and time.monotonic() - first >= patience and running:
            _kill(running[0], kids, whole_tree)
            return None
        time.sleep(0.01)
    raise AssertionError("no task of the job opened a file of the table in time")


def _kill(executor: int, kids: dict[int, list[int]], whole_tree: bool) -> None:
    """SIGKILL ``executor`` (with ``whole_tree``, its Python workers too); one already gone is skipped."""
    for victim in [executor] + (descendants(executor, kids) if whole_tree else []):
        with contextlib.suppress(ProcessLookupError):
            os.kill(victim, signal.SIGKILL)


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


class _Started:
    """The cluster and its application, started in a thread while the run's first tests run:
    its JVMs take about 15 s to come up, mostly waiting and single-threaded start-up, which
    the tests before the first one that needs them (on a two-core machine, often one core
    busy) leave room for."""

    def __init__(self, folder: Path):
        self.folder, self.value, self.error = folder, None, None
        self.stack = contextlib.ExitStack()
        self.done = threading.Event()
        threading.Thread(target=self._start, daemon=True).start()

    def _start(self) -> None:
        try:
            url, env, _ = self.stack.enter_context(standalone(self.folder / "cluster"))
            app = ClusterApp(url, env, self.folder)
            self.stack.callback(app.close)
            self.value = (url, env, app)
        except BaseException as e:  # raised again in the test that asks for the cluster
            self.error = e
        finally:
            self.done.set()

    def get(self) -> tuple[str, dict, ClusterApp]:
        self.done.wait()
        if self.error is not None:
            raise self.error
        return self.value

    def close(self) -> None:
        self.done.wait()
        self.stack.close()


@pytest.fixture(scope="session", autouse=True)
def cluster_started(request, tmp_path_factory):
    """Starts the cluster and its application in the background at the run's first test, when
    some test of the run asks for :func:`cluster_app` (None otherwise); stops them at the end."""
    needed = any("cluster_app" in getattr(item, "fixturenames", ()) for item in request.session.items)
    if not needed:
        yield None
        return
    folder = tmp_path_factory.mktemp("cluster")
    (folder / "cluster").mkdir()
    started = _Started(folder)
    yield started
    started.close()


@pytest.fixture(scope="session")
def cluster(cluster_started):
    """The cluster's master URL, and the environment its applications (driver processes) run with."""
    url, env, _ = cluster_started.get()
    return url, env


class Lines:
    """A process's stdout lines, read by a thread so that a wait can time out."""

    def __init__(self, stream):
        self.q: queue.Queue = queue.Queue()
        threading.Thread(target=lambda: [self.q.put(line) for line in stream], daemon=True).start()

    def wait_for(self, prefix: str | tuple[str, ...], timeout: float) -> str:
        """The next line that starts with ``prefix`` (the lines before it are dropped)."""
        deadline = time.monotonic() + timeout
        while True:
            line = self.q.get(timeout=max(0.1, deadline - time.monotonic())).strip()
            if line.startswith(prefix):
                return line


class ClusterApp:
    """The one Spark application of the run on the cluster (``workers/cluster_app.py``): the
    tests send it commands and read its answers."""

    def __init__(self, url: str, env: dict, folder: Path):
        self.url, self.env, self.worker_dir = url, env, env["SPARK_WORKER_DIR"]
        self.err_path = folder / "driver.err"
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).parent / "workers" / "cluster_app.py"), url],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(self.err_path, "w"),
                                     text=True, env=env)
        self.out = Lines(self.proc.stdout)
        self.out.wait_for("ready", 180)

    def send(self, **cmd) -> None:
        """Start a command (``workers/cluster_app.py`` lists them); read its answer with :meth:`wait_for`."""
        assert self.proc.poll() is None, self.stderr()
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()

    def wait_for(self, prefix: str | tuple[str, ...], timeout: float) -> str:
        try:
            return self.out.wait_for(prefix, timeout)
        except queue.Empty:
            raise AssertionError(f"the cluster application gave no {prefix!r} in {timeout} s:\n{self.stderr()}")

    def stderr(self) -> str:
        return self.err_path.read_text()[-3000:]

    def close(self) -> None:
        try:
            self.send(cmd="quit")
            self.proc.stdin.close()
            self.proc.wait(timeout=60)
        except (AssertionError, OSError, subprocess.TimeoutExpired):
            self.proc.kill()


@pytest.fixture(scope="session")
def cluster_app(cluster_started):
    """One Spark application on the cluster (started with it, see :func:`cluster_started`), for
    every test of the run that needs executors in their own JVMs (lookups on executors,
    executors killed mid-write)."""
    return cluster_started.get()[2]
