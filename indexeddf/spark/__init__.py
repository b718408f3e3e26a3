"""Spark entry points: ``register(spark)`` and the helpers ``IndexedTable`` uses for Spark data.

    import indexeddf
    indexeddf.register(spark)
    df = spark.read.format("indexeddf").load("/lake/events")

See ``docs/spark.md`` for the options of the ``indexeddf`` format.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Sequence
from typing import Any

from .. import errors
from ..errors import IndexedDFError

__all__ = ["register", "configure", "is_connect", "is_spark_dataframe", "write_dataframe", "typed_error", "CONNECTOR",
           "PYTHON", "PYTHON_NAME"]


CONNECTOR = "connector"
"""What :func:`register` returns when the JVM connector owns ``indexeddf``."""
PYTHON = "python"
"""What :func:`register` returns when the Python data source is ``indexeddf`` (no jar)."""
PYTHON_NAME = "indexeddf_python"
"""The name of the Python data source next to the JVM connector (which writes through it)."""

_FALLBACK_WARNING = (
    "indexeddf: this Spark session has no indexeddf JVM connector (build it with ./dev.sh set-up or "
    "indexeddf.spark.connector.build_jar(), and put it on the session with indexeddf.configure(builder)); "
    "format('indexeddf') is the Python data source: no column pruning, no filter pushdown, no bucket "
    "pruning, scans several times slower than Spark's native Parquet reader (docs/spark.md), and the "
    "errorifexists / ignore save modes are refused by Spark"
)
_CONNECT_FALLBACK_WARNING = (
    "indexeddf: the Spark Connect server of this session has no indexeddf JVM connector (start it with "
    "$SPARK_HOME/sbin/start-connect-server.sh $(python -m indexeddf.spark.connector --submit-args), "
    "docs/spark.md); format('indexeddf') is the Python data source: no column pruning, no filter pushdown, no "
    "bucket pruning, scans several times slower than Spark's native Parquet reader, and the error / ignore "
    "save modes are refused by Spark"
)


def register(spark) -> str:
    """Register the Python data source with a Spark session; returns which path the session has.

    - ``"connector"``: the JVM connector (:func:`configure` put its jar on the session) owns
      ``indexeddf``; the Python source is registered as ``indexeddf_python``, through which
      the connector writes and streams (a Python source cannot take a name a JVM provider
      has: ``DATA_SOURCE_ALREADY_EXISTS``).
    - ``"python"``: no connector; the Python source is ``indexeddf`` (and ``indexeddf_python``),
      with a warning that says what is lost. It reads every live file of the version a
      DataFrame was loaded at and leaves every filter to Spark (:mod:`indexeddf.spark.source`).

    Works with classic and Spark Connect sessions alike: under Spark Connect the sources
    are registered on the server's session of this client (one per client session, so
    call it for every Connect session), and the answer says whether the *server* has the
    connector (started with :func:`indexeddf.spark.connector.submit_args`, docs/spark.md).
    Registering again is harmless.
    """
    which = _register(spark)
    if which == PYTHON:
        import warnings

        warnings.warn(_CONNECT_FALLBACK_WARNING if is_connect(spark) else _FALLBACK_WARNING, stacklevel=2)
    return which


def _register(spark) -> str:
    """:func:`register` without the fallback's warning."""
    from .source import IndexedDataSource, PythonNamedDataSource

    spark.dataSource.register(PythonNamedDataSource)
    try:
        spark.dataSource.register(IndexedDataSource)
    except Exception as e:  # noqa: BLE001 - only the one error below means "the JVM provider is here"
        if "DATA_SOURCE_ALREADY_EXISTS" not in str(e):
            raise
        return CONNECTOR
    return PYTHON


def is_connect(spark_or_df: Any) -> bool:
    """Whether a Spark session (or DataFrame) is a Spark Connect one
    (``pyspark.sql.connect``): a client with no JVM of its own, so nothing that goes
    through py4j (``spark._jvm``, ``df._jdf``) is available on it."""
    module = type(spark_or_df).__module__ or ""
    return module.startswith("pyspark.sql.connect")


