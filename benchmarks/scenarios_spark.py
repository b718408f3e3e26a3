"""Scenarios through Spark: appends, full scans, point lookups and IN-lists.

One local Spark session (local[2], built with ``indexeddf.configure``: the JVM connector is
``indexeddf`` and the Python data source, timed here, ``indexeddf_python``; the connector's
own scenarios are in ``scenarios_connector.py``) serves every scenario of a run; its Python workers
get an indexeddf cache bound of 4 GiB (``INDEXEDDF_CACHE_MAX_BYTES``). Baselines are
Spark's own: ``spark.read.parquet`` of exactly the table's files, and the same data
cached in Spark's memory.
"""

from __future__ import annotations

import itertools
import os
import sys
from pathlib import Path

import datasets
from harness import Scenario

from indexeddf import IndexedTable

_SPARK = None
PYTHON_SOURCE = "indexeddf_python"
"""The name of the Python data source in the run's session (set when the session starts)."""
WORKER_CACHE_BYTES = 4 << 30
"""indexeddf cache bound of the run's Python workers (INDEXEDDF_CACHE_MAX_BYTES)."""


def spark():
    """The run's Spark session (started on first use)."""
    global _SPARK
    if _SPARK is None:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        # Each Python worker's indexeddf cache may hold the decoded table (~1.3 GB here),
        # as Spark's cached-DataFrame baseline holds it in the JVM. Workers inherit this.
        os.environ.setdefault("INDEXEDDF_CACHE_MAX_BYTES", str(WORKER_CACHE_BYTES))
        import indexeddf

        # The JVM connector owns format("indexeddf"); the Python data source is
        # then "indexeddf_python", which the scenarios below name when they time it.
        _SPARK = indexeddf.local_session("indexeddf-benchmarks", driver_memory="8g")
        global PYTHON_SOURCE
        PYTHON_SOURCE = "indexeddf_python" if indexeddf.register(_SPARK) == "connector" else "indexeddf"
    return _SPARK


def _parquet_df(path: str):
    """``spark.read.parquet`` of the table's live files (the baseline's input)."""
    t = IndexedTable.for_path(path)
    return spark().read.parquet(*[t.snapshot.storage.full(a.path) for a in t.snapshot.live_files()])


def append_spark(work: Path, args) -> Scenario:
    s = spark()
    path = str(work / "append_spark")
    rows = datasets.chunk(0, 1_000, 1_000_000, seed=3)
    IndexedTable.create(path, rows, index_columns=["user_id"], num_buckets=16)
    df = s.createDataFrame(rows.to_pandas()).repartition(16, "user_id").cache()
    df.count()
    raw = str(work / "append_spark_parquet")
    return Scenario(
        name="append_1k_spark",
        description="append 1,000 rows from a Spark DataFrame (16 buckets), commit included",
        baseline=("df.write.mode('append').parquet(folder)", lambda: df.write.mode("append").parquet(raw)),
        candidates=[("df.write.format('indexeddf').mode('append').save(path)",
                     lambda: df.write.format("indexeddf").mode("append").save(path))],
    )


def _scan(args, agg: str) -> Scenario:
    path = datasets.events(args.rows)
    s = spark()
    t = IndexedTable.for_path(path)
    source = s.read.format(PYTHON_SOURCE).load(path)
    native = t.to_df(s)
    parquet = _parquet_df(path)
    run = {
        "sum": lambda df: df.agg({"amount": "sum"}).collect(),
        "count": lambda df: df.count(),
    }[agg]
    return Scenario(
        name=f"full_scan_{agg}",
        description=f"{'sum(amount)' if agg == 'sum' else 'count(*)'} over all {args.rows:,} rows",
        baseline=("spark.read.parquet(the same files)", lambda: run(parquet)),
        candidates=[
            ("IndexedTable.to_df(spark)", lambda: run(native)),
            (f"spark.read.format('{PYTHON_SOURCE}') (the Python data source)", lambda: run(source)),
        ],
        target="to_df within 1.1x of parquet; the data source within 3x",
    )


def scan_sum(work, args):
    return _scan(args, "sum")


def scan_count(work, args):
    return _scan(args, "count")


