"""The log: replay, checkpoints, put-if-absent and what a reader refuses."""

from __future__ import annotations

import os
import time
from concurrent.futures import ProcessPoolExecutor

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from indexeddf import IndexedTable
from indexeddf.errors import CorruptLogError, UnsafePathError, UnsupportedProtocolError, VersionNotFoundError
from indexeddf.format.log import commit_path, list_log, read_commit
from indexeddf.format.snapshot import initial_snapshot, load_snapshot
from indexeddf.format.storage import TableStorage
from indexeddf.spec.actions import AddFile, CommitInfo, FileStats, Protocol
from indexeddf.spec.delta import encode_commit


def rows(start: int, n: int) -> pa.Table:
    return pa.table({"k": pa.array(range(start, start + n), pa.int64()), "v": pa.array([str(i) for i in range(start, start + n)])})


def replay_json_only(storage: TableStorage, version: int):
    """Replay from commit 0 without any checkpoint (the reference answer)."""
    snap = initial_snapshot(storage, read_commit(storage, 0))
    for v in range(1, version + 1):
        snap = snap.apply(v, read_commit(storage, v))
    return snap


def same_state(a, b) -> bool:
    fields = ("version", "protocol", "metadata", "files", "tombstones", "txns", "indexes", "timestamp")
    return all(getattr(a, f) == getattr(b, f) for f in fields)


ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(0, 20)),
        st.tuples(st.just("overwrite"), st.integers(0, 20)),
        st.tuples(st.just("txn"), st.integers(0, 3)),
        st.tuples(st.just("delete"), st.integers(0, 60)),
    ),
    min_size=1,
    max_size=25,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=ops, interval=st.integers(2, 6), buckets=st.integers(1, 5), vectors=st.booleans())
def test_checkpoint_plus_tail_equals_full_replay(ops, interval, buckets, vectors):
    """Every version replayed from its newest checkpoint and the commits after it equals the
    replay of every commit; a checkpoint's tombstones are decoded only when read, and the file
    ids and sizes read from its columns before that (what commits and index plans use) are
    those of the decoded ones, also where a delete with deletion vectors took a path back."""
    path = f"memory://replay/{time.time_ns()}"
    t = IndexedTable.create(path, rows(0, 5), index_columns=["k"], num_buckets=buckets,
                            properties={"indexeddf.checkpointInterval": str(interval),
                                        "delta.enableDeletionVectors": str(vectors).lower()})
    n = 5
    for kind, arg in ops:
        if kind == "append":
            t.append(rows(n, arg))
        elif kind == "overwrite":
            t.overwrite(rows(n, arg))
        elif kind == "delete":
            t.delete(f"k % 7 = {arg % 7} AND k < {arg * 2}")
        else:
            t.append(rows(n, 1), txn=(f"app{arg % 2}", arg))
        n += 25
    storage = TableStorage(path)
    commits, checkpoints = list_log(storage)
    assert checkpoints == [v for v in commits if v and v % interval == 0]
    for v in commits:
        snapshot, whole = load_snapshot(storage, v), replay_json_only(storage, v)
        assert snapshot.tombstone_sizes == {r.fileId: r.size for r in whole.tombstones.values()}
        assert same_state(snapshot, whole)


def test_open_after_hundreds_of_commits_reads_one_checkpoint_and_few_json(tmp_path, monkeypatch):
    # 255 commits (a checkpoint every 10, the default): 25 checkpoints and hundreds of
    # commit files on disk, of which an open reads the newest checkpoint and the few JSON
    # commits after it (the count of commits proves nothing more past a few checkpoints).
    path = str(tmp_path / "t")
    t = IndexedTable.create(path, rows(0, 1), index_columns=["k"], num_buckets=1)
    one = rows(1, 1)
    for _ in range(255):
        t.append(one)
    assert t.version == 255
    reads: list[str] = []
    original = TableStorage.read_bytes

    def counting(self, rel):
        reads.append(rel)
        return original(self, rel)

    monkeypatch.setattr(TableStorage, "read_bytes", counting)
    opened = IndexedTable.for_path(path)
    assert opened.version == 255 and opened.snapshot.num_records() == 256
    assert [r for r in reads if r.endswith(".checkpoint.parquet")] == [commit_path(250).replace(".json", ".checkpoint.parquet")]
    assert len([r for r in reads if r.endswith(".json")]) < 10
    assert os.path.exists(os.path.join(path, "_delta_log", "_last_checkpoint"))


def _write_raw(path: str, version: int, text: str) -> None:
    with open(os.path.join(path, "_delta_log", f"{version:020d}.json"), "w") as f:
        f.write(text)


