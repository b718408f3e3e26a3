"""The table is a Delta table: two Delta engines nobody here wrote read what indexeddf
wrote, version by version, and get exactly indexeddf's rows.

- delta-rs (``deltalake``) reads every version, whole and with filters through its
  query engine (whose file skipping trusts our ``stats``), for tables built by random sequences of create /
  append / delete / overwrite / optimize / restore / checkpoints / index changes;
- DuckDB's ``delta`` extension (delta-kernel-rs; loaded from the
  ``duckdb-extension-delta`` package's file, no network) reads the newest version;
- delta-rs can keep appending to a table indexeddf writes (no table feature locks
  it out), and indexeddf reads those appends.
"""

from __future__ import annotations

import datetime as dt
import decimal
import os
import warnings

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracles import duckdb_delta
from table_ops import operations, run_op

deltalake = pytest.importorskip("deltalake")

from indexeddf import IndexedTable  # noqa: E402

SCHEMA = pa.schema([
    ("k", pa.int64()),
    ("s", pa.string()),
    ("f", pa.float64()),
    ("d", pa.decimal128(12, 3)),
    ("ts", pa.timestamp("us", tz="UTC")),
    ("day", pa.date32()),
    ("flag", pa.bool_()),
])


def batch(keys: list[int], nan: bool = False) -> pa.Table:
    base = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    return pa.table({
        "k": pa.array(keys, pa.int64()),
        "s": [None if k % 7 == 0 else f"s{k % 13}" for k in keys],
        "f": [float("nan") if nan and k % 5 == 0 else k / 3 for k in keys],
        "d": [decimal.Decimal(k) / 1000 for k in keys],
        "ts": [base + dt.timedelta(microseconds=k * 1_000_003) for k in keys],
        "day": [dt.date(2026, 1, 1) + dt.timedelta(days=k % 40) for k in keys],
        "flag": [k % 2 == 0 for k in keys],
    }, schema=SCHEMA)


def ordered(t: pa.Table) -> pa.Table:
    t = t.select(SCHEMA.names)
    return t.sort_by([("k", "ascending"), ("s", "ascending")])


def same_rows(ours: pa.Table, theirs: pa.Table) -> bool:
    """Equal as multisets of rows (NaN equal to NaN, which Table.equals does not do).

    Rows are compared through their repr so that None, NaN and values of one column sort
    together without Python comparing a str with a float."""
    def rows(t):
        cells = t.cast(ours.schema).select(SCHEMA.names).to_pylist()
        return sorted(repr(tuple("NaN" if v != v else v for v in r.values())) for r in cells)
    return rows(ours) == rows(theirs)


ops = operations(nan=True, max_size=10)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops, st.integers(1, 4), st.integers(0, 300))
def test_delta_engines_read_every_version_as_indexeddf_does(tmp_path_factory, sequence, checkpoint_every, probe):
    path = str(tmp_path_factory.mktemp("delta"))
    t = IndexedTable.create(path, batch(list(range(0, 60))), index_columns=["k"], num_buckets=4)
    t.set_properties({"indexeddf.checkpointInterval": str(checkpoint_every)})
    for op in sequence:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            run_op(t, op, batch, index_buckets=2)
    for v in range(t.version + 1):
        ours = IndexedTable.for_path(path, version=v).to_arrow()
        theirs = deltalake.DeltaTable(path, version=v)
        assert same_rows(ours, theirs.to_pyarrow_table()), f"version {v}"
        # delta-rs's query engine (DataFusion) skips files by our stats: a filter on each
        # kind of column must not lose rows. (Its pyarrow-dataset path is not used for
        # filters: delta-rs 1.6.6 turns a column without min/max, which the Delta protocol
        # allows and which we write for floats holding NaN, into a guarantee `f >= null`
        # that drops the file; docs/PROTOCOL.md notes it.)
        for column, literal, value in (
            ("k", str(probe), probe),
            ("s", f"'s{probe % 13}'", f"s{probe % 13}"),
            ("f", repr(probe / 3), probe / 3),
            ("day", f"DATE '{dt.date(2026, 1, 1 + probe % 28)}'", dt.date(2026, 1, 1 + probe % 28)),
            ("flag", "true", True),
        ):
            got = pa.table(deltalake.QueryBuilder().register("t", theirs)
                           .execute(f"SELECT * FROM t WHERE {column} = {literal}").read_all())
            want = ours.filter(pc.equal(ours[column], pa.scalar(value, ours.schema.field(column).type)))
            assert same_rows(want, got), f"version {v}, {column} = {value!r}"
    newest = IndexedTable.for_path(path).to_arrow()
    con = duckdb_delta()
    got = con.execute(f"SELECT * FROM delta_scan('{path}')").to_arrow_table()
    assert same_rows(newest, got)
    got = con.execute(f"SELECT * FROM delta_scan('{path}') WHERE k = {probe} OR ts > TIMESTAMPTZ '2026-01-01 00:04:00+00'").to_arrow_table()
    want = con.execute(f"SELECT * FROM newest WHERE k = {probe} OR ts > TIMESTAMPTZ '2026-01-01 00:04:00+00'").to_arrow_table()
    assert same_rows(want, got)


