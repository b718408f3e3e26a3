"""The tasks of ``optimize`` as a Spark job, apart from the job that runs them: what a
rewrite task (stage 1) and a merge task (stage 2) do, as picklable jobs, and the actions the
driver commits from what they return.

``optimize.py`` runs them in ``mapInArrow`` tasks (``optimize(spark=)``);
``optimize_statement.py`` runs them as the reader and the writer of the Python data source
(SQL ``OPTIMIZE`` on executors, the connector shuffling between them). This module imports
nothing of ``indexeddf.spark`` but the storage check and the task helpers, so the data
source can use it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..format.datafiles import read_live_rows
from ..format.snapshot import Snapshot
from ..spec import config
from ..spec.actions import AddFile, IndexEntry, IndexFile
from ..spec.column_mapping import table_schema
from ..writer.files import codec_of, page_size_of, write_bucketed_pieces
from ..writer.index_compaction import kept_ids, merge_bucket, rewritten_by_bucket
from ..writer.index_files import DataPiece, entry_arrays
from ..writer.lifecycle import Progress, say
from ..writer.maintenance import FOREIGN, OPTIMIZE_BATCH_BYTES, OptimizePlan
from ..writer.operations import MAX_BUCKETS
from .index_tasks import balanced_groups
from .options import shared_storage

ENTRY_SCHEMA = "key int, hash long, file_id long, row int, add string"
"""A row between the two stages: an index entry (``key``: its index's position times :data:`KEY_STRIDE` plus its index
bucket; ``add`` NULL), a new data file (``add``, its action as JSON; the rest
NULL) or a marker that an index bucket's files are rewritten though no new entry lands
there (``file_id`` NULL). One int key: Spark shuffles and sorts it cheaper than a name and
a bucket."""
ENTRY_ARROW = pa.schema([("key", pa.int32()), ("hash", pa.int64()), ("file_id", pa.int64()), ("row", pa.int32()),
                         ("add", pa.string())])
RESULT_SCHEMA = "name string, json string"
"""What the job returns: an ``add`` (``name`` NULL) or an index file of index ``name``, as JSON."""
RESULT_ARROW = pa.schema([("name", pa.string()), ("json", pa.string())])
KEY_STRIDE = MAX_BUCKETS + 1
"""Keys of one index's buckets: index i's bucket b is ``i * KEY_STRIDE + b``."""
TASKS_PER_CORE = 2
"""Rewrite tasks a core of the session: a task rewrites its groups one after another, so
more tasks than cores even out groups of unequal size."""


def units_of(groups: dict) -> list[list[AddFile]]:
    """The files each rewrite unit reads at once: a group's files (they become one file),
    files without a bucket in chunks of about ``OPTIMIZE_BATCH_BYTES`` (as the
    single-process path batches them)."""
    units = []
    for group, files in groups.items():
        if (group[0] if isinstance(group, tuple) else group) != FOREIGN:
            units.append(list(files))
            continue
        unit, size = [], 0
        for a in files:
            unit.append(a)
            size += a.size
            if size >= OPTIMIZE_BATCH_BYTES:
                units.append(unit)
                unit, size = [], 0
        if unit:
            units.append(unit)
    return units




@dataclass
class RewriteJob:
    """Stage 1, for every task: the units (each a group's files, as JSON adds without their
    statistics) each task rewrites, one at a time, and what they are rewritten as."""

    url: str
    options: dict
    version: int
    schema: pa.Schema
    layout: tuple
    """Index columns, bucket count, row group bytes, partition columns of the table."""
    indexes: list[tuple]
    """Per ACTIVE index: its first key, its columns, its bucket count."""
    units: list[list[str]]
    tasks: list[list[int]]
    """The units (by position) of each task: about equal bytes."""
    markers: list[int]
    """The keys of the index buckets whose files are rewritten."""

    @classmethod
    def of(cls, snapshot: Snapshot, plan: OptimizePlan, tasks: int) -> "RewriteJob":
        """The job of ``plan`` over ``snapshot``, in at most ``tasks`` tasks."""
        storage, meta = snapshot.storage, snapshot.metadata
        # The plan's bucket count: the table's, or the new one of optimize(num_buckets=...).
        layout = (list(meta.indexColumns), plan.num_buckets,
                  config.get(meta.configuration, "indexeddf.targetRowGroupBytes"), tuple(meta.partitionColumns),
                  codec_of(meta.configuration), page_size_of(meta.configuration))
        units = units_of(plan.groups)
        return cls(
            storage.url, storage.storage_options, snapshot.version, table_schema(meta), layout,
            [(i * KEY_STRIDE, list(e.columns), e.numBuckets) for i, e in enumerate(plan.indexes)],
            [[a.model_copy(update={"stats": None}).model_dump_json(by_alias=True) for a in unit] for unit in units],
            balanced_groups([sum(a.size for a in unit) for unit in units], tasks),
            [i * KEY_STRIDE + b for i, e in enumerate(plan.indexes) for b in rewritten_by_bucket(e, plan.rewrite[e.name])])

    def run(self, task: int) -> Iterator[pa.RecordBatch]:
        """Task ``task``'s rows (``ENTRY_ARROW``): its units rewritten one at a time."""
        storage = shared_storage(self.url, self.options)
        for u in self.tasks[task]:
            adds = [AddFile.model_validate_json(j) for j in self.units[u]]
            yield from _rewrite_unit(storage, adds, self.schema, self.version, self.layout, self.indexes)

    def marker_batch(self) -> pa.RecordBatch:
        """A row per index bucket whose files are rewritten (``file_id`` NULL): its merge
        task runs though no new entry lands there."""
        n = len(self.markers)
        return pa.record_batch([pa.array(self.markers, pa.int32()), pa.nulls(n, pa.int64()), pa.nulls(n, pa.int64()),
                                pa.nulls(n, pa.int32()), pa.nulls(n, pa.string())], schema=ENTRY_ARROW)


