"""Index lookups without Spark: the same rows as a filter over a full read, every version."""

from __future__ import annotations

import time
from collections import Counter

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import indexeddf.reader.lookup as lookup_module
import indexeddf.writer.index_files as index_files_module
from indexeddf import IndexedTable
from indexeddf.errors import IndexExistsError, IndexNotFoundError, SchemaMismatchError
from indexeddf.reader.cache import cache, cache_stats
from indexeddf.spec.bucketing import bucket_ids, key_hash

ids = st.one_of(st.none(), st.integers(-50, 50))
names = st.one_of(st.none(), st.sampled_from(["", "a", "b", "é", "long-" * 10, "z"]))


def batch(rows: list[tuple]) -> pa.Table:
    return pa.table(
        {
            "id": pa.array([r[0] for r in rows], pa.int64()),
            "name": pa.array([r[1] for r in rows], pa.string()),
            "seq": pa.array([r[2] for r in rows], pa.int32()),
        }
    )


def expected(t: IndexedTable, version: int, cols: list[str], keys: list[tuple]) -> Counter:
    wanted = set(keys)
    rows = t.to_arrow(version=version).to_pylist()
    return Counter(tuple(r.values()) for r in rows if tuple(r[c] for c in cols) in wanted)


def got(table: pa.Table) -> Counter:
    return Counter(tuple(r.values()) for r in table.to_pylist())


row_lists = st.lists(st.tuples(ids, names), min_size=0, max_size=30)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(
    batches=st.lists(row_lists, min_size=1, max_size=5),
    auto_refresh=st.booleans(),
    buckets=st.integers(1, 6),
    probe_ids=st.lists(ids, max_size=8),
    probe_names=st.lists(st.tuples(ids, names), max_size=6),
    collide=st.booleans(),
)
def test_lookup_equals_filter_for_every_version(monkeypatch, batches, auto_refresh, buckets, probe_ids, probe_names, collide):
    if collide:
        # Force hash collisions: only four distinct key hashes exist.
        weak = lambda cols: key_hash(cols) & 0x3  # noqa: E731
        monkeypatch.setattr(index_files_module, "bucket_ids_and_key_hash", lambda cols, n: (bucket_ids(cols, n), weak(cols)))
        monkeypatch.setattr(lookup_module, "key_hash", weak)
    cache().clear()
    path = f"memory://lookup/{time.time_ns()}"
    seq = iter(range(10_000))
    numbered = [[(i, n, next(seq)) for i, n in rows] for rows in batches]
    t = IndexedTable.create(
        path, batch(numbered[0]), index_columns=["id"], num_buckets=buckets,
        properties={"indexeddf.index.autoRefresh": str(auto_refresh).lower()},
    )
    t.create_index("by_id_name", ["id", "name"], num_buckets=max(1, buckets - 1))
    for rows in numbered[1:]:
        t.append(batch(rows))
    present = [r[0] for rows in numbered for r in rows][:3]
    id_keys = probe_ids + present + present[:1]  # absent, present and duplicated keys
    for v in range(t.version + 1):
        want = expected(t, v, ["id"], [(k,) for k in id_keys])
        assert got(t.lookup(id_keys, version=v)) == want
        # Again: now from the bucket's cached trie (small index files merged into one segment).
        assert got(t.lookup(id_keys, version=v)) == want
        if v >= 1:  # the secondary index exists from version 1 on
            assert got(t.lookup(probe_names, version=v, index="by_id_name")) == expected(t, v, ["id", "name"], probe_names)


def test_lookup_projects_columns_and_uses_the_cache(table_path):
    t = IndexedTable.create(table_path, batch([(i, f"n{i}", i) for i in range(2000)]), index_columns=["id"], num_buckets=8)
    cache().clear()
    first = t.lookup([5, 6], columns=["seq"])
    assert first.column_names == ["seq"] and sorted(first.column("seq").to_pylist()) == [5, 6]
    misses = cache_stats().misses
    again = t.lookup([5, 6], columns=["seq"])
    assert again.equals(first)
    assert cache_stats().misses == misses and cache_stats().hits > 0


def test_only_touched_buckets_are_read(table_path, monkeypatch):
    t = IndexedTable.create(table_path, batch([(i, "x", i) for i in range(5000)]), index_columns=["id"], num_buckets=16)
    cache().clear()
    reads = []
    original = t.snapshot.storage.__class__.read_bytes

    def counting(self, rel):
        reads.append(rel)
        return original(self, rel)

    monkeypatch.setattr(t.snapshot.storage.__class__, "read_bytes", counting)
    t.lookup([42])
    index_reads = [r for r in reads if r.startswith("_indexes/")]
    assert len({r.split("/")[2] for r in index_reads}) == 1  # one bucket's index files


