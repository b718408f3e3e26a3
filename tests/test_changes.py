"""MERGE, UPDATE and DELETE in Python, against DuckDB running the same statements.

DuckDB runs MERGE INTO, UPDATE and DELETE; it is handed the previous version's rows and
the same statement, and every version indexeddf commits must equal its answer (through
``to_arrow``, ``lookup`` of random keys, and delta-rs reading the log).
"""

from __future__ import annotations

import os
import sys
import warnings
from dataclasses import dataclass

import deltalake
import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))

from oracles import duckdb_delta  # noqa: E402

from indexeddf import IndexedTable  # noqa: E402
from indexeddf.changes import rewrite as rewrite_mod  # noqa: E402
from indexeddf.errors import InvalidOptionError, SchemaMismatchError  # noqa: E402
from indexeddf.reader import locate as locate_mod  # noqa: E402

SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.int64()), ("s", pa.string())])


def rows(keys, v0=0, tag="a") -> pa.Table:
    """Rows of ``keys``: v counts from ``v0``, s is NULL for multiples of 7."""
    return pa.table({"k": pa.array(keys, pa.int64()), "v": pa.array(range(v0, v0 + len(keys)), pa.int64()),
                     "s": [None if k is not None and k % 7 == 0 else f"{tag}{k}" for k in keys]}, schema=SCHEMA)


def ordered(t: pa.Table) -> list[tuple]:
    return sorted((tuple(r.values()) for r in t.select(SCHEMA.names).cast(SCHEMA).to_pylist()),
                  key=lambda r: tuple((x is None, x) for x in r))


class Duck:
    """DuckDB's copy of the table: the oracle for every change."""

    def __init__(self, first: pa.Table):
        self.con = duckdb.connect()
        self.con.register("first_rows", first)
        self.con.execute("CREATE TABLE target AS SELECT * FROM first_rows")

    def run(self, sql: str, source: pa.Table | None = None) -> None:
        if source is not None:
            self.con.register("source_rows", source)
        self.con.execute(sql)

    def rows(self, where: str = "true") -> pa.Table:
        return self.con.execute(f"SELECT * FROM target WHERE {where}").to_arrow_table()


# -- clauses as data: one description gives the builder calls and DuckDB's SQL ----------
MATCHED_CONDITIONS = [None, "t.v > s.v", "s.v % 3 = 0", "t.s IS NULL", "t.k > 20 AND s.s IS NOT NULL"]
BY_SOURCE_CONDITIONS = [None, "t.v % 2 = 0", "t.s IS NULL", "t.k < 10"]
INSERT_CONDITIONS = [None, "s.v % 2 = 1", "s.s IS NOT NULL"]
UPDATE_SETS = [{"v": "s.v + t.v"}, {"s": "upper(s.s)", "v": "s.v * 2"}, {"v": "t.v - 1"}]
BY_SOURCE_SETS = [{"v": "t.v + 100"}, {"s": "lower(t.s)"}]
INSERT_SETS = [{"k": "s.k", "v": "s.v * 10"}, {"k": "s.k", "s": "s.s"}]


@dataclass(frozen=True)
class Spec:
    when: str
    action: str
    predicate: str | None
    updates: tuple | None  # None: the * form

    def call(self, merger):
        p = self.predicate
        u = None if self.updates is None else dict(self.updates)
        if self.when == "matched":
            if self.action == "delete":
                return merger.when_matched_delete(p)
            return merger.when_matched_update_all(p) if u is None else merger.when_matched_update(u, p)
        if self.when == "not_matched":
            return merger.when_not_matched_insert_all(p) if u is None else merger.when_not_matched_insert(u, p)
        if self.action == "delete":
            return merger.when_not_matched_by_source_delete(p)
        return merger.when_not_matched_by_source_update(u, p)

    def sql(self) -> str:
        when = {"matched": "MATCHED", "not_matched": "NOT MATCHED BY TARGET",
                "not_matched_by_source": "NOT MATCHED BY SOURCE"}[self.when]
        cond = f" AND {self.predicate}" if self.predicate else ""
        if self.action == "delete":
            then = "DELETE"
        elif self.action == "update":
            then = "UPDATE SET *" if self.updates is None else \
                "UPDATE SET " + ", ".join(f"{c} = {e}" for c, e in self.updates)
        else:
            then = "INSERT *" if self.updates is None else \
                f"INSERT ({', '.join(c for c, _ in self.updates)}) VALUES ({', '.join(e for _, e in self.updates)})"
        return f"WHEN {when}{cond} THEN {then}"


