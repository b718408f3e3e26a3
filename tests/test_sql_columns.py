"""``ALTER TABLE ... RENAME COLUMN`` and ``DROP COLUMN[S]`` from Spark SQL, with Delta's rules.

- Without column mapping both are refused with ``InvalidOptionError`` saying how to turn it on;
  Delta's own statement for that (``'delta.columnMapping.mode' = 'name'`` with
  ``'delta.minReaderVersion' = '2'``, ``'delta.minWriterVersion' = '5'``) turns it on without
  rewriting a file, each existing column (and struct field) keeping its name as its physical name.
- A rename changes only the logical name, a drop only the schema; files are untouched. Index
  and bucketing columns are refused with the reason; a partition column is renamed (Delta's
  rule), never dropped.
- Afterwards reads by name and by path, time travel to the old names, index lookups and joins,
  MERGE / UPDATE / DELETE and inserts of the new schema all work, and a catalog table sees the
  change at its next query.

Every answer is checked against readers nobody here wrote: DuckDB's delta extension and delta-rs
(its DataFusion ``QueryBuilder``; delta-rs 1.6.6's ``to_pyarrow_table()`` reads no column of a
column-mapped table, see ``test_delta_rs_arrow_reader_shows_the_new_names``).
"""

from __future__ import annotations

import os
import sys

import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder

sys.path.insert(0, os.path.dirname(__file__))

from oracles import duckdb_delta  # noqa: E402

import indexeddf  # noqa: E402
from indexeddf import IndexedTable  # noqa: E402
from indexeddf.errors import (  # noqa: E402
    IndexColumnChangeError,
    InvalidOptionError,
    SchemaEvolutionError,
)

MAPPED = {"delta.columnMapping.mode": "name"}


def rows(n: int, start: int = 0) -> pa.Table:
    keys = list(range(start, start + n))
    return pa.table({
        "k": pa.array(keys, pa.int64()),
        "a": [f"a{i}" for i in keys],
        "c": [float(i) for i in keys],
        "s": pa.array([{"x": i, "y": f"y{i}"} for i in keys]),
    })


def delta_rs(path: str, columns: str, version: int | None = None) -> list[tuple]:
    """Rows as delta-rs's query engine reads the table (it reads column mapping)."""
    qb = QueryBuilder().register("t", DeltaTable(path, version=version))
    return sorted(tuple(r.values()) for r in pa.table(qb.execute(f"SELECT {columns} FROM t").read_all()).to_pylist())


def duck(path: str, columns: str) -> list[tuple]:
    return sorted(duckdb_delta().execute(f"SELECT {columns} FROM delta_scan('{path}')").fetchall())


def spark_rows(spark, statement: str) -> list[tuple]:
    return sorted(tuple(r) for r in spark.sql(statement).collect())


@pytest.fixture
def sql(spark):
    """``sql(statement)``: the statement's rows; an indexeddf error it fails with is raised
    again as the typed Python error. Catalog entries it creates are dropped afterwards."""
    assert indexeddf.register(spark) == indexeddf.spark.CONNECTOR
    made = []

    def run(statement: str) -> list[tuple]:
        if statement.upper().startswith("CREATE TABLE"):
            made.append(statement.split()[2])
        try:
            return sorted(tuple(r) for r in spark.sql(statement).collect())
        except Exception as e:  # noqa: BLE001 - the typed error the statement failed with
            typed = indexeddf.spark.typed_error(e)
            if typed is None:
                raise
            raise typed from None

    yield run
    for name in made:
        spark.sql(f"DROP TABLE IF EXISTS {name}")


# -- turning column mapping on (no Spark) -----------------------------------------------------

def test_enabling_column_mapping_keeps_every_column_and_struct_field_readable(tmp_path):
    path = str(tmp_path / "t")
    t = IndexedTable.create(path, rows(6), index_columns=["k"], num_buckets=2)
    before = sorted(tuple(r.values()) for r in t.to_arrow().to_pylist())
    # Delta's advice, word for word: the protocol properties are taken when the change gives them.
    t.set_properties({**MAPPED, "delta.minReaderVersion": "2", "delta.minWriterVersion": "5"})
    protocol = DeltaTable(path).protocol()
    assert (protocol.min_reader_version, protocol.min_writer_version) == (2, 5)
    assert "delta.minReaderVersion" not in DeltaTable(path).metadata().configuration  # Delta keeps them out too
    fields = {f.name: f for f in t._snapshot.metadata.schema_}
    assert fields["a"].metadata["delta.columnMapping.physicalName"] == "a"
    assert all("delta.columnMapping.id" in f["metadata"] and f["metadata"]["delta.columnMapping.physicalName"]
               == f["name"] for f in __import__("json").loads(fields["s"].type)["fields"])
    assert sorted(tuple(r.values()) for r in t.to_arrow().to_pylist()) == before
    assert delta_rs(path, "k, a, c, s") == duck(path, "k, a, c, s") == before


