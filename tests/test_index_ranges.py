"""Lookups that read only the row groups of an index file that can hold their keys.

Index files are sorted by key hash in row groups (blocks) of ``ENTRY_ROW_GROUP`` entries;
a lookup of a few keys reads the blocks whose hash range holds them (cached one by one),
however many lookups the process made before.
Every answer must equal the same question asked of DuckDB over ``to_arrow()``, whichever
way the segments were read (in parts, whole, cached or not), also for a key whose rows
straddle a row-group boundary.
"""

from __future__ import annotations

import random

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from indexeddf import IndexedTable
from indexeddf.reader.cache import cache
from indexeddf.writer.index_files import ENTRY_ROW_GROUP, entry_order


def table_rows(n: int, repeated: int) -> pa.Table:
    """Keys 0..n-1, then ``repeated`` rows of key -1: more than a row group of one hash."""
    keys = np.concatenate([np.arange(n), np.full(repeated, -1)]).astype(np.int64)
    return pa.table({"k": keys, "v": np.arange(len(keys), dtype=np.int64),
                     "s": pa.array([f"s{i % 97}" for i in range(len(keys))])})


def expected(t: IndexedTable, keys: list[int]) -> list[tuple]:
    rows = t.to_arrow()  # noqa: F841 (DuckDB reads the local variable)
    got = duckdb.sql(f"SELECT * FROM rows WHERE k IN ({', '.join(map(str, keys))})").fetchall()
    return sorted(got)


def answer(t: IndexedTable, keys: list[int]) -> list[tuple]:
    return sorted(tuple(r.values()) for r in t.lookup(keys).to_pylist())


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("ranges") / "t")
    t = IndexedTable.create(path, table_rows(5 * ENTRY_ROW_GROUP, ENTRY_ROW_GROUP + 100), ["k"], num_buckets=1)
    t.append(table_rows(1000, 10).set_column(1, "v", pa.array(np.arange(1010, dtype=np.int64) + 10**9)))
    return t


def test_the_index_file_has_row_groups_bounded_by_hash(table):
    big = max((f for entry in table.snapshot.indexes.values() for f in entry.files), key=lambda f: f.numEntries)
    meta = pq.ParquetFile(f"{table.path}/{big.path}").metadata
    assert meta.num_row_groups >= 5
    bounds = [(meta.row_group(i).column(0).statistics.min, meta.row_group(i).column(0).statistics.max)
              for i in range(meta.num_row_groups)]
    assert all(lo <= hi for lo, hi in bounds) and all(a[1] <= b[0] for a, b in zip(bounds, bounds[1:]))


def test_index_files_hold_statistics_of_the_hash_only_and_old_files_still_read(tmp_path):
    """New index files carry min/max statistics of ``hash`` alone (PROTOCOL.md §4.5.1), with no
    compression; a file written before, zstd with statistics of all three columns, is read in
    blocks alike."""
    path = str(tmp_path / "t")
    t = IndexedTable.create(path, table_rows(5 * ENTRY_ROW_GROUP, 10), ["k"], num_buckets=1)
    (f,) = t.snapshot.indexes["primary"].files
    meta = pq.read_metadata(f"{path}/{f.path}")
    assert meta.num_row_groups >= 5
    for g in range(meta.num_row_groups):
        stats = [meta.row_group(g).column(c).statistics for c in range(3)]
        assert stats[0].has_min_max and all(s is None or not s.has_min_max for s in stats[1:])
        # Uncompressed: the delta-encoded columns leave a codec nothing to find (files
        # written before are zstd, below).
        assert {meta.row_group(g).column(c).compression for c in range(3)} == {"UNCOMPRESSED"}
    keys = [3, 70_000, 81_919, -1, 10**9]
    want = expected(t, keys)
    assert answer(t, keys) == want
    # The same entries as the writer wrote them before: statistics of every column.
    entries = pq.read_table(f"{path}/{f.path}")
    pq.write_table(entries, f"{path}/{f.path}", compression="zstd", row_group_size=ENTRY_ROW_GROUP,
                   use_dictionary=["file_id"], column_encoding={"hash": "DELTA_BINARY_PACKED", "row": "DELTA_BINARY_PACKED"})
    old = pq.read_metadata(f"{path}/{f.path}")
    assert all(old.row_group(0).column(c).statistics.has_min_max for c in range(3))
    cache().clear()
    assert answer(t, keys) == want
    assert any(k[0] == "segment-group" for k in cache().keys())  # read in blocks, not whole


def test_lookups_in_parts_equal_duckdb(table):
    rng = random.Random(7)
    for keys in ([-1], [3], [0, -1, 999_999], rng.sample(range(5 * ENTRY_ROW_GROUP), 5), [1, 2, 4, 8, 16, 32]):
        cache().clear()
        assert answer(table, keys) == expected(table, keys), keys
        cached = [k for k in cache().keys() if k[0] in ("segment", "segment-group")]
        if len(keys) <= 2:  # a key or two: row groups of the big index file, not the whole file
            assert any(k[0] == "segment-group" for k in cached), cached
        # The same keys again, from the cached groups.
        assert answer(table, keys) == expected(table, keys), keys


