"""Spark Connect: a real Connect server (pyspark's own ``SparkConnectServer``, started by
this module on loopback with the JVM connector from ``indexeddf.spark.connector.submit_args``)
and a Connect client in this process that reads, writes, looks up and joins the way users
do. Every answer is checked against indexeddf's Python reader (``to_arrow`` of the same
version) filtered or joined by DuckDB, never against Spark itself.

A Connect session next to the run's classic one: ``SparkSession.builder.remote(url)
.getOrCreate()`` refuses (``SESSION_ALREADY_EXIST``: a classic session is running), while
``.create()`` works but sets ``SPARK_CONNECT_MODE_ENABLED`` for the whole process, which
makes ``pyspark.sql.functions`` build Connect columns (and a classic DataFrame then fails
on them). So the module creates the Connect session with ``create()`` and sets that
variable only while its Connect tests run, as a Connect-only process has it; the last
test checks the classic session still works afterwards.
"""

from __future__ import annotations

import contextlib
import io
import os
import random
import socket
import subprocess
import sys
import time
import warnings
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from connector_helpers import read
from s3_endpoint import free_port

import indexeddf
from indexeddf import IndexedTable
from indexeddf.errors import SchemaMismatchError
from indexeddf.spark import is_connect
from indexeddf.spark.connector import submit_args

pytestmark = pytest.mark.spark

_MODE = "SPARK_CONNECT_MODE_ENABLED"
SCHEMA = pa.schema([("k", pa.int64()), ("s", pa.string()), ("x", pa.float64()), ("day", pa.date32())])


# -- the server and the client --------------------------------------------------------------------
def launch_server(folder: Path) -> tuple[subprocess.Popen, int, Path]:
    """Starts a Spark Connect server in the foreground: ``spark-submit --class
    SparkConnectServer`` (what ``sbin/start-connect-server.sh`` runs, without its daemon
    wrapper) with the connector's ``--conf``s, on a free loopback port, its log in ``folder``.
    Returns the process, its port and its log, without waiting for it (``conftest.py`` starts
    it at the run's first test, :func:`server` waits)."""
    import pyspark

    home = Path(pyspark.__file__).resolve().parent
    port = free_port()
    log = folder / "server.log"
    command = [
        str(home / "bin" / "spark-submit"), "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
        "--master", "local[2]", *submit_args(),
        "--conf", "spark.connect.grpc.binding.address=127.0.0.1", "--conf", f"spark.connect.grpc.binding.port={port}",
        "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.session.timeZone=UTC",
        "--conf", "spark.sql.shuffle.partitions=4", "spark-internal",
    ]
    # The server's Python workers (the Python data source, mapInArrow) run this interpreter.
    env = {k: v for k, v in os.environ.items() if k not in (_MODE, "SPARK_REMOTE")}
    env.update(PYSPARK_PYTHON=sys.executable, SPARK_HOME=str(home))
    with open(log, "w") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
    return proc, port, log


@pytest.fixture(scope="module")
def server(connect_server_started, tmp_path_factory):
    """The Spark Connect server (:func:`launch_server`, launched early by ``conftest.py`` when
    the run includes this module), owned by this fixture: its ``sc://`` URL once it listens;
    killed at the end of the module."""
    proc, port, log = connect_server_started or launch_server(tmp_path_factory.mktemp("connect"))
    try:
        deadline = time.monotonic() + 240
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the Connect server did not start (exit {proc.poll()}):\n{log.read_text()[-4000:]}")
            with socket.socket() as s:
                s.settimeout(1)
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)


@pytest.fixture(scope="module")
def cspark(server):
    """A Spark Connect session (``pyspark.sql.connect.session.SparkSession``) on the server,
    with the indexeddf sources registered on its server-side session."""
    from pyspark.sql import SparkSession

    before = os.environ.get(_MODE)
    session = SparkSession.builder.remote(server).create()  # sets _MODE for the process
    _restore(before)  # connect_mode sets it again for each test that uses the session
    try:
        assert is_connect(session) and type(session).__module__ == "pyspark.sql.connect.session"
        yield session
    finally:
        os.environ[_MODE] = "1"
        try:
            session.stop()  # closes the gRPC channel (left to __del__ at exit, it can hang)
        finally:
            _restore(before)


