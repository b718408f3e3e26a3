"""indexeddf tables in Spark's catalog, typed as a Delta user types SQL: table properties
and schemas are the table's log's, never a copy in the metastore.

- ``TBLPROPERTIES`` of ``CREATE TABLE`` (with columns, ``AS SELECT``, managed) reach the create
  commit's ``metaData.configuration``; ``ALTER TABLE SET / UNSET TBLPROPERTIES`` commit to the
  log; unknown ``indexeddf.*`` / ``delta.*`` names are refused with ``InvalidOptionError``;
  ``SHOW TBLPROPERTIES`` lists the log's configuration, whoever set it.
- A table made from non-nullable columns (``AS SELECT id FROM range(10)``, ``saveAsTable``)
  reads and takes inserts (its log makes every column nullable).
- A catalog table reads the schema its log has at each query, after a change of schema made
  by another route (``IndexedTable.append(..., schema_mode="merge")``, ``mergeSchema``), and the
  properties, columns and partitioning another process or a statement by path gave it.

Every check of the log is made through indexeddf's Python API and through a reader nobody
here wrote: delta-rs (``DeltaTable(path).metadata().configuration``), the raw commit JSON where
delta-rs cannot open the table (deletion vectors), DuckDB's delta extension for rows.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

sys.path.insert(0, os.path.dirname(__file__))

from oracles import duckdb_delta  # noqa: E402

import indexeddf  # noqa: E402
from indexeddf import IndexedTable  # noqa: E402
from indexeddf.errors import InvalidOptionError, SchemaMismatchError  # noqa: E402

pytestmark = pytest.mark.spark


def configuration(path: str) -> dict[str, str]:
    """The newest version's configuration through indexeddf's Python API."""
    return dict(IndexedTable.for_path(path)._snapshot.metadata.configuration)


def delta_rs_configuration(path: str) -> dict[str, str]:
    """The newest version's configuration as delta-rs reads the log."""
    return dict(DeltaTable(path).metadata().configuration)


def raw_configuration(path: str, version: int) -> dict[str, str]:
    """A commit's ``metaData.configuration`` from the log file itself (no Delta library)."""
    commit = Path(path) / "_delta_log" / f"{version:020d}.json"
    for line in commit.read_text().splitlines():
        action = json.loads(line)
        if "metaData" in action:
            return action["metaData"]["configuration"]
    raise AssertionError(f"no metaData in {commit}")


def shown(sql, name: str) -> dict[str, str]:
    return {r["key"]: r["value"] for r in sql(f"SHOW TBLPROPERTIES {name}")}


def duck_rows(path: str, columns: str) -> list[tuple]:
    return sorted(duckdb_delta().execute(f"SELECT {columns} FROM delta_scan('{path}')").fetchall())


