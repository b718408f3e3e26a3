"""The one index planner: which index answers a filter, which buckets it probes,
which files it scans (hybrid scan), and when an index is too stale to use.

Every reader plans here: ``IndexedTable.lookup``, ``explain``, ``delete`` (which
buckets to read), joins (which index is the pre-built side), and the Spark
connector's lookups follow the same rules (docs/PROTOCOL.md 13). The rules, each
written once:

- an index answers only in a readable state (ACTIVE, REFRESHING, OPTIMIZING);
- it answers a filter only when every one of its columns is fixed by an equality,
  ``<=>``, IN or IS NULL, and the fixed values combine to at most
  :data:`MAX_INDEX_KEYS` keys;
- not when it is staler than the table's ``indexeddf.hybridScan.*`` limits;
- the primary index first, then the others by name; for an older version, the state
  of each index (then or newest) that leaves the fewest bytes to scan.

The plans are :mod:`indexeddf.reader.plan` objects; :mod:`indexeddf.reader.lookup`
executes them.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import IndexNotFoundError, InvalidOptionError, SchemaMismatchError
from ..format.snapshot import Snapshot
from ..reader.plan import LookupPlan, LookupTask
from ..spec import config
from ..spec.actions import PRIMARY_INDEX, IndexEntry, IndexFile
from ..spec.arrays import distinct
from ..spec.bucketing import bucket_ids
from ..spec.column_mapping import table_schema
from ..spec.expressions import CompiledExpression
from ..spec.partition_filter import files_where
from ..spec.partitions import prune
from ..spec.schema import arrow_schema, type_name
from ..spec.states import READABLE_STATES

MAX_INDEX_KEYS = config.MAX_INDEX_KEYS
"""The most keys one index lookup takes (:data:`indexeddf.spec.config.MAX_INDEX_KEYS`, which
the JVM connector reads too)."""

# -- choosing an index -----------------------------------------------------------------
def usable_indexes(snapshot: Snapshot) -> list[IndexEntry]:
    """ACTIVE indexes, the primary one first."""
    active = [i for i in snapshot.indexes.values() if i.state in READABLE_STATES]
    return sorted(active, key=lambda i: (i.kind != "primary", i.name))


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
_CAST_ERRORS = (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError)


def _key_column(values: pa.ChunkedArray, column: str, target: pa.DataType) -> pa.ChunkedArray:
    """Lookup keys of one index column as its type; a key that is no value of the type
    raises a one-line ``SchemaMismatchError`` naming the column, its type and the key."""
    try:
        return _cast_keys(values, target)
    except _CAST_ERRORS:
        bad = next((v for v in values.to_pylist() if not _casts(v, values.type, target)), None)
        raise SchemaMismatchError(
            f"lookup key {bad!r} is not a value of index column {column!r} ({type_name(target, column)})",
            [column]) from None


def _cast_keys(values, target: pa.DataType):
    """``values`` cast to ``target``. Text keys of a ``timestamp`` column without an
    offset are taken as UTC, the zone the table's timestamps are instants in."""
    try:
        return values.cast(target)
    except _CAST_ERRORS:
        if not (pa.types.is_timestamp(target) and target.tz is not None and pa.types.is_string(values.type)):
            raise
    return values.cast(pa.timestamp(target.unit)).cast(target)


def _casts(value, source: pa.DataType, target: pa.DataType) -> bool:
    """Whether one key value casts to ``target`` (asked on the error path only)."""
    try:
        _cast_keys(pa.array([value], source), target)
        return True
    except _CAST_ERRORS:
        return False


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
    table = pa.Table.from_arrays([_key_column(table.column(c), c, t) for c, t in zip(columns, types)], names=list(columns))
    if table.num_rows > MAX_INDEX_KEYS:
        raise InvalidOptionError(f"{table.num_rows} lookup keys; at most {MAX_INDEX_KEYS} per lookup: join a DataFrame of the keys instead (IndexedTable.join)")
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


