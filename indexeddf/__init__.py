"""indexeddf: a versioned, indexed table format for data lakes, used from PySpark.

Public names: :class:`IndexedTable` (the Python API of a table), :class:`HistoryEntry`,
:func:`configure` (puts the JVM connector on a ``SparkSession.Builder``), :func:`local_session` (a local
session with it), :func:`spark_session` (one on any master), :func:`register` (the Spark
data source ``indexeddf``: says whether the session has the connector or the Python fallback), and the
typed errors in :mod:`indexeddf.errors`.
"""

from typing import TYPE_CHECKING

from . import errors  # noqa: E402
from ._version import __version__
from .errors import *  # noqa: E402,F401,F403
from .spark import configure, local_session, register, spark_session  # noqa: E402

if TYPE_CHECKING:
    from .table import HistoryEntry, IndexedTable  # noqa: F401


def __getattr__(name: str):
    # The table API (pyarrow, numpy, the engine) is imported on first use, not with the
    # package: Spark's driver-side Python workers import the package to load the data
    # source's classes, and each starts cold (a fresh process after an idle minute).
    if name in ("IndexedTable", "HistoryEntry"):
        from . import table

        return getattr(table, name)
    raise AttributeError(f"module 'indexeddf' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | {"IndexedTable", "HistoryEntry"})


__all__ = ["IndexedTable", "HistoryEntry", "configure", "local_session", "spark_session", "register", "errors",
           "__version__"] + [
    n for n in dir(errors) if n.endswith("Error")
]