def test_create_table_tblproperties_reach_the_create_commit(sql, spark, tmp_path):
    path = str(tmp_path / "events")
    sql(f"CREATE TABLE events (id bigint, v string) USING indexeddf OPTIONS (indexColumns 'id') "
        f"LOCATION '{path}' TBLPROPERTIES ('delta.enableDeletionVectors' = 'true', "
        "'indexeddf.checkpointInterval' = '5', 'team' = 'search')")
    wanted = {"delta.enableDeletionVectors": "true", "indexeddf.checkpointInterval": "5", "team": "search"}
    assert wanted.items() <= configuration(path).items()
    # delta-rs 1.6.6 cannot open a table with deletion vectors: the commit's own JSON.
    assert wanted.items() <= raw_configuration(path, 0).items()
    assert "deletionVectors" in IndexedTable.for_path(path)._snapshot.protocol.readerFeatures
    assert IndexedTable.for_path(path).version == 0  # in the create commit, not a second one
    assert shown(sql, "events") == raw_configuration(path, 0)  # with indexeddf.indexColumns / numBuckets
    # The entry keeps no copy of them; DESCRIBE shows the log's (IndexedDFCatalog loads the table from it).
    entry = spark._jsparkSession.sessionState().catalog().getTableRawMetadata(
        spark._jvm.org.apache.spark.sql.catalyst.TableIdentifier.apply("events"))
    assert entry.properties().isEmpty()
    described = {r["col_name"]: r["data_type"] for r in sql("DESCRIBE TABLE EXTENDED events")}
    assert "team=search" in described["Table Properties"]
    # Deletion vectors are in force: a DELETE marks rows instead of rewriting the file.
    sql("INSERT INTO events VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    sql("DELETE FROM events WHERE id = 2")
    assert any(a.deletionVector is not None for a in IndexedTable.for_path(path)._snapshot.live_files())
    assert sorted(r["id"] for r in sql("SELECT id FROM events")) == [1, 3]


def test_ctas_of_non_nullable_columns_with_tblproperties(sql, spark, tmp_path):
    path = str(tmp_path / "numbers")
    sql(f"CREATE TABLE numbers USING indexeddf OPTIONS (indexColumns 'id') LOCATION '{path}' "
        "TBLPROPERTIES ('indexeddf.index.autoRefresh' = 'false', 'delta.logRetentionDuration' = 'interval 60 days') "
        "AS SELECT id FROM range(10)")
    wanted = {"indexeddf.index.autoRefresh": "false", "delta.logRetentionDuration": "interval 60 days"}
    assert wanted.items() <= configuration(path).items()
    assert wanted.items() <= delta_rs_configuration(path).items()
    # range(10)'s id is NOT NULL; the table's is nullable, and the catalog reads and inserts.
    assert sql("SELECT count(*) AS n FROM numbers") == [{"n": 10}]
    sql("INSERT INTO numbers VALUES (10), (NULL)")
    assert sql("SELECT count(*) AS n FROM numbers") == [{"n": 12}]
    assert spark.table("numbers").schema["id"].nullable
    assert duck_rows(path, "count(*)") == [(12,)]


def test_managed_ctas_and_save_as_table(sql, spark):
    sql("CREATE TABLE managed_numbers USING indexeddf OPTIONS (indexColumns 'id') "
        "TBLPROPERTIES ('indexeddf.checkpointInterval' = '3') AS SELECT id, id * 2 AS twice FROM range(5)")
    location = spark.sql("DESCRIBE TABLE EXTENDED managed_numbers").where("col_name = 'Location'").first().data_type
    path = location.removeprefix("file:")
    assert configuration(path)["indexeddf.checkpointInterval"] == "3"
    assert delta_rs_configuration(path)["indexeddf.checkpointInterval"] == "3"
    sql("INSERT INTO managed_numbers VALUES (5, 10)")
    assert sql("SELECT sum(twice) AS s FROM managed_numbers") == [{"s": 30}]

    spark.range(4).write.format("indexeddf").option("indexColumns", "id").saveAsTable("saved_numbers")
    try:
        sql("INSERT INTO saved_numbers VALUES (4)")
        assert sql("SELECT count(*) AS n FROM saved_numbers") == [{"n": 5}]
        assert spark.table("saved_numbers").schema["id"].nullable
    finally:
        spark.sql("DROP TABLE IF EXISTS saved_numbers")


@pytest.mark.parametrize("name", ["indexeddf.checkpointIntervl", "delta.enableDeletionVector", "delta.minReaderVersion"])
def test_create_refuses_unknown_properties(sql, spark, tmp_path, name):
    path = tmp_path / "typo"
    with pytest.raises(InvalidOptionError, match=name.replace(".", r"\.")) as info:
        sql(f"CREATE TABLE typo (id bigint) USING indexeddf OPTIONS (indexColumns 'id') LOCATION '{path}' "
            f"TBLPROPERTIES ('{name}' = '5')")
    if name != "delta.minReaderVersion":
        assert "known:" in str(info.value) and "indexeddf.checkpointInterval" in str(info.value)
    assert not spark.catalog.tableExists("typo")
    assert not (path / "_delta_log").exists()


def test_alter_table_set_and_unset_tblproperties_commit_to_the_log(sql, tmp_path):
    path = str(tmp_path / "t")
    t = IndexedTable.create(path, pa.table({"k": pa.array([1, 2, 3], pa.int64())}), index_columns=["k"], num_buckets=2)
    sql(f"CREATE TABLE props USING indexeddf LOCATION '{path}'")
    sql("ALTER TABLE props SET TBLPROPERTIES ('indexeddf.checkpointInterval' = '7', 'team' = 'search', "
        "'delta.isolationLevel' = 'Serializable')")
    wanted = {"indexeddf.checkpointInterval": "7", "team": "search", "delta.isolationLevel": "Serializable"}
    assert wanted.items() <= configuration(path).items()
    assert wanted.items() <= delta_rs_configuration(path).items()
    assert t.update_incremental().history()[0].operation == "SET TBLPROPERTIES"
    assert shown(sql, "props") == delta_rs_configuration(path)
    assert sql("SHOW TBLPROPERTIES props ('team')") == [{"key": "team", "value": "search"}]

    version = IndexedTable.for_path(path).version
    for bad, match in [("'indexeddf.checkpointIntervl' = '3'", "unknown table property.*known:"),
                       ("'delta.enableDeletionVector' = 'true'", "unknown table property.*known:"),
                       ("'indexeddf.checkpointInterval' = '0'", "positive integer"),
                       ("'delta.feature.deletionVectors' = 'supported'", "protocol")]:
        with pytest.raises(InvalidOptionError, match=match):
            sql(f"ALTER TABLE props SET TBLPROPERTIES ({bad})")
    assert IndexedTable.for_path(path).version == version  # nothing committed

    sql("ALTER TABLE props UNSET TBLPROPERTIES ('team')")
    assert "team" not in configuration(path) and "team" not in delta_rs_configuration(path)
    with pytest.raises(InvalidOptionError, match="not set on this table"):
        sql("ALTER TABLE props UNSET TBLPROPERTIES ('team')")
    version = IndexedTable.for_path(path).version
    sql("ALTER TABLE props UNSET TBLPROPERTIES IF EXISTS ('team')")
    assert IndexedTable.for_path(path).version == version  # nothing to unset: no commit

    # Changed by another route, SHOW TBLPROPERTIES shows what is in force.
    IndexedTable.for_path(path).set_properties({"indexeddf.checkpointInterval": "9"})
    assert shown(sql, "props")["indexeddf.checkpointInterval"] == "9"

    # comment is the table's description in the log (as in Delta) and the entry's comment.
    sql("COMMENT ON TABLE props IS 'clicks by key'")
    assert IndexedTable.for_path(path)._snapshot.metadata.description == "clicks by key"
    assert "comment" not in configuration(path)
    described = {r["col_name"]: r["data_type"] for r in sql("DESCRIBE TABLE EXTENDED props")}
    assert described["Comment"] == "clicks by key"


def test_tblproperties_on_a_path(sql, tmp_path):
    path = str(tmp_path / "t")
    IndexedTable.create(path, pa.table({"k": pa.array([1], pa.int64())}), index_columns=["k"], num_buckets=2)
    sql(f"ALTER TABLE indexeddf.`{path}` SET TBLPROPERTIES ('indexeddf.targetRowGroupBytes' = '4096')")
    assert configuration(path)["indexeddf.targetRowGroupBytes"] == "4096"
    assert delta_rs_configuration(path)["indexeddf.targetRowGroupBytes"] == "4096"
    assert shown(sql, f"indexeddf.`{path}`") == delta_rs_configuration(path)
    sql(f"ALTER TABLE indexeddf.`{path}` UNSET TBLPROPERTIES ('indexeddf.targetRowGroupBytes')")
    assert "indexeddf.targetRowGroupBytes" not in delta_rs_configuration(path)


def test_registering_an_existing_table_takes_only_its_own_properties(sql, spark, tmp_path):
    path = str(tmp_path / "t")
    IndexedTable.create(path, pa.table({"k": pa.array([1], pa.int64())}), index_columns=["k"], num_buckets=2,
                        properties={"indexeddf.checkpointInterval": "4"})
    with pytest.raises(InvalidOptionError, match="delta.appendOnly='true' \\(the table: not set\\)"):
        sql(f"CREATE TABLE existing USING indexeddf LOCATION '{path}' TBLPROPERTIES ('delta.appendOnly' = 'true')")
    assert not spark.catalog.tableExists("existing")
    assert "delta.appendOnly" not in configuration(path) and IndexedTable.for_path(path).version == 0
    sql(f"CREATE TABLE existing USING indexeddf LOCATION '{path}' TBLPROPERTIES ('indexeddf.checkpointInterval' = '4')")
    assert sql("SELECT k FROM existing") == [{"k": 1}]


def test_a_catalog_table_reads_the_schema_its_log_has_now(sql, spark, tmp_path):
    path = str(tmp_path / "t")
    t = IndexedTable.create(path, pa.table({"k": pa.array([1, 2], pa.int64())}), index_columns=["k"], num_buckets=2)
    sql(f"CREATE TABLE evolving USING indexeddf LOCATION '{path}'")
    assert sql("SELECT * FROM evolving ORDER BY k") == [{"k": 1}, {"k": 2}]

    t.append(pa.table({"k": pa.array([3], pa.int64()), "w": ["x"]}), schema_mode="merge")
    assert sql("SELECT * FROM evolving ORDER BY k") == [{"k": 1, "w": None}, {"k": 2, "w": None}, {"k": 3, "w": "x"}]
    assert spark.table("evolving").columns == ["k", "w"]
    sql("INSERT INTO evolving VALUES (4, 'y')")
    sql("INSERT INTO evolving (k) VALUES (5)")

    (spark.createDataFrame([(6, "z", 1.5)], "k long, w string, d double")
     .write.format("indexeddf").mode("append").option("mergeSchema", "true").save(path))
    rows = sql("SELECT k, w, d FROM evolving WHERE k >= 4 ORDER BY k")
    assert rows == [{"k": 4, "w": "y", "d": None}, {"k": 5, "w": None, "d": None}, {"k": 6, "w": "z", "d": 1.5}]
    assert sql("SELECT d FROM evolving WHERE k = 6") == [{"d": 1.5}]  # the index lookup sees the new column
    assert duck_rows(path, "k, w, d") == [(1, None, None), (2, None, None), (3, "x", None), (4, "y", None),
                                          (5, None, None), (6, "z", 1.5)]
    # A schema given to a read of the path must still be the table's.
    with pytest.raises(Exception, match="SchemaMismatchError"):
        spark.read.format("indexeddf").schema("k long").load(path).count()
    assert spark.read.format("indexeddf").schema("k long not null, w string, d double").load(path).count() == 6


def test_schema_mismatch_is_typed(spark, tmp_path):
    path = str(tmp_path / "t")
    IndexedTable.create(path, pa.table({"k": pa.array([1], pa.int64())}), index_columns=["k"], num_buckets=2)
    with pytest.raises(Exception) as info:
        spark.read.format("indexeddf").schema("k int").load(path).collect()
    assert isinstance(indexeddf.spark.typed_error(info.value), SchemaMismatchError)


def test_a_catalog_table_follows_changes_another_process_and_a_path_make(sql, spark, tmp_path):
    """Another process (the Python API, no Spark) sets a property and adds a column; a replace
    by path repartitions the table: the catalog entry shows each at its next statement
    (properties, columns, partitions, DESCRIBE DETAIL), as delta-rs reads the log."""
    import subprocess

    path = str(tmp_path / "t")
    IndexedTable.create(path, pa.table({"k": pa.array([1, 2], pa.int64())}), index_columns=["k"], num_buckets=2)
    sql(f"CREATE TABLE followed USING indexeddf LOCATION '{path}'")
    assert "indexeddf.index.autoRefresh" not in shown(sql, "followed")
    other = ("import sys, pyarrow as pa; from indexeddf import IndexedTable; t = IndexedTable.for_path(sys.argv[1]); "
             "t.set_properties({'indexeddf.index.autoRefresh': 'false'}); "
             "t.append(pa.table({'k': pa.array([3], pa.int64()), 'p': ['b']}), schema_mode='merge')")
    subprocess.run([sys.executable, "-c", other, path], check=True, timeout=120)
    assert shown(sql, "followed")["indexeddf.index.autoRefresh"] == "false" == delta_rs_configuration(path)[
        "indexeddf.index.autoRefresh"]
    assert spark.table("followed").columns == ["k", "p"]
    assert sql("SELECT k, p FROM followed ORDER BY k") == [{"k": 1, "p": None}, {"k": 2, "p": None}, {"k": 3, "p": "b"}]

    sql(f"REPLACE TABLE indexeddf.`{path}` USING indexeddf PARTITIONED BY (p) CLUSTERED BY (k) INTO 2 BUCKETS "
        "AS SELECT k, p FROM followed")
    assert DeltaTable(path).metadata().partition_columns == ["p"]
    assert sql("DESCRIBE DETAIL followed")[0]["partitionColumns"] == ["p"]
    assert sorted(r["partition"] for r in sql("SHOW PARTITIONS followed")) == ["p=__HIVE_DEFAULT_PARTITION__", "p=b"]
    assert sql("SELECT k FROM followed WHERE p = 'b'") == [{"k": 3}]
