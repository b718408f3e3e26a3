"""Tables partitioned by timestamps and by strings with characters that partition folders
escape, in every way writers put such folders in ``add.path``: delta-rs's and Spark's
(the folder Hive-escaped, ``:`` as ``%3A``, then the path percent-encoded: ``%253A``; the
folders written by Spark's own Parquet writer, and by hand), Delta
Kernel's (the folder as the value is, ``:`` percent-encoded once in the path) and a writer
that leaves the path unescaped (``time=1971-07-22T03:06:40Z/...``, a path Java's URI parser
refuses). Each table is converted, then read by the Python API and the JVM connector (the
scan, a filter on the timestamp partition that prunes partitions, a point lookup on the
driver, a lookup in tasks that probe the index, deletion vectors in a partition folder), and
compared with delta-rs and DuckDB's delta extension.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import sys
import urllib.parse

import deltalake
import pyarrow as pa
import pyarrow.compute as pc
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from connector_helpers import lineage, physical, read  # noqa: E402
from dv_helpers import mark_deleted  # noqa: E402
from foreign_logs import add, column, commit, metadata, protocol  # noqa: E402
from oracles import duckdb_delta  # noqa: E402

import indexeddf  # noqa: E402
from indexeddf import IndexedTable  # noqa: E402
from indexeddf.spec.deletion_vectors import DeletionVectorDescriptor  # noqa: E402

UTC = dt.timezone.utc
TIMES = [dt.datetime(1971, 7, 22, 3, 6, 40, tzinfo=UTC), dt.datetime(2020, 1, 1, 0, 0, 0, 123456, tzinfo=UTC),
         dt.datetime(2021, 6, 30, 23, 59, 59, 500, tzinfo=UTC), None]
"""One partition per value: whole seconds, microseconds, a value past 2000 twice, NULL."""
STRINGS = ["a b", "x/y", "p%41", "c:d", "k=v", None]
"""Characters Spark escapes in partition folders (and ``%41``, which must stay as it is), and NULL."""
CUT = dt.datetime(2000, 1, 1, tzinfo=UTC)
"""The filters keep the partitions from here on."""
SPARK_ESCAPED = set("\"#%'*/:=?\\{}[]^")
"""What Spark's (Hive's) ``escapePathName`` escapes in a partition folder (and control characters)."""


def rows(i: int, n: int = 3) -> pa.Table:
    """Partition ``i``'s rows: ids ``10 * i ...``, a UTC timestamp, its wall time as NTZ, a string."""
    t = TIMES[i % len(TIMES)]
    ids = [10 * i + j for j in range(n)]
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "time": pa.array([t] * n, pa.timestamp("us", "UTC")),
        "ntz": pa.array([None if t is None else t.replace(tzinfo=None)] * n, pa.timestamp("us")),
        "s": pa.array([STRINGS[i % len(STRINGS)]] * n, pa.string()),
        "v": pa.array([f"v{k}" for k in ids], pa.string()),
    })


def escape(value: str, chars) -> str:
    return "".join(f"%{ord(c):02X}" if c in chars or ord(c) < 32 else c for c in value)


# How each writer serializes a timestamp partition value (Delta's PROTOCOL allows both forms).
def _space(t: dt.datetime) -> str:
    """``YYYY-MM-DD HH:MM:SS[.ffffff]`` (a timestamp's UTC wall time, an NTZ's own)."""
    return t.strftime("%Y-%m-%d %H:%M:%S" + (".%f" if t.microsecond else ""))


def _iso(t: dt.datetime) -> str:
    """ISO 8601 in UTC with ``Z`` (Delta's other form of a timestamp; microseconds when there are any)."""
    return t.strftime("%Y-%m-%dT%H:%M:%S" + (".%f" if t.microsecond else "") + "Z")


SPACE = {"time": _space, "ntz": _space}
ISO = {"time": _iso, "ntz": _space}

