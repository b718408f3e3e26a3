"""Index operations on the log: create a secondary index over the live data, refresh one."""

from __future__ import annotations

import re

from ..errors import IndexExistsError, InvalidOptionError, SchemaMismatchError, UnsupportedFeatureError
from ..format.snapshot import Snapshot
from ..format.transaction import CommitResult
from ..spec.actions import IndexEntry
from ..spec.bucketing import is_hashable_type
from ..spec.features import collation
from ..spec.schema import arrow_schema, check_index_types
from . import lifecycle
from .operations import check_num_buckets

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


def create_index(snapshot: Snapshot, name: str, columns: list[str], num_buckets: int | None = None,
                 progress=None, build: lifecycle.Build | None = None) -> CommitResult:
    """Build index ``name`` on ``columns`` from every live data file: two commits, the
    index CREATING, then ACTIVE with its files (``writer/lifecycle.py``).

    The index covers the files live at the version read; files appended meanwhile are
    covered by their own appends when they maintained it, and otherwise scanned by
    lookups until a refresh. A concurrent creation of the same name fails with
    ``ConcurrentIndexError``. Re-creating a DELETED index drops its old files from it.
    ``build``: what writes the index files (``lifecycle.build_files``, in this process,
    when None; ``indexeddf.spark.maintenance.spark_build`` runs it as a Spark job).
    """
    build = build or lifecycle.build_files
    entry, params, removed = create_plan(snapshot, name, columns, num_buckets)

    def work(started: lifecycle.Started, written):
        snap = started.snapshot
        files = build(snap, started.entry, snap.live_files(), written, started.pending_dir, progress)
        return files, (), create_metrics(files), {}

    return lifecycle.run(snapshot, entry, "CREATING", "ACTIVE", "CREATE INDEX", params, work, covered=True, removed=removed)


def create_plan(snapshot: Snapshot, name: str, columns: list[str],
                num_buckets: int | None) -> tuple[IndexEntry, dict, tuple[str, ...]]:
    """What :func:`create_index` commits as CREATING: the new entry, the commit's
    parameters, and the files of a DELETED index of that name it drops (checked first)."""
    num_buckets = snapshot.metadata.numBuckets if num_buckets is None else num_buckets
    _validate(snapshot, name, columns, num_buckets)
    params = {"name": name, "columns": columns, "numBuckets": num_buckets}
    entry = IndexEntry(
        name=name, columns=tuple(columns), kind="secondary", state="ACTIVE", numBuckets=num_buckets, coveredVersion=-1,
    )
    old = snapshot.indexes.get(name)
    return entry, params, tuple(f.path for f in old.files) if old is not None else ()


def create_metrics(files) -> dict:
    """The ``CREATE INDEX`` commit's metrics for the index ``files`` built."""
    return {"numIndexFiles": len(files), "numIndexedRows": sum(f.numEntries for f in files)}


def refresh_metrics(to_index, files, removed) -> dict:
    """The ``REFRESH INDEX`` commit's metrics: data files indexed, index files added and removed."""
    return {"numIndexedFiles": len(to_index), "numIndexFilesAdded": len(files), "numIndexFilesRemoved": len(removed)}


def _validate(snapshot: Snapshot, name: str, columns: list[str], num_buckets: int) -> None:
    if not isinstance(name, str) or not _NAME.match(name) or name.startswith("_"):
        raise InvalidOptionError(f"index name {name!r} must be letters, digits and _ (not starting with a digit or _: _indexes/_state is taken)")
    existing = snapshot.indexes.get(name)
    if existing is not None and existing.state != "DELETED":
        raise IndexExistsError(f"index {name!r} already exists (state {existing.state}); pick another name or drop it first")
    validate_columns(snapshot, columns)
    check_num_buckets(num_buckets)