def _sets(options):
    return st.sampled_from([tuple(sorted(o.items())) for o in options])


matched_spec = st.builds(Spec, st.just("matched"), st.sampled_from(["update", "delete"]),
                         st.sampled_from(MATCHED_CONDITIONS), st.one_of(st.none(), _sets(UPDATE_SETS)))
insert_spec = st.builds(Spec, st.just("not_matched"), st.just("insert"), st.sampled_from(INSERT_CONDITIONS),
                        st.one_of(st.none(), _sets(INSERT_SETS)))
by_source_spec = st.builds(Spec, st.just("not_matched_by_source"), st.sampled_from(["update", "delete"]),
                           st.sampled_from(BY_SOURCE_CONDITIONS), _sets(BY_SOURCE_SETS))


@st.composite
def merges(draw):
    clauses = draw(st.lists(matched_spec, max_size=2)) + draw(st.lists(insert_spec, max_size=2))
    clauses += draw(st.lists(by_source_spec, max_size=1 if draw(st.integers(0, 3)) == 0 else 0))
    if not clauses:
        clauses = [draw(matched_spec)]
    # Only the last clause of a kind may be unconditional (Delta's and DuckDB's rule).
    for when in ("matched", "not_matched", "not_matched_by_source"):
        kind = [i for i, c in enumerate(clauses) if c.when == when]
        for i in kind[:-1]:
            if clauses[i].predicate is None:
                clauses[i] = Spec(when, clauses[i].action, "t.v IS NOT NULL" if when != "not_matched"
                                  else "s.v IS NOT NULL", clauses[i].updates)
    keys = draw(st.lists(st.one_of(st.integers(0, 60), st.none()), max_size=25))
    distinct = list(dict.fromkeys(k for k in keys if k is not None)) + [None] * keys.count(None)
    return ("merge", distinct, draw(st.integers(0, 50)), clauses)


UPDATES = [({"v": "v + 1"}, "k % 5 = 0"), ({"s": "concat(s, '!')"}, "s IS NOT NULL AND v < 30"),
           ({"k": "k + 100"}, "k = 3"), ({"v": "0"}, "k IN (1, 2, 40)"), ({"v": "v * 2"}, None)]
DELETES = ["k = 4", "v % 4 = 0", "s IS NULL OR k > 55", "k IN (10, 11, 12)", "s LIKE 'a1%'"]
operations = st.one_of(
    merges(),
    st.tuples(st.just("update"), st.sampled_from(range(len(UPDATES)))),
    st.tuples(st.just("delete"), st.sampled_from(DELETES)),
    st.tuples(st.just("append"), st.lists(st.integers(0, 80), min_size=1, max_size=8, unique=True)),
)


def apply(t: IndexedTable, duck: Duck, op) -> None:
    kind = op[0]
    if kind == "merge":
        _, keys, v0, clauses = op
        source = rows(keys, 1000 + v0, "b")
        merger = t.merge(source, "t.k = s.k", source_alias="s", target_alias="t")
        for c in clauses:
            merger = c.call(merger)
        merger.execute()
        duck.run("MERGE INTO target AS t USING source_rows AS s ON t.k = s.k " + " ".join(c.sql() for c in clauses),
                 source)
    elif kind == "update":
        updates, predicate = UPDATES[op[1]]
        t.update(updates, predicate)
        sets = ", ".join(f"{c} = {e}" for c, e in updates.items())
        duck.run(f"UPDATE target SET {sets}" + (f" WHERE {predicate}" if predicate else ""))
    elif kind == "delete":
        t.delete(op[1])
        duck.run(f"DELETE FROM target WHERE {op[1]}")
    else:
        new = rows(op[1], 500, "c")
        t.append(new)
        duck.run("INSERT INTO target SELECT * FROM source_rows", new)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(operations, min_size=1, max_size=5), auto_refresh=st.booleans(), vectors=st.booleans(),
       probes=st.lists(st.integers(0, 180), min_size=1, max_size=10), through=st.sampled_from(["index", "keys"]),
       narrow=st.booleans())
