"""Delta column mapping (``delta.columnMapping.mode`` = ``name`` or ``id``): files name their
columns physically (or by Parquet field id), readers show the logical names.

Tables come from delta-rs (which writes column-mapped tables in both modes) and from
indexeddf itself; every read path and every write is checked against engines nobody here
wrote: DuckDB's delta extension and delta-rs's DataFusion reader (``QueryBuilder``; delta-rs's
Arrow-dataset reader returns NULL for every column of an ``id``-mode table, and DuckDB's
extension NULL for the partition column of a column-mapped partitioned table, so those
two cases are checked against the engine that reads them).
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
import warnings

import deltalake
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))

from oracles import duckdb_delta  # noqa: E402

from indexeddf import IndexedTable  # noqa: E402
from indexeddf.errors import IndexColumnChangeError, InvalidOptionError, SchemaEvolutionError  # noqa: E402

SCHEMA = pa.schema([("k", pa.int64()), ("a b", pa.string()), ("v", pa.float64())])
"""A column name Parquet-minded engines dislike (a space) is what column mapping is for."""


def rows(keys) -> pa.Table:
    return pa.table({"k": pa.array(keys, pa.int64()), "a b": [None if k % 7 == 0 else f"s{k % 5}" for k in keys],
                     "v": [k * 1.5 for k in keys]}, schema=SCHEMA)


def rowsort(rows) -> list[tuple]:
    """Rows in one order whatever they hold (NULLs and strings in one column compare by repr)."""
    return sorted(rows, key=repr)


def duck(path: str, where: str = "true") -> list[tuple]:
    return rowsort(duckdb_delta().execute(f"SELECT k, \"a b\", v FROM delta_scan('{path}') WHERE {where}").fetchall())


def delta_rs(path: str, columns: str = "k, \"a b\", v") -> list[tuple]:
    """delta-rs's DataFusion reader (it resolves physical names and field ids)."""
    qb = deltalake.QueryBuilder().register("t", deltalake.DeltaTable(path))
    t = pa.table(qb.execute(f"SELECT {columns} FROM t").read_all())
    return rowsort(tuple(r.values()) for r in t.to_pylist())


def ours(t: pa.Table) -> list[tuple]:
    return rowsort(tuple(r.values()) for r in t.select(SCHEMA.names).to_pylist())


def log_lines(path: str, version: int) -> list[dict]:
    with open(os.path.join(path, "_delta_log", f"{version:020d}.json")) as f:
        return [json.loads(line) for line in f]


def mapping(path: str) -> dict[str, dict]:
    """Logical name -> the column's mapping metadata, in the newest metaData of the log."""
    log = os.path.join(path, "_delta_log")
    versions = sorted(int(n[:20]) for n in os.listdir(log) if n.endswith(".json"))
    meta = [x["metaData"] for v in versions for x in log_lines(path, v) if "metaData" in x][-1]
    return {f["name"]: f["metadata"] for f in json.loads(meta["schemaString"])["fields"]}


def commit_physical_file(path: str, table: pa.Table, names: dict[str, str], ids: dict[str, int] | None) -> None:
    """One commit of a file another engine wrote: columns renamed to ``names`` (what an
    id-mode writer may call them), with Parquet field ``ids`` when given."""
    fields = [pa.field(names[f.name], f.type, metadata={b"PARQUET:field_id": str(ids[f.name]).encode()} if ids else None)
              for f in table.schema]
    version = deltalake.DeltaTable(path).version() + 1
    name = f"part-{uuid.uuid4()}.parquet"
    pq.write_table(pa.Table.from_arrays(table.columns, schema=pa.schema(fields)), os.path.join(path, name))
    st = os.stat(os.path.join(path, name))
    lines = [{"add": {"path": name, "partitionValues": {}, "size": st.st_size, "modificationTime": int(st.st_mtime * 1000),
                      "dataChange": True, "stats": json.dumps({"numRecords": table.num_rows})}},
             {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "WRITE"}}]
    with open(os.path.join(path, "_delta_log", f"{version:020d}.json"), "x") as f:
        f.write("\n".join(json.dumps(x) for x in lines) + "\n")


