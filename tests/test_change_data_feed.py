"""Delta's change data feed: written by every MERGE, UPDATE and DELETE (the Python change
engine, copy on write and deletion vectors, and Spark's plan), read by ``IndexedTable.changes``.

Oracles: delta-rs's ``load_cdf`` reads the same feed (tables without deletion vectors), and
the expected changes of every version come from DuckDB's copy of the table, which runs the
same statements: a version's feed, updates' pre-images counted as deletes and post-images as
inserts, is the multiset difference of DuckDB's rows after and before it.
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))

from test_changes import SCHEMA, Duck, apply, operations, rows  # noqa: E402

from indexeddf import IndexedTable  # noqa: E402
from indexeddf.errors import InvalidOptionError, MissingChangeDataError, VersionNotFoundError  # noqa: E402
from indexeddf.format.log import read_commit  # noqa: E402
from indexeddf.spec.actions import CdcFile  # noqa: E402

FEED = {"delta.enableChangeDataFeed": "true"}
SIGN = {"insert": 1, "update_postimage": 1, "delete": -1, "update_preimage": -1}


def _key(r: tuple):
    return tuple((x is None, x) for x in r)


def feed_rows(t: pa.Table) -> list[tuple]:
    """A feed's rows (the table's columns, ``_change_type``, ``_commit_version``), sorted."""
    names = [c for c in t.column_names if c != "_commit_timestamp"]
    out = [tuple(r[c] for c in names) for r in t.select(names).to_pylist()]
    return sorted(out, key=_key)


def net(feed: list[tuple], version: int) -> Counter:
    """The signed row counts one version's feed gives (pre-images out, post-images in)."""
    c: Counter = Counter()
    for *row, kind, v in feed:
        if v == version:
            c[tuple(row)] += SIGN[kind]
    return Counter({k: n for k, n in c.items() if n})


def difference(before: pa.Table, after: pa.Table) -> Counter:
    """The signed row counts that turn ``before`` into ``after`` (DuckDB's snapshots)."""
    c: Counter = Counter()
    for r in after.to_pylist():
        c[tuple(r.values())] += 1
    for r in before.to_pylist():
        c[tuple(r.values())] -= 1
    return Counter({k: n for k, n in c.items() if n})


def delta_rs_feed(path: str, start: int, end: int | None = None) -> list[tuple]:
    from deltalake import DeltaTable

    reader = DeltaTable(path).load_cdf(starting_version=start, ending_version=end)
    return feed_rows(pa.table(reader.read_all()))


def delta_rs_changes_then_convert(path: str) -> IndexedTable:
    """A delta-rs table with the feed on (protocol (1, 4)), 30 rows, changed twice by delta-rs
    (v1: an UPDATE of k < 5, v2: a DELETE of k = 7: delta-rs's own cdc files), converted (v3)."""
    import deltalake

    deltalake.write_deltalake(path, rows(list(range(30))), configuration=FEED)
    dt = deltalake.DeltaTable(path)
    dt.update(updates={"v": "v + 1"}, predicate="k < 5")
    dt.delete("k = 7")
    return IndexedTable.convert(path, ["k"], num_buckets=2)


def _merge(t: IndexedTable, source: pa.Table):
    return (t.merge(source, "t.k = s.k", source_alias="s", target_alias="t")
            .when_matched_delete(predicate="s.v % 3 = 0")
            .when_matched_update(updates={"v": "s.v + t.v", "s": "upper(s.s)"}, predicate="t.k < 30")
            .when_not_matched_insert_all(predicate="s.k % 2 = 0")
            .when_not_matched_by_source_update(updates={"v": "t.v + 100"}, predicate="t.k > 45")
            .execute())


def with_p(t: pa.Table, partitioned: bool) -> pa.Table:
    """``t`` with the partition column ``p`` (k % 3) when ``partitioned``."""
    if not partitioned:
        return t
    return t.append_column("p", pa.array([None if k is None else k % 3 for k in t.column("k").to_pylist()],
                                         pa.int64()))


