"""Locating the rows a change targets: a lookup read once, not a lookup served again.

A MERGE, UPDATE or DELETE finds its target rows through the same lookup plan as
:func:`~indexeddf.reader.lookup.run_plan`, but it reads them once: the next change comes
minutes later, at another version. So nothing here fills the lookup cache (a pipeline
that upserts in a loop would otherwise hold up to the cache's bound of index segments),
and each touched bucket is read the cheaper of two ways:

- **through the index**, for a few keys: only the index row groups whose hash range can
  hold a probed hash are read, and only their matching entries are kept; then the data
  row groups that hold the candidates (:func:`~indexeddf.reader.lookup.fetch_rows`);
- **by the key columns**, for many keys: once a bucket's keys would touch most index
  and data row groups anyway, reading the key columns of the bucket's data files and
  matching them against the keys is cheaper than reading the index and then the same
  key columns (a 10,000-key upsert into 32 buckets of 625,000 rows touches every row
  group). The result is the same rows, with the same file ids and ordinals.

Live files the index does not cover (a hybrid scan's files) are read by their key
columns as well: building and caching a per-file trie pays only for repeated lookups.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..format.datafiles import read_file
from ..format.snapshot import Snapshot
from ..spec.actions import AddFile, IndexFile
from ..spec.arrays import distinct
from ..spec.bucketing import key_hash
from ..spec.column_mapping import plain
from ..spec.schema import check_columns
from .lookup import (
    FILE_ID,
    LOOKUP_THREADS,
    ROW_ORDINAL,
    ReadContext,
    deleted_rows,
    index_footer,
    probe_trie,
    read_index_groups,
    with_locators,
)
from .plan import LookupPlan, LookupTask
from .trie import BucketTrie, Segment, expand_ranges

INDEX_ROWS_PER_KEY = 32_768
"""About the rows a key found through the index costs: one index row group
(:data:`~indexeddf.writer.index_files.ENTRY_ROW_GROUP`, 16,384 entries of three columns)
and one data row group's key column (10,000 to 100,000 rows). A bucket whose probed keys
times this reaches the rows of its data files is read by the key columns instead."""


def locate(snapshot: Snapshot, plan: LookupPlan, columns: list[str]) -> pa.Table:
    """The live rows matching ``plan``'s keys, with ``columns`` and each row's
    :data:`~indexeddf.reader.lookup.FILE_ID` and ``ROW_ORDINAL``, read once (nothing is
    cached). The keys must hold no NULL (a change's NULL keys never match)."""
    ctx = ReadContext.of(snapshot, plan)
    check_columns(ctx.schema.names, columns)
    files = {a.fileId: a for a in snapshot.live_files()}

    def one(task: LookupTask) -> pa.Table:
        return _locate_task(ctx, files, task, columns)

    if len(plan.tasks) > 1:
        with ThreadPoolExecutor(min(LOOKUP_THREADS, len(plan.tasks))) as pool:
            parts = list(pool.map(one, plan.tasks))
    else:
        parts = [one(t) for t in plan.tasks]
    parts = [p for p in parts if p.num_rows]
    if not parts:
        return with_locators(plain(ctx.schema).empty_table().select(columns), np.empty(0, np.int64),
                              np.empty(0, np.int64))
    return pa.concat_tables(parts)


def _locate_task(ctx: ReadContext, files: dict[int, AddFile], task: LookupTask, columns: list[str]) -> pa.Table:
    read_cols = columns + [c for c in ctx.index_columns if c not in columns]
    if task.bucket is None:  # files the index does not cover
        found = _by_key_columns(ctx, list(task.scan_files), task.keys, read_cols)
    else:
        covered = _covered_files(ctx, files, task.index_files)
        rows = [a.stats.numRecords if a.stats is not None else None for a in covered]
        # Only files of this very bucket: a file of every bucket (another writer's, or under
        # a secondary index) would be read again for each touched bucket.
        own = all(a.bucket == task.bucket for a in covered)
        if own and _key_columns_cheaper(ctx, task.keys, rows):
            found = _by_key_columns(ctx, covered, task.keys, read_cols)
        else:
            hashes = key_hash([task.keys.column(c) for c in ctx.index_columns])
            trie = BucketTrie(tuple(_matching_entries(ctx, f, distinct(hashes)) for f in task.index_files))
            found = probe_trie(ctx, trie, ctx.live_covered_ids, task.keys, read_cols, hashes, cached=False)
    # Located rows are few chunks' worth of work downstream: one chunk a task.
    return found.select(columns + [FILE_ID, ROW_ORDINAL]).combine_chunks()


def _covered_files(ctx: ReadContext, files: dict[int, AddFile], index_files: tuple[IndexFile, ...]) -> list[AddFile]:
    """The live covered data files that entries of ``index_files`` point into."""
    ids = distinct(np.fromiter((i for f in index_files for i in f.fileIds), np.int64))
    live = ids[np.isin(ids, ctx.live_covered_ids)]
    return [files[int(i)] for i in live if int(i) in files]


def _key_columns_cheaper(ctx: ReadContext, keys: pa.Table, rows: list[int | None]) -> bool:
    """Whether reading the key columns of files holding ``rows`` rows beats probing the
    index for ``keys``. Only for keys a set match compares as the probe's check does (no
    NULL, no float: NaN and NULL compare by Spark's rules there), and files with a row count."""
    if not rows or any(r is None for r in rows) or any(keys.column(c).null_count for c in ctx.index_columns):
        return False
    if any(pa.types.is_floating(ctx.schema.field(c).type) for c in ctx.index_columns):
        return False
    return keys.num_rows * INDEX_ROWS_PER_KEY >= sum(rows)


def _by_key_columns(ctx: ReadContext, files: list[AddFile], keys: pa.Table, read_cols: list[str]) -> pa.Table:
    """The live rows of ``files`` whose index columns equal one of ``keys``, with
    ``read_cols`` and their locators, each file read whole in those columns."""
    key_cols = list(ctx.index_columns)
    parts = []
    for a in files:
        rows = read_file(ctx.storage, a.path, ctx.schema, read_cols, ctx.version, a.partitionValues)
        at = matching_ordinals(rows.select(key_cols), keys.select(key_cols))
        deleted = deleted_rows(ctx, a.path)
        if deleted is not None and len(at):
            at = at[~np.isin(at, deleted)]
        if len(at):
            parts.append(with_locators(rows.take(pa.array(at)), np.full(len(at), a.fileId, np.int64), at))
    if not parts:
        return with_locators(plain(ctx.schema).empty_table().select(read_cols), np.empty(0, np.int64),
                              np.empty(0, np.int64))
    return pa.concat_tables(parts)


def matching_ordinals(rows: pa.Table, keys: pa.Table) -> np.ndarray:
    """Ordinals (sorted) of ``rows`` whose columns equal those of a row of ``keys``."""
    if rows.num_columns == 1 and _orderable(rows.column(0)):
        values = rows.column(0).to_numpy()
        if len(values) < 2 or bool(np.all(values[1:] >= values[:-1])):
            # A sorted file (as optimize and changes write them): each key's rows are one
            # range, found by binary search instead of a hash probe of every row.
            probes = distinct(keys.column(0).to_numpy())
            lo, hi = np.searchsorted(values, probes, "left"), np.searchsorted(values, probes, "right")
            return expand_ranges(lo, hi)
    if rows.num_columns == 1:
        mask = pc.is_in(rows.column(0), value_set=keys.column(0).combine_chunks())
        return np.flatnonzero(np.asarray(pc.fill_null(mask, False)))
    ordinal = "__locate_ordinal"
    joined = rows.append_column(ordinal, pa.array(np.arange(rows.num_rows, dtype=np.int64))).join(
        keys, keys=rows.column_names, join_type="inner", use_threads=False)
    return np.sort(joined.column(ordinal).to_numpy())


def _orderable(column: pa.ChunkedArray) -> bool:
    """Whether a key column compares as numpy compares its values (integers, dates and
    timestamps without NULLs)."""
    t = column.type
    return column.null_count == 0 and (pa.types.is_integer(t) or pa.types.is_date(t) or pa.types.is_timestamp(t))


def _matching_entries(ctx: ReadContext, f: IndexFile, probes: np.ndarray) -> Segment:
    """The entries of index file ``f`` whose hash is one of ``probes`` (sorted, distinct),
    reading only the row groups whose hash range can hold one."""
    footer = index_footer(ctx, f.path)
    groups = np.flatnonzero(np.searchsorted(probes, footer.highs, "right")
                            > np.searchsorted(probes, footer.lows, "left"))
    if len(groups) == 0:
        return Segment.from_entries(f.path, _ENTRY_SCHEMA.empty_table())
    table = read_index_groups(ctx, f.path, footer, groups.tolist())
    hashes = table.column("hash").to_numpy()
    if len(hashes) > 1 and not np.all(hashes[1:] >= hashes[:-1]):  # a file out of order: tolerated
        at = np.flatnonzero(np.isin(hashes, probes))
    else:
        at = expand_ranges(np.searchsorted(hashes, probes, "left"), np.searchsorted(hashes, probes, "right"))
    return Segment.from_entries(f.path, table.take(pa.array(at, pa.int64())))


# A schema, not an empty table: building any Arrow array or table makes pyarrow import pandas
# (half a second), which a module imported by Spark's planner processes must not do on import.
_ENTRY_SCHEMA = pa.schema([("hash", pa.uint32()), ("file_id", pa.int64()), ("row", pa.int32())])