def test_every_version_equals_duckdb_running_the_same_statements(tmp_path_factory, ops, auto_refresh, vectors,
                                                                  probes, through, narrow):
    # A change reads a touched bucket through the index, or by its key columns once its
    # keys are many (reader/locate.py): each example forces one of the two. A large source
    # is first narrowed to each file's keys (changes/rewrite.py): forced on or off too.
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(locate_mod, "INDEX_ROWS_PER_KEY", 0 if through == "index" else 1 << 40)
        mp.setattr(rewrite_mod, "_NARROW_MIN_ROWS", 0 if narrow else 1 << 40)
        _statements_equal_duckdb(tmp_path_factory, ops, auto_refresh, vectors, probes)


def _statements_equal_duckdb(tmp_path_factory, ops, auto_refresh, vectors, probes):
    path = str(tmp_path_factory.mktemp("changes") / "t")
    first = rows(list(range(0, 50, 2)))
    t = IndexedTable.create(path, first, ["k"], num_buckets=4,
                            properties={"indexeddf.index.autoRefresh": str(auto_refresh).lower(),
                                        "delta.enableDeletionVectors": str(vectors).lower()})
    t.create_index("by_s", ["s"], num_buckets=2)
    duck = Duck(first)
    for op in ops:
        apply(t, duck, op)
        assert ordered(t.to_arrow()) == ordered(duck.rows()), op
        want = duck.rows(f"k IN ({', '.join(map(str, probes))})")
        assert ordered(t.lookup(probes)) == ordered(want), (op, probes)
        # The log read by engines nobody here wrote: delta-rs (it refuses deletion
        # vectors) and DuckDB's delta extension (it reads them).
        if not vectors:
            assert ordered(deltalake.DeltaTable(path).to_pyarrow_table()) == ordered(duck.rows()), op
        theirs = duckdb_delta().execute(f"SELECT * FROM delta_scan('{path}')").to_arrow_table()
        assert ordered(theirs) == ordered(duck.rows()), op


def test_the_index_finds_the_rows_and_only_their_files_are_rewritten(tmp_path):
    path = str(tmp_path / "t")
    t = IndexedTable.create(path, rows(list(range(2000))), ["k"], num_buckets=16)
    for i in range(3):  # more files per bucket
        t.append(rows(list(range(2000 + i * 100, 2100 + i * 100))))
    files_before = len(t.snapshot.live_files())
    m = t.merge(rows([5, 6, 9999], 7), "t.k = s.k", "s", "t").when_matched_update_all() \
        .when_not_matched_insert_all().execute()
    assert m["rows_found_by"] == "index"
    assert m["num_target_files_scanned"] <= 2 < files_before, m
    assert (m["num_target_rows_updated"], m["num_target_rows_inserted"]) == (2, 1)
    assert m["num_target_files_removed"] <= 2 and m["version"] == t.version
    assert t.lookup([5, 6, 9999]).sort_by("k").column("v").to_pylist() == [7, 8, 9]
    # A predicate without the index column: every file is read.
    live = len(t.snapshot.live_files())
    m = t.merge(rows([5]), "t.v = s.v", "s", "t").when_matched_delete().execute()
    assert m["rows_found_by"] == "scan" and m["num_target_files_scanned"] == live, m
    # UPDATE and DELETE whose predicate fixes the index column use it too.
    m = t.update({"v": "v + 1"}, "k = 7")
    assert m["rows_found_by"] == "index" and m["num_target_rows_updated"] == 1
    history = t.history()[0]
    assert history.operation == "UPDATE"


