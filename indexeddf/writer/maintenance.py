"""Table maintenance: optimize (compaction), vacuum (deleting unneeded files), restore.

- ``optimize`` rewrites small data files per bucket into one, with their index entries,
  in ONE commit whose ``add``/``remove`` carry ``dataChange = false``: the rows do not
  change, so concurrent appends and optimize both commit (PROTOCOL.md §8.4: rules 4
  and 6 only look at ``dataChange = true``; rule 3 still fails a delete or overwrite
  that removed a file optimize removes too).
- ``vacuum`` deletes files that no version inside the retention needs, and files of
  failed writes that no version ever named, once they are older than the retention.
  It never touches the log.
- ``restore`` commits a version whose live files and indexes equal an older version's.
"""

from __future__ import annotations

import dataclasses
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from ..errors import InvalidIndexStateError, InvalidOptionError, VersionNotFoundError
from ..format.log import list_log, read_commit
from ..format.snapshot import Snapshot, Tombstones, load_snapshot, update_snapshot
from ..format.transaction import ALL_BUCKETS, CommitResult, Transaction
from ..spec import config
from ..spec.actions import AddFile, CdcFile, CommitInfo, IndexEntry, IndexFile, named_with_bucket
from ..spec.change_data import CHANGE_DATA_DIR
from ..spec.column_mapping import table_schema
from ..spec.deletion_vectors import FILE_NAME_PREFIX
from ..spec.states import TRANSIENT_STATES
from .bucket_merge import ENTRY_CHUNK, EntryChunks, layout_of, merge_index_bucket, rewrite_unit
from .index_compaction import compact_index, kept_ids, rewritten_by_bucket
from .index_files import INDEX_DIR, JOBS_DIR
from .lifecycle import PENDING, STABLE, VACUUMED, Progress, say, stable_props
from .tree import list_files, list_tree, remove_empty_dirs

SMALL_FILE_BYTES = 32 << 20
"""``optimize(mode="quick")`` compacts the data files smaller than this."""
OPTIMIZE_BATCH_BYTES = 256 << 20
"""Optimize reads and rewrites buckets in batches of about this many bytes of files."""
OPTIMIZE_MODES = ("quick", "full")
REWRITE_THREADS = 2
"""Units optimize rewrites at once in this process (the Spark job: one a task)."""


# -- optimize --------------------------------------------------------------------------------
def optimize(snapshot: Snapshot, mode: str = "quick", small_file_bytes: int = SMALL_FILE_BYTES,
             progress: Progress = None, where: str | None = None, rewrite: Rewrite | None = None,
             num_buckets: int | None = None) -> CommitResult | None:
    """Compact each bucket's data files, and the index files that point at them.

    ``quick``: in each bucket, the files under ``small_file_bytes`` (when there are two
    or more) become one file; ``full``: every bucket with two or more files becomes one
    file, and so does a bucket whose one file is named without its bucket (written
    before bucket-suffixed names; Spark's bucketed scans need the suffix). Files another
    Delta writer added have no bucket: ``quick`` rewrites the small ones into buckets
    (when there are two or more), ``full`` rewrites all of them first (one commit) and
    then compacts the buckets (a second commit). A file with a deletion vector is
    rewritten in either mode, without the rows it deletes (so no live file keeps one).
    Rows keep their content; a new file is clustered by key hash. The entries of the new files are added to every ACTIVE index,
    and the index files that named the removed files are rewritten without their
    entries, one file per index bucket (``full`` also merges every other index bucket
    that has several files). Returns the last commit, or None when nothing needed it.

    ``where``: a predicate (Spark SQL) on partition columns only, as Delta's ``OPTIMIZE ...
    WHERE``: only the files of the partitions it selects are considered. A predicate that
    names another column is ``InvalidOptionError`` (Delta's rule).

    ``rewrite``: what reads and writes the files (:data:`Rewrite`; default
    :func:`rewrite_here`, this process); the plan and the commit do not depend on it.

    ``num_buckets`` (with ``full``): a new bucket count; see :func:`rebucket`.
    """
    if mode not in OPTIMIZE_MODES:
        raise InvalidOptionError(f"optimize mode {mode!r}: use one of {list(OPTIMIZE_MODES)}")
    if num_buckets is not None and num_buckets != snapshot.metadata.numBuckets:
        first = rebucket(snapshot, mode, num_buckets, progress, where, rewrite)
        # Batches of the old files each wrote a file a new bucket: compact them (a second commit).
        return optimize(first.snapshot, mode, small_file_bytes, progress, None, rewrite) or first
    live = optimized_files(snapshot, where)
    foreign = [a for a in live if a.bucket is None]
    if mode == "full" and foreign:
        first = _compact(snapshot, mode, {FOREIGN: foreign}, progress, rewrite)
        return optimize(first.snapshot, mode, small_file_bytes, progress, where, rewrite) or first
    groups = compaction_groups(live, mode, small_file_bytes)
    if not groups:
        say(progress, "optimize: nothing to compact")
        return None
    return _compact(snapshot, mode, groups, progress, rewrite)