@pytest.fixture(params=["name", "id"])
def converted(tmp_path, request) -> str:
    """A column-mapped table delta-rs wrote (two commits), then a file another engine wrote,
    converted by indexeddf; then one more delta-rs append the index does not cover."""
    path = str(tmp_path / request.param)
    deltalake.write_deltalake(path, rows(range(0, 40)), configuration={"delta.columnMapping.mode": request.param})
    deltalake.write_deltalake(path, rows(range(40, 60)), mode="append")
    meta = mapping(path)
    commit_physical_file(path, rows(range(60, 70)), {c: meta[c]["delta.columnMapping.physicalName"] for c in SCHEMA.names},
                         {c: meta[c]["delta.columnMapping.id"] for c in SCHEMA.names} if request.param == "id" else None)
    IndexedTable.convert(path, ["k"], num_buckets=3)
    deltalake.write_deltalake(path, rows(range(70, 80)), mode="append")
    return path


def test_delta_rs_tables_read_by_logical_name_on_every_path(converted):
    t = IndexedTable.for_path(converted)
    assert t.schema.names == SCHEMA.names
    assert t.to_arrow().schema == SCHEMA
    want = delta_rs(converted)
    assert ours(t.to_arrow()) == want and len(want) == 80
    if "name" in converted:  # DuckDB's extension reads name mode
        assert duck(converted) == want
    probes = [0, 3, 41, 59, 63, 69, 72, 79, 500]  # covered, foreign file, hybrid (uncovered), absent
    got = t.lookup(probes)
    assert got.schema == SCHEMA
    assert ours(got) == [r for r in want if r[0] in probes]
    assert ours(t.to_arrow(filter=pc.field("a b") == "s1")) == [r for r in want if r[1] == "s1"]
    assert t.to_arrow(columns=["v", "a b"]).schema.names == ["v", "a b"]


def test_index_builds_refresh_and_secondary_indexes(converted):
    t = IndexedTable.for_path(converted)
    t.refresh()
    t.create_index("by_s", ["a b"])
    want = delta_rs(converted)
    got = t.lookup(["s2"], index="by_s")
    assert ours(got) == [r for r in want if r[1] == "s2"]
    assert ours(t.lookup([72, 5])) == [r for r in want if r[0] in (5, 72)]


def test_writes_use_physical_names_and_field_ids(converted):
    t = IndexedTable.for_path(converted)
    t.append(rows(range(100, 120)))
    t.delete("k < 5")
    t.update({"v": "v + 1000"}, "k = 110")
    t.merge(rows([111, 200]), "target.k = source.k").when_matched_update_all().when_not_matched_insert_all().execute()
    t.optimize(mode="full")
    want = delta_rs(converted)
    assert ours(t.to_arrow()) == want
    assert len(want) == 80 - 5 + 20 + 1 and (110, "s0", 110 * 1.5 + 1000) in want
    if "name" in converted:
        assert duck(converted) == want
    assert ours(t.lookup([110, 200, 3])) == [r for r in want if r[0] in (110, 200)]
    # Every file indexeddf wrote names its columns physically, with the field ids.
    meta = mapping(converted)
    physical = {m["delta.columnMapping.physicalName"]: m["delta.columnMapping.id"] for m in meta.values()}
    snap = IndexedTable.for_path(converted).snapshot
    for a in snap.live_files():
        schema = pq.read_schema(os.path.join(converted, a.path))
        assert {f.name: int(f.metadata[b"PARQUET:field_id"]) for f in schema} == physical
        assert set(a.stats.minValues) <= set(physical) and set(a.stats.nullCount) == set(physical)