@dataclass
class MergeJob:
    """Stage 2, for every task: per ACTIVE index, its name, its rewritten files per index
    bucket (JSON) and the data file ids whose entries are kept."""

    url: str
    options: dict
    names: list[str]
    old: list[dict]
    keep: list

    @classmethod
    def of(cls, snapshot: Snapshot, plan: OptimizePlan) -> "MergeJob":
        """The job of ``plan`` over ``snapshot``."""
        storage = snapshot.storage
        return cls(storage.url, storage.storage_options, [e.name for e in plan.indexes],
                   [{b: [f.model_dump_json() for f in fs] for b, fs in rewritten_by_bucket(e, plan.rewrite[e.name]).items()}
                    for e in plan.indexes],
                   [kept_ids(e, plan.rewrite[e.name], plan.keep_ids) for e in plan.indexes])

    def pairs(self, plan: OptimizePlan) -> int:
        """The (index, index bucket) keys there may be: the most merge tasks that get work."""
        return sum(e.numBuckets for e in plan.indexes)

    def run(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """A merge task over rows sorted by key: one index file per index bucket, merging the
        entries the bucket's rewritten files keep; the adds pass through (``RESULT_ARROW``).
        A failure deletes the index files the task wrote."""
        storage = shared_storage(self.url, self.options)
        written: list[str] = []
        try:
            for key, run in _runs(batches):
                if key is None:  # the adds
                    yield from pa.table([pa.nulls(run.num_rows, pa.string()), run.column("add")],
                                        schema=RESULT_ARROW).to_batches()
                    continue
                i, bucket = divmod(key, KEY_STRIDE)
                new = run.filter(run.column("file_id").is_valid())
                added = None if not new.num_rows else (new.column("hash").to_numpy().astype(np.uint32),
                                                        new.column("file_id").to_numpy(), new.column("row").to_numpy())
                files = [IndexFile.model_validate_json(j) for j in self.old[i].get(bucket, ())]
                f = merge_bucket(storage, files, self.keep[i], added, self.names[i], bucket, written)
                if f is not None:
                    yield pa.RecordBatch.from_pylist([{"name": self.names[i], "json": f.model_dump_json()}],
                                                     schema=RESULT_ARROW)
        except BaseException:
            for path in written:  # the job fails; this task's index files are not committed
                storage.delete(path)
            raise


def plan_actions(plan: OptimizePlan, results: list[tuple[str | None, str]], written: list[str],
                 progress: Progress = None) -> tuple[list[AddFile], list[IndexEntry]]:
    """The ``add`` and ``index`` actions of ``plan`` from what the merge tasks returned
    (``(None, add JSON)`` or ``(index name, index file JSON)``); the new paths go into
    ``written`` (a failed commit deletes them)."""
    adds = [AddFile.model_validate_json(j) for name, j in results if name is None]
    new_files: dict[str, list[IndexFile]] = {e.name: [] for e in plan.indexes}
    for name, j in results:
        if name is not None:
            new_files[name].append(IndexFile.model_validate_json(j))
    written.extend([a.path for a in adds] + [f.path for fs in new_files.values() for f in fs])
    adds.sort(key=lambda a: (repr(sorted(a.partitionValues.items())), a.bucket, a.path))
    for a in adds:
        say(progress, f"optimize: bucket {a.bucket}: {a.stats.numRecords if a.stats else '?'} rows -> 1 file "
                      f"({a.size} bytes)")
    actions = []
    for entry in plan.indexes:
        by_bucket = rewritten_by_bucket(entry, plan.rewrite[entry.name])
        gone = [f.path for b in sorted(by_bucket) for f in by_bucket[b]]
        files = sorted(new_files[entry.name], key=lambda f: (f.bucket, f.path))
        actions.append(entry.model_copy(update={"files": tuple(files), "removedFiles": tuple(gone)}))
        say(progress, f"optimize: index {entry.name}: {len(gone)} index files -> {len(files)}")
    return adds, actions


def _rewrite_unit(storage, adds: list[AddFile], schema: pa.Schema, version: int, layout: tuple,
                  indexes: list[tuple]) -> Iterator[pa.RecordBatch]:
    """One unit rewritten as ``rewrite_here`` rewrites a batch: its live rows read and
    written by bucket (and partition); the new files' adds and their rows' index entries.
    A failure deletes the files this unit wrote."""
    index_columns, num_buckets, rg_bytes, partition_columns, codec, page_size = layout
    written: list[str] = []
    try:
        rows = pa.concat_tables([read_live_rows(storage, a, schema, version=version) for a in adds])
        new = write_bucketed_pieces(storage, rows, index_columns, num_buckets, rg_bytes, written,
                                    partition_columns, schema, codec, page_size)
        out = []
        for add, file_rows in new:
            add = add.model_copy(update={"dataChange": False})
            out.append(pa.RecordBatch.from_pylist([{"add": add.model_dump_json(by_alias=True)}], schema=ENTRY_ARROW))
            for base, columns, buckets in indexes:
                found = entry_arrays(columns, buckets, [DataPiece(add.fileId, file_rows.select(columns))])
                if found is not None:
                    out.append(_entry_batch(base, *found))
    except BaseException:
        for path in written:  # the job fails; nothing of this unit is committed
            storage.delete(path)
        raise
    yield from out


def _entry_batch(base: int, hashes, file_ids, rows, buckets) -> pa.RecordBatch:
    n = len(hashes)
    return pa.record_batch([
        pa.array((base + buckets).astype(np.int32), pa.int32()),
        pa.array(hashes.astype(np.int64), pa.int64()), pa.array(file_ids, pa.int64()),
        pa.array(rows.astype(np.int32), pa.int32()), pa.nulls(n, pa.string()),
    ], schema=ENTRY_ARROW)


def _runs(batches: Iterator[pa.RecordBatch]) -> Iterator[tuple]:
    """Consecutive rows of one key (index bucket) as one table, key None for the adds; rows
    arrive sorted by key, so one index bucket is in memory at a time."""
    key, parts = None, []
    for batch in batches:
        if not batch.num_rows:
            continue
        # Run boundaries found with numpy (a row-by-row loop in Python costs seconds a million).
        keys = pc.fill_null(batch.column("key"), -1).to_numpy()
        starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
        ends = np.r_[starts[1:], batch.num_rows]
        for s, e in zip(starts.tolist(), ends.tolist()):
            k = None if keys[s] < 0 else int(keys[s])
            if parts and k != key:
                yield key, pa.Table.from_batches(parts).combine_chunks()
                parts = []
            key = k
            parts.append(batch.slice(s, e - s))
    if parts:
        yield key, pa.Table.from_batches(parts).combine_chunks()
