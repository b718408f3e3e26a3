"""The change data feed of some keys (``IndexedTable.changes(keys=...)``): exactly the rows of
the whole feed whose index columns equal a key, read from the files of the keys' buckets and
the row groups whose statistics admit a key.

Oracles: the whole feed filtered on the keys (itself checked against DuckDB and delta-rs in
tests/test_change_data_feed.py), and delta-rs's ``load_cdf`` filtered on the keys where delta-rs
reads the table (no deletion vectors). The pruning is proven by counting what a keyed read
opens and decodes (``reader.change_keys.counting_reads``).
"""

from __future__ import annotations

import json
import os
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))

from test_change_data_feed import FEED, _key, _steps, delta_rs_changes_then_convert, delta_rs_feed, feed_rows, with_p  # noqa: E402
from test_changes import Duck, apply, operations, rows  # noqa: E402

from indexeddf import IndexedTable  # noqa: E402
from indexeddf.errors import IndexNotFoundError, InvalidOptionError, SchemaMismatchError  # noqa: E402
from indexeddf.format.log import read_commit  # noqa: E402
from indexeddf.reader.change_keys import counting_reads  # noqa: E402
from indexeddf.spec.actions import AddFile, CdcFile, RemoveFile  # noqa: E402
from indexeddf.spec.bucketing import bucket_ids  # noqa: E402
from indexeddf.spec.change_data import ROW_GROUP_BUCKETS  # noqa: E402
from indexeddf.spec.delta import TAG_BUCKET, TAG_SORTED  # noqa: E402


def only(feed: list[tuple], keys, at: tuple[int, ...] = (0,)) -> list[tuple]:
    """The rows of a sorted feed whose columns at positions ``at`` are one of ``keys``."""
    wanted = {k if isinstance(k, tuple) else (k,) for k in keys}
    return [r for r in feed if tuple(r[i] for i in at) in wanted]


def bucket_of(key: int, n: int) -> int:
    return int(bucket_ids([pa.array([key], pa.int64())], n)[0])


def file_buckets(t: IndexedTable, first: int) -> dict[str, int | None]:
    """Path -> bucket of every cdc, add and remove file of versions ``first``.. (None: no
    bucket, or a change data file of several)."""
    out = {}
    for v in range(first, t.version + 1):
        for a in read_commit(t.snapshot.storage, v):
            if isinstance(a, CdcFile):
                out[a.path] = int(a.tags[TAG_BUCKET]) if a.tags and TAG_BUCKET in a.tags else None
            elif isinstance(a, (AddFile, RemoveFile)):
                out[a.path] = a.bucket
    return out


@pytest.mark.parametrize("partitioned,vectors", [(False, False), (True, False), (False, True), (True, True)])
def test_a_keys_feed_is_the_whole_feed_filtered(tmp_path, partitioned, vectors):
    """MERGE, UPDATE, DELETE and an append, copy on write and with deletion vectors,
    partitioned and not: each key set's feed is the whole feed's rows of those keys (and
    delta-rs's, without deletion vectors), and a read opens only files of the keys' buckets."""
    path = str(tmp_path / "t")
    first = with_p(rows(list(range(50))), partitioned)
    t = IndexedTable.create(path, first, ["k"], num_buckets=4, partition_by=["p"] if partitioned else (),
                            properties={**FEED, "delta.enableDeletionVectors": str(vectors).lower()})
    _steps(t, Duck(first), partitioned)
    whole = feed_rows(t.changes(1))
    theirs = None if vectors else delta_rs_feed(path, 1)
    buckets = file_buckets(t, 1)
    # Changed many times (25: merge + update), deleted (12), inserted by the merge (70), by the
    # append (80, 3), never there (999), and several at once.
    for keys in ([25], [12], [70], [80, 3], [999], [5, 9, 33, 72, 999], list(range(0, 90))):
        with counting_reads() as reads:
            ours = feed_rows(t.changes(1, keys=keys))
        assert ours == only(whole, keys), keys
        if theirs is not None:
            assert ours == only(theirs, keys), keys
        wanted = {bucket_of(k, 4) for k in keys}
        assert {buckets[p] for p in reads.files} - {None} <= wanted, keys
        # A change data file of several buckets: only its row groups of the keys' buckets.
        ranges = {group_buckets(path, p, g) for p, g in reads.groups} - {None}
        assert all(any(lo <= b <= hi for b in wanted) for lo, hi in ranges), keys
        if len(wanted) < 4:
            assert reads.skipped_files > 0 or len(reads.groups) < len(groups_of(t, path, reads.files))
    assert feed_rows(t.changes(1, keys=[25], columns=["k", "s"])) == sorted(
        [(r[0], r[2], r[-2], r[-1]) for r in only(whole, [25])], key=_key)
    assert feed_rows(pa.concat_tables(t.changes_batches(2, 3, keys=[5, 17]))) == [
        r for r in only(whole, [5, 17]) if r[-1] in (2, 3)]
    empty = t.changes(1, keys=[999])
    assert empty.num_rows == 0 and empty.schema == t.changes(1).schema
    assert t.changes(1, keys=[]).num_rows == 0
    only_v = t.changes(1, keys=[25], columns=["v"])  # the key column is read to compare, not returned
    assert only_v.column_names == ["v", "_change_type", "_commit_version", "_commit_timestamp"]
    assert sorted(only_v["v"].to_pylist()) == sorted(r[1] for r in only(whole, [25]))