def _steps(t: IndexedTable, duck: Duck, partitioned: bool = False) -> list[pa.Table]:
    """A merge with several clauses, an update, a delete and an append, run on ``t`` and on
    DuckDB's copy; DuckDB's rows after each (the first: before them)."""
    snaps = [duck.rows()]
    source = with_p(rows([2, 5, 9, 12, 25, 33, 70, 72, 75], 1000, "b"), partitioned)
    _merge(t, source)
    duck.run("MERGE INTO target AS t USING source_rows AS s ON t.k = s.k "
             "WHEN MATCHED AND s.v % 3 = 0 THEN DELETE "
             "WHEN MATCHED AND t.k < 30 THEN UPDATE SET v = s.v + t.v, s = upper(s.s) "
             "WHEN NOT MATCHED BY TARGET AND s.k % 2 = 0 THEN INSERT * "
             "WHEN NOT MATCHED BY SOURCE AND t.k > 45 THEN UPDATE SET v = t.v + 100", source)
    snaps.append(duck.rows())
    t.update({"s": "concat(s, '!')"}, "k % 4 = 1 AND s IS NOT NULL")
    duck.run("UPDATE target SET s = concat(s, '!') WHERE k % 4 = 1 AND s IS NOT NULL")
    snaps.append(duck.rows())
    t.delete("k BETWEEN 10 AND 20")
    duck.run("DELETE FROM target WHERE k BETWEEN 10 AND 20")
    snaps.append(duck.rows())
    extra = with_p(rows([80, 81, 3], 500, "c"), partitioned)
    t.append(extra)
    duck.run("INSERT INTO target SELECT * FROM source_rows", extra)
    snaps.append(duck.rows())
    return snaps


def _check_against_duckdb(feed: list[tuple], snaps: list[pa.Table], first: int) -> None:
    for i in range(1, len(snaps)):
        assert net(feed, first + i - 1) == difference(snaps[i - 1], snaps[i]), f"version {first + i - 1}"


@pytest.mark.parametrize("partitioned", [False, True])
def test_python_changes_write_the_feed_that_delta_rs_and_duckdb_read(tmp_path, partitioned):
    path = str(tmp_path / "t")
    first = with_p(rows(list(range(50))), partitioned)
    t = IndexedTable.create(path, first, ["k"], num_buckets=4, properties=FEED,
                            partition_by=["p"] if partitioned else ())
    assert (t.snapshot.protocol.minReaderVersion, t.snapshot.protocol.minWriterVersion) == (1, 4)
    snaps = _steps(t, Duck(first), partitioned)
    feed = t.changes(1)
    assert feed.schema.field("_commit_version").type == pa.int64()
    assert pa.types.is_timestamp(feed.schema.field("_commit_timestamp").type)
    ours = feed_rows(feed)
    _check_against_duckdb(ours, snaps, 1)
    assert ours == delta_rs_feed(path, 1)
    from deltalake import DeltaTable

    theirs = pa.table(DeltaTable(path).load_cdf(starting_version=1).read_all())
    stamps = {(v, ts.replace(tzinfo=None)) for v, ts in zip(feed["_commit_version"].to_pylist(),
                                                              feed["_commit_timestamp"].to_pylist())}
    assert stamps == set(zip(theirs["_commit_version"].to_pylist(), theirs["_commit_timestamp"].to_pylist()))
    kinds = Counter(r[-2] for r in ours)
    assert kinds["update_preimage"] == kinds["update_postimage"] > 0 and kinds["delete"] > 0 and kinds["insert"] > 0
    # The merge, the update and the delete wrote cdc files; the append none (its adds are its inserts).
    cdcs = {v: [a for a in read_commit(t.snapshot.storage, v) if isinstance(a, CdcFile)] for v in range(1, 5)}
    assert all(cdcs[v] for v in (1, 2, 3)) and not cdcs[4]
    for c in cdcs[1]:
        assert c.path.startswith("_change_data/") and not c.dataChange
        if partitioned:
            assert c.path.startswith(f"_change_data/p={c.partitionValues['p']}/")
            assert "p" not in pq.read_schema(os.path.join(path, c.path)).names
    # One version, a later range, columns, and the batches: the same rows.
    assert feed_rows(t.changes(2, 2)) == [r for r in ours if r[-1] == 2] == delta_rs_feed(path, 2, 2)
    assert t.changes(3, columns=["k"]).column_names == ["k", "_change_type", "_commit_version", "_commit_timestamp"]
    assert feed_rows(pa.concat_tables(t.changes_batches(1))) == ours


