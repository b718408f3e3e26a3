"""A Spark application on a standalone cluster that looks many keys up through the JVM
connector, so that its executors (other JVMs than the driver's) probe the index.

Usage: python cluster_lookup.py MASTER_URL TABLE WHERE...
Loads the table once and runs each WHERE condition on that one DataFrame, twice, in order.
Prints one JSON object: the rows of each condition (lists of [k, s, v], in any order), the
RDD lineage of the first condition's plan, and the driver's own index segment cache
(segments, entries, bytes) after all the queries.
"""

import json
import os
import sys

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def main() -> None:
    master, path, wheres = sys.argv[1], sys.argv[2], sys.argv[3:]
    from pyspark.sql import SparkSession

    import indexeddf

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
    from connector_helpers import jvm_cache_stats

    spark = indexeddf.configure(SparkSession.builder.master(master).appName("indexeddf-cluster-lookup")
             .config("spark.ui.enabled", "false").config("spark.executor.memory", "512m")
             .config("spark.executor.cores", "1").config("spark.driver.memory", "1g")
             .config("spark.default.parallelism", "2")
             .config("spark.indexeddf.driverLookup.maxKeys", "1")  # every IN of 2+ keys: tasks
             ).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    assert indexeddf.register(spark) == "connector"
    df = spark.read.format("indexeddf").load(path)
    answers = {}
    for where in wheres + wheres:  # a reused DataFrame, each query twice (warm caches the second time)
        answers[where] = [[r.k, r.s, r.v] for r in df.where(where).collect()]
    lineage = df.where(wheres[0])._jdf.queryExecution().executedPlan().execute().toDebugString()
    print(json.dumps({"answers": answers, "lineage": lineage,
                      "driver_segments": jvm_cache_stats(spark, "IndexSegments")}), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