def test_protocol_properties_beyond_what_the_change_needs_are_refused(tmp_path):
    t = IndexedTable.create(str(tmp_path / "t"), rows(2), index_columns=["k"], num_buckets=2)
    with pytest.raises(InvalidOptionError, match="raises a protocol only for a property that needs"):
        t.set_properties({"delta.minWriterVersion": "5"})
    with pytest.raises(InvalidOptionError, match="must be a version from 1 to 3"):
        t.set_properties({**MAPPED, "delta.minReaderVersion": "4"})
    with pytest.raises(InvalidOptionError, match="raises a protocol only"):
        t.set_properties({**MAPPED, "delta.minReaderVersion": "3", "delta.minWriterVersion": "7"})
    assert t.set_properties({**MAPPED, "delta.minReaderVersion": "1"}) == 1  # already met: taken


def test_python_api_renames_and_drops_struct_fields(tmp_path):
    path = str(tmp_path / "t")
    t = IndexedTable.create(path, rows(5), index_columns=["k"], num_buckets=2, properties=MAPPED)
    t.rename_column("s.x", "xx")
    t.drop_columns([("s", "y"), "c"])
    assert t.schema.names == ["k", "a", "s"]
    assert t.schema.field("s").type == pa.struct([("xx", pa.int64())])
    want = [(i, f"a{i}", {"xx": i}) for i in range(5)]
    assert sorted(tuple(r.values()) for r in t.to_arrow().to_pylist()) == want
    assert delta_rs(path, "k, a, s") == duck(path, "k, a, s") == want
    with pytest.raises(SchemaEvolutionError, match="only field"):
        t.drop_columns(["s.xx"])
    t.add_columns([pa.field("s2", pa.struct([("p", pa.int64()), ("q", pa.int64())]))])
    with pytest.raises(SchemaEvolutionError, match="has a field of that name"):
        t.rename_column("s2.p", "Q")
    assert IndexedTable.for_path(path, version=0).schema.field("s").type.names == ["x", "y"]


# -- from Spark SQL ---------------------------------------------------------------------------

@pytest.mark.spark
def test_catalog_table_needs_column_mapping_then_renames_and_drops(sql, spark, tmp_path):
    path = str(tmp_path / "t")
    IndexedTable.create(path, rows(6), index_columns=["k"], num_buckets=2)
    sql(f"CREATE TABLE cols_t USING indexeddf LOCATION '{path}'")
    with pytest.raises(InvalidOptionError, match="without column mapping.*'delta.columnMapping.mode' = 'name'"):
        sql("ALTER TABLE cols_t RENAME COLUMN a TO b")
    sql("ALTER TABLE cols_t SET TBLPROPERTIES ('delta.columnMapping.mode' = 'name', "
        "'delta.minReaderVersion' = '2', 'delta.minWriterVersion' = '5')")
    sql("ALTER TABLE cols_t RENAME COLUMN a TO b")
    sql("ALTER TABLE cols_t DROP COLUMNS (c, s.y)")  # a struct field named before mapping was on
    sql("ALTER TABLE cols_t DROP COLUMNS IF EXISTS (nope)")  # nothing to drop: no commit
    assert IndexedTable.for_path(path).version == 3
    want = [(i, f"a{i}", i) for i in range(6)]
    assert sql("SELECT k, b, s.x FROM cols_t") == want  # the entry's table reads the log at once
    assert spark.table("cols_t").columns == ["k", "b", "s"]
    assert delta_rs(path, "k, b, s['x']") == duck(path, "k, b, s.x") == want
    assert [f.name for f in DeltaTable(path).schema().fields] == ["k", "b", "s"]
    # Time travel: earlier versions keep their names and columns.
    assert sql("SELECT k, a, c FROM cols_t VERSION AS OF 1") == [(i, f"a{i}", float(i)) for i in range(6)]
    assert delta_rs(path, "k, a, c", version=1) == [(i, f"a{i}", float(i)) for i in range(6)]