def test_reader_refuses_newer_protocol(table_path):
    IndexedTable.create(table_path, rows(0, 3), index_columns=["k"])
    info = CommitInfo(timestamp=int(time.time() * 1000) + 10, operation="UPGRADE")
    _write_raw(table_path, 1, encode_commit([info, Protocol(minReaderVersion=99, minWriterVersion=99)]))
    with pytest.raises(UnsupportedProtocolError) as e:
        IndexedTable.for_path(table_path)
    assert "99" in str(e.value)
    assert IndexedTable.for_path(table_path, version=0).to_arrow().num_rows == 3


def test_reader_refuses_corrupt_and_unsafe_commits(table_path):
    IndexedTable.create(table_path, rows(0, 3), index_columns=["k"])
    _write_raw(table_path, 1, '{"commitInfo":{"timestamp":1,"operation":"WRITE"}}\n{"add":{"path":"dat')
    with pytest.raises(CorruptLogError) as e:
        IndexedTable.for_path(table_path)
    assert e.value.path.endswith(f"{1:020d}.json") and e.value.line == 2
    bad = AddFile(path="../../etc/passwd", size=1, modificationTime=0, bucket=0, fileId=9, stats=FileStats(numRecords=1))
    _write_raw(table_path, 1, encode_commit([bad]))
    with pytest.raises(UnsafePathError):
        IndexedTable.for_path(table_path)


def test_missing_commit_is_reported(table_path):
    t = IndexedTable.create(table_path, rows(0, 3), index_columns=["k"])
    t.append(rows(3, 3))
    t.append(rows(6, 3))
    os.remove(os.path.join(table_path, "_delta_log", f"{1:020d}.json"))
    with pytest.raises(VersionNotFoundError):
        IndexedTable.for_path(table_path)


def test_temporary_files_are_ignored(table_path):
    t = IndexedTable.create(table_path, rows(0, 3), index_columns=["k"])
    # What a writer killed mid-commit leaves: a dot-named temporary file.
    with open(os.path.join(table_path, "_delta_log", f".{1:020d}.json.abc.tmp"), "w") as f:
        f.write('{"add":')
    assert IndexedTable.for_path(table_path).version == 0
    assert t.append(rows(3, 3)) == 1


def _race(args):
    folder, worker = args
    storage = TableStorage(folder)
    return [storage.put_if_absent(f"f{i}", f"{worker}\n".encode() * 1000) for i in range(50)]


def test_put_if_absent_has_exactly_one_winner_across_processes(tmp_path):
    with ProcessPoolExecutor(4) as pool:
        results = list(pool.map(_race, [(str(tmp_path), w) for w in range(4)]))
    for i in range(50):
        assert sum(r[i] for r in results) == 1
        content = (tmp_path / f"f{i}").read_text()
        assert len(set(content.splitlines())) == 1 and len(content.splitlines()) == 1000
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


def test_empty_commit_is_corrupt(table_path):
    IndexedTable.create(table_path, rows(0, 3), index_columns=["k"])
    _write_raw(table_path, 1, "")
    with pytest.raises(CorruptLogError, match="empty commit"):
        IndexedTable.for_path(table_path)


def test_newer_protocol_with_unknown_actions_says_upgrade(table_path):
    IndexedTable.create(table_path, rows(0, 3), index_columns=["k"])
    info = CommitInfo(timestamp=int(time.time() * 1000) + 10, operation="UPGRADE")
    text = encode_commit([info, Protocol(minReaderVersion=7, minWriterVersion=7)]) + '{"deletionVector":{"x":1}}\n'
    _write_raw(table_path, 1, text)
    with pytest.raises(UnsupportedProtocolError, match="reader version 7"):
        IndexedTable.for_path(table_path)


def test_reads_lookups_and_commits_decode_no_tombstone_of_a_checkpoint(tmp_path, monkeypatch):
    """A checkpoint's tombstones (one per file removed within the retention) are decoded only
    where they are read whole (vacuum, the next checkpoint): opening, scanning, a lookup
    through the index and a commit read their ids and sizes from the columns."""
    import indexeddf.format.checkpoint as ckpt

    path = str(tmp_path / "t")
    t = IndexedTable.create(path, rows(0, 200), index_columns=["k"], num_buckets=4,
                            properties={"indexeddf.checkpointInterval": "5"})
    for i in range(4):
        t.delete(f"k % 10 = {i}")  # rewrites every bucket's file: four tombstones a commit
    t.append(rows(500, 3))  # version 5: the checkpoint
    assert list_log(TableStorage(path))[1] == [5]
    decoded = []
    original = ckpt.checkpoint_remove
    monkeypatch.setattr(ckpt, "checkpoint_remove", lambda *a, **k: decoded.append(1) or original(*a, **k))
    opened = IndexedTable.for_path(path)
    assert opened.to_arrow().num_rows == 200 - 80 + 3
    assert sorted(opened.lookup([15, 501])["k"].to_pylist()) == [15, 501]
    opened.append(rows(600, 1))
    assert decoded == []
    assert len(opened.snapshot.tombstones) >= 12 and len(decoded) >= 12  # read whole: decoded now