def test_delta_rs_appends_to_an_indexeddf_table_and_indexeddf_reads_them(tmp_path):
    path = str(tmp_path / "t")
    t = IndexedTable.create(path, batch(list(range(100))), index_columns=["k"], num_buckets=4)
    t.create_index("by_s", ["s"])
    t.append(batch(list(range(100, 120))))
    deltalake.write_deltalake(path, batch(list(range(500, 510))), mode="append")
    deltalake.DeltaTable(path).create_checkpoint()
    t = IndexedTable.for_path(path)
    assert t.version == deltalake.DeltaTable(path).version()
    assert same_rows(t.to_arrow(), deltalake.DeltaTable(path).to_pyarrow_table())
    assert t.to_arrow().num_rows == 130
    # The indexes survive the other engine's commit and checkpoint; its rows are found
    # (their file is not indexed yet: a hybrid scan covers it).
    assert {i.name for i in t.indexes()} == {"primary", "by_s"}
    assert sorted(t.lookup([5, 505])["k"].to_pylist()) == [5, 505]
    before = t.version
    assert t.append(batch([999])) == before + 1
    # Its file has no bucket: every bucket's reads include it until optimize buckets it.
    assert [a.bucket for a in t._snapshot.live_files() if a.bucket is None] == [None]
    t.refresh()
    assert "unindexed files scanned: 0" in t.explain("k = 505")
    assert sorted(t.lookup([5, 505, 999])["k"].to_pylist()) == [5, 505, 999]
    t.optimize(mode="full")
    assert {a.bucket for a in t._snapshot.live_files()} == {0, 1, 2, 3}
    assert len(t._snapshot.live_files()) == 4
    assert sorted(t.lookup([5, 505, 999])["k"].to_pylist()) == [5, 505, 999]
    deltalake.write_deltalake(path, batch([700, 701]), mode="append")
    t = IndexedTable.for_path(path)
    t.delete("k = 700 OR k = 5")
    assert same_rows(t.to_arrow(), deltalake.DeltaTable(path).to_pyarrow_table())
    assert t.to_arrow().num_rows == 130 + 1 + 2 - 2


def test_a_delta_rs_delete_of_indexeddf_files_keeps_their_ids(tmp_path):
    """delta-rs removes files without our tags: the tombstones still carry the ids the
    index knows the files by, so the index's deleted share is counted right."""
    path = str(tmp_path / "t")
    t = IndexedTable.create(path, batch(list(range(100))), index_columns=["k"], num_buckets=4)
    ids = {a.path: a.fileId for a in t._snapshot.live_files()}
    sizes = {a.path: a.size for a in t._snapshot.live_files()}
    deltalake.DeltaTable(path).delete("k < 10")
    t = IndexedTable.for_path(path)
    assert t._snapshot.tombstones and all(r.fileId == ids[p] for p, r in t._snapshot.tombstones.items())
    from indexeddf.optimizer.planner import covered_ids, staleness

    # The share of the index's bytes that delta-rs removed (with path-derived ids it was 0).
    gone = sum(sizes[p] for p in t._snapshot.tombstones) / sum(sizes.values())
    assert 0 < gone == pytest.approx(staleness(t._snapshot, covered_ids(t._snapshot.indexes["primary"]))[1])
    assert sorted(t.lookup(list(range(0, 20)))["k"].to_pylist()) == list(range(10, 20))


def test_a_commit_without_commit_info_is_dated_by_its_file(tmp_path):
    """Delta writers may leave commitInfo out; time travel then uses the file's time."""
    import time

    path = str(tmp_path / "t")
    t = IndexedTable.create(path, batch([1, 2]), index_columns=["k"], num_buckets=2)
    t.append(batch([3]))
    commit = os.path.join(path, "_delta_log", f"{1:020d}.json")
    with open(commit) as f:
        kept = [line for line in f if not line.startswith('{"commitInfo"')]
    with open(commit, "w") as f:
        f.write("".join(kept))
    later = time.time() + 3600
    os.utime(commit, (later, later))
    now_ms = int(time.time() * 1000)
    assert IndexedTable.for_path(path, timestamp=now_ms).version == 0
    assert IndexedTable.for_path(path, timestamp=now_ms + 2 * 3_600_000).to_arrow().num_rows == 3