def test_deletion_vector_changes_write_the_feed(tmp_path):
    """With deletion vectors the changed files stay (re-added with a vector); the feed comes
    from the cdc files, and DuckDB's snapshots give the same changes."""
    path = str(tmp_path / "t")
    first = rows(list(range(50)))
    t = IndexedTable.create(path, first, ["k"], num_buckets=4,
                            properties={**FEED, "delta.enableDeletionVectors": "true"})
    assert "changeDataFeed" in t.snapshot.protocol.writerFeatures
    snaps = _steps(t, Duck(first))
    assert any(a.deletionVector is not None for a in t.snapshot.live_files())
    _check_against_duckdb(feed_rows(t.changes(1)), snaps, 1)
    assert feed_rows(t.changes(0)) == sorted(feed_rows(t.changes(0, 0)) + feed_rows(t.changes(1)), key=_key)


def test_deletion_vector_pre_images_read_by_pages_are_duckdbs_changes(tmp_path, monkeypatch):
    """Files written with pages of 256 bytes and the page index (``indexeddf.parquet.pageSize``),
    row groups of about 2 KB: a deletion-vector change reads its deletes and pre-images by pages
    (format/pages.py); the feed is DuckDB's change of each version, and a full scan of the table
    gives DuckDB's rows (the files read as any file is). Every changed file is read by pages here
    (``SPARSE_ROWS`` 1: a small table's rows are dense), as the calls counted say."""
    import numpy as np
    import pyarrow.fs as pafs

    from indexeddf.format import pages

    path = tmp_path / "t"
    first = rows(list(range(400)))
    t = IndexedTable.create(str(path), first, ["k"], num_buckets=2, properties={
        **FEED, "delta.enableDeletionVectors": "true", "indexeddf.parquet.pageSize": "256b",
        "indexeddf.targetRowGroupBytes": "2048"})
    a = t.snapshot.live_files()[0]
    meta = pq.ParquetFile(path / a.path).metadata
    assert meta.num_row_groups > 2 and all(meta.row_group(0).column(c).has_offset_index for c in range(3))
    handed = []  # the bytes pyarrow decodes for one row: a page a column, not the file
    with pafs.LocalFileSystem().open_input_file(str(path / a.path)) as source:
        one = pages.rows_at(source, ["k", "v", "s"], np.array([meta.num_rows - 1]), lambda d, m: (
            handed.append(d.size), pq.ParquetFile(pa.BufferReader(d), metadata=m))[1])
    assert one.equals(pq.read_table(path / a.path).slice(meta.num_rows - 1).cast(SCHEMA))
    assert handed[0] * 10 < a.size
    monkeypatch.setattr(pages, "SPARSE_ROWS", 1)
    calls, rows_at = [], pages.rows_at
    monkeypatch.setattr(pages, "rows_at", lambda *a: calls.append(1) or rows_at(*a))
    duck = Duck(first)
    snaps = _steps(t, duck)
    assert calls
    assert any(f.deletionVector is not None for f in t.snapshot.live_files())
    _check_against_duckdb(feed_rows(t.changes(1)), snaps, 1)
    assert difference(snaps[-1], t.to_arrow().select(SCHEMA.names)) == Counter()


def test_a_feed_without_cdc_files_reads_adds_removes_and_new_deletion_vectors(tmp_path):
    """Commits without cdc files (written before the feed's files existed here, by other
    writers, or the DV re-add of a delete): adds are inserts, removes deletes, a file re-added
    with a larger deletion vector deletes the rows newly in it; optimize contributes nothing."""
    path = str(tmp_path / "t")
    t = IndexedTable.create(path, rows(list(range(20))), ["k"], num_buckets=2,
                            properties={"delta.enableDeletionVectors": "true"})
    t.delete("k < 3")                   # v1: DV re-adds
    t.overwrite(rows([1, 2], 7))          # v2: removes + adds
    t.set_properties(FEED)              # v3
    t.append(rows([30], 9))             # v4: an add
    t.optimize(mode="full")             # v5: dataChange false
    assert t.version == 5
    assert feed_rows(t.changes(3)) == [(30, 9, "a30", "insert", 4)]
    with pytest.raises(MissingChangeDataError, match=r"range \[0 , 5\].*version \[0\].*DESCRIBE HISTORY") as e:
        t.changes(0)
    assert e.value.version == 0
    # The same reading rules on the versions before the feed (as a Delta reader would apply them).
    from indexeddf.reader.changes import _commit_changes
    from indexeddf.spec.column_mapping import file_schema
    schema = file_schema(t.snapshot.metadata.schema_, {})
    deleted = pa.concat_tables([read() for read in _commit_changes(t.snapshot.storage,
                                                                   read_commit(t.snapshot.storage, 1), schema,
                                                                   SCHEMA.names)])
    assert sorted(deleted.column("k").to_pylist()) == [0, 1, 2]
    assert set(deleted.column("_change_type").to_pylist()) == {"delete"}
    second = pa.concat_tables([read() for read in _commit_changes(t.snapshot.storage,
                                                                  read_commit(t.snapshot.storage, 2), schema,
                                                                  SCHEMA.names)])
    kinds = Counter(zip(second.column("_change_type").to_pylist(), second.column("k").to_pylist()))
    assert sum(n for (kind, _), n in kinds.items() if kind == "delete") == 17
    assert sorted(k for (kind, k) in kinds if kind == "insert") == [1, 2]


