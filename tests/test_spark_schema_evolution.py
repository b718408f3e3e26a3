"""Schemas that grow, from Spark: ``mergeSchema`` and ``overwriteSchema`` on
``df.write.format("indexeddf")``, the session conf ``spark.indexeddf.schema.autoMerge.enabled``,
a stream that starts writing a new column, and the JVM connector's reads (scans, driver
lookups) of files written before a column was added or widened."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

import indexeddf
from indexeddf import IndexedTable
from indexeddf.errors import SchemaMismatchError

AUTO_MERGE = "spark.indexeddf.schema.autoMerge.enabled"


@pytest.fixture(scope="module", autouse=True)
def registered(spark):
    indexeddf.register(spark)


def start(path: str) -> IndexedTable:
    return IndexedTable.create(path, pa.table({"k": pa.array(range(6), pa.int64()),
                                               "b": pa.array([1, -2, 3, 4, 5, 6], pa.int8())}), ["k"], 2)


def collect(df) -> list[tuple]:
    return sorted(tuple(r) for r in df.collect())


def test_a_loaded_dataframe_keeps_its_version_and_a_new_load_sees_the_new_column(spark, table_path):
    """The way people use it: a DataFrame loaded before the change answers as before; a
    load after it has the new column, NULL in the rows written before (Spark's Parquet
    reader with the table's schema), through scans and driver lookups alike, and the
    byte column widened to integer reads the old file's values."""
    t = start(table_path)
    before = spark.read.format("indexeddf").load(table_path)
    assert collect(before.where("k < 2")) == [(0, 1), (1, -2)]
    t.append(pa.table({"k": pa.array([10], pa.int64()), "b": pa.array([100_000], pa.int32()), "x": ["new"]}),
             schema_mode="merge")
    t.add_columns([("n", "long", "a count")])
    assert before.columns == ["k", "b"] and collect(before.where("k < 2")) == [(0, 1), (1, -2)]
    assert before.count() == 6
    after = spark.read.format("indexeddf").load(table_path)
    assert after.columns == ["k", "b", "x", "n"]
    assert dict(after.dtypes)["b"] == "int"
    assert collect(after) == [(0, 1, None, None), (1, -2, None, None), (2, 3, None, None), (3, 4, None, None),
                              (4, 5, None, None), (5, 6, None, None), (10, 100_000, "new", None)]
    # Few keys: answered on the driver from the index; the old file lacks x and n.
    assert collect(after.where("k IN (1, 10)")) == [(1, -2, None, None), (10, 100_000, "new", None)]
    assert collect(after.where("x IS NULL").select("k")) == [(k,) for k in range(6)]
    assert after.schema["n"].metadata.get("comment") == "a count"
    # Time travel reads the old schema.
    assert spark.read.format("indexeddf").option("versionAsOf", 0).load(table_path).columns == ["k", "b"]


def test_merge_schema_option_on_appends_and_overwrites(spark, table_path):
    start(table_path)
    new = spark.createDataFrame([(20, "p")], "k long, x string")
    with pytest.raises(Exception, match="SchemaMismatchError"):
        new.write.format("indexeddf").mode("append").save(table_path)
    assert IndexedTable.for_path(table_path).version == 0
    new.write.format("indexeddf").mode("append").option("mergeSchema", "true").save(table_path)
    t = IndexedTable.for_path(table_path)
    assert t.schema.names == ["k", "b", "x"] and t.version == 1
    assert t.history(1)[0].parameters.get("mergeSchema") is True
    assert collect(spark.read.format("indexeddf").load(table_path).where("k >= 5")) == [(5, 6, None), (20, None, "p")]
    # An overwrite that merges keeps the columns and adds the new one.
    spark.createDataFrame([(30, 1.5)], "k long, f double").write.format("indexeddf").mode("overwrite") \
        .option("mergeSchema", "true").save(table_path)
    assert collect(spark.read.format("indexeddf").load(table_path)) == [(30, None, None, 1.5)]
    # overwriteSchema replaces it (and wins over mergeSchema, as in Delta).
    spark.createDataFrame([(40, "q")], "k long, y string").write.format("indexeddf").mode("overwrite") \
        .option("overwriteSchema", "true").option("mergeSchema", "true").save(table_path)
    assert spark.read.format("indexeddf").load(table_path).columns == ["k", "y"]


@pytest.mark.parametrize("frame, error", [
    ("SELECT CAST(1 AS BIGINT) AS k, 1.5D AS b", "TypeChangeError"),
    ("SELECT CAST(1 AS BIGINT) AS k, 'x' AS B2, 'y' AS b2", "ColumnCaseConflictError"),
    ("SELECT CAST(1 AS BIGINT) AS k, 'x' AS B", "ColumnCaseConflictError"),
    ("SELECT 'x' AS s", "IndexColumnChangeError"),
])
def test_merge_schema_refusals_stop_the_write_before_any_task(spark, table_path, frame, error):
    start(table_path)
    with pytest.raises(Exception, match=error):
        spark.sql(frame).write.format("indexeddf").mode("append").option("mergeSchema", "true").save(table_path)
    t = IndexedTable.for_path(table_path)
    assert t.version == 0 and t.schema.names == ["k", "b"]


def test_session_auto_merge(spark, conf, table_path):
    start(table_path)
    df = spark.createDataFrame([(50, "m")], "k long, z string")
    conf(AUTO_MERGE, "true")
    with pytest.raises(Exception, match="SchemaMismatchError"):  # an explicit false wins, as in Delta
        df.write.format("indexeddf").mode("append").option("mergeSchema", "false").save(table_path)
    df.write.format("indexeddf").mode("append").save(table_path)
    assert IndexedTable.for_path(table_path).schema.names == ["k", "b", "z"]
    conf(AUTO_MERGE, "false")
    with pytest.raises(Exception, match="SchemaMismatchError"):
        spark.createDataFrame([(52, 1)], "k long, w int").write.format("indexeddf").mode("append").save(table_path)


def test_a_stream_that_starts_writing_a_new_column(spark, tmp_path):
    """Micro-batches of a stream whose source grows a column: with mergeSchema the first
    batch that has it adds it (one commit with the rows), earlier rows read it as NULL."""
    src, table, ck = tmp_path / "src", str(tmp_path / "t"), tmp_path / "ck"
    src.mkdir()
    with open(src / "part-0.json", "w") as f:
        f.write(json.dumps({"id": 1, "tag": "a"}) + "\n")

    def run(schema: str):
        q = (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(str(src))
             .writeStream.format("indexeddf").option("checkpointLocation", str(ck)).option("txnAppId", "grow")
             .option("indexColumns", "id").option("numBuckets", 2).option("mergeSchema", "true")
             .trigger(availableNow=True).start(table))
        q.awaitTermination()

    run("id long, tag string")
    with open(src / "part-1.json", "w") as f:
        f.write(json.dumps({"id": 2, "tag": "b", "score": 7.5}) + "\n")
    run("id long, tag string, score double")  # the query restarted with the wider source schema
    t = IndexedTable.for_path(table)
    assert t.schema.names == ["id", "tag", "score"]
    assert sorted(t.to_arrow().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "tag": "a", "score": None}, {"id": 2, "tag": "b", "score": 7.5}]
    assert t.history(1)[0].operation == "STREAMING UPDATE"


