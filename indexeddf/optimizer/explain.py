"""``explain``: what a query with a predicate reads through an index, or why no index helps."""

from __future__ import annotations

import itertools

import pyarrow as pa

from ..errors import SchemaMismatchError
from ..format.snapshot import Snapshot, update_snapshot
from ..reader import lookup_plan
from ..spec.actions import READABLE_STATES, IndexEntry
from ..spec.predicate import Predicate, parse_predicate
from ..spec.schema import arrow_schema

MAX_KEY_COMBINATIONS = 100_000
"""Key constraints on a composite index expand to their cartesian product, up to this."""


def serving_states(snapshot: Snapshot, latest: Snapshot | None = None) -> list[IndexEntry]:
    """Per index name, the state that would serve a read of ``snapshot``: of its state
    there and at ``latest`` (a newer version), the one ``lookup_plan.serving_index`` picks,
    as the Spark source does (which also uses indexes that exist only at ``latest``).
    Primary first, then by name."""
    if latest is None or latest.version == snapshot.version:
        entries = list(snapshot.indexes.values())
    else:
        names = dict.fromkeys([*snapshot.indexes, *latest.indexes])
        entries = [lookup_plan.serving_index(snapshot, [snapshot.indexes.get(n), latest.indexes.get(n)]) for n in names]
    return sorted(entries, key=lambda e: (e.kind != "primary", e.name))


def choose(snapshot: Snapshot, pred: Predicate, latest: Snapshot | None = None) -> tuple[IndexEntry | None, list[str]]:
    """The index that answers ``pred`` (primary first), and the reasons others don't.

    With ``latest`` (a newer snapshot of the table), an index's newer state may answer
    for ``snapshot`` (``serving_states``).
    """
    why_not = []
    constrained = set(pred.keys)
    for entry in serving_states(snapshot, latest):
        missing = [c for c in entry.columns if c not in constrained]
        if entry.state not in READABLE_STATES:
            why_not.append(f"index {entry.name!r} on {list(entry.columns)} is {entry.state}, not readable")
        elif missing:
            why_not.append(
                f"index {entry.name!r} on {list(entry.columns)}: no equality, <=> or IN filter on {missing}"
            )
        elif _combinations(pred, entry) > MAX_KEY_COMBINATIONS:
            why_not.append(f"index {entry.name!r}: more than {MAX_KEY_COMBINATIONS} key combinations")
        elif (reason := lookup_plan.unusable_reason(snapshot, entry, _covered(entry))) is not None:
            why_not.append(reason)
        else:
            return entry, why_not
    if not snapshot.indexes:
        why_not.append("the table has no index")
    return None, why_not


def _covered(entry: IndexEntry) -> set[int]:
    return {i for f in entry.files for i in f.fileIds}


def _combinations(pred: Predicate, entry: IndexEntry) -> int:
    n = 1
    for c in entry.columns:
        n *= len(pred.keys[c].values)
    return n


def key_table(snapshot: Snapshot, pred: Predicate, entry: IndexEntry) -> pa.Table:
    """The distinct keys ``pred`` asks ``entry`` for (the product of its constraints)."""
    schema = arrow_schema(snapshot.metadata.schema_)
    combos = list(itertools.product(*(pred.keys[c].values for c in entry.columns)))
    return lookup_plan.keys_table(combos, entry.columns, schema)


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
    ``snapshot`` is older, a newer state of an index may answer, as in ``lookup`` and
    Spark reads of an older version, and the ``index snapshot`` line says so.
    """
    schema = arrow_schema(snapshot.metadata.schema_)
    pred = parse_predicate(text, schema)
    if latest is None:
        latest = update_snapshot(snapshot)
    lines = [
        f"table {snapshot.storage.url} version {snapshot.version}: "
        f"{snapshot.num_records()} rows in {len(snapshot.files)} files, {snapshot.metadata.numBuckets} buckets",
        f"predicate: {text}",
    ]
    entry, why_not = choose(snapshot, pred, latest)
    if entry is None:
        fixed = all(c in pred.keys for c in snapshot.metadata.indexColumns)
        lines.append("index: none; scan of the keys' data buckets" if fixed else "index: none; full scan of every live file")
        lines += [f"  why not: {r}" for r in why_not]
        return "\n".join(lines)
    try:
        keys = key_table(snapshot, pred, entry)
    except SchemaMismatchError as e:
        lines.append(f"index: none; full scan (the literals do not fit the index columns: {e})")
        return "\n".join(lines)
    plan = lookup_plan.plan_lookup(snapshot, entry, keys, check_files=latest is not None and latest.version != snapshot.version)
    if plan.why_not is not None:  # its files were deleted since this version
        lines += ["index: none; scan of the keys' data buckets" if tuple(entry.columns) == tuple(snapshot.metadata.indexColumns)
                  else "index: none; full scan of every live file", f"  why not: {plan.why_not}"]
        return "\n".join(lines)
    covered = len(plan.live_covered_ids)
    probed = set(plan.buckets)
    index_files = [f for f in entry.files if f.bucket in probed]
    lines += [
        f"index: {entry.name!r} ({entry.kind}) on {list(entry.columns)}, {entry.state}, covers {covered} of "
        f"{len(snapshot.files)} live files",
        index_snapshot_line(snapshot, entry),
        f"  keys: {keys.num_rows}",
        f"  buckets probed: {sorted(probed)} of {entry.numBuckets}",
        f"  index files read: {len(index_files)} ({sum(f.size for f in index_files)} bytes)",
        "  data files read: only the row groups holding matching rows",
        f"  unindexed files scanned: {len(plan.scanned_files)}"
        + (f" ({', '.join(f.path for f in plan.scanned_files[:5])}{', ...' if len(plan.scanned_files) > 5 else ''})" if plan.scanned_files else ""),
    ]
    residual = [k.text for c, k in pred.keys.items() if c not in entry.columns] + pred.residual
    if residual:
        lines.append(f"  then filtered by: {' AND '.join(residual)}")
    lines += [f"  not used: {r}" for r in why_not]
    return "\n".join(lines)
