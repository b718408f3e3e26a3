"""indexeddf: a versioned, indexed table format for data lakes, used from PySpark.

Public names: :class:`IndexedTable` (the Python API of a table), :class:`HistoryEntry`,
:func:`register` (the Spark data source ``indexeddf``), and the typed errors in :mod:`indexeddf.errors`.
"""

from ._version import __version__
from . import errors  # noqa: E402
from .errors import *  # noqa: E402,F401,F403
from .spark import register  # noqa: E402
from .table import HistoryEntry, IndexedTable  # noqa: E402

__all__ = ["IndexedTable", "HistoryEntry", "register", "errors", "__version__"] + [
    n for n in dir(errors) if n.endswith("Error")
]
