"""Helpers the tests of the JVM connector share (a plain module beside the tests, not a test file)."""

from __future__ import annotations

import pyarrow as pa


def read(spark, path, **options):
    """``spark.read.format("indexeddf")`` with ``options``, loaded from ``path`` (classic or Connect session)."""
    reader = spark.read.format("indexeddf")
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load(str(path))


def physical(df) -> str:
    """The physical plan Spark executes for ``df`` (a classic DataFrame)."""
    return df._jdf.queryExecution().executedPlan().toString()


def _jvm_static(spark, cls: str, method: str):
    """Calls a package-private static method of the connector (``io.indexeddf.spark.<cls>``, "for
    tests and benchmarks") through Java reflection."""
    jvm, gateway = spark._jvm, spark.sparkContext._gateway
    loader = jvm.org.apache.spark.util.Utils.getContextOrSparkClassLoader()
    klass = jvm.java.lang.Class.forName(f"io.indexeddf.spark.{cls}", True, loader)
    m = klass.getDeclaredMethod(method, gateway.new_array(jvm.java.lang.Class, 0))
    m.setAccessible(True)
    return m.invoke(None, gateway.new_array(jvm.java.lang.Object, 0))


def jvm_cache_stats(spark, cls: str) -> list[int]:
    """The connector's own counters of a JVM cache (``<cls>.cacheStats()``)."""
    return [int(x) for x in _jvm_static(spark, cls, "cacheStats")]


def jvm_cache_clear(spark, cls: str) -> None:
    """Empties a JVM cache of the connector (``<cls>.clear()``)."""
    _jvm_static(spark, cls, "clear")


SCHEMA = pa.schema([("k", pa.int64()), ("s", pa.string()), ("v", pa.float64())])
"""The small tables of the lookup and join tests: an index key, a string (another index), a value."""


def rows_of(keys, tag="a") -> pa.Table:
    """Rows of ``keys`` (None: a null key) in :data:`SCHEMA`: s is null for multiples of 5,
    else ``tag`` and k mod 7; v counts the rows."""
    return pa.table({
        "k": pa.array(keys, pa.int64()),
        "s": [None if k is None or k % 5 == 0 else f"{tag}{k % 7}" for k in keys],
        "v": [float(i) for i in range(len(keys))],
    }, schema=SCHEMA)
