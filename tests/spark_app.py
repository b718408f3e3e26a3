"""A separate Spark application for the multi-process tests (its own JVM, local[1]).

    python tests/spark_app.py append <table> <app> <times> <rows>
        Append ``times`` batches of ``rows`` rows through df.write.format("indexeddf");
        row ids are unique per (app, batch, row).
    python tests/spark_app.py stream <source dir> <table> <checkpoint> <app id>
        Run the JSON files in <source dir> (one per micro-batch) into the table with
        writeStream.format("indexeddf") and trigger(availableNow=True).
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def session():
    import indexeddf

    spark = indexeddf.local_session("indexeddf-test-app", cores=1, driver_memory="1g", shuffle_partitions=2)
    return spark


def append(table: str, app: str, times: int, rows: int) -> None:
    spark = session()
    app_no = int(app)
    for batch in range(times):
        base = (app_no * 1000 + batch) * 1000
        df = spark.range(base, base + rows).selectExpr("id", f"'{app}-{batch}' as tag")
        df.write.format("indexeddf").mode("append").save(table)
        print(f"app {app} appended batch {batch}", flush=True)
    spark.stop()


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
        append(args[0], args[1], int(args[2]), int(args[3]))
    elif cmd == "stream":
        stream(*args)
    else:
        raise SystemExit(f"unknown command {cmd!r}")
