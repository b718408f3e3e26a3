"""Spark writes, step 2 on the executors: one write task.

:func:`write_task` conforms the task's Arrow batches to the table schema and writes them
like ``operations.append`` does (``write_rows``: one data file per touched bucket per
~128 MB of input, plus the entries of every maintained index). The ``add`` actions and
index files go back to the driver in a :class:`FilesMessage`.

Once its files are written, the task records them in a manifest
``data/_staging/<write id>/<uuid>.json`` and then looks for the abort marker
``data/_staging/<write id>/_ABORTED`` (PROTOCOL.md §2.5); if the write was aborted, or
anything fails, the task deletes what it wrote. The driver's side of this protocol is
in :mod:`indexeddf.spark.write_commit`.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Iterator

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql.datasource import WriterCommitMessage

from ..errors import IndexedDFError
from ..spec.actions import AddFile, IndexFile
from ..spec.constraints import checker_for
from ..spec.replace_where import parse_replace_where
from ..spec.schema import arrow_schema
from ..writer.data import conform
from ..writer.operations import write_rows
from .write_plan import WritePlan

TASK_FLUSH_BYTES = 128 * 1024 * 1024
"""A write task buffers this many bytes of Arrow input before it writes files."""
STAGING_DIR = "data/_staging"
ABORTED = "_ABORTED"


@dataclass
class FilesMessage(WriterCommitMessage):
    """What one write task produced (actions as JSON; picklable without pydantic state)."""

    adds: list[str]
    index_files: dict[str, list[str]]
    """New index files per index name."""
    written: list[str]
    """Every path the task created (data and index files)."""
    write_id: str
    action: str
    read_version: int | None
    num_rows: int = 0
    metadata_json: str | None = None
    """The metadata the task wrote with, when its write changes the schema (a stream's
    committing driver plans anew, and must commit the schema the files were written in)."""


def staging_path(write_id: str, name: str = "") -> str:
    """The staging folder of a write, or the file ``name`` in it."""
    return f"{STAGING_DIR}/{write_id}/{name}" if name else f"{STAGING_DIR}/{write_id}"


def read_staged(storage, paths: list[str], schema: pa.Schema) -> pa.Table:
    """Staged Parquet files (a MERGE's source) read as one table of ``schema``."""
    tables = [pq.read_table(storage.full(p), filesystem=storage.arrow_filesystem()).cast(schema) for p in paths]
    return pa.concat_tables(tables) if tables else schema.empty_table()


def drop_staging(storage, write_id: str) -> None:
    """Delete a write's staging folder: every file in it, also those of task attempts
    whose results Spark dropped."""
    folder = staging_path(write_id)
    for name in storage.list_names(folder):
        storage.delete(f"{folder}/{name}")
    if storage.is_local:
        try:
            storage.fs.rmdir(storage.full(folder))
        except OSError:
            pass


def write_task(plan: WritePlan, batches: Iterator[pa.RecordBatch]) -> FilesMessage:
    """Write the task's rows; on any failure delete what it wrote and re-raise."""
    if plan.action == "skip" or plan.metadata_only:
        for _ in batches:  # ALTER TABLE commits metadata only: its one row carries nothing
            pass
        return FilesMessage([], {}, [], plan.write_id, plan.action, plan.read_version)
    storage = plan.storage()
    metadata, indexes = plan.metadata(), plan.indexes()
    where = None if plan.replace_where is None else parse_replace_where(
        plan.replace_where, arrow_schema(metadata.schema_), metadata.partitionColumns)
    checker = checker_for(metadata, plan.checked_constraints)  # those Spark's plan did not check
    written: list[str] = []
    adds: list[AddFile] = []
    index_files: dict[str, list[IndexFile]] = {i.name: [] for i in indexes}
    rows = 0
    buffer: list[pa.RecordBatch] = []
    size = 0

    def flush() -> None:
        nonlocal buffer, size, rows
        if not buffer:
            return
        table = conform(pa.Table.from_batches(buffer), metadata.schema_, merge=plan.merge_schema)
        buffer, size = [], 0
        if where is not None:
            where.check_rows(table)
        checker.check(table)
        rows += table.num_rows
        new_adds, new_index = write_rows(storage, metadata, indexes, table, written)
        adds.extend(new_adds)
        for name, files in new_index.items():
            index_files[name].extend(files)

    manifest = None
    try:
        for batch in batches:
            if batch.num_rows:
                buffer.append(batch)
                size += batch.nbytes
                if size >= TASK_FLUSH_BYTES:
                    flush()
        flush()
        if written:
            manifest = staging_path(plan.write_id, f"{uuid.uuid4().hex}.json")
            storage.write_bytes(manifest, json.dumps(written).encode())
            if storage.exists(staging_path(plan.write_id, ABORTED)):
                raise IndexedDFError(f"write {plan.write_id} to {plan.url} was aborted; this task's files are deleted")
    except BaseException:
        for rel in written + ([manifest] if manifest else []):
            storage.delete(rel)
        raise
    return FilesMessage(
        [a.model_dump_json() for a in adds],
        {name: [f.model_dump_json() for f in files] for name, files in index_files.items() if files},
        written, plan.write_id, plan.action, plan.read_version, rows,
        plan.metadata_json if plan.new_metadata else None,
    )