def _restore(before: str | None) -> None:
    if before is None:
        os.environ.pop(_MODE, None)
    else:
        os.environ[_MODE] = before


@pytest.fixture(autouse=True)
def connect_mode(request):
    """pyspark's Connect mode for the process while a test uses the Connect session."""
    if "cspark" not in request.fixturenames:
        yield
        return
    before = os.environ.get(_MODE)
    os.environ[_MODE] = "1"
    try:
        yield
    finally:
        _restore(before)


def plan(df) -> str:
    """The physical plan ``df.explain()`` prints (a Connect DataFrame has no ``_jdf``)."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        df.explain()
    return buf.getvalue()


def rows(t: pa.Table, names: list[str] | None = None) -> list[str]:
    """A table's rows as a sorted list (a multiset), columns in ``names`` order."""
    t = t.select(names or t.column_names)
    return sorted(repr(tuple(r.values())) for r in t.to_pylist())


def duck(sql: str, **tables: pa.Table) -> pa.Table:
    con = duckdb.connect()
    for name, t in tables.items():
        con.register(name, t)
    out = con.execute(sql).arrow()
    return out.read_all() if isinstance(out, pa.RecordBatchReader) else out


def batch(keys: list[int]) -> pa.Table:
    import datetime as dt

    return pa.table({
        "k": pa.array(keys, pa.int64()),
        "s": [None if k % 7 == 0 else f"s{k % 13}" for k in keys],
        "x": [k / 4 for k in keys],
        "day": [dt.date(2026, 1, 1) + dt.timedelta(days=k % 30) for k in keys],
    }, schema=SCHEMA)


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    """Four versions: 0..199; + 200..259; - seven keys under 100; + 10..19 again
    (equal keys in two rows)."""
    path = str(tmp_path_factory.mktemp("connect-table") / "t")
    t = IndexedTable.create(path, batch(list(range(200))), index_columns=["k"], num_buckets=4)
    t.append(batch(list(range(200, 260))))
    t.delete("k < 100 AND k IN (0, 5, 25, 40, 45, 60, 95)")
    t.append(batch(list(range(10, 20))))
    assert t.version == 3
    return path


# -- tests ---------------------------------------------------------------------------------------
def test_register_says_the_server_has_the_connector_and_plans_are_its_own(cspark, table):
    assert indexeddf.register(cspark) == "connector"  # the JVM provider owns indexeddf on the server
    assert indexeddf.register(cspark) == "connector"  # registering again is harmless
    # A key lookup: the server's session extensions answer it on the driver (no Spark job)
    # where the Python planner uses the index: at version 1, and at version 3 too (the
    # delete's commit pruned the index files of the data files it rewrote, so no removed
    # bytes count against indexeddf.hybridScan.maxDeletedRatio).
    for version, indexed in ((1, True), (3, True)):
        lookup = read(cspark, table, versionAsOf=version).where("k = 43").select("s")
        text = plan(lookup)
        assert ("LocalTableScan" in text) is indexed and ("FileScan" in text) is not indexed, (version, text)
        assert ("index: none" in IndexedTable.for_path(table, version=version).explain("k = 43")) is not indexed
        assert [r.s for r in lookup.collect()] == ["s4"]
    df = read(cspark, table)
    # Anything else: Spark's Parquet scan of the version's files, pruned and pushed down.
    scan = df.where("x > 60.0").select("s")
    text = plan(scan)
    assert "FileScan parquet" in text and "SnapshotFileIndex" in text, text
    assert "ReadSchema: struct<s:string,x:double>" in text and "GreaterThan(x,60.0)" in text, text  # 2 of 4 columns
    newest = IndexedTable.for_path(table).to_arrow()
    assert rows(scan.toArrow()) == rows(duck("SELECT s FROM e WHERE x > 60.0", e=newest))
    # With the lookups switched off, a key equality reads one bucket of four.
    confs = {"spark.indexeddf.driverLookup.enabled": "false", "spark.indexeddf.lookupTasks.enabled": "false",
             "spark.sql.sources.bucketing.autoBucketedScan.enabled": "false"}
    for key, value in confs.items():
        cspark.conf.set(key, value)
    try:
        text = plan(df.where("k = 43"))
        assert "SelectedBucketsCount: 1 out of 4" in text and "EqualTo(k,43)" in text, text
        assert [r.s for r in df.where("k = 43").collect()] == ["s4"]
    finally:
        for key in confs:
            cspark.conf.unset(key)


