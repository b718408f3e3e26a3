"""What a change does to rows: target rows paired with source rows on the merge
predicate, each row's first clause whose condition holds, the new versions of updated
rows, and the inserted rows. Pure Arrow work on one file's rows at a time."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

# Table.join runs in Acero, which pyarrow imports on a process's first join: imported
# here, with the engine, not inside a pipeline's first change.
import pyarrow.acero  # noqa: F401
import pyarrow.compute as pc

from ..errors import InvalidOptionError, SchemaMismatchError
from ..spec.deletion_vectors import unique_sorted
from .clauses import DELETE, MATCHED, NOT_MATCHED, NOT_MATCHED_BY_SOURCE, Clause
from .expressions import Scope
from .model import ROW, SOURCE_ROW, Change, ChangeMetrics


def change_file(rows: pa.Table, source: pa.Table | None, change: Change, scope: Scope, schema: pa.Schema,
                 metrics: ChangeMetrics, deleted: list | None = None,
                 ) -> tuple[np.ndarray | None, pa.Table | None, np.ndarray | None]:
    """What the change does to ``rows`` (one file's, each with its ordinal as :data:`ROW`):
    the ordinals of the rows it deletes or replaces (None: it changes none), their new
    versions (None: none), and the ordinals of the source rows that matched one of them.
    ``deleted``: a list that gets the ordinals of the rows deleted (not updated) appended."""
    target = scope.target_columns(rows)
    matched_source = None
    if source is None:  # UPDATE / DELETE: every row is its own "pair"
        pairs = target
    else:
        pairs = _pairs(target, source, change, scope)
        _check_cardinality(pairs, change, scope)
        matched_source = pairs.column(scope.source_name(SOURCE_ROW)).to_numpy()
    touched, updated = _apply(pairs, [c for c in change.clauses if c.when == MATCHED], scope, schema, metrics,
                              deleted=deleted)
    by_source = [c for c in change.clauses if c.when == NOT_MATCHED_BY_SOURCE]
    if by_source:
        lonely = target.filter(pc.invert(pc.is_in(target.column(scope.target_name(ROW)),
                                                  pairs.column(scope.target_name(ROW)))))
        more, more_updated = _apply(lonely, by_source, scope, schema, metrics, source=False, deleted=deleted)
        touched, updated = touched + more, updated + more_updated
    if not touched:
        return None, None, matched_source
    return np.concatenate(touched), (pa.concat_tables(updated) if updated else None), matched_source


def _apply(rows: pa.Table, clauses: list[Clause], scope: Scope, schema: pa.Schema, metrics: ChangeMetrics,
           source: bool = True, deleted: list | None = None) -> tuple[list[np.ndarray], list[pa.Table]]:
    """Each row takes its first clause whose condition holds: the ordinals of the rows a
    clause took, and the new versions of the updated ones (``deleted`` gets the ordinals of
    the deleted ones)."""
    taken = _first_clause(rows, clauses, scope, source=source)
    ordinals = rows.column(scope.target_name(ROW)).to_numpy()
    touched, updated = [], []
    for i, clause in enumerate(clauses):
        took = taken == i
        n = int(took.sum())
        if n == 0:
            continue
        touched.append(ordinals[took])
        if clause.action == DELETE:
            metrics.num_target_rows_deleted += n
            if deleted is not None:
                deleted.append(ordinals[took])
        else:
            metrics.num_target_rows_updated += n
            updated.append(_assign(rows.filter(pa.array(took)), clause, scope, schema, source=source))
    return touched, updated


def _pairs(target: pa.Table, source: pa.Table, change: Change, scope: Scope) -> pa.Table:
    """(target row, source row) pairs the merge predicate holds for: an equi-join on the
    key pairs (NULLs never equal), then the rest of the predicate."""
    src = scope.source_columns(source)
    if change.keys:
        left = [scope.target_name(t) for t, _ in change.keys]
        right = [scope.source_name(s) for _, s in change.keys]
        # Key columns of different types are joined as the target's type.
        cast = [src.column(r).cast(target.schema.field(lk).type) for lk, r in zip(left, right)]
        keyed = src
        for r, c in zip(right, cast):
            keyed = keyed.set_column(keyed.schema.get_field_index(r), r, c)
        pairs = _equi_join(target, keyed, left, right)
    else:
        pairs = _cross(target, src)
    if change.residual is not None and pairs.num_rows:
        keep = pc.fill_null(scope.evaluate(change.residual, pairs, condition=True), False)
        pairs = pairs.filter(keep)
    return pairs


_LEFT_AT, _RIGHT_AT = "__indexeddf_left_at", "__indexeddf_right_at"


def _equi_join(target: pa.Table, source: pa.Table, left: list[str], right: list[str]) -> pa.Table:
    """The inner join of ``target`` and ``source`` on ``left`` = ``right`` (NULLs never
    equal), every column of both. Only the keys and row positions go through Arrow's
    join, which carries no struct, list or map column; the rows are then taken by position."""
    lk = target.select(left).append_column(_LEFT_AT, pa.array(np.arange(target.num_rows, dtype=np.int64)))
    rk = source.select(right).append_column(_RIGHT_AT, pa.array(np.arange(source.num_rows, dtype=np.int64)))
    joined = lk.join(rk, keys=left, right_keys=right, join_type="inner", use_threads=False, coalesce_keys=False)
    pairs = target.take(joined.column(_LEFT_AT))
    for name, col in zip(source.column_names, source.take(joined.column(_RIGHT_AT)).columns):
        pairs = pairs.append_column(name, col)
    return pairs


def _cross(target: pa.Table, source: pa.Table) -> pa.Table:
    """Every (target, source) pair: a merge predicate without equalities (small sides only)."""
    if target.num_rows * source.num_rows > 50_000_000:
        raise InvalidOptionError(
            "the merge predicate has no equality between a target and a source column, so every target row "
            f"would be paired with every source row ({target.num_rows} x {source.num_rows}): add one (t.k = s.k)")
    ti = np.repeat(np.arange(target.num_rows), source.num_rows)
    si = np.tile(np.arange(source.num_rows), target.num_rows)
    left, right = target.take(pa.array(ti)), source.take(pa.array(si))
    for name, col in zip(right.column_names, right.columns):
        left = left.append_column(name, col)
    return left


def _check_cardinality(pairs: pa.Table, change: Change, scope: Scope) -> None:
    """A target row matched by several source rows cannot be updated or deleted
    unambiguously: Delta's MERGE fails then (and so does this one)."""
    if not any(c.when == MATCHED for c in change.clauses) or pairs.num_rows < 2:
        return
    rows = pairs.column(scope.target_name(ROW)).to_numpy()
    if len(unique_sorted(rows)) != len(rows):
        raise InvalidOptionError(
            "MERGE: multiple source rows matched the same target row; a matched clause cannot tell which to apply. "
            "Make the source unique on the merge keys (for example keep the newest row per key) and run it again; "
            "nothing was committed")


def _first_clause(rows: pa.Table, clauses: list[Clause], scope: Scope, source: bool = True,
                  target: bool = True) -> np.ndarray:
    """Per row, the position of the first clause whose condition holds (-1: none)."""
    taken = np.full(rows.num_rows, -1, dtype=np.int64)
    for i, clause in enumerate(clauses):
        free = taken < 0
        if not free.any():
            break
        if clause.predicate is None:
            holds = free
        else:
            holds = free & _truth(scope.evaluate(clause.predicate, rows, target=target, source=source, condition=True))
        taken[holds] = i
    return taken


def _truth(values) -> np.ndarray:
    """A SQL condition's result as booleans (NULL is not true)."""
    return np.asarray(pc.fill_null(values, False).to_numpy(zero_copy_only=False), dtype=bool)


def _assign(rows: pa.Table, clause: Clause, scope: Scope, schema: pa.Schema, source: bool = True) -> pa.Table:
    """Target rows after an UPDATE clause: assigned columns from their expressions (all
    from the source's same-named columns with ``*``), the others as they were."""
    return _new_rows(rows, clause, scope, schema, lambda f: rows.column(scope.target_name(f.name)),
                     target=True, source=source)


def _new_rows(rows: pa.Table, clause: Clause, scope: Scope, schema: pa.Schema, unset, target: bool,
              source: bool) -> pa.Table:
    """Rows of the table's schema made by an UPDATE or INSERT clause from ``rows``: every
    column from the source's of its name with ``*``, assigned columns from their
    expressions, the others ``unset(field)`` (kept for an update, NULL for an insert)."""
    arrays = []
    for f in schema:
        if clause.all_columns:
            value = rows.column(scope.source_name(f.name))
        elif f.name in clause.updates:
            value = scope.evaluate(clause.updates[f.name], rows, target=target, source=source)
        else:
            value = unset(f)
        arrays.append(_typed(value, f, rows.num_rows))
    return pa.Table.from_arrays(arrays, schema=schema)


def inserts(source: pa.Table, change: Change, scope: Scope, schema: pa.Schema, metrics: ChangeMetrics) -> pa.Table:
    """New rows from the source rows no target row matched (first NOT MATCHED clause)."""
    clauses = [c for c in change.clauses if c.when == NOT_MATCHED]
    if not clauses or source.num_rows == 0:
        return schema.empty_table()
    src = scope.source_columns(source)
    taken = _first_clause(src, clauses, scope, source=True, target=False)
    parts = []
    for i, clause in enumerate(clauses):
        rows = src.filter(pa.array(taken == i))
        if rows.num_rows == 0:
            continue
        parts.append(_new_rows(rows, clause, scope, schema, lambda f, n=rows.num_rows: pa.nulls(n, f.type),
                               target=False, source=True))
    out = pa.concat_tables(parts) if parts else schema.empty_table()
    metrics.num_target_rows_inserted += out.num_rows
    return out


def _typed(value, f: pa.Field, n: int):
    """An expression's result as the column's type (a scalar is broadcast), or a typed
    error naming the column."""
    if isinstance(value, pa.Scalar):
        value = pa.array([value.as_py()] * n, value.type) if n else pa.array([], value.type)
    extra = _extra_fields(value.type, f.type)
    if extra:  # Arrow's cast would drop them silently
        raise SchemaMismatchError(
            f"the value for column {f.name!r} has struct fields the column lacks: {extra}; a merge with "
            "schema_mode='merge' (MERGE WITH SCHEMA EVOLUTION) adds them to the table", [f.name])
    try:
        value = value.cast(f.type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise SchemaMismatchError(f"the value for column {f.name!r} is not a {f.type}: {e}", [f.name]) from None
    if not f.nullable and value.null_count:
        raise SchemaMismatchError(f"column {f.name!r} is NOT NULL, but the change would write NULL into it", [f.name])
    return value


def _extra_fields(value: pa.DataType, column: pa.DataType, at: str = "") -> list[str]:
    """The struct fields of ``value`` that ``column`` lacks (dotted paths), inside structs,
    lists and map values too: what casting the one to the other would lose."""
    if pa.types.is_struct(value) and pa.types.is_struct(column):
        names = {column.field(i).name: column.field(i).type for i in range(column.num_fields)}
        out = []
        for i in range(value.num_fields):
            v = value.field(i)
            out += [at + v.name] if v.name not in names else _extra_fields(v.type, names[v.name], f"{at}{v.name}.")
        return out
    if (pa.types.is_list(value) or pa.types.is_large_list(value)) and (
            pa.types.is_list(column) or pa.types.is_large_list(column)):
        return _extra_fields(value.value_type, column.value_type, at)
    if pa.types.is_map(value) and pa.types.is_map(column):
        return _extra_fields(value.item_type, column.item_type, at)
    return []