def test_cache_is_bounded_and_evicts_least_recently_used(table_path):
    t = IndexedTable.create(table_path, batch([(i, "x", i) for i in range(5000)]), index_columns=["id"], num_buckets=16)
    cache().clear()
    cache().resize(20_000)
    try:
        for k in range(200):
            t.lookup([k])
        stats = cache_stats()
        assert stats.bytes <= 20_000 and stats.evictions > 0
    finally:
        cache().resize(1 << 30)


def test_the_cache_keeps_footers_compact_and_reads_row_groups_through_them(table_path):
    """A decoded Parquet footer holds about a kilobyte for each column chunk of every row
    group; the cache keeps a footer's serialized bytes instead (with where each row group's
    entry lies) and decodes a footer of the row groups a read needs: what it holds of the
    footers is their size in the files, and the rows read through them equal DuckDB's."""
    import duckdb
    import pyarrow.parquet as pq

    from indexeddf.format.footers import _walked_starts, read_footer

    t = IndexedTable.create(table_path, batch([(i, f"n{i}", i) for i in range(20_000)]), index_columns=["id"],
                            num_buckets=1, properties={"indexeddf.targetRowGroupBytes": "4096"})
    cache().clear()
    assert t.lookup([7, 19_999]).column("name").to_pylist() == ["n7", "n19999"]
    (data,) = t.snapshot.live_files()
    index_path = f"{table_path}/{t.snapshot.indexes['primary'].files[0].path}"
    metas = [pq.read_metadata(f"{table_path}/{data.path}"), pq.read_metadata(index_path)]
    assert metas[0].num_row_groups > 50
    footers = sum(m.serialized_size for m in metas)
    held = sum(n for k, (_, n) in cache()._items.items() if k[0] in ("footer", "indexfooter"))
    assert footers < held < 2 * footers
    # A footer of some row groups reads those groups as the whole footer does, in the order asked.
    with pa.OSFile(f"{table_path}/{data.path}") as source:
        compact = read_footer(source)
    assert compact.rows.tolist() == [metas[0].row_group(g).num_rows for g in range(metas[0].num_row_groups)]
    # Row groups' starts are found by search; walking every field of the footer finds the same.
    assert compact.groups.tolist() == _walked_starts(compact.raw, int(compact.groups[0]), compact.num_row_groups)
    groups = [metas[0].num_row_groups - 1, 0, 17]
    got = pq.ParquetFile(f"{table_path}/{data.path}", metadata=compact.metadata(groups)).read_row_groups([0, 1, 2])
    starts = np.concatenate(([0], np.cumsum(compact.rows)))
    want = duckdb.sql(f"SELECT id, name FROM read_parquet('{table_path}/{data.path}', file_row_number = true) "
                      f"WHERE {' OR '.join(f'file_row_number BETWEEN {starts[g]} AND {starts[g + 1] - 1}' for g in groups)}"
                      " ORDER BY file_row_number").to_arrow_table()
    assert sorted(got.select(["id", "name"]).to_pylist(), key=str) == sorted(want.to_pylist(), key=str)
    assert [r["id"] for r in got.slice(0, 1).to_pylist()] == [pq.ParquetFile(f"{table_path}/{data.path}")
                                                              .read_row_group(groups[0]).column("id")[0].as_py()]


def test_a_footer_whose_row_groups_are_not_found_by_search_is_walked(tmp_path):
    """Column chunks that name a ``file_path`` (a summary ``_metadata`` file) start otherwise
    than the search for row groups expects: the footer is then walked field by field, and its
    footers of some row groups decode as the whole footer's."""
    import pyarrow.parquet as pq

    from indexeddf.format.footers import _walked_starts, read_footer

    pq.write_table(pa.table({"k": list(range(1000)), "s": [f"s{i}" for i in range(1000)]}), tmp_path / "f.parquet",
                   row_group_size=100)
    meta = pq.read_metadata(tmp_path / "f.parquet")
    meta.set_file_path("f.parquet")
    meta.write_metadata_file(str(tmp_path / "_metadata"))
    with pa.OSFile(str(tmp_path / "_metadata")) as source:
        compact = read_footer(source)
    assert compact.num_row_groups == 10
    assert compact.groups.tolist() == _walked_starts(compact.raw, int(compact.groups[0]), 10)
    part = compact.metadata([7, 2])
    assert [part.row_group(i).column(0).statistics.min for i in range(2)] == [700, 200]
    assert part.row_group(0).column(0).file_path == "f.parquet" and part.num_rows == 200


