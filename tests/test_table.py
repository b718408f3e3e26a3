"""IndexedTable: create, append, overwrite, history, time travel, schema enforcement."""

from __future__ import annotations

import datetime as dt
import decimal
import os
import time

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from indexeddf import IndexedTable
from indexeddf.errors import (
    InvalidOptionError,
    SchemaMismatchError,
    TableExistsError,
    TableNotFoundError,
    UnsupportedTypeError,
    VersionNotFoundError,
)
from indexeddf.spec.bucketing import bucket_ids


def rows(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "user_id": pa.array(ids, pa.int64()),
            "amount": pa.array([i * 0.5 for i in ids], pa.float64()),
            "name": pa.array([f"user-{i}" for i in ids], pa.string()),
        }
    )


def sorted_rows(t: pa.Table) -> list[dict]:
    return sorted(t.to_pylist(), key=lambda r: (r["user_id"], r["amount"]))


def data_files(path: str) -> list[str]:
    out = []
    for folder, _, names in os.walk(os.path.join(path, "data")):
        out += [os.path.join(folder, n) for n in names]
    return out


def test_create_append_read(table_path):
    t = IndexedTable.create(table_path, rows(0, 100), index_columns=["user_id"], num_buckets=8)
    assert t.version == 0
    assert t.index_columns == ["user_id"] and t.num_buckets == 8
    assert t.schema.names == ["user_id", "amount", "name"]
    assert t.append(rows(100, 50)) == 1
    assert t.append(rows(150, 50)) == 2
    assert sorted_rows(t.to_arrow()) == sorted_rows(rows(0, 200))
    reopened = IndexedTable.for_path(table_path)
    assert reopened.version == 2 and reopened.table_id == t.table_id
    assert reopened.to_arrow(columns=["user_id"]).column_names == ["user_id"]


def test_each_file_holds_one_bucket_and_the_bucket_is_sparks(table_path):
    t = IndexedTable.create(table_path, rows(0, 500), index_columns=["user_id"], num_buckets=8)
    for add in t.snapshot.live_files():
        assert f"bucket={add.bucket:05d}" in add.path
        ids = pq.read_table(os.path.join(table_path, add.path)).column("user_id")
        assert set(bucket_ids([ids], 8).tolist()) == {add.bucket}
        assert add.stats.numRecords == len(ids)
        assert add.stats.minValues["user_id"] == min(ids.to_pylist())
        assert add.stats.maxValues["user_id"] == max(ids.to_pylist())