def group_buckets(root: str, path: str, group: int) -> tuple[int, int] | None:
    """The first and last bucket the footer of change data file ``path`` names for a row group
    (data files: None)."""
    named = pq.ParquetFile(os.path.join(root, path)).metadata.metadata or {}
    if ROW_GROUP_BUCKETS.encode() not in named:
        return None
    lo, hi = json.loads(named[ROW_GROUP_BUCKETS.encode()])[group]
    return lo, hi


def groups_of(t: IndexedTable, root: str, paths) -> list[tuple[str, int]]:
    return [(p, g) for p in paths for g in range(pq.ParquetFile(os.path.join(root, p)).metadata.num_row_groups)]


def test_change_data_files_group_buckets_in_key_order_and_a_key_reads_one_row_group(tmp_path):
    """A large change's data: one file (under the buffer's bound), its row groups each of one
    bucket (named in the footer), keys ordered within a bucket; a key's read decodes the one
    row group holding it. A change of one bucket names it in the cdc action's tags."""
    path = str(tmp_path / "t")
    n = 40_000
    t = IndexedTable.create(path, rows(list(range(n))), ["k"], num_buckets=2, properties=FEED)
    t.update({"v": "v + 1"}, None)                                  # v1: every row
    [cdc] = [a for a in read_commit(t.snapshot.storage, 1) if isinstance(a, CdcFile)]
    assert not cdc.tags  # rows of both buckets
    pf = pq.ParquetFile(os.path.join(path, cdc.path))
    named = [tuple(r) for r in json.loads(pf.metadata.metadata[ROW_GROUP_BUCKETS.encode()])]
    # 40,000 rows of each bucket: groups of one bucket each, at most 16,384 rows.
    assert len(named) == pf.metadata.num_row_groups > 4 and named == sorted(named) and set(named) == {(0, 0), (1, 1)}
    assert max(pf.metadata.row_group(g).num_rows for g in range(len(named))) <= 16_384
    for b in (0, 1):
        keys = pa.concat_tables([pf.read_row_group(g) for g in range(len(named)) if named[g] == (b, b)]).column("k")
        assert keys.to_pylist() == sorted(keys.to_pylist()) and {bucket_of(k, 2) for k in set(keys.to_pylist())} == {b}
    key = 31_337
    with counting_reads() as reads:
        got = t.changes(1, keys=[key])
    assert sorted(got["_change_type"].to_pylist()) == ["update_postimage", "update_preimage"]
    assert sorted(got["v"].to_pylist()) == [key, key + 1]
    assert reads.files == [cdc.path] and len(reads.groups) == 1
    assert named[reads.groups[0][1]] == (bucket_of(key, 2),) * 2
    whole = feed_rows(t.changes(1))
    assert feed_rows(got) == only(whole, [key]) == only(delta_rs_feed(path, 1), [key])
    # A change of one bucket: its file carries the bucket (and key order) in the tags, and a
    # key of the other bucket does not open it.
    t.update({"v": "v + 1"}, f"k = {key}")                          # v2
    [one] = [a for a in read_commit(t.snapshot.storage, 2) if isinstance(a, CdcFile)]
    assert one.tags == {TAG_BUCKET: str(bucket_of(key, 2)), TAG_SORTED: "true"}
    other = next(k for k in range(10) if bucket_of(k, 2) != bucket_of(key, 2))
    with counting_reads() as reads:
        assert t.changes(2, keys=[other]).num_rows == 0
    assert reads.files == [] and reads.skipped_files == 1
    # A small change of both buckets: one row group holding both (each group costs every read).
    t.update({"v": "v + 1"}, "k < 100")                             # v3
    [small] = [a for a in read_commit(t.snapshot.storage, 3) if isinstance(a, CdcFile)]
    meta = pq.ParquetFile(os.path.join(path, small.path)).metadata
    assert meta.num_row_groups == 1 and json.loads(meta.metadata[ROW_GROUP_BUCKETS.encode()]) == [[0, 1]]
    assert feed_rows(t.changes(3, keys=[7, 99])) == only(feed_rows(t.changes(3)), [7, 99])


