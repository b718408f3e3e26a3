"""The tasks of ``optimize`` as a Spark job, apart from the job that runs them: what a
rewrite task (stage 1) and a merge task (stage 2) do, as picklable jobs, and the actions the
driver commits from what they return.

No index entry crosses into the JVM: a rewrite task writes the entries of the rows it wrote
as index files itself (one a touched index bucket, sorted as every build sorts them), and what
passes between the stages is one small row per file (a data file's ``add``, an index file's
descriptor, a marker of a rewritten index bucket). A merge task gets an index bucket's rows
together and leaves one file per index bucket, as the single-process optimize does: the one
file a rewrite task wrote as it is when nothing else lands in that bucket, else the files'
entries and those the bucket's rewritten files keep merged into one (the merged-away files
deleted).

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
from ..writer.index_files import DataPiece, entry_arrays, entry_order, read_entries, write_entries
from ..writer.lifecycle import Progress, say
from ..writer.maintenance import FOREIGN, OPTIMIZE_BATCH_BYTES, OptimizePlan
from ..writer.operations import MAX_BUCKETS
from .index_tasks import WRITE_CHUNK_ENTRIES, balanced_groups
from .job_fence import JobFence
from .options import shared_storage

ENTRY_SCHEMA = "key int, json string"
"""A row between the two stages: a new data file (``key`` NULL, ``json`` its ``add``), an
index file a rewrite task wrote (``key``: its index's position times :data:`KEY_STRIDE` plus
its index bucket; ``json`` its descriptor) or a marker that an index bucket's files are
rewritten (``json`` NULL: its merge task runs though no new file lands there). One int key:
Spark shuffles and sorts it cheaper than a name and a bucket."""
ENTRY_ARROW = pa.schema([("key", pa.int32()), ("json", pa.string())])
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
    """Per ACTIVE index: its first key, its columns, its bucket count, its name (the folder of
    its files)."""
    units: list[list[str]]
    tasks: list[list[int]]
    """The units (by position) of each task: about equal bytes."""
    markers: list[int]
    """The keys of the index buckets whose files are rewritten."""
    fence: JobFence
    """The job's fence (``job_fence.py``): a task of a failed job stops and deletes its files."""

    @classmethod
    def of(cls, snapshot: Snapshot, plan: OptimizePlan, tasks: int, fence: JobFence) -> "RewriteJob":
        """The job of ``plan`` over ``snapshot``, in at most ``tasks`` tasks, fenced by ``fence``."""
        storage, meta = snapshot.storage, snapshot.metadata
        # The plan's bucket count: the table's, or the new one of optimize(num_buckets=...).
        layout = (list(meta.indexColumns), plan.num_buckets,
                  config.get(meta.configuration, "indexeddf.targetRowGroupBytes"), tuple(meta.partitionColumns),
                  codec_of(meta.configuration), page_size_of(meta.configuration))
        units = units_of(plan.groups)
        return cls(
            storage.url, storage.storage_options, snapshot.version, table_schema(meta), layout,
            [(i * KEY_STRIDE, list(e.columns), e.numBuckets, e.name) for i, e in enumerate(plan.indexes)],
            [[a.model_copy(update={"stats": None}).model_dump_json(by_alias=True) for a in unit] for unit in units],
            balanced_groups([sum(a.size for a in unit) for unit in units], tasks),
            [i * KEY_STRIDE + b for i, e in enumerate(plan.indexes) for b in rewritten_by_bucket(e, plan.rewrite[e.name])],
            fence)

    def run(self, task: int) -> Iterator[pa.RecordBatch]:
        """Task ``task``'s rows (``ENTRY_ARROW``): its units rewritten one at a time, the
        entries of the rows it wrote collected per index and written as index files (one a
        touched index bucket and chunk of ``WRITE_CHUNK_ENTRIES``). A failure, or the job's
        (its fence), deletes every file the task wrote."""
        storage = shared_storage(self.url, self.options)
        written: list[str] = []
        entries = _TaskEntries(storage, self.indexes, written)
        out: list[pa.RecordBatch] = []
        with self.fence.task(storage, written):  # a failure deletes every file the task wrote
            for u in self.tasks[task]:
                self.fence.check(storage)  # another task failed: stop
                adds = [AddFile.model_validate_json(j) for j in self.units[u]]
                out.append(_rewrite_unit(storage, adds, self.schema, self.version, self.layout, entries, written))
                out += entries.flush(full_only=True)
            out += entries.flush(full_only=False)
        yield from out

    def marker_batch(self) -> pa.RecordBatch:
        """A row per index bucket whose files are rewritten (``json`` NULL): its merge task
        runs though no new file lands there."""
        return pa.record_batch([pa.array(self.markers, pa.int32()), pa.nulls(len(self.markers), pa.string())],
                               schema=ENTRY_ARROW)


