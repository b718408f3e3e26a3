"""The part of a filter that names partition columns only, and the files it keeps.

A file of a partitioned table holds one value of each partition column (PROTOCOL.md §18),
so a condition on partition columns only is true or not for all its rows at once: the
top-level AND conjuncts of a filter that name partition columns only, evaluated on a
file's partition values, tell whether the file can hold a matching row. Every reader that
skips files this way (lookups' hybrid scans, the planners' reports, ``replaceWhere``)
takes the conjuncts from here. Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from .column_mapping import physical_name
from .expressions import CompiledExpression, compile_tree, parse_guarded, require_boolean
from .partitions import parse_value


@dataclass(frozen=True)
class SplitFilter:
    """A parsed filter: the whole condition, and the AND of its conjuncts on partition
    columns only (None: there is none)."""

    condition: CompiledExpression
    partitions: CompiledExpression | None
    partition_only: bool
    """Every conjunct names partition columns only."""


def split_filter(text: str, schema: pa.Schema, partition_columns: Sequence[str],
                 context: str = "predicate") -> SplitFilter:
    """Parse ``text`` (Spark SQL) against ``schema``; typed errors for what cannot be
    evaluated (``InvalidOptionError``) or names no column (``SchemaMismatchError``)."""
    columns = dict(zip(schema.names, schema.types))
    partitioned = set(partition_columns)

    def compiled(tree: exp.Expression) -> CompiledExpression:
        return require_boolean(compile_tree(tree, columns, tree.sql(dialect="spark"), context=context), context)

    def parse(tree: exp.Expression) -> SplitFilter:
        whole = require_boolean(compile_tree(tree, columns, text, context=context), context)
        conjuncts = _conjuncts(tree)
        kept = [c for c in conjuncts if compiled(c).columns_used <= partitioned]
        partitions = None
        if kept:
            tree_of = kept[0]
            for conjunct in kept[1:]:
                tree_of = exp.and_(tree_of, conjunct)
            partitions = compiled(tree_of)
        return SplitFilter(whole, partitions, len(kept) == len(conjuncts))

    return parse_guarded(text, context, parse)


def partition_conjuncts(text: str, schema: pa.Schema, partition_columns: Sequence[str]) -> CompiledExpression | None:
    """The AND of ``text``'s conjuncts on partition columns only (None: none, or the table
    is not partitioned)."""
    if not partition_columns:
        return None
    return split_filter(text, schema, partition_columns).partitions


def _conjuncts(tree: exp.Expression) -> list[exp.Expression]:
    tree = tree.unnest()
    if isinstance(tree, exp.And):
        return _conjuncts(tree.this) + _conjuncts(tree.expression)
    return [tree]


def partition_rows(files: Sequence, schema: pa.Schema) -> pa.Table:
    """One row per file: its partition values, typed as the table's columns (the other
    columns are left out: a condition on partition columns only is evaluated on it).
    ``schema``: the table's ``file_schema``; a column-mapped table's ``partitionValues``
    name its columns by their physical names, the rows by their logical ones."""
    logical = {physical_name(f): f.name for f in schema}
    keys = sorted({c for a in files for c in a.partitionValues})
    if not keys:
        return pa.table({"__files": pa.nulls(len(files), pa.null())})
    arrays = []
    for c in keys:
        name = logical.get(c, c)
        t = schema.field(name).type
        arrays.append(pa.array([parse_value(a.partitionValues.get(c), t, name) for a in files], t))
    return pa.Table.from_arrays(arrays, names=[logical.get(c, c) for c in keys])


def files_where(files: Sequence, condition: CompiledExpression | None, schema: pa.Schema) -> list:
    """Those of ``files`` (AddFiles) whose partition values make ``condition`` true (every
    file when it is None)."""
    files = list(files)
    if condition is None or not files:
        return files
    holds = pc.fill_null(condition.evaluate(partition_rows(files, schema)), False).to_pylist()
    return [a for a, keep in zip(files, holds) if keep]
