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
    "indexeddf.changes.rewrite",  # a change's file writer, which indexeddf.spark.apply loads in its tasks
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


def installed_pyspark_first(path: list[str]) -> list[str]:
    """``path`` (a ``sys.path``) with Spark's ``pyspark.zip`` moved after the directories when
    it is the zip of the pyspark installed there (pip's pyspark ships both, the zip in
    ``pyspark/python/lib/``), so the same pyspark loads from its compiled modules.

    Spark puts the zip first on every Python worker's path. Loaded from it, pyspark's modules
    are compiled from source in each daemon (about a CPU-second), and every worker's first task
    re-reads the zip's directory once for each package loaded from it (pyspark's
    ``setup_spark_files`` invalidates the import caches: 0.1-0.2 CPU-s a worker). A zip of
    another Spark installation stays first."""
    import importlib.machinery
    import os

    zips = [p for p in path if os.path.basename(p) == "pyspark.zip"]
    if not zips:
        return path
    dirs = [p for p in path if not p.endswith(".zip")]
    spec = importlib.machinery.PathFinder.find_spec("pyspark", dirs)
    if spec is None or not spec.origin:
        return path
    own = os.path.join(os.path.dirname(spec.origin), "python", "lib", "pyspark.zip")
    mine = [p for p in zips if os.path.realpath(p) == os.path.realpath(own)]
    return [p for p in path if p not in mine] + mine


if __name__ == "__main__":
    import sys

    sys.path[:] = installed_pyspark_first(sys.path)
    preload()
    from pyspark import daemon

    daemon.manager()