FILTERS = [
    "k = {n}",
    "k IN ({n}, {m}, 15, 999)",
    "k >= {n} AND k < {m}",
    "x > {n} / 4.0 AND x <= {m} / 4.0",
    "day BETWEEN DATE '2026-01-05' AND DATE '2026-01-{d:02d}'",
    "s = 's{small}'",
    "s IS NULL",
    "k = {n} OR s = 's3'",
]


def test_one_reused_dataframe_per_version_answers_as_to_arrow(cspark, table):
    assert indexeddf.register(cspark) == "connector"
    rnd = random.Random(13)
    versions = [0, 1, 2, 3]
    rnd.shuffle(versions)
    for v in versions:
        expected = IndexedTable.for_path(table, version=v).to_arrow()
        df = read(cspark, table, versionAsOf=v)  # ONE DataFrame, queried many ways in turn
        assert df.schema.names == SCHEMA.names
        for template in rnd.sample(FILTERS, 4):
            n, m = sorted(rnd.sample(range(0, 270), 2))
            where = template.format(n=n, m=m, small=rnd.randrange(13), d=rnd.randrange(6, 29))
            got = df.where(where).toArrow()
            want = duck(f"SELECT * FROM e WHERE {where}", e=expected)
            assert rows(got, SCHEMA.names) == rows(want, SCHEMA.names), (v, where)
            assert df.count() == expected.num_rows, (v, "a full count after a filtered query")
    newest = IndexedTable.for_path(table).to_arrow()
    assert rows(read(cspark, table).toArrow()) == rows(newest)
    got = cspark.sql(f"SELECT k, s FROM indexeddf.`{table}` WHERE k BETWEEN 5 AND 60").toArrow()
    assert rows(got) == rows(duck("SELECT k, s FROM e WHERE k BETWEEN 5 AND 60", e=newest))
    # Time travel by timestamp: the newest version committed at or before the instant.
    stamp = {h.version: h.timestamp for h in IndexedTable.for_path(table).history()}[1]
    assert read(cspark, table, timestampAsOf=stamp.isoformat()).count() == 260


def test_lookups_through_spark_and_through_python_agree(cspark, table):
    assert indexeddf.register(cspark) == "connector"
    t = IndexedTable.for_path(table)
    newest = t.to_arrow()
    df = read(cspark, table)
    for keys in ([42], [15, 15, 999], [0, 5, 10, 11, 259, 260], list(range(0, 300, 7))):
        want = rows(duck(f"SELECT * FROM e WHERE k IN ({', '.join(map(str, keys))})", e=newest))
        where = f"k = {keys[0]}" if len(keys) == 1 else f"k IN ({', '.join(map(str, keys))})"
        assert rows(df.where(where).toArrow()) == want, keys
        assert rows(t.lookup(keys)) == want, keys  # Python: no Spark
        assert rows(cspark.createDataFrame(t.lookup(keys)).toArrow()) == want, keys  # handed to the server
    assert rows(IndexedTable.for_path(table, version=1).lookup([10])) == rows(batch([10]))
    assert rows(read(cspark, table, versionAsOf=1).where("k = 10").toArrow()) == rows(batch([10]))


