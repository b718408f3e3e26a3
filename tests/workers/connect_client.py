"""A Spark Connect client, in its own process (a Connect session switches pyspark in
its process to Connect mode for good): reads, writes, looks up and joins a table
through the server at URL, asserting every answer. Usage: python connect_client.py URL DIR"""

import sys
import warnings

import pyarrow as pa
from pyspark.sql import SparkSession

import indexeddf
from indexeddf import IndexedTable


def main(url: str, folder: str) -> None:
    spark = SparkSession.builder.remote(url).create()
    assert type(spark).__module__.startswith("pyspark.sql.connect")
    path = f"{folder}/t"
    t = IndexedTable.create(path, pa.table({"k": pa.array(range(100), pa.int64()), "v": pa.array(range(100), pa.int64())}),
                            index_columns=["k"], num_buckets=4)
    indexeddf.register(spark)
    df = spark.read.format("indexeddf").load(path)
    assert df.count() == 100 and [tuple(r) for r in df.where("k = 5").collect()] == [(5, 5)]
    assert df.agg({"v": "sum"}).collect()[0][0] == sum(range(100))  # the reused DataFrame stays right
    old = spark.read.format("indexeddf").option("versionAsOf", 0).load(path)

    spark.range(5).selectExpr("id + 1000 as k", "id as v").write.format("indexeddf").mode("append").save(path)
    assert IndexedTable.for_path(path).to_arrow().num_rows == 105 and old.count() == 100
    t.update()
    assert t.to_df(spark).count() == 105
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert t.to_df(spark, bucketed=True).count() == 105  # no JVM here: a plain scan, said so
    assert any("unbucketed" in str(w.message) for w in caught)

    probe = spark.range(40).selectExpr("id * 3 as k")
    want = sorted(r.k for r in probe.join(t.to_df(spark), "k").collect())
    for strategy in ("auto", "shuffle", "broadcast"):
        assert sorted(r.k for r in t.join(probe, on="k", strategy=strategy).collect()) == want, strategy
    assert spark.createDataFrame(t.lookup([1, 2, 1001]).to_pandas()).count() == 3

    created = IndexedTable.create(f"{folder}/from_connect", spark.range(20).selectExpr("id as k", "id * 2 as v"),
                                  index_columns=["k"], num_buckets=2)
    assert created.lookup([7])["v"].to_pylist() == [14]
    spark.stop()
    print("connect client: all checks passed")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
