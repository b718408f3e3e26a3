"""Lookups that read only the row groups of an index file that can hold their keys.

Index files are sorted by key hash in row groups of ``ENTRY_ROW_GROUP`` entries; a
lookup of a few keys in a fresh process reads the groups whose hash range holds them.
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
from indexeddf.writer.index_files import ENTRY_ROW_GROUP


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


def test_a_process_that_keeps_looking_up_loads_the_index_whole_once(table):
    cache().clear()
    assert answer(table, [3]) == expected(table, [3])
    assert not any(k[0] == "segment" and k[2].endswith(".parquet") and "bucket" in k[2]
                   for k in cache().keys() if _big(table, k))
    assert answer(table, [4]) == expected(table, [4])  # the second lookup: the big file whole
    assert any(k[0] == "segment" and _big(table, k) for k in cache().keys())


def _big(table, key) -> bool:
    big = max((f for entry in table.snapshot.indexes.values() for f in entry.files), key=lambda f: f.numEntries)
    return len(key) > 2 and key[2] == big.path
