"""The change data feed of some keys (``IndexedTable.changes(keys=...)``): the rows of the
whole feed whose index columns equal one of the keys, read from only the files and row
groups that can hold them.

- A file that carries its bucket (a data file's ``add`` / ``remove``, or a ``cdc`` action of
  one bucket) is read only when it is of a key's bucket, and only when the keys' columns are
  the table's bucketing (index) columns.
- Of a change data file indexeddf wrote (``writer/change_data.py``), only the row groups of
  the keys' buckets are candidates (the footer names each group's bucket).
- Of those, only the row groups whose Parquet statistics (min/max, null count) admit a key
  are decoded: change data is in key order within a bucket, data files in key or key-hash
  order, so a key's rows are one or two row groups of a file.
- Files without a bucket (other engines' files) are read in every row group whose
  statistics admit a key, which is all of them where they have none.

Every row read is then compared with the keys (nulls equal nulls), so no row of another key
is returned. :func:`counting_reads` counts what a read opened and decoded (the tests' proof
of the pruning)."""

from __future__ import annotations

import bisect
import contextlib
import contextvars
import datetime as dt
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..format.datafiles import conform, file_columns, open_parquet
from ..format.storage import TableStorage
from ..spec.arrays import distinct
from ..spec.bucketing import bucket_ids, key_hash
from ..spec.change_data import ROW_GROUP_BUCKETS
from ..spec.column_mapping import physical_name, resolve


@dataclass(frozen=True)
class KeyFilter:
    """The keys a read of the feed keeps: ``keys``, distinct, a column per key column and
    typed as the table's (``optimizer.planner.keys_table`` builds it), and whether those
    columns are the ones the table buckets its files by (only then does a file's bucket
    tell whether it can hold a key)."""

    keys: pa.Table
    bucketed: bool

    @property
    def columns(self) -> list[str]:
        """The key columns (an index's columns)."""
        return self.keys.column_names

    def buckets(self, index_columns, num_buckets: int) -> frozenset[int] | None:
        """The buckets holding the keys in a table bucketed ``num_buckets`` ways by
        ``index_columns``; None when the keys are not on those columns (any bucket may)."""
        if not self.bucketed or list(index_columns) != self.columns:
            return None
        return self._buckets(num_buckets)

    def _buckets(self, num_buckets: int) -> frozenset[int]:
        known = self._bucket_cache.get(num_buckets)
        if known is None:
            known = frozenset(int(b) for b in distinct(bucket_ids(self.keys.columns, num_buckets)))
            self._bucket_cache[num_buckets] = known
        return known

    @cached_property
    def _bucket_cache(self) -> dict:
        return {}

    @cached_property
    def hashes(self) -> np.ndarray:
        """The keys' hashes (sorted), a first cheap test of a row of several key columns."""
        return distinct(key_hash(self.keys.columns))

    @cached_property
    def tuples(self) -> set:
        """The keys as tuples, the exact test of a row of several key columns."""
        return set(zip(*(c.to_pylist() for c in self.keys.columns)))


@dataclass
class FeedReads:
    """What a keyed read of the feed read (:func:`counting_reads`)."""

    files: list[str] = field(default_factory=list)
    """Paths of the files opened (their footers read), in read order."""
    groups: list[tuple[str, int]] = field(default_factory=list)
    """The row groups decoded: (path, row group number)."""
    skipped_files: int = 0
    """Files left unopened: their bucket holds none of the keys."""

    @property
    def row_groups(self) -> int:
        """How many row groups were decoded, over every file."""
        return len(self.groups)


_READS: contextvars.ContextVar[FeedReads | None] = contextvars.ContextVar("indexeddf_feed_reads", default=None)


@contextlib.contextmanager
def counting_reads() -> Iterator[FeedReads]:
    """Count what the keyed reads of the feed inside the block open and decode."""
    reads = FeedReads()
    token = _READS.set(reads)
    try:
        yield reads
    finally:
        _READS.reset(token)


def skipped() -> None:
    """Count a file left unopened (its bucket holds no key)."""
    reads = _READS.get()
    if reads is not None:
        reads.skipped_files += 1


def read_keyed(storage: TableStorage, path: str, schema: pa.Schema, columns: list[str], keys: KeyFilter,
               partition: Mapping[str, str | None] | None, buckets: frozenset[int] | None = None,
               ) -> tuple[pa.Table, np.ndarray, int]:
    """The rows of one file whose key columns equal a key: ``columns`` of them (which hold
    the key columns), typed as ``schema``, their ordinals in the file, and the file's row
    count (for a deletion vector's mask). Only the row groups of ``buckets`` (the keys';
    None: any) whose statistics admit a key are decoded."""
    pf = open_parquet(storage, path)
    meta = pf.metadata
    tests = _tests(pf, schema, keys, partition)
    groups = [g for g in _bucket_groups(meta, buckets)
              if all(_admits(meta.row_group(g).column(i).statistics, values, nulls) for i, values, nulls in tests)]
    reads = _READS.get()
    if reads is not None:
        reads.files.append(path)
        reads.groups += [(path, g) for g in groups]
    stored = [c for c in file_columns(pf, columns, schema) if not partition or c not in partition]
    if not groups or _none_match(pf, groups, schema, keys, stored, partition):
        return conform(schema.empty_table(), schema, columns), np.empty(0, np.int64), meta.num_rows
    starts = np.cumsum([0] + [meta.row_group(i).num_rows for i in range(meta.num_row_groups)])
    ordinals = np.concatenate([np.arange(starts[g], starts[g + 1], dtype=np.int64) for g in groups])
    if stored:
        rows = pf.read_row_groups(groups, columns=stored, use_threads=False)
    else:  # only partition columns: the row count is in the footer
        rows = pa.table({"_": pa.nulls(len(ordinals), pa.null())})
    rows = conform(rows, schema, columns, partition=partition)
    hit = matching(rows, keys)
    return rows.filter(pa.array(hit)), ordinals[hit], meta.num_rows