def test_a_new_column_gets_a_physical_name_and_an_id(converted):
    t = IndexedTable.for_path(converted)
    before = int(t.properties["delta.columnMapping.maxColumnId"])
    t.append(rows([300]).append_column("new col", pa.array(["n"])), schema_mode="merge")
    meta = mapping(converted)["new col"]
    assert meta["delta.columnMapping.id"] == before + 1
    assert meta["delta.columnMapping.physicalName"].startswith("col-")
    assert int(IndexedTable.for_path(converted).properties["delta.columnMapping.maxColumnId"]) == before + 1
    assert delta_rs(converted, "k, \"new col\"") == rowsort(
        (r["k"], r["new col"]) for r in IndexedTable.for_path(converted).to_arrow().to_pylist())
    assert IndexedTable.for_path(converted).lookup([300]).column("new col").to_pylist() == ["n"]


@pytest.mark.parametrize("mode", ["name", "id"])
def test_indexeddf_creates_column_mapped_tables(tmp_path, mode):
    path = str(tmp_path / "t")
    t = IndexedTable.create(path, rows(range(50)), index_columns=["k"], num_buckets=4,
                            properties={"delta.columnMapping.mode": mode})
    protocol = next(x["protocol"] for x in log_lines(path, 0) if "protocol" in x)
    assert protocol == {"minReaderVersion": 2, "minWriterVersion": 5}  # what delta-rs writes too
    assert t.properties["delta.columnMapping.maxColumnId"] == "3"
    t.append(rows(range(50, 60)))
    want = delta_rs(path)
    assert ours(t.to_arrow()) == want and len(want) == 60
    assert duck(path) == want
    assert ours(t.lookup([7, 55])) == [r for r in want if r[0] in (7, 55)]
    deltalake.write_deltalake(path, rows(range(60, 65)), mode="append")  # delta-rs keeps appending
    assert ours(IndexedTable.for_path(path).to_arrow()) == delta_rs(path)


def test_partitioned_column_mapped_tables(tmp_path):
    path = str(tmp_path / "p")
    data = rows(range(30)).append_column("p", pa.array([f"x{k % 3}" for k in range(30)]))
    deltalake.write_deltalake(path, data, partition_by=["p"], configuration={"delta.columnMapping.mode": "name"})
    t = IndexedTable.convert(path, ["k"], num_buckets=2)
    cols = "k, \"a b\", v, p"

    def mine(t):
        return rowsort(tuple(r.values()) for r in t.select(["k", "a b", "v", "p"]).to_pylist())

    assert mine(t.to_arrow()) == delta_rs(path, cols)
    assert mine(t.to_arrow(filter=pc.field("p") == "x1")) == [r for r in delta_rs(path, cols) if r[3] == "x1"]
    t.append(pa.table({"k": [100], "a b": ["n"], "v": [1.0], "p": ["x9"]}).cast(
        pa.schema(list(SCHEMA) + [pa.field("p", pa.string())])))
    t.optimize(mode="full")
    want = delta_rs(path, cols)
    assert mine(t.to_arrow()) == want and (100, "n", 1.0, "x9") in want
    assert mine(t.lookup([4, 100])) == [r for r in want if r[0] in (4, 100)]
    p_physical = mapping(path)["p"]["delta.columnMapping.physicalName"]
    assert all(set(a.partitionValues) == {p_physical} for a in IndexedTable.for_path(path).snapshot.live_files())


def test_turning_column_mapping_on_and_the_changes_refused(tmp_path):
    path = str(tmp_path / "t")
    t = IndexedTable.create(path, rows(range(20)), index_columns=["k"], num_buckets=2)
    t.set_properties({"delta.columnMapping.mode": "name"})  # files keep their names: physical = logical
    assert {m["delta.columnMapping.physicalName"] for m in mapping(path).values()} == set(SCHEMA.names)
    t.append(rows(range(20, 30)))
    want = delta_rs(path)
    assert ours(t.to_arrow()) == want and duck(path) == want and len(want) == 30
    with pytest.raises(InvalidOptionError, match="cannot change from name to id"):
        t.set_properties({"delta.columnMapping.mode": "id"})
    with pytest.raises(InvalidOptionError, match="maxColumnId is kept by the writer"):
        t.set_properties({"delta.columnMapping.maxColumnId": "100"})