def test_appends_read_only_their_keys_bucket_files(tmp_path):
    """Versions without change data (appends): only the added files of the keys' buckets are
    opened, and of those only the row groups whose statistics admit the key."""
    path = str(tmp_path / "t")
    t = IndexedTable.create(path, rows(list(range(100))), ["k"], num_buckets=8, properties=FEED)
    for i in range(3):
        t.append(rows(list(range(1000 + 100 * i, 1100 + 100 * i)), 10 * i, "n"))
    buckets = file_buckets(t, 0)
    for key in (5, 1150, 1299):
        with counting_reads() as reads:
            ours = feed_rows(t.changes(0, keys=[key]))
        assert ours == only(feed_rows(t.changes(0)), [key]) and len(ours) == 1 and ours[0][3] == "insert"
        assert reads.files and {buckets[p] for p in reads.files} == {bucket_of(key, 8)}
        assert all(group_buckets(path, p, g) is None for p, g in reads.groups)  # data files
        assert reads.skipped_files >= 3 * 4  # most of each version's eight files stay closed
        # Files of the key's bucket from versions that cannot hold it are opened (the footer),
        # but none of their row groups is decoded: the statistics exclude the key.
        assert reads.row_groups == 1


def test_two_column_keys_null_keys_and_a_secondary_index(tmp_path):
    """A two-column index takes tuples (a NULL column included); a secondary index's keys are
    filtered the same way without bucket pruning (files are bucketed by the table's columns)."""
    path = str(tmp_path / "t")
    first = rows(list(range(40)))
    t = IndexedTable.create(path, first, ["k", "s"], num_buckets=4, properties=FEED)
    t.update({"v": "v + 1"}, "k % 3 = 0")
    t.delete("k BETWEEN 10 AND 15")
    (t.merge(rows([2, 7, 14, 50], 500, "a"), "t.k = s.k AND t.s <=> s.s", source_alias="s", target_alias="t")
     .when_matched_update_all().when_not_matched_insert_all().execute())
    whole = feed_rows(t.changes(1))
    for keys in ([(3, "a3")], [(7, None)], [(14, None), (2, "a2"), (50, "a50")], [(3, "nope")]):
        assert feed_rows(t.changes(1, keys=keys)) == only(whole, keys, at=(0, 2)), keys
    assert feed_rows(t.changes(1, keys=[(7, None)])) and feed_rows(t.changes(1, keys=[(3, "a3")]))
    assert feed_rows(t.changes(1, keys=[(3, "a3")])) == only(delta_rs_feed(path, 1), [(3, "a3")], at=(0, 2))
    t.create_index("by_v", ["v"])
    for keys in ([4], [504, 9], [123_456]):
        got = feed_rows(t.changes(1, keys=keys, index="by_v"))
        assert got == [r for r in whole if r[1] in keys]
    assert feed_rows(t.changes(1, keys=[4], index="by_v"))


def test_keys_errors(tmp_path):
    t = IndexedTable.create(str(tmp_path / "t"), rows(list(range(10))), ["k"], num_buckets=2, properties=FEED)
    t.delete("k = 1")
    with pytest.raises(IndexNotFoundError, match="no index 'nope'"):
        t.changes(1, keys=[1], index="nope")
    with pytest.raises(SchemaMismatchError, match="not a value of index column 'k'"):
        t.changes(1, keys=["one"])
    with pytest.raises(SchemaMismatchError):
        t.changes_batches(1, keys=[1.5])
    with pytest.raises(InvalidOptionError, match="key .* has 2 values"):
        t.changes(1, keys=[(1, 2)])
    with pytest.raises(InvalidOptionError, match="give keys too"):
        t.changes(1, index="primary")
    assert feed_rows(t.changes(1, keys=[1])) == [(1, 1, "a1", "delete", 1)]