@pytest.mark.spark
def test_index_columns_are_refused_and_a_partition_column_is_renamed_not_dropped(sql, tmp_path):
    path = str(tmp_path / "t")
    data = rows(4).append_column("day", pa.array(["d1", "d2", "d1", "d2"]))
    t = IndexedTable.create(path, data, index_columns=["k"], num_buckets=2, partition_by=["day"], properties=MAPPED)
    t.create_index("by_a", ["a"])
    name = f"indexeddf.`{path}`"
    with pytest.raises(IndexColumnChangeError, match="bucketed or indexed"):
        sql(f"ALTER TABLE {name} RENAME COLUMN k TO key")
    with pytest.raises(IndexColumnChangeError, match="bucketed or indexed"):
        sql(f"ALTER TABLE {name} DROP COLUMN a")
    with pytest.raises(SchemaEvolutionError, match="partitioned by them"):
        sql(f"ALTER TABLE {name} DROP COLUMN day")
    assert IndexedTable.for_path(path).version == t.version  # nothing committed
    # Delta renames a partition column under column mapping: partitionValues keep its physical name.
    sql(f"ALTER TABLE {name} RENAME COLUMN day TO dt")
    assert DeltaTable(path).metadata().partition_columns == ["dt"]
    assert sql(f"SHOW PARTITIONS {name}") == [("dt=d1",), ("dt=d2",)]
    want = [(0, "d1"), (2, "d1")]
    assert sql(f"SELECT k, dt FROM {name} WHERE dt = 'd1'") == [r for r in delta_rs(path, "k, dt") if r[1] == "d1"] == want


@pytest.mark.spark
def test_after_rename_and_drop_lookups_joins_changes_and_inserts_work(sql, spark, tmp_path):
    path = str(tmp_path / "t")
    IndexedTable.create(path, rows(20), index_columns=["k"], num_buckets=2, properties=MAPPED)
    name = f"indexeddf.`{path}`"
    sql(f"ALTER TABLE {name} RENAME COLUMN a TO b")
    sql(f"ALTER TABLE {name} DROP COLUMN c")
    sql(f"ALTER TABLE {name} RENAME COLUMN s.x TO xx")
    assert sql(f"SELECT k, b, s.xx FROM {name} WHERE k = 7") == [(7, "a7", 7)]  # an index lookup
    spark.createDataFrame([(3, "p"), (11, "q")], "k long, tag string").createOrReplaceTempView("cols_probe")
    assert sql(f"SELECT p.k, t.b FROM cols_probe p JOIN {name} t ON p.k = t.k") == [(3, "a3"), (11, "a11")]
    sql(f"INSERT INTO {name} SELECT 20L AS k, 'new' AS b, named_struct('xx', 20L, 'y', 'y20') AS s")
    sql(f"UPDATE {name} SET b = 'upd' WHERE k = 4")
    sql(f"DELETE FROM {name} WHERE k = 5")
    spark.createDataFrame([(6, "m6"), (30, "m30")], "k long, b string").createOrReplaceTempView("cols_source")
    sql(f"MERGE INTO {name} t USING cols_source s ON t.k = s.k WHEN MATCHED THEN UPDATE SET b = s.b "
        "WHEN NOT MATCHED THEN INSERT (k, b) VALUES (s.k, s.b)")
    got = sql(f"SELECT k, b, s.xx, s.y FROM {name}")
    assert got == delta_rs(path, "k, b, s['xx'], s['y']") == duck(path, "k, b, s.xx, s.y")
    want = {i: (i, f"a{i}", i, f"y{i}") for i in range(20)}
    want.update({20: (20, "new", 20, "y20"), 4: (4, "upd", 4, "y4"), 6: (6, "m6", 6, "y6"),
                 30: (30, "m30", None, None)})
    del want[5]
    assert got == sorted(want.values(), key=lambda r: r[0])
    assert sql(f"SELECT k, a, c FROM {name} VERSION AS OF 0 WHERE k = 4") == [(4, "a4", 4.0)]


def test_delta_rs_arrow_reader_shows_the_new_names(tmp_path):
    """delta-rs 1.6.6's ``to_pyarrow_table()`` has the new names but reads no value of a
    column-mapped table (every column NULL, also for a table it never saw renamed: its
    ``pyarrow.dataset`` path cannot tell physical from logical names, delta-io/delta-rs#930); its
    query engine above reads the rows. Kept as a record of what that reader does."""
    path = str(tmp_path / "t")
    t = IndexedTable.create(path, rows(3), index_columns=["k"], num_buckets=2, properties=MAPPED)
    t.rename_column("a", "b")
    got = DeltaTable(path).to_pyarrow_table()
    assert got.column_names == ["k", "b", "c", "s"]
    assert delta_rs(path, "k, b") == [(i, f"a{i}") for i in range(3)]