def test_a_table_held_across_new_commits_reads_their_feed_from_the_commits_alone(tmp_path):
    """A pipeline's table object, opened before the commits it then asks about, reads their feed
    from its own metadata and theirs, a schema change among them too, without replaying the log:
    it still reads once the log's first commit (which a replay needs) is gone. As delta-rs reads
    the feed, and as a table opened at the newest version reads it."""
    path = str(tmp_path / "t")
    IndexedTable.create(path, rows(list(range(40))), ["k"], num_buckets=4, properties=FEED)   # v0
    held = IndexedTable.for_path(path)
    t = IndexedTable.for_path(path)
    _merge(t, rows([2, 5, 9, 12, 25, 33, 70, 72], 1000, "b"))                               # v1
    t.update({"s": "concat(s, '!')"}, "k % 4 = 1")                                           # v2
    t.delete("k BETWEEN 10 AND 20")                                                          # v3
    assert held.version == 0 and t.version == 3
    assert feed_rows(held.changes(1, 3)) == delta_rs_feed(path, 1, 3) == feed_rows(t.changes(1, 3))
    t.add_columns([pa.field("w", pa.int64())])                                               # v4: a new schema
    t.append(pa.table({"k": pa.array([90], pa.int64()), "v": pa.array([1], pa.int64()), "s": ["x"],
                       "w": pa.array([5], pa.int64())}))                                     # v5
    t.delete("k = 90")                                                                       # v6
    newest = feed_rows(IndexedTable.for_path(path).changes(2))
    assert feed_rows(held.changes(2)) == newest and held.changes(2).column_names[:4] == ["k", "v", "s", "w"]
    assert [r for r in newest if r[0] == 90] == [(90, 1, "x", 5, "delete", 6), (90, 1, "x", 5, "insert", 5)]
    os.remove(Path(path) / "_delta_log" / f"{0:020d}.json")
    with pytest.raises(VersionNotFoundError):
        IndexedTable.for_path(path)
    assert feed_rows(held.changes(2)) == newest