def compaction_groups(live: list, mode: str, small_file_bytes: int = SMALL_FILE_BYTES) -> dict:
    """The groups (:func:`_group`) ``optimize`` of ``mode`` rewrites among the ``live`` files
    it considers, each with its files (files without a bucket form one group in ``quick``)."""
    groups: dict = defaultdict(list)
    for a in live:
        # A file with a deletion vector is always rewritten: that purges its deleted rows.
        if mode == "full" or a.size < small_file_bytes or a.deletionVector is not None:
            groups[_group(a)].append(a)
    return {b: files for b, files in sorted(groups.items(), key=lambda g: repr(g[0]))
            if len(files) >= 2 or (mode == "full" and not named_with_bucket(files[0].path, _bucket(b)))
            or any(f.deletionVector is not None for f in files)}


def optimized_files(snapshot: Snapshot, where: str | None) -> list:
    """The live files ``optimize`` considers: all, or those of the partitions ``where`` selects."""
    live = snapshot.live_files()
    if where is None:
        return live
    from ..spec.column_mapping import table_schema
    from ..spec.partition_filter import files_where, split_filter

    columns = list(snapshot.metadata.partitionColumns)
    schema = table_schema(snapshot.metadata)
    split = split_filter(where, schema, columns, context="OPTIMIZE WHERE predicate")
    if not split.partition_only:
        others = sorted(c for c in split.condition.columns_used if c not in columns)
        raise InvalidOptionError(
            f"OPTIMIZE ... WHERE {where}: the predicate references non-partition column(s) {others}; only the "
            f"partition columns may be referenced: {columns} (Delta's rule: OPTIMIZE selects whole partitions)")
    return files_where(live, split.condition, schema)


FOREIGN = -1
"""Group key of the files without a bucket (added by other Delta writers)."""


def rebucket(snapshot: Snapshot, mode: str, num_buckets: int, progress: Progress = None, where: str | None = None,
             rewrite: Rewrite | None = None) -> CommitResult | None:
    """Change the table's bucket count: ONE commit with the metadata's new ``numBuckets``,
    every live file rewritten into the new buckets (read in batches of about
    OPTIMIZE_BATCH_BYTES, as files without a bucket are: memory of a batch, not of the
    table) and every ACTIVE index rebuilt over the new files (the primary index with the
    new count, PROTOCOL.md §4.5). The rows do not change (``dataChange = false``), but the
    metadata does, so every concurrent writer fails and this commit fails on any winner
    that added files (they were written with the old buckets); see ``format/transaction.py``.
    An empty table gets the commit too (its metadata alone changes)."""
    from .operations import check_num_buckets

    check_num_buckets(num_buckets)
    if mode != "full":
        raise InvalidOptionError(f"optimize(num_buckets={num_buckets}) rewrites every file: use mode='full'")
    if where is not None:
        raise InvalidOptionError("optimize(num_buckets=...) rewrites the whole table; it takes no where predicate")
    primary = next((i for i in snapshot.indexes.values() if i.kind == "primary"), None)
    if primary is not None and primary.state != "ACTIVE":
        raise InvalidIndexStateError(
            f"the primary index is {primary.state}; changing the bucket count rebuilds it, so it must be ACTIVE "
            "(cancel_index returns a stuck index to its stable state)")
    groups: dict = defaultdict(list)
    for a in snapshot.live_files():  # as files without a bucket: each batch may hold any bucket
        groups[(FOREIGN, tuple(sorted(a.partitionValues.items(), key=repr))) if a.partitionValues else FOREIGN].append(a)
    say(progress, f"optimize: {snapshot.metadata.numBuckets} buckets -> {num_buckets}")
    # No file to read: nothing for a Spark job to do, the index files are merged here.
    return _compact(snapshot, mode, dict(groups), progress, rewrite if groups else None, num_buckets)