def test_a_footer_whose_values_hold_what_the_search_looks_for_is_walked(tmp_path):
    """A row group's statistic that holds the very bytes the search for the next row group's
    start looks for (a binary value can hold any bytes) must not split the footer there: the
    footer put together from the found starts is checked against pyarrow's, and walked
    field by field when they differ."""
    import pyarrow.parquet as pq

    from indexeddf.format.footers import _list_header, _walked_starts, _zigzag, read_footer, varint

    path = tmp_path / "f.parquet"

    def write(largest: bytes) -> pq.FileMetaData:
        values = [b"a" * 40, largest, b"c" * 40, b"d" * 40]
        pq.write_table(pa.table({"b": pa.array(values, pa.binary()), "i": [1, 2, 3, 4]}), path, row_group_size=2,
                       compression="none", use_dictionary=False)
        return pq.read_metadata(path)

    meta = write(b"\xff" + b"z" * 39)
    start = meta.row_group(1).column(0).file_offset
    sign = b"\x00\x19" + _list_header(2) + b"\x26" + varint(_zigzag(start))
    meta = write(b"\xff" + sign + b"z" * (39 - len(sign)))  # the same length: the same offsets
    assert meta.row_group(1).column(0).file_offset == start
    with pa.OSFile(str(path)) as source:
        compact = read_footer(source)
    assert sign in compact.raw[:int(compact.groups[1])]  # the bytes lie in the first group's entry
    assert compact.groups.tolist() == _walked_starts(compact.raw, int(compact.groups[0]), 2)
    part = compact.metadata([1])
    assert part.num_rows == 2 and part.row_group(0).column(1).statistics.min == 3


def test_index_errors(table_path):
    t = IndexedTable.create(table_path, batch([(1, "a", 1)]), index_columns=["id"], num_buckets=2)
    with pytest.raises(IndexNotFoundError):
        t.lookup([1], index="nope")
    t.create_index("by_name", ["name"])
    with pytest.raises(IndexExistsError):
        t.create_index("by_name", ["name"])
    with pytest.raises(SchemaMismatchError):
        t.create_index("bad", ["missing"])
    with pytest.raises(SchemaMismatchError):
        t.lookup(["not a number"])
    assert [i.name for i in t.indexes()] == ["by_name", "primary"]
    info = {i.name: i for i in t.indexes()}["by_name"]
    assert info.kind == "secondary" and info.state == "ACTIVE" and info.num_entries == 1


def test_explain_says_what_and_why_not(table_path):
    t = IndexedTable.create(table_path, batch([(i, "x", i) for i in range(100)]), index_columns=["id"], num_buckets=8)
    text = t.explain("id = 42 AND seq > 3")
    assert "index: 'primary'" in text and "buckets probed: [" in text and "then filtered by: seq > 3" in text
    assert "  index snapshot: 'primary' covering table version 0\n" in text  # the state this version holds
    no = t.explain("name = 'x'")
    assert "index: none" in no and "no equality, <=> or IN filter on ['id']" in no