def test_a_held_table_reads_the_metadata_of_skipped_commits_and_any_writers_line_layout(tmp_path):
    """A table held at a version before the feed was on reads the feed of later commits: the
    commit that turned it on, skipped by the range, is read for its metaData. Commits whose lines
    another writer laid out with whitespace read the same feed (their lines named by pattern,
    not by prefix), as delta-rs reads it."""
    path = str(tmp_path / "t")
    held = IndexedTable.create(path, rows(list(range(30))), ["k"], num_buckets=2)    # v0: the feed off
    t = IndexedTable.for_path(path)
    t.set_properties(FEED)                                                           # v1
    t.update({"v": "v + 1"}, "k < 6")                                                # v2
    _merge(t, rows([2, 5, 9, 12, 25, 33, 70], 1000, "b"))                            # v3
    want = delta_rs_feed(path, 2)
    assert feed_rows(held.changes(2)) == want and {r[4] for r in want} == {2, 3}
    log = Path(path) / "_delta_log"
    for v in (1, 2, 3):  # every line re-laid out: spaces after the separators, and before the object
        f = log / f"{v:020d}.json"
        lines = [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
        f.write_text("".join(" " + json.dumps(obj, separators=(", ", " : ")) + "\n" for obj in lines))
    assert feed_rows(held.changes(2)) == want == feed_rows(IndexedTable.for_path(path).changes(2))
    with pytest.raises(MissingChangeDataError, match=r"version \[0\]"):
        held.changes(0)


def test_property_set_later_upgrades_the_protocol_and_ranges_are_checked(tmp_path):
    path = str(tmp_path / "t")
    t = IndexedTable.create(path, rows(list(range(10))), ["k"], num_buckets=2)
    assert t.snapshot.protocol.minWriterVersion == 2
    t.set_properties(FEED)                               # v1
    assert (t.snapshot.protocol.minReaderVersion, t.snapshot.protocol.minWriterVersion) == (1, 4)
    t.delete("k = 3")                                   # v2
    t.update({"v": "v + 1"}, "k = 4")                   # v3
    assert sorted(r[3] for r in feed_rows(t.changes(1))) == ["delete", "update_postimage", "update_preimage"]
    assert feed_rows(t.changes(1)) == delta_rs_feed(path, 1)
    with pytest.raises(VersionNotFoundError, match=r"Start version\(9\).*latest version of the table\(3\)"):
        t.changes(9)
    with pytest.raises(InvalidOptionError, match="End cannot be before start"):
        t.changes(3, 2)
    info = t.history()
    at = {e.version: e.timestamp for e in info}
    assert feed_rows(t.changes(start_timestamp=at[2], end_timestamp=at[2])) == feed_rows(t.changes(2, 2))
    t.set_properties({"delta.enableChangeDataFeed": "false"})  # v4
    t.delete("k = 5")                                          # v5: no cdc written
    assert not [a for a in read_commit(t.snapshot.storage, 5) if isinstance(a, CdcFile)]
    with pytest.raises(MissingChangeDataError, match=r"version \[4\]"):
        t.changes(2)
    # A table with deletion vectors gets the writer feature at writer 7.
    dv = IndexedTable.create(str(tmp_path / "dv"), rows([1]), ["k"], properties={"delta.enableDeletionVectors": "true"})
    dv.set_properties(FEED)
    assert "changeDataFeed" in dv.snapshot.protocol.writerFeatures


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(ops=st.lists(operations, min_size=1, max_size=4), vectors=st.booleans(), data=st.data())
def test_replaying_the_feed_from_a_version_gives_the_last_version(tmp_path_factory, ops, vectors, data):
    path = str(tmp_path_factory.mktemp("feed") / "t")
    first = rows(list(range(0, 40, 3)))
    t = IndexedTable.create(path, first, ["k"], num_buckets=2,
                            properties={**FEED, "delta.enableDeletionVectors": str(vectors).lower()})
    duck = Duck(first)
    snaps = {0: duck.rows()}
    for op in ops:
        apply(t, duck, op)
        snaps[t.version] = duck.rows()
    start = data.draw(st.sampled_from(sorted(snaps)))
    rows_at: Counter = Counter(tuple(r.values()) for r in snaps[start].cast(SCHEMA).to_pylist())
    if start < t.version:
        for *row, kind, _ in feed_rows(t.changes(start + 1)):
            rows_at[tuple(row)] += SIGN[kind]
    assert all(n >= 0 for n in rows_at.values())
    assert +rows_at == Counter(tuple(r.values()) for r in snaps[max(snaps)].cast(SCHEMA).to_pylist())


def test_vacuum_keeps_the_change_data_of_retained_versions_and_deletes_the_rest(tmp_path):
    import time

    from indexeddf.writer import maintenance

    path = str(tmp_path / "t")
    t = IndexedTable.create(path, rows(list(range(20))), ["k"], num_buckets=2, properties=FEED)
    t.delete("k < 3")                                   # v1: its change data is older than the retention
    time.sleep(0.05)
    boundary_ts = int(time.time() * 1000)
    time.sleep(0.05)
    t.update({"v": "v + 1"}, "k = 5")                   # v2
    t.delete("k = 6")                                   # v3
    cdc = {v: [a.path for a in read_commit(t.snapshot.storage, v) if isinstance(a, CdcFile)] for v in (1, 2, 3)}
    stray_old, stray_young = "_change_data/cdc-aborted.c000.snappy.parquet", "_change_data/cdc-inflight.parquet"
    for rel in (stray_old, stray_young):
        t.snapshot.storage.write_bytes(rel, b"x")
    old = (boundary_ts - 10_000) / 1000
    os.utime(os.path.join(path, stray_old), (old, old))
    now = int(time.time() * 1000)
    hours = (now - boundary_ts) / 3_600_000
    result = maintenance.vacuum(t.snapshot, hours, enforce_retention=False, now_ms=now)
    gone = set(result.files)
    assert set(cdc[1]) <= gone and stray_old in gone and stray_young not in gone
    assert all(os.path.exists(os.path.join(path, p)) for p in cdc[2] + cdc[3])
    assert sorted(r[3] for r in feed_rows(t.changes(2))) == ["delete", "update_postimage", "update_preimage"]


def test_a_delta_rs_table_with_the_feed_keeps_it_after_convert(tmp_path):
    """delta-rs writes a table with the feed on (protocol (1, 4)) and changes it; once
    converted, indexeddf's changes write the feed, and delta-rs reads the whole range as
    ``changes`` does."""
    import deltalake

    path = str(tmp_path / "t")
    t = delta_rs_changes_then_convert(path)                                 # v1, v2: delta-rs's; v3: convert
    _merge(t, rows([1, 2, 3, 12, 40, 42], 900, "m"))                        # v4
    t.delete("k > 25")                                                      # v5
    assert all([a for a in read_commit(t.snapshot.storage, v) if isinstance(a, CdcFile)] for v in (1, 2, 4, 5))
    ours = feed_rows(t.changes(0))
    assert ours == delta_rs_feed(path, 0)
    assert Counter(r[-1] for r in ours)[3] == 0  # convert changes no row
    # Converting with the property set upgrades a plain delta-rs table's protocol.
    other = str(tmp_path / "plain")
    deltalake.write_deltalake(other, rows(list(range(5))))
    c = IndexedTable.convert(other, ["k"], properties=FEED)
    assert c.snapshot.protocol.minWriterVersion >= 4
    c.delete("k = 1")
    assert [r[-2] for r in feed_rows(c.changes(c.version))] == ["delete"]



@pytest.mark.parametrize("mapped", [False, True])
def test_selective_overwrites_expression_deletes_and_mapped_columns_write_the_feed(tmp_path, mapped):
    """A replaceWhere on a data column writes its deleted and inserted rows as change data (as
    Delta does with the feed on); a delete by a pyarrow expression its deleted rows; in a
    column-mapped table the change data files use the physical names (delta-rs 1.6.6 reads no
    feed of a column-mapped table: DuckDB's snapshots are the oracle there)."""
    import pyarrow.dataset as ds

    path = str(tmp_path / "t")
    first = rows(list(range(30)))
    t = IndexedTable.create(path, first, ["k"], num_buckets=2,
                            properties={**FEED, "delta.columnMapping.mode": "name" if mapped else "none"})
    assert t.snapshot.protocol.minWriterVersion >= (5 if mapped else 4)
    duck = Duck(first)
    snaps = [duck.rows()]
    t.overwrite(rows([3, 4, 40], 700, "w"), predicate="k < 5 OR k = 40")         # v1
    duck.run("DELETE FROM target WHERE k < 5 OR k = 40")
    duck.run("INSERT INTO target SELECT * FROM source_rows", rows([3, 4, 40], 700, "w"))
    snaps.append(duck.rows())
    t.delete(ds.field("k") > 25)                                                  # v2
    duck.run("DELETE FROM target WHERE k > 25")
    snaps.append(duck.rows())
    t.update({"s": "upper(s)"}, "k BETWEEN 7 AND 9")                               # v3
    duck.run("UPDATE target SET s = upper(s) WHERE k BETWEEN 7 AND 9")
    snaps.append(duck.rows())
    for v in (1, 2, 3):
        cdcs = [a for a in read_commit(t.snapshot.storage, v) if isinstance(a, CdcFile)]
        assert cdcs, v
        names = pq.read_schema(os.path.join(path, cdcs[0].path)).names
        assert ("k" not in names) == mapped and "_change_type" in names  # physical names when mapped
    ours = feed_rows(t.changes(1))
    _check_against_duckdb(ours, snaps, 1)
    if not mapped:
        assert ours == delta_rs_feed(path, 1)


SPARK_MERGE = ("MERGE INTO {name} AS t USING cdf_source AS s ON t.k = s.k "
               "WHEN MATCHED AND s.v % 3 = 0 THEN DELETE "
               "WHEN MATCHED AND t.k < 30 THEN UPDATE SET v = s.v + t.v, s = upper(s.s) "
               "WHEN NOT MATCHED {by_target}AND s.k % 2 = 0 THEN INSERT * "
               "WHEN NOT MATCHED BY SOURCE AND t.k > 45 THEN UPDATE SET v = t.v + 100")


@pytest.mark.spark
@pytest.mark.parametrize("vectors", [False, True])
def test_spark_sql_changes_through_sparks_plan_write_the_feed(spark, sql, conf, tmp_path, vectors):
    """``ALTER TABLE ... SET TBLPROPERTIES`` turns the feed on; Spark SQL's MERGE (forced through
    Spark's plan), UPDATE and DELETE write it from their tasks; delta-rs (without deletion
    vectors) and DuckDB's snapshots read the same changes."""
    conf("spark.indexeddf.merge.engineMaxSourceBytes", "-1")
    path = str(tmp_path / "t")
    first = rows(list(range(50)))
    IndexedTable.create(path, first, ["k"], num_buckets=4,
                        properties={"delta.enableDeletionVectors": str(vectors).lower()})
    name = f"indexeddf.`{path}`"
    sql(f"ALTER TABLE {name} SET TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')")          # v1
    t = IndexedTable.for_path(path)
    assert "changeDataFeed" in (t.snapshot.protocol.writerFeatures or ()) or t.snapshot.protocol.minWriterVersion == 4
    duck = Duck(first)
    snaps = [duck.rows()]
    source = rows([2, 5, 9, 12, 25, 33, 70, 72, 75], 1000, "b")
    spark.createDataFrame(source.to_pylist(), "k bigint, v bigint, s string").createOrReplaceTempView("cdf_source")
    sql(SPARK_MERGE.format(name=name, by_target=""))                                                # v2
    duck.run(SPARK_MERGE.format(name="target", by_target="BY TARGET ").replace("cdf_source", "source_rows"), source)
    snaps.append(duck.rows())
    sql(f"UPDATE {name} SET s = concat(s, '!') WHERE k % 4 = 1 AND s IS NOT NULL")                  # v3
    duck.run("UPDATE target SET s = concat(s, '!') WHERE k % 4 = 1 AND s IS NOT NULL")
    snaps.append(duck.rows())
    sql(f"DELETE FROM {name} WHERE k BETWEEN 10 AND 20")                                            # v4
    duck.run("DELETE FROM target WHERE k BETWEEN 10 AND 20")
    snaps.append(duck.rows())
    t = IndexedTable.for_path(path)
    assert t.version == 4 and [h.operation for h in t.history()][:3] == ["DELETE", "UPDATE", "MERGE"]
    assert all([a for a in read_commit(t.snapshot.storage, v) if isinstance(a, CdcFile)] for v in (2, 3, 4))
    ours = feed_rows(t.changes(2))
    _check_against_duckdb(ours, snaps, 2)
    if not vectors:
        assert ours == delta_rs_feed(path, 2)


@pytest.mark.spark
def test_create_table_tblproperties_turn_the_feed_on(sql, tmp_path):
    path = str(tmp_path / "made")
    sql(f"CREATE TABLE cdf_made (k bigint, v bigint, s string) USING indexeddf OPTIONS (indexColumns 'k', "
        f"numBuckets 2) TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true') LOCATION '{path}'")
    sql("INSERT INTO cdf_made VALUES (1, 1, 'a'), (2, 2, 'b')")
    sql("UPDATE cdf_made SET v = 20 WHERE k = 2")
    t = IndexedTable.for_path(path)
    assert t.snapshot.protocol.minWriterVersion == 4
    assert feed_rows(t.changes(1)) == [(1, 1, "a", "insert", 1), (2, 2, "b", "insert", 1),
                                       (2, 2, "b", "update_preimage", 2), (2, 20, "b", "update_postimage", 2)]


@pytest.mark.spark
def test_a_spark_replace_where_writes_the_rows_its_tasks_wrote_as_inserts(spark, sql, tmp_path):
    path = str(tmp_path / "t")
    t = IndexedTable.create(path, rows(list(range(20))), ["k"], num_buckets=2, properties=FEED)
    new = rows([1, 2, 3], 300, "r")
    (spark.createDataFrame(new.to_pylist(), "k bigint, v bigint, s string").write.format("indexeddf")
     .mode("overwrite").option("replaceWhere", "k < 4").save(path))
    t = IndexedTable.for_path(path)
    assert t.history()[0].operation == "WRITE"
    assert [a for a in read_commit(t.snapshot.storage, 1) if isinstance(a, CdcFile)]
    expected = [(*r.values(), "delete", 1) for r in rows(list(range(4))).to_pylist()]
    expected += [(*r.values(), "insert", 1) for r in new.to_pylist()]
    assert feed_rows(t.changes(1)) == sorted(expected, key=_key) == delta_rs_feed(path, 1)


def _upsert(t: IndexedTable, source: pa.Table, update_when: str | None = None):
    return (t.merge(source, "t.k = s.k", source_alias="s", target_alias="t")
            .when_matched_update_all(predicate=update_when).when_not_matched_insert_all().execute())


def _cdc_files(path: str, versions) -> list[list[CdcFile]]:
    storage = IndexedTable.for_path(path).snapshot.storage
    return [[a for a in read_commit(storage, v) if isinstance(a, CdcFile)] for v in versions]


@pytest.mark.parametrize("vectors", [False, True])
def test_a_merge_that_only_inserts_writes_no_change_data_as_deltas_merge(tmp_path, vectors):
    """Delta's MERGE writes no change data for a commit that only adds rows (an insert-only MERGE,
    or one whose matched clauses changed no row): a reader of the feed reads the commit's added
    files as inserts (PROTOCOL.md's "Change Data Files"). A MERGE that also changes rows writes its
    inserts with the rest, since a reader of a commit with change data reads nothing else of it."""
    path = str(tmp_path / "t")
    t = IndexedTable.create(path, rows(list(range(10))), ["k"], num_buckets=2,
                            properties={**FEED, "delta.enableDeletionVectors": str(vectors).lower()})
    (t.merge(rows([20, 21], 50), "t.k = s.k", source_alias="s", target_alias="t")
     .when_not_matched_insert_all().execute())                                # v1: insert-only
    _upsert(t, rows([3, 22], 60), update_when="s.v > 1000")                   # v2: 3 matched, not updated
    _upsert(t, rows([4, 23], 70))                                             # v3: an update and an insert
    assert [len(c) > 0 for c in _cdc_files(path, (1, 2, 3))] == [False, False, True]
    written = {p.name for p in (tmp_path / "t" / "_change_data").iterdir()}
    assert written == {Path(a.path).name for a in _cdc_files(path, (3,))[0]}  # no file left behind
    expected = [(20, 50, "a20", "insert", 1), (21, 51, None, "insert", 1), (22, 61, "a22", "insert", 2),
                (4, 4, "a4", "update_preimage", 3), (4, 70, "a4", "update_postimage", 3), (23, 71, "a23", "insert", 3)]
    assert feed_rows(t.changes(1)) == sorted(expected, key=_key)
    if not vectors:
        assert feed_rows(t.changes(1)) == delta_rs_feed(path, 1)


@pytest.mark.spark
def test_an_insert_only_merge_through_sparks_plan_writes_no_change_data(spark, sql, conf, tmp_path):
    """The tasks of Spark's plan each write their part of the change data; the driver drops it when
    the commit as a whole only inserted (no task can tell), and the feed reads the same."""
    conf("spark.indexeddf.merge.engineMaxSourceBytes", "-1")
    path = str(tmp_path / "t")
    IndexedTable.create(path, rows(list(range(10))), ["k"], num_buckets=4, properties=FEED)
    source = rows([2, 30, 31, 32], 100, "n")
    spark.createDataFrame(source.to_pylist(), "k bigint, v bigint, s string").createOrReplaceTempView("cdf_ins")
    sql(f"MERGE INTO indexeddf.`{path}` t USING cdf_ins s ON t.k = s.k WHEN NOT MATCHED THEN INSERT *")  # v1
    sql(f"MERGE INTO indexeddf.`{path}` t USING cdf_ins s ON t.k = s.k "
        "WHEN MATCHED AND s.k = 2 THEN UPDATE SET v = s.v")                                           # v2
    assert [len(c) > 0 for c in _cdc_files(path, (1, 2))] == [False, True]
    assert not [p for p in (tmp_path / "t" / "_change_data").iterdir()
                if p.name not in {Path(a.path).name for a in _cdc_files(path, (2,))[0]}]
    expected = [(30, 101, "n30", "insert", 1), (31, 102, "n31", "insert", 1), (32, 103, "n32", "insert", 1),
                (2, 2, "a2", "update_preimage", 2), (2, 100, "a2", "update_postimage", 2)]
    assert feed_rows(IndexedTable.for_path(path).changes(1)) == sorted(expected, key=_key) == delta_rs_feed(path, 1)
