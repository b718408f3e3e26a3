"""A change Spark planned, killed or failing part way: it leaves its commit or none, and
what it wrote and never committed is removed by ``abort`` or, when the process died, by
``vacuum``; what it committed is never removed.

The Spark side runs in real processes: an executor SIGKILLed in the middle of a MERGE on the
standalone cluster (Spark reruns the lost tasks; the lost attempts' files
become orphans), and a driver SIGKILLed while its tasks write (the table stays at its
version for indexeddf, delta-rs and DuckDB, and a later MERGE works).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

sys.path.insert(0, os.path.dirname(__file__))

from oracles import duckdb_delta  # noqa: E402
from standalone_cluster import Lines, kill_an_executor_mid_task  # noqa: E402

from indexeddf import IndexedTable  # noqa: E402

WORKER = str(Path(__file__).parent / "workers" / "cluster_change.py")
MERGE = "MERGE INTO {table} AS t USING src AS s ON t.k = s.k WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT *"
DELETE = "DELETE FROM {table} WHERE k % 5 = 0"


def _vector_table(path: str, rows: int = 1000) -> IndexedTable:
    data = pa.table({"k": pa.array(range(rows), pa.int64()), "v": pa.array(range(rows), pa.int64())})
    return IndexedTable.create(path, data, index_columns=["k"], num_buckets=2,
                               properties={"delta.enableDeletionVectors": "true"})


def test_an_abort_after_the_commit_keeps_the_committed_deletion_vectors(tmp_path):
    """Spark aborts a write whose commit raised, even when the log entry had landed (the
    metrics file could not be written, or an object store's put timed out after landing):
    the abort must not delete a committed DELETE's deletion vector files, which no data
    file path names."""
    pytest.importorskip("pyspark")
    from indexeddf.spark.apply import FILE, OP, ROW, ApplyWriter

    path = str(tmp_path / "t")
    t = _vector_table(path)
    add = t.snapshot.live_files()[0]
    ordinals = np.arange(0, 20, 2)  # a 1000-row table of two buckets: each file holds more
    batch = pa.record_batch({OP: pa.array(["delete"] * len(ordinals)),
                             FILE: pa.array([add.fileId] * len(ordinals), pa.int64()),
                             ROW: pa.array(ordinals, pa.int64())})
    spec = {"operation": "DELETE", "readVersion": t.version, "parameters": "{}",
            "resultFile": str(tmp_path / "missing-folder" / "result.json")}  # the metrics cannot be written
    writer = ApplyWriter(path, {}, spec)
    message = writer.write(iter([batch]))
    assert message.written and all("deletion_vector_" in p for p in message.written)
    with pytest.raises(OSError):
        writer.commit([message])
    writer.abort([message])  # what Spark does when commit raises
    after = IndexedTable.for_path(path)
    assert after.version == t.version + 1
    assert all(os.path.exists(os.path.join(path, p)) for p in message.written)
    assert after.to_arrow().num_rows == 1000 - len(ordinals)
    assert after.history()[0].operation == "DELETE"


# -- real processes --------------------------------------------------------------------------
def _table(path: str, rows: int, vectors: bool) -> IndexedTable:
    """``k`` 0..rows-1 (the index column), ``v = k``: four appends of four buckets, so a
    change touches sixteen files spread over Spark's eight write tasks."""
    chunks = np.array_split(np.arange(rows, dtype=np.int64), 4)
    t = IndexedTable.create(path, pa.table({"k": chunks[0], "v": chunks[0]}), index_columns=["k"], num_buckets=4,
                            properties={"delta.enableDeletionVectors": str(vectors).lower()})
    for c in chunks[1:]:
        t.append(pa.table({"k": c, "v": c}))
    return IndexedTable.for_path(path)


def _on_disk(path: str) -> set[str]:
    """The files a change writes and vacuum collects, as they are on disk: Parquet under
    ``data/`` and ``_indexes/`` (not the index state), deletion vector files at the root."""
    root = Path(path)
    out = {str(p.relative_to(root)) for d in ("data", "_indexes") for p in (root / d).rglob("*.parquet")}
    out = {p for p in out if not p.startswith("_indexes/_state/")}
    return out | {p.name for p in root.glob("deletion_vector_*.bin")}


def _paths(snapshot) -> set[str]:
    """The data, deletion vector and index files one version reads."""
    files = list(snapshot.files.values())
    dvs = {a.deletionVector.relative_path for a in files if a.deletionVector is not None
           and a.deletionVector.storageType == "u"}
    return set(snapshot.files) | dvs | {f.path for e in snapshot.indexes.values() for f in e.files}


def _named(path: str) -> set[str]:
    """Every file some version of the table names."""
    latest = IndexedTable.for_path(path).version
    return set().union(*(_paths(IndexedTable.for_path(path, version=v).snapshot) for v in range(latest + 1)))


def _rows(table: pa.Table) -> list[tuple]:
    table = table.select(["k", "v"]).sort_by("k")
    return list(zip(table["k"].to_pylist(), table["v"].to_pylist()))


def _reference(before: pa.Table, statement: str, src: pa.Table) -> pa.Table:
    """DuckDB's answer to a statement of this file on ``before``'s rows."""
    con = duckdb.connect()
    con.register("before_rows", before.select(["k", "v"]))
    con.register("src", src)
    if statement == MERGE:
        return con.execute("SELECT k, coalesce(s.v, t.v) AS v FROM before_rows t FULL OUTER JOIN src s USING (k)").to_arrow_table()
    assert statement == DELETE
    return con.execute("SELECT k, v FROM before_rows WHERE k % 5 <> 0").to_arrow_table()


def _source(start: int, end: int, step: int) -> pa.Table:
    k = np.arange(start, end, step, dtype=np.int64)
    return pa.table({"k": k, "v": k * 10 + 1})


def _check_version(path: str, version: int, expected: pa.Table) -> None:
    """The version's rows, by indexeddf (once each: no key twice) and by DuckDB's reader of the log."""
    got = IndexedTable.for_path(path, version=version).to_arrow(columns=["k", "v"])
    assert got.num_rows == pc.count_distinct(got["k"]).as_py()
    assert _rows(got) == _rows(expected)
    latest = IndexedTable.for_path(path).version
    if version == latest:
        assert _rows(duckdb_delta().execute(f"SELECT k, v FROM delta_scan('{path}')").to_arrow_table()) == _rows(expected)


def _vacuum_leaves_the_live_files(path: str, expected: pa.Table) -> set[str]:
    """Vacuum with no retention: what is left on disk is exactly what the newest version
    reads, and it still reads right. The files it removed that no version ever named."""
    orphans = _on_disk(path) - _named(path)
    t = IndexedTable.for_path(path)
    t.vacuum(retention_hours=0, enforce_retention=False)
    assert _on_disk(path) == _paths(t.snapshot)
    _check_version(path, t.version, expected)
    return orphans


def _when_files_appear(path: str, known: set[str], timeout: float) -> set[str]:
    """The change's first files on disk (its tasks are writing), polled every 20 ms."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        new = _on_disk(path) - known
        if new:
            return new
        time.sleep(0.02)
    raise AssertionError("the change wrote no file in time")


def _kill_an_executor_mid_write(path: str, known: set[str], worker_dir: str, patience: float) -> str | None:
    """SIGKILL the executor whose task has one of the change's files open (it has not
    finished writing it, so its attempt is lost after writing files) and return that file;
    ``patience`` seconds after the first file is on disk with no such moment seen, SIGKILL
    one executor anyway (None)."""
    return kill_an_executor_mid_task(path, worker_dir, patience, lambda: bool(_on_disk(path) - known))


@pytest.mark.spark
@pytest.mark.spark_elsewhere  # the cluster's application
@pytest.mark.slow
def test_a_change_survives_lost_executors(cluster_app, tmp_path):
    """A MERGE (deletion vectors: each task writes its rows' new data and index files and
    one DV file) on the standalone cluster, an executor SIGKILLed while its task has one
    of the change's files open (or, failing such a moment, once the first file is on disk): Spark reruns the lost tasks on new executors, the
    version equals DuckDB's answer with every key once (a lost attempt's files are never
    committed beside its rerun's), or the statement fails and nothing is committed; the
    lost attempts' files are orphans that vacuum removes, never the committed ones."""
    path = str(tmp_path / "t")
    rows, src = 16_000, (0, 19_000, 3)
    t = _table(path, rows, vectors=True)
    versions, expected = [t.version], [t.to_arrow(columns=["k", "v"])]
    # One statement: a DELETE's tasks write the same DV files as the MERGE's, and each lost
    # executor costs the suite a relaunch.
    known = _on_disk(path)
    cluster_app.send(cmd="sql", statement=MERGE.format(table=f"indexeddf.`{path}`"), src=list(src),
                     conf={"spark.sql.shuffle.partitions": "8",
                           "spark.sql.adaptive.enabled": "false",  # eight write tasks, never coalesced into one
                           # Spark's plan, whose tasks write: a small MERGE would go to the
                           # Python engine, which writes in the driver.
                           "spark.indexeddf.merge.engineMaxSourceBytes": "-1"})
    cluster_app.wait_for("running", 120)
    # At the change's first file, while its other tasks still write (a quiet machine
    # finishes this MERGE in a few seconds).
    lost = [_kill_an_executor_mid_write(path, known, cluster_app.worker_dir, 0)]
    line = cluster_app.wait_for(("done", "failed"), 240)
    now = IndexedTable.for_path(path)
    if line.startswith("done"):  # Spark reran the lost tasks: one commit, the right rows
        assert now.version == versions[-1] + 1
        expected.append(_reference(expected[-1], MERGE, _source(*src)))
        versions.append(now.version)
    else:  # the statement failed as a whole: nothing committed
        assert now.version == versions[-1], line
    for v, e in zip(versions, expected):
        _check_version(path, v, e)
    assert len(versions) == 2, (line, cluster_app.stderr())  # the statement survived
    orphans = _vacuum_leaves_the_live_files(path, expected[-1])
    half_written = {f for f in lost if f is not None}
    print(f"lost attempts' open files: {lost}; vacuumed orphans: {len(orphans)}")
    assert half_written <= orphans  # never committed (the rerun wrote its own files), then vacuumed