@dataclass(frozen=True)
class _Coverage:
    """What a lookup plan takes of a snapshot and an index whatever the keys: computed
    once per (snapshot, index), since a DataFrame or a service plans many lookups of one
    version, and after many small changes a table has hundreds of files to go through."""

    covered: frozenset[int]
    why_not: str | None
    live_covered_ids: np.ndarray
    uncovered: tuple  # live AddFiles the index does not cover
    files_by_bucket: Mapping[int, tuple[IndexFile, ...]]


_COVERAGE: dict[int, tuple[Snapshot, IndexEntry, _Coverage]] = {}
_COVERAGE_SIZE = 8


def _coverage(snapshot: Snapshot, index: IndexEntry) -> _Coverage:
    key = id(snapshot) ^ (id(index) << 1)
    hit = _COVERAGE.get(key)
    if hit is not None and hit[0] is snapshot and hit[1] is index:
        return hit[2]
    live = snapshot.files
    covered = {fid for f in index.files for fid in f.fileIds} if index.state in READABLE_STATES else set()
    why_not = unusable_reason(snapshot, index, covered)
    if why_not is not None:
        covered = set()
    live_ids = np.array(sorted(a.fileId for a in live.values()), dtype=np.int64)
    live_covered_ids = live_ids[np.isin(live_ids, np.fromiter(covered, np.int64, len(covered)))]
    live_covered_ids.setflags(write=False)  # shared by every plan of this snapshot
    files_by_bucket: dict[int, list[IndexFile]] = defaultdict(list)
    live_covered = set(live_covered_ids.tolist())
    for f in index.files if covered else ():
        # An index file that covers no live file holds only entries the lookup drops
        # (PROTOCOL.md 13, step 2): not read, as the connector does not read it.
        if not live_covered.isdisjoint(f.fileIds):
            files_by_bucket[f.bucket].append(f)
    out = _Coverage(frozenset(covered), why_not, live_covered_ids,
                    tuple(a for a in live.values() if a.fileId not in covered),
                    {b: tuple(fs) for b, fs in files_by_bucket.items()})
    if len(_COVERAGE) >= _COVERAGE_SIZE:
        _COVERAGE.pop(next(iter(_COVERAGE)))
    # The entry holds the snapshot and index themselves, so their ids cannot be reused
    # by other objects while it is cached.
    _COVERAGE[key] = (snapshot, index, out)
    return out


def _plan(snapshot: Snapshot, index: IndexEntry, keys: pa.Table, why_not: str | None) -> LookupPlan:
    cov = _coverage(snapshot, index)
    plan = LookupPlan(index, keys)
    plan.why_not = why_not or cov.why_not
    covered = cov.covered if plan.why_not is None else frozenset()
    if plan.why_not is None:
        plan.live_covered_ids = cov.live_covered_ids
    if keys.num_rows == 0:
        return plan
    to_scan = list(cov.uncovered) if covered else list(snapshot.files.values())
    meta = snapshot.metadata
    if tuple(index.columns) == tuple(meta.indexColumns):
        # Data files are bucketed by these columns: only the keys' buckets can match.
        # A file another Delta writer added has no bucket (None): it may hold any key.
        wanted = set(bucket_ids([keys.column(c) for c in index.columns], meta.numBuckets).tolist())
        to_scan = [a for a in to_scan if a.bucket is None or a.bucket in wanted]
    if meta.partitionColumns and set(index.columns) & set(meta.partitionColumns):
        # Keys fix partition columns: files of other partitions cannot match.
        to_scan = prune(to_scan, {c: keys.column(c) for c in index.columns if c in meta.partitionColumns},
                        table_schema(meta))
    if covered:
        buckets = bucket_ids([keys.column(c) for c in index.columns], index.numBuckets)
        for b in distinct(buckets):
            plan.tasks.append(LookupTask(int(b), keys.filter(pa.array(buckets == b)), cov.files_by_bucket.get(int(b), ())))
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