LAYOUTS = {
    # Delta Spark (and delta-rs): Hive-escaped folders, the path percent-encoded (%3A → %253A).
    "spark": (SPARK_ESCAPED, lambda folder: urllib.parse.quote(folder, safe="/="), SPACE),
    "spark-iso": (SPARK_ESCAPED, lambda folder: urllib.parse.quote(folder, safe="/="), ISO),
    # Delta Kernel: only what a folder cannot hold escaped, the path percent-encoded once (':' → %3A).
    "kernel": (set("/%"), lambda folder: urllib.parse.quote(folder, safe="/="), ISO),
    # A writer that leaves the path as the folder is: a ':' and a space in it, unescaped.
    "unescaped": (set("/%"), lambda folder: folder, ISO),
}


def hand_written(path: str, layout: str) -> None:
    """A table partitioned by ``time``, ``ntz`` and ``s``, each partition a file in the folder
    ``layout`` names and an ``add.path`` encoded as that writer encodes it."""
    folder_escaped, encode, values = LAYOUTS[layout]
    fields = [column("id", "long"), column("time", "timestamp"), column("ntz", "timestamp_ntz"),
              column("s", "string"), column("v", "string")]
    commit(path, [protocol(3, 7, ["timestampNtz"], ["timestampNtz"]), metadata(fields, ["time", "ntz", "s"])],
           "CREATE TABLE")
    for i in range(len(STRINGS)):
        data = rows(i)
        t, s = TIMES[i % len(TIMES)], STRINGS[i]
        if layout == "unescaped" and s is not None and set(s) & folder_escaped:
            continue  # such a writer could not name the folder
        pv = {"time": None if t is None else values["time"](t), "ntz": None if t is None else values["ntz"](t), "s": s}
        folder = "/".join(f"{c}=" + ("__HIVE_DEFAULT_PARTITION__" if v is None else escape(v, folder_escaped))
                          for c, v in pv.items())
        action = add(path, data.select(["id", "v"]), pv, folder)
        action["add"]["path"] = encode(folder) + "/" + os.path.basename(action["add"]["path"])
        commit(path, [action])


def delta_rs(path: str) -> None:
    """delta-rs's own layout of the same partitions, written in two commits."""
    for part in (range(0, 3), range(3, len(STRINGS))):
        deltalake.write_deltalake(path, pa.concat_tables([rows(i) for i in part]), partition_by=["time", "ntz", "s"],
                                  mode="append")


def spark_parquet(path: str, spark) -> None:
    """Spark's own partitioned Parquet writer lays out the folders (session time zone UTC, as
    Delta Spark writes them); the log names each file as Delta Spark does: the folder's path
    percent-encoded, the values its folder names unescaped."""
    spark.createDataFrame(pa.concat_tables([rows(i) for i in range(len(STRINGS))]).to_pandas()) \
        .coalesce(1).write.partitionBy("time", "ntz", "s").parquet(path)
    fields = [column("id", "long"), column("time", "timestamp"), column("ntz", "timestamp_ntz"),
              column("s", "string"), column("v", "string")]
    actions = [protocol(3, 7, ["timestampNtz"], ["timestampNtz"]), metadata(fields, ["time", "ntz", "s"])]
    for folder, _, names in os.walk(path):
        for name in (n for n in names if n.endswith(".parquet")):
            rel = os.path.relpath(os.path.join(folder, name), path)
            pv = {c: None if v == "__HIVE_DEFAULT_PARTITION__" else urllib.parse.unquote(v)
                  for c, v in (part.split("=", 1) for part in rel.split("/")[:-1])}
            st = os.stat(os.path.join(path, rel))
            actions.append({"add": {"path": urllib.parse.quote(rel, safe="/="), "partitionValues": pv,
                                    "size": st.st_size, "modificationTime": int(st.st_mtime * 1000), "dataChange": True}})
    commit(path, actions, "WRITE")


BUILDERS = {"delta-rs": delta_rs, **{k: (lambda p, k=k: hand_written(p, k)) for k in LAYOUTS}, "spark-parquet": None}