def test_id_mode_finds_a_files_columns_by_field_id(tmp_path):
    """Delta's rule for ``id`` mode: a file's columns are found by their Parquet field ids,
    whatever the file calls them (files an Iceberg writer or a rename left behind), and a
    column whose id the file lacks reads as NULL. delta-spark reads this way; DuckDB's
    extension and delta-rs match by physical name and read such a file as all NULL, so the
    expected rows here are the ones written."""
    path = str(tmp_path / "t")
    deltalake.write_deltalake(path, rows(range(0, 4)), configuration={"delta.columnMapping.mode": "id"})
    meta = mapping(path)
    ids = {c: meta[c]["delta.columnMapping.id"] for c in SCHEMA.names}
    commit_physical_file(path, rows(range(60, 63)), {c: f"other_{i}" for i, c in enumerate(SCHEMA.names)}, ids)
    only_k = rows(range(70, 72)).select(["k"])
    commit_physical_file(path, only_k, {"k": meta["k"]["delta.columnMapping.physicalName"]}, {"k": ids["k"]})
    t = IndexedTable.convert(path, ["k"], num_buckets=2)
    want = ours(rows(list(range(0, 4)) + list(range(60, 63)))) + [(70, None, None), (71, None, None)]
    assert ours(t.to_arrow()) == rowsort(want)
    assert ours(t.lookup([61, 71])) == [r for r in want if r[0] in (61, 71)]


# -- random histories ---------------------------------------------------------------------------
ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(0, 200), st.integers(1, 30)),
        st.tuples(st.just("delete"), st.integers(0, 200)),
        st.tuples(st.just("update"), st.integers(0, 200)),
        st.tuples(st.just("merge"), st.integers(0, 200), st.integers(1, 20)),
        st.tuples(st.just("overwrite"), st.integers(0, 200), st.integers(0, 20)),
        st.tuples(st.just("optimize"), st.sampled_from(["quick", "full"])),
        st.tuples(st.just("restore"), st.integers(0, 50)),
        st.tuples(st.just("index"), st.sampled_from(["create", "refresh"])),
    ),
    min_size=1, max_size=8,
)


def run(t: IndexedTable, op) -> None:
    kind = op[0]
    if kind == "append":
        t.append(rows(range(op[1], op[1] + op[2])))
    elif kind == "delete":
        t.delete(f"k < {op[1]} AND k > {op[1] // 2}")
    elif kind == "update":
        t.update({"v": "v + 1", "a b": "'u'"}, f"k % 7 = {op[1] % 7}")
    elif kind == "merge":
        t.merge(rows(range(op[1], op[1] + op[2])), "target.k = source.k") \
            .when_matched_update_all().when_not_matched_insert_all().execute()
    elif kind == "overwrite":
        t.overwrite(rows(range(op[1], op[1] + op[2])))
    elif kind == "optimize":
        t.optimize(mode=op[1])
    elif kind == "restore":
        t.restore(op[1] % (t.version + 1))
    elif op[1] == "create" and "by_s" not in {i.name for i in t.indexes()}:
        t.create_index("by_s", ["a b"], num_buckets=2)
    else:
        t.refresh()


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops, st.sampled_from(["name", "id"]), st.booleans(), st.integers(0, 200))
def test_random_histories_read_alike_in_every_engine(tmp_path_factory, sequence, mode, vectors, probe):
    path = str(tmp_path_factory.mktemp("cm"))
    props = {"delta.columnMapping.mode": mode, "indexeddf.checkpointInterval": "3"}
    if vectors:
        props["delta.enableDeletionVectors"] = "true"
    t = IndexedTable.create(path, rows(range(0, 40)), index_columns=["k"], num_buckets=3, properties=props)
    for op in sequence:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            run(t, op)
    for v in range(t.version + 1):
        qb = deltalake.QueryBuilder().register("t", deltalake.DeltaTable(path, version=v))
        theirs = rowsort(tuple(r.values()) for r in pa.table(qb.execute("SELECT k, \"a b\", v FROM t").read_all()).to_pylist())
        assert ours(IndexedTable.for_path(path, version=v).to_arrow()) == theirs, f"version {v}"
        # delta-rs's query engine skips files by the stats, keyed by physical name: a filter loses no row.
        for where, keep in ((f"k = {probe}", lambda r: r[0] == probe), ("\"a b\" = 's1'", lambda r: r[1] == "s1")):
            got = rowsort(tuple(r.values()) for r in pa.table(
                qb.execute(f"SELECT k, \"a b\", v FROM t WHERE {where}").read_all()).to_pylist())
            assert got == [r for r in theirs if keep(r)], f"version {v}, {where}"
    newest = ours(IndexedTable.for_path(path).to_arrow())
    assert duck(path) == newest
    assert duck(path, f"k = {probe} OR \"a b\" = 's2'") == [r for r in newest if r[0] == probe or r[1] == "s2"]
    assert ours(IndexedTable.for_path(path).lookup([probe, probe + 1])) == [r for r in newest if r[0] in (probe, probe + 1)]


