"""Delta's CHECK constraints (``delta.constraints.<name>``, writer feature ``checkConstraints``):
added by ``IndexedTable.add_constraint`` / ``ALTER TABLE ... ADD CONSTRAINT`` after the table's
rows are checked, enforced on every write (appends, overwrites, MERGE / UPDATE inserts and
updates) from Python (the expression translator) and from Spark (Catalyst, in the written plan).

delta-rs 1.6.6 is the oracle both ways: a table where indexeddf added a constraint is one
delta-rs refuses a violating append to (it reads the constraint and the protocol), and a
constraint delta-rs added (``DeltaTable.alter.add_constraint``) is enforced by indexeddf. Rows
are read back with delta-rs, so a refused write is seen to have committed nothing.
"""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

import indexeddf
from indexeddf import IndexedTable
from indexeddf.errors import (
    ConstraintExistsError,
    ConstraintNotEvaluableError,
    ConstraintNotFoundError,
    ConstraintViolationError,
    InvalidOptionError,
)


def _table(path, **columns) -> IndexedTable:
    data = pa.table(columns or {"k": [1, 2], "v": [5, 6], "s": ["a", "b"]})
    return IndexedTable.create(str(path), data, index_columns=["k"], num_buckets=2)


def _rows(path) -> list[tuple]:
    """The table's rows as delta-rs reads them, sorted."""
    t = DeltaTable(str(path)).to_pyarrow_table()
    return sorted(zip(*[t.column(c).to_pylist() for c in t.column_names]))


def test_add_constraint_is_delta_rs_enforced_and_checks_every_python_write(tmp_path):
    t = _table(tmp_path / "t")
    version = t.add_constraint({"Positive": "v > 0 AND s IS NOT NULL"})
    assert t.constraints() == {"positive": "v > 0 AND s IS NOT NULL"}  # Delta stores names in lower case
    oracle = DeltaTable(str(tmp_path / "t"))
    assert oracle.version() == version
    assert oracle.metadata().configuration["delta.constraints.positive"] == "v > 0 AND s IS NOT NULL"
    assert oracle.protocol().min_writer_version == 3
    with pytest.raises(Exception, match="failed validation check"):  # delta-rs enforces what indexeddf added
        write_deltalake(str(tmp_path / "t"), pa.table({"k": [3], "v": [-1], "s": ["c"]}), mode="append")

    with pytest.raises(ConstraintViolationError) as e:
        t.append(pa.table({"k": [3, 4], "v": [7, -1], "s": ["c", "d"]}))
    assert str(e.value).startswith("[DELTA_VIOLATE_CONSTRAINT_WITH_VALUES] CHECK constraint positive "
                                   "(v > 0 AND s IS NOT NULL) violated by row with values:")
    assert e.value.values == {"s": "d", "v": -1}
    with pytest.raises(ConstraintViolationError):
        t.append(pa.table({"k": [3], "v": [1], "s": pa.array([None], pa.string())}))  # NULL is not true
    with pytest.raises(ConstraintViolationError):
        t.overwrite(pa.table({"k": [9], "v": [0], "s": ["z"]}))
    with pytest.raises(ConstraintViolationError):
        t.update({"v": "v - 10"}, "k = 1")
    with pytest.raises(ConstraintViolationError):  # a MERGE's insert
        (t.merge(pa.table({"k": [8], "v": [-8], "s": ["h"]}), "target.k = source.k")
         .when_matched_update_all().when_not_matched_insert_all().execute())
    assert DeltaTable(str(tmp_path / "t")).version() == version  # nothing committed
    assert _rows(tmp_path / "t") == [(1, 5, "a"), (2, 6, "b")]

    t.append(pa.table({"k": [3], "v": [7], "s": ["c"]}))
    t.update({"v": "v + 1"}, "k = 1")
    assert _rows(tmp_path / "t") == [(1, 6, "a"), (2, 6, "b"), (3, 7, "c")]


def test_add_constraint_checks_the_rows_first(tmp_path):
    t = _table(tmp_path / "t", k=[1, 2, 3], v=[5, -1, -2], s=["a", "b", "c"])
    with pytest.raises(ConstraintViolationError, match=r"DELTA_NEW_CHECK_CONSTRAINT_VIOLATION\] 2 rows in .* violate "
                       r"the new CHECK constraint \(v > 0\)") as e:
        t.add_constraint({"positive": "v > 0"})
    assert e.value.rows == 2
    assert t.version == 0 and t.constraints() == {}
    t.delete("v < 0")
    t.add_constraint({"positive": "v > 0"})
    with pytest.raises(ConstraintExistsError, match="DELTA_CONSTRAINT_ALREADY_EXISTS"):
        t.add_constraint({"POSITIVE": "v > 1"})
    with pytest.raises(InvalidOptionError, match="DELTA_ADD_CONSTRAINTS"):  # as Delta: only ADD CONSTRAINT sets one
        t.set_properties({"delta.constraints.other": "v < 100"})
    with pytest.raises(ConstraintNotFoundError, match="DELTA_CONSTRAINT_DOES_NOT_EXIST"):
        t.drop_constraint("other")
    assert t.drop_constraint("other", raise_if_not_exists=False) == t.version
    t.drop_constraint("Positive")
    t.append(pa.table({"k": [4], "v": [-4], "s": ["d"]}))  # no constraint any more
    assert "delta.constraints.positive" not in DeltaTable(str(tmp_path / "t")).metadata().configuration


