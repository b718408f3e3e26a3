"""Time travel in SQL as a Delta user types it, through Spark's own time-travel resolution
(``IndexedDFCatalog.loadTable(ident, version | timestamp)``): ``VERSION AS OF``,
``TIMESTAMP AS OF``, the read options of ``spark.read.table`` and Delta's ``@v`` suffix, on a
catalog table and on ``indexeddf.`/path```. Each version's rows are checked against the Python
API (``to_arrow(version=...)``) and delta-rs; a version that does not exist fails with the
Python reader's ``VersionNotFoundError`` and message.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import DeltaTable

import indexeddf
from indexeddf import IndexedTable
from indexeddf.errors import VersionNotFoundError

pytestmark = pytest.mark.spark


def _rows(rows) -> list[tuple]:
    return sorted(tuple(r) for r in rows)


def _arrow_rows(table: pa.Table) -> list[tuple]:
    return sorted(zip(*[table.column(c).to_pylist() for c in ("id", "v")]))


@pytest.fixture
def versions(spark, tmp_path):
    """A catalog table ``travel`` over a table with versions 0..2 (and its path)."""
    path = str(tmp_path / "travel")
    t = IndexedTable.create(path, pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]}), index_columns=["id"],
                            num_buckets=4)
    t.append(pa.table({"id": [4, 5], "v": ["d", "e"]}))
    t.delete("id = 2")
    spark.sql(f"CREATE TABLE travel USING indexeddf LOCATION '{path}'")
    yield path
    spark.sql("DROP TABLE IF EXISTS travel")


def test_version_as_of_on_a_catalog_table_and_a_path(spark, versions):
    path = versions
    table = IndexedTable.for_path(path)
    for v in range(3):
        want = _arrow_rows(table.to_arrow(version=v))
        assert want == _arrow_rows(DeltaTable(path, version=v).to_pyarrow_table())
        assert _rows(spark.sql(f"SELECT id, v FROM travel VERSION AS OF {v}").collect()) == want
        assert _rows(spark.sql(f"SELECT id, v FROM indexeddf.`{path}` VERSION AS OF {v}").collect()) == want
        assert _rows(spark.sql(f"SELECT id, v FROM indexeddf.`{path}@v{v}`").collect()) == want
        assert _rows(spark.sql(f"SELECT id, v FROM `travel@v{v}`").collect()) == want
        assert _rows(spark.read.option("versionAsOf", v).table("travel").collect()) == want
    # The newest version without time travel; an index lookup on an old version still answers.
    assert _rows(spark.sql("SELECT id, v FROM travel").collect()) == _arrow_rows(table.to_arrow())
    assert _rows(spark.sql("SELECT id, v FROM travel VERSION AS OF 0 WHERE id = 2").collect()) == [(2, "b")]
    assert _rows(spark.sql("SELECT id, v FROM travel VERSION AS OF 2 WHERE id = 2").collect()) == []


def test_timestamp_as_of(spark, versions):
    path = versions
    history = {h.version: h.timestamp for h in IndexedTable.for_path(path).history()}
    for v in range(3):
        at = history[v]
        stamp = at.strftime("%Y-%m-%d %H:%M:%S.%f")
        want = _arrow_rows(IndexedTable.for_path(path).to_arrow(timestamp=at))
        assert want == _arrow_rows(IndexedTable.for_path(path).to_arrow(version=v))
        assert _rows(spark.sql(f"SELECT id, v FROM travel TIMESTAMP AS OF '{stamp}'").collect()) == want
        assert _rows(spark.sql(f"SELECT id, v FROM indexeddf.`{path}` TIMESTAMP AS OF '{stamp}'").collect()) == want
        suffix = at.strftime("%Y%m%d%H%M%S") + f"{at.microsecond // 1000:03d}"
        assert _rows(spark.sql(f"SELECT id, v FROM indexeddf.`{path}@{suffix}`").collect()) == want


def test_a_version_that_does_not_exist_is_the_python_readers_error(spark, versions):
    path = versions
    with pytest.raises(VersionNotFoundError) as python:
        IndexedTable.for_path(path).to_arrow(version=7)
    for statement in ("SELECT * FROM travel VERSION AS OF 7", f"SELECT * FROM indexeddf.`{path}` VERSION AS OF 7",
                      f"SELECT * FROM indexeddf.`{path}@v7`"):
        with pytest.raises(Exception) as spark_error:
            spark.sql(statement).collect()
        typed = indexeddf.spark.typed_error(spark_error.value)
        assert isinstance(typed, VersionNotFoundError) and str(typed) == str(python.value)
    with pytest.raises(Exception) as early:
        spark.sql("SELECT * FROM travel TIMESTAMP AS OF '2000-01-01'").collect()
    assert isinstance(indexeddf.spark.typed_error(early.value), VersionNotFoundError)
