"""A snapshot's version as a Spark DataFrame (``IndexedTable.to_df``).

- :func:`native_scan`: the JVM connector's read of the version where the session has the
  connector; else Spark's Parquet reader over the snapshot's live files (column pruning,
  predicate pushdown), bucketed where Spark can be told (:mod:`.bucketed`), or the Python
  data source where the files need more than Parquet (deletion vectors, partitions,
  column mapping).
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
    """A Spark DataFrame of exactly the snapshot's version (``IndexedTable.to_df``).

    **With the JVM connector** on the session (``register`` says ``"connector"``; under
    Spark Connect, on the server) and a table with no fsspec ``storage_options`` (which
    only the Python side can use), it is the connector's read of that version:
    ``spark.read.format("indexeddf").option("versionAsOf", v).load(root)``. The connector
    replays the log in the JVM and hands Spark a ``HadoopFsRelation`` over exactly the
    version's live files: Spark's Parquet reader (column pruning, pushed filters), deletion
    vectors applied, partition values from the log, a column-mapped table's physical
    names, and the table's ``BucketSpec`` wherever its files allow one (the rules of
    :func:`~.bucketed.bucketed_scan_reason`, except that deletion vectors and column
    mapping do not stop it). The DataFrame is bound to that version: later commits do not
    change it. Its plans get the connector's rules: index lookups on the driver or in
    tasks, bucket pruning, small joins through the index, and ``UnneededBuckets`` (a
    bucketed scan that spares no shuffle is read as a plain one).

    ``bucketed`` then changes nothing: the connector's relation always carries the
    bucketing it can, and Spark uses it where an operator needs the table's distribution
    (a join or aggregation on the index columns reads bucket i in task i and shuffles only
    the other side; ``Bucketed: true`` in the plan), as it did for the bucketed relation
    below. That relation is also a ``HadoopFsRelation`` with a ``BucketSpec``, so the
    connector's read needs no storage-partitioned-join setting (that is Spark's
    DataSource V2 mechanism) and keeps every shuffle the bucketed relation avoided; the
    connector's relation also names the index columns as sort columns when every file is
    sorted, so a merge join with one file per bucket sorts only the other side.

    **Without the connector** (no JDK, a session built without ``indexeddf.configure``,
    or ``storage_options``), the fallbacks:

    - a version whose files have deletion vectors, or of a partitioned or column-mapped
      table: the Python data source (``indexeddf_python``), which drops deleted rows,
      takes partition values from the log and reads physical column names;
    - ``bucketed=True`` where :func:`~.bucketed.bucketed_scan_reason` allows: a bucketed
      ``HadoopFsRelation`` built through py4j (:func:`~.bucketed.bucketed_relation_df`);
      a JVM that cannot build it gives a plain scan and a warning, and a Spark Connect
      client (no JVM, a server without the connector) a plain scan with a warning;
    - otherwise ``spark.read.parquet`` of the live files (an empty DataFrame with the
      table's schema when there are none).
    """
    schema = spark_schema(snapshot.metadata.schema_)
    check_columns(schema.names, columns)
    if reads_through_connector(spark, snapshot):
        df = _read_version(spark, snapshot)
    else:
        df = _fallback_scan(spark, snapshot, schema, bucketed)
    return df if columns is None else df.select(*columns)


def reads_through_connector(spark, snapshot: Snapshot) -> bool:
    """Whether :func:`native_scan` is the connector's read of the version: the session
    (under Spark Connect, its server) has the connector and the table has no fsspec
    ``storage_options`` (the connector reaches files through Hadoop's own settings)."""
    from .session import CONNECTOR, register_quietly

    return not snapshot.storage.storage_options and register_quietly(spark) == CONNECTOR


def _read_version(spark, snapshot: Snapshot):
    """The connector's read of the snapshot's version (the table's root as Spark's Hadoop
    filesystems name it; not glob-escaped: the connector opens the path, it does not expand it)."""
    return spark.read.format("indexeddf").option("versionAsOf", snapshot.version).load(
        hadoop_path(snapshot.storage, "", glob_escaped=False).rstrip("/"))


def _fallback_scan(spark, snapshot: Snapshot, schema, bucketed: bool):
    """:func:`native_scan` on a session without the connector (or with ``storage_options``)."""
    from .bucketed import bucketed_relation_df, bucketed_scan_reason
    from .session import is_connect

    files = snapshot.live_files()
    df = None
    if files and (any(a.deletionVector is not None for a in files) or snapshot.metadata.partitionColumns
                  or is_mapped(snapshot.metadata.configuration)):
        # Spark's Parquet reader cannot drop the rows a deletion vector deletes, nor know a
        # file's partition values (the log has them, not the files), nor find a column-mapped
        # table's physical names: the Python source reads them.
        df = _python_source_scan(spark, snapshot)
    elif bucketed and files and bucketed_scan_reason(snapshot) is None:
        if is_connect(spark):
            df = _connector_scan(spark, snapshot)
        else:
            paths = [hadoop_path(snapshot.storage, a.path, glob_escaped=False) for a in files]
            try:
                df = bucketed_relation_df(spark, snapshot, paths, schema)
            except JVM_UNAVAILABLE as exc:  # a plain scan is as right; anything else is a bug and raises
                warnings.warn(f"indexeddf: reading {snapshot.storage.url} unbucketed: Spark's JVM did not build a "
                              f"bucketed relation ({type(exc).__name__}: {str(exc)[:200]})", stacklevel=3)
    if df is None and not files:
        df = spark.createDataFrame([], schema)
    elif df is None:
        paths = [hadoop_path(snapshot.storage, a.path) for a in files]
        df = spark.read.schema(schema).parquet(*paths)
    return df


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
    """``bucketed=True`` on a Spark Connect client without the connector's read: the
    server's connector when it has one (the table has ``storage_options``, which the
    connector does not take: it reaches the files through Hadoop's own settings), else
    None with a warning (a Connect client has no JVM to build a bucketed relation)."""
    from .session import CONNECTOR, register_quietly

    if register_quietly(spark) != CONNECTOR:
        warnings.warn(f"indexeddf: reading {snapshot.storage.url} unbucketed: a Spark Connect client has no JVM "
                      "to build a bucketed relation, and the server has no indexeddf connector (start it with "
                      "$(python -m indexeddf.spark.connector --submit-args), docs/spark.md)", stacklevel=4)
        return None
    return _read_version(spark, snapshot)