def test_joins_match_duckdb_and_shuffle_only_the_probe(cspark, table, tmp_path):
    assert indexeddf.register(cspark) == "connector"
    t = IndexedTable.for_path(table)
    newest = t.to_arrow()
    keys = list(range(0, 300, 3)) + [15, 15, 999]  # some missing, some twice, some with two table rows
    probe_arrow = pa.table({"k": pa.array(keys, pa.int64()), "p": pa.array(range(len(keys)), pa.int64())})
    probe = cspark.createDataFrame(probe_arrow)
    cspark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
    try:
        plain = read(cspark, table).join(probe, "k")
        text = plan(plain)
        assert text.count("Exchange hashpartitioning") == 1 and "Bucketed: true" in text, text  # the probe only
        want = duck("SELECT p.k, e.s, e.x, e.day, p.p FROM p JOIN e USING (k)", p=probe_arrow, e=newest)
        assert rows(plain.toArrow(), ["k", "s", "x", "day", "p"]) == rows(want, ["k", "s", "x", "day", "p"])
        # to_df, bucketed=True or not: the server's connector reads the version, bucketed, with no warning.
        for flag in (True, False):
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                bucketed = t.to_df(cspark, version=2, bucketed=flag)
            text = plan(bucketed.join(probe, "k"))
            assert "Bucketed: true" in text and text.count("Exchange hashpartitioning") == 1, text
            assert rows(bucketed.toArrow()) == rows(IndexedTable.for_path(table, version=2).to_arrow())
    finally:
        cspark.conf.unset("spark.sql.autoBroadcastJoinThreshold")
    sql = {"inner": "SELECT p.k, p.p, e.s, e.x, e.day FROM p JOIN e USING (k)",
           "left": "SELECT p.k, p.p, e.s, e.x, e.day FROM p LEFT JOIN e USING (k)",
           "semi": "SELECT p.k, p.p FROM p SEMI JOIN e USING (k)"}
    for how, strategy in (("inner", "auto"), ("inner", "shuffle"), ("inner", "broadcast"), ("left", "shuffle"),
                          ("semi", "broadcast")):
        got = t.join(probe, on="k", how=how, strategy=strategy).toArrow()
        want = duck(sql[how], p=probe_arrow, e=newest)
        assert rows(got, want.column_names) == rows(want), (how, strategy)
    # Under Connect there is no plan statistics (no _jdf): auto decides by the distinct keys alone.
    assert "strategy: broadcast" in t.explain_join(probe, on="k")
    other_path = str(tmp_path / "other")
    other = IndexedTable.create(other_path, cspark.createDataFrame(probe_arrow), index_columns=["k"], num_buckets=4)
    got = t.join_table(other, on="k", spark=cspark).toArrow()
    want = duck("SELECT o.k, o.p, e.s, e.x, e.day FROM o JOIN e USING (k)", o=other.to_arrow(), e=newest)
    assert rows(got, want.column_names) == rows(want)