def _group(a: AddFile):
    """The compaction group of a file: its bucket, and in a partitioned table its partition
    too (buckets are compacted inside each partition: files never change partition)."""
    bucket = FOREIGN if a.bucket is None else a.bucket
    return (bucket, tuple(sorted(a.partitionValues.items(), key=repr))) if a.partitionValues else bucket


def _bucket(group) -> int:
    return group[0] if isinstance(group, tuple) else group


@dataclass(frozen=True)
class OptimizePlan:
    """What one optimize commit rewrites, as the driver plans it (the same with or without
    Spark): the files of each group, every ACTIVE index, and per index the index files it
    rewrites."""

    mode: str
    groups: dict
    """Group (:func:`_group`) -> the data files rewritten into that group's new file(s)."""
    indexes: list[IndexEntry]
    keep_ids: set[int]
    """The ids of the data files that stay live."""
    rewrite: dict[str, set[str]]
    """Index name -> the paths of its index files rewritten (merged per index bucket)."""
    num_buckets: int = 0
    """The bucket count the new data files are written with: the table's, or a new one
    (:func:`rebucket`; ``indexes`` then hold the primary index with that count)."""


Rewrite = Callable[[Snapshot, OptimizePlan, list, Progress], tuple[list[AddFile], list[IndexEntry]]]
"""Writes a plan's data and index files (paths into the list: a failed commit deletes them);
returns the new files' ``add`` actions (``dataChange = false``) and the ``index`` actions
(new files, ``removedFiles``) of every index of the plan. ``spark/optimize.py`` has one
that runs as a Spark job; :func:`rewrite_here` runs in this process."""


def plan_optimize(snapshot: Snapshot, mode: str, groups: dict, num_buckets: int | None = None) -> OptimizePlan:
    """The :class:`OptimizePlan` of rewriting ``groups``: the index files that name a removed
    data file, and with ``full`` every file of an index bucket with several files. With a new
    ``num_buckets``, the primary index takes it and every file of every ACTIVE index is
    rewritten (entries bucketed by the old count cannot stay)."""
    now = snapshot.metadata.numBuckets
    changed = num_buckets is not None and num_buckets != now
    indexes = sorted((i.model_copy(update={"numBuckets": num_buckets}) if changed and i.kind == "primary" else i
                      for i in snapshot.indexes.values() if i.state == "ACTIVE"), key=lambda i: i.name)
    removed_ids = {a.fileId for b in groups for a in groups[b]}
    rewrite = {}
    for entry in indexes:
        paths = {f.path for f in entry.files if removed_ids.intersection(f.fileIds) or changed}
        if mode == "full":
            per_bucket = defaultdict(list)
            for f in entry.files:
                per_bucket[f.bucket].append(f.path)
            paths |= {p for ps in per_bucket.values() if len(ps) >= 2 for p in ps}
        rewrite[entry.name] = paths
    return OptimizePlan(mode, groups, indexes, set(snapshot.file_ids) - removed_ids, rewrite,
                        num_buckets if changed else now)


def _compact(snapshot: Snapshot, mode: str, groups: dict[int, list[AddFile]], progress: Progress,
             rewrite: Rewrite | None = None, num_buckets: int | None = None) -> CommitResult:
    """One commit that rewrites the files of ``groups`` (bucket -> files) into bucketed
    files and updates every ACTIVE index to match; ``rewrite`` writes the files (default:
    :func:`rewrite_here`), the commit is the same either way. A new ``num_buckets`` also
    commits the metadata with it, and reads the whole table (:func:`rebucket`)."""
    plan = plan_optimize(snapshot, mode, groups, num_buckets)
    changed = plan.num_buckets != snapshot.metadata.numBuckets
    params = {"mode": mode, "numBuckets": plan.num_buckets} if changed else {"mode": mode}
    tx = Transaction(snapshot, "OPTIMIZE", params, read_buckets=ALL_BUCKETS if changed else ())
    try:
        adds, index_actions = (rewrite or rewrite_here)(snapshot, plan, tx.written_paths, progress)
        removed = [a for b in groups for a in groups[b]]
        now = int(time.time() * 1000)
        actions = [a.removal(now, data_change=False) for a in removed] + adds + index_actions
        if changed:
            actions.insert(0, snapshot.metadata.model_copy(update={"numBuckets": plan.num_buckets}))
    except BaseException:
        tx.abort()
        raise
    metrics = {
        "numRemovedFiles": len(removed), "numAddedFiles": len(adds),
        "numRemovedBytes": sum(a.size for a in removed), "numAddedBytes": sum(a.size for a in adds),
        "numIndexFilesRemoved": sum(len(e.removedFiles) for e in index_actions),
        "numIndexFilesAdded": sum(len(e.files) for e in index_actions),
    }
    return tx.commit(actions, metrics)


