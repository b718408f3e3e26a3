"""Delta reader features beyond column mapping: type widening, ``timestampNtz``, and the
refusals of what is still not read, each naming the feature and an engine that reads it.

Tables are hand-written the way delta-rs and delta-kernel write theirs in their tests (a
JSON commit, Parquet files pyarrow writes); answers are checked against DuckDB's delta
extension (delta-rs 1.6.6 refuses ``typeWidening``).
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
import sys
import time
import uuid

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

sys.path.insert(0, os.path.dirname(__file__))

from connector_helpers import read  # noqa: E402
from oracles import duckdb_delta  # noqa: E402

from indexeddf import IndexedTable  # noqa: E402
from indexeddf.errors import UnsupportedFeatureError  # noqa: E402


def commit(path: str, version: int, actions: list[dict]) -> None:
    actions = actions + [{"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "WRITE"}}]
    with open(os.path.join(path, "_delta_log", f"{version:020d}.json"), "x") as f:
        f.write("\n".join(json.dumps(a) for a in actions) + "\n")


def add(path: str, table: pa.Table) -> dict:
    """The ``add`` of a new file holding ``table``, as another engine would write it."""
    name = f"part-{uuid.uuid4()}.parquet"
    pq.write_table(table, os.path.join(path, name))
    st = os.stat(os.path.join(path, name))
    return {"add": {"path": name, "partitionValues": {}, "size": st.st_size, "modificationTime": int(st.st_mtime * 1000),
                    "dataChange": True, "stats": json.dumps({"numRecords": table.num_rows})}}


def metadata(path: str) -> dict:
    log = os.path.join(path, "_delta_log")
    versions = sorted(n for n in os.listdir(log) if n.endswith(".json"))
    lines = [json.loads(line) for v in versions for line in open(os.path.join(log, v))]
    return [x["metaData"] for x in lines if "metaData" in x][-1]


def widen(path: str, version: int, changes: dict[str, tuple[str, str]], index_columns=None) -> None:
    """A commit of another engine's ``ALTER COLUMN ... TYPE``: ``changes`` maps columns to
    (from, to) type names; the protocol gets ``typeWidening`` (and ``timestampNtz``)."""
    meta = metadata(path)
    schema = json.loads(meta["schemaString"])
    for f in schema["fields"]:
        if f["name"] in changes:
            frm, to = changes[f["name"]]
            f["type"] = to
            f.setdefault("metadata", {})["delta.typeChanges"] = [{"fromType": frm, "toType": to}]
    meta["schemaString"] = json.dumps(schema)
    meta["configuration"] = {**meta.get("configuration", {}), "delta.enableTypeWidening": "true"}
    features = ["timestampNtz", "typeWidening"]
    commit(path, version, [{"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": features,
                                         "writerFeatures": features}}, {"metaData": meta}])


OLD = pa.table({"k": pa.array([1, 2, 3], pa.int32()), "f": pa.array([1.5, 2.5, None], pa.float32()),
                "d": pa.array([dt.date(2024, 1, i) for i in (1, 2, 3)]),
                "m": pa.array([decimal.Decimal("1.25"), decimal.Decimal("-3.50"), None], pa.decimal128(5, 2)),
                "i": pa.array([7, None, 9], pa.int16())})
NEW = pa.table({"k": pa.array([2**40], pa.int64()), "f": pa.array([0.1], pa.float64()),
                "d": pa.array([dt.datetime(2024, 5, 6, 7, 8, 9)], pa.timestamp("us")),
                "m": pa.array([decimal.Decimal("123456.7891")], pa.decimal128(10, 4)),
                "i": pa.array([1.25], pa.float64())})
CHANGES = {"k": ("integer", "long"), "f": ("float", "double"), "d": ("date", "timestamp_ntz"),
           "m": ("decimal(5,2)", "decimal(10,4)"), "i": ("short", "double")}


def duck(path: str, where: str = "true") -> list[tuple]:
    return sorted(duckdb_delta().execute(f"SELECT k, f, d, m, i FROM delta_scan('{path}') WHERE {where}").fetchall())


def rows(t: pa.Table) -> list[tuple]:
    return sorted(tuple(r.values()) for r in t.select(["k", "f", "d", "m", "i"]).to_pylist())


@pytest.fixture
def widened(tmp_path) -> str:
    """Files written before and after another engine widened every column, converted."""
    path = str(tmp_path / "w")
    deltalake.write_deltalake(path, OLD)
    widen(path, 1, CHANGES)
    commit(path, 2, [add(path, NEW)])
    IndexedTable.convert(path, ["k"], num_buckets=2)
    return path


def test_files_written_before_a_widening_read_as_the_new_type(widened):
    t = IndexedTable.for_path(widened)
    assert [str(x) for x in t.schema.types] == ["int64", "double", "timestamp[us]", "decimal128(10, 4)", "double"]
    want = duck(widened)
    assert rows(t.to_arrow()) == want and len(want) == 4
    assert rows(t.lookup([2, 2**40, 5])) == duck(widened, "k IN (2, 1099511627776)")
    t.append(pa.table({c: NEW.column(c) for c in NEW.column_names}).cast(t.schema))  # written as the wider type
    t.create_index("by_d", ["d"])
    assert rows(t.lookup([dt.datetime(2024, 1, 2)], index="by_d")) == duck(widened, "d = TIMESTAMP '2024-01-02'")
    assert rows(IndexedTable.for_path(widened).to_arrow()) == duck(widened)


def test_a_widening_indexeddf_does_not_read_is_refused_by_name(tmp_path):
    path = str(tmp_path / "w")
    deltalake.write_deltalake(path, OLD)
    widen(path, 1, {"d": ("date", "string")})  # not a widening Delta defines
    with pytest.raises(UnsupportedFeatureError, match="'d' was changed from date to string.*delta-spark"):
        IndexedTable.convert(path, ["k"], num_buckets=2)


def test_widening_an_index_column_after_convert_is_refused(tmp_path):
    path = str(tmp_path / "w")
    deltalake.write_deltalake(path, OLD)
    IndexedTable.convert(path, ["k"], num_buckets=2)
    widen(path, 2, {"k": ("integer", "long")})
    with pytest.raises(UnsupportedFeatureError, match="index column 'k' was widened from integer to long"):
        IndexedTable.for_path(path)
    assert len(duck(path)) == 3  # other engines still read it


def test_timestamp_ntz_columns_read_and_write_as_duckdb_reads_them(tmp_path):
    path = str(tmp_path / "ntz")
    ts = [dt.datetime(2026, 1, 1, 8, 9, 10, 123456), None, dt.datetime(1900, 2, 3, 4, 5, 6)]
    deltalake.write_deltalake(path, pa.table({"k": [1, 2, 3], "t": pa.array(ts, pa.timestamp("us"))}))
    t = IndexedTable.convert(path, ["t"], num_buckets=2)
    assert str(t.schema.field("t").type) == "timestamp[us]"
    t.append(pa.table({"k": [4], "t": pa.array([dt.datetime(2030, 5, 5)], pa.timestamp("us"))}))
    want = sorted(duckdb_delta().execute(f"SELECT k, t FROM delta_scan('{path}')").fetchall(), key=str)
    assert sorted([tuple(r.values()) for r in t.to_arrow().to_pylist()], key=str) == want
    assert sorted(t.lookup([ts[0], dt.datetime(2030, 5, 5)]).column("k").to_pylist()) == [1, 4]
    protocol = deltalake.DeltaTable(path).protocol()
    assert "timestampNtz" in (protocol.reader_features or [])


@pytest.mark.spark
def test_the_connector_reads_widened_files(spark, widened):
    got = sorted(tuple(r) for r in read(spark, widened).select("k", "f", "d", "m", "i").collect())
    assert got == duck(widened)
    assert sorted(tuple(r) for r in read(spark, widened).where("k = 2").select("k", "f", "d", "m", "i").collect()) \
        == duck(widened, "k = 2")


# -- v2 checkpoints ------------------------------------------------------------------------------
_MAP = pa.map_(pa.string(), pa.string())
_ADD = pa.struct([("path", pa.string()), ("partitionValues", _MAP), ("size", pa.int64()),
                  ("modificationTime", pa.int64()), ("dataChange", pa.bool_()), ("stats", pa.string()),
                  ("tags", _MAP)])


def log_dir(path: str) -> str:
    return os.path.join(path, "_delta_log")


def v2_checkpointed(path: str, kind: str) -> str:
    """A table delta-rs wrote (two commits), upgraded to ``v2Checkpoint`` by a third commit,
    then checkpointed at that version the v2 way (``kind``: a UUID-named JSON or Parquet
    checkpoint whose add actions are in a sidecar file), and its first two commits cleaned
    up, so only the checkpoint knows the files."""
    deltalake.write_deltalake(path, pa.table({"k": list(range(10)), "s": [f"a{i}" for i in range(10)]}))
    deltalake.write_deltalake(path, pa.table({"k": list(range(10, 15)), "s": [f"b{i}" for i in range(5)]}), mode="append")
    meta = metadata(path)
    protocol = {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["v2Checkpoint"],
                "writerFeatures": ["v2Checkpoint"]}
    commit(path, 2, [{"protocol": protocol}])
    adds = [x["add"] for v in (0, 1) for x in map(json.loads, open(os.path.join(log_dir(path), f"{v:020d}.json")))
            if "add" in x]
    os.makedirs(os.path.join(log_dir(path), "_sidecars"))
    sidecar = f"{uuid.uuid4()}.parquet"
    rows = [{"add": {"path": a["path"], "partitionValues": [], "size": a["size"], "modificationTime": a["modificationTime"],
                     "dataChange": False, "stats": a.get("stats"), "tags": []}} for a in adds]
    pq.write_table(pa.Table.from_pylist(rows, schema=pa.schema([("add", _ADD)])),
                   os.path.join(log_dir(path), "_sidecars", sidecar))
    size = os.path.getsize(os.path.join(log_dir(path), "_sidecars", sidecar))
    actions = [{"checkpointMetadata": {"version": 2, "tags": {}}}, {"protocol": protocol}, {"metaData": meta},
               {"sidecar": {"path": sidecar, "sizeInBytes": size, "modificationTime": int(time.time() * 1000)}}]
    name = os.path.join(log_dir(path), f"{2:020d}.checkpoint.{uuid.uuid4()}.{kind}")
    if kind == "json":
        with open(name, "w") as f:
            f.write("\n".join(json.dumps(a) for a in actions) + "\n")
    else:
        columns = {k: [a.get(k) for a in actions] for k in ("checkpointMetadata", "protocol", "metaData", "sidecar")}
        for m in columns["metaData"]:
            if m is not None:
                m["configuration"] = list(m.get("configuration", {}).items())
                m["format"] = {"provider": "parquet", "options": []}
        for c in columns["checkpointMetadata"]:
            if c is not None:
                c["tags"] = []
        types = {  # Delta's checkpoint schema (delta-kernel checks the integer widths)
            "checkpointMetadata": pa.struct([("version", pa.int64()), ("tags", _MAP)]),
            "protocol": pa.struct([("minReaderVersion", pa.int32()), ("minWriterVersion", pa.int32()),
                                   ("readerFeatures", pa.list_(pa.string())), ("writerFeatures", pa.list_(pa.string()))]),
            "metaData": pa.struct([("id", pa.string()), ("name", pa.string()), ("description", pa.string()),
                                   ("format", pa.struct([("provider", pa.string()), ("options", _MAP)])),
                                   ("schemaString", pa.string()), ("partitionColumns", pa.list_(pa.string())),
                                   ("configuration", _MAP), ("createdTime", pa.int64())]),
            "sidecar": pa.struct([("path", pa.string()), ("sizeInBytes", pa.int64()), ("modificationTime", pa.int64())]),
        }
        pq.write_table(pa.table({k: pa.array(v, types[k]) for k, v in columns.items()}), name)
    with open(os.path.join(log_dir(path), "_last_checkpoint"), "w") as f:
        json.dump({"version": 2, "size": len(actions)}, f)
    for v in (0, 1):
        os.remove(os.path.join(log_dir(path), f"{v:020d}.json"))
    return path


def duck_ks(path: str) -> list[tuple]:
    return sorted(duckdb_delta().execute(f"SELECT k, s FROM delta_scan('{path}')").fetchall())


@pytest.mark.parametrize("kind", ["json", "parquet"])
def test_v2_checkpoints_with_sidecars_are_read_and_written(tmp_path, kind):
    path = v2_checkpointed(str(tmp_path / "v2"), kind)
    want = duck_ks(path)
    assert len(want) == 15
    t = IndexedTable.convert(path, ["k"], num_buckets=2)
    assert sorted(tuple(r.values()) for r in t.to_arrow().to_pylist()) == want
    assert sorted(t.lookup([3, 12, 99]).column("s").to_pylist()) == ["a3", "b2"]
    t.set_properties({"indexeddf.checkpointInterval": "1"})  # the next commit writes a checkpoint
    t.append(pa.table({"k": [100], "s": ["c"]}))
    ours = pq.read_table(os.path.join(log_dir(path), f"{t.version:020d}.checkpoint.parquet"))
    assert [r for r in ours.column("checkpointMetadata").to_pylist() if r] == [{"version": t.version, "tags": []}]
    assert duck_ks(path) == want + [(100, "c")]
    fresh = IndexedTable.for_path(path)  # from indexeddf's own v2 spec checkpoint
    assert sorted(tuple(r.values()) for r in fresh.to_arrow().to_pylist()) == want + [(100, "c")]


@pytest.mark.spark
@pytest.mark.parametrize("kind", ["json", "parquet"])
def test_the_connector_reads_v2_checkpoints(spark, tmp_path, kind):
    path = v2_checkpointed(str(tmp_path / "v2"), kind)
    IndexedTable.convert(path, ["k"], num_buckets=2)
    want = duck_ks(path)
    assert sorted(tuple(r) for r in read(spark, path).select("k", "s").collect()) == want
    assert sorted(tuple(r) for r in read(spark, path).where("k IN (3, 12)").select("k", "s").collect()) == \
        [r for r in want if r[0] in (3, 12)]


@pytest.mark.spark
def test_the_connector_refuses_an_index_column_widened_after_convert(spark, tmp_path):
    path = str(tmp_path / "w")
    deltalake.write_deltalake(path, OLD)
    IndexedTable.convert(path, ["k"], num_buckets=2)
    widen(path, 2, {"k": ("integer", "long")})
    with pytest.raises(Exception, match="UnsupportedFeatureError: index column 'k' was widened"):
        read(spark, path).collect()


# -- domain metadata and collations ---------------------------------------------------------------
def collated(path: str) -> str:
    """A table another engine gave a case-insensitive collation on ``s`` (the writer features
    ``collations`` and ``domainMetadata``) and two domains."""
    deltalake.write_deltalake(path, pa.table({"k": list(range(8)), "s": ["a", "B", "c", "D", "e", "F", "g", "H"]}))
    meta = metadata(path)
    schema = json.loads(meta["schemaString"])
    schema["fields"][1]["metadata"] = {"__COLLATIONS": {"s": "spark.UTF8_LCASE"}}
    meta["schemaString"] = json.dumps(schema)
    commit(path, 1, [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 7,
                                   "writerFeatures": ["domainMetadata", "collations"]}}, {"metaData": meta},
                     {"domainMetadata": {"domain": "delta.collations", "configuration": '{"versions":{}}',
                                         "removed": False}},
                     {"domainMetadata": {"domain": "app.owner", "configuration": "x", "removed": False}}])
    commit(path, 2, [{"domainMetadata": {"domain": "app.owner", "configuration": "", "removed": True}}])
    return path


def test_domain_metadata_is_kept_and_collated_columns_are_not_indexed(tmp_path):
    path = collated(str(tmp_path / "c"))
    with pytest.raises(UnsupportedFeatureError, match=r"columns \['s'\] have the collation\(s\) \['spark.UTF8_LCASE'\]"):
        IndexedTable.convert(path, ["s"], num_buckets=2)
    t = IndexedTable.convert(path, ["k"], num_buckets=2)
    assert {d: m.configuration for d, m in t.snapshot.domains.items()} == {"delta.collations": '{"versions":{}}'}
    with pytest.raises(UnsupportedFeatureError, match="collation"):
        t.create_index("by_s", ["s"])
    t.set_properties({"indexeddf.checkpointInterval": "1"})
    t.append(pa.table({"k": [8], "s": ["i"]}))
    ours = pq.read_table(os.path.join(log_dir(path), f"{t.version:020d}.checkpoint.parquet"))
    assert [r for r in ours.column("domainMetadata").to_pylist() if r] == [
        {"domain": "delta.collations", "configuration": '{"versions":{}}', "removed": False}]
    fresh = IndexedTable.for_path(path)  # from the checkpoint
    assert list(fresh.snapshot.domains) == ["delta.collations"]
    assert json.loads(metadata(path)["schemaString"])["fields"][1]["metadata"] == {"__COLLATIONS": {"s": "spark.UTF8_LCASE"}}
    want = sorted(duckdb_delta().execute(f"SELECT k, s FROM delta_scan('{path}')").fetchall())
    assert sorted(tuple(r.values()) for r in fresh.to_arrow().to_pylist()) == want and len(want) == 9
    assert fresh.lookup([1, 8]).column("s").to_pylist() in (["B", "i"], ["i", "B"])


@pytest.mark.spark
def test_the_connector_reads_collated_columns(spark, tmp_path):
    path = collated(str(tmp_path / "c"))
    IndexedTable.convert(path, ["k"], num_buckets=2)
    want = sorted(duckdb_delta().execute(f"SELECT k, s FROM delta_scan('{path}')").fetchall())
    assert sorted(tuple(r) for r in read(spark, path).select("k", "s").collect()) == want
    assert sorted(tuple(r) for r in read(spark, path).where("k = 3").select("k", "s").collect()) == [(3, "D")]