def _constant_source(path: str):
    """A DataFrame read through the least a Python data source can do: a source with the
    table's schema, one partition, no filter pushdown (as the indexeddf fallback source),
    and a read that returns one constant row. Its query time is the floor of any Python data source query
    of this shape on this machine (the Python planner round trips and the task), with no
    table, no log and no index involved."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    from indexeddf.spark.types import spark_schema

    s = spark()
    table = IndexedTable.for_path(path)
    row = datasets.chunk(0, 1, 4, seed=1).cast(table.schema).to_batches()[0]
    ddl = spark_schema(table.snapshot.metadata.schema_)

    class ConstantReader(DataSourceReader):
        def partitions(self):
            return [InputPartition(0)]

        def read(self, partition):
            yield row

    class ConstantSource(DataSource):
        @classmethod
        def name(cls):
            return "bench_constant"

        def schema(self):
            return ddl

        def reader(self, schema):
            return ConstantReader()

    s.dataSource.register(ConstantSource)
    return s.read.format("bench_constant").load()


def _lookup_scenario(args, n_keys: int, name: str, target: str) -> Scenario:
    from pyspark.sql import functions as F

    path = datasets.events(args.rows)
    s = spark()
    keys = datasets.some_keys(path, n_keys * 40, seed=11)
    groups = [keys[i : i + n_keys] for i in range(0, len(keys), n_keys)]
    it = {k: itertools.cycle(groups) for k in ("base", "idx", "cached", "empty", "constant")}
    source = s.read.format(PYTHON_SOURCE).load(path)
    parquet = _parquet_df(path)
    cached = _parquet_df(path).cache()
    cached.count()
    empty = s.read.format(PYTHON_SOURCE).load(datasets.events_empty())
    constant = _constant_source(path)

    def q(df, group):
        return df.where(F.col("user_id").isin(group)).collect()

    table = IndexedTable.for_path(path)
    it["lookup"], it["to_spark"] = itertools.cycle(groups), itertools.cycle(groups)

    def via_lookup(group):
        return s.createDataFrame(table.lookup(group).to_pandas()).collect()

    candidates = [
        (f"spark.read.format('{PYTHON_SOURCE}') (Python data source: a filtered scan)",
         lambda: q(source, next(it["idx"]))),
        ("spark.createDataFrame(t.lookup(keys)).collect()", lambda: via_lookup(next(it["to_spark"]))),
        ("t.lookup(keys), no Spark", lambda: table.lookup(next(it["lookup"]))),
        ("the same query on an empty indexeddf table", lambda: q(empty, next(it["empty"]))),
        ("the same query on a DataFrame cached in Spark memory", lambda: q(cached, next(it["cached"]))),
        ("the same query on a do-nothing Python data source (floor)", lambda: q(constant, next(it["constant"]))),
    ]
    return Scenario(
        name=name,
        description=f"where(user_id IN {n_keys} key(s)).collect() over {args.rows:,} rows",
        baseline=("spark.read.parquet(the same files)", lambda: q(parquet, next(it["base"]))),
        candidates=candidates,
        target=target,
        notes=["The Python data source plans no filter (Spark 4.3 shares one read plan among the scans of "
               "a DataFrame; docs/spark.md): its query is a scan of every file with Spark's filter. Index "
               "lookups from Spark come with the JVM connector; lookup() is the index today.",
               "The do-nothing source has the table's schema, no filter pushdown and returns one constant "
               "row from one partition: what any Python data source query of this shape costs here before "
               "it reads anything (Spark's planner round trips to Python and one Python task)."],
    )


def point_lookup(work, args):
    return _lookup_scenario(args, 1, "point_lookup_spark",
                            "none for the Python data source; the goals for format('indexeddf') are "
                            "timed by connector_point_lookup (scenarios_connector.py)")


def in_list_lookup(work, args):
    return _lookup_scenario(args, 100, "in_list_100_spark", "none for the Python data source; the goal is timed by "
                            "connector_in_list_100 (scenarios_connector.py)")


SCENARIOS = {
    "append_1k_spark": append_spark,
    "full_scan_sum": scan_sum,
    "full_scan_count": scan_count,
    "point_lookup_spark": point_lookup,
    "in_list_100_spark": in_list_lookup,
}