def rewrite_here(snapshot: Snapshot, plan: OptimizePlan, written: list[str],
                 progress: Progress) -> tuple[list[AddFile], list[IndexEntry]]:
    """The :data:`Rewrite` of this process, as a Spark job's tasks do it (``bucket_merge.py``):
    each unit (:func:`units_of`) rewritten, a bucket's sorted files merged a row group at a
    time, the new rows' index entries written out every chunk, then merged with each index's
    rewritten files into one file an index bucket (an index's entries under a chunk are
    merged from memory, with no file between). Memory: two units' row groups (a batch of
    files without a bucket) and a chunk of entries an index, not the table."""
    storage, meta = snapshot.storage, snapshot.metadata
    layout = layout_of(meta, plan.num_buckets)
    entries = EntryChunks(storage, [(list(e.columns), e.numBuckets, e.name) for e in plan.indexes], written,
                          ENTRY_CHUNK)
    new_files: list[list[IndexFile]] = [[] for _ in plan.indexes]
    schema = table_schema(meta)

    def one(unit: tuple[list[AddFile], bool]) -> list[AddFile]:
        new = rewrite_unit(storage, unit[0], unit[1], schema, snapshot.version, layout, entries.add, written)
        for i, files in entries.flush(full_only=True):
            new_files[i] += files
        return new

    adds = []
    # Two units at a time: Parquet's encoding and decoding release the GIL, and one unit's
    # merge leaves the other core mostly idle (memory: two units' row groups).
    with ThreadPoolExecutor(REWRITE_THREADS) as pool:
        for new in pool.map(one, units_of(plan.groups)):
            for add in new:
                adds.append(add)
                say(progress, f"optimize: bucket {add.bucket}: {add.stats.numRecords} rows -> 1 file "
                              f"({add.size} bytes)")
    index_actions = []
    for i, entry in enumerate(plan.indexes):
        if new_files[i]:  # a chunk was written out: the rest too, then merged file by file
            new_files[i] += [f for _, files in entries.flush(full_only=False, index=i) for f in files]
            files, gone = _merge_written(storage, entry, plan, new_files[i], written)
        else:  # every entry still in memory (under a chunk): merged as they are, no file between
            files, gone = compact_index(storage, entry, plan.rewrite[entry.name], plan.keep_ids,
                                        entries.take(i), entry.name, written)
        index_actions.append(entry.model_copy(update={"files": tuple(files), "removedFiles": tuple(gone)}))
        say(progress, f"optimize: index {entry.name}: {len(gone)} index files -> {len(files)}")
    return adds, index_actions


def _merge_written(storage, entry: IndexEntry, plan: OptimizePlan, new: list[IndexFile],
                   written: list[str]) -> tuple[list[IndexFile], list[str]]:
    """``entry``'s files after an optimize whose new entries were written out as the files
    ``new``: one file an index bucket (``merge_index_bucket``), and the paths it replaces."""
    old = rewritten_by_bucket(entry, plan.rewrite[entry.name])
    keep = kept_ids(entry, plan.rewrite[entry.name], plan.keep_ids)
    files = []
    for b in sorted(set(old) | {f.bucket for f in new}):
        f = merge_index_bucket(storage, entry.name, b, old.get(b, []), keep, [f for f in new if f.bucket == b],
                               written)
        if f is not None:
            files.append(f)
    return files, [f.path for b in sorted(old) for f in old[b]]


