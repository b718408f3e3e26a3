"""Index builds as Spark jobs: ``create_index`` and ``refresh`` with ``spark=``.

The driver plans and commits once, through the same index lifecycle as the single-process
path (``writer/lifecycle.py``); only the work between the two commits (reading keys,
hashing, sorting, writing index files) runs on the executors, in one Spark job:

one Python task a core (``index_tasks.TASKS_PER_CORE``), each given a group of data files of
about equal bytes, read their index columns through the project's reader a few row groups at a
time (``index_tasks.file_entries``: deletion vectors, column mapping, partition values as in
this process), hash them with ``spec/bucketing.py``, sort the entries a chunk of
``writer.bucket_merge.ENTRY_CHUNK`` at a time (``writer/index_files.py`` ``entry_order``) and
write one index file per index bucket and chunk (``write_index_file``, as the single-process
build writes one per bucket and chunk of data); each task returns its files' descriptors, and a
failing task deletes what it wrote. No entry crosses into the JVM and there is no second stage:
the job costs about the CPU of the single-process build, spread over the cores.

SQL ``CREATE INDEX`` / ``REFRESH INDEX`` / ``CONVERT TO INDEXEDDF`` run the same tasks in a write
of the Python data source (``index_statements.py``). Measured (``benchmarks/maintenance_spark.py``):
Spark's own Parquet scan and ``hash()`` with the entries handed to Python tasks spent most of its
CPU in the JVM turning rows into Arrow batches, more than the whole build costs here.

The files go under the operation's ``pendingDir``, so a failed job leaves nothing a
``cancel_index`` (run by the failing operation itself) or ``vacuum`` does not delete.
"""

from __future__ import annotations

import uuid
from typing import Iterator

from ..spec.actions import AddFile, IndexEntry, IndexFile
from ..spec.column_mapping import table_schema
from ..writer.index_files import INDEX_DIR
from ..writer.lifecycle import Progress, say
from .index_tasks import TASKS_PER_CORE, balanced_groups, files_entries, task_add, write_entry_batches
from .job_fence import JobFence
from .options import shared_storage


def spark_build(spark):
    """A ``build`` for ``writer.lifecycle`` operations (the signature of
    ``lifecycle.build_files``) that builds the index files in a Spark job of ``spark``."""

    def build(snapshot, entry: IndexEntry, data_files, written: list[str], dir_name: str,
              progress: Progress = None) -> list[IndexFile]:
        return build_files(spark, snapshot, entry, list(data_files), written, dir_name, progress)

    return build


def build_files(spark, snapshot, entry: IndexEntry, data_files: list[AddFile], written: list[str], dir_name: str,
                progress: Progress = None) -> list[IndexFile]:
    """Index files of ``entry`` for ``data_files``, written under ``dir_name`` by one Spark
    job; their paths are added to ``written`` (the transaction deletes them if the commit
    fails). Entries equal those of ``lifecycle.build_files`` for the same files."""
    if not data_files:
        say(progress, f"index {entry.name}: no data files to index")
        return []
    storage = snapshot.storage
    shared_storage(storage.url, storage.storage_options)  # refuses storage Spark's workers cannot see
    sc = spark.sparkContext
    saved = {k: sc.getLocalProperty(k) for k in ("spark.jobGroup.id", "spark.job.description")}
    group = f"indexeddf-index-{entry.name}-{uuid.uuid4().hex[:8]}"
    try:
        sc.setJobGroup(group, f"indexeddf: index {entry.name}: plan the build of {len(data_files)} data files")
        rel_dir = dir_name[len(INDEX_DIR) + 1:] if dir_name.startswith(INDEX_DIR + "/") else dir_name
        tasks = TASKS_PER_CORE * sc.defaultParallelism
        fence = JobFence.new()
        out = _built_in_tasks(spark, snapshot, entry, data_files, tasks, rel_dir, fence)
        sc.setJobDescription(f"indexeddf: index {entry.name}: read, hash, sort and write the entries of "
                             f"{len(data_files)} data files into {entry.numBuckets} index buckets")
        say(progress, f"index {entry.name}: Spark job over {len(data_files)} data files")
        files: list[IndexFile] = collect_job(out, storage, fence)
    finally:
        for k, v in saved.items():
            sc.setLocalProperty(k, v)
    written.extend(f.path for f in files)  # a failed commit deletes them
    files.sort(key=lambda f: (f.bucket, f.path))
    say(progress, f"index {entry.name}: {len(data_files)}/{len(data_files)} data files indexed, {len(files)} index files")
    return files


def collect_job(out, storage, fence: JobFence) -> list:
    """The job's rows; a task's indexeddf error (e.g. ``MissingFileError`` for a data file
    deleted outside indexeddf) is raised as itself, not as Spark's wrapper of it. The job's
    ``fence`` (in the table's ``storage``): when the job fails, the error is raised once no
    task of it writes any more (``job_fence.py``)."""
    from . import typed_error

    try:
        rows = out.collect()
    except BaseException as e:
        fence.abort(storage)
        typed = typed_error(e) if isinstance(e, Exception) else None
        if typed is None:
            raise
        raise typed from e
    fence.close(storage)
    return rows


def _built_in_tasks(spark, snapshot, entry: IndexEntry, data_files: list[AddFile], tasks: int, rel_dir: str,
                    fence: JobFence):
    """The whole build in ``tasks`` Python tasks (no stage boundary, no entry crossing the
    JVM): each task takes a group of files of about equal bytes, reads their index columns
    through the project's reader a few row groups at a time (``index_tasks.file_entries``:
    every file, deletion vectors and all), hashes them with ``spec/bucketing.py``, sorts the
    entries a chunk at a time and writes the index files, as the single-process build does;
    an RDD of the ``IndexFile`` of each file written (pickled back to the driver).

    An RDD, not a DataFrame's ``mapInArrow``: the tasks take a group number and give a few
    descriptors, so there is nothing for Catalyst to plan, compile or turn into Arrow. Measured
    over nine ``refresh("primary", mode="full", spark=)`` of the 20M-row check table in one
    session, the JVM's CPU a job fell from 0.25-0.6 s to about 0.12 s, the wall time from about
    1.7 s to 1.45 s, and the session's first job from 5.6 s to 3.4 s."""
    storage = snapshot.storage
    url, options = storage.url, storage.storage_options
    schema = table_schema(snapshot.metadata)
    columns, num_buckets, version = list(entry.columns), entry.numBuckets, snapshot.version
    groups = [[task_add(data_files[i]) for i in g] for g in balanced_groups([a.size for a in data_files], tasks)]

    def build(numbers: Iterator[int]) -> Iterator[IndexFile]:
        task_storage = shared_storage(url, options)
        for group in numbers:
            entries = files_entries(task_storage, groups[group], schema, columns, num_buckets, version, fence)
            yield from write_entry_batches(task_storage, rel_dir, entries, fence)

    return spark.sparkContext.parallelize(range(len(groups)), len(groups)).mapPartitions(build)
