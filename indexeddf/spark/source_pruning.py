"""Partition pruning of the Python data source (``indexeddf_python``, the fallback reader).

Spark pushes a query's filters to a Python data source only when
``spark.sql.python.filterPushdown.enabled`` is true (off by default), and then keeps ONE
read plan per loaded DataFrame: each pushdown replaces it, and every scan of that
DataFrame planned later uses the newest one, whatever its own filters (the other side of
a union or self-join, the next query on the same DataFrame). A plan narrowed to one
query's partitions would answer the others with rows missing.

So a pushdown never narrows the plan below what an earlier pushdown of the same
DataFrame needed: each one records the partitions its filters keep in a registry beside
the driver (one small file per loaded DataFrame, under the system's temporary folder),
and the plan reads the files of every partition any recorded pushdown kept (all of them
once one pushdown had no filter on partition columns). Spark still applies every filter
to the rows read; pruning only skips files whose partition values make a filter false
or NULL. Pushdowns of one DataFrame planned at the same time from several threads can
still race (the plan that lands last may have been computed before the other query's
pushdown was recorded): load the DataFrame once per thread there (docs/spark.md).
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
import tempfile
import time
from typing import Any, Iterable, Sequence

from ..spec.partitions import parse_value, partition_dir

REGISTRY_DIR = os.path.join(tempfile.gettempdir(), "indexeddf-pushdowns")
REGISTRY_DAYS = 30
"""A registry untouched this long is deleted (its DataFrame is long gone)."""
ALL = "*"
"""A recorded pushdown that keeps every partition."""
_UNKNOWN = object()
"""A filter that cannot be judged on a partition value (it keeps the file)."""


def kept_partitions(filters: Sequence[Any], partitions: Iterable, columns: Sequence[str], schema) -> list[str] | None:
    """The partition directories (``partition_dir``) of those of ``partitions`` (files'
    ``partitionValues``) that do not make one of ``filters`` (Spark's pushed filters, an
    AND) false or NULL; None: no filter is on partition columns only (every partition stays)."""
    mine = [f for f in filters if _columns(f) and _columns(f) <= set(columns)]
    if not mine:
        return None
    types = {c: schema.field(c).type for c in columns}
    out = set()
    for given in partitions:
        values = {c: parse_value(given.get(c), types[c], c) for c in columns}
        if all(_keeps(_holds(f, values)) for f in mine):
            out.add(partition_dir(columns, given))
    return sorted(out)


def optional_pushdown(push):
    """``push`` (a reader's ``pushFilters``) as an attribute PySpark's planning takes for the
    default one: with ``spark.sql.python.filterPushdown.enabled`` false, PySpark refuses a
    reader that overrides ``pushFilters`` (``DATA_SOURCE_PUSHDOWN_DISABLED``), so that a
    source relying on it to filter rows does not return unfiltered ones. This source pushes
    no filter (Spark applies them all) and prunes only to save reads, so without pushdown it
    reads every file, which is right: the check is told so. With pushdown on, Spark calls it."""
    from pyspark.sql.datasource import DataSourceReader

    class Bound:
        def __init__(self, reader):
            self.reader = reader
            self.__func__ = DataSourceReader.pushFilters  # what PySpark's check compares

        def __call__(self, filters):
            return push(self.reader, filters)

    class Descriptor:
        def __get__(self, reader, owner=None):
            return self if reader is None else Bound(reader)

    return Descriptor()


def record(relation: str, kept: list[str] | None) -> set[str] | None:
    """Add one pushdown's kept partitions to the DataFrame's registry; the union of every
    pushdown recorded for it (None: every partition)."""
    os.makedirs(REGISTRY_DIR, exist_ok=True)
    _forget_old()
    line = json.dumps(ALL if kept is None else kept) + "\n"
    with open(os.path.join(REGISTRY_DIR, f"{relation}.jsonl"), "a+") as f:
        _lock(f)
        f.write(line)
        f.flush()
        f.seek(0)
        recorded = [json.loads(x) for x in f.read().splitlines() if x.strip()]
    union: set[str] = set()
    for kept_ in recorded:
        if kept_ == ALL:
            return None
        union.update(kept_)
    return union


def _lock(f) -> None:
    try:
        import fcntl

        fcntl.flock(f, fcntl.LOCK_EX)  # released when the file is closed
    except (ImportError, OSError):
        pass  # no advisory locks here: appends of one short line still do not interleave


def _forget_old() -> None:
    cutoff = time.time() - REGISTRY_DAYS * 86400
    try:
        for name in os.listdir(REGISTRY_DIR):
            path = os.path.join(REGISTRY_DIR, name)
            if os.path.getmtime(path) < cutoff:
                os.remove(path)
    except OSError:
        pass


def _keeps(truth) -> bool:
    """Whether a file whose rows give a filter ``truth`` may hold a row the query keeps."""
    return truth is True or truth is _UNKNOWN


def _columns(f) -> set[str]:
    """The top-level columns a filter names (empty when it names a nested field)."""
    from pyspark.sql.datasource import Not

    if isinstance(f, Not):
        return _columns(f.child)
    path = getattr(f, "attribute", None)
    return {path[0]} if path is not None and len(path) == 1 else set()


def _holds(f, values: dict):
    """A filter's SQL truth on one file's partition values: True, False, None (NULL) or
    :data:`_UNKNOWN` (a value of an unexpected type: the file is kept)."""
    from pyspark.sql import datasource as d

    if isinstance(f, d.Not):
        inner = _holds(f.child, values)
        return inner if inner is None or inner is _UNKNOWN else not inner
    v = values[f.attribute[0]]
    if isinstance(f, d.IsNull):
        return v is None
    if isinstance(f, d.IsNotNull):
        return v is not None
    if isinstance(f, d.EqualNullSafe):
        if v is None or f.value is None:
            return v is None and f.value is None
        return _compare(v, f.value, lambda a, b: a == b)
    if v is None:
        return None
    if isinstance(f, d.In):
        answers = [_compare(v, x, lambda a, b: a == b) for x in f.value if x is not None]
        if True in answers:
            return True
        return _UNKNOWN if _UNKNOWN in answers else (None if None in f.value else False)
    tests = {d.EqualTo: lambda a, b: a == b, d.GreaterThan: lambda a, b: a > b,
             d.GreaterThanOrEqual: lambda a, b: a >= b, d.LessThan: lambda a, b: a < b,
             d.LessThanOrEqual: lambda a, b: a <= b,
             d.StringStartsWith: lambda a, b: a.startswith(b), d.StringEndsWith: lambda a, b: a.endswith(b),
             d.StringContains: lambda a, b: b in a}
    for kind, test in tests.items():
        if isinstance(f, kind):
            return None if f.value is None else _compare(v, f.value, test)
    return _UNKNOWN


def _compare(a, b, test):
    """``test(a, b)`` when the two are values of one kind, else :data:`_UNKNOWN`."""
    if _kind(a) is None or _kind(a) != _kind(b):
        return _UNKNOWN
    try:
        return bool(test(a, b))
    except (TypeError, ValueError, ArithmeticError):
        return _UNKNOWN


def _kind(x):
    if isinstance(x, bool):
        return "bool"
    if isinstance(x, (int, float, decimal.Decimal)):
        return "number"
    if isinstance(x, dt.datetime):
        return "aware" if x.tzinfo is not None else "naive"
    if isinstance(x, dt.date):
        return "date"
    if isinstance(x, (str, bytes)):
        return type(x).__name__
    return None