def units_of(groups: dict) -> list[tuple[list[AddFile], bool]]:
    """The files each rewrite unit reads at once, and whether they are a bucket's group (they
    become one file of that bucket; ``bucket_merge.rewrite_unit`` may merge them): a group's
    files, and files without a bucket (or, changing the bucket count, every file) in chunks
    of about ``OPTIMIZE_BATCH_BYTES``."""
    units = []
    for group, files in groups.items():
        if (group[0] if isinstance(group, tuple) else group) != FOREIGN:
            units.append((list(files), True))
            continue
        unit, size = [], 0
        for a in files:
            unit.append(a)
            size += a.size
            if size >= OPTIMIZE_BATCH_BYTES:
                units.append((unit, False))
                unit, size = [], 0
        if unit:
            units.append((unit, False))
    return units


# -- vacuum ----------------------------------------------------------------------------------
@dataclass
class VacuumResult:
    """What ``vacuum`` deleted (or, with ``dry_run``, would delete)."""

    files: list[str] = field(default_factory=list)
    bytes: int = 0
    dry_run: bool = False
    retention_hours: float = 0.0
    oldest_version_kept: int = 0
    """The oldest version whose files were all kept (time travel from it on is safe)."""


FENCE_RETENTION_HOURS = 1.0
"""How long ``vacuum`` leaves the fence files of a Spark job (``_indexes/_jobs/``, see
``spark/job_fence.py``) alone, whatever its retention: a failed job's marker must outlive the
tasks Spark launched before the failure, which look for it when they start."""


def vacuum(snapshot: Snapshot, retention_hours: float | None = None, dry_run: bool = False,
           enforce_retention: bool = True, progress: Progress = None, now_ms: int | None = None) -> VacuumResult:
    """Delete the files under ``data/``, ``_change_data/`` and ``_indexes/``, and the data files
    the log named elsewhere (partition folders, other writers' files at the root), that no
    version inside the retention needs.

    Kept: every data, change data (``cdc``) and index file of every version committed within the last
    ``retention_hours`` (default: ``indexeddf.vacuum.minRetentionHours``, 168), of the
    version that was current when the retention window opened, and of the newest one.
    Deleted: files only older versions name, and files no version ever named (failed
    or aborted writes, Spark staging manifests) once they are older than the retention.
    The log is never touched. Versions older than the retention may not be readable
    afterwards.
    """
    snapshot = update_snapshot(snapshot)
    minimum = config.get(snapshot.metadata.configuration, "indexeddf.vacuum.minRetentionHours")
    hours = minimum if retention_hours is None else retention_hours
    if isinstance(hours, bool) or not isinstance(hours, (int, float)) or not hours >= 0:
        raise InvalidOptionError(f"retention_hours must be a number >= 0, got {retention_hours!r}")
    if enforce_retention and hours < minimum:
        raise InvalidOptionError(
            f"retention of {hours} hours is below indexeddf.vacuum.minRetentionHours={minimum}: it would delete "
            "files that versions inside that window (and writes still running) need. Pass enforce_retention=False "
            "(CLI: --no-enforce-retention) if you are sure, or lower the property."
        )
    storage = snapshot.storage
    now = int(time.time() * 1000) if now_ms is None else now_ms
    cutoff = now - hours * 3_600_000
    commits, _ = list_log(storage)
    commits = [v for v in commits if v <= snapshot.version]
    ever: set[str] = set()
    added_after: dict[int, set[str]] = {}
    start = commits[0] if commits else snapshot.version
    for v in commits:
        actions = read_commit(storage, v)
        paths = _paths_added(actions)
        ever |= paths
        added_after[v] = paths
        ts = next((a.timestamp for a in actions if isinstance(a, CommitInfo)), 0)
        if ts <= cutoff:
            start = v  # the newest version committed before the window opened
    keep = _snapshot_paths(load_snapshot(storage, start))
    ever |= keep
    for v in commits:
        if v > start:
            keep |= added_after[v]
    result = VacuumResult(dry_run=dry_run, retention_hours=float(hours), oldest_version_kept=start)
    # Only files it recognises as the table's: Parquet under data/, _indexes/ and
    # _change_data/, Spark write manifests under data/_staging/, the fences of Spark jobs
    # (_indexes/_jobs/), and elsewhere only files the log named; never the log, nor the index
    # state kept beside checkpoints (_indexes/_state/).
    fence_cutoff = now - max(hours, FENCE_RETENTION_HOURS) * 3_600_000
    candidates = [c for c in list_tree(storage, "data") + list_tree(storage, INDEX_DIR)
                  + list_tree(storage, CHANGE_DATA_DIR)
                  if (c[0].endswith(".parquet") or c[0].startswith("data/_staging/")
                      or (c[0].startswith(f"{JOBS_DIR}/") and c[2] is not None and c[2] < fence_cutoff))
                  and not c[0].startswith(f"{INDEX_DIR}/_state/")]
    candidates += _deletion_vector_files(storage, ever)
    candidates += _files_beside(storage, ever, {c[0] for c in candidates})
    for rel, size, mtime in candidates:
        if rel in keep:
            continue
        if rel not in ever and (mtime is None or mtime >= cutoff):
            continue  # never committed and young: maybe a write still in progress
        result.files.append(rel)
        result.bytes += size
    for i, rel in enumerate(result.files, 1):
        if not dry_run:
            storage.delete(rel)
        say(progress, f"vacuum: {'would delete' if dry_run else 'deleted'} {i}/{len(result.files)} {rel}")
    if not dry_run:
        remove_empty_dirs(storage, "data/_staging")
        remove_empty_dirs(storage, JOBS_DIR)
    return result