@pytest.mark.parametrize("mode", ["name", "id"])
def test_rename_and_drop_columns(tmp_path, mode):
    path = str(tmp_path / "t")
    t = IndexedTable.create(path, rows(range(20)), index_columns=["k"], num_buckets=2,
                            properties={"delta.columnMapping.mode": mode})
    t.rename_column("a b", "label")
    t.drop_columns(["v"])
    t.append(pa.table({"k": pa.array([20], pa.int64()), "label": ["new"]}))
    t.add_columns([("v", "double")])  # the dropped name again: a new column, NULL in every old row
    want = rowsort(tuple(r.values()) for r in pa.table(deltalake.QueryBuilder().register(
        "t", deltalake.DeltaTable(path)).execute("SELECT k, label, v FROM t").read_all()).to_pylist())
    assert rowsort(tuple(r.values()) for r in t.to_arrow().select(["k", "label", "v"]).to_pylist()) == want
    assert all(r[2] is None for r in want) and len(want) == 21
    assert rowsort(duckdb_delta().execute(f"SELECT k, label, v FROM delta_scan('{path}')").fetchall()) == want
    assert t.lookup([3, 20]).column("label").to_pylist() in (["s3", "new"], ["new", "s3"])
    assert IndexedTable.for_path(path, version=0).schema.names == SCHEMA.names  # time travel: the old names
    with pytest.raises(IndexColumnChangeError, match="bucketed or indexed"):
        t.rename_column("k", "key")
    with pytest.raises(SchemaEvolutionError, match="has a column of that name"):
        t.rename_column("label", "K")


def test_rename_needs_column_mapping(tmp_path):
    t = IndexedTable.create(str(tmp_path / "t"), rows(range(5)), index_columns=["k"], num_buckets=2)
    with pytest.raises(InvalidOptionError, match="without column mapping.*Enable column mapping with mode .name. first"):
        t.rename_column("a b", "x")
    t.set_properties({"delta.columnMapping.mode": "name"})
    t.rename_column("a b", "x")
    got = t.to_arrow().sort_by("k")
    assert got.column("x").to_pylist() == rows(range(5)).column("a b").to_pylist()
    # DuckDB reads the renamed column from files that name it by its old name (its physical one).
    assert rowsort(duckdb_delta().execute(f"SELECT k, x FROM delta_scan('{tmp_path / 't'}')").fetchall()) == \
        rowsort(tuple(r.values()) for r in got.select(["k", "x"]).to_pylist())