def test_alter_table_add_columns_commits_metadata_and_updates_the_catalog_entry(spark, table_path):
    """ALTER TABLE ADD COLUMNS on a catalog table: one metadata commit to the log (no data
    file), comments kept as Delta keeps them, the catalog entry shows the new columns, and a
    refused change leaves both the log and the entry as they were."""
    t = start(table_path)
    files = set(t.snapshot.files)
    spark.sql(f"CREATE TABLE grown USING indexeddf LOCATION '{table_path}'")
    try:
        spark.sql("ALTER TABLE grown ADD COLUMNS (w bigint COMMENT 'a weight', note string)")
        t.update_incremental()
        assert t.version == 1 and set(t.snapshot.files) == files
        assert t.schema.names == ["k", "b", "w", "note"] and t.column_comments == {"w": "a weight"}
        assert t.history(1)[0].operation == "ADD COLUMNS"
        described = {r.col_name: (r.data_type, r.comment) for r in spark.sql("DESCRIBE TABLE grown").collect()}
        assert described["w"] == ("bigint", "a weight") and described["note"][0] == "string"
        assert spark.sql("SELECT count(*) AS n FROM grown WHERE w IS NULL AND note IS NULL").collect()[0].n == 6
        spark.sql("INSERT INTO grown VALUES (7, 1, 70, 'seven')")
        assert collect(spark.sql("SELECT k, w, note FROM grown WHERE k = 7")) == [(7, 70, "seven")]
        for bad, error in (("K2 bigint, k2 bigint", "ColumnCaseConflictError|already exists|duplicate"),
                           ("NOTE string", "ColumnCaseConflictError|already exists"),
                           ("st struct<a: variant>", "UnsupportedTypeError")):  # a struct of a type not stored
            with pytest.raises(Exception, match=error):
                spark.sql(f"ALTER TABLE grown ADD COLUMNS ({bad})")
        assert t.update_incremental().version == 2
        assert spark.table("grown").columns == ["k", "b", "w", "note"]
        # The comment is in the schema JSON of the log, where delta-rs and Delta read it.
        import deltalake
        fields = json.loads(deltalake.DeltaTable(table_path).schema().to_json())["fields"]
        assert fields[2]["metadata"] == {"comment": "a weight"}
    finally:
        spark.sql("DROP TABLE IF EXISTS grown")


