"""``explain``: what a query with a predicate reads through an index, or why no index helps."""

from __future__ import annotations

import itertools

import pyarrow as pa

from ..errors import SchemaMismatchError
from ..format.snapshot import Snapshot
from ..reader import lookup
from ..spec.actions import READABLE_STATES, IndexEntry
from ..spec.predicate import Predicate, parse_predicate
from ..spec.schema import arrow_schema

MAX_KEY_COMBINATIONS = 100_000
"""Key constraints on a composite index expand to their cartesian product, up to this."""


def choose(snapshot: Snapshot, pred: Predicate) -> tuple[IndexEntry | None, list[str]]:
    """The index that answers ``pred`` (primary first), and the reasons others don't."""
    why_not = []
    constrained = set(pred.keys)
    for entry in sorted(snapshot.indexes.values(), key=lambda e: (e.kind != "primary", e.name)):
        missing = [c for c in entry.columns if c not in constrained]
        if entry.state not in READABLE_STATES:
            why_not.append(f"index {entry.name!r} on {list(entry.columns)} is {entry.state}, not readable")
        elif missing:
            why_not.append(
                f"index {entry.name!r} on {list(entry.columns)}: no equality, <=> or IN filter on {missing}"
            )
        elif _combinations(pred, entry) > MAX_KEY_COMBINATIONS:
            why_not.append(f"index {entry.name!r}: more than {MAX_KEY_COMBINATIONS} key combinations")
        elif (reason := lookup.unusable_reason(snapshot, entry, _covered(entry))) is not None:
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
    return lookup.keys_table(combos, entry.columns, schema)


def explain_predicate(snapshot: Snapshot, text: str) -> str:
    """A readable account of how ``text`` is answered at ``snapshot``."""
    schema = arrow_schema(snapshot.metadata.schema_)
    pred = parse_predicate(text, schema)
    lines = [
        f"table {snapshot.storage.url} version {snapshot.version}: "
        f"{snapshot.num_records()} rows in {len(snapshot.files)} files, {snapshot.metadata.numBuckets} buckets",
        f"predicate: {text}",
    ]
    entry, why_not = choose(snapshot, pred)
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
    plan = lookup.plan_lookup(snapshot, entry, keys)
    covered = len(plan.live_covered_ids)
    probed = set(plan.buckets)
    index_files = [f for f in entry.files if f.bucket in probed]
    lines += [
        f"index: {entry.name!r} ({entry.kind}) on {list(entry.columns)}, {entry.state}, covers {covered} of "
        f"{len(snapshot.files)} live files",
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