def _none_match(pf, groups: list[int], schema: pa.Schema, keys: KeyFilter, stored: list[str], partition) -> bool:
    """Whether no row of ``groups`` holds a key, from the key columns alone (when the file
    stores them all and other columns too): a group the statistics admit mostly holds no key
    (a small change's one group spans every key), and its other columns (a wide string column)
    cost most of decoding it; a group that holds one is then decoded whole."""
    probe = file_columns(pf, keys.columns, schema)
    if len(probe) != len(keys.columns) or (partition and any(c in partition for c in probe)) or set(stored) <= set(probe):
        return False
    rows = conform(pf.read_row_groups(groups, columns=probe, use_threads=False), schema, keys.columns)
    return not matching(rows, keys).any()


def matching(rows: pa.Table, keys: KeyFilter) -> np.ndarray:
    """A mask over ``rows``: True where the key columns equal those of a key (NULL equals
    NULL, as lookups compare keys)."""
    if rows.num_rows == 0:
        return np.zeros(0, bool)
    if len(keys.columns) == 1:
        c = keys.columns[0]
        return np.asarray(pc.fill_null(pc.is_in(rows.column(c), value_set=keys.keys.column(c).combine_chunks(),
                                                skip_nulls=False), False))
    # Several columns: the key hash narrows the rows to a few candidates, compared as tuples.
    hit = np.isin(key_hash([rows.column(c) for c in keys.columns]), keys.hashes)
    at = np.flatnonzero(hit)
    if len(at):
        values = zip(*(rows.column(c).take(pa.array(at)).to_pylist() for c in keys.columns))
        hit[at] = [v in keys.tuples for v in values]
    return hit


def _bucket_groups(meta, buckets: frozenset[int] | None) -> list[int]:
    """The row groups of a file (its footer ``meta``) that may hold rows of ``buckets``: those
    whose bucket range in :data:`ROW_GROUP_BUCKETS` holds one of them (or that name none),
    else every group."""
    named = (meta.metadata or {}).get(ROW_GROUP_BUCKETS.encode())
    groups = range(meta.num_row_groups)
    if buckets is None or named is None:
        return list(groups)
    try:
        of = json.loads(named)
    except ValueError:
        return list(groups)
    if not isinstance(of, list) or len(of) != meta.num_row_groups:
        return list(groups)  # not a list this writer wrote: no pruning
    return [g for g in groups if not _bucket_range(of[g]) or any(of[g][0] <= b <= of[g][1] for b in buckets)]


def _bucket_range(value) -> bool:
    """Whether a :data:`ROW_GROUP_BUCKETS` entry is a range of buckets (else: any bucket)."""
    return isinstance(value, list) and len(value) == 2 and all(isinstance(b, int) for b in value)


def _tests(pf, schema: pa.Schema, keys: KeyFilter, partition) -> list[tuple[int, list, bool]]:
    """Per key column with comparable statistics: its leaf in the file, the keys' values
    (sorted) and whether a key is NULL there. A row group is read when, in every such column,
    its statistics admit a value (a superset of the groups holding a key: rows are checked
    after)."""
    meta = pf.metadata
    leaves = {meta.schema.column(i).path: i for i in range(meta.num_columns)}
    tests = []
    for c in keys.columns:
        f = schema.field(c)
        if partition and physical_name(f) in partition:
            continue  # a partition column: the rows' filter compares it
        stored = resolve(pf.schema_arrow, f)
        if stored is None or stored not in leaves or not _comparable(f.type):
            continue
        values = keys.keys.column(c)
        tests.append((leaves[stored], sorted(v for v in values.to_pylist() if v is not None), values.null_count > 0))
    return tests


def _comparable(t: pa.DataType) -> bool:
    """Types whose Parquet statistics pyarrow gives as Python values that compare as the
    keys do (integers, strings, dates)."""
    return pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_date32(t)


def _admits(stats, values: list, nulls: bool) -> bool:
    """Whether a column chunk with ``stats`` can hold one of ``values`` (sorted), or a NULL
    when ``nulls``."""
    if stats is None:
        return True
    if nulls and (not stats.has_null_count or stats.null_count > 0):
        return True
    if not stats.has_min_max:
        return bool(values) or not stats.has_null_count
    lo, hi = stats.min, stats.max
    if isinstance(lo, dt.datetime) or type(lo) is not type(values[0] if values else lo):
        return True  # statistics of another type than the keys (an older file's): no pruning
    i = bisect.bisect_left(values, lo)
    return i < len(values) and values[i] <= hi
