"""Every reader applies deletion vectors (DVs): tables built by indexeddf (create, appends,
convert of a deltalake table) get DVs from a hand-written commit (``dv_helpers``, as
Delta Spark's DELETE would add them), and then every read equals DuckDB's ``delta``
extension (delta-kernel-rs), a reader nobody here wrote: ``to_arrow`` (and time travel
to the version before), lookups through the primary and a secondary index, hybrid
scans of unindexed files, the Python Spark data source; and every write keeps the
table right: optimize purges the DVs, delete rewrites a file with one, refresh,
restore, vacuum. The JVM connector applies them too (tests/test_connector_dv.py).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

deltalake = pytest.importorskip("deltalake")

from dv_helpers import file_rows, mark_deleted  # noqa: E402
from oracles import duckdb_delta  # noqa: E402
from test_delta_oracles import batch  # noqa: E402

from indexeddf import IndexedTable  # noqa: E402
from indexeddf.errors import InvalidOptionError  # noqa: E402
from indexeddf.format import checkpoint as ckpt  # noqa: E402
from indexeddf.format.snapshot import load_snapshot  # noqa: E402
from indexeddf.format.storage import TableStorage  # noqa: E402


def duckdb_rows(path: str, where: str = "") -> pa.Table:
    """The table's newest version as DuckDB's delta extension reads it."""
    return duckdb_delta().execute(f"SELECT * FROM delta_scan('{path}') {where}").to_arrow_table()


def _row_reprs(t: pa.Table, schema: pa.Schema) -> list[str]:
    """The rows as sorted reprs (NaN equal to NaN), columns as ``schema`` names and types them."""
    cells = t.select(schema.names).cast(schema).to_pylist()
    return sorted(repr(tuple("NaN" if v != v else v for v in r.values())) for r in cells)


def assert_same(ours: pa.Table, theirs: pa.Table) -> None:
    """Equal as multisets of rows, over our columns."""
    assert ours.num_rows == theirs.num_rows
    assert _row_reprs(ours, ours.schema) == _row_reprs(theirs, ours.schema)


def build(path: str, props: dict | None = None) -> IndexedTable:
    """A table of 4 buckets and 3 writes (so several files per bucket), keys 0..1199."""
    t = IndexedTable.create(path, batch(list(range(0, 400))), index_columns=["k"], num_buckets=4, properties=props)
    t.append(batch(list(range(400, 800))))
    t.append(batch(list(range(800, 1200))))
    return t


def some_deletions(path: str, rng: random.Random, share: float = 0.3) -> dict[str, list[int]]:
    """Random row ordinals of about half the live files."""
    files = sorted(load_snapshot(TableStorage(path), unindexed_ok=True).files)
    out = {}
    for p in rng.sample(files, max(1, len(files) // 2)):
        n = file_rows(path, p)
        out[p] = sorted(rng.sample(range(n), max(1, int(n * share))))
    return out


def log_actions(path: str, version: int) -> list[dict]:
    text = (Path(path) / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines() if line]


# -- replay and the protocol ------------------------------------------------------------------


@pytest.mark.parametrize("removes_last", [False, True])
@pytest.mark.parametrize("inline", [False, True])
def test_to_arrow_and_time_travel_equal_duckdb(table_path, removes_last, inline):
    t = build(table_path)
    before = duckdb_rows(table_path)
    v = mark_deleted(table_path, some_deletions(table_path, random.Random(1)), inline=inline, removes_last=removes_last)
    t = IndexedTable.for_path(table_path)
    assert t.version == v and any(a.deletionVector is not None for a in t.snapshot.files.values())
    theirs = duckdb_rows(table_path)
    assert theirs.num_rows < before.num_rows
    assert_same(t.to_arrow(), theirs)
    assert_same(t.to_arrow(version=v - 1), before)
    # Projection and filters over files with and without DVs.
    assert_same(t.to_arrow(columns=["k", "s"], filter=pc.field("k") > 500),
                duckdb_rows(table_path, "WHERE k > 500").select(["k", "s"]))
    # Delete again on files that have a DV: the new DV holds the old rows and the new.
    again = {p: [0, 1] for p in sorted(t.snapshot.files)[:3]}
    mark_deleted(table_path, again, inline=inline, removes_last=not removes_last)
    assert_same(IndexedTable.for_path(table_path).to_arrow(), duckdb_rows(table_path))


def test_checkpoints_keep_deletion_vectors_on_replay(table_path):
    build(table_path)
    mark_deleted(table_path, some_deletions(table_path, random.Random(2)))
    storage = TableStorage(table_path)
    snap = load_snapshot(storage)
    ckpt.write_checkpoint(storage, snap)
    again = load_snapshot(storage)  # from the checkpoint now
    assert again.files == snap.files
    assert any(a.deletionVector is not None for a in again.files.values())
    assert_same(IndexedTable.for_path(table_path).to_arrow(), duckdb_rows(table_path))


def test_set_properties_upgrades_the_protocol_as_delta_does(tmp_path):
    plain = build(str(tmp_path / "plain"))
    plain.set_properties({"delta.enableDeletionVectors": "true"})
    p = IndexedTable.for_path(plain.path).snapshot.protocol
    assert (p.minReaderVersion, p.minWriterVersion) == (3, 7)
    assert set(p.readerFeatures) == {"deletionVectors"}
    assert set(p.writerFeatures) == {"deletionVectors", "appendOnly", "invariants"}  # writer 2's, kept
    # A table with a feature already keeps it.
    ntz = pa.table({"k": pa.array([1, 2], pa.int64()), "t": pa.array([1, 2], pa.timestamp("us"))})
    t = IndexedTable.create(str(tmp_path / "ntz"), ntz, index_columns=["k"], num_buckets=2)
    t.set_properties({"delta.enableDeletionVectors": "true"})
    p = t.snapshot.protocol
    assert set(p.readerFeatures) == {"timestampNtz", "deletionVectors"}
    assert set(p.writerFeatures) == {"timestampNtz", "deletionVectors"}
    # Created with the property: the protocol has the feature from version 0.
    c = IndexedTable.create(str(tmp_path / "c"), batch([1]), index_columns=["k"], num_buckets=2,
                            properties={"delta.enableDeletionVectors": "true"})
    assert "deletionVectors" in c.snapshot.protocol.readerFeatures
    with pytest.raises(InvalidOptionError, match="delta.enableDeletionVectors"):
        c.set_properties({"delta.enableDeletionVectors": "maybe"})
    # Writes keep going and DuckDB reads the upgraded table.
    plain.append(batch([5000]))
    assert_same(IndexedTable.for_path(plain.path).to_arrow(), duckdb_rows(plain.path))


# -- lookups ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def base_table(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("dvbase") / "t")
    t = build(path)
    t.create_index("by_s", ["s"])
    return path


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10**6), share=st.sampled_from([0.05, 0.5, 1.0]),
       keys=st.lists(st.integers(-5, 1250), min_size=1, max_size=40))
def test_lookups_equal_duckdb(base_table, tmp_path, seed, share, keys):
    path = tempfile.mkdtemp(dir=tmp_path)  # a fresh copy per example
    shutil.rmtree(path)
    shutil.copytree(base_table, path)
    mark_deleted(path, some_deletions(path, random.Random(seed), share))
    t = IndexedTable.for_path(path)
    key_list = ", ".join(str(k) for k in keys)
    assert_same(t.lookup(keys), duckdb_rows(path, f"WHERE k IN ({key_list})"))
    names = [f"s{k % 13}" for k in keys[:5]]
    got = t.lookup(names, index="by_s")
    assert_same(got, duckdb_rows(path, "WHERE s IN ({})".format(", ".join(f"'{n}'" for n in names))))


def test_hybrid_scans_and_refresh_drop_deleted_rows(table_path):
    t = build(table_path, {"indexeddf.index.autoRefresh": "false"})
    t.append(batch(list(range(2000, 2600))))
    t = IndexedTable.for_path(table_path)
    covered = {i for f in t.snapshot.indexes["primary"].files for i in f.fileIds}
    appended = [a.path for a in t.snapshot.live_files() if a.fileId not in covered]
    assert appended, "the append is not indexed"
    mark_deleted(table_path, {p: list(range(0, file_rows(table_path, p), 3)) for p in appended})
    t = IndexedTable.for_path(table_path)
    keys = list(range(1990, 2610, 7))
    assert_same(t.lookup(keys), duckdb_rows(table_path, f"WHERE k IN ({', '.join(map(str, keys))})"))
    # refresh indexes only the live rows: entries = live rows of the appended files.
    t.refresh()
    t = IndexedTable.for_path(table_path)
    entries = sum(f.numEntries for f in t.snapshot.indexes["primary"].files)
    appended_live = sum(file_rows(table_path, p) - t.snapshot.files[p].deletionVector.cardinality for p in appended)
    covered_rows = sum(file_rows(table_path, a.path) for a in t.snapshot.files.values() if a.path not in appended)
    assert entries == covered_rows + appended_live  # the covered files' rows, and only the live appended ones
    assert_same(t.lookup(keys), duckdb_rows(table_path, f"WHERE k IN ({', '.join(map(str, keys))})"))
    assert_same(t.to_arrow(), duckdb_rows(table_path))


def test_index_builds_skip_deleted_rows_and_keep_file_ordinals(table_path):
    build(table_path)
    dels = some_deletions(table_path, random.Random(5), 0.5)
    mark_deleted(table_path, dels)
    t = IndexedTable.for_path(table_path)
    t.create_index("by_k2", ["k"], num_buckets=3)
    t = IndexedTable.for_path(table_path)
    entries = sum(f.numEntries for f in t.snapshot.indexes["by_k2"].files)
    assert entries == duckdb_rows(table_path).num_rows  # no entry for a deleted row
    keys = list(range(0, 1200, 5))
    assert_same(t.lookup(keys, index="by_k2"), duckdb_rows(table_path, f"WHERE k IN ({', '.join(map(str, keys))})"))


# -- writes keep the table right ----------------------------------------------------------------


def _removes_carry_dvs(path: str, version: int, files_before: dict) -> None:
    for action in log_actions(path, version):
        if "remove" in action:
            r = action["remove"]
            had = files_before.get(r["path"])
            if had is not None and had.deletionVector is not None:
                assert r.get("deletionVector") == had.deletionVector.wire(), r["path"]


@pytest.mark.parametrize("mode", ["quick", "full"])
def test_optimize_purges_deletion_vectors(table_path, mode):
    build(table_path)
    mark_deleted(table_path, some_deletions(table_path, random.Random(3)))
    want = duckdb_rows(table_path)
    t = IndexedTable.for_path(table_path)
    files_before = dict(t.snapshot.files)
    v = t.optimize(mode)
    t = IndexedTable.for_path(table_path)
    assert not any(a.deletionVector is not None for a in t.snapshot.files.values())
    _removes_carry_dvs(table_path, v, files_before)
    assert_same(t.to_arrow(), want)
    assert_same(duckdb_rows(table_path), want)
    keys = list(range(0, 1200, 11))
    assert_same(t.lookup(keys), want.filter(pc.is_in(want["k"], pa.array(keys, pa.int64()))))


def test_delete_rewrites_a_file_with_a_deletion_vector(table_path):
    build(table_path)
    mark_deleted(table_path, some_deletions(table_path, random.Random(4)))
    t = IndexedTable.for_path(table_path)
    files_before = dict(t.snapshot.files)
    v = t.delete("k >= 100 AND k < 700")
    removed = [a["remove"]["path"] for a in log_actions(table_path, v) if "remove" in a]
    assert any(files_before[p].deletionVector is not None for p in removed)
    _removes_carry_dvs(table_path, v, files_before)
    t = IndexedTable.for_path(table_path)
    theirs = duckdb_rows(table_path)
    assert not any(100 <= k < 700 for k in theirs["k"].to_pylist())
    assert_same(t.to_arrow(), theirs)
    assert_same(t.lookup(list(range(0, 1200, 3))), duckdb_rows(table_path, "WHERE k % 3 = 0"))
    # Overwrite removes every file, each with its DV.
    mark_deleted(table_path, some_deletions(table_path, random.Random(6)))
    files_before = dict(IndexedTable.for_path(table_path).snapshot.files)
    v = IndexedTable.for_path(table_path).overwrite(batch([1, 2, 3]))
    _removes_carry_dvs(table_path, v, files_before)
    assert_same(IndexedTable.for_path(table_path).to_arrow(), duckdb_rows(table_path))


def test_restore_brings_back_the_deletion_vectors_of_the_version(table_path):
    build(table_path)
    v0 = IndexedTable.for_path(table_path).version
    all_rows = duckdb_rows(table_path)
    v1 = mark_deleted(table_path, some_deletions(table_path, random.Random(7)))
    at_v1 = duckdb_rows(table_path)
    mark_deleted(table_path, some_deletions(table_path, random.Random(8)))
    t = IndexedTable.for_path(table_path)
    t.restore(v0)
    assert_same(duckdb_rows(table_path), all_rows)
    assert_same(IndexedTable.for_path(table_path).to_arrow(), all_rows)
    t = IndexedTable.for_path(table_path)
    t.restore(v1)
    assert_same(duckdb_rows(table_path), at_v1)
    assert_same(IndexedTable.for_path(table_path).to_arrow(), at_v1)
    assert_same(IndexedTable.for_path(table_path).lookup(list(range(1200))), at_v1)


def _dv_files(path: str) -> set[str]:
    root = Path(path)
    return {str(p.relative_to(root)) for p in root.rglob("deletion_vector_*.bin")}


def test_vacuum_keeps_live_deletion_vectors_and_deletes_unreferenced_ones(table_path):
    build(table_path)
    files = sorted(load_snapshot(TableStorage(table_path)).files)
    mark_deleted(table_path, {files[0]: [0, 1]})
    first = _dv_files(table_path)
    mark_deleted(table_path, {files[0]: [2]}, prefix="ab")  # replaces the first DV of files[0]
    mark_deleted(table_path, {files[1]: [3]})
    live = {a.deletionVector.relative_path for a in load_snapshot(TableStorage(table_path)).files.values()
            if a.deletionVector is not None}
    assert len(live) == 2 and not live & first
    stray = Path(table_path) / "deletion_vector_00000000-0000-0000-0000-000000000000.bin"
    stray.write_bytes(b"\x01")  # never committed: deleted only past the retention
    t = IndexedTable.for_path(table_path)
    kept_window = t.vacuum(dry_run=True)
    assert not any("deletion_vector" in f for f in kept_window.files)  # all inside the 7-day retention
    os.utime(stray, (0, 0))
    result = t.vacuum(retention_hours=0, enforce_retention=False)
    assert set(result.files) >= first | {stray.name}
    assert not live & set(result.files)
    assert _dv_files(table_path) == live
    assert_same(IndexedTable.for_path(table_path).to_arrow(), duckdb_rows(table_path))


# -- converted tables ---------------------------------------------------------------------------


def test_converted_delta_table_with_deletion_vectors(tmp_path):
    path = str(tmp_path / "dl")
    deltalake.write_deltalake(path, batch(list(range(300))))
    deltalake.write_deltalake(path, batch(list(range(300, 700))), mode="append")
    mark_deleted(path, some_deletions(path, random.Random(9)))  # DVs (and the feature) before the conversion
    t = IndexedTable.convert(path, ["k"], num_buckets=4)
    entries = sum(f.numEntries for f in t.snapshot.indexes["primary"].files)
    assert entries == duckdb_rows(path).num_rows
    mark_deleted(path, some_deletions(path, random.Random(10)))  # and after it
    t = IndexedTable.for_path(path)
    assert_same(t.to_arrow(), duckdb_rows(path))
    keys = list(range(0, 700, 3))
    assert_same(t.lookup(keys), duckdb_rows(path, f"WHERE k IN ({', '.join(map(str, keys))})"))
    t.optimize("full")
    assert_same(IndexedTable.for_path(path).to_arrow(), duckdb_rows(path))


# -- Spark ---------------------------------------------------------------------------------------


def test_python_source_masks_follow_row_ordinals_across_batches(table_path, monkeypatch):
    from pyspark.sql.types import StructType

    import indexeddf.spark.source as source
    from indexeddf.spark.types import spark_schema

    build(table_path)
    mark_deleted(table_path, some_deletions(table_path, random.Random(12), 0.4))
    monkeypatch.setattr(source, "READ_BATCH_ROWS", 37)  # many batches per file
    snap = load_snapshot(TableStorage(table_path))
    schema: StructType = spark_schema(snap.metadata.schema_)
    reader = source.IndexedReader(snap, schema, source.DEFAULT_MAX_PARTITION_BYTES)
    batches = [b for part in reader.partitions() for b in source._read_files(part, reader.arrow_schema, snap.version)]
    assert_same(pa.Table.from_batches(batches), duckdb_rows(table_path))


def test_spark_python_source_and_the_connector_drop_deleted_rows(spark, table_path):
    import indexeddf

    indexeddf.register(spark)
    build(table_path)
    mark_deleted(table_path, some_deletions(table_path, random.Random(11)))
    want = duckdb_rows(table_path)

    def rows(df):
        return pa.Table.from_pylist([r.asDict() for r in df.collect()], schema=want.schema)

    assert_same(rows(spark.read.format("indexeddf_python").load(table_path)), want)
    t = IndexedTable.for_path(table_path)
    assert_same(rows(t.to_df(spark)), want)
    assert_same(rows(t.to_df(spark, bucketed=True)), want)
    # With the connector on, to_df of a version with DVs is its read, not the Python source's.
    plan = t.to_df(spark)._jdf.queryExecution().executedPlan().toString()
    assert "indexeddf_python" not in plan.lower() and "PythonScan" not in plan, plan
    # ... which tells Spark the bucketing (DVs do not stop it, as they stop the bucketed
    # relation built without the connector), and explain_join says so.
    from indexeddf.spark.bucketed import bucketed_scan_reason

    assert "deletion vectors" in bucketed_scan_reason(t.snapshot)
    assert bucketed_scan_reason(t.snapshot, connector=True) is None
    probe = spark.range(0, 3_000).selectExpr("id as k")
    text = t.explain_join(probe, on="k", spark_join_ratio=0.0001)
    assert "table side: the connector's read of the version" in text, text
    # The JVM connector applies them too (tests/test_connector_dv.py covers its every path).
    assert_same(rows(spark.read.format("indexeddf").load(table_path)), want)
    assert_same(rows(spark.read.format("indexeddf").option("versionAsOf", t.version).load(table_path)), want)
    assert spark.read.format("indexeddf").option("versionAsOf", t.version - 1).load(table_path).count() == 1200
    # A DV in a table whose protocol lacks the feature (against Delta's rule) is applied too.
    other = table_path + "-no-feature"
    build(other)
    mark_deleted(other, some_deletions(other, random.Random(13)), upgrade=False)
    assert_same(rows(spark.read.format("indexeddf_python").load(other)), duckdb_rows(other))
    assert_same(rows(spark.read.format("indexeddf").load(other)), duckdb_rows(other))
