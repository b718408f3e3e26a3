"""``explain``: what a query with a predicate reads through an index, or why no index helps.

It renders the plan of :func:`.planner.plan_filter`, the planner ``lookup``, ``delete``,
joins and the Spark connector use, so what it says is what they do.
"""

from __future__ import annotations

from ..format.snapshot import Snapshot, update_snapshot
from ..spec.actions import IndexEntry
from ..spec.column_mapping import table_schema
from ..spec.partition_filter import partition_conjuncts
from ..spec.partitions import prune
from ..spec.predicate import parse_predicate
from ..spec.schema import arrow_schema
from .planner import FilterPlan, plan_filter

SPARK_FALLBACK_LINE = (
    "spark.read.format('indexeddf'): through the JVM connector (indexeddf.configure), a lookup through "
    "the same index on the driver (no Spark job) when an index answers and the keys are few "
    "(spark.indexeddf.driverLookup.*), else Spark's Parquet scan of the version's files, pruned to the "
    "keys' buckets when every file has one; through the Python fallback, every live file (docs/spark.md)"
)
"""The last line of an explain whose filter an index or the bucketing narrows."""


def index_snapshot_line(snapshot: Snapshot, entry: IndexEntry) -> str:
    """Which state of ``entry``'s index answers at ``snapshot``: the table version it
    covers, and whether it is a newer state than the one ``snapshot`` holds."""
    line = f"  index snapshot: {entry.name!r} covering table version {entry.coveredVersion}"
    if entry is not snapshot.indexes.get(entry.name):
        held = snapshot.indexes.get(entry.name)
        then = f"version {snapshot.version} holds none" if held is None else \
            f"version {snapshot.version} holds one covering version {held.coveredVersion}"
        line += (f", a newer state of the index than the one read ({then}); "
                 f"its entries of files not live at version {snapshot.version} are ignored")
    return line


def explain_predicate(snapshot: Snapshot, text: str, latest: Snapshot | None = None) -> str:
    """A readable account of how ``text`` is answered at ``snapshot``.

    ``latest``: the newest snapshot of the table (read from the log when None): when
    ``snapshot`` is older, a newer state of an index may answer, as in ``lookup``, and
    the ``index snapshot`` line says so.
    """
    pred = parse_predicate(text, arrow_schema(snapshot.metadata.schema_))
    if latest is None:
        latest = update_snapshot(snapshot)
    fixed = {c: k.values for c, k in pred.keys.items()}
    parts = partition_conjuncts(text, arrow_schema(snapshot.metadata.schema_), snapshot.metadata.partitionColumns)
    plan = plan_filter(snapshot, fixed, latest, parts)
    lines = [
        f"table {snapshot.storage.url} version {snapshot.version}: "
        f"{snapshot.num_records()} rows in {len(snapshot.files)} files, {snapshot.metadata.numBuckets} buckets",
        f"predicate: {text}",
    ]
    if plan.lookup is None:
        lines.append(_scan_line(snapshot, plan))
        lines += [f"  why not: {r}" for r in plan.why_not]
    else:
        lines += _lookup_lines(snapshot, plan)
        residual = [k.text for c, k in pred.keys.items() if c not in plan.index.columns] + pred.residual
        if residual:
            lines.append(f"  then filtered by: {' AND '.join(residual)}")
        lines += [f"  not used: {r}" for r in plan.why_not]
    lines += _partition_lines(snapshot, fixed)
    if plan.lookup is not None or plan.data_buckets is not None:
        lines.append(SPARK_FALLBACK_LINE)
    return "\n".join(lines)


def _partition_lines(snapshot: Snapshot, fixed) -> list[str]:
    """What the filter's values of partition columns skip (nothing when it fixes none)."""
    columns = snapshot.metadata.partitionColumns
    parts = {c: v for c, v in fixed.items() if c in columns}
    if not columns:
        return []
    if not parts:
        return [f"partitions: the table is partitioned by {list(columns)}; the filter fixes none, so every "
                "partition is read"]
    files = snapshot.files.values()
    kept = prune(files, parts, table_schema(snapshot.metadata))
    return [f"partitions: the filter on {sorted(parts)} keeps {len(kept)} of {len(files)} live files "
            f"({len({tuple(sorted(a.partitionValues.items(), key=str)) for a in kept})} partition(s)); "
            "the files of other partitions are skipped"]


def _scan_line(snapshot: Snapshot, plan: FilterPlan) -> str:
    if plan.data_buckets is None:
        return "index: none; full scan of every live file"
    foreign = sum(1 for a in snapshot.files.values() if a.bucket is None)
    return (f"index: none; scan of the keys' data buckets "
            f"({len(plan.data_buckets)} of {snapshot.metadata.numBuckets}: {sorted(plan.data_buckets)[:20]})"
            + (f" and of the {foreign} file(s) without a bucket (added by other Delta writers)" if foreign else ""))


def _lookup_lines(snapshot: Snapshot, plan: FilterPlan) -> list[str]:
    lookup, entry = plan.lookup, plan.index
    probed = set(lookup.buckets)
    index_files = [f for t in lookup.tasks for f in t.index_files]
    scanned = lookup.scanned_files
    return [
        f"index: {entry.name!r} ({entry.kind}) on {list(entry.columns)}, {entry.state}, covers "
        f"{len(lookup.live_covered_ids)} of {len(snapshot.files)} live files",
        index_snapshot_line(snapshot, entry),
        f"  keys: {lookup.keys.num_rows}",
        f"  buckets probed: {sorted(probed)} of {entry.numBuckets}",
        f"  index files read: {len(index_files)} ({sum(f.size for f in index_files)} bytes)",
        "  data files read: only the row groups holding matching rows",
        f"  unindexed files scanned: {len(scanned)}"
        + (f" ({', '.join(f.path for f in scanned[:5])}{', ...' if len(scanned) > 5 else ''})" if scanned else ""),
    ]
