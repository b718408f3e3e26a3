"""The Python tasks' share of an index build: a data file's entries read through the project's
reader (``format/datafiles.py``) and hashed with ``spec/bucketing.py``, the files split into
groups of about equal bytes (a task each), and a task's entries sorted a chunk at a time and
written as index files.

Used by ``create_index(spark=)`` / ``refresh(spark=)`` / ``convert(spark=)`` (``maintenance.py``:
Python tasks of an RDD that read, hash, sort and write) and by SQL ``CREATE INDEX`` / ``REFRESH
INDEX`` / ``CONVERT TO INDEXEDDF`` (``index_statements.py``: the tasks of a write of the Python
data source, which do the same). This module imports nothing of ``indexeddf.spark`` but its
options, so the data source can use it.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np
import pyarrow as pa

from ..format.datafiles import iter_live_row_groups
from ..spec.actions import AddFile, IndexFile
from ..spec.bucketing import bucket_ids_and_key_hash
from ..writer.bucket_merge import ENTRY_CHUNK
from ..writer.index_files import write_sorted_entries
from .job_fence import JobFence

Entries = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""Index entries in a task, between its read and its sort: key hashes (uint32), file ids
(int64), row ordinals (int32) and index buckets (int32), as ``write_sorted_entries`` takes
them (no entry leaves the task's Python process, so they stay numpy arrays)."""
READ_ROWS = 1 << 17
"""Rows of a data file a build task reads, hashes and hands on at a time (consecutive row
groups read together): a file's row groups hold about 12K rows of the check table, and each
read, hash and batch has a fixed cost; 128K keys of 64 characters are 8 MB."""
TASKS_PER_CORE = 1
"""Python tasks a core of the session (``defaultParallelism``): each writes a file per index
bucket and chunk, so fewer, bigger tasks write fewer index files."""


def task_add(add: AddFile) -> str:
    """An add as a build task takes it: JSON without its statistics (a task needs a file's
    path, size, partition values and deletion vector; a checkpoint's statistics are lazy)."""
    return add.model_copy(update={"stats": None}).model_dump_json(by_alias=True)


def files_entries(storage, adds: list[str], schema: pa.Schema, columns: list[str], num_buckets: int,
                  version: int, fence: JobFence) -> Iterator[Entries]:
    """The entries of the files ``adds`` (:func:`task_add`'s JSON), a few row groups at a time
    (:func:`file_entries`); stops between files when ``fence`` (the job's) says the job failed."""
    for add in adds:
        fence.check(storage)
        yield from file_entries(storage, AddFile.model_validate_json(add), schema, columns, num_buckets, version)


def balanced_groups(sizes: list[int], tasks: int) -> list[list[int]]:
    """The files (by position) of each read task: ``tasks`` groups of about equal bytes,
    biggest file first to the lightest group. Each Python task costs a worker round trip,
    so a few tasks a core beat one a file; a task reads a few row groups at a time, so its
    memory does not grow with its files."""
    groups: list[list[int]] = [[] for _ in range(max(1, min(tasks, len(sizes))))]
    load = [0] * len(groups)
    for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        g = load.index(min(load))
        groups[g].append(i)
        load[g] += sizes[i]
    return groups


def file_entries(storage, add: AddFile, schema: pa.Schema, columns: list[str], num_buckets: int,
                 version: int) -> Iterator[Entries]:
    """The entries of one data file's live rows, :data:`READ_ROWS` rows at a time (a task's
    memory is that many keys and a row group's)."""
    for ordinals, rows in iter_live_row_groups(storage, add, schema, columns, version, use_threads=False,
                                               min_rows=READ_ROWS):
        if not rows.num_rows:
            continue
        buckets, hashes = bucket_ids_and_key_hash([rows.column(c) for c in columns], num_buckets)
        yield (hashes, np.full(rows.num_rows, add.fileId, dtype=np.int64), ordinals.astype(np.int32),
               buckets.astype(np.int32, copy=False))


def write_entry_batches(storage, rel_dir: str, batches: Iterator[Entries], fence: JobFence) -> list[IndexFile]:
    """A write task's index files: its entry batches (:data:`Entries`) sorted a chunk of
    :data:`ENTRY_CHUNK` at a time, one file per index bucket and chunk, under
    ``rel_dir``. On a failure, or the job's (its ``fence``), the files it wrote are deleted
    (nothing of the task is committed)."""
    written: list[str] = []
    done: list[IndexFile] = []
    with fence.task(storage, written):
        for parts in _chunks(batches):
            fence.check(storage)  # another task failed: stop
            done += _write_chunk(storage, rel_dir, parts, written)
    return done


def _chunks(batches: Iterator[Entries]) -> Iterator[list[Entries]]:
    """Entry batches regrouped into runs of about :data:`ENTRY_CHUNK` entries."""
    parts, count = [], 0
    for batch in batches:
        parts.append(batch)
        count += len(batch[0])
        if count >= ENTRY_CHUNK:
            yield parts
            parts, count = [], 0
    if parts:
        yield parts


def _write_chunk(storage, rel_dir: str, parts: list[Entries], written: list[str]) -> list[IndexFile]:
    """The index files of one chunk of entries: sorted by bucket, hash, file id and row as
    ``build_index_files`` sorts them, one file per bucket."""
    entries = [np.concatenate([p[i] for p in parts]) for i in range(4)]
    if not len(entries[0]):
        return []
    return write_sorted_entries(storage, rel_dir, *entries, written)