@pytest.fixture(scope="module", params=[pytest.param(k, marks=pytest.mark.spark) if k == "spark-parquet" else k for k in BUILDERS])
def table(request, tmp_path_factory):
    """(the foreign table, its converted copy)."""
    base = tmp_path_factory.mktemp(request.param)
    foreign = str(base / "foreign")
    if request.param == "spark-parquet":
        spark_parquet(foreign, request.getfixturevalue("spark"))
    else:
        BUILDERS[request.param](foreign)
    converted = str(base / "converted")
    shutil.copytree(foreign, converted)
    IndexedTable.convert(converted, index_columns=["id"], num_buckets=2)
    return foreign, converted


def norm(t: pa.Table) -> list[tuple]:
    """Rows as (id, UTC microseconds, NTZ wall time, s, v), sorted: the same whoever read them."""
    t = t.select(["id", "time", "ntz", "s", "v"])
    us = pc.cast(pc.cast(t["time"], pa.timestamp("us", "UTC")), pa.int64())
    ntz = pc.cast(t["ntz"], pa.timestamp("us"))
    return sorted(zip(t["id"].to_pylist(), us.to_pylist(), ntz.to_pylist(), t["s"].to_pylist(), t["v"].to_pylist()),
                  key=lambda r: r[0])


def spark_rows(df) -> list[tuple]:
    got = df.selectExpr("id", "unix_micros(time) AS us", "ntz", "s", "v").collect()
    return sorted((r.id, r.us, r.ntz, r.s, r.v) for r in got)


def duck(path: str, where: str = "true") -> list[tuple]:
    return norm(duckdb_delta().execute(f"SELECT * FROM delta_scan('{path}') WHERE {where}").to_arrow_table())


def delta_rs_rows(path: str, where: str = "true") -> list[tuple]:
    """What delta-rs's own engine (DataFusion) reads, filtered by SQL ``where``."""
    sql = f"SELECT * FROM t WHERE {where}"
    return norm(pa.table(deltalake.QueryBuilder().register("t", deltalake.DeltaTable(path)).execute(sql).read_all()))


def files_read(df) -> int:
    """The files the scan of ``df`` (executed) read: its ``numFiles`` metric."""
    leaves = df._jdf.queryExecution().executedPlan().collectLeaves()
    return sum(int(leaves.apply(i).metrics().apply("numFiles").value()) for i in range(leaves.size()))


def test_the_oracles_agree_and_the_paths_are_what_the_writer_writes(table):
    foreign, _ = table
    want = delta_rs_rows(foreign)
    assert want == duck(foreign) and len(want) >= 12
    paths = [json.loads(line)["add"]["path"] for n in sorted(os.listdir(os.path.join(foreign, "_delta_log")))
             if n.endswith(".json") for line in open(os.path.join(foreign, "_delta_log", n)) if '"add"' in line]
    text = " ".join(paths)
    if "delta-rs" in foreign or "spark" in foreign:  # spark-parquet's folders are Spark's own
        assert "%253A" in text and ":" not in text, text  # the folder holds %3A, the path escapes its '%'
    elif "kernel" in foreign:
        assert "%3A" in text and "%253A" not in text and ":" not in text, text
    else:
        assert ":" in text and " " in text, text


def test_python_reads_equal_delta_rs(table):
    foreign, converted = table
    want = delta_rs_rows(foreign)
    t = IndexedTable.for_path(converted)
    assert norm(t.to_arrow()) == want
    for k in (0, 11, 22, 31, 52, 999):
        assert norm(t.lookup([k])) == [r for r in want if r[0] == k], k