def test_many_keys_read_whole_files_and_later_lookups_use_them(table):
    cache().clear()
    keys = list(range(0, 5 * ENTRY_ROW_GROUP, 97)) + [-1]
    assert answer(table, keys) == expected(table, keys)
    assert any(k[0] == "segment" for k in cache().keys())
    assert answer(table, [5, -1]) == expected(table, [5, -1])


def test_the_repeated_key_straddles_row_groups_and_comes_back_whole(table):
    cache().clear()
    got = table.lookup([-1])
    assert got.num_rows == ENTRY_ROW_GROUP + 100 + 10
    assert sorted(got.column("v").to_pylist()) == sorted(r[1] for r in expected(table, [-1]))


def test_a_process_that_keeps_looking_up_holds_blocks_not_the_whole_index(table):
    cache().clear()
    big = _big_file(table)
    groups = pq.ParquetFile(f"{table.path}/{big.path}").metadata.num_row_groups
    for k in (3, 4, 5, 1000, 2 * ENTRY_ROW_GROUP + 7, 3):
        assert answer(table, [k]) == expected(table, [k])
    keys = cache().keys()
    assert not any(k[0] in ("segment", "bucket-trie") and _big(table, k) for k in keys)
    blocks = [k for k in keys if k[0] == "segment-group" and _big(table, k)]
    assert 0 < len(blocks) < groups  # the blocks those keys' hashes fall in, each read once


def test_blocks_with_duplicates_deletion_vectors_and_a_stale_index_equal_duckdb(tmp_path):
    """Several blocks an index file, a key repeated past a block, rows deleted by deletion
    vectors, and files the index does not cover yet (hybrid scan): whichever way a lookup
    reads the index, its answer is DuckDB's over the live rows."""
    from dv_helpers import mark_deleted

    path = str(tmp_path / "t")
    t = IndexedTable.create(path, table_rows(4 * ENTRY_ROW_GROUP, ENTRY_ROW_GROUP + 50), ["k"], num_buckets=2,
                            properties={"indexeddf.index.autoRefresh": "false"})
    mark_deleted(path, {a.path: np.arange(0, a.stats.numRecords, 3) for a in t.snapshot.live_files()})
    t = IndexedTable.for_path(path)
    extra = table_rows(500, 5).set_column(1, "v", pa.array(np.arange(505, dtype=np.int64) + 10**9))
    t.append(extra)  # not indexed: autoRefresh is off
    t = IndexedTable.for_path(path)
    covered = {i for entry in t.snapshot.indexes.values() for f in entry.files for i in f.fileIds}
    assert any(a.fileId not in covered for a in t.snapshot.live_files())  # scanned beside the index
    rng = random.Random(11)
    groups = [[-1], [0], [1, 2], [499, 500, 501], rng.sample(range(4 * ENTRY_ROW_GROUP), 3), [-1, 7, 99_999_999]]
    for keys in groups:
        cache().clear()
        assert answer(t, keys) == expected(t, keys), keys
        assert any(k[0] == "segment-group" for k in cache().keys()), keys
        assert answer(t, keys) == expected(t, keys), keys  # again, from the cached blocks
    many = list(range(0, 4 * ENTRY_ROW_GROUP, 13)) + [-1]  # most blocks: whole files
    cache().clear()
    assert answer(t, many) == expected(t, many)
    assert any(k[0] == "segment" for k in cache().keys())


def _big_file(table):
    return max((f for entry in table.snapshot.indexes.values() for f in entry.files), key=lambda f: f.numEntries)


def _big(table, key) -> bool:
    return len(key) > 2 and key[2] == _big_file(table).path


@pytest.mark.parametrize("buckets, hashes, n", [(32, 1 << 32, 200_000), (7, 50, 5_000), (70_000, 1 << 32, 100_000),
                                                 (1, 3, 1)])
def test_entry_order_is_duckdbs_order_by_bucket_hash_file_and_row(buckets, hashes, n):
    """Index files hold entries in (bucket, unsigned hash, file id, row) order: the packed sort
    (and its argsort fallback past 64 bits: 70,000 buckets) with equal hashes re-sorted gives
    DuckDB's ORDER BY, ties and all."""
    rng = np.random.default_rng(n)
    t = pa.table({"bucket": rng.integers(0, buckets, n).astype(np.int32),
                  "hash": rng.integers(0, hashes, n, dtype=np.uint64).astype(np.uint32),
                  "file_id": rng.integers(0, 9, n), "row": rng.permutation(n).astype(np.int32),
                  "pos": np.arange(n)})
    want = duckdb.sql("SELECT pos FROM t ORDER BY bucket, hash, file_id, row").fetchnumpy()["pos"]
    got = entry_order(*(t.column(c).to_numpy() for c in ("bucket", "hash", "file_id", "row")))
    assert got.tolist() == want.tolist()
