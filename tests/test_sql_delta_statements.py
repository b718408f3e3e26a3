"""Delta's SQL statements on indexeddf tables, typed as a Delta user types them: ``DESCRIBE
HISTORY``, ``DESCRIBE DETAIL``, ``OPTIMIZE``, ``VACUUM`` and ``RESTORE``, on a catalog entry
(``CREATE TABLE ... USING indexeddf LOCATION``), on ``indexeddf.`/path``` and on ``'/path'``;
and errors a user causes in SQL writes arriving as the typed error, not wrapped in Spark's
``PYTHON_DATA_SOURCE_ERROR``.

Every answer is checked against indexeddf's Python API and a reader nobody here wrote: delta-rs
(``DeltaTable.history()``, ``metadata()``, ``protocol()``, ``get_add_actions()``, its rows of
an older version), or the raw log where delta-rs cannot open the table (deletion vectors).
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

import indexeddf
from indexeddf import IndexedTable
from indexeddf.errors import (
    IndexExistsError,
    IndexNotFoundError,
    InvalidOptionError,
    SchemaMismatchError,
    TableNotFoundError,
    VersionNotFoundError,
)

pytestmark = pytest.mark.spark

HISTORY_COLUMNS = [
    ("version", "bigint"), ("timestamp", "timestamp"), ("userId", "string"), ("userName", "string"),
    ("operation", "string"), ("operationParameters", "map<string,string>"),
    ("job", "struct<jobId:string,jobName:string,runId:string,jobOwnerId:string,triggerType:string>"),
    ("notebook", "struct<notebookId:string>"), ("clusterId", "string"), ("readVersion", "bigint"),
    ("isolationLevel", "string"), ("isBlindAppend", "boolean"), ("operationMetrics", "map<string,string>"),
    ("userMetadata", "string"), ("engineInfo", "string"),
]
DETAIL_COLUMNS = [
    ("format", "string"), ("id", "string"), ("name", "string"), ("description", "string"), ("location", "string"),
    ("createdAt", "timestamp"), ("lastModified", "timestamp"), ("partitionColumns", "array<string>"),
    ("clusteringColumns", "array<string>"), ("numFiles", "bigint"), ("sizeInBytes", "bigint"),
    ("properties", "map<string,string>"), ("minReaderVersion", "int"), ("minWriterVersion", "int"),
    ("tableFeatures", "array<string>"),
]
SHOW_INDEXES_COLUMNS = [
    ("name", "string"), ("columns", "array<string>"), ("kind", "string"), ("state", "string"), ("numBuckets", "int"),
    ("coveredVersion", "bigint"), ("numFiles", "bigint"), ("sizeInBytes", "bigint"), ("numEntries", "bigint"),
]
RESTORE_COLUMNS = ["table_size_after_restore", "num_of_files_after_restore", "num_removed_files",
                   "num_restored_files", "removed_files_size", "restored_files_size"]


def rows(keys, tag: str = "a") -> pa.Table:
    return pa.table({"k": pa.array(keys, pa.int64()), "v": pa.array([f"{tag}{k}" for k in keys])})


def ms(value: dt.datetime) -> int:
    """A timestamp column's value (PySpark gives it in local time, naive) as ms since the epoch."""
    return round(value.timestamp() * 1000)


def as_text(value) -> str:
    """A commitInfo value as Delta's history shows it: a string's text, anything else its JSON."""
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def sorted_rows(table: pa.Table) -> list[dict]:
    return sorted(table.select(["k", "v"]).to_pylist(), key=lambda r: r["k"])