@pytest.mark.spark
def test_spark_reads_filters_and_looks_up_as_delta_rs_and_duckdb(spark, table, conf):
    foreign, converted = table
    conf("spark.sql.session.timeZone", "America/Los_Angeles")  # partition values without a zone stay UTC
    want = delta_rs_rows(foreign)
    df = read(spark, converted)
    assert spark_rows(df) == want == duck(foreign)
    indexeddf.register(spark)  # the Python data source too (the fallback without a JDK)
    assert spark_rows(spark.read.format("indexeddf_python").load(converted)) == want
    # The filter on the timestamp partition column: Spark's scan reads only those partitions' files.
    since = df.where("time >= timestamp'2000-01-01 00:00:00Z'")
    text = physical(since)
    assert "PartitionFilters: [isnotnull(time" in text, text
    kept = delta_rs_rows(foreign, "time >= TIMESTAMP '2000-01-01T00:00:00Z'")
    assert kept and spark_rows(since) == kept == duck(foreign, "time >= TIMESTAMPTZ '2000-01-01 00:00:00+00'")
    live = IndexedTable.for_path(converted).snapshot.files.values()
    parts = {a.path for a in live if a.partitionValues["time"] is not None
             and dt.datetime.fromisoformat(a.partitionValues["time"].replace("Z", "")).replace(tzinfo=UTC) >= CUT}
    since.collect()  # numFiles is the executed plan's metric
    assert parts and files_read(since) == len(parts) < len(live)
    ntz = df.where("ntz < timestamp_ntz'2000-01-01 00:00:00'")
    assert spark_rows(ntz) == [r for r in want if r[2] is not None and r[2] < dt.datetime(2000, 1, 1)]
    # Point lookups on the index column: answered on the driver, and by tasks that probe the index.
    for k in (11, 22, 999):
        q = df.where(f"id = {k}")
        assert "LocalTableScan" in physical(q), physical(q)
        assert spark_rows(q) == [r for r in want if r[0] == k] == duck(foreign, f"id = {k}"), k
    conf("spark.indexeddf.driverLookup.maxKeys", "1")
    conf("spark.indexeddf.lookup.maxReadFraction", "1.0")  # a tiny table: tasks are not worth it otherwise
    q = df.where("id IN (0, 12, 21, 52, 999) AND time >= timestamp'2000-01-01 00:00:00Z'")
    assert "ProbeRDD" in lineage(q)
    assert spark_rows(q) == [r for r in kept if r[0] in (0, 12, 21, 52, 999)]


@pytest.mark.spark
def test_deletion_vectors_in_partition_folders(spark, table, tmp_path):
    """Rows deleted by deletion vectors from files in those folders: a DV beside the table's
    files (``u``) and one by absolute URI inside the partition folder (``p``)."""
    foreign, converted = table
    converted = str(shutil.copytree(converted, tmp_path / "deleted"))
    t = IndexedTable.for_path(converted)
    victims = sorted(t.snapshot.files)[:2]
    mark_deleted(converted, {victims[0]: [1], victims[1]: [0, 2]})
    # The second file's DV moves into the file's own folder and is named by absolute URI.
    log = os.path.join(converted, "_delta_log")
    last = sorted(n for n in os.listdir(log) if n.endswith(".json"))[-1]
    lines = [json.loads(line) for line in open(os.path.join(log, last))]
    # The remove and add name the file as the log first did (indexeddf re-encodes it; delta-rs
    # matches removes to adds by the encoded string).
    first = {urllib.parse.unquote(a["path"]): a["path"] for n in sorted(os.listdir(log)) if n < last
             and n.endswith(".json") for a in (json.loads(x).get("add") for x in open(os.path.join(log, n))) if a}
    for line in lines:
        for a in (line.get("add"), line.get("remove")):
            if a:
                a["path"] = first[urllib.parse.unquote(a["path"])]
        a = line.get("add")
        if a and urllib.parse.unquote(a["path"]) == victims[1]:
            d = DeletionVectorDescriptor.model_validate(a["deletionVector"])
            src = os.path.join(converted, d.relative_path)
            dst = os.path.join(converted, os.path.dirname(victims[1]), "dv 100%.bin")
            shutil.copy(src, dst)  # the two DVs may share one file (at their offsets)
            a["deletionVector"]["storageType"] = "p"
            a["deletionVector"]["pathOrInlineDv"] = "file://" + urllib.parse.quote(dst)
    with open(os.path.join(log, last), "w") as f:
        f.write("".join(json.dumps(line) + "\n" for line in lines))
    want = delta_rs_rows(converted)
    assert want == duck(converted) and len(want) == len(delta_rs_rows(foreign)) - 3
    assert norm(IndexedTable.for_path(converted).to_arrow()) == want
    df = read(spark, converted)
    assert spark_rows(df) == want
    for k in sorted({r[0] for r in delta_rs_rows(foreign)})[:12]:
        assert spark_rows(df.where(f"id = {k}")) == [r for r in want if r[0] == k], k
