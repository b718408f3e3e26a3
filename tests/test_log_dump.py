"""The connector's Delta log reader (``io.indexeddf.log``, no Spark) against the Python reader:
``io.indexeddf.log.LogDump`` prints a version's replay as JSON (run with ``java``, no Spark
session), and every field must equal what ``IndexedTable.for_path(path, version=v)`` replays
(protocol, schema, live files with their buckets and file ids, index states), across creates,
appends, deletes, a secondary index, checkpoints, time travel, and the first-layout golden table
before (refused) and after ``IndexedTable.upgrade``. The log package must also compile with no
Spark or Scala jar on the class path."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pyarrow as pa
import pytest

from indexeddf import IndexedTable
from indexeddf.spark import connector
from indexeddf.spec.delta import protocol_object, schema_string

pytestmark = pytest.mark.skipif(shutil.which("java") is None or shutil.which("javac") is None,
                                reason="needs a JDK")

GOLDEN = Path(__file__).parent / "data" / "first_layout"


@pytest.fixture(scope="module")
def classpath() -> str:
    jar = connector.build_jar()
    return f"{jar}:{connector._pyspark_jars() / '*'}"


def dump(classpath: str, path, *args: str) -> tuple[int, dict]:
    """LogDump's exit status and printed JSON for ``path`` (and a version, or ``--timestamp TS``)."""
    done = subprocess.run(["java", "-cp", classpath, "io.indexeddf.log.LogDump", str(path), *args],
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.strip(), done.stderr
    return done.returncode, json.loads(done.stdout)


def python_side(path, version: int) -> dict:
    """What the Python reader replays at ``version``, in LogDump's shape."""
    snap = IndexedTable.for_path(str(path), version=version).snapshot
    latest = IndexedTable.for_path(str(path)).version
    return {
        "version": snap.version,
        "latestVersion": latest,
        "protocol": protocol_object(snap.protocol),
        "schemaString": json.loads(schema_string(snap.metadata.schema_)),
        "indexColumns": list(snap.metadata.indexColumns),
        "numBuckets": snap.metadata.numBuckets,
        "files": sorted(({"path": a.path, "size": a.size, "bucket": a.bucket, "fileId": a.fileId,
                          "sorted": a.sorted} for a in snap.files.values()), key=lambda f: f["path"]),
        "indexes": {name: {"columns": list(e.columns), "kind": e.kind, "state": e.state,
                           "numBuckets": e.numBuckets, "files": sorted(f.path for f in e.files)}
                    for name, e in snap.indexes.items()},
    }


def java_versions(classpath: str, path) -> list[dict]:
    """LogDump's dump of every version, in one JVM (``--all``): a refused version is its error object."""
    status, out = dump(classpath, path, "--all")
    assert status == 0, out
    for v in out:
        if "schemaString" in v:
            v["schemaString"] = json.loads(v["schemaString"])
    return out


def java_side(classpath: str, path, version: int) -> dict:
    status, out = dump(classpath, path, str(version))
    assert status == 0, out
    out["schemaString"] = json.loads(out["schemaString"])
    return out


def rows(keys, tag: str) -> pa.Table:
    return pa.table({"k": pa.array(keys, pa.int64()), "s": [f"{tag}{k % 7}" for k in keys],
                     "v": [float(k) for k in keys]})


def test_replay_matches_python_at_every_version(tmp_path, classpath):
    path = tmp_path / "t"
    t = IndexedTable.create(str(path), rows(range(0, 40), "a"), index_columns=["k"], num_buckets=4,
                            properties={"indexeddf.checkpointInterval": "3"})
    t.append(rows(range(40, 60), "b"))
    t.create_index("by_s", ["s"], num_buckets=2)
    t.delete("k < 10")
    for i in range(5):  # past two checkpoints
        t.append(rows(range(100 + 10 * i, 105 + 10 * i), "c"))
    t.delete("k = 41")
    latest = IndexedTable.for_path(str(path)).version
    assert any((path / "_delta_log").glob("*.checkpoint.parquet")), "the table should have a checkpoint"
    every = java_versions(classpath, path)
    assert len(every) == latest + 1
    for v in range(latest + 1):
        assert every[v] == python_side(path, v), v
    assert every[latest]["indexes"]["by_s"]["state"] == "ACTIVE"
    assert java_side(classpath, path, 3) == every[3]  # one version alone reads the same


def test_time_travel_by_timestamp_matches_python(tmp_path, classpath):
    path = tmp_path / "t"
    t = IndexedTable.create(str(path), rows(range(10), "a"), index_columns=["k"], num_buckets=2)
    t.append(rows(range(10, 20), "b"))
    t.append(rows(range(20, 30), "c"))
    for i, h in enumerate(t.history()):
        ms = int(h.timestamp.timestamp() * 1000)
        # ms since the epoch, and ISO 8601 (once: each run starts a JVM)
        for at in (ms, h.timestamp.isoformat()) if i == 1 else (ms,):
            status, out = dump(classpath, path, "--timestamp", str(at))
            assert status == 0, out
            assert out["version"] == IndexedTable.for_path(str(path), timestamp=at).version, (h, at)
        assert out["version"] >= h.version  # commits within one millisecond: the newest of them
    status, out = dump(classpath, path, "--timestamp", "1970-01-01T00:00:00Z")
    assert status == 2 and out["error"] == "VersionNotFoundError", out


def test_missing_version_and_missing_table_are_refused(tmp_path, classpath):
    path = tmp_path / "t"
    IndexedTable.create(str(path), rows(range(5), "a"), index_columns=["k"], num_buckets=2)
    status, out = dump(classpath, path, "7")
    assert status == 2 and out["error"] == "VersionNotFoundError", out
    status, out = dump(classpath, tmp_path / "nothing")
    assert status == 2 and out["error"] == "TableNotFoundError", out


def test_first_layout_refused_then_read_after_upgrade(tmp_path, classpath):
    """The golden table of the first layout has no ``_delta_log/``: the connector finds no table
    (as the Python reader, which says to upgrade); upgraded in place, every version reads alike."""
    status, out = dump(classpath, GOLDEN)
    assert status == 2 and out["error"] == "TableNotFoundError", out
    path = tmp_path / "first"
    shutil.copytree(GOLDEN, path)
    IndexedTable.upgrade(str(path))
    latest = IndexedTable.for_path(str(path)).version
    every = java_versions(classpath, path)
    for v in range(latest + 1):
        try:
            expected = python_side(path, v)
        except Exception as e:  # noqa: BLE001 - a version the upgraded log cannot rebuild: both refuse
            assert "error" in every[v], (v, e, every[v])
            continue
        assert every[v] == expected, v


def test_log_package_compiles_without_spark(tmp_path):
    """``io.indexeddf.log`` imports nothing of Spark or Scala: it compiles against Hadoop,
    Parquet and Jackson alone."""
    jars = [p for p in connector._pyspark_jars().glob("*.jar")
            if not p.name.startswith(("spark-", "scala-"))]
    sources = sorted(str(p) for p in (connector.sources_dir() / "java" / "io" / "indexeddf" / "log").glob("*.java"))
    assert sources
    done = subprocess.run(["javac", "--release", "17", "-nowarn", "-encoding", "UTF-8",
                           "-cp", ":".join(map(str, jars)), "-d", str(tmp_path), *sources],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


ODD_PATHS = ["t=1971-07-22T03:06:40.000000Z/part-0.parquet", "t=1971-07-22T03%3A06%3A40Z/part-1.parquet",
             "t=1971-07-22%2003%253A06%253A40/part-2.parquet", "s=a b/c#d?e+f/part-3.parquet",
             "s=100%/x%zz%4/part-4.parquet", "s=%C3%A9t%C3%A9/%E2%82%AC/part-5.parquet", "s=été/part-6.parquet",
             "s=bad%C3/part-7.parquet"]
"""``add.path`` as writers put them: unescaped, %3A once, Spark's %253A, URI delimiters left as is, a '%'
with no hex digits after it, UTF-8 escapes, raw UTF-8, a cut UTF-8 sequence."""


def test_replay_decodes_paths_as_python_does(tmp_path, classpath):
    """Every add path is decoded once, to the same path (and file id) in the JVM as in Python."""
    path = tmp_path / "t"
    IndexedTable.create(str(path), rows(range(0, 4), "a"), index_columns=["k"], num_buckets=2)
    adds = [{"add": {"path": p, "partitionValues": {}, "size": 10 + i, "modificationTime": 1, "dataChange": True}}
            for i, p in enumerate(ODD_PATHS)]
    (path / "_delta_log" / f"{1:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in adds))
    py, jvm = python_side(path, 1), java_side(classpath, path, 1)
    assert {f["path"] for f in py["files"]} >= {"t=1971-07-22T03:06:40.000000Z/part-0.parquet",
                                                  "t=1971-07-22T03:06:40Z/part-1.parquet",
                                                  "t=1971-07-22 03%3A06%3A40/part-2.parquet", "s=100%/x%zz%4/part-4.parquet",
                                                  "s=été/€/part-5.parquet", "s=été/part-6.parquet"}
    assert jvm["files"] == py["files"]