# -- choosing the index for a filter -----------------------------------------------------
def covered_ids(entry: IndexEntry) -> set[int]:
    """File ids of the data files ``entry``'s index files hold entries for."""
    return {i for f in entry.files for i in f.fileIds}


def serving_states(snapshot: Snapshot, latest: Snapshot | None = None) -> list[IndexEntry]:
    """Per index name, the state that serves a read of ``snapshot``: of its state there
    and at ``latest`` (a newer version), the one :func:`serving_index` picks; indexes
    that exist only at ``latest`` count too. Primary first, then by name."""
    if latest is None or latest.version == snapshot.version:
        entries = list(snapshot.indexes.values())
    else:
        names = dict.fromkeys([*snapshot.indexes, *latest.indexes])
        entries = [serving_index(snapshot, [snapshot.indexes.get(n), latest.indexes.get(n)]) for n in names]
    return sorted(entries, key=lambda e: (e.kind != "primary", e.name))


def rejection(snapshot: Snapshot, entry: IndexEntry, fixed: Sequence[str], key_count: int | None = None,
              not_fixed: str = "no equality, <=> or IN filter on") -> str | None:
    """Why ``entry`` cannot answer a read that fixes the columns ``fixed`` to
    ``key_count`` keys (None: no cap), or None when it can: the planner's rules of state,
    columns, key count and staleness, in that order."""
    label = f"index {entry.name!r} on {list(entry.columns)}"
    if entry.state not in READABLE_STATES:
        return f"{label} is {entry.state}, not readable (ACTIVE, REFRESHING or OPTIMIZING)"
    missing = [c for c in entry.columns if c not in fixed]
    if missing:
        return f"{label}: {not_fixed} {missing}"
    if key_count is not None and key_count > MAX_INDEX_KEYS:
        return f"{label}: {key_count} key combinations, more than {MAX_INDEX_KEYS} (answered by a scan)"
    return unusable_reason(snapshot, entry, covered_ids(entry))


def key_count(fixed: Mapping[str, Sequence], columns: Sequence[str]) -> int:
    """How many keys the distinct values ``fixed`` per column combine to on ``columns`` (a
    value repeated in an IN list is one key, as Spark's optimizer makes it for the connector)."""
    return math.prod(len(set(fixed[c])) for c in columns)


@dataclass
class FilterPlan:
    """How a filter that fixes some columns is read at one snapshot."""

    lookup: LookupPlan | None
    """The index lookup that answers it (with its hybrid scan), or None: a scan."""
    data_buckets: set[int] | None
    """Table buckets that can hold matching rows (None: every bucket)."""
    why_not: list[str] = field(default_factory=list)
    """Why each index passed over was not used."""

    @property
    def index(self) -> IndexEntry | None:
        """The index that answers, or None."""
        return self.lookup.index if self.lookup is not None else None


def plan_filter(snapshot: Snapshot, fixed: Mapping[str, Sequence], latest: Snapshot | None = None,
                partition_filter: CompiledExpression | None = None) -> FilterPlan:
    """The read of a filter at ``snapshot`` whose conjuncts fix ``fixed`` (column ->
    the values it may equal; None in them: NULL).

    ``latest``: a newer snapshot of the table, when ``snapshot`` is older: a newer state
    of an index may serve it, and index files deleted since are checked for.
    ``partition_filter``: the filter's conjuncts on partition columns only
    (``spec.partition_filter.partition_conjuncts``): the hybrid scan skips the unindexed
    files of partitions they exclude, as the connector's lookups do.
    """
    schema = arrow_schema(snapshot.metadata.schema_)
    check = latest is not None and latest.version != snapshot.version
    why_not: list[str] = []
    for entry in serving_states(snapshot, latest):
        reason = rejection(snapshot, entry, list(fixed), key_count(fixed, entry.columns) if set(entry.columns) <= set(fixed) else None)
        if reason is None:
            try:
                keys = keys_table(list(itertools.product(*(fixed[c] for c in entry.columns))), entry.columns, schema)
            except SchemaMismatchError as e:
                reason = f"index {entry.name!r}: the filter's values do not fit its columns ({e})"
        if reason is None:
            plan = plan_lookup(snapshot, entry, keys, check_files=check)
            if plan.why_not is None:
                return FilterPlan(pruned(snapshot, plan, fixed, partition_filter), data_buckets(snapshot, fixed),
                                  why_not)
            reason = plan.why_not
        why_not.append(reason)
    if not snapshot.indexes:
        why_not.append("the table has no index")
    return FilterPlan(None, data_buckets(snapshot, fixed), why_not)


