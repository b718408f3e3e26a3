"""Spark's own Parquet reader over a snapshot's exact files (``IndexedTable.to_df``).

- :func:`native_scan`: the snapshot's live files read by Spark's Parquet reader (column
  pruning, predicate pushdown), bucketed where Spark can be told (:mod:`.bucketed`).
- :func:`hadoop_path`: where Spark's Hadoop filesystems find a file of the table.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

from py4j.protocol import Py4JError

from ..errors import InvalidOptionError
from ..format.snapshot import Snapshot
from ..format.storage import TableStorage
from ..spec.column_mapping import is_mapped
from ..spec.schema import check_columns
from .types import spark_schema

JVM_UNAVAILABLE = (AttributeError, NotImplementedError, Py4JError)
"""What building Spark objects through py4j raises where it cannot be done: no JVM
(Spark Connect: no ``_jvm``) or a JVM whose classes changed (another pyspark)."""

# -- native scans (IndexedTable.to_df) -----------------------------------------------------
_HADOOP_SCHEMES = {"s3": "s3a", "s3a": "s3a", "gs": "gs", "gcs": "gs", "hdfs": "hdfs", "abfs": "abfs", "abfss": "abfss"}
_GLOB_CHARS = "\\*?[]{}"


def _escape_glob(path: str) -> str:
    # Spark expands glob patterns in the paths it is given; a file name is never one.
    return "".join("\\" + ch if ch in _GLOB_CHARS else ch for ch in path)


def hadoop_path(storage: TableStorage, rel: str, glob_escaped: bool = True) -> str:
    """A location Spark's (Hadoop) file readers open for a file of the table.

    Local tables give ``file://`` URIs. A remote table keeps its URL with the scheme
    Hadoop uses for that store (``s3://`` is read as ``s3a://``); stores Hadoop has no
    filesystem for (``memory://``, ``http://``, ...) raise ``InvalidOptionError``.
    ``glob_escaped``: escape glob characters (``spark.read`` expands globs in the paths
    it is given; a file index built directly does not).
    """
    esc = _escape_glob if glob_escaped else (lambda p: p)
    if storage.is_local:
        return "file://" + esc(storage.full(rel))
    scheme, sep, rest = storage.url.partition("://")
    mapped = _HADOOP_SCHEMES.get(scheme.lower()) if sep else None
    if mapped is None:
        raise InvalidOptionError(
            f"a native Spark scan needs a location Spark's Hadoop filesystems can read; {storage.url} "
            f"is not one (memory:// lives only in this Python process). Use "
            "spark.read.format('indexeddf').load(path) or to_arrow() instead, or keep the table on a "
            "local disk, HDFS, S3, GCS or Azure storage."
        )
    return f"{mapped}://{esc(rest.rstrip('/'))}/{esc(rel)}"


def native_scan(spark, snapshot: Snapshot, columns: Sequence[str] | None = None, bucketed: bool = False):
    """A Spark DataFrame over exactly the snapshot's live files (Spark's Parquet reader).

    ``bucketed``: tell Spark how the files are bucketed (:mod:`.bucketed`), where
    possible (``bucketed_scan_reason`` says why not); otherwise, or when False, a plain
    scan. A JVM that cannot build the bucketed relation gives a plain scan and a warning.
    A snapshot whose files have deletion vectors, or of a partitioned or column-mapped
    table, is read by the JVM connector (or, without it or in ``id`` mode, the Python data
    source) instead: they drop the rows a deletion vector deletes, take the partition
    columns from the log and read the files' physical column names, which Spark's Parquet
    reader over the bare files cannot (it would read a mapped table's columns as NULL).
    A Spark Connect client has no JVM: it reads the version through the server's JVM
    connector instead (``format("indexeddf")`` with ``versionAsOf``, which reports the same
    bucketing), or, when the server has no connector, plainly with a warning.
    """
    from .bucketed import bucketed_relation_df, bucketed_scan_reason
    from .session import is_connect

    schema = spark_schema(snapshot.metadata.schema_)
    check_columns(schema.names, columns)
    files = snapshot.live_files()
    df = None
    if files and (any(a.deletionVector is not None for a in files) or snapshot.metadata.partitionColumns
                  or is_mapped(snapshot.metadata.configuration)):
        # Spark's Parquet reader cannot drop the rows a deletion vector deletes, nor know a
        # file's partition values (the log has them, not the files), nor find a column-mapped
        # table's physical names: the connector, or the Python source, reads them.
        df = _version_scan(spark, snapshot)
    elif bucketed and files and bucketed_scan_reason(snapshot) is None:
        paths = [hadoop_path(snapshot.storage, a.path, glob_escaped=False) for a in files]
        if is_connect(spark):
            df = _connector_scan(spark, snapshot)
        else:
            try:
                df = bucketed_relation_df(spark, snapshot, paths, schema)
            except JVM_UNAVAILABLE as exc:  # a plain scan is as right; anything else is a bug and raises
                warnings.warn(f"indexeddf: reading {snapshot.storage.url} unbucketed: Spark's JVM did not build a "
                              f"bucketed relation ({type(exc).__name__}: {str(exc)[:200]})", stacklevel=2)
    if df is None and not files:
        df = spark.createDataFrame([], schema)
    elif df is None:
        paths = [hadoop_path(snapshot.storage, a.path) for a in files]
        df = spark.read.schema(schema).parquet(*paths)
    return df if columns is None else df.select(*columns)


def _version_scan(spark, snapshot: Snapshot):
    """The snapshot's version through the JVM connector (deletion vectors applied in its
    Parquet reads, partition columns from the log, partition and bucket pruning, a
    column-mapped table's physical names or field ids), else through the Python data
    source."""
    from .session import CONNECTOR, register_quietly

    if register_quietly(spark) == CONNECTOR and not snapshot.storage.storage_options:
        return spark.read.format("indexeddf").option("versionAsOf", snapshot.version).load(
            hadoop_path(snapshot.storage, "", glob_escaped=False).rstrip("/"))
    return _python_source_scan(spark, snapshot)


def _python_source_scan(spark, snapshot: Snapshot):
    """The snapshot's version read by the Python data source (``indexeddf_python``), which
    applies deletion vectors: the plain and bucketed native scans would return the rows
    they delete."""
    import json

    from .session import PYTHON_NAME, register_quietly

    register_quietly(spark)
    reader = spark.read.format(PYTHON_NAME).option("versionAsOf", snapshot.version)
    if snapshot.storage.storage_options:
        reader = reader.option("storageOptions", json.dumps(snapshot.storage.storage_options))
    return reader.load(snapshot.storage.url)


def _connector_scan(spark, snapshot: Snapshot):
    """The snapshot's version read by the server's JVM connector (a Spark Connect
    session), which hands Spark the same bucketed relation :func:`bucketed_relation_df`
    builds; None, with a warning, when the server has no connector."""
    from .session import CONNECTOR, register_quietly

    if register_quietly(spark) != CONNECTOR:
        warnings.warn(f"indexeddf: reading {snapshot.storage.url} unbucketed: a Spark Connect client has no JVM "
                      "to build a bucketed relation, and the server has no indexeddf connector (start it with "
                      "$(python -m indexeddf.spark.connector --submit-args), docs/spark.md)", stacklevel=3)
        return None
    # The table's root as Spark's Hadoop filesystems name it (as the plain scan's files are).
    return spark.read.format("indexeddf").option("versionAsOf", snapshot.version).load(
        hadoop_path(snapshot.storage, "", glob_escaped=False).rstrip("/"))