def test_indexed_table_writes_of_spark_dataframes_take_schema_mode(spark, table_path):
    t = start(table_path)
    df = spark.createDataFrame([(60, "s")], "k long, tag string")
    with pytest.raises(SchemaMismatchError, match="schema_mode='merge'"):
        t.append(df)
    t.append(df, schema_mode="merge")
    assert t.schema.names == ["k", "b", "tag"] and t.lookup([60], columns=["b", "tag"]).to_pylist() == [
        {"b": None, "tag": "s"}]
    t.overwrite(spark.createDataFrame([(61, 2.5)], "k long, f double"), schema_mode="overwrite")
    assert t.schema.names == ["k", "f"] and t.to_arrow().to_pylist() == [{"k": 61, "f": 2.5}]


def test_alter_table_add_columns_on_a_path(spark, table_path):
    """``ALTER TABLE indexeddf.`/path` ADD COLUMNS``: the same metadata commit as on a catalog
    table (no data file written, comments kept); a DataFrame loaded before keeps its version,
    a new read sees the columns, NULL in the old rows, as delta-rs and DuckDB's delta
    extension read them; what a V1 table's ADD COLUMNS cannot take is refused, typed."""
    import deltalake
    from oracles import duckdb_delta

    t = start(table_path)
    files = set(t.snapshot.files)
    name = f"indexeddf.`{table_path}`"
    before = spark.read.format("indexeddf").load(table_path)
    assert collect(before.where("k = 1")) == [(1, -2)]
    spark.sql(f"ALTER TABLE {name} ADD COLUMNS (w bigint COMMENT 'a weight', note string)")
    t.update_incremental()
    assert t.version == 1 and set(t.snapshot.files) == files
    assert t.schema.names == ["k", "b", "w", "note"] and t.column_comments == {"w": "a weight"}
    assert t.history(1)[0].operation == "ADD COLUMNS"
    assert before.columns == ["k", "b"] and before.count() == 6 and collect(before.where("k = 1")) == [(1, -2)]
    after = spark.sql(f"SELECT * FROM {name}")
    assert after.columns == ["k", "b", "w", "note"]
    assert after.schema["w"].metadata.get("comment") == "a weight"
    want = [(k, b, None, None) for k, b in zip(range(6), [1, -2, 3, 4, 5, 6])]
    assert collect(after) == want
    assert collect(after.where("k IN (1, 2)")) == want[1:3]  # driver lookup: the old file lacks w and note
    spark.sql(f"INSERT INTO {name} VALUES (7, 1, 70, 'seven')")
    want.append((7, 1, 70, "seven"))
    assert collect(spark.sql(f"SELECT * FROM {name}")) == want
    theirs = duckdb_delta().execute(f"SELECT k, b, w, note FROM delta_scan('{table_path}')").fetchall()
    assert sorted(theirs) == want
    rs = deltalake.DeltaTable(table_path).to_pyarrow_table().to_pylist()
    assert sorted(tuple(r.values()) for r in rs) == want
    fields = json.loads(deltalake.DeltaTable(table_path).schema().to_json())["fields"]
    assert fields[2]["metadata"] == {"comment": "a weight"}
    for bad, error in (("x int NOT NULL", "InvalidOptionError.*NOT NULL"),
                       ("x int AFTER k", "InvalidOptionError.*FIRST / AFTER"),
                       ("x int DEFAULT 3", "InvalidOptionError.*DEFAULT"),
                       ("NOTE string", "ColumnCaseConflictError|already exists")):
        with pytest.raises(Exception, match=error):
            spark.sql(f"ALTER TABLE {name} ADD COLUMNS ({bad})")
    assert IndexedTable.for_path(table_path).version == 2
