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

from ..format.snapshot import Snapshot
from ..spec.actions import AddFile, FileStats, IndexEntry, IndexFile
from ..spec.column_mapping import table_schema
from ..writer.bucket_merge import ENTRY_CHUNK, EntryChunks, layout_of, merge_index_bucket, rewrite_unit
from ..writer.index_compaction import kept_ids, rewritten_by_bucket
from ..writer.lifecycle import Progress, say
from ..writer.maintenance import OptimizePlan, units_of
from ..writer.operations import MAX_BUCKETS
from .index_tasks import balanced_groups
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


@dataclass
class RewriteJob:
    """Stage 1, for every task: the units (each a group's files, as JSON adds without their
    statistics but the row count) each task rewrites, one at a time, and what they are rewritten as."""

    url: str
    options: dict
    version: int
    schema: pa.Schema
    layout: tuple
    """What the units are rewritten as (``bucket_merge.layout_of``)."""
    indexes: list[tuple]
    """Per ACTIVE index: its first key, its columns, its bucket count, its name (the folder of
    its files)."""
    units: list[list[str]]
    bucketed: list[bool]
    """Per unit: whether it is a bucket's group (``units_of``)."""
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
        layout = layout_of(meta, plan.num_buckets)
        units, bucketed = zip(*units_of(plan.groups)) if plan.groups else ((), ())
        return cls(
            storage.url, storage.storage_options, snapshot.version, table_schema(meta), layout,
            [(i * KEY_STRIDE, list(e.columns), e.numBuckets, e.name) for i, e in enumerate(plan.indexes)],
            [[_without_bounds(a).model_dump_json(by_alias=True) for a in unit] for unit in units],
            list(bucketed), balanced_groups([sum(a.size for a in unit) for unit in units], tasks),
            [i * KEY_STRIDE + b for i, e in enumerate(plan.indexes) for b in rewritten_by_bucket(e, plan.rewrite[e.name])],
            fence)

    def run(self, task: int) -> Iterator[pa.RecordBatch]:
        """Task ``task``'s rows (``ENTRY_ARROW``): its units rewritten one at a time, the
        entries of the rows it wrote collected per index and written as index files (one a
        touched index bucket and chunk of ``ENTRY_CHUNK``). A failure, or the job's
        (its fence), deletes every file the task wrote."""
        storage = shared_storage(self.url, self.options)
        written: list[str] = []
        entries = EntryChunks(storage, [(columns, buckets, name) for _, columns, buckets, name in self.indexes],
                              written, ENTRY_CHUNK)
        out: list[pa.RecordBatch] = []
        with self.fence.task(storage, written):  # a failure deletes every file the task wrote
            for u in self.tasks[task]:
                self.fence.check(storage)  # another task failed: stop
                adds = [AddFile.model_validate_json(j) for j in self.units[u]]
                new = rewrite_unit(storage, adds, self.bucketed[u], self.schema, self.version, self.layout, entries.add, written)
                out.append(pa.record_batch([pa.nulls(len(new), pa.int32()),
                                            pa.array([a.model_dump_json(by_alias=True) for a in new], pa.string())],
                                           schema=ENTRY_ARROW))
                out += self._index_batches(entries.flush(full_only=True))
            out += self._index_batches(entries.flush(full_only=False))
        yield from out

    def _index_batches(self, flushed: list[tuple[int, list[IndexFile]]]) -> list[pa.RecordBatch]:
        """A batch of ``ENTRY_ARROW`` per index whose entries were written, a row per file."""
        return [pa.record_batch([pa.array([self.indexes[i][0] + f.bucket for f in files], pa.int32()),
                                 pa.array([f.model_dump_json() for f in files], pa.string())], schema=ENTRY_ARROW)
                for i, files in flushed]

    def marker_batch(self) -> pa.RecordBatch:
        """A row per index bucket whose files are rewritten (``json`` NULL): its merge task
        runs though no new file lands there."""
        return pa.record_batch([pa.array(self.markers, pa.int32()), pa.nulls(len(self.markers), pa.string())],
                               schema=ENTRY_ARROW)


def _without_bounds(a: AddFile) -> AddFile:
    """``a`` with only the row count of its statistics (a merge sizes its bloom filters by
    it): the bounds would only grow the job."""
    return a.model_copy(update={"stats": None if a.stats is None else FileStats(numRecords=a.stats.numRecords)})


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
        return merge_index_bucket(storage, self.names[i], bucket, old, self.keep[i], new, written)


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
