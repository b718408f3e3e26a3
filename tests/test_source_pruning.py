"""Partition pruning of the Python data source, without Spark: the partitions Spark's pushed
filters keep hold every row DuckDB's WHERE selects (pruning never drops a matching row),
and drop the partitions none of whose values can match."""

from __future__ import annotations

import datetime as dt
import os
import uuid

import duckdb
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import datasource as d

from indexeddf import IndexedTable
from indexeddf.spark.source import IndexedReader
from indexeddf.spark.types import spark_schema

DAYS = [dt.date(2026, 11, 1), dt.date(2026, 11, 2), dt.date(2026, 11, 3)]
S = ["a", "ab", "b", None]


def table(path: str) -> IndexedTable:
    ids = list(range(48))
    data = pa.table({
        "id": pa.array(ids, pa.int64()),
        "day": pa.array([DAYS[i % 3] for i in ids]),
        "s": pa.array([S[i % 4] for i in ids]),
        "n": pa.array([None if i % 5 == 0 else i % 3 for i in ids], pa.int32()),
    })
    return IndexedTable.create(path, data, index_columns=["id"], num_buckets=2, partition_by=["day", "s", "n"])


def sql_value(v) -> str:
    if isinstance(v, dt.date):
        return f"DATE '{v.isoformat()}'"
    return f"'{v}'" if isinstance(v, str) else str(v)


VALUES = {"day": st.sampled_from(DAYS), "s": st.sampled_from(["a", "ab", "b", "c"]), "n": st.integers(-1, 3)}
COMPARISONS = [(d.EqualTo, "="), (d.EqualNullSafe, "IS NOT DISTINCT FROM"), (d.GreaterThan, ">"), (d.GreaterThanOrEqual, ">="),
               (d.LessThan, "<"), (d.LessThanOrEqual, "<=")]


@st.composite
def filters(draw, depth: int = 0):
    column = draw(st.sampled_from(["day", "s", "n"]))
    kind = draw(st.integers(0, 5 if depth < 1 else 4))
    if kind <= 1:
        cls, op = draw(st.sampled_from(COMPARISONS))
        v = draw(VALUES[column])
        return cls((column,), v), f"{column} {op} {sql_value(v)}"
    if kind == 2:
        vs = tuple(draw(st.lists(VALUES[column], min_size=1, max_size=3)))
        return d.In((column,), vs), f"{column} IN ({', '.join(sql_value(v) for v in vs)})"
    if kind == 3:
        return (d.IsNull((column,)), f"{column} IS NULL") if draw(st.booleans()) else \
            (d.IsNotNull((column,)), f"{column} IS NOT NULL")
    if kind == 4:
        prefix = draw(st.sampled_from(["a", "b", "ab"]))
        return d.StringStartsWith(("s",), prefix), f"starts_with(s, '{prefix}')"
    inner, text = draw(filters(depth + 1))
    return d.Not(inner), f"NOT ({text})"


def reader_of(t: IndexedTable, relation: str) -> IndexedReader:
    snap = t.snapshot
    return IndexedReader(snap, spark_schema(snap.metadata.schema_), 1 << 30, relation)


def read_files(reader: IndexedReader, pushed) -> set[str]:
    assert list(reader.pushFilters(pushed)) == list(pushed)  # none pushed: Spark applies them all
    return {p for part in reader.partitions() for p in part.paths}


@pytest.fixture(scope="module")
def parted(tmp_path_factory):
    """The table, and each live file's rows with their partition values (DuckDB's input)."""
    import pyarrow.parquet as pq

    t = table(str(tmp_path_factory.mktemp("parted") / "t"))
    everything = t.to_arrow()
    per_file = {}
    for a in t.snapshot.live_files():
        ids = pq.read_table(f"{t.path}/{a.path}", columns=["id"]).column("id")
        per_file[a.path] = everything.filter(pa.compute.is_in(everything.column("id"), ids))
    from indexeddf.spark import source_pruning

    kept, source_pruning.REGISTRY_DIR = source_pruning.REGISTRY_DIR, str(tmp_path_factory.mktemp("registry"))
    yield t, per_file
    source_pruning.REGISTRY_DIR = kept


@settings(max_examples=300, deadline=None)
@given(pushed=st.lists(filters(), min_size=1, max_size=3), n=st.integers(0, 10**9))
def test_pruning_keeps_every_file_with_a_matching_row(parted, pushed, n):
    t, per_file = parted
    read = read_files(reader_of(t, f"prop-{os.getpid()}-{n}-{uuid.uuid4().hex}"), [f for f, _ in pushed])
    con = duckdb.connect()
    where = " AND ".join(f"({text})" for _, text in pushed)
    for path, rows in per_file.items():
        con.register("r", rows)
        if con.execute(f"SELECT count(*) FROM r WHERE {where}").fetchone()[0]:
            assert path in read, (where, path)


def test_pruning_skips_the_partitions_that_cannot_match(tmp_path, monkeypatch):
    from indexeddf.spark import source_pruning

    monkeypatch.setattr(source_pruning, "REGISTRY_DIR", str(tmp_path / "registry"))
    t = table(str(tmp_path / "t"))
    files = t.snapshot.live_files()
    day1 = {a.path for a in files if a.partitionValues["day"] == "2026-11-01"}
    assert read_files(reader_of(t, f"{tmp_path.name}-1"), [d.EqualTo(("day",), DAYS[0])]) == day1
    both = read_files(reader_of(t, f"{tmp_path.name}-2"), [d.EqualTo(("day",), DAYS[0]), d.IsNull(("s",))])
    assert both == {a.path for a in files if a.path in day1 and a.partitionValues["s"] is None}
    # NULL partitions fail a comparison; a filter on a data column keeps every file.
    assert not any(files_of(t, p)["n"] is None
                   for p in read_files(reader_of(t, f"{tmp_path.name}-3"), [d.GreaterThan(("n",), -5)]))
    assert read_files(reader_of(t, f"{tmp_path.name}-4"), [d.EqualTo(("id",), 3)]) == {a.path for a in files}
    # A later pushdown of the same DataFrame keeps what an earlier one kept.
    relation = f"{tmp_path.name}-5"
    read_files(reader_of(t, relation), [d.EqualTo(("day",), DAYS[0])])
    day2 = {a.path for a in files if a.partitionValues["day"] == "2026-11-02"}
    assert read_files(reader_of(t, relation), [d.EqualTo(("day",), DAYS[1])]) == day1 | day2
    assert read_files(reader_of(t, relation), []) == {a.path for a in files}
    assert read_files(reader_of(t, relation), [d.EqualTo(("day",), DAYS[1])]) == {a.path for a in files}


def files_of(t: IndexedTable, path: str) -> dict:
    return next(a.partitionValues for a in t.snapshot.live_files() if a.path == path)
