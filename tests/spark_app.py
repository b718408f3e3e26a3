"""A separate Spark application for the multi-process tests (its own JVM, local[1]).

    python tests/spark_app.py append <table> <app> <times> <rows> [<other table>]
        Append ``times`` batches of ``rows`` rows through df.write.format("indexeddf");
        row ids are unique per (app, batch, row). With <other table>: then create it with
        ``k`` 0..9, run the SQL statement ``DELETE FROM ... WHERE k < 4`` on it (its rows are
        rewritten by the connector's Python side, in Spark's Python workers) and print
        ``rows left <n>``.

It leaves PYSPARK_PYTHON as the caller's environment has it: run without it, the session
must still start its Python workers with this interpreter (``indexeddf.configure`` sees to
it), as a pipeline run as ``.venv/bin/python job.py`` does.
    python tests/spark_app.py stream <source dir> <table> <checkpoint> <app id>
        Run the JSON files in <source dir> (one per micro-batch) into the table with
        writeStream.format("indexeddf") and trigger(availableNow=True).
"""

from __future__ import annotations

import sys


def session():
    import indexeddf

    spark = indexeddf.local_session("indexeddf-test-app", cores=1, driver_memory="1g", shuffle_partitions=2)
    return spark


def append(table: str, app: str, times: int, rows: int, other: str | None = None) -> None:
    spark = session()
    app_no = int(app)
    for batch in range(times):
        base = (app_no * 1000 + batch) * 1000
        df = spark.range(base, base + rows).selectExpr("id", f"'{app}-{batch}' as tag")
        df.write.format("indexeddf").mode("append").save(table)
        print(f"app {app} appended batch {batch}", flush=True)
    if other is not None:
        delete(spark, other)
    spark.stop()


def delete(spark, path: str) -> None:
    """A SQL DELETE, whose rewrite runs in Spark's Python workers."""
    import pyarrow as pa

    from indexeddf import IndexedTable

    IndexedTable.create(path, pa.table({"k": list(range(10))}), ["k"], num_buckets=2)
    spark.sql(f"DELETE FROM indexeddf.`{path}` WHERE k < 4")
    print(f"rows left {IndexedTable.for_path(path).to_arrow().num_rows}", flush=True)


def stream(source: str, table: str, checkpoint: str, app_id: str) -> None:
    spark = session()
    events = spark.readStream.schema("id long, tag string").option("maxFilesPerTrigger", 1).json(source)
    query = (
        events.writeStream.format("indexeddf")
        .option("checkpointLocation", checkpoint)
        .option("txnAppId", app_id)
        .option("indexColumns", "id")
        .option("numBuckets", 4)
        .trigger(availableNow=True)
        .start(table)
    )
    query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    cmd, *args = sys.argv[1:]
    if cmd == "append":
        append(args[0], args[1], int(args[2]), int(args[3]), *args[4:])
    elif cmd == "stream":
        stream(*args)
    else:
        raise SystemExit(f"unknown command {cmd!r}")
