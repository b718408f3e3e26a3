"""Delta tables whose log is written by hand, as delta-rs and delta-kernel build theirs in
their own tests: Parquet files pyarrow writes the way other engines write them (INT96 and
millisecond timestamps, decimals as integers, files written before a column existed,
physical column names), committed by JSON lines written here. Each builder fills an empty
folder; :data:`HAND_WRITTEN` lists them as corpus cases (see ``foreign_tables.py``).
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
import time
import urllib.parse
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq

from indexeddf.errors import UnsupportedFeatureError

UTC = dt.timezone.utc
T0 = dt.datetime(2024, 3, 10, 1, 2, 3, 456789, tzinfo=UTC)


@dataclass(frozen=True)
class Case:
    """One table of the corpus: ``build(path)`` writes it into an empty folder; it is
    converted with ``index`` as its index columns and looked up with ``probes`` (scalars,
    or tuples for a composite index; ``None`` finds NULL keys). ``refused``: the
    ``indexeddf.errors`` class ``convert`` raises and a pattern its message matches (the
    feature it names). ``connector_xfail``: a known wrong answer of the connector, with its
    reason."""

    name: str
    build: Callable[[str], None]
    index: list[str]
    probes: list
    refused: tuple[type, str] | None = None
    connector_xfail: str | None = None


class Of(tuple):
    """Probes that are the index values of the rows whose first column is one of these."""

    def __new__(cls, *firsts):
        return super().__new__(cls, firsts)


def commit(path: str, actions: list[dict], operation: str = "WRITE") -> int:
    """Appends one commit of ``actions`` (and a ``commitInfo``) to the log; its version."""
    log = os.path.join(path, "_delta_log")
    os.makedirs(log, exist_ok=True)
    versions = [int(n[:20]) for n in os.listdir(log) if n.endswith(".json")]
    version = max(versions, default=-1) + 1
    info = {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": operation, "engineInfo": "hand"}}
    with open(os.path.join(log, f"{version:020d}.json"), "x") as f:
        f.write("\n".join(json.dumps(a) for a in [*actions, info]) + "\n")
    return version


def add(path: str, table: pa.Table, partition_values: dict | None = None, folder: str = "", stats: bool = True,
        **options) -> dict:
    """Writes ``table`` as a new Parquet file (pyarrow ``options``) in ``folder`` and
    returns its ``add`` (whose path is percent-encoded, as Delta's paths are)."""
    name = os.path.join(folder, f"part-{uuid.uuid4()}.parquet")
    os.makedirs(os.path.join(path, folder), exist_ok=True)
    pq.write_table(table, os.path.join(path, name), **options)
    st = os.stat(os.path.join(path, name))
    action = {"path": urllib.parse.quote(name, safe="/="), "partitionValues": partition_values or {}, "size": st.st_size,
              "modificationTime": int(st.st_mtime * 1000), "dataChange": True}
    if stats:
        action["stats"] = json.dumps({"numRecords": table.num_rows})
    return {"add": action}


def metadata(fields: list[dict], partition_columns=(), configuration: dict | None = None) -> dict:
    """A ``metaData`` action with this Delta schema."""
    return {"metaData": {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
                         "schemaString": json.dumps({"type": "struct", "fields": fields}),
                         "partitionColumns": list(partition_columns), "configuration": configuration or {},
                         "createdTime": int(time.time() * 1000)}}


def protocol(reader: int = 1, writer: int = 2, reader_features=None, writer_features=None) -> dict:
    p = {"minReaderVersion": reader, "minWriterVersion": writer}
    if reader_features is not None:
        p["readerFeatures"] = list(reader_features)
    if writer_features is not None:
        p["writerFeatures"] = list(writer_features)
    return {"protocol": p}


def column(name: str, type_: str | dict, nullable: bool = True, meta: dict | None = None) -> dict:
    return {"name": name, "type": type_, "nullable": nullable, "metadata": meta or {}}


def last_metadata(path: str) -> dict:
    """The newest ``metaData`` of a table's JSON commits."""
    log = os.path.join(path, "_delta_log")
    lines = [json.loads(line) for n in sorted(os.listdir(log)) if n.endswith(".json")
             for line in open(os.path.join(log, n))]
    return [x["metaData"] for x in lines if "metaData" in x][-1]


# -- files written the way other engines write them -----------------------------------------------
TS_SCHEMA = [column("k", "long"), column("ts", "timestamp"), column("m", "decimal(12,3)"), column("s", "string")]


def ts_rows(keys, ts_type, with_s: bool = True) -> pa.Table:
    """Rows whose ``ts`` is stored as ``ts_type``: naive types hold UTC wall time (as
    Spark's INT96 does), ``m`` a decimal(12,3)."""
    wall = pa.array([None if k % 9 == 0 else (T0 + dt.timedelta(minutes=k, milliseconds=k)).replace(tzinfo=None)
                     for k in keys], pa.timestamp("us"))
    ts = wall.cast(pa.timestamp("us", "UTC")).cast(ts_type, safe=False) if ts_type.tz else wall.cast(ts_type, safe=False)
    cols = {"k": pa.array(keys, pa.int64()), "ts": ts,
            "m": pa.array([decimal.Decimal(k * 7) / 1000 for k in keys], pa.decimal128(12, 3))}
    if with_s:
        cols["s"] = pa.array([None if k % 4 == 0 else f"s{k % 5}" for k in keys])
    return pa.table(cols)


def spark_files(path: str, layouts: list[tuple[pa.Table, dict]]) -> None:
    """A table of one commit per file, each written with a writer's options."""
    commit(path, [protocol(), metadata(TS_SCHEMA)], "CREATE TABLE")
    for table, options in layouts:
        commit(path, [add(path, table, **options)])


INT96 = {"use_deprecated_int96_timestamps": True}
MILLIS = {"coerce_timestamps": "ms", "allow_truncated_timestamps": True}
INT_DECIMALS = {"store_decimal_as_integer": True, "use_dictionary": True}


def int96(path: str) -> None:
    spark_files(path, [(ts_rows(range(0, 30), pa.timestamp("ns")), INT96),
                       (ts_rows(range(30, 50), pa.timestamp("ns")), {**INT96, "row_group_size": 7})])


def millis(path: str) -> None:
    spark_files(path, [(ts_rows(range(0, 30), pa.timestamp("ms", "UTC")), {**MILLIS, **INT_DECIMALS}),
                       (ts_rows(range(30, 50), pa.timestamp("ms")), MILLIS)])  # not adjusted to UTC


def missing_column(path: str) -> None:
    spark_files(path, [(ts_rows(range(0, 20), pa.timestamp("us", "UTC"), with_s=False), {}),
                       (ts_rows(range(20, 40), pa.timestamp("us", "UTC")), {}),
                       (ts_rows(range(40, 50), pa.timestamp("ns")).drop_columns(["m"]), INT96)])


def mixed_layouts(path: str) -> None:
    """Every layout in one table, some files without statistics."""
    spark_files(path, [(ts_rows(range(0, 15), pa.timestamp("ns")), {**INT96, "stats": False}),
                       (ts_rows(range(15, 30), pa.timestamp("ms", "UTC")), {**MILLIS, **INT_DECIMALS}),
                       (ts_rows(range(30, 45), pa.timestamp("us", "UTC"), with_s=False), {"stats": False}),
                       (ts_rows(range(45, 60), pa.timestamp("us", "UTC")), {"compression": "zstd"})])


def partitioned_files(path: str) -> None:
    """Partitioned by ``p`` with values as Spark writes them (NULL, escaped folder names)."""
    fields = [column("k", "long"), column("ts", "timestamp"), column("p", "string")]
    commit(path, [protocol(), metadata(fields, ["p"])], "CREATE TABLE")
    for i, (p, folder) in enumerate([("a b", "p=a b"), (None, "p=__HIVE_DEFAULT_PARTITION__"),
                                     ("x:y", "p=x%3Ay")]):
        rows = ts_rows(range(i * 10, i * 10 + 10), pa.timestamp("ns")).select(["k", "ts"])
        commit(path, [add(path, rows, {"p": p}, folder, **INT96)])


# -- column mapping (name mode) with physical names Spark would choose --------------------------------
def mapped(name: str, type_, cid: int, physical: str | None = None) -> dict:
    return column(name, type_, meta={"delta.columnMapping.id": cid,
                                     "delta.columnMapping.physicalName": physical or f"col-{uuid.uuid4()}"})


def column_mapped(path: str, nested_physical: bool = False) -> None:
    """Name mode; a struct whose fields have ids and physical names too (their own names,
    or ``col-x`` and ``col-z`` when ``nested_physical``); a rename (logical names changed,
    physical names kept) and a dropped column in later commits."""
    x, z = ("col-x", "col-z") if nested_physical else ("x y", "z")
    inner = {"type": "struct", "fields": [mapped("x y", "integer", 3, x), mapped("z", "string", 4, z)]}
    fields = [mapped("k", "long", 1, "col-k"), mapped("old name", "string", 2, "col-s"),
              mapped("st", inner, 5, "col-st"), mapped("gone", "double", 6, "col-g")]
    conf = {"delta.columnMapping.mode": "name", "delta.columnMapping.maxColumnId": "6"}
    commit(path, [protocol(2, 5), metadata(fields, configuration=conf)], "CREATE TABLE")
    st_type = pa.struct([(x, pa.int32()), (z, pa.string())])
    for lo in (0, 20):
        keys = list(range(lo, lo + 20))
        commit(path, [add(path, pa.table({
            "col-k": pa.array(keys, pa.int64()), "col-s": [None if k % 6 == 0 else f"v{k}" for k in keys],
            "col-st": pa.array([None if k % 7 == 0 else {x: k, z: f"z{k % 3}"} for k in keys], st_type),
            "col-g": [k / 2 for k in keys]}))])
    fields[1] = mapped("new name", "string", 2, "col-s")
    del fields[3]
    commit(path, [metadata(fields, configuration=conf)], "RENAME COLUMN")


# -- refusals -------------------------------------------------------------------------------------
def _delta_rs_then(path: str, change: Callable[[dict], list[dict]]) -> None:
    deltalake.write_deltalake(path, pa.table({"k": pa.array(range(10), pa.int64()), "s": [f"s{i}" for i in range(10)]}))
    commit(path, change(last_metadata(path)), "ALTER TABLE")


def _with_column_meta(meta: dict, name: str, extra: dict) -> dict:
    schema = json.loads(meta["schemaString"])
    for f in schema["fields"]:
        if f["name"] == name:
            f["metadata"] = {**f.get("metadata", {}), **extra}
    return {"metaData": {**meta, "schemaString": json.dumps(schema)}}


def generated_column(path: str) -> None:
    _delta_rs_then(path, lambda m: [protocol(1, 4), _with_column_meta(m, "s", {
        "delta.generationExpression": "concat('s', CAST(k AS STRING))"})])


def identity_column(path: str) -> None:
    _delta_rs_then(path, lambda m: [protocol(1, 6), _with_column_meta(m, "k", {
        "delta.identity.start": 0, "delta.identity.step": 1, "delta.identity.allowExplicitInsert": True,
        "delta.identity.highWaterMark": 9})])


def invariant(path: str) -> None:
    _delta_rs_then(path, lambda m: [protocol(1, 2), _with_column_meta(m, "k", {
        "delta.invariants": json.dumps({"expression": {"expression": "k >= 0"}})})])


def row_tracking(path: str) -> None:
    _delta_rs_then(path, lambda m: [protocol(1, 7, None, ["domainMetadata", "rowTracking"])])


def in_commit_timestamps(path: str) -> None:
    _delta_rs_then(path, lambda m: [protocol(1, 7, None, ["inCommitTimestamp"]), {"metaData": {
        **m, "configuration": {**m["configuration"], "delta.enableInCommitTimestamps": "true"}}}])


def collated(path: str) -> None:
    def change(m):
        return [protocol(1, 7, None, ["domainMetadata", "collations"]),
                _with_column_meta(m, "s", {"__COLLATIONS": {"s": "spark.UTF8_LCASE"}})]
    _delta_rs_then(path, change)


def variant_reader_feature(path: str) -> None:
    _delta_rs_then(path, lambda m: [protocol(3, 7, ["variantType"], ["variantType"])])


KS_PROBES = [0, 3, 9, 10, -1]
TS_PROBES = [0, 1, 9, 18, 25, 31, 44, 49, 59, 77]
HAND_WRITTEN = [
    Case("int96-timestamps", int96, ["k"], TS_PROBES),
    Case("int96-timestamp-index", int96, ["ts"], [Of(1, 9, 31, 49), None, T0 - dt.timedelta(days=1)]),
    Case("millis-timestamps-int-decimals", millis, ["k"], TS_PROBES),
    Case("millis-timestamp-index", millis, ["ts"], [Of(2, 33, 47), None, T0 - dt.timedelta(days=1)]),
    Case("decimal-index-int-decimals", millis, ["m"], [Of(0, 5, 35), decimal.Decimal("-1.000")]),
    Case("file-missing-columns", missing_column, ["k"], TS_PROBES),
    Case("index-on-a-column-some-files-lack", missing_column, ["s"], [None, "s1", "s3", "nope"]),
    Case("mixed-layouts-no-stats", mixed_layouts, ["k"], TS_PROBES),
    Case("hand-partitioned-int96", partitioned_files, ["p"], [None, "a b", "x:y", "zz"]),
    Case("hand-partitioned-int96-by-k", partitioned_files, ["k"], [0, 11, 29, 30]),
    Case("column-mapping-name-renamed", column_mapped, ["k"], [0, 6, 7, 21, 39, 40]),
    Case("column-mapping-index-on-renamed", column_mapped, ["new name"], [None, "v1", "v33", "v6"]),
    Case("collation-index-on-other-column", collated, ["k"], KS_PROBES),
    Case("column-mapping-nested-physical-names", lambda p: column_mapped(p, nested_physical=True), ["k"],
         [0, 6, 7, 21, 39, 40]),
    # Refused, each by name (DuckDB reads them all but the last).
    Case("generated-column", generated_column, ["k"], [], (UnsupportedFeatureError, "delta.generationExpression")),
    Case("identity-column", identity_column, ["k"], [], (UnsupportedFeatureError, "delta.identity.start")),
    Case("invariant", invariant, ["k"], [], (UnsupportedFeatureError, "delta.invariants")),
    Case("row-tracking", row_tracking, ["k"], [], (UnsupportedFeatureError, "rowTracking")),
    Case("in-commit-timestamps", in_commit_timestamps, ["k"], [], (UnsupportedFeatureError, "inCommitTimestamp")),
    Case("collation-index-on-collated-column", collated, ["s"], [], (UnsupportedFeatureError, "collation")),
    Case("variant-reader-feature", variant_reader_feature, ["k"], [], (UnsupportedFeatureError, "variantType")),
]