def test_describe_history_is_the_logs_commit_info_newest_first(sql, tmp_path):
    path = str(tmp_path / "h")
    t = IndexedTable.create(path, rows(range(10)), ["k"], 4)
    t.append(rows([100, 101], "b"))
    t.set_properties({"indexeddf.checkpointInterval": "5"})
    t.delete("k < 3")
    sql(f"CREATE TABLE hist USING indexeddf LOCATION '{path}'")

    ours = sql("DESCRIBE HISTORY hist")
    assert sql.columns == HISTORY_COLUMNS
    assert [r["version"] for r in ours] == [3, 2, 1, 0]
    # The same rows by path, in both of Delta's spellings, and LIMIT keeps the newest.
    assert sql(f"DESC HISTORY indexeddf.`{path}`") == ours
    assert sql(f"DESCRIBE HISTORY '{path}' LIMIT 2;") == ours[:2]
    assert sql("DESCRIBE HISTORY hist LIMIT 0") == []

    python = t.history()
    theirs = DeltaTable(path).history()
    assert [h.version for h in python] == [r["version"] for r in theirs] == [r["version"] for r in ours]
    for row, py, rs in zip(ours, python, theirs):
        assert row["operation"] == py.operation == rs["operation"]
        assert ms(row["timestamp"]) == round(py.timestamp.timestamp() * 1000) == rs["timestamp"]
        assert row["readVersion"] == py.read_version == rs.get("readVersion")
        assert row["isBlindAppend"] == py.is_blind_append == rs["isBlindAppend"]
        assert row["engineInfo"] == py.engine_info == rs["engineInfo"]
        assert row["isolationLevel"] == rs["isolationLevel"]
        assert row["operationParameters"] == {k: as_text(v) for k, v in rs["operationParameters"].items()}
        assert row["operationMetrics"] == {k: as_text(v) for k, v in rs["operationMetrics"].items()}
        assert row["job"] is None and row["notebook"] is None and row["userId"] is None
    assert [r["operation"] for r in ours] == ["DELETE", "SET TBLPROPERTIES", "WRITE", "CREATE TABLE"]


def test_describe_detail_is_the_newest_versions_metadata(sql, tmp_path):
    path = str(tmp_path / "d")
    t = IndexedTable.create(path, rows(range(20)), ["k"], 4, description="orders", partition_by=[])
    t.append(rows([100, 101], "b"))
    sql(f"CREATE TABLE detail USING indexeddf LOCATION '{path}'")

    [row] = sql("DESCRIBE DETAIL detail")
    assert sql.columns == DETAIL_COLUMNS
    theirs = DeltaTable(path)
    meta, protocol = theirs.metadata(), theirs.protocol()
    adds = theirs.get_add_actions(flatten=True)
    assert row["format"] == "indexeddf"
    assert row["id"] == meta.id == t.table_id
    assert row["name"] == "spark_catalog.default.detail"
    assert row["description"] == meta.description == "orders"
    assert row["location"] == Path(path).as_uri().replace("file:///", "file:/")
    assert ms(row["createdAt"]) == meta.created_time
    last_commit = Path(path) / "_delta_log" / f"{theirs.version():020d}.json"
    assert ms(row["lastModified"]) == int(os.stat(last_commit).st_mtime * 1000)
    assert row["partitionColumns"] == meta.partition_columns == []
    assert row["clusteringColumns"] == []
    assert row["numFiles"] == adds.num_rows == len(t.snapshot.live_files())
    assert row["sizeInBytes"] == sum(adds.column("size_bytes").to_pylist())
    assert row["properties"] == meta.configuration
    assert (row["minReaderVersion"], row["minWriterVersion"]) == (protocol.min_reader_version,
                                                                  protocol.min_writer_version)
    assert row["tableFeatures"] == sorted({*(protocol.reader_features or []), *(protocol.writer_features or [])})

    # By path: the log's name (none here); a partitioned table with deletion vectors (a
    # protocol that names its features), checked against the raw log.
    p2 = str(tmp_path / "d2")
    IndexedTable.create(p2, rows(range(6)).append_column("p", pa.array(["x", "y"] * 3)), ["k"], 2,
                        name="named", partition_by=["p"], properties={"delta.enableDeletionVectors": "true"})
    [row2] = sql(f"DESCRIBE DETAIL indexeddf.`{p2}`")
    log = [json.loads(line) for line in (Path(p2) / "_delta_log" / f"{0:020d}.json").read_text().splitlines()]
    proto = next(a["protocol"] for a in log if "protocol" in a)
    assert row2["name"] == "named"
    assert row2["partitionColumns"] == ["p"]
    assert (row2["minReaderVersion"], row2["minWriterVersion"]) == (proto["minReaderVersion"], proto["minWriterVersion"])
    assert row2["tableFeatures"] == sorted({*proto.get("readerFeatures", []), *proto.get("writerFeatures", [])})
    assert "deletionVectors" in row2["tableFeatures"]