def test_row_groups_are_bounded(tmp_path):
    path = str(tmp_path / "t")
    t = IndexedTable.create(
        path, rows(0, 20_000), index_columns=["user_id"], num_buckets=1,
        properties={"indexeddf.targetRowGroupBytes": "32768"},
    )
    (add,) = t.snapshot.live_files()
    meta = pq.ParquetFile(os.path.join(path, add.path)).metadata
    assert meta.num_row_groups > 5
    assert all(meta.row_group(i).num_rows <= 32768 // 20 for i in range(meta.num_row_groups))


def _codecs(t, path) -> set[str]:
    return {pq.ParquetFile(os.path.join(path, a.path)).metadata.row_group(0).column(0).compression
            for a in t.snapshot.live_files()}


def test_the_compression_codec_is_a_table_property(tmp_path):
    """New data files take ``indexeddf.parquet.compressionCodec`` (zstd by default): appends,
    the copies a copy-on-write delete writes, and optimize's rewrites; the files already
    written keep theirs, and every file reads back alike (here and in DuckDB)."""
    import duckdb
    path = str(tmp_path / "t")
    t = IndexedTable.create(path, rows(0, 2_000), index_columns=["user_id"], num_buckets=2)
    assert _codecs(t, path) == {"ZSTD"}
    t.set_properties({"indexeddf.parquet.compressionCodec": "SNAPPY"})  # Spark's names, any case
    before = set(t.snapshot.files)
    t.append(rows(2_000, 500))
    new = [a for p, a in t.snapshot.files.items() if p not in before]
    assert {pq.ParquetFile(os.path.join(path, a.path)).metadata.row_group(0).column(0).compression
            for a in new} == {"SNAPPY"}
    t.delete("user_id < 100")  # copy on write: every file holding such a key is copied
    t.optimize(mode="full")
    assert _codecs(t, path) == {"SNAPPY"}
    t.set_properties({"indexeddf.parquet.compressionCodec": "uncompressed"})
    t.append(rows(3_000, 10))
    assert "UNCOMPRESSED" in _codecs(t, path)
    expected = sorted(r for r in range(100, 2_500)) + list(range(3_000, 3_010))
    assert sorted(t.to_arrow().column("user_id").to_pylist()) == expected
    files = [os.path.join(path, a.path) for a in t.snapshot.live_files()]
    assert sorted(duckdb.sql(f"select user_id from read_parquet({files!r})").fetchnumpy()["user_id"].tolist()) \
        == expected
    with pytest.raises(InvalidOptionError, match="must be one of zstd, snappy, gzip, none, uncompressed"):
        t.set_properties({"indexeddf.parquet.compressionCodec": "lzo"})


def test_strings_take_a_dictionary_only_where_values_repeat(tmp_path):
    """A string column whose values repeat is dictionary-encoded; one of distinct values (ids,
    free text) is written plain, in a new file and in a copy on write of it: a dictionary
    there only slows writing and reading. Both read back as written, here and in DuckDB."""
    n = 5_000
    data = pa.table({"k": list(range(n)), "status": [["paid", "open", "void"][i % 3] for i in range(n)],
                     "token": [f"{i:08d}-{i * 7919 % 100003:06d}" for i in range(n)]})
    path = str(tmp_path / "t")
    t = IndexedTable.create(path, data, index_columns=["k"], num_buckets=1)

    def encodings(add) -> dict[str, set[str]]:
        meta = pq.ParquetFile(os.path.join(path, add.path)).metadata
        return {meta.schema.column(c).name: {e for g in range(meta.num_row_groups)
                                              for e in meta.row_group(g).column(c).encodings} for c in range(3)}

    (add,) = t.snapshot.live_files()
    first = encodings(add)
    assert "RLE_DICTIONARY" in first["status"] and "RLE_DICTIONARY" not in first["token"], first
    t.delete("k = 7")  # copy on write: the kept rows are streamed into a new file
    (add,) = IndexedTable.for_path(path).snapshot.live_files()
    copied = encodings(add)
    assert "RLE_DICTIONARY" in copied["status"] and "RLE_DICTIONARY" not in copied["token"], copied
    want = data.filter(pa.compute.not_equal(data["k"], 7))
    assert IndexedTable.for_path(path).to_arrow().sort_by("k") == want
    import duckdb

    got = duckdb.sql(f"SELECT * FROM read_parquet('{os.path.join(path, add.path)}', hive_partitioning = false) "
                     "ORDER BY k").to_arrow_table()
    assert got.cast(want.schema) == want


def test_time_travel_by_version_and_timestamp(table_path):
    t = IndexedTable.create(table_path, rows(0, 10), index_columns=["user_id"], num_buckets=4)
    stamps = []
    for i in range(1, 4):
        time.sleep(0.01)
        t.append(rows(i * 10, 10))
        stamps.append(t.history(limit=1)[0].timestamp)
    for v in range(4):
        assert sorted_rows(t.to_arrow(version=v)) == sorted_rows(rows(0, 10 * (v + 1)))
        assert IndexedTable.for_path(table_path, version=v).to_arrow().num_rows == 10 * (v + 1)
    # At the exact commit instant, and just before the next one.
    assert IndexedTable.for_path(table_path, timestamp=stamps[0]).version == 1
    before_next = stamps[1] - dt.timedelta(milliseconds=1)
    assert IndexedTable.for_path(table_path, timestamp=before_next.isoformat()).version == 1
    assert IndexedTable.for_path(table_path, timestamp="2999-01-01T00:00:00Z").version == 3
    with pytest.raises(VersionNotFoundError):
        IndexedTable.for_path(table_path, timestamp="2000-01-01 00:00:00")
    with pytest.raises(VersionNotFoundError):
        IndexedTable.for_path(table_path, version=9)


def test_history_newest_first(table_path):
    t = IndexedTable.create(table_path, rows(0, 10), index_columns=["user_id"], num_buckets=4)
    t.append(rows(10, 5))
    t.overwrite(rows(0, 3))
    h = t.history()
    assert [e.version for e in h] == [2, 1, 0]
    assert [e.operation for e in h] == ["WRITE", "WRITE", "CREATE TABLE"]
    assert h[0].parameters == {"mode": "Overwrite"} and h[1].parameters == {"mode": "Append"}
    assert h[1].metrics["numOutputRows"] == 5 and h[1].is_blind_append
    assert h[0].read_version == 1 and not h[0].is_blind_append
    assert [e.version for e in t.history(limit=1)] == [2]
    assert h[0].timestamp > h[1].timestamp > h[2].timestamp


def test_overwrite_replaces_rows_and_keeps_history(table_path):
    t = IndexedTable.create(table_path, rows(0, 100), index_columns=["user_id"], num_buckets=4)
    v = t.overwrite(rows(1000, 7))
    assert sorted_rows(t.to_arrow()) == sorted_rows(rows(1000, 7))
    assert t.to_arrow(version=v - 1).num_rows == 100


def test_overwrite_schema(table_path):
    t = IndexedTable.create(table_path, rows(0, 10), index_columns=["user_id"], num_buckets=4)
    new = rows(0, 5).append_column("extra", pa.array([1] * 5, pa.int32()))
    with pytest.raises(SchemaMismatchError):
        t.overwrite(new)
    t.overwrite(new, overwrite_schema=True)
    assert t.schema.names == ["user_id", "amount", "name", "extra"]
    assert t.to_arrow(version=0).column_names == ["user_id", "amount", "name"]


def test_idempotent_txn_commits_once(table_path):
    t = IndexedTable.create(table_path, rows(0, 10), index_columns=["user_id"], num_buckets=4)
    v1 = t.append(rows(10, 10), txn=("pipeline-a", 42))
    v2 = t.append(rows(10, 10), txn=("pipeline-a", 42))
    v3 = t.append(rows(10, 10), txn=("pipeline-a", 41))  # older than committed: also skipped
    assert v1 == v2 == v3 == 1
    assert t.append(rows(20, 10), txn=("pipeline-a", 43)) == 2
    assert t.append(rows(30, 10), txn=("pipeline-b", 42)) == 3
    assert t.to_arrow().num_rows == 40
    assert len(data_files(table_path)) == len(t.snapshot.files)


@pytest.mark.parametrize("kind", ["pandas", "reader", "batch"])
def test_accepts_pandas_and_readers(table_path, kind):
    data = rows(0, 20)
    if kind == "pandas":
        data = data.to_pandas()
    elif kind == "reader":
        data = pa.RecordBatchReader.from_batches(data.schema, data.to_batches(max_chunksize=7))
    else:
        data = data.to_batches()[0]
    t = IndexedTable.create(table_path, data, index_columns=["user_id"], num_buckets=4)
    assert sorted_rows(t.to_arrow()) == sorted_rows(rows(0, 20))


def test_memory_filesystem():
    path = f"memory://indexeddf-tests/{time.time_ns()}"
    t = IndexedTable.create(path, rows(0, 30), index_columns=["user_id", "name"], num_buckets=4)
    t.append(rows(30, 30))
    again = IndexedTable.for_path(path)
    assert again.version == 1 and again.index_columns == ["user_id", "name"]
    assert sorted_rows(again.to_arrow()) == sorted_rows(rows(0, 60))


def test_all_types_round_trip(table_path):
    data = pa.table(
        {
            "b": pa.array([True, None, False], pa.bool_()),
            "i8": pa.array([1, None, -128], pa.int8()),
            "i16": pa.array([1, None, -3], pa.int16()),
            "i32": pa.array([1, None, 2**31 - 1], pa.int32()),
            "i64": pa.array([1, None, -(2**63)], pa.int64()),
            "f32": pa.array([1.5, None, float("nan")], pa.float32()),
            "f64": pa.array([-0.0, None, float("inf")], pa.float64()),
            "dec": pa.array([decimal.Decimal("1.25"), None, decimal.Decimal("-3.50")], pa.decimal128(10, 2)),
            "s": pa.array(["é", None, ""], pa.string()),
            "bin": pa.array([b"\x00\xff", None, b""], pa.binary()),
            "d": pa.array([dt.date(2026, 11, 21), None, dt.date(1970, 1, 1)], pa.date32()),
            "ts": pa.array([dt.datetime(2026, 11, 21, 10, 0, tzinfo=dt.timezone.utc), None,
                            dt.datetime(1969, 12, 31, tzinfo=dt.timezone.utc)], pa.timestamp("us", tz="UTC")),
            "ntz": pa.array([dt.datetime(2026, 11, 21, 10, 0), None, dt.datetime(2000, 1, 1)], pa.timestamp("us")),
        }
    )
    t = IndexedTable.create(table_path, data, index_columns=["i64", "s"], num_buckets=3)
    back = IndexedTable.for_path(table_path).to_arrow()
    assert back.schema == data.schema
    key = lambda r: (r["i32"] is None, r["i32"] or 0)  # noqa: E731
    got, want = sorted(back.to_pylist(), key=key), sorted(data.to_pylist(), key=key)
    for g, w in zip(got, want):
        assert {k: v for k, v in g.items() if k != "f32"} == {k: v for k, v in w.items() if k != "f32"}
    assert t.to_arrow(columns=["ts"]).column("ts").type == pa.timestamp("us", tz="UTC")


def test_compatible_representations_are_converted(table_path):
    t = IndexedTable.create(table_path, rows(0, 3), index_columns=["user_id"], num_buckets=2)
    other = pa.table(
        {
            "name": pa.array(["a", "b"], pa.large_string()),
            "user_id": pa.array([7, 8], pa.int64()),
            "amount": pa.array([1.0, 2.0]),
        }
    )
    t.append(other)  # columns in another order, large_string for string
    assert t.to_arrow().num_rows == 5


def test_schema_mismatch_names_columns_and_leaves_nothing(table_path):
    t = IndexedTable.create(table_path, rows(0, 10), index_columns=["user_id"], num_buckets=4)
    before = sorted(data_files(table_path))
    bad = pa.table({"user_id": pa.array([1], pa.int32()), "amount": [1.0], "other": ["x"]})
    with pytest.raises(SchemaMismatchError) as e:
        t.append(bad)
    assert set(e.value.columns) == {"user_id", "name", "other"}
    assert "'user_id' is integer, the table has long" in str(e.value)
    assert sorted(data_files(table_path)) == before
    assert IndexedTable.for_path(table_path).version == 0


def test_unsupported_types_are_refused(table_path):
    data = pa.table({"k": [1], "l": pa.array([[1, 2]], pa.list_(pa.duration("s")))})
    with pytest.raises(UnsupportedTypeError) as e:
        IndexedTable.create(table_path, data, index_columns=["k"])
    assert "'l'" in str(e.value)


def test_errors_for_missing_and_existing_tables(table_path):
    with pytest.raises(TableNotFoundError):
        IndexedTable.for_path(table_path)
    IndexedTable.create(table_path, rows(0, 1), index_columns=["user_id"])
    with pytest.raises(TableExistsError):
        IndexedTable.create(table_path, rows(0, 1), index_columns=["user_id"])


@pytest.mark.parametrize(
    "kwargs",
    [
        {"index_columns": ["nope"]},
        {"index_columns": []},
        {"index_columns": ["user_id"], "num_buckets": 0},
        {"index_columns": ["user_id"], "properties": {"indexeddf.noSuchThing": "1"}},
        {"index_columns": ["user_id"], "properties": {"indexeddf.checkpointInterval": "-1"}},
    ],
)
def test_bad_create_arguments(table_path, kwargs):
    with pytest.raises((InvalidOptionError, SchemaMismatchError)):
        IndexedTable.create(table_path, rows(0, 1), **kwargs)
    assert not os.path.exists(os.path.join(table_path, "_delta_log"))


def test_empty_table_and_empty_append(table_path):
    t = IndexedTable.create(table_path, rows(0, 0), index_columns=["user_id"], num_buckets=4)
    assert t.to_arrow().num_rows == 0 and t.to_arrow().schema == rows(0, 0).schema
    assert t.append(rows(0, 0)) == 1
    assert t.to_arrow().num_rows == 0


def test_bad_data_type(table_path):
    with pytest.raises(InvalidOptionError):
        IndexedTable.create(table_path, [1, 2, 3], index_columns=["x"])


def test_pandas_frame_with_index_and_nulls(table_path):
    df = pd.DataFrame({"user_id": [3, 1, 2], "amount": [1.0, None, 3.0], "name": ["a", None, "c"]}, index=[10, 11, 12])
    t = IndexedTable.create(table_path, df, index_columns=["user_id"], num_buckets=2)
    assert t.schema.names == ["user_id", "amount", "name"]
    assert sorted(t.to_arrow().column("user_id").to_pylist()) == [1, 2, 3]


def test_set_and_unset_properties(table_path):
    t = IndexedTable.create(table_path, rows(0, 10), index_columns=["user_id"], num_buckets=4)
    v = t.set_properties({"indexeddf.index.autoRefresh": "false", "owner": "team-a"})
    assert v == 1 and t.properties == {"indexeddf.index.autoRefresh": "false", "owner": "team-a"}
    assert t.history(limit=1)[0].operation == "SET TBLPROPERTIES"
    before = set(t.snapshot.files)
    t.append(rows(10, 5))  # autoRefresh off: the index gets no entries for the new files
    primary = t.snapshot.indexes["primary"]
    covered = {i for f in primary.files for i in f.fileIds}
    new_ids = {a.fileId for p, a in t.snapshot.files.items() if p not in before}
    assert new_ids and not (new_ids & covered) and primary.coveredVersion == 0
    t.unset_properties(["owner"])
    assert IndexedTable.for_path(table_path).properties == {"indexeddf.index.autoRefresh": "false"}
    with pytest.raises(InvalidOptionError):
        t.set_properties({"indexeddf.index.autoRefrsh": "false"})
    with pytest.raises(InvalidOptionError):
        t.unset_properties(["never-set"])
    with pytest.raises(InvalidOptionError, match="delta.appendOnly='yes': must be 'true' or 'false'"):
        t.set_properties({"delta.appendOnly": "yes"})  # Delta's boolean, validated as Delta does


def test_index_columns_carry_parquet_bloom_filters(table_path):
    """Any Parquet reader can skip a file's row groups on a key equality: DuckDB's own
    bloom probe never excludes a key the file holds, and excludes most it does not."""
    import duckdb

    n = 20_000
    data = pa.table({"k": pa.array(range(n), pa.int64()), "s": pa.array([f"u{i}" for i in range(n)])})
    t = IndexedTable.create(table_path, data, index_columns=["k", "s"], num_buckets=4)
    for add in t.snapshot.live_files():
        f = os.path.join(table_path, add.path)
        held = set(pq.read_table(f, columns=["k"])["k"].to_pylist())
        meta = duckdb.sql(f"SELECT path_in_schema, bloom_filter_length FROM parquet_metadata('{f}')").fetchall()
        assert all(length for _, length in meta), meta  # both index columns have a filter
        probes = sorted(held)[:50] + [k for k in range(n) if k not in held][:200]
        excluded = {k for k in probes
                    if duckdb.sql(f"SELECT bool_and(bloom_filter_excludes) FROM parquet_bloom_probe('{f}', 'k', {k})").fetchall()[0][0]}
        assert not (excluded & held)  # no false negative
        assert len(excluded) >= 0.9 * 200  # absent keys are mostly excluded (1 % false positives)