def _files_beside(storage, ever: set[str], listed: set[str]) -> list[tuple[str, int, float | None]]:
    """The data files outside ``data/``, ``_indexes/`` and ``_change_data/`` vacuum may
    consider: those the log named (a partitioned table's ``p=.../`` folders, the root of a
    table other Delta writers made) that are still there. A file there that no version named
    is not the table's to delete (docs/admin.md)."""
    folders = set()
    for rel in ever:
        folder = rel.rsplit("/", 1)[0] if "/" in rel else ""
        top = folder.split("/", 1)[0]
        if top in ("data", INDEX_DIR, CHANGE_DATA_DIR) or top.startswith(("_", ".")):
            continue
        folders.add(folder)
    out = []
    for folder in sorted(folders):
        for rel, size, mtime in list_files(storage, folder):
            if rel in ever and rel not in listed:
                out.append((rel, size, mtime))
    return out


def _paths_added(actions) -> set[str]:
    """The data, deletion vector, change data and index files a commit adds."""
    out = set()
    for a in actions:
        if isinstance(a, CdcFile):
            out.add(a.path)
        elif isinstance(a, AddFile):
            out.add(a.path)
            out.update(_dv_files([a]))
        elif isinstance(a, IndexEntry):
            out |= {f.path for f in a.files}
    return out


def _snapshot_paths(snap: Snapshot) -> set[str]:
    """The data, deletion vector and index files a snapshot reads."""
    return set(snap.files) | set(_dv_files(list(snap.files.values()))) | {f.path for e in snap.indexes.values() for f in e.files}


def _is_dv_file(rel: str) -> bool:
    name = rel.rsplit("/", 1)[-1]
    return name.startswith(FILE_NAME_PREFIX) and name.endswith(".bin")


def _deletion_vector_files(storage, named: set[str]) -> list[tuple[str, int, float | None]]:
    """The deletion vector files vacuum may consider: ``deletion_vector_*.bin`` at the table
    root and in the random-prefix folders the log names (never walking the whole table)."""
    folders = {""} | {p.rsplit("/", 1)[0] for p in named if "/" in p and _is_dv_file(p)}
    return [c for folder in sorted(folders) for c in list_files(storage, folder) if _is_dv_file(c[0])]