@dataclass
class MergeJob:
    """Stage 2, for every task: per ACTIVE index, its name, the rewritten files per index
    bucket that keep some entry (JSON) and the data file ids whose entries are kept."""

    url: str
    options: dict
    names: list[str]
    old: list[dict]
    """Per index, index bucket -> its rewritten files that name a kept data file: the only
    ones a merge reads (the others' entries are all dropped)."""
    keep: list
    fence: JobFence
    """The job's fence (``job_fence.py``), as the rewrite tasks'."""

    @classmethod
    def of(cls, snapshot: Snapshot, plan: OptimizePlan, fence: JobFence) -> "MergeJob":
        """The job of ``plan`` over ``snapshot``, fenced by ``fence``."""
        storage = snapshot.storage
        keep = [kept_ids(e, plan.rewrite[e.name], plan.keep_ids) for e in plan.indexes]
        old = []
        for e, ids in zip(plan.indexes, keep):
            kept = set(ids.tolist())
            old.append({b: [f.model_dump_json() for f in fs if kept.intersection(f.fileIds)]
                        for b, fs in rewritten_by_bucket(e, plan.rewrite[e.name]).items()})
        return cls(storage.url, storage.storage_options, [e.name for e in plan.indexes], old, keep, fence)

    def pairs(self, plan: OptimizePlan) -> int:
        """The (index, index bucket) keys there may be: the most merge tasks that get work."""
        return sum(e.numBuckets for e in plan.indexes)

    def run(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """A merge task over rows sorted by key: one index file per index bucket
        (:meth:`merge`); the adds pass through (``RESULT_ARROW``). A failure deletes the index
        files the task wrote, as does the job's (its fence)."""
        storage = shared_storage(self.url, self.options)
        written: list[str] = []
        with self.fence.task(storage, written):  # a failure deletes this task's index files
            for key, run in _runs(batches):
                if key is None:  # the adds
                    yield from pa.table([pa.nulls(run.num_rows, pa.string()), run.column("json")],
                                        schema=RESULT_ARROW).to_batches()
                    continue
                i, bucket = divmod(key, KEY_STRIDE)
                new = [IndexFile.model_validate_json(j) for j in run.column("json").to_pylist() if j is not None]
                f = self.merge(storage, i, bucket, new, written)
                if f is not None:
                    yield pa.RecordBatch.from_pylist([{"name": self.names[i], "json": f.model_dump_json()}],
                                                     schema=RESULT_ARROW)

    def merge(self, storage, i: int, bucket: int, new: list[IndexFile], written: list[str]) -> IndexFile | None:
        """Index ``i``'s one file of ``bucket``: the one file a rewrite task wrote there when no
        rewritten file keeps an entry (no read, no write), else the entries of ``new`` and those
        the rewritten files keep merged into one (``merge_bucket``) and ``new`` deleted; None
        when no entry is left."""
        old = [IndexFile.model_validate_json(j) for j in self.old[i].get(bucket, ())]
        if not old and len(new) <= 1:
            return new[0] if new else None
        added = None
        if new:  # the new files hold only entries of new data files: all are kept
            parts = [read_entries(storage, f) for f in new]
            added = tuple(np.concatenate([t.column(c).to_numpy() for t in parts]) for c in ("hash", "file_id", "row"))
        f = merge_bucket(storage, old, self.keep[i], added, self.names[i], bucket, written)
        for n in new:  # merged away: no version will name them
            storage.delete(n.path)
        return f


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
                  entries: "_TaskEntries", written: list[str]) -> pa.RecordBatch:
    """One unit rewritten as ``rewrite_here`` rewrites a batch: its live rows read and
    written by bucket (and partition); the new files' adds (a batch of ``ENTRY_ARROW``), their
    rows' index entries handed to ``entries``. New paths go into ``written``."""
    index_columns, num_buckets, rg_bytes, partition_columns, codec, page_size = layout
    rows = pa.concat_tables([read_live_rows(storage, a, schema, version=version) for a in adds])
    new = write_bucketed_pieces(storage, rows, index_columns, num_buckets, rg_bytes, written,
                                partition_columns, schema, codec, page_size)
    out = []
    for add, file_rows in new:
        add = add.model_copy(update={"dataChange": False})
        out.append(add.model_dump_json(by_alias=True))
        entries.add(add.fileId, file_rows)
    return pa.record_batch([pa.nulls(len(out), pa.int32()), pa.array(out, pa.string())], schema=ENTRY_ARROW)


class _TaskEntries:
    """A rewrite task's index entries, per index, until written: a chunk of
    ``WRITE_CHUNK_ENTRIES`` an index sorted by index bucket, hash, file id and row
    (``entry_order``, as every build sorts them) and written as one index file per index
    bucket into the index's folder (``write_entries``). Memory: a chunk of entries an index,
    not the task's rows."""

    def __init__(self, storage, indexes: list[tuple], written: list[str]):
        self.storage, self.indexes, self.written = storage, indexes, written
        self.parts: list[list[tuple]] = [[] for _ in indexes]

    def add(self, file_id: int, rows: pa.Table) -> None:
        """The entries of a new data file's ``rows`` (in file order) in every index."""
        for parts, (_, columns, buckets, _) in zip(self.parts, self.indexes):
            found = entry_arrays(columns, buckets, [DataPiece(file_id, rows.select(columns))])
            if found is not None:
                parts.append(found)

    def flush(self, full_only: bool) -> list[pa.RecordBatch]:
        """Write the entries of each index (with ``full_only``, only of an index holding a
        whole chunk); a batch of ``ENTRY_ARROW`` per index written, a row per file."""
        out = []
        for i, (base, _, _, name) in enumerate(self.indexes):
            parts = self.parts[i]
            if not parts or (full_only and sum(len(p[0]) for p in parts) < WRITE_CHUNK_ENTRIES):
                continue
            hashes, file_ids, rows, buckets = (np.concatenate([p[j] for p in parts]) for j in range(4))
            self.parts[i] = []
            order = entry_order(buckets, hashes, file_ids, rows)
            files = write_entries(self.storage, name, hashes[order].astype(np.uint32), file_ids[order],
                                  rows[order].astype(np.int32), buckets[order], self.written)
            out.append(pa.record_batch([pa.array([base + f.bucket for f in files], pa.int32()),
                                        pa.array([f.model_dump_json() for f in files], pa.string())],
                                       schema=ENTRY_ARROW))
        return out


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