def test_statements_on_a_table_that_is_not_there_are_typed_errors(sql, spark, tmp_path):
    with pytest.raises(TableNotFoundError, match="no table nothere in the catalog"):
        sql("DESCRIBE HISTORY nothere")
    with pytest.raises(TableNotFoundError, match="no indexeddf table"):
        sql(f"DESCRIBE DETAIL '{tmp_path / 'empty'}'")
    spark.sql("CREATE TABLE plainpq (id INT) USING parquet")
    try:
        with pytest.raises(TableNotFoundError, match="not an indexeddf table .*parquet"):
            sql("DESCRIBE DETAIL plainpq")
    finally:
        spark.sql("DROP TABLE plainpq")
    # Spark's own statements still parse: DESCRIBE of a table, a query.
    assert sql("SELECT 1 AS one") == [{"one": 1}]


def test_optimize_compacts_through_the_python_api(sql, tmp_path):
    path = str(tmp_path / "o")
    t = IndexedTable.create(path, rows(range(0, 40, 4)), ["k"], 2)
    for i in range(1, 4):
        t.append(rows(range(i, 40, 4), f"x{i}"))
    before = DeltaTable(path)
    expected = sorted_rows(before.to_pyarrow_table())
    files_before = before.get_add_actions(flatten=True)
    sql(f"CREATE TABLE opt USING indexeddf LOCATION '{path}'")

    [row] = sql("OPTIMIZE opt")
    assert [c for c, _ in sql.columns] == ["path", "metrics"]
    after = DeltaTable(path)
    assert sorted_rows(after.to_pyarrow_table()) == expected  # the same rows, fewer files
    files_after = after.get_add_actions(flatten=True)
    removed = set(files_before.column("path").to_pylist()) - set(files_after.column("path").to_pylist())
    added = set(files_after.column("path").to_pylist()) - set(files_before.column("path").to_pylist())
    m = row["metrics"]
    assert row["path"] == Path(path).as_uri().replace("file:///", "file:/")
    assert (m["numFilesRemoved"], m["numFilesAdded"]) == (len(removed), len(added)) == (8, 2)
    assert m["filesRemoved"]["totalSize"] == sum(
        s for p, s in zip(files_before.column("path").to_pylist(), files_before.column("size_bytes").to_pylist())
        if p in removed)
    assert m["totalConsideredFiles"] == files_before.num_rows
    assert after.history(1)[0]["operation"] == "OPTIMIZE"
    # Nothing left to compact: no commit, no files.
    [again] = sql(f"OPTIMIZE indexeddf.`{path}`")
    assert again["metrics"]["numFilesRemoved"] == 0 and DeltaTable(path).version() == after.version()


def test_optimize_where_compacts_the_partitions_it_selects(sql, tmp_path):
    path = str(tmp_path / "z")
    data = rows(range(8)).append_column("p", pa.array(["a", "b"] * 4))
    t = IndexedTable.create(path, data, ["k"], 1, partition_by=["p"])
    for i in range(2):
        t.append(rows([100 + i, 200 + i], "c").append_column("p", pa.array(["a", "b"])))
    before = pa.table(DeltaTable(path).get_add_actions(flatten=True)).to_pylist()
    [row] = sql(f"OPTIMIZE indexeddf.`{path}` WHERE p = 'a'")
    after = pa.table(DeltaTable(path).get_add_actions(flatten=True)).to_pylist()
    # Partition a's three files became one; partition b's are the same files.
    assert sorted(r["path"] for r in after if r["partition.p"] == "b") == sorted(
        r["path"] for r in before if r["partition.p"] == "b")
    assert [len([r for r in files if r["partition.p"] == "a"]) for files in (before, after)] == [3, 1]
    m = row["metrics"]
    assert (m["numFilesRemoved"], m["numFilesAdded"], m["totalConsideredFiles"]) == (3, 1, 3)
    assert sorted_rows(DeltaTable(path).to_pyarrow_table()) == sorted_rows(t.to_arrow())
    # Delta's rule: the predicate may name partition columns only; ZORDER BY stays refused.
    with pytest.raises(InvalidOptionError, match=r"non-partition column\(s\) \['k'\]"):
        sql(f"OPTIMIZE '{path}' WHERE k > 1")
    with pytest.raises(InvalidOptionError, match="does not z-order.*create_index"):
        sql(f"OPTIMIZE '{path}' ZORDER BY (v)")
    with pytest.raises(InvalidOptionError, match="does not z-order"):
        sql(f"OPTIMIZE '{path}' WHERE p = 'b' ZORDER BY v, k")
    assert IndexedTable.for_path(path).version == 3


