"""Finding a change's target rows: through the index when the change fixes every column
of a usable index (the source's keys, or an UPDATE/DELETE predicate's literals), else
every live file."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import SchemaMismatchError
from ..format.snapshot import Snapshot
from ..optimizer import planner
from ..reader import lookup as lookup_mod
from ..reader.locate import locate
from ..spec.actions import AddFile
from ..spec.arrays import distinct
from .clauses import NOT_MATCHED_BY_SOURCE, UPDATE
from .expressions import Scope
from .model import Change


@dataclass
class Found:
    """The live files that can hold a changed row, how they were found, and (index
    found, deletion vectors on) the located target rows with their file id and ordinal."""

    files: list[AddFile]
    by: str
    located: pa.Table | None = None


def target_columns(change: Change, scope: Scope, schema: pa.Schema) -> list[str]:
    """The target columns a deletion-vector change must read of its matched rows: the key
    columns, those its conditions and expressions name, and those an UPDATE keeps as they
    were (none for ``UPDATE SET *``, whose new rows come from the source alone). An upsert
    then decodes the key columns of the row groups it touches, not the whole rows."""
    prefix = scope.target_name("")
    needed = {t for t, _ in change.keys}
    texts = [change.residual] if change.residual is not None else []
    for c in change.clauses:
        texts += [c.predicate] if c.predicate is not None else []
        texts += list(c.updates.values())
        if c.action == UPDATE and not c.all_columns:
            needed |= {f for f in schema.names if f not in c.updates}
    for text in texts:
        needed |= {name[len(prefix):] for name in scope.compile(text).columns_used if name.startswith(prefix)}
    return [c for c in schema.names if c in needed]


def find(snapshot: Snapshot, change: Change, schema: pa.Schema, with_rows: list[str] | None) -> Found:
    """Where the change's target rows are: through the index when it can say, else every
    live file. ``with_rows`` (columns): the index lookup returns the rows themselves, so
    a deletion-vector change reads only those columns of the row groups that hold them."""
    live = snapshot.live_files()
    if change.candidates is not None:
        live = change.candidates(live)
    if any(c.when == NOT_MATCHED_BY_SOURCE for c in change.clauses) or not live:
        return Found(live, "scan")
    keys = _probe_keys(change, schema)
    if keys is None:
        return Found(live, "scan")
    columns, table = keys
    entry, _ = planner.join_index(snapshot, columns)
    if entry is None:
        return Found(live, "scan")
    if table.num_rows == 0:
        return Found([], "index")
    read = list(entry.columns) if with_rows is None else [c for c in schema.names
                                                          if c in with_rows or c in entry.columns]
    located = locate(snapshot, planner.plan_lookup(snapshot, entry, table.select(list(entry.columns))), read)
    ids = set(located.column(lookup_mod.FILE_ID).to_pylist())
    return Found([a for a in live if a.fileId in ids], "index", None if with_rows is None else located)


def _probe_keys(change: Change, schema: pa.Schema) -> tuple[list[str], pa.Table] | None:
    """The target columns fixed by equality and their distinct non-NULL values (from the
    source's key columns, or an UPDATE/DELETE predicate's literals); None: no keys."""
    if change.source is not None:
        if not change.keys:
            return None
        columns = [t for t, _ in change.keys]
        arrays = []
        for t, s in change.keys:
            try:
                arrays.append(change.source.column(s).cast(schema.field(t).type))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                return None  # keys of another type: compared by the join, found by a scan
        table = pa.Table.from_arrays(arrays, names=columns)
        valid = None
        for c in columns:  # NULL keys never match
            v = pc.is_valid(table.column(c))
            valid = v if valid is None else pc.and_(valid, v)
        table = table.filter(valid)
        return columns, _distinct(table)
    if not change.fixed:
        return None
    columns = list(change.fixed)
    rows = list(itertools.product(*(change.fixed[c] for c in columns)))
    if len(rows) > planner.MAX_INDEX_KEYS:
        return None
    try:
        table = planner.keys_table(rows, tuple(columns), schema) if rows else schema.empty_table().select(columns)
    except SchemaMismatchError:
        return None
    return columns, table


def _distinct(table: pa.Table) -> pa.Table:
    if table.num_rows < 2:
        return table
    if table.num_columns == 1 and table.column(0).null_count == 0 and pa.types.is_integer(table.column(0).type):
        # One integer key (the usual one): numpy's sort beats a hash aggregation of millions of keys.
        values = distinct(table.column(0).to_numpy())
        return pa.table({table.column_names[0]: pa.array(values, table.column(0).type)})
    return table.group_by(table.column_names, use_threads=False).aggregate([])
