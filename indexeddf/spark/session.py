"""Setting up a Spark session for indexeddf: the JVM connector on the builder
(:func:`configure`) and the Python data source on the session (:func:`register`).

In a module of its own (re-exported by :mod:`indexeddf.spark`) so that the readers,
which register the data source when they need it, do not import the package.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

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
    which = register_quietly(spark)
    if which == PYTHON:
        import warnings

        warnings.warn(_CONNECT_FALLBACK_WARNING if is_connect(spark) else _FALLBACK_WARNING, stacklevel=2)
    return which


def register_quietly(spark) -> str:
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


DAEMON_CONF = "spark.python.daemon.module"
DAEMON_MODULE = "indexeddf.spark.daemon"
"""PySpark's worker daemon with indexeddf's task code imported before it forks workers."""


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

    On a local master (``local``, ``local[n]``, ...) it sets ``spark.python.daemon.module`` to
    :mod:`indexeddf.spark.daemon` unless the builder names a daemon: Python workers then start
    with indexeddf's task code imported (Spark kills a worker idle for a minute, so a pipeline's
    statements every few minutes would otherwise import it again in every new worker). On a
    cluster, set it where every executor's Python has indexeddf (docs/spark.md).
    """
    import os
    import sys

    from .connector import configure as _configure

    builder = _configure(builder)
    options = getattr(builder, "_options", {}) or {}
    if "spark.pyspark.python" not in options and not os.environ.get("PYSPARK_PYTHON"):
        builder = builder.config("spark.pyspark.python", sys.executable)
    # Local workers run this very interpreter, which has indexeddf; a cluster's executors may
    # not, and a daemon module they cannot import would fail every Python task, ours or not.
    if str(options.get("spark.master", "")).startswith("local") and DAEMON_CONF not in options:
        builder = builder.config(DAEMON_CONF, DAEMON_MODULE)
    # PySpark gives every Python function it ships, the data sources' planners included,
    # the interpreter PYSPARK_PYTHON names when the context starts (the conf above is not
    # read there): without it a change statement's writer starts the system's Python.
    if not os.environ.get("PYSPARK_PYTHON"):
        os.environ["PYSPARK_PYTHON"] = options.get("spark.pyspark.python", sys.executable)
    return builder


def spark_session(master: str, conf: dict[str, str] | None = None, app_name: str = "indexeddf"):
    """A Spark session on ``master`` (``local[2]``, ``spark://host:7077``, ``yarn``, ...) with the
    connector (:func:`configure`, then :func:`register`); ``conf``: its settings. What the
    command's ``--spark-master`` starts, to pass as ``spark=`` (docs/admin.md). An active
    session is returned as it is, as ``getOrCreate`` does."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = configure(builder).getOrCreate()
    register(spark)
    return spark


def local_session(app_name: str = "indexeddf", cores: int = 2, driver_memory: str = "2g",
                  shuffle_partitions: int = 4, conf: dict[str, str] | None = None):
    """A local Spark session (``local[cores]``) with the connector on it (:func:`configure`,
    then :func:`register`): the UI and progress bars off, the session time zone UTC, logs at
    ERROR. What the demo, the tests and the benchmarks start (one builder, so they measure
    and test the same set-up); ``conf``: more settings. An active session is returned as it
    is, as ``getOrCreate`` does."""
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master(f"local[{cores}]").appName(app_name)
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
               .config("spark.sql.session.timeZone", "UTC").config("spark.driver.memory", driver_memory))
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = configure(builder).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


ARROW_BATCH_BYTES = "spark.sql.execution.arrow.maxBytesPerBatch"
"""Spark's byte limit on an Arrow batch sent to Python workers."""


@contextmanager
def arrow_batches_by_rows(spark) -> Iterator[None]:
    """Within it, the Arrow batches that ``spark``'s jobs send to Python tasks are bounded by
    rows only (``spark.sql.execution.arrow.maxRecordsPerBatch``, 10,000 by default), as before
    Spark 4, unless the session sets :data:`ARROW_BATCH_BYTES` itself: Spark checks the byte
    limit after every row by sizing every column vector of the batch, a cost that grows with
    the rows sent (a fifth of the JVM's CPU in a 2M-row MERGE); ``2**31 - 1`` is the value at
    which Spark skips the check. The JVM connector's writes do the same (``PythonWriter.save``).
    The session's setting is lifted while the block runs, so it covers every Arrow hand-off of
    the jobs it starts (a pandas or Arrow UDF in the source query too) and of any query the
    session runs meanwhile; a value set in the session meanwhile is removed when the block ends. A session whose rows are wide
    enough for 10,000 of them to strain a Python worker sets the limit, and it stands."""
    if ARROW_BATCH_BYTES in spark.conf.getAll:
        yield
        return
    spark.conf.set(ARROW_BATCH_BYTES, str(2**31 - 1))
    try:
        yield
    finally:
        spark.conf.unset(ARROW_BATCH_BYTES)
