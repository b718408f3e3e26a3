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

__all__ = ["register", "configure", "local_session", "spark_session", "is_connect", "is_spark_dataframe", "write_dataframe", "typed_error", "CONNECTOR",
           "PYTHON", "PYTHON_NAME", "plan_size_bytes"]


from .session import (  # noqa: F401 - register_quietly: the package's own modules call it
    CONNECTOR,
    PYTHON,
    PYTHON_NAME,
    arrow_batches_by_rows,
    configure,
    is_connect,
    local_session,
    register,
    register_quietly,
    spark_session,
)


def is_spark_dataframe(data: Any) -> bool:
    """Whether ``data`` is a PySpark DataFrame (classic or Connect), without importing pyspark."""
    module = type(data).__module__ or ""
    return module.startswith("pyspark.sql") and type(data).__name__ == "DataFrame"


_TYPED = re.compile(r"indexeddf\.errors\.(\w+): ([^\n]*(?:\n - [^\n]*)*)")
"""A typed error in a Spark exception's text: its class and message (the first line, and the
`` - column : value`` lines that follow it in Delta's constraint violations)."""
_VALUE_LINE = re.compile(r"^ - (.+?) : (.*)$", re.M)


def _texts(exc: BaseException) -> str:
    """An exception's text and, for one Spark raised from the JVM, the messages of the Java
    exception's causes (PySpark shows only the first line of a cause's message)."""
    out = [str(exc)]
    cause = getattr(exc, "_origin", None)
    try:
        for _ in range(20):  # a cause chain is short; a cycle must not hang
            if cause is None:
                break
            out.append(str(cause.getMessage()))
            cause = cause.getCause()
    except Exception:  # noqa: BLE001 - a JVM gone or a non-Java origin: the text alone
        pass
    return "\n".join(out)


def typed_error(exc: BaseException) -> IndexedDFError | None:
    """The indexeddf error a Spark exception carries (Python worker traceback), if any.

    The last one named is the one raised (earlier ones are its context).
    """
    found = _TYPED.findall(_texts(exc))
    for name, message in reversed(found):
        cls = getattr(errors, name, None)
        if isinstance(cls, type) and issubclass(cls, IndexedDFError):
            try:
                typed = cls(message.strip())
            except TypeError:
                return IndexedDFError(f"{name}: {message.strip()}")
            if isinstance(typed, errors.ConstraintViolationError):
                typed.values = dict(_VALUE_LINE.findall(message))
            return typed
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
    which = register(spark)  # the Python source writes either way; the connector would only pass the write on
    checked: dict[str, str] = {}
    if which == CONNECTOR and not is_connect(spark):
        df = _constraints_checked(df, path, checked)
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
        for key, value in {**checked, **(options or {})}.items():
            if value is not None:
                writer = writer.option(key, value)
        try:
            with arrow_batches_by_rows(spark):
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


def plan_size_bytes(df) -> int | None:
    """Spark's estimate of ``df``'s size in bytes (its optimized plan's ``sizeInBytes``: the
    files' bytes for a file scan, rows times row width otherwise), or None where Spark does
    not know it (the estimate is ``spark.sql.defaultSizeInBytes``, or a Spark Connect session,
    whose plans the client cannot see). Nothing runs: statistics come from the plan."""
    jdf = getattr(df, "_jdf", None)
    if jdf is None:
        return None
    try:
        raw = jdf.queryExecution().optimizedPlan().stats().sizeInBytes()
        size = raw if isinstance(raw, int) else int(raw.toString())  # py4j converts Scala's BigInt or not
        unknown = int(df.sparkSession._jsparkSession.sessionState().conf().defaultSizeInBytes())
    except Exception:  # noqa: BLE001 - a plan Spark cannot estimate: the size is unknown
        return None
    return size if 0 <= size < unknown else None


def _constraints_checked(df, path: str, options: dict[str, str]):
    """``df`` with the table's CHECK constraints checked by Catalyst in its plan (the connector's
    ``CheckConstraints.forWrite``, as ``df.write.format("indexeddf")`` checks them); the write
    option that says so goes into ``options``. ``df`` itself when there is nothing to check."""
    from pyspark.sql import DataFrame

    spark = df.sparkSession
    jopts = spark._jvm.java.util.HashMap()
    jdf = spark._jvm.io.indexeddf.spark.exec.CheckConstraints.forWrite(spark._jsparkSession, path, df._jdf, jopts)
    options.update({str(k): str(v) for k, v in jopts.items()})
    return DataFrame(jdf, spark)