def test_vacuum_keeps_deltas_retention_check(sql, conf, tmp_path):
    path = str(tmp_path / "vac")
    t = IndexedTable.create(path, rows(range(10)), ["k"], 2)
    t.overwrite(rows(range(5), "b"))
    sql(f"CREATE TABLE vac USING indexeddf LOCATION '{path}'")
    with pytest.raises(InvalidOptionError, match="spark.databricks.delta.retentionDurationCheck.enabled = false"):
        sql("VACUUM vac RETAIN 0 HOURS")
    # Inside the retention nothing goes: one row, the table's location.
    location = Path(path).as_uri().replace("file:///", "file:/")
    assert sql("VACUUM vac") == [{"path": location}]
    assert sql.columns == [("path", "string")]

    conf("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    python = IndexedTable.for_path(path).vacuum(0, dry_run=True, enforce_retention=False)
    dry = sql("VACUUM vac RETAIN 0 HOURS DRY RUN")
    assert sorted(r["path"] for r in dry) == sorted(f"{location}/{f}" for f in python.files)
    # delta-rs names the same data files (indexeddf also deletes the index files beside them).
    theirs = DeltaTable(path).vacuum(retention_hours=0, dry_run=True, enforce_retention_duration=False)
    assert {Path(f).name for f in theirs} == {Path(f).name for f in python.files if f.startswith("data/")}
    assert theirs and all((Path(path) / f).exists() for f in python.files)

    assert sql(f"VACUUM '{path}' RETAIN 0 HOURS") == [{"path": location}]
    assert not any((Path(path) / f).exists() for f in python.files)
    assert sorted_rows(DeltaTable(path).to_pyarrow_table()) == sorted_rows(rows(range(5), "b"))


def test_restore_to_a_version_and_to_a_timestamp(sql, tmp_path):
    path = str(tmp_path / "r")
    t = IndexedTable.create(path, rows(range(10)), ["k"], 2)
    t.append(rows([20, 21], "b"))
    t.delete("k < 5")
    sql(f"CREATE TABLE rest USING indexeddf LOCATION '{path}'")
    before = DeltaTable(path).get_add_actions(flatten=True)

    [row] = sql("RESTORE TABLE rest TO VERSION AS OF 0")
    assert [c for c, _ in sql.columns] == RESTORE_COLUMNS
    assert sorted_rows(DeltaTable(path).to_pyarrow_table()) == sorted_rows(DeltaTable(path, version=0).to_pyarrow_table())
    assert sql("SELECT count(*) AS n FROM rest") == [{"n": 10}]
    now = DeltaTable(path).get_add_actions(flatten=True)
    assert row["num_of_files_after_restore"] == now.num_rows
    assert row["table_size_after_restore"] == sum(now.column("size_bytes").to_pylist())
    removed = set(before.column("path").to_pylist()) - set(now.column("path").to_pylist())
    restored = set(now.column("path").to_pylist()) - set(before.column("path").to_pylist())
    assert (row["num_removed_files"], row["num_restored_files"]) == (len(removed), len(restored))
    assert removed and restored

    # RESTORE by timestamp: the version committed at or before it (version 2's time).
    v2 = next(h for h in DeltaTable(path).history() if h["version"] == 2)
    at = dt.datetime.fromtimestamp(v2["timestamp"] / 1000, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    [row] = sql(f"RESTORE indexeddf.`{path}` TO TIMESTAMP AS OF '{at}'")
    assert sorted_rows(DeltaTable(path).to_pyarrow_table()) == sorted_rows(DeltaTable(path, version=2).to_pyarrow_table())
    after = DeltaTable(path).get_add_actions(flatten=True)
    sizes_now = dict(zip(now.column("path").to_pylist(), now.column("size_bytes").to_pylist()))
    sizes_after = dict(zip(after.column("path").to_pylist(), after.column("size_bytes").to_pylist()))
    removed = set(sizes_now) - set(sizes_after)
    restored = set(sizes_after) - set(sizes_now)
    assert (row["num_removed_files"], row["num_restored_files"]) == (len(removed), len(restored))
    assert row["removed_files_size"] == sum(sizes_now[p] for p in removed)
    assert row["restored_files_size"] == sum(sizes_after[p] for p in restored)
    assert set(sizes_after) == set(before.column("path").to_pylist())
    assert DeltaTable(path).history(1)[0]["operation"] == "RESTORE"

    with pytest.raises(VersionNotFoundError):
        sql("RESTORE rest TO VERSION AS OF 99")


def test_errors_of_sql_writes_are_the_typed_error(spark, tmp_path):
    """A write's typed error arrives as itself: its name and message first, no Spark wrapper,
    no Python traceback (Spark's exception stays its cause)."""
    assert indexeddf.register(spark) == indexeddf.spark.CONNECTOR
    path = str(tmp_path / "e")
    IndexedTable.create(path, rows(range(5)), ["k"], 2)

    def message(run) -> str:
        with pytest.raises(Exception) as info:  # noqa: PT011 - the message is what is checked
            run()
        return str(info.value)

    spark.sql(f"CREATE TABLE errs USING indexeddf LOCATION '{path}'")
    try:
        bad_property = message(lambda: spark.sql("ALTER TABLE errs SET TBLPROPERTIES ('indexeddf.bogus' = '1')"))
        assert bad_property.startswith("indexeddf.errors.InvalidOptionError: unknown table property 'indexeddf.bogus'")
        frame = spark.createDataFrame([(1, "x", 3)], "k long, v string, w long")
        mismatch = message(lambda: frame.write.format("indexeddf").mode("append").save(path))
        assert mismatch.startswith("indexeddf.errors.SchemaMismatchError: data does not match the table schema")
        assert "'w' is not in the table" in mismatch
        missing = message(lambda: spark.sql(f"INSERT INTO indexeddf.`{tmp_path / 'none'}` VALUES (1, 'x')"))
        assert missing.startswith("indexeddf.errors.TableNotFoundError: no indexeddf table")
        for text in (bad_property, mismatch, missing):
            assert "PYTHON_DATA_SOURCE_ERROR" not in text and "Traceback" not in text
        assert isinstance(indexeddf.spark.typed_error(Exception(mismatch)), SchemaMismatchError)
    finally:
        spark.sql("DROP TABLE errs")
    assert IndexedTable.for_path(path).version == 0


def test_index_statements_run_the_python_apis_index_operations(sql, tmp_path):
    path = str(tmp_path / "ix")
    t = IndexedTable.create(path, rows(range(20)), ["k"], 2)
    sql(f"CREATE TABLE ix USING indexeddf LOCATION '{path}'")

    assert sql("CREATE INDEX by_v ON ix (v) OPTIONS (numBuckets = 4)") == []
    [info] = [i for i in IndexedTable.for_path(path).indexes() if i.name == "by_v"]
    assert (info.columns, info.state, info.num_buckets, info.num_entries) == (["v"], "ACTIVE", 4, 20)
    with pytest.raises(IndexExistsError):
        sql(f"CREATE INDEX by_v ON TABLE indexeddf.`{path}` (v)")
    version = IndexedTable.for_path(path).version
    sql("CREATE INDEX IF NOT EXISTS by_v ON ix (v)")
    assert IndexedTable.for_path(path).version == version

    t.append(rows([100, 101], "b"))
    sql(f"REFRESH INDEX by_v ON '{path}'")
    [info] = [i for i in IndexedTable.for_path(path).indexes() if i.name == "by_v"]
    assert (info.covered_version, info.num_entries) == (IndexedTable.for_path(path).version, 22)
    # The index answers: the rows a lookup by v finds are the rows delta-rs reads.
    found = IndexedTable.for_path(path).lookup(["b100", "a3"], index="by_v").to_pylist()
    theirs = [r for r in DeltaTable(path).to_pyarrow_table().to_pylist() if r["v"] in ("b100", "a3")]
    assert sorted(r["k"] for r in found) == sorted(r["k"] for r in theirs) == [3, 100]

    sql("DROP INDEX by_v ON ix")
    assert [i.state for i in IndexedTable.for_path(path).indexes() if i.name == "by_v"] == ["DELETED"]
    with pytest.raises(IndexNotFoundError):
        sql("DROP INDEX nothing ON ix")
    sql("DROP INDEX IF EXISTS nothing ON ix")
    with pytest.raises(InvalidOptionError, match="the only option is numBuckets"):
        sql("CREATE INDEX other ON ix (v) OPTIONS ('bloom' = '1')")

    # SHOW INDEXES: one row per index, what IndexedTable.indexes() reads from the log.
    shown = sql(f"SHOW INDEXES IN indexeddf.`{path}`")
    assert [c for c, _ in sql.columns] == [c for c, _ in SHOW_INDEXES_COLUMNS] and sql.columns == SHOW_INDEXES_COLUMNS
    assert shown == [{"name": i.name, "columns": i.columns, "kind": i.kind, "state": i.state,
                      "numBuckets": i.num_buckets, "coveredVersion": i.covered_version, "numFiles": i.num_files,
                      "sizeInBytes": i.size_bytes, "numEntries": i.num_entries}
                     for i in IndexedTable.for_path(path).indexes()]
    assert [(r["name"], r["state"]) for r in shown] == [("by_v", "DELETED"), ("primary", "ACTIVE")]
    assert sql("SHOW INDEXES FROM ix") == shown


def test_convert_to_indexeddf_indexes_a_delta_table_in_place(sql, spark, tmp_path):
    from deltalake import write_deltalake

    path = str(tmp_path / "foreign")
    write_deltalake(path, rows(range(12)))
    write_deltalake(path, rows([20, 21], "b"), mode="append")
    assert sql(f"CONVERT TO INDEXEDDF delta.`{path}` INDEX BY (k) BUCKETS 4") == [] and sql.columns == []
    dt = DeltaTable(path)
    assert dt.version() == 2 and dt.history(1)[0]["operation"] == "CONVERT"
    t = IndexedTable.for_path(path)
    assert (t.index_columns, t.num_buckets) == (["k"], 4)
    ours = [r.asDict() for r in spark.read.format("indexeddf").load(path).collect()]
    assert sorted(ours, key=lambda r: r["k"]) == sorted_rows(dt.to_pyarrow_table())
    assert t.lookup([21]).to_pylist() == [{"k": 21, "v": "b21"}]
    # As Delta's CONVERT: converting again changes nothing.
    assert sql(f"CONVERT TO INDEXEDDF '{path}' INDEX BY (k)") == [] and DeltaTable(path).version() == 2



def test_convert_to_delta_makes_a_delta_table_of_parquet_files_and_indexes_it(sql, spark, tmp_path):
    import pyarrow.parquet as pq

    path = str(tmp_path / "pq")
    data = rows(range(9)).append_column("day", pa.array(["x", "y", "z"] * 3))
    pq.write_to_dataset(data, path, partition_cols=["day"])
    with pytest.raises(InvalidOptionError, match=r"expecting 0 partition column\(s\)"):
        sql(f"CONVERT TO DELTA parquet.`{path}`")
    assert sql(f"CONVERT TO DELTA parquet.`{path}` PARTITIONED BY (day STRING) INDEX BY (k) BUCKETS 2") == []
    dt = DeltaTable(path)
    assert [h["operation"] for h in dt.history()] == ["CONVERT", "CONVERT"]
    first = dt.history()[-1]["operationParameters"]
    assert (first["numFiles"], first["partitionedBy"], first["sourceFormat"]) in [
        (3, '["day"]', "parquet"), ("3", '["day"]', "parquet")]
    assert dt.metadata().partition_columns == ["day"]
    theirs = sorted(dt.to_pyarrow_table().to_pylist(), key=lambda r: r["k"])
    assert theirs == sorted(data.to_pylist(), key=lambda r: r["k"])
    ours = [r.asDict() for r in spark.read.format("indexeddf").load(path).collect()]
    assert sorted(ours, key=lambda r: r["k"]) == theirs
    assert IndexedTable.for_path(path).lookup([4]).to_pylist() == [{"k": 4, "v": "a4", "day": "y"}]
    # As Delta's: converting a Delta table again changes nothing.
    assert sql(f"CONVERT TO DELTA parquet.`{path}` PARTITIONED BY (day STRING)") == [] and DeltaTable(path).version() == 1
