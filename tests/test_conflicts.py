"""The conflict checker: which lost races rebase and which fail, with which error.

Each test starts two writers from the same read snapshot (exactly what two processes
racing see) and commits them one after the other.
"""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from indexeddf import IndexedTable
from indexeddf.errors import (
    ConcurrentAppendError,
    ConcurrentDeleteDeleteError,
    ConcurrentModificationError,
    MetadataChangedError,
)
from indexeddf.writer import operations


def rows(start: int, n: int) -> pa.Table:
    return pa.table({"k": pa.array(range(start, start + n), pa.int64()), "v": pa.array(["x"] * n)})


def data_files(path: str) -> set[str]:
    out = set()
    for folder, _, names in os.walk(os.path.join(path, "data")):
        out |= {os.path.relpath(os.path.join(folder, n), path) for n in names}
    return out


@pytest.fixture
def table(table_path) -> IndexedTable:
    return IndexedTable.create(table_path, rows(0, 40), index_columns=["k"], num_buckets=4)


def keys(t: IndexedTable) -> list[int]:
    return sorted(t.update_incremental().to_arrow().column("k").to_pylist())


def test_appends_rebase_over_appends(table):
    read = table.snapshot
    first = operations.append(read, rows(100, 5))
    second = operations.append(read, rows(200, 5))
    assert (first.version, second.version) == (1, 2)
    assert second.snapshot.version == 2 and second.snapshot.num_records() == 50
    assert keys(table) == list(range(40)) + list(range(100, 105)) + list(range(200, 205))


def test_append_rebases_over_an_overwrite(table):
    read = table.snapshot
    operations.overwrite(read, rows(500, 3))
    operations.append(read, rows(200, 2))
    assert keys(table) == [200, 201, 500, 501, 502]


def test_serializable_overwrite_fails_after_a_concurrent_append_and_cleans_up(table, table_path):
    table.set_properties({"delta.isolationLevel": "Serializable"})
    read = table.update_incremental().snapshot
    operations.append(read, rows(100, 5))
    before = data_files(table_path)
    with pytest.raises(ConcurrentAppendError) as e:
        operations.overwrite(read, rows(900, 5))
    assert "retry" in str(e.value)
    assert data_files(table_path) == before  # the loser's files are gone
    assert table.update_incremental().version == 2


def test_write_serializable_lets_deletes_and_overwrites_pass_blind_appends(table):
    """Delta's default: a blind append that won counts as after the delete or overwrite
    that read before it, and its rows stay (the report: delete("k = 3") failed because a
    concurrent append added only keys above 100,000)."""
    read = table.snapshot
    operations.append(read, rows(100_000, 50))  # lands in every bucket, the one of k = 3 too
    operations.delete_rows(read, "k = 3")
    assert keys(table) == [k for k in range(40) if k != 3] + list(range(100_000, 100_050))
    read = table.update_incremental().snapshot
    operations.append(read, rows(200_000, 2))
    operations.overwrite(read, rows(900, 2))
    assert keys(table) == [900, 901, 200_000, 200_001]
    text = table.snapshot.storage.read_bytes(f"_delta_log/{table.version:020d}.json").decode()
    assert '"isolationLevel":"WriteSerializable"' in text


def test_serializable_deletes_fail_on_appends_to_the_buckets_they_read(table):
    table.set_properties({"delta.isolationLevel": "Serializable"})
    read = table.update_incremental().snapshot
    operations.append(read, rows(100_000, 50))
    with pytest.raises(ConcurrentAppendError):
        operations.delete_rows(read, "k = 3")
    with pytest.raises(Exception, match="delta.isolationLevel"):
        table.set_properties({"delta.isolationLevel": "Snapshot"})


def test_two_overwrites_conflict(table, table_path):
    read = table.snapshot
    operations.overwrite(read, rows(500, 3))
    with pytest.raises(ConcurrentDeleteDeleteError):
        operations.overwrite(read, rows(600, 3))
    assert keys(table) == [500, 501, 502]


def test_metadata_change_fails_concurrent_writers(table):
    read = table.snapshot
    wider = rows(0, 3).append_column("extra", pa.array([1, 2, 3], pa.int32()))
    operations.overwrite(read, wider, overwrite_schema=True)
    with pytest.raises(MetadataChangedError):
        operations.append(read, rows(100, 1))
    assert issubclass(MetadataChangedError, ConcurrentModificationError)