def test_writes_in_every_save_mode_and_a_stream(cspark, tmp_path):
    assert indexeddf.register(cspark) == "connector"
    path = str(tmp_path / "w")
    first = cspark.range(5).selectExpr("id as k", "'a' as s")

    def ids(p=path):
        return sorted(IndexedTable.for_path(p).to_arrow()["k"].to_pylist())

    first.write.format("indexeddf").option("indexColumns", "k").option("numBuckets", 2).save(path)  # default: error
    assert ids() == list(range(5)) and IndexedTable.for_path(path).num_buckets == 2
    with pytest.raises(Exception, match="TableExistsError: a table already exists"):
        first.write.format("indexeddf").save(path)
    with pytest.raises(Exception, match="TableExistsError"):
        first.write.format("indexeddf").mode("error").save(path)
    # pyspark's Connect client knows only append / overwrite / error / ignore (classic also takes errorifexists).
    with pytest.raises(Exception, match="UNSUPPORTED_OPERATION.*errorifexists"):
        first.write.format("indexeddf").mode("errorifexists").save(path)
    with pytest.raises(Exception, match="TableExistsError"):
        first.write.format("indexeddf").mode("append").option("saveMode", "errorifexists").save(path)
    first.write.format("indexeddf").mode("ignore").save(path)
    assert IndexedTable.for_path(path).version == 0
    cspark.range(5, 8).selectExpr("id as k", "'b' as s").write.format("indexeddf").mode("append").save(path)
    assert ids() == list(range(8))
    cspark.range(100, 102).selectExpr("id as k", "'c' as s").write.format("indexeddf").mode("overwrite").save(path)
    assert ids() == [100, 101] and IndexedTable.for_path(path).version == 2
    assert sorted(r.k for r in read(cspark, path).collect()) == [100, 101]
    fresh = str(tmp_path / "ignored-new")
    first.write.format("indexeddf").option("indexColumns", "k").mode("ignore").save(fresh)
    assert ids(fresh) == list(range(5))  # ignore creates a missing table
    # SQL from a Connect client: a catalog table, inserts as commits, each query the newest version.
    cspark.sql(f"CREATE TABLE connect_events USING indexeddf LOCATION '{path}'")
    try:
        cspark.sql("INSERT INTO connect_events VALUES (102, 'd')")
        assert sorted(r.k for r in cspark.sql("SELECT k FROM connect_events").collect()) == [100, 101, 102] == ids()
        cspark.sql("INSERT OVERWRITE connect_events VALUES (103, 'e')")
        assert [r.k for r in cspark.sql("SELECT k FROM connect_events").collect()] == [103] == ids()
        assert IndexedTable.for_path(path).version == 4  # two commits, the log kept
    finally:
        cspark.sql("DROP TABLE connect_events")

    # IndexedTable with Connect DataFrames: versions back, typed errors.
    t = IndexedTable.create(str(tmp_path / "api"), cspark.range(20).selectExpr("id as k", "id * 2 as v"),
                            index_columns=["k"], num_buckets=2)
    assert t.version == 0 and t.lookup([7])["v"].to_pylist() == [14]
    assert t.append(cspark.range(20, 25).selectExpr("id as k", "id * 2 as v")) == 1
    with pytest.raises(SchemaMismatchError):
        t.append(cspark.range(3).selectExpr("id as k", "'x' as v"))
    assert IndexedTable.for_path(t.path).to_arrow().num_rows == 25

    # A stream (the connector's sink passes each micro-batch to the Python writer).
    src = tmp_path / "src"
    src.mkdir()
    pq.write_table(pa.table({"k": pa.array([1, 2, 3], pa.int64()), "s": ["a", "b", "c"]}), src / "p0.parquet")
    pq.write_table(pa.table({"k": pa.array([4], pa.int64()), "s": ["d"]}), src / "p1.parquet")
    target = str(tmp_path / "stream")
    q = (cspark.readStream.schema("k long, s string").option("maxFilesPerTrigger", 1).parquet(str(src))
         .writeStream.format("indexeddf").option("checkpointLocation", str(tmp_path / "ck"))
         .option("txnAppId", "connect").option("indexColumns", "k").trigger(availableNow=True).start(target))
    assert q.awaitTermination(180) is not False and q.exception() is None
    assert ids(target) == [1, 2, 3, 4]
    history = IndexedTable.for_path(target).history()
    assert sorted(h.parameters.get("txnVersion") for h in history) == [0, 1], [h.parameters for h in history]


def test_the_classic_session_still_works_after_the_connect_tests(spark, table):
    from pyspark.sql import functions as F
    from pyspark.sql.utils import is_remote

    assert not is_remote() and not is_connect(spark)
    assert indexeddf.register(spark) == "connector"
    got = read(spark, table).where(F.col("k") == 42).toArrow()
    assert rows(got) == rows(batch([42]))
