"""A Spark session WITHOUT the JVM connector (no indexeddf.configure), in its own process:
the Python data source is ``indexeddf`` (register says "python" and warns what is lost),
and it reads, time-travels and writes. Usage: python fallback_session.py DIR"""

import sys
import warnings

from pyspark.sql import SparkSession

import indexeddf
from indexeddf import IndexedTable


def main(folder: str) -> None:
    spark = (SparkSession.builder.master("local[1]").appName("indexeddf-fallback")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert indexeddf.register(spark) == "python"
    assert any("no column pruning" in str(w.message) for w in caught), [str(w.message) for w in caught]
    path = f"{folder}/t"
    spark.range(50).selectExpr("id as k", "id % 3 as g").write.format("indexeddf").option("indexColumns", "k") \
        .option("numBuckets", 4).mode("overwrite").save(path)
    spark.range(50, 60).selectExpr("id as k", "id % 3 as g").write.format("indexeddf").mode("append").save(path)
    df = spark.read.format("indexeddf").load(path)
    assert df.count() == 60 and [r.g for r in df.where("k = 7").collect()] == [1]
    assert df.agg({"k": "sum"}).collect()[0][0] == sum(range(60))  # the reused DataFrame stays right
    assert spark.read.format("indexeddf").option("versionAsOf", 0).load(path).count() == 50
    assert spark.read.format("indexeddf_python").load(path).count() == 60  # the same source, by its own name
    try:
        spark.range(3).selectExpr("id as k", "0L as g").write.format("indexeddf").mode("ignore").save(path)
        raise AssertionError("Spark accepted mode('ignore') for a Python data source")
    except Exception as e:  # noqa: BLE001
        assert "UNSUPPORTED_DATA_SOURCE_SAVE_MODE" in str(e), str(e)[:500]
    assert IndexedTable.for_path(path).version == 1
    spark.stop()
    print("fallback: all checks passed")


if __name__ == "__main__":
    main(sys.argv[1])