def test_deletion_vectors_mark_rows_and_rewrite_nothing(tmp_path):
    path = str(tmp_path / "t")
    t = IndexedTable.create(path, rows(list(range(2000))), ["k"], num_buckets=4,
                            properties={"delta.enableDeletionVectors": "true"})
    before = {a.path for a in t.snapshot.live_files()}
    m = t.merge(rows([5, 6, 9999], 7), "t.k = s.k", "s", "t").when_matched_update_all() \
        .when_not_matched_insert_all().execute()
    assert m["rows_found_by"] == "index" and m["num_target_files_scanned"] == 0, m  # rows came from the lookup
    assert m["num_deletion_vectors_added"] >= 1 and m["num_target_files_removed"] == 0, m
    live = t.snapshot.live_files()
    assert before <= {a.path for a in live}  # the old files stay, with deletion vectors
    assert any(a.deletionVector is not None for a in live)
    assert t.lookup([5, 6, 9999]).sort_by("k").column("v").to_pylist() == [7, 8, 9]
    t.delete("k = 5")
    assert t.lookup([5]).num_rows == 0 and t.to_arrow().num_rows == 2000
    t.optimize(mode="full")  # purges the deletion vectors
    assert all(a.deletionVector is None for a in t.snapshot.live_files())
    assert t.to_arrow().num_rows == 2000


def test_copy_on_write_streams_sorted_files_and_carries_both_indexes(tmp_path):
    """A rewritten file of many row groups, some of its rows deleted by an earlier
    deletion vector: the copy keeps its bucket and key order, its statistics are its
    rows', and both indexes (whose entries are carried over, re-pointed) find every row."""
    import pyarrow.parquet as pq

    path = str(tmp_path / "t")
    first = rows(list(range(3000)))
    t = IndexedTable.create(path, first, ["k"], num_buckets=4,
                            properties={"indexeddf.targetRowGroupBytes": "4096", "delta.enableDeletionVectors": "true"})
    t.optimize(mode="full")
    t.create_index("by_s", ["s"], num_buckets=3)
    duck = Duck(first)
    upsert = rows(list(range(0, 3400, 17)), 100000, "u")
    merge = "MERGE INTO target USING source_rows s ON target.k = s.k WHEN MATCHED THEN UPDATE SET *"
    t.merge(upsert, "t.k = s.k", "s", "t").when_matched_update_all().execute()  # deletion vectors
    duck.run(merge, upsert)
    t.set_properties({"delta.enableDeletionVectors": "false"})
    before = {a.path for a in t.snapshot.live_files()}
    t.delete("k % 5 = 0 AND k < 2500")  # a scan, copy on write
    duck.run("DELETE FROM target WHERE k % 5 = 0 AND k < 2500")
    upsert = rows(list(range(1, 3600, 13)), 200000, "w")
    m = t.merge(upsert, "t.k = s.k", "s", "t").when_matched_update_all().when_not_matched_insert_all().execute()
    duck.run(merge + " WHEN NOT MATCHED THEN INSERT *", upsert)
    assert m["rows_found_by"] == "index" and m["num_target_files_removed"] >= 1, m
    assert ordered(t.to_arrow()) == ordered(duck.rows())
    assert ordered(t.lookup(list(range(-5, 3700)))) == ordered(duck.rows())
    values = [r["s"] for r in duck.rows("s IS NOT NULL").to_pylist()]
    assert ordered(t.lookup([(v,) for v in values], index="by_s")) == ordered(duck.rows("s IS NOT NULL"))
    copies = [a for a in t.snapshot.live_files() if a.path not in before and a.sorted]
    assert copies, "the kept rows of sorted files are copied as sorted files"
    groups = 0
    for a in copies:
        f = pq.ParquetFile(f"{path}/{a.path}")
        got = f.read()
        keys = got.column("k").to_pylist()
        groups = max(groups, f.metadata.num_row_groups)
        assert keys == sorted(keys) and a.deletionVector is None
        assert (a.stats.numRecords, a.stats.minValues["k"], a.stats.maxValues["k"]) == (len(keys), keys[0], keys[-1])
        assert a.stats.nullCount["s"] == got.column("s").null_count
    assert groups > 1, "a rewritten file of several row groups"
    theirs = duckdb_delta().execute(f"SELECT * FROM delta_scan('{path}')").to_arrow_table()
    assert ordered(theirs) == ordered(duck.rows())  # deletion vectors once on: delta-rs refuses the table
    assert "index: 'primary'" in t.explain("k = 5")  # no pile of dead entries makes it look stale