def configure(builder):
    """Put the indexeddf JVM connector on a ``SparkSession.Builder`` and return the builder.

        import indexeddf
        spark = indexeddf.configure(SparkSession.builder.master("local[2]")).getOrCreate()
        indexeddf.register(spark)

    Appends the connector's jar to ``spark.jars`` (building it first if its sources
    changed, see :mod:`indexeddf.spark.connector`) and its session extensions (for
    ``SELECT ... FROM indexeddf.`/path```) to ``spark.sql.extensions``, as delta-spark's
    ``configure_spark_with_delta_pip`` does. Without a JDK the builder comes back
    without them, with a warning, and the session reads through the Python data source.

    It also sets ``spark.pyspark.python`` to this interpreter unless the builder or the
    ``PYSPARK_PYTHON`` environment variable names one, and ``PYSPARK_PYTHON`` (read when the
    context starts) unless it is set: Spark's Python workers (writes run in them) must find
    this environment's packages, and a virtual environment run without being activated
    would otherwise give them the system's Python.
    """
    import os
    import sys

    from .connector import configure as _configure

    builder = _configure(builder)
    options = getattr(builder, "_options", {}) or {}
    if "spark.pyspark.python" not in options and not os.environ.get("PYSPARK_PYTHON"):
        builder = builder.config("spark.pyspark.python", sys.executable)
    # PySpark gives every Python function it ships, the data sources' planners included,
    # the interpreter PYSPARK_PYTHON names when the context starts (the conf above is not
    # read there): without it a change statement's writer starts the system's Python.
    if not os.environ.get("PYSPARK_PYTHON"):
        os.environ["PYSPARK_PYTHON"] = options.get("spark.pyspark.python", sys.executable)
    return builder


def is_spark_dataframe(data: Any) -> bool:
    """Whether ``data`` is a PySpark DataFrame (classic or Connect), without importing pyspark."""
    module = type(data).__module__ or ""
    return module.startswith("pyspark.sql") and type(data).__name__ == "DataFrame"


_TYPED = re.compile(r"indexeddf\.errors\.(\w+): (.*?)(?:\n|$)", re.S)


def typed_error(exc: BaseException) -> IndexedDFError | None:
    """The indexeddf error a Spark exception carries (Python worker traceback), if any.

    The last one named is the one raised (earlier ones are its context).
    """
    found = _TYPED.findall(str(exc))
    for name, message in reversed(found):
        cls = getattr(errors, name, None)
        if isinstance(cls, type) and issubclass(cls, IndexedDFError):
            try:
                return cls(message.strip())
            except TypeError:
                return IndexedDFError(f"{name}: {message.strip()}")
    return None


def write_dataframe(
    df,
    path: str,
    mode: str,
    *,
    index_columns: Sequence[str],
    num_buckets: int,
    storage_options: dict[str, Any] | None = None,
    options: dict[str, str] | None = None,
) -> int | None:
    """Write a Spark DataFrame through the ``indexeddf`` source; returns the version made.

    The frame is first hash-partitioned on the index columns into ``num_buckets``
    partitions: Spark's hash partitioning is the table's bucketing, so task i holds
    exactly bucket i and each task writes one file (instead of up to one per bucket).
    Returns None when nothing was committed (``ignore`` of an existing table), and the
    table's version when an idempotent ``txn`` had already been committed. A typed
    error raised inside Spark is raised again as itself (the Spark one is its cause).
    """
    from pyspark.sql import functions as F

    from ..writer.operations import MAX_BUCKETS

    if isinstance(num_buckets, bool) or not isinstance(num_buckets, int) or not 1 <= num_buckets <= MAX_BUCKETS:
        raise errors.InvalidOptionError(f"num_buckets must be an integer in 1..{MAX_BUCKETS}, got {num_buckets!r}")
    spark = df.sparkSession
    register(spark)  # the Python source writes either way; the connector would only pass the write on
    fd, result_file = tempfile.mkstemp(prefix="indexeddf-commit-", suffix=".json")
    os.close(fd)
    try:
        writer = (
            df.repartition(num_buckets, *[F.col(f"`{c}`") for c in index_columns])
            .write.format(PYTHON_NAME)
            .mode("overwrite" if mode == "overwrite" else "append")
            .option("_commitResultFile", result_file)
        )
        if storage_options:
            writer = writer.option("storageOptions", json.dumps(storage_options))
        for key, value in (options or {}).items():
            if value is not None:
                writer = writer.option(key, value)
        try:
            writer.save(path)
        except Exception as e:  # noqa: BLE001 - re-raised typed when possible
            typed = typed_error(e)
            if typed is not None:
                raise typed from e
            raise
        try:
            with open(result_file) as f:
                text = f.read()
        except OSError:
            return None
        return json.loads(text).get("version") if text.strip() else None
    finally:
        try:
            os.remove(result_file)
        except OSError:
            pass
