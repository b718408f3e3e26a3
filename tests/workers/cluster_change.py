"""A Spark application that runs Spark SQL changes (MERGE INTO, DELETE FROM, ...) on an
indexeddf table, one at a time when told, for tests that kill its executors or itself
while a change's tasks write.

Usage: python cluster_change.py MASTER TABLE SRC_START SRC_END SRC_STEP SECONDS STATEMENT...
The temporary view ``src`` holds ``k`` in range(SRC_START, SRC_END, SRC_STEP) and
``v = k * 10 + 1``, each of its partitions sleeping SECONDS first in a Python task (a slow
source; 0: no Python in the source); the
statements name the table as ``{table}``. Before each statement it reads a line from stdin,
then prints "running <i>"; after it "done <i> <result row as JSON>" or "failed <i> <error>".
"""

import json
import os
import sys
import time

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def main() -> None:
    master, path = sys.argv[1], sys.argv[2]
    start, end, step, pause = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
    statements = sys.argv[7:]
    from pyspark.sql import SparkSession

    import indexeddf

    spark = indexeddf.configure(SparkSession.builder.master(master).appName("indexeddf-change-faults")
             .config("spark.ui.enabled", "false").config("spark.executor.memory", "512m")
             .config("spark.executor.cores", "1").config("spark.driver.memory", "1g")
             .config("spark.task.maxFailures", "4").config("spark.sql.shuffle.partitions", "8")
             .config("spark.sql.adaptive.enabled", "false")  # eight write tasks, never coalesced into one
             # Every MERGE through Spark's plan, whose tasks write: a small one would go to the
             # Python engine, which writes in the driver.
             .config("spark.indexeddf.merge.engineMaxSourceBytes", "-1")
             ).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    indexeddf.register(spark)

    def slow(batches):
        time.sleep(pause)
        yield from batches

    src = spark.range(start, end, step, numPartitions=2).selectExpr("id AS k", "id * 10 + 1 AS v")
    (src.mapInArrow(slow, "k long, v long") if pause > 0 else src).createOrReplaceTempView("src")
    table = f"indexeddf.`{path}`"
    for i, statement in enumerate(statements):
        sys.stdin.readline()
        print(f"running {i}", flush=True)
        try:
            row = spark.sql(statement.format(table=table)).collect()[0].asDict()
            print(f"done {i} {json.dumps(row)}", flush=True)
        except Exception as e:  # the statement failed as a whole: the test checks nothing was committed
            print(f"failed {i} {type(e).__name__}: {str(e)[:500]!r}", flush=True)
    sys.stdin.readline()  # the executors stay until the test is done with them (it closes stdin)
    spark.stop()


if __name__ == "__main__":
    main()
