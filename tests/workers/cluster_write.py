"""A Spark application on a standalone cluster that writes a table through indexeddf
slowly enough for a test to kill one of its executors mid-write.

Usage: python cluster_write.py MASTER_URL TABLE ROWS PARTITIONS SECONDS_PER_PARTITION
Row ids are 0..ROWS-1; each partition sleeps before it yields its rows. Prints
"writing" when the job starts and "committed <version>" at the end.
"""

import os
import sys
import time

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def main() -> None:
    master, path, rows, parts, pause = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
    from pyspark.sql import SparkSession

    import indexeddf
    from indexeddf import IndexedTable

    spark = indexeddf.configure(SparkSession.builder.master(master).appName("indexeddf-executor-loss")
             .config("spark.ui.enabled", "false").config("spark.executor.memory", "512m")
             .config("spark.executor.cores", "1").config("spark.driver.memory", "1g")
             .config("spark.task.maxFailures", "4").config("spark.sql.shuffle.partitions", "4")
             ).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    indexeddf.register(spark)

    def slow(batches):
        time.sleep(pause)
        yield from batches

    df = spark.range(0, rows, numPartitions=parts).selectExpr("id", "id % 7 AS g").mapInArrow(slow, "id long, g long")
    print("writing", flush=True)
    t = IndexedTable.create(path, df, index_columns=["id"], num_buckets=4)
    print(f"committed {t.version}", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