def test_several_source_rows_for_one_target_row_fail_and_commit_nothing(tmp_path):
    t = IndexedTable.create(str(tmp_path / "t"), rows(list(range(10))), ["k"], num_buckets=2)
    data = str(tmp_path / "t" / "data")
    before = (t.version, sorted(os.listdir(data)))
    source = rows([3, 3, 4])
    with pytest.raises(InvalidOptionError, match="multiple source rows matched the same target row"):
        t.merge(source, "t.k = s.k", "s", "t").when_matched_update_all().execute()
    assert (t.update_incremental().version, sorted(os.listdir(data))) == before  # nothing left behind
    # Without a matched clause duplicates are fine (each unmatched one is inserted).
    m = t.merge(rows([30, 30]), "t.k = s.k", "s", "t").when_not_matched_insert_all().execute()
    assert m["num_target_rows_inserted"] == 2


def test_null_keys_never_match(tmp_path):
    t = IndexedTable.create(str(tmp_path / "t"), rows([1, 2, None]), ["k"], num_buckets=2)
    m = t.merge(rows([None, 2]), "t.k = s.k", "s", "t").when_matched_delete().when_not_matched_insert_all().execute()
    assert (m["num_target_rows_deleted"], m["num_target_rows_inserted"]) == (1, 1)
    assert t.to_arrow().column("k").null_count == 2


def test_an_update_of_the_index_column_moves_the_row_to_its_bucket(tmp_path):
    t = IndexedTable.create(str(tmp_path / "t"), rows(list(range(100))), ["k"], num_buckets=8)
    t.update({"k": "k + 1000"}, "k = 42")
    assert t.lookup([42]).num_rows == 0
    assert t.lookup([1042]).column("v").to_pylist() == [42]
    assert {a.bucket for a in t.snapshot.live_files()} <= set(range(8))


def test_bad_input_is_refused_before_anything_is_written(tmp_path):
    path = str(tmp_path / "t")
    t = IndexedTable.create(path, rows(list(range(10))), ["k"], num_buckets=2)
    before = (t.version, sorted(os.listdir(os.path.join(path, "data"))))
    no_s = pa.table({"k": pa.array([1], pa.int64()), "v": pa.array([1], pa.int64())})
    with pytest.raises(SchemaMismatchError, match=r"INSERT \* needs every target column.*lacks \['s'\]"):
        t.merge(no_s, "t.k = s.k", "s", "t").when_not_matched_insert_all().execute()
    with pytest.raises(SchemaMismatchError, match="no such columns"):
        t.update({"nope": "1"}, "k = 1")
    with pytest.raises((InvalidOptionError, SchemaMismatchError)):
        t.update({"v": "frobnicate(v)"}, "k = 1")
    with pytest.raises((InvalidOptionError, SchemaMismatchError)):
        t.delete("v >")
    with pytest.raises(SchemaMismatchError, match="'k'"):
        t.update({"k": "'not a number'"}, "k = 1")
    with pytest.raises(InvalidOptionError, match="at least one when_"):
        t.merge(rows([1]), "t.k = s.k", "s", "t").execute()
    with pytest.raises(InvalidOptionError, match="only the last WHEN MATCHED clause may omit its condition"):
        t.merge(rows([1]), "t.k = s.k", "s", "t").when_matched_delete().when_matched_update_all().execute()
    t.update_incremental()
    assert (t.version, sorted(os.listdir(os.path.join(path, "data")))) == before


