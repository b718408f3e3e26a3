"""PySpark's Python worker daemon, with indexeddf's task code imported before it forks workers.

Spark starts one daemon process per executor (``python -m pyspark.daemon``) and forks a worker
from it for each Python task that finds no idle worker. A worker idle for a minute is killed
(Spark's ``PythonWorkerFactory``, a fixed timeout), so a pipeline that changes its table every few
minutes gets new workers each time, and each one imported indexeddf, pyarrow, numpy and pandas
again: about 1.2 CPU-seconds a worker on this project's machine, more than a whole 10,000-row
upsert with deletion vectors costs. Run as ``spark.python.daemon.module`` (``indexeddf.configure``
sets it on a local master unless the session names another), this module imports those modules once, in the
daemon, then runs PySpark's own daemon; every worker forked from it starts with them loaded.

PySpark's daemon imports its worker module only after the fork because some libraries start
threads when imported. The two that do here are fork-safe: numpy's OpenBLAS pool and pyarrow's
jemalloc background thread both re-initialize in a forked child (they register ``pthread_atfork``
handlers), as every ``multiprocessing`` program that forks after importing them relies on. A
failed import leaves the daemon as PySpark's: the worker imports what it needs itself.
"""

from __future__ import annotations

PRELOADED = (
    "pyspark.worker",
    "pandas",  # pyarrow imports it on its first conversion of Python values
    "indexeddf.changes.statements",  # the engine and the SQL parser, which the Spark modules load lazily
    "indexeddf.format.datafiles",
    "indexeddf.format.deletion_vectors",
    "indexeddf.spark.apply",
    "indexeddf.spark.change",
    "indexeddf.spark.change_tasks",
    "indexeddf.spark.write_task",
    "indexeddf.spark.index_tasks",
    "indexeddf.spark.optimize_tasks",
    "indexeddf.spark.source",
    "indexeddf.spark.write",
)
"""The modules Python tasks of indexeddf's statements, reads and writes import."""


def preload() -> list[str]:
    """Import :data:`PRELOADED`; the names that failed to import (the worker imports them
    itself, or fails with the error it would have had anyway)."""
    import importlib

    failed = []
    for name in PRELOADED:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a worker must still start; it raises the error itself
            failed.append(name)
    return failed


if __name__ == "__main__":
    preload()
    from pyspark import daemon

    daemon.manager()