def test_another_engines_change_data_files_are_read_whole_and_filtered(tmp_path):
    """delta-rs's cdc files carry no bucket: a keyed read opens them all, and keeps the key's rows."""
    path = str(tmp_path / "t")
    t = delta_rs_changes_then_convert(path)                                 # v1, v2: delta-rs's; v3: convert
    t.update({"v": "v * 2"}, "k IN (3, 8)")                                 # v4: ours
    whole = feed_rows(t.changes(0))
    foreign = [p for p, b in file_buckets(t, 1).items() if b is None and p.startswith("_change_data")]
    assert foreign
    for keys in ([3], [7], [8, 29]):
        with counting_reads() as reads:
            assert feed_rows(t.changes(0, keys=keys)) == only(whole, keys) == only(delta_rs_feed(path, 0), keys)
        assert set(foreign) <= set(reads.files)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(ops=st.lists(operations, min_size=1, max_size=4), vectors=st.booleans(),
       keys=st.lists(st.one_of(st.integers(0, 110), st.none()), min_size=1, max_size=6))
def test_any_operations_keys_feed_equals_the_filtered_feed(tmp_path_factory, ops, vectors, keys):
    path = str(tmp_path_factory.mktemp("keys") / "t")
    first = rows(list(range(0, 40, 3)))
    t = IndexedTable.create(path, first, ["k"], num_buckets=3,
                            properties={**FEED, "delta.enableDeletionVectors": str(vectors).lower()})
    duck = Duck(first)
    for op in ops:
        apply(t, duck, op)
    whole = feed_rows(t.changes(0))
    assert feed_rows(t.changes(0, keys=keys)) == sorted(only(whole, keys), key=_key)


def _spark_feed(spark, path: str, where: str | None) -> list[tuple]:
    df = spark.read.format("indexeddf").option("readChangeFeed", "true").option("startingVersion", 1).load(path)
    if where is not None:
        df = df.where(where)
    return sorted(((r.k, r.v, r.s, r._change_type, r._commit_version) for r in df.collect()), key=_key)


@pytest.mark.spark
def test_a_spark_read_of_the_feed_filtered_on_the_keys_reads_only_their_buckets(spark, tmp_path):
    """``readChangeFeed`` with ``k = 5`` / ``k IN (...)`` gives the rows it gives unpruned (a
    filter Spark cannot push, ``string(k) = '5'``) and ``changes(keys=...)`` gives; once the files of
    the other buckets are gone from storage, the pruned reads still answer (they never opened
    them) while the unpruned read fails."""
    path = str(tmp_path / "t")
    t = IndexedTable.create(path, rows(list(range(40))), ["k"], num_buckets=4, properties=FEED)
    for k in (5, 6, 7, 8):
        t.update({"v": "v + 1"}, f"k = {k}")          # v1..v4: change data files of one bucket each
    t.append(rows([50, 51, 52, 53], 100, "n"))        # v5: added files, one a bucket
    t.delete("k = 6")                                  # v6
    spark.sql(f"UPDATE indexeddf.`{path}` SET v = v * 10 WHERE k IN (5, 9, 50)")   # v7: Spark's tasks write it
    t = IndexedTable.for_path(path)
    whole = feed_rows(t.changes(1))
    assert [r for r in whole if r[-1] == 7] and feed_rows(t.changes(1, keys=[5, 9])) == only(whole, [5, 9])
    mine = feed_rows(t.changes(1, keys=[5]))
    assert mine and _spark_feed(spark, path, "k = 5") == _spark_feed(spark, path, "string(k) = '5'") == mine
    pair = feed_rows(t.changes(1, keys=[5, 50]))
    assert _spark_feed(spark, path, "k IN (5, 50)") == _spark_feed(spark, path, "string(k) IN ('5', '50')") == pair
    wanted = {bucket_of(5, 4), bucket_of(50, 4)}
    other = [p for p, b in file_buckets(t, 1).items() if b is not None and b not in wanted]
    assert other
    for p in other:
        os.remove(os.path.join(path, p))
    assert _spark_feed(spark, path, "k = 5") == mine
    assert _spark_feed(spark, path, "k IN (5, 50)") == pair
    with pytest.raises(Exception, match="(?i)not exist|FileNotFound|missing"):
        _spark_feed(spark, path, "string(k) = '5'")