def test_racing_idempotent_appends_commit_once(table, table_path):
    read = table.snapshot
    first = operations.append(read, rows(100, 5), txn=("app", 7))
    second = operations.append(read, rows(100, 5), txn=("app", 7))
    assert not first.duplicate and second.duplicate
    assert second.version == first.version == 1
    assert keys(table) == list(range(40)) + list(range(100, 105))
    assert data_files(table_path) == {a.path for a in table.snapshot.files.values()}


def test_file_ids_are_unique_and_reuse_is_refused(table, table_path):
    from indexeddf.format.transaction import Transaction

    table.append(rows(100, 50))
    ids = [a.fileId for a in table.snapshot.files.values()]
    assert len(ids) == len(set(ids)) and min(ids) >= 0
    existing = next(iter(table.snapshot.files.values()))
    clash = existing.model_copy(update={"path": "data/bucket=00000/part-clash.parquet"})
    with pytest.raises(ConcurrentModificationError, match="already in use"):
        Transaction(table.snapshot, "WRITE").commit([clash])
    assert table.update_incremental().version == 1


def test_racing_idempotent_overwrites_commit_once(table):
    read = table.snapshot
    first = operations.overwrite(read, rows(500, 3), txn=("job", 1))
    second = operations.overwrite(read, rows(500, 3), txn=("job", 1))
    assert second.duplicate and second.version == first.version
    assert keys(table) == [500, 501, 502]


def test_add_columns_rebases_over_appends_of_other_processes(table_path):
    """ADD COLUMNS is metadata only and reads no data: it rebases over the appends that won
    (as in Delta), so processes appending all the while lose nothing and the column
    adder never fails; every row written before a column reads it as NULL, in indexeddf,
    delta-rs and DuckDB's delta extension alike."""
    import subprocess
    import sys
    import time
    from collections import Counter

    import deltalake
    from oracles import duckdb_delta

    worker = os.path.join(os.path.dirname(__file__), "workers", "append_evolving.py")
    schema = pa.schema([("k", pa.int64()), ("worker", pa.int32())])
    t = IndexedTable.create(table_path, schema.empty_table(), index_columns=["k"], num_buckets=4)
    # One race for certain: a process appends after this read, then the column is added.
    read = t.snapshot
    subprocess.run([sys.executable, worker, table_path, "9", "1", "5"], check=True, capture_output=True, timeout=120)
    first = operations.add_columns(read, [("c0", "long")])
    assert first.version == 2 and IndexedTable.for_path(table_path).history(1)[0].read_version == 0
    procs = [subprocess.Popen([sys.executable, worker, table_path, str(w), "60", "20"], stdout=subprocess.PIPE,
                              text=True) for w in range(2)]
    for p in procs:
        p.stdout.readline()  # both are appending
    rebased = 0
    for i in range(1, 9):
        snap = t.update_incremental().snapshot
        time.sleep(0.1)  # a slow driver: the appenders commit in between
        result = operations.add_columns(snap, [(f"c{i}", "long")])
        rebased += result.version > snap.version + 1
    assert rebased > 0
    outputs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    t.update_incremental()
    assert t.schema.names == ["k", "worker"] + [f"c{i}" for i in range(9)]
    got = Counter(t.to_arrow(columns=["k"]).column("k").to_pylist())
    want = {9_000_000 + r for r in range(5)} | {w * 1_000_000 + i * 1_000 + r
                                                  for w in range(2) for i in range(60) for r in range(20)}
    assert set(got) == want and set(got.values()) == {1}
    assert t.to_arrow().drop_columns(["k", "worker"]).to_pylist() == [{f"c{i}": None for i in range(9)}] * len(want)
    theirs = deltalake.DeltaTable(table_path).to_pyarrow_table()
    assert sorted(theirs.column("k").to_pylist()) == sorted(want) and theirs.schema.names == t.schema.names
    n = duckdb_delta().execute(f"SELECT count(*) FROM delta_scan('{table_path}') WHERE c8 IS NULL").fetchone()[0]
    assert n == len(want)
    retries = sum(int(line.split()[1]) for out in outputs for line in out.splitlines() if line.startswith("retries"))
    print(f"ADD COLUMNS rebased over appends {rebased} times of 8; appends retried after one {retries} times")