def pruned(snapshot: Snapshot, plan: LookupPlan, fixed: Mapping[str, Sequence],
           partition_filter: CompiledExpression | None = None) -> LookupPlan:
    """``plan`` without the unindexed files of partitions the filter's values ``fixed``,
    or its conjuncts on partition columns ``partition_filter``, exclude (a filter on a
    partition column skips the files of other partitions)."""
    parts = {c: v for c, v in fixed.items() if c in snapshot.metadata.partitionColumns}
    if not parts and partition_filter is None:
        return plan
    schema = table_schema(snapshot.metadata)
    tasks = []
    for t in plan.tasks:
        if t.scan_files:
            kept = files_where(prune(t.scan_files, parts, schema), partition_filter, schema)
            t = replace(t, scan_files=tuple(kept))
            if not t.scan_files:
                continue
        tasks.append(t)
    plan.tasks = tasks
    return plan


def data_buckets(snapshot: Snapshot, fixed: Mapping[str, Sequence]) -> set[int] | None:
    """The table buckets that can hold rows whose columns take the values ``fixed``
    (None: every bucket, when the table's index columns are not all fixed, their keys
    exceed :data:`MAX_INDEX_KEYS`, or a value does not fit its column)."""
    meta = snapshot.metadata
    columns = list(meta.indexColumns)
    if not all(c in fixed for c in columns) or key_count(fixed, columns) > MAX_INDEX_KEYS:
        return None
    schema = arrow_schema(meta.schema_)
    try:
        keys = keys_table(list(itertools.product(*(fixed[c] for c in columns))), tuple(columns), schema)
    except SchemaMismatchError:
        return None
    if keys.num_rows == 0:
        return set()
    return set(bucket_ids([keys.column(c) for c in columns], meta.numBuckets).tolist())


def join_index(snapshot: Snapshot, key_columns: Sequence[str]) -> tuple[IndexEntry | None, list[str]]:
    """The index a join on ``key_columns`` probes (all its columns are join keys; the
    planner's rules of state and staleness; primary first), and why others were not."""
    why_not = []
    for entry in serving_states(snapshot):
        reason = rejection(snapshot, entry, list(key_columns), not_fixed="not all of its columns are join keys; missing")
        if reason is None:
            return entry, why_not
        why_not.append(reason)
    if not snapshot.indexes:
        why_not.append("the table has no index")
    return None, why_not


def plan_keys(snapshot: Snapshot, keys, index: str | None = None, latest: Snapshot | None = None) -> LookupPlan:
    """The plan of ``IndexedTable.lookup(keys, index=...)`` at ``snapshot``: through the
    named index (default: the primary one) when the planner's rules allow it, else a scan
    of the keys' buckets (``plan.why_not`` says why). ``latest``: as in :func:`plan_filter`."""
    entry = index_for_lookup(snapshot, index)
    check = latest is not None and latest.version != snapshot.version
    if check:
        entry = serving_index(snapshot, [entry, latest.indexes.get(entry.name)])
    table = keys_table(keys, entry.columns, arrow_schema(snapshot.metadata.schema_))
    return plan_lookup(snapshot, entry, table, check_files=check)