def validate_columns(snapshot: Snapshot, columns: list[str]) -> None:
    """Refuse index ``columns`` that are none, not in the table, or of a type that
    cannot be hashed into buckets."""
    if not columns:
        raise InvalidOptionError("an index needs at least one column")
    schema = arrow_schema(snapshot.metadata.schema_)
    missing = [c for c in columns if c not in schema.names]
    if missing:
        raise SchemaMismatchError(f"index columns {missing} are not in the table ({schema.names})", missing)
    check_index_types(snapshot.metadata.schema_, columns)
    unhashable = [c for c in columns if not is_hashable_type(schema.field(c).type)]
    if unhashable:
        raise SchemaMismatchError(f"columns {unhashable} cannot be indexed (type not hashable)", unhashable)
    fields = {f.name: f for f in snapshot.metadata.schema_}
    collated = {c: collation(fields[c]) for c in columns if collation(fields[c])}
    if collated:
        # An index compares bytes; a collated column's equality (e.g. case-insensitive) is not that.
        raise UnsupportedFeatureError(
            "collations",
            f"columns {sorted(collated)} have the collation(s) {sorted(set(collated.values()))}: an index compares "
            "their UTF-8 bytes, so its lookups would not answer a collated comparison. Index other columns; "
            "Spark with delta-spark compares them by their collation")


REFRESH_MODES = ("incremental", "full", "quick")


def refresh_index(snapshot: Snapshot, name: str, mode: str = "incremental", progress=None,
                  build: lifecycle.Build | None = None) -> CommitResult:
    """Bring index ``name`` up to the version read: two commits, REFRESHING (the index
    keeps its files), then ACTIVE with the new files (``writer/lifecycle.py``).

    - ``incremental``: index only the live files the index does not cover, and drop
      index files all of whose data files are gone;
    - ``full``: rebuild the index from every live file;
    - ``quick``: record the version only (no files); queries keep scanning the files
      the index does not cover.

    It rebases over concurrent appends (their files stay uncovered, or are covered by
    their own index maintenance) and fails with ``ConcurrentIndexError`` only when
    another writer changed the same index otherwise. ``build``: as for :func:`create_index`.
    """
    build = build or lifecycle.build_files
    entry, to_index, removed = refresh_plan(snapshot, name, mode)

    def work(started: lifecycle.Started, written):
        files = build(started.snapshot, started.entry, to_index, written, started.pending_dir, progress)
        return files, removed, refresh_metrics(to_index, files, removed), {}

    params = {"name": name, "mode": mode}
    return lifecycle.run(snapshot, entry, "REFRESHING", "ACTIVE", "REFRESH INDEX", params, work, covered=True)


def refresh_plan(snapshot: Snapshot, name: str, mode: str) -> tuple[IndexEntry, list, tuple[str, ...]]:
    """What :func:`refresh_index` of ``mode`` does to index ``name`` (checked ACTIVE): the
    entry, the live data files it indexes, the index files it removes."""
    if mode not in REFRESH_MODES:
        raise InvalidOptionError(f"refresh mode {mode!r}: use one of {list(REFRESH_MODES)}")
    entry = lifecycle.require(snapshot, name, ("ACTIVE",), "refresh")  # IndexNotFoundError, InvalidIndexStateError
    live_ids = snapshot.file_ids
    if mode == "full":
        to_index, removed = snapshot.live_files(), tuple(f.path for f in entry.files)
    elif mode == "quick":
        to_index, removed = [], ()
    else:
        # Index files that name a removed data file are replaced: their live files are
        # indexed again, so no entry of a removed file stays behind.
        # A data file's entries span several index buckets (files): when one of its
        # index files goes, every index file naming it goes too (and so on), and all
        # of them are indexed again, so no data file keeps only part of its entries.
        gone = {f.path for f in entry.files if not live_ids.issuperset(f.fileIds)}
        redo = {i for f in entry.files if f.path in gone for i in f.fileIds}
        while True:
            more = {f.path for f in entry.files if f.path not in gone and redo.intersection(f.fileIds)}
            if not more:
                break
            gone |= more
            redo |= {i for f in entry.files if f.path in more for i in f.fileIds}
        removed = tuple(f.path for f in entry.files if f.path in gone)
        kept = {i for f in entry.files if f.path not in gone for i in f.fileIds}
        to_index = [a for a in snapshot.live_files() if a.fileId not in kept]
    return entry, to_index, removed