def test_add_constraint_does_not_rebase_over_rows_written_meanwhile(tmp_path):
    """Two writers, each with the version it read (``writer.operations`` on a snapshot)."""
    from indexeddf.format.snapshot import load_snapshot
    from indexeddf.format.storage import TableStorage
    from indexeddf.writer import operations

    t = _table(tmp_path / "t")
    read = load_snapshot(TableStorage(str(tmp_path / "t")))
    t.append(pa.table({"k": [3], "v": [-1], "s": ["c"]}))  # a blind append after the version checked
    with pytest.raises(indexeddf.errors.ConcurrentAppendError):
        operations.add_constraint(read, {"positive": "v > 0"})
    assert t.constraints() == {}
    read = load_snapshot(TableStorage(str(tmp_path / "t")))
    t.add_constraint({"below": "v < 100"})
    with pytest.raises(indexeddf.errors.ConcurrentModificationError):  # a write that read the version before
        operations.append(read, pa.table({"k": [4], "v": [100], "s": ["d"]}))
    assert sorted(r[1] for r in _rows(tmp_path / "t")) == [-1, 5, 6]


def test_constraints_delta_rs_added_are_enforced(tmp_path):
    path = tmp_path / "t"
    t = _table(path, k=[1, 2], d=pa.array([dt.date(2021, 1, 1), dt.date(2022, 1, 1)]), s=["a", "b"])
    DeltaTable(str(path)).alter.add_constraint({"In_Range": "d BETWEEN '2020-01-01' AND '2030-12-31'"})
    # delta-rs stores its own rendering: "d >= '2020-01-01'::date AND d <= '2030-12-31'::date"
    assert list(t.constraints()) == ["In_Range"]
    with pytest.raises(ConstraintViolationError, match="CHECK constraint In_Range"):
        t.append(pa.table({"k": [3], "d": [dt.date(2031, 1, 1)], "s": ["c"]}))
    t.append(pa.table({"k": [3], "d": [dt.date(2030, 12, 31)], "s": ["c"]}))
    t.drop_constraint("in_range")  # names compare without case
    assert t.constraints() == {}

    # A constraint the Python expressions cannot evaluate: a Python write refuses, saying to use Spark.
    DeltaTable(str(path)).alter.add_constraint({"hashed": "md5(s) IS NOT NULL"})
    with pytest.raises(ConstraintNotEvaluableError, match="through Spark"):
        t.append(pa.table({"k": [4], "d": [dt.date(2024, 1, 1)], "s": ["d"]}))
    assert len(_rows(path)) == 3


def test_writer_seven_tables_list_the_feature(tmp_path):
    t = _table(tmp_path / "t", k=[1], ts=pa.array([dt.datetime(2020, 1, 1)], pa.timestamp("us")))
    t.add_constraint({"c": "k > 0"})
    protocol = DeltaTable(str(tmp_path / "t")).protocol()
    assert (protocol.min_writer_version, sorted(protocol.writer_features)) == (7, ["checkConstraints", "timestampNtz"])
    with pytest.raises(Exception, match="failed validation check"):
        write_deltalake(str(tmp_path / "t"), pa.table({"k": [0], "ts": pa.array([None], pa.timestamp("us"))}),
                        mode="append")