@pytest.mark.parametrize("mode", ["incremental", "full", "quick"])
def test_refresh_modes_cover_appended_files_and_answers_stay_equal(table_path, mode):
    t = IndexedTable.create(table_path, batch([(i % 7, "a", i) for i in range(50)]), index_columns=["id"], num_buckets=4,
                            properties={"indexeddf.index.autoRefresh": "false"})
    t.create_index("by_name", ["name"], num_buckets=3)
    t.append(batch([(i % 7, "b", 100 + i) for i in range(30)]))
    t.overwrite(batch([(i % 5, "c", 200 + i) for i in range(20)]))
    t.append(batch([(i % 9, "d", 300 + i) for i in range(30)]))
    versions = t.refresh(mode=mode)
    assert len(versions) == 2 and t.history(limit=1)[0].operation == "REFRESH INDEX"
    covered = {i for f in t.snapshot.indexes["primary"].files for i in f.fileIds}
    live = t.snapshot.file_ids
    assert (live <= covered) == (mode != "quick")
    for v in range(t.version + 1):
        assert got(t.lookup(list(range(10)), version=v)) == expected(t, v, ["id"], [(k,) for k in range(10)])
        if v >= 1:
            names = [("a",), ("b",), ("c",), ("d",), (None,)]
            assert got(t.lookup(names, version=v, index="by_name")) == expected(t, v, ["name"], names)
    if mode == "incremental":  # index files of the overwritten data are gone from the index
        assert all(live & set(f.fileIds) for f in t.snapshot.indexes["primary"].files)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=st.lists(
        st.one_of(
            st.tuples(st.just("append"), row_lists),
            st.tuples(st.just("delete"), st.one_of(
                st.integers(-5, 5).map(lambda k: f"id = {k}"),
                st.integers(-5, 5).map(lambda k: f"id IN ({k}, {k + 1}) AND seq > 10"),
                st.sampled_from(["name = 'a'", "name IS NULL", "seq < 20", "id <=> NULL"]),
            )),
            st.tuples(st.just("refresh"), st.sampled_from(["incremental", "full", "quick"])),
        ),
        min_size=1, max_size=8,
    ),
    auto_refresh=st.booleans(),
)
def test_appends_deletes_refreshes_keep_every_version_right(ops, auto_refresh):
    path = f"memory://ops/{time.time_ns()}"
    seq = iter(range(100_000))
    t = IndexedTable.create(path, batch([(i % 6, "a", next(seq)) for i in range(12)]), index_columns=["id"], num_buckets=3,
                            properties={"indexeddf.index.autoRefresh": str(auto_refresh).lower()})
    t.create_index("by_name", ["name"], num_buckets=2)
    for kind, arg in ops:
        if kind == "append":
            t.append(batch([(i, n, next(seq)) for i, n in arg]))
        elif kind == "delete":
            before = t.to_arrow()
            t.delete(arg)
            # The reference answer comes from DuckDB, an independent SQL engine.
            sql = arg.replace("<=>", "IS NOT DISTINCT FROM")
            with duckdb.connect() as con:
                con.register("before", before)
                want = con.sql(f"SELECT * FROM before WHERE NOT coalesce({sql}, false)").to_arrow_table()
            assert got(t.to_arrow()) == got(want)
        else:
            t.refresh(mode=arg)
    probe = [(k,) for k in range(-2, 8)] + [(None,)]
    for v in range(t.version + 1):
        assert got(t.lookup([k for (k,) in probe], version=v)) == expected(t, v, ["id"], probe)
        if v >= 1:
            names = [("a",), ("b",), ("é",), (None,)]
            assert got(t.lookup(names, version=v, index="by_name")) == expected(t, v, ["name"], names)


def test_delete_that_matches_nothing_commits_nothing(table_path):
    t = IndexedTable.create(table_path, batch([(1, "a", 1)]), index_columns=["id"], num_buckets=2)
    assert t.delete("id = 99") == 0 and t.version == 0
    assert t.delete("id = 1") == 1 and t.to_arrow().num_rows == 0
    assert t.history(limit=1)[0].metrics["numDeletedRows"] == 1


def test_stale_index_is_not_used_past_the_limits_and_answers_stay_right(table_path):
    t = IndexedTable.create(table_path, batch([(i % 9, "a", i) for i in range(20_000)]), index_columns=["id"], num_buckets=4,
                            properties={"indexeddf.index.autoRefresh": "false"})
    t.append(batch([(i % 9, "b", 100_000 + i) for i in range(10)]))  # small: hybrid scan
    text = t.explain("id = 3")
    assert "index: 'primary'" in text and "unindexed files scanned: 1" in text
    for _ in range(3):
        t.append(batch([(i % 9, "c", 200_000 + i) for i in range(20_000)]))
    text = t.explain("id = 3")
    assert "index: none" in text and "maxAppendedRatio" in text
    assert got(t.lookup([3])) == expected(t, t.version, ["id"], [(3,)])
    t.refresh()
    assert "index: 'primary'" in t.explain("id = 3")
    t.delete("seq < 15000")
    assert "maxDeletedRatio" in t.explain("id = 3")
    assert got(t.lookup([3])) == expected(t, t.version, ["id"], [(3,)])
    t.refresh()  # incremental: re-indexes the files whose index files named removed data
    assert "index: 'primary'" in t.explain("id = 3")
    assert got(t.lookup([3])) == expected(t, t.version, ["id"], [(3,)])


