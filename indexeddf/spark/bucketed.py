"""Bucketed native scans: Spark's own Parquet reader, told how the table is bucketed.

On a session without the JVM connector (the connector's read tells Spark the bucketing
itself, :func:`indexeddf.spark.native.native_scan`), ``IndexedTable.to_df(spark,
bucketed=True)`` and the ``spark`` join strategy hand Spark a snapshot's live files as a
*bucketed* relation: a ``HadoopFsRelation`` with a
``BucketSpec`` on the table's index columns and bucket count. A table's bucket is
exactly Spark's ``pmod(hash(index columns), numBuckets)`` (PROTOCOL.md section 10), the
bucket ``bucketBy`` would give the row, so Spark treats the snapshot as it treats a
table written with ``bucketBy``: a join or aggregation on the index columns reads
bucket i in task i and shuffles only the other side. Spark reads a file's bucket from
the ``_NNNNN`` suffix of its name, which writers add (PROTOCOL.md 2.2).

PySpark has no Python API for such a relation, so it is built through the JVM (py4j:
``InMemoryFileIndex``, ``HadoopFsRelation``, ``SparkSession.baseRelationToDataFrame``).
Where that cannot be done (Spark Connect, files named without the suffix by earlier
writers, floating-point index columns) :func:`bucketed_scan_reason` says why and
callers read the files unbucketed instead.
"""

from __future__ import annotations

from ..format.snapshot import Snapshot
from ..spec.actions import named_with_bucket
from ..spec.column_mapping import is_mapped
from ..spec.schema import arrow_type


def bucketed_scan_reason(snapshot: Snapshot, connector: bool = False) -> str | None:
    """Why Spark cannot be given ``snapshot`` as a bucketed relation; None when it can.

    ``connector``: for the JVM connector's read of the version (``TableRelation.bucketSpec``),
    which applies deletion vectors and column mapping itself, so neither stops its
    bucketing; the other reasons are the same."""
    meta = snapshot.metadata
    types = {f.name: arrow_type(f.type) for f in meta.schema_}
    floating = [c for c in meta.indexColumns if str(types[c]) in ("float", "double", "halffloat")]
    if floating:
        # Spark normalises -0.0 and NaN in join keys; a file's bucket hashes the raw value.
        return f"index column(s) {floating} are floating point"
    if not connector and is_mapped(meta.configuration):
        return ("the table maps its column names (delta.columnMapping.mode); Spark's Parquet reader would look "
                "for the logical names in its files")
    with_dv = [] if connector else [a.path for a in snapshot.live_files() if a.deletionVector is not None]
    if with_dv:
        return (f"{len(with_dv)} live file(s) have deletion vectors (e.g. {with_dv[0]}), whose rows Spark's "
                "Parquet reader would return; optimize() rewrites them without the deleted rows")
    foreign = [a.path for a in snapshot.live_files() if a.bucket is None]
    if foreign:
        return (f"{len(foreign)} live file(s) have no bucket (added by another Delta writer, e.g. {foreign[0]}); "
                "optimize(mode='full') rewrites them into buckets")
    unnamed = [a.path for a in snapshot.live_files() if not named_with_bucket(a.path, a.bucket)]
    if unnamed:
        return (f"{len(unnamed)} live file(s) are named without their bucket (written before the _NNNNN "
                f"suffix, e.g. {unnamed[0]}); optimize(mode='full') rewrites them")
    return None


def bucketed_relation_df(spark, snapshot: Snapshot, paths: list[str], schema):
    """A DataFrame over ``paths`` (Hadoop locations of the snapshot's live files, not
    glob-escaped) that Spark knows to be bucketed like the table. Raises when the JVM
    objects cannot be built (e.g. Spark Connect has no JVM)."""
    from pyspark.sql import DataFrame

    jvm, jspark = spark._jvm, spark._jsparkSession
    ds = jvm.org.apache.spark.sql.execution.datasources
    meta = snapshot.metadata

    def seq(items):
        lst = jvm.java.util.ArrayList()
        for item in items:
            lst.add(item)
        return jvm.scala.jdk.javaapi.CollectionConverters.asScala(lst).toSeq()

    jschema = jvm.org.apache.spark.sql.types.DataType.fromJson(schema.json())
    no_options = jvm.scala.collection.immutable.HashMap()
    files = ds.InMemoryFileIndex(
        jspark, seq(jvm.org.apache.hadoop.fs.Path(p) for p in paths), no_options, jvm.scala.Some(jschema),
        getattr(getattr(ds, "NoopCache$"), "MODULE$"), jvm.scala.Option.empty(), jvm.scala.Option.empty(),
    )
    spec = jvm.org.apache.spark.sql.catalyst.catalog.BucketSpec(meta.numBuckets, seq(meta.indexColumns), seq([]))
    relation = ds.HadoopFsRelation(
        files, jvm.org.apache.spark.sql.types.StructType(), jschema, jvm.scala.Some(spec),
        ds.parquet.ParquetFileFormat(), no_options, jspark,
    )
    return DataFrame(jspark.baseRelationToDataFrame(relation), spark)
