"""MERGE with schema_mode="merge": the source's new columns join the table in the same
commit, against DuckDB running the same MERGE on a table given the column first, and
delta-rs and DuckDB's delta extension reading the log."""

from __future__ import annotations

import os
import sys

import deltalake
import pyarrow as pa
import pytest

sys.path.insert(0, os.path.dirname(__file__))

from oracles import duckdb_delta  # noqa: E402
from test_changes import Duck, rows  # noqa: E402

from indexeddf import IndexedTable  # noqa: E402
from indexeddf.errors import ColumnCaseConflictError, InvalidOptionError  # noqa: E402


def key(r: dict) -> tuple:
    return tuple((v is None, v) for v in r.values())


def ordered(t: pa.Table, names: list[str]) -> list[dict]:
    return sorted(t.select(names).to_pylist(), key=key)


def with_w(keys, v0: int) -> pa.Table:
    base = rows(keys, v0, "n")
    return base.append_column("w", pa.array([f"w{k}" for k in keys], pa.string()))


@pytest.mark.parametrize("vectors", [False, True])
def test_the_source_columns_join_the_table_in_the_merge_commit(tmp_path, vectors):
    path = str(tmp_path / "t")
    first = rows(list(range(0, 40, 2)))
    t = IndexedTable.create(path, first, ["k"], num_buckets=4,
                            properties={"delta.enableDeletionVectors": str(vectors).lower()})
    t.create_index("by_s", ["s"], num_buckets=2)
    before = t.version
    source = with_w([4, 6, 100, 101], 500)
    m = t.merge(source, "t.k = s.k", source_alias="s", target_alias="t", schema_mode="merge") \
        .when_matched_update_all().when_not_matched_insert_all().execute()
    assert (m["num_target_rows_updated"], m["num_target_rows_inserted"]) == (2, 2)
    duck = Duck(first)
    duck.run("ALTER TABLE target ADD COLUMN w VARCHAR")
    duck.run("MERGE INTO target AS t USING source_rows AS s ON t.k = s.k "
             "WHEN MATCHED THEN UPDATE SET k = s.k, v = s.v, s = s.s, w = s.w "
             "WHEN NOT MATCHED THEN INSERT (k, v, s, w) VALUES (s.k, s.v, s.s, s.w)", source)
    names = ["k", "v", "s", "w"]
    t = IndexedTable.for_path(path)
    assert t.version == before + 1 and t.schema.names == names  # one commit, the column at the end
    assert t.history()[0].parameters.get("mergeSchema") is True
    want = ordered(duck.rows(), names)
    assert ordered(t.to_arrow(), names) == want
    assert ordered(t.lookup([4, 6, 8, 100]), names) == ordered(duck.rows("k IN (4, 6, 8, 100)"), names)
    theirs = duckdb_delta().execute(f"SELECT * FROM delta_scan('{path}')").to_arrow_table()
    assert ordered(theirs, names) == want
    if not vectors:
        assert ordered(deltalake.DeltaTable(path).to_pyarrow_table(), names) == want
    # The older version keeps its schema.
    assert IndexedTable.for_path(path, version=before).schema.names == ["k", "v", "s"]
    # A second evolving merge, now that older files lack the column.
    more = with_w([8, 102], 900)
    t.merge(more, "t.k = s.k", source_alias="s", target_alias="t", schema_mode="merge") \
        .when_matched_update({"w": "concat(s.w, '!')"}).when_not_matched_insert_all().execute()
    duck.run("MERGE INTO target AS t USING source_rows AS s ON t.k = s.k "
             "WHEN MATCHED THEN UPDATE SET w = concat(s.w, '!') "
             "WHEN NOT MATCHED THEN INSERT (k, v, s, w) VALUES (s.k, s.v, s.s, s.w)", more)
    assert ordered(IndexedTable.for_path(path).to_arrow(), names) == ordered(duck.rows(), names)


def test_without_schema_mode_or_a_star_clause_the_schema_stays(tmp_path):
    path = str(tmp_path / "t")
    t = IndexedTable.create(path, rows(list(range(10))), ["k"], num_buckets=2)
    # Without schema_mode, INSERT * takes the table's columns and leaves the source's others.
    t.merge(with_w([50], 0), "t.k = s.k", "s", "t").when_not_matched_insert_all().execute()
    assert IndexedTable.for_path(path).lookup([50]).to_pylist() == [{"k": 50, "v": 0, "s": "n50"}]
    # Only explicit assignments: nothing to add, even with schema_mode="merge".
    t.merge(with_w([51], 0), "t.k = s.k", "s", "t", schema_mode="merge") \
        .when_not_matched_insert({"k": "s.k", "v": "s.v"}).execute()
    assert IndexedTable.for_path(path).schema.names == ["k", "v", "s"]
    with pytest.raises(InvalidOptionError, match="schema_mode"):
        t.merge(with_w([52], 0), "t.k = s.k", "s", "t", schema_mode="overwrite")


def test_a_column_differing_only_by_case_is_refused_and_nothing_commits(tmp_path):
    path = str(tmp_path / "t")
    t = IndexedTable.create(path, rows(list(range(10))), ["k"], num_buckets=2)
    source = rows([1, 50], 7).append_column("V", pa.array([1, 2], pa.int64()))
    with pytest.raises(ColumnCaseConflictError):
        t.merge(source, "t.k = s.k", "s", "t", schema_mode="merge").when_matched_update_all().execute()
    assert IndexedTable.for_path(path).version == 0