# -- restore ---------------------------------------------------------------------------------
def restore(snapshot: Snapshot, version: int) -> CommitResult | None:
    """Commit a new version whose live files and indexes equal those of ``version``.

    Files added since are removed, files removed since are added back (the same files:
    same path and id, so the old index entries stay right), each index gets the file
    set and stable state it had (an index created since becomes DELETED, files kept),
    and the schema comes back if it changed. Properties stay as they are now. It reads
    the whole table, so a concurrent write makes it fail with a conflict error.
    Returns None, committing nothing, when ``snapshot`` already has that content.
    Raises ``VersionNotFoundError`` when the version does not exist or files it needs
    were vacuumed.
    """
    current = snapshot  # the version read (callers pass the newest)
    storage = current.storage
    busy = sorted(n for n, e in current.indexes.items() if e.state in TRANSIENT_STATES)
    if busy:
        raise InvalidIndexStateError(
            f"cannot restore while indexes {busy} are in a transient state; wait, or run cancel_index on them"
        )
    old = load_snapshot(storage, version)
    removes = [
        a.removal(int(time.time() * 1000)) for p, a in sorted(current.files.items()) if not _same_file(old.files.get(p), a)
    ]
    readds = [a.model_copy(update={"dataChange": True}) for a in old.live_files()
              if not _same_file(current.files.get(a.path), a)]
    index_actions = []
    for name, was in sorted(old.indexes.items()):
        gone = [f.path for f in was.files if not storage.exists(f.path)]
        if gone and was.kind != "primary":
            # Its files were vacuumed: the index comes back DELETED (re-create it).
            was = was.model_copy(update={"state": "DELETED", "files": (), "properties": stable_props(was.properties) | {VACUUMED: "true"}})
        index_actions += _restored_index(current.indexes.get(name), was)
    for name, now in sorted(current.indexes.items()):
        if name not in old.indexes and now.state != "DELETED":
            index_actions.append(now.model_copy(update={"state": "DELETED", "files": (), "removedFiles": ()}))
    needed = [a.path for a in readds] + _dv_files(readds) + [f.path for e in index_actions for f in e.files]
    missing = [p for p in needed if not storage.exists(p)]
    if missing:
        raise VersionNotFoundError(
            f"cannot restore {storage.url} to version {version}: {len(missing)} of its files were deleted "
            f"by vacuum (e.g. {missing[0]}); restore a version inside the vacuum retention"
        )
    actions = []
    if old.metadata.schema_ != current.metadata.schema_:
        actions.append(current.metadata.model_copy(update={"schema_": old.metadata.schema_}))
    actions += removes + readds + index_actions
    if not actions:
        return None
    # The files restored are the very files (path and id) removed earlier: let the
    # transaction's check of new file ids skip their tombstones.
    readd_paths = {a.path for a in readds}
    base = dataclasses.replace(current, tombstones=Tombstones(
        {p: r for p, r in current.tombstones.items() if p not in readd_paths}))
    tx = Transaction(base, "RESTORE", {"version": version}, read_buckets=ALL_BUCKETS, isolation="Serializable")
    metrics = {"numRemovedFiles": len(removes), "numRestoredFiles": len(readds),
               "numIndexesRestored": len(index_actions), "tableSizeAfterRestore": old.size_bytes()}
    return tx.commit(actions, metrics)


def _same_file(a: AddFile | None, b: AddFile) -> bool:
    """Whether ``a`` is the logical file ``b``: same path and same deletion vector (a
    restore re-adds a file whose deletion vector changed since, with its old one)."""
    return a is not None and a.path == b.path and _dv_id(a) == _dv_id(b)


def _dv_id(f: AddFile) -> str | None:
    return None if f.deletionVector is None else f.deletionVector.unique_id


def _dv_files(files: list[AddFile]) -> list[str]:
    """The deletion vector files (under the table root) that ``files`` name."""
    return sorted({a.deletionVector.relative_path for a in files
                   if a.deletionVector is not None and a.deletionVector.storageType == "u"})


def _restored_index(now: IndexEntry | None, was: IndexEntry) -> list[IndexEntry]:
    """The ``index`` action that gives an index the state and files it had (``was``)."""
    state, props = was.state, stable_props(was.properties)
    if state in TRANSIENT_STATES:  # restore the stable state the operation started from
        stable = was.properties.get(STABLE, TRANSIENT_STATES[state])
        state = stable if stable in ("ACTIVE", "DELETED") else "DELETED"
        if stable == "NONE":
            props[VACUUMED] = "true"
    props.pop(PENDING, None)
    old_paths = {f.path for f in was.files}
    now_paths = [f.path for f in now.files] if now is not None else []
    files = tuple(f for f in was.files if f.path not in set(now_paths))
    removed = tuple(p for p in now_paths if p not in old_paths)
    same = now is not None and (now.state, now.columns, now.kind, now.numBuckets, now.properties) == (
        state, was.columns, was.kind, was.numBuckets, props)
    if same and not files and not removed:
        return []
    return [was.model_copy(update={"state": state, "files": files, "removedFiles": removed, "properties": props})]
