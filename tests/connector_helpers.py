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


def lineage(df) -> str:
    """The RDDs the physical plan of ``df`` runs (``toDebugString``): names the connector's own RDDs."""
    return df._jdf.queryExecution().executedPlan().execute().toDebugString()


_DIAGNOSTICS = {("RowCache", "cacheStats"): "rowCacheStats", ("RowCache", "clear"): "clearRowCache",
                ("IndexSegments", "cacheStats"): "segmentCacheStats", ("IndexSegments", "clear"): "clearSegmentCache",
                ("Footers", "cacheStats"): "footerCacheStats", ("Footers", "clear"): "clearFooterCache"}
"""The connector's counters by cache and what is asked of it: the public static methods of
``io.indexeddf.spark.Diagnostics``."""


def _diagnostics(spark, cache: str, what: str):
    """Calls ``io.indexeddf.spark.Diagnostics.<method>()`` for ``what`` of ``cache`` (``"RowCache"``,
    ``"IndexSegments"``), loaded by the session's class loader (where ``spark.jars`` puts the connector)."""
    return jvm_diagnostic(spark, _DIAGNOSTICS[(cache, what)])


def jvm_diagnostic(spark, method: str, *args):
    """``io.indexeddf.spark.Diagnostics.<method>(*args)``: ``args`` are JVM objects (a Python
    DataFrame's ``_jdf`` for a ``Dataset``), whose declared types the method is found by."""
    jvm, gateway = spark._jvm, spark.sparkContext._gateway
    loader = jvm.org.apache.spark.util.Utils.getContextOrSparkClassLoader()
    klass = jvm.java.lang.Class.forName("io.indexeddf.spark.Diagnostics", True, loader)
    types = gateway.new_array(jvm.java.lang.Class, len(args))
    values = gateway.new_array(jvm.java.lang.Object, len(args))
    for i, a in enumerate(args):
        kind = "org.apache.spark.sql.Dataset" if a.getClass().getName().endswith(".Dataset") else a.getClass().getName()
        types[i] = jvm.java.lang.Class.forName(kind, True, loader)
        values[i] = a
    return klass.getMethod(method, types).invoke(None, values)


def jvm_cache_stats(spark, cache: str) -> list[int]:
    """The connector's own counters of a JVM cache (``"RowCache"``: row groups, rows, bytes;
    ``"IndexSegments"``: segments, entries, bytes; ``"Footers"``: Parquet footers, bytes)."""
    return [int(x) for x in _diagnostics(spark, cache, "cacheStats")]


def jvm_cache_clear(spark, cache: str) -> None:
    """Empties a JVM cache of the connector (``"RowCache"``, ``"IndexSegments"``, ``"Footers"``)."""
    _diagnostics(spark, cache, "clear")


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
