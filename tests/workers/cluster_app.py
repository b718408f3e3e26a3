"""One Spark application on the standalone cluster, shared by the tests that need executors
in their own JVMs (``standalone_cluster.py``'s ``cluster_app`` fixture): starting an
application and its executors costs several seconds, so the run starts it once.

Usage: python cluster_app.py MASTER_URL
Reads one JSON command a line from stdin and answers on stdout. Each command may carry
``conf`` (session settings, set before it runs). Commands:

- ``{"cmd": "lookup", "path": P, "wheres": [...]}``: loads the table once, runs each WHERE
  condition on that one DataFrame twice (warm caches the second time) through the JVM
  connector, with the driver's index segment cache emptied first; prints
  ``lookup {"answers", "lineage", "driver_segments"}``.
- ``{"cmd": "write", "path": P, "rows": N, "parts": N, "pause": S, "started": D}``: prints
  ``running``, then creates the table from ``id`` 0..N-1 and ``g = id % 7`` in N parts, each
  part sleeping S seconds in a Python task first (slow enough to kill an executor mid-write);
  with ``started``, each task attempt first creates a file in folder D (named by its pid), so
  a test can kill an executor once a task is inside its sleep rather than after a guessed
  delay; prints ``done <version>`` or ``failed <error>``.
- ``{"cmd": "sql", "statement": S, "src": [start, end, step]}``: the temporary view ``src``
  holds ``k`` in range(start, end, step) and ``v = k * 10 + 1``; prints ``running``, runs
  the statement and prints ``done <result row as JSON>`` or ``failed <error>``.
- ``{"cmd": "maintain", "path": P, "op": "create_index" | "optimize"}``: prints ``running``,
  then runs ``create_index("by_s", ["s"], spark=)`` or ``optimize(mode="full", spark=)`` on
  the table as Spark jobs of this application and prints ``done <version>`` or
  ``failed <error>``.
- ``{"cmd": "quit"}``.
"""

import json
import os
import sys
import time

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def lookup(spark, cmd: dict) -> str:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
    from connector_helpers import jvm_cache_clear, jvm_cache_stats

    jvm_cache_clear(spark, "IndexSegments")  # what the driver reads from here on is the lookups'
    df = spark.read.format("indexeddf").load(cmd["path"])
    answers = {}
    for where in cmd["wheres"] + cmd["wheres"]:
        answers[where] = [[r.k, r.s, r.v] for r in df.where(where).collect()]
    lineage = df.where(cmd["wheres"][0])._jdf.queryExecution().executedPlan().execute().toDebugString()
    return "lookup " + json.dumps({"answers": answers, "lineage": lineage,
                                   "driver_segments": jvm_cache_stats(spark, "IndexSegments")})


def write(spark, cmd: dict) -> str:
    from indexeddf import IndexedTable

    pause, started = float(cmd["pause"]), cmd.get("started")

    def slow(batches):
        if started:  # the test waits on this file, then kills an executor mid-task
            open(os.path.join(started, f"{os.getpid()}-{time.monotonic_ns()}"), "w").close()
        time.sleep(pause)
        yield from batches

    df = spark.range(0, cmd["rows"], numPartitions=cmd["parts"]).selectExpr("id", "id % 7 AS g") \
        .mapInArrow(slow, "id long, g long")
    t = IndexedTable.create(cmd["path"], df, index_columns=["id"], num_buckets=4)
    return f"done {t.version}"


def sql(spark, cmd: dict) -> str:
    start, end, step = cmd["src"]
    spark.range(start, end, step, numPartitions=2).selectExpr("id AS k", "id * 10 + 1 AS v") \
        .createOrReplaceTempView("src")
    row = spark.sql(cmd["statement"]).collect()[0].asDict()
    return f"done {json.dumps(row)}"


def maintain(spark, cmd: dict) -> str:
    from indexeddf import IndexedTable

    t = IndexedTable.for_path(cmd["path"], spark=spark)
    if cmd["op"] == "create_index":
        t.create_index("by_s", ["s"], spark=spark)
    else:
        t.optimize(mode="full", spark=spark)
    return f"done {IndexedTable.for_path(cmd['path']).version}"


def main() -> None:
    from pyspark.sql import SparkSession

    import indexeddf

    spark = indexeddf.configure(SparkSession.builder.master(sys.argv[1]).appName("indexeddf-cluster-tests")
             .config("spark.ui.enabled", "false").config("spark.executor.memory", "512m")
             .config("spark.executor.cores", "1").config("spark.driver.memory", "1g")
             .config("spark.default.parallelism", "2").config("spark.task.maxFailures", "4")
             ).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    assert indexeddf.register(spark) == "connector"
    print("ready", flush=True)
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["cmd"] == "quit":
            break
        for key, value in cmd.get("conf", {}).items():
            spark.conf.set(key, value)
        if cmd["cmd"] != "lookup":
            print("running", flush=True)
        try:
            out = {"lookup": lookup, "write": write, "sql": sql, "maintain": maintain}[cmd["cmd"]](spark, cmd)
        except Exception as e:  # the command failed as a whole: the test checks what was committed
            out = f"failed {type(e).__name__}: {str(e)[:500]!r}"
        for key in cmd.get("conf", {}):
            spark.conf.unset(key)
        print(out, flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
