"""Files written the way other engines write them, read right by every reader.

A Delta table's files need not hold the types its schema declares: Spark writes
timestamps as INT96 or TIMESTAMP_MILLIS, writers store decimals as int32/int64 or
dictionary-encode them, and a file written before a column existed lacks it. Each read
path (``to_arrow``, ``lookup``, hybrid scans of files appended after ``convert``, the
Python data source, the connector's scans, driver lookups, probing tasks, joins) must
return the table's schema and the rows DuckDB's delta extension returns. A file the log
names but storage lacks is a typed error naming the file and the version.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import sys
import time
import uuid

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

sys.path.insert(0, os.path.dirname(__file__))

from connector_helpers import read  # noqa: E402
from oracles import duckdb_delta  # noqa: E402

import indexeddf  # noqa: E402
from indexeddf import IndexedTable  # noqa: E402
from indexeddf.errors import MissingFileError, SchemaMismatchError, TableNotFoundError  # noqa: E402

UTC = dt.timezone.utc
SCHEMA = pa.schema([("k", pa.int64()), ("ts", pa.timestamp("us", "UTC")), ("d", pa.decimal128(10, 2)),
                    ("s", pa.string())])
BASE = dt.datetime(2026, 1, 1, 8, 9, 10)


def rows(keys, ts_type=pa.timestamp("us", "UTC"), with_s=True) -> pa.Table:
    """Rows of ``keys`` with the timestamp stored as ``ts_type`` (naive types hold UTC wall
    time, as Spark's INT96 does), and without ``s`` unless ``with_s``."""
    ts = pa.array([BASE + dt.timedelta(seconds=k, milliseconds=k % 1000) for k in keys], pa.timestamp("us"))
    cols = {"k": pa.array(keys, pa.int64()), "ts": ts.cast(pa.timestamp("us", "UTC")).cast(ts_type)
            if ts_type.tz else ts.cast(ts_type), "d": pa.array([k * 3 for k in keys], pa.decimal128(10, 2))}
    if with_s:
        cols["s"] = [None if k % 4 == 0 else f"s{k % 5}" for k in keys]
    return pa.table(cols)


def commit_foreign_files(path: str, files: list[tuple[pa.Table, dict]]) -> int:
    """One Delta commit adding Parquet files that pyarrow writes with each writer's
    options: what Spark or another engine would have committed."""
    version = deltalake.DeltaTable(path).version() + 1
    lines = []
    for table, options in files:
        name = f"part-{uuid.uuid4()}.parquet"
        pq.write_table(table, os.path.join(path, name), **options)
        st = os.stat(os.path.join(path, name))
        lines.append(json.dumps({"add": {
            "path": name, "partitionValues": {}, "size": st.st_size, "modificationTime": int(st.st_mtime * 1000),
            "dataChange": True, "stats": json.dumps({"numRecords": table.num_rows})}}))
    lines.append(json.dumps({"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "WRITE"}}))
    with open(os.path.join(path, "_delta_log", f"{version:020d}.json"), "x") as f:
        f.write("\n".join(lines) + "\n")
    return version


INT96 = dict(use_deprecated_int96_timestamps=True)
MILLIS_AS_INTEGERS = dict(coerce_timestamps="ms", store_decimal_as_integer=True, use_dictionary=True)


def foreign_table(path: str, index_columns: list[str]) -> str:
    """A table of files in four physical layouts, converted; then one more foreign commit
    (files the index does not cover: hybrid scans)."""
    deltalake.write_deltalake(path, rows(list(range(0, 40))))
    commit_foreign_files(path, [
        (rows(list(range(100, 140)), pa.timestamp("ns")), INT96),          # Spark's default
        (rows(list(range(200, 240)), pa.timestamp("ms")), MILLIS_AS_INTEGERS),  # naive millis, int decimals
        (rows(list(range(300, 340)), with_s=False), {}),                    # written before `s` existed
    ])
    IndexedTable.convert(path, index_columns, num_buckets=3)
    commit_foreign_files(path, [(rows(list(range(400, 440)), pa.timestamp("ns")), INT96),
                                (rows(list(range(500, 540)), with_s=False), MILLIS_AS_INTEGERS)])
    return path


def duck(path: str, where: str = "true") -> pa.Table:
    """DuckDB's delta extension's rows of the newest version."""
    return duckdb_delta().execute(f"SELECT * FROM delta_scan('{path}') WHERE {where}").to_arrow_table()


def same_rows(ours: pa.Table, theirs: pa.Table) -> bool:
    """The same rows of :data:`SCHEMA`, in any order (DuckDB's types cast to the table's)."""
    def rows(t: pa.Table) -> list[tuple]:
        return sorted(tuple(r.values()) for r in t.select(SCHEMA.names).cast(SCHEMA).to_pylist())
    return rows(ours) == rows(theirs)


PROBES = [0, 4, 101, 104, 203, 204, 305, 308, 402, 404, 506, 999]
"""Keys in every kind of file (covered and not), one with a NULL `s`, one absent."""


@pytest.mark.parametrize("index_columns", [["k"], ["ts"]])
def test_python_readers_return_the_table_schema_and_duckdbs_rows(tmp_path, index_columns):
    path = foreign_table(str(tmp_path / "t"), index_columns)
    t = IndexedTable.for_path(path)
    assert t.to_arrow().schema == SCHEMA
    assert same_rows(t.to_arrow(), duck(path))
    want = duck(path, f"k IN ({', '.join(map(str, PROBES))})")
    if index_columns == ["k"]:
        got = t.lookup(PROBES)
    else:  # a timestamp index: keys as the table's instants
        keys = t.to_arrow().filter(pa.compute.is_in(t.to_arrow()["k"], pa.array(PROBES))).select(["ts"])
        got = t.lookup(keys)
    assert got.schema == SCHEMA, got.schema
    assert same_rows(got, want)
    # One key of each file, alone: the per-file cast and the NULL column in each layout.
    for k in PROBES:
        one = t.lookup([k]) if index_columns == ["k"] else t.lookup(t.to_arrow().filter(
            pa.compute.equal(t.to_arrow()["k"], k)).select(["ts"]))
        assert one.schema == SCHEMA and same_rows(one, duck(path, f"k = {k}")), k


def test_timestamp_keys_as_text_and_mistyped_keys(tmp_path):
    path = foreign_table(str(tmp_path / "t"), ["ts"])
    t = IndexedTable.for_path(path)
    text = (BASE + dt.timedelta(seconds=104, milliseconds=104)).isoformat(sep=" ")
    assert t.lookup([text]).column("k").to_pylist() == [104]  # text without an offset: UTC
    with pytest.raises(SchemaMismatchError, match=r"lookup key 'noon' is not a value of index column 'ts' \(timestamp\)"):
        t.lookup(["noon"])


def test_the_command_says_what_a_mistyped_key_or_path_is(tmp_path, capsys):
    from indexeddf import cli

    path = foreign_table(str(tmp_path / "t"), ["k"])
    assert cli.main(["lookup", path, "notanumber"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == "error: lookup key 'notanumber' is not a value of index column 'k' (long)", err
    assert cli.main(["lookup", path, "104"]) == 0
    assert "(1 rows)" in capsys.readouterr().out
    empty = tmp_path / "empty"
    empty.mkdir()
    assert cli.main(["convert", str(empty), "--index-columns", "x"]) == 1
    err = capsys.readouterr().err
    assert "no Delta table at" in err and "create one" not in err.split(":")[0], err
    with pytest.raises(TableNotFoundError, match="no Delta table at .*convert indexes an existing Delta table"):
        IndexedTable.convert(str(empty), ["x"])


def test_a_missing_file_is_a_typed_error_naming_it_and_the_version(tmp_path):
    path = foreign_table(str(tmp_path / "t"), ["k"])
    copy = str(tmp_path / "copy")
    shutil.copytree(path, copy)
    t = IndexedTable.for_path(path)
    covered = [a.path for a in t.snapshot.live_files() if a.path.startswith("part-")]
    victim = sorted(covered)[0]
    os.remove(os.path.join(path, victim))
    pattern = rf"{victim} is missing, but the table's log names it at version {t.version}"
    with pytest.raises(MissingFileError, match=pattern):
        t.to_arrow()
    with pytest.raises(MissingFileError, match=pattern):
        t.lookup(list(range(600)))
    # convert of a table with a missing file: typed, and nothing committed.
    unconverted = str(tmp_path / "plain")
    deltalake.write_deltalake(unconverted, rows(list(range(10))))
    commit_foreign_files(unconverted, [(rows([50, 51]), {})])
    gone = [f for f in os.listdir(unconverted) if f.startswith("part-")][0]
    os.remove(os.path.join(unconverted, gone))
    with pytest.raises(MissingFileError, match=f"{gone} is missing.* at version 1"):
        IndexedTable.convert(unconverted, ["k"], num_buckets=2)
    assert deltalake.DeltaTable(unconverted).version() == 1


@pytest.mark.spark
def test_spark_readers_return_duckdbs_rows(spark, tmp_path):
    path = foreign_table(str(tmp_path / "t"), ["k"])
    want_all = duck(path)
    df = read(spark, path)  # loaded once, queried many times
    assert same_rows(pa.Table.from_pylist([r.asDict() for r in df.collect()], SCHEMA), want_all)
    few = df.where(f"k IN ({', '.join(map(str, PROBES))})")  # driver lookup
    assert same_rows(pa.Table.from_pylist([r.asDict() for r in few.collect()], SCHEMA),
                     duck(path, f"k IN ({', '.join(map(str, PROBES))})"))
    many = list(range(0, 600, 1)) + list(range(1000, 1600))  # past maxKeys: probing tasks
    got = df.where(f"k IN ({', '.join(map(str, many))})").collect()
    assert same_rows(pa.Table.from_pylist([r.asDict() for r in got], SCHEMA), want_all)
    probe = spark.createDataFrame([(k,) for k in PROBES], "k bigint")
    joined = df.join(probe, "k").collect()
    assert same_rows(pa.Table.from_pylist([r.asDict() for r in joined], SCHEMA).select(SCHEMA.names),
                     duck(path, f"k IN ({', '.join(map(str, PROBES))})"))
    indexeddf.register(spark)
    py = spark.read.format("indexeddf_python").load(path).collect()
    assert same_rows(pa.Table.from_pylist([r.asDict() for r in py], SCHEMA), want_all)
