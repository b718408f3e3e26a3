"""Planning index lookups: which index answers, which buckets it probes, which files
the index does not cover and must be scanned (hybrid scan), and when an index is too
stale to use.

The planning lives in reader/ (not optimizer/) because the Spark data source, which
sits in this layer, plans its pushed-down lookups with it; optimizer/ builds on it
(explain, joins). Execution is in :mod:`.lookup`.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import IndexNotFoundError, InvalidOptionError, SchemaMismatchError
from ..format.snapshot import Snapshot
from ..spec.actions import PRIMARY_INDEX, READABLE_STATES, AddFile, IndexEntry, IndexFile
from ..spec import config
from ..spec.bucketing import bucket_ids

MAX_LOOKUP_KEYS = 1_000_000


@dataclass(frozen=True)
class LookupTask:
    """One unit of work: probe one index bucket for ``keys``, or scan ``scan_files``."""

    bucket: int | None
    keys: pa.Table
    index_files: tuple[IndexFile, ...] = ()
    scan_files: tuple[AddFile, ...] = ()


@dataclass
class LookupPlan:
    """What a lookup reads: the index used, and its tasks."""

    index: IndexEntry
    keys: pa.Table
    tasks: list[LookupTask] = field(default_factory=list)
    live_covered_ids: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    why_not: str | None = None
    """Why the index is not used (the plan only scans), or None when it is."""

    @property
    def buckets(self) -> list[int]:
        """Index buckets probed."""
        return sorted(t.bucket for t in self.tasks if t.bucket is not None)

    @property
    def scanned_files(self) -> list[AddFile]:
        """Live data files the index does not cover, which the lookup scans."""
        return [f for t in self.tasks for f in t.scan_files]


# -- choosing an index -----------------------------------------------------------------
def usable_indexes(snapshot: Snapshot) -> list[IndexEntry]:
    """ACTIVE indexes, the primary one first."""
    active = [i for i in snapshot.indexes.values() if i.state in READABLE_STATES]
    return sorted(active, key=lambda i: (i.kind != "primary", i.name))


def find_index(snapshot: Snapshot, columns: set[str]) -> IndexEntry | None:
    """The first usable index whose columns all have key constraints (primary first)."""
    for entry in usable_indexes(snapshot):
        if set(entry.columns) <= columns:
            return entry
    return None


def index_for_lookup(snapshot: Snapshot, name: str | None) -> IndexEntry:
    """The index a ``lookup`` names (default: the primary one), in any state.

    A lookup through an index that readers cannot use (DELETED, CREATING, ...) still
    answers, by scanning.
    """
    name = PRIMARY_INDEX if name is None else name
    entry = snapshot.indexes.get(name)
    if entry is None:
        known = sorted(snapshot.indexes)
        raise IndexNotFoundError(f"no index {name!r} on {snapshot.storage.url}; indexes: {known}")
    return entry


# -- keys ------------------------------------------------------------------------------
def keys_table(keys, columns: tuple[str, ...], schema: pa.Schema) -> pa.Table:
    """Distinct lookup keys as a table of the index columns, typed as the table's.

    ``keys``: a list of scalars (one-column index) or tuples, or a table/dict of columns.
    """
    types = [schema.field(c).type for c in columns]
    if isinstance(keys, (str, bytes)) or not isinstance(keys, (pa.Table, dict)) and not hasattr(keys, "__iter__"):
        keys = [keys]  # one key, not an iterable of characters
    if isinstance(keys, pa.Table):
        table = keys.select(list(columns))
    elif isinstance(keys, dict):
        table = pa.Table.from_arrays([pa.array(keys[c]) for c in columns], names=list(columns))
    else:
        rows = [k if isinstance(k, (tuple, list)) else (k,) for k in keys]
        for r in rows:
            if len(r) != len(columns):
                raise InvalidOptionError(f"key {r!r} has {len(r)} values; the index is on {list(columns)}")
        table = pa.Table.from_arrays([pa.array([r[i] for r in rows]) for i in range(len(columns))], names=list(columns))
    # (pa.table() would import pandas to check its argument: ~300 ms in a fresh process.)
    try:
        table = pa.Table.from_arrays([table.column(c).cast(t) for c, t in zip(columns, types)], names=list(columns))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise SchemaMismatchError(f"lookup keys do not fit the index columns {list(columns)}: {e}", list(columns)) from None
    if table.num_rows > MAX_LOOKUP_KEYS:
        raise InvalidOptionError(f"{table.num_rows} lookup keys; at most {MAX_LOOKUP_KEYS} per lookup")
    if table.num_rows > 1:
        table = _distinct(table)
    return table


def _distinct(table: pa.Table) -> pa.Table:
    # Not Table.group_by: it imports pandas, which costs a fresh process ~300 ms.
    if table.num_columns == 1:
        return pa.Table.from_arrays([pc.unique(table.column(0))], names=table.column_names)
    rows = list(dict.fromkeys(zip(*(table.column(c).to_pylist() for c in table.column_names))))
    return pa.Table.from_arrays(
        [pa.array([r[i] for r in rows], type=table.schema.field(i).type) for i in range(table.num_columns)],
        names=table.column_names,
    )


# -- planning --------------------------------------------------------------------------
def plan_lookup(snapshot: Snapshot, index: IndexEntry, keys: pa.Table, check_files: bool = False) -> LookupPlan:
    """Tasks of a lookup of ``keys`` (already distinct and typed) through ``index``.

    Hybrid scan: the index answers for the live files it covers, and the live files
    it does not cover are scanned. An index not in a readable state (READABLE_STATES:
    ACTIVE, or REFRESHING/OPTIMIZING with their last stable files), or staler than the
    table's ``indexeddf.hybridScan.*`` limits, is not used: the plan scans instead
    (``plan.why_not`` says why). Lookups on the table's index columns read only the
    data buckets of the keys either way, since data files are bucketed by them.

    ``check_files`` (for reads of an older version): when an index file the plan
    would read no longer exists (``vacuum_index`` or ``vacuum`` deleted it since), the
    plan does not use the index and scans instead.
    """
    plan = _plan(snapshot, index, keys, None)
    if check_files and plan.why_not is None:
        missing = missing_index_files(snapshot, plan)
        if missing:
            why = (f"{len(missing)} index file(s) of {index.name!r} that version {snapshot.version} names were deleted "
                   f"since (vacuum_index or vacuum), e.g. {missing[0]}")
            plan = _plan(snapshot, index, keys, why)
    return plan


def missing_index_files(snapshot: Snapshot, plan: LookupPlan) -> list[str]:
    """The index files ``plan`` would read that are not in storage."""
    storage = snapshot.storage
    return [f.path for t in plan.tasks for f in t.index_files if not storage.exists(f.path)]


def _plan(snapshot: Snapshot, index: IndexEntry, keys: pa.Table, why_not: str | None) -> LookupPlan:
    live = snapshot.files
    covered = {fid for f in index.files for fid in f.fileIds} if index.state in READABLE_STATES else set()
    plan = LookupPlan(index, keys)
    plan.why_not = why_not or unusable_reason(snapshot, index, covered)
    if plan.why_not is not None:
        covered = set()
    live_ids = np.array(sorted(a.fileId for a in live.values()), dtype=np.int64)
    plan.live_covered_ids = live_ids[np.isin(live_ids, np.fromiter(covered, np.int64, len(covered)))]
    if keys.num_rows == 0:
        return plan
    to_scan = [a for a in live.values() if a.fileId not in covered]
    meta = snapshot.metadata
    if tuple(index.columns) == tuple(meta.indexColumns):
        # Data files are bucketed by these columns: only the keys' buckets can match.
        wanted = set(bucket_ids([keys.column(c) for c in index.columns], meta.numBuckets).tolist())
        to_scan = [a for a in to_scan if a.bucket in wanted]
    if covered:
        buckets = bucket_ids([keys.column(c) for c in index.columns], index.numBuckets)
        files_by_bucket: dict[int, list[IndexFile]] = defaultdict(list)
        for f in index.files:
            files_by_bucket[f.bucket].append(f)
        for b in np.unique(buckets):
            plan.tasks.append(LookupTask(int(b), keys.filter(pa.array(buckets == b)), tuple(files_by_bucket.get(int(b), ()))))
    if to_scan:
        plan.tasks.append(LookupTask(None, keys, scan_files=tuple(sorted(to_scan, key=lambda a: a.path))))
    return plan


def serving_index(snapshot: Snapshot, candidates: list[IndexEntry | None]) -> IndexEntry | None:
    """Of several snapshots of one index (say, as of the version read and as of the
    newest version), the one that leaves the fewest live bytes of ``snapshot`` to scan.

    An index refreshed after the version read can serve it: data files never change,
    so its entries for files live at that version are right, and entries of files
    not live then are dropped by file id.
    """
    entries = [e for e in candidates if e is not None]
    if not entries:
        return None
    first = entries[0]
    same = [e for e in entries if (e.columns, e.kind, e.numBuckets) == (first.columns, first.kind, first.numBuckets)]

    def unscanned_cost(e: IndexEntry) -> float:
        if e.state not in READABLE_STATES:
            return float("inf")
        covered = {i for f in e.files for i in f.fileIds}
        return sum(a.size for a in snapshot.files.values() if a.fileId not in covered)

    return min(same, key=unscanned_cost)


def staleness(snapshot: Snapshot, covered: set[int]) -> tuple[float, float]:
    """(appended, deleted) ratios by bytes: live bytes the index does not cover over all
    live bytes, and bytes of covered files no longer live over all covered bytes."""
    live_bytes = sum(a.size for a in snapshot.files.values())
    appended = sum(a.size for a in snapshot.files.values() if a.fileId not in covered)
    covered_live = live_bytes - appended
    sizes = snapshot.tombstone_sizes
    gone = sum(sizes.get(i, 0) for i in covered)
    return appended / max(1, live_bytes), gone / max(1, covered_live + gone)


def unusable_reason(snapshot: Snapshot, index: IndexEntry, covered: set[int]) -> str | None:
    """Why ``index`` should not answer at ``snapshot`` (None when it should)."""
    if index.state not in READABLE_STATES:
        return f"index {index.name!r} is {index.state}, not readable (ACTIVE, REFRESHING or OPTIMIZING)"
    conf = snapshot.metadata.configuration
    appended, deleted = staleness(snapshot, covered)
    max_appended = config.get(conf, "indexeddf.hybridScan.maxAppendedRatio")
    max_deleted = config.get(conf, "indexeddf.hybridScan.maxDeletedRatio")
    if appended > max_appended:
        return (f"index {index.name!r} does not cover {appended:.0%} of the live bytes (limit "
                f"indexeddf.hybridScan.maxAppendedRatio={max_appended}); refresh it")
    if deleted > max_deleted:
        return (f"{deleted:.0%} of the bytes index {index.name!r} covers were removed (limit "
                f"indexeddf.hybridScan.maxDeletedRatio={max_deleted}); refresh it")
    return None