# -- Spark --------------------------------------------------------------------------------
@pytest.mark.spark
def test_sql_add_constraint_as_a_delta_user_types_it(sql, tmp_path):
    path = tmp_path / "orders"
    sql(f"CREATE TABLE orders (k BIGINT, v BIGINT, s STRING, d DATE) USING indexeddf "
        f"CLUSTERED BY (k) INTO 2 BUCKETS LOCATION '{path}'")
    sql("INSERT INTO orders VALUES (1, 5, 'a', DATE'2021-01-01'), (2, -1, 'b', DATE'2022-01-01')")
    with pytest.raises(ConstraintViolationError, match=r"1 rows in spark_catalog.default.orders violate the new "
                       r"CHECK constraint \(v > 0 AND s IS NOT NULL\)"):
        sql("ALTER TABLE orders ADD CONSTRAINT positive CHECK (v > 0 AND s IS NOT NULL)")
    sql("DELETE FROM orders WHERE v < 0")
    sql("ALTER TABLE orders ADD CONSTRAINT positive CHECK (v > 0 AND s IS NOT NULL)")
    sql(f"ALTER TABLE indexeddf.`{path}` ADD CONSTRAINT in_range CHECK (d BETWEEN '2020-01-01' AND '2030-12-31')")
    shown = {r["key"]: r["value"] for r in sql("SHOW TBLPROPERTIES orders")}
    assert shown["delta.constraints.positive"] == "v > 0 AND s IS NOT NULL"
    assert shown["delta.constraints.in_range"] == "d BETWEEN '2020-01-01' AND '2030-12-31'"
    (detail,) = sql("DESCRIBE DETAIL orders")
    assert detail["minWriterVersion"] == 3 and detail["properties"]["delta.constraints.positive"] == "v > 0 AND s IS NOT NULL"
    version = DeltaTable(str(path)).version()

    with pytest.raises(ConstraintViolationError, match=r"\[DELTA_VIOLATE_CONSTRAINT_WITH_VALUES\] CHECK constraint "
                       r"in_range \(d BETWEEN '2020-01-01' AND '2030-12-31'\) violated by row with values"):
        sql("INSERT INTO orders VALUES (3, 7, 'c', DATE'2020-01-01'), (4, 7, 'c', DATE'2043-01-01')")
    with pytest.raises(ConstraintViolationError, match="CHECK constraint positive") as e:
        sql("UPDATE orders SET v = -v WHERE k = 1")
    assert e.value.values == {"v": "-5", "s": "a"}  # Delta's " - column : value" lines, as text
    assert DeltaTable(str(path)).version() == version  # nothing committed
    # delta-rs, the oracle, refuses the same rows
    with pytest.raises(Exception, match="failed validation check"):
        write_deltalake(str(path), pa.table({"k": [5], "v": [-5], "s": ["e"], "d": [dt.date(2024, 1, 1)]}),
                        mode="append")
    sql("ALTER TABLE orders DROP CONSTRAINT IF EXISTS nothing_here")
    with pytest.raises(ConstraintNotFoundError, match="DELTA_CONSTRAINT_DOES_NOT_EXIST"):
        sql("ALTER TABLE orders DROP CONSTRAINT nothing_here")
    sql(f"ALTER TABLE indexeddf.`{path}` DROP CONSTRAINT in_range")
    assert list(IndexedTable.for_path(str(path)).constraints()) == ["positive"]
    assert _rows(path) == [(1, 5, "a", dt.date(2021, 1, 1))]


@pytest.mark.spark
def test_spark_writes_and_changes_check_with_catalyst(spark, sql, tmp_path):
    path = str(tmp_path / "t")
    _table(path, k=[1, 2], v=[5, 6], s=["a", "b"])
    # Added by delta-rs, with a function the Python expressions lack: Spark evaluates it.
    DeltaTable(path).alter.add_constraint({"hashed": "md5(s) IS NOT NULL AND v > 0"})
    with pytest.raises(Exception, match=r"ConstraintViolationError: \[DELTA_VIOLATE_CONSTRAINT_WITH_VALUES\] "
                       r"CHECK constraint hashed .* violated by row with values"):
        spark.createDataFrame([(3, -3, "c")], "k BIGINT, v BIGINT, s STRING").write.format("indexeddf") \
            .mode("append").save(path)
    with pytest.raises(ConstraintViolationError, match="CHECK constraint hashed"):
        sql(f"MERGE INTO indexeddf.`{path}` t USING (SELECT 9L AS k, 2L AS v, CAST(NULL AS STRING) AS s) src "
            "ON t.k = src.k WHEN NOT MATCHED THEN INSERT *")
    # Only written rows are checked: a row the join drops breaks the constraint and is not written.
    spark.createDataFrame([(3, 7, "c"), (4, -4, "d")], "k BIGINT, v BIGINT, s STRING").createOrReplaceTempView("src")
    sql(f"INSERT INTO indexeddf.`{path}` SELECT src.* FROM src JOIN (SELECT 3L AS k) keep ON src.k = keep.k")
    sql(f"MERGE INTO indexeddf.`{path}` t USING (SELECT 1L AS k, 50L AS v, 'z' AS s) src ON t.k = src.k "
        "WHEN MATCHED THEN UPDATE SET *")
    # IndexedTable.append of a Spark DataFrame: checked by Catalyst too (md5 is no Python expression)
    IndexedTable.for_path(path).append(spark.createDataFrame([(5, 1, "e")], "k BIGINT, v BIGINT, s STRING"))
    assert _rows(path) == [(1, 50, "z"), (2, 6, "b"), (3, 7, "c"), (5, 1, "e")]