def _gone(group: int, timeout: float) -> None:
    """Wait until no process of the process group is left (the driver's JVM and its Python workers)."""
    deadline = time.monotonic() + timeout
    while subprocess.run(["pgrep", "-g", str(group)], capture_output=True).returncode == 0:
        assert time.monotonic() < deadline, "the killed driver's processes are still running"
        time.sleep(0.1)


@pytest.mark.spark
@pytest.mark.spark_elsewhere  # the drivers are programs of their own
@pytest.mark.slow
def test_a_change_whose_driver_dies_leaves_the_table_as_it_was(tmp_path):
    """A MERGE (copy on write) from a slow Python source, its driver process (the Python
    program, its JVM and its workers, local mode) SIGKILLed once its tasks have files on
    disk: nothing is committed, so indexeddf, delta-rs and DuckDB read the version before
    it; a later MERGE from a new driver commits on top; vacuum removes the dead change's
    files."""
    import deltalake

    path = str(tmp_path / "t")
    rows, src = 16_000, (0, 19_000, 3)
    t = _table(path, rows, vectors=False)
    before = t.to_arrow(columns=["k", "v"])
    known = _on_disk(path)
    err = open(tmp_path / "driver.err", "w")
    driver = subprocess.Popen([sys.executable, WORKER, "local[2]", path, *map(str, src), "1", MERGE],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True,
                              env=dict(os.environ, PYSPARK_PYTHON=sys.executable), start_new_session=True)
    try:
        driver.stdin.write("go\n")
        driver.stdin.flush()
        out = Lines(driver.stdout)
        out.wait_for("running 0", 180)
        new = _when_files_appear(path, known, 180)
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(timeout=30)
        _gone(driver.pid, 60)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
        err.close()
    assert out.q.empty() or not any(line.startswith("done") for line in list(out.q.queue))
    after = IndexedTable.for_path(path)
    assert after.version == t.version  # nothing of the change in the log
    _check_version(path, t.version, before)
    assert _rows(deltalake.DeltaTable(path).to_pyarrow_table(columns=["k", "v"])) == _rows(before)
    left = _on_disk(path) - _named(path)
    assert new <= left  # its tasks' files, named by no version

    later = (1, 20_000, 4)
    again = subprocess.run([sys.executable, WORKER, "local[2]", path, *map(str, later), "0", MERGE], input="\n\n",
                           capture_output=True, text=True, env=dict(os.environ, PYSPARK_PYTHON=sys.executable),
                           timeout=300)
    assert "done 0" in again.stdout, again.stdout + again.stderr[-3000:]
    expected = _reference(before, MERGE, _source(*later))
    assert IndexedTable.for_path(path).version == t.version + 1
    _check_version(path, t.version + 1, expected)
    assert _rows(deltalake.DeltaTable(path).to_pyarrow_table(columns=["k", "v"])) == _rows(expected)
    assert left <= _vacuum_leaves_the_live_files(path, expected)