def test_an_index_refreshed_later_serves_an_older_version(table_path):
    t = IndexedTable.create(table_path, batch([(i % 9, "a", i) for i in range(20_000)]), index_columns=["id"], num_buckets=4,
                            properties={"indexeddf.index.autoRefresh": "false"})
    for n in range(3):
        t.append(batch([(i % 9, "b", 100_000 * (n + 1) + i) for i in range(20_000)]))
    old = t.version
    assert "maxAppendedRatio" in t.explain("id = 3", version=old)  # the index as of `old` is too stale
    t.refresh()
    t.delete("seq < 5000")  # later changes must not leak into answers about `old`
    from indexeddf.optimizer import planner as L

    snap_old, latest = t.snapshot_at(old), t.snapshot
    chosen = L.serving_index(snap_old, [snap_old.indexes["primary"], latest.indexes["primary"]])
    assert chosen is latest.indexes["primary"]
    plan = L.plan_lookup(snap_old, chosen, L.keys_table([3], ("id",), t.schema))
    assert plan.why_not is None and not plan.scanned_files
    for v in range(t.version + 1):
        assert got(t.lookup([3, 4], version=v)) == expected(t, v, ["id"], [(3,), (4,)])


def test_explain_names_the_index_snapshot_and_a_newer_one_serving_an_older_version(table_path):
    t = IndexedTable.create(table_path, batch([(i % 9, "a", i) for i in range(20_000)]), index_columns=["id"], num_buckets=4,
                            properties={"indexeddf.index.autoRefresh": "false"})
    t.append(batch([(i % 9, "b", 100_000 + i) for i in range(10)]))  # the index lags: hybrid scan
    lagging = t.version
    text = t.explain("id = 3")
    assert "  index snapshot: 'primary' covering table version 0\n" in text and "unindexed files scanned: 1" in text
    for n in range(3):
        t.append(batch([(i % 9, "c", 200_000 * (n + 1) + i) for i in range(20_000)]))
    old = t.version
    assert "index: none" in t.explain("id = 3", version=old)  # its own index state is too stale
    t.refresh()
    covered = t.snapshot.indexes["primary"].coveredVersion
    assert covered > old
    t.create_index("by_name", ["name"])
    t.append(batch([(3, "d", 900_000)]))  # later versions must not change what serves `old`

    text = t.explain("id = 3", version=old)
    assert "index: 'primary'" in text and "unindexed files scanned: 0" in text
    assert (f"  index snapshot: 'primary' covering table version {covered}, a newer state of the index than the one "
            f"read (version {old} holds one covering version 0); its entries of files not live at version {old} "
            "are ignored") in text
    # An index created after the version read serves it too, as in Spark reads.
    text = t.explain("name = 'c'", version=old)
    assert "index: 'by_name'" in text and f"(version {old} holds none)" in text
    # Where the state the version holds serves as well (version 0: it covers every file), it is used.
    assert "  index snapshot: 'primary' covering table version 0\n" in t.explain("id = 3", version=0)
    text = t.explain("id = 3", version=lagging)
    assert f"covering table version {covered}, a newer state" in text and "unindexed files scanned: 0" in text
    # explain answers as lookup() does.
    for v in (0, lagging, old):
        assert got(t.lookup([3], version=v)) == expected(t, v, ["id"], [(3,)])


def test_keys_as_table_dict_scalar_and_string(table_path):
    t = IndexedTable.create(table_path, batch([(i, f"n{i}", i) for i in range(20)]), index_columns=["id"], num_buckets=4)
    t.create_index("by_name", ["name"])
    assert sorted(t.lookup(pa.table({"id": [5, 6]})).column("seq").to_pylist()) == [5, 6]
    assert sorted(t.lookup({"id": [7]}).column("seq").to_pylist()) == [7]
    assert t.lookup(8).column("seq").to_pylist() == [8]
    assert t.lookup("n9", index="by_name").column("seq").to_pylist() == [9]


def test_cache_keys_and_discard(table_path):
    t = IndexedTable.create(table_path, batch([(i, "x", i) for i in range(2000)]), index_columns=["id"], num_buckets=8)
    cache().clear()
    t.lookup([1])
    keys = cache().keys()
    assert {k[0] for k in keys} >= {"segment", "rowgroup"}
    rowgroups = [k for k in keys if k[0] == "rowgroup"]
    before = cache_stats()
    assert cache().discard(rowgroups + [("nothing",)]) == len(rowgroups)
    after = cache_stats()
    assert after.entries == before.entries - len(rowgroups) and after.bytes < before.bytes
    misses = after.misses
    t.lookup([1])  # the row group is read again, the trie is still cached
    assert cache_stats().misses == misses + len(rowgroups)