def test_any_delete_predicate_and_the_txn_of_a_merge(tmp_path):
    t = IndexedTable.create(str(tmp_path / "t"), rows(list(range(3000))), ["k"], num_buckets=4)
    t.delete("v % 1000 = 0")
    assert t.to_arrow().num_rows == 2997
    src = rows([1, 5000])
    first = t.merge(src, "t.k = s.k", "s", "t", txn=("pipeline", 1)).when_matched_delete() \
        .when_not_matched_insert_all().execute()
    again = t.merge(src, "t.k = s.k", "s", "t", txn=("pipeline", 1)).when_matched_delete() \
        .when_not_matched_insert_all().execute()
    assert first["version"] is not None and again["version"] is None
    assert t.to_arrow().num_rows == 2997


def test_update_without_arguments_still_moves_to_the_newest_version(tmp_path):
    path = str(tmp_path / "t")
    t = IndexedTable.create(path, rows([1]), ["k"], num_buckets=2)
    IndexedTable.for_path(path).append(rows([2]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert t.update().version == 1
    assert any(issubclass(w.category, DeprecationWarning) for w in caught)
    assert pc.sum(t.to_arrow()["k"]).as_py() == 3


def test_concurrent_changes_follow_write_serializable(tmp_path):
    """Two changes planned on the same version: disjoint buckets both commit; a change
    whose file the other rewrote fails with a typed conflict, and loses nothing."""
    from indexeddf.changes import delete_matching
    from indexeddf.changes.engine import execute
    from indexeddf.errors import ConcurrentModificationError
    from indexeddf.spec.bucketing import bucket_ids

    path = str(tmp_path / "t")
    t = IndexedTable.create(path, rows(list(range(200))), ["k"], num_buckets=4)
    buckets = bucket_ids([pa.chunked_array([pa.array(range(200), pa.int64())])], 4).tolist()
    in_b0 = [k for k, b in enumerate(buckets) if b == 0][:2]
    in_b1 = [k for k, b in enumerate(buckets) if b == 1][:2]
    stale = t.snapshot
    execute(stale, delete_matching(f"k = {in_b0[0]}")(stale))          # the winner
    result, _ = execute(stale, delete_matching(f"k = {in_b1[0]}")(stale))  # disjoint: rebases
    assert result is not None
    with pytest.raises(ConcurrentModificationError, match="removed"):
        execute(stale, delete_matching(f"k = {in_b0[1]}")(stale))      # its file was rewritten
    keys = set(t.update_incremental().to_arrow().column("k").to_pylist())
    assert keys == set(range(200)) - {in_b0[0], in_b1[0]}


@pytest.mark.spark
def test_a_spark_dataframe_is_a_source(spark, tmp_path):
    t = IndexedTable.create(str(tmp_path / "t"), rows(list(range(20))), ["k"], num_buckets=2)
    src = spark.createDataFrame([(3, 33, "x"), (30, 300, "y")], "k bigint, v bigint, s string")
    m = t.merge(src, "t.k = s.k", "s", "t").when_matched_update_all().when_not_matched_insert_all().execute()
    assert (m["num_target_rows_updated"], m["num_target_rows_inserted"]) == (1, 1)
    assert t.lookup([3, 30]).sort_by("k").column("v").to_pylist() == [33, 300]


def test_bucket_parts_run_four_buckets_at_a_time():
    from indexeddf.changes.parts import SourcePart, grouped

    def part(buckets, n):
        return SourcePart(None if buckets is None else frozenset(buckets), n, lambda: rows(list(range(n))))

    parts = [part([b], b + 1) for b in range(6)]
    got = grouped(parts, 4)
    assert [sorted(p.buckets) for p in got] == [[0, 1, 2, 3], [4, 5]]
    assert [p.num_rows for p in got] == [10, 11] and got[0].read().num_rows == 10
    assert grouped([part(None, 3)], 4)[0].buckets is None
