"""Where a change's SQL expressions are evaluated: the target's and the source's columns
side by side, each under its alias.

A merge pairs target rows with source rows in one Arrow table whose columns are named
``<target alias>.<column>`` and ``<source alias>.<column>``; ``t.v + s.v`` and, where a
name is in only one of them, plain ``v`` resolve against it (the compiler in
:mod:`indexeddf.spec.expressions` does the resolving, and refuses ambiguous names).
UPDATE and DELETE have the target alone.
"""

from __future__ import annotations

from functools import lru_cache

import pyarrow as pa

from ..spec.expressions import compile_expression, compile_predicate


class Scope:
    """The columns a change's expressions may name: the target's under ``target_alias``,
    the source's (when there is a source) under ``source_alias``."""

    def __init__(self, target: pa.Schema, target_alias: str, source: pa.Schema | None, source_alias: str):
        self.target_schema, self.target_alias = target, target_alias
        self.source_schema, self.source_alias = source, source_alias

    def target_name(self, column: str) -> str:
        """The name a target column has in a pair table."""
        return f"{self.target_alias}.{column}"

    def source_name(self, column: str) -> str:
        """The name a source column has in a pair table."""
        return f"{self.source_alias}.{column}"

    def target_columns(self, rows: pa.Table) -> pa.Table:
        """``rows`` of the target with their pair-table names."""
        return rows.rename_columns([self.target_name(c) for c in rows.column_names])

    def source_columns(self, rows: pa.Table) -> pa.Table:
        """``rows`` of the source with their pair-table names."""
        return rows.rename_columns([self.source_name(c) for c in rows.column_names])

    def _columns(self, target: bool, source: bool) -> tuple[tuple[str, pa.DataType], ...]:
        cols = []
        if target:
            cols += [(self.target_name(f.name), f.type) for f in self.target_schema]
        if source and self.source_schema is not None:
            cols += [(self.source_name(f.name), f.type) for f in self.source_schema]
        return tuple(cols)

    def _aliases(self, target: bool, source: bool) -> tuple[tuple[str, str], ...]:
        out = []
        if target:
            out.append((self.target_alias, self.target_alias + "."))
        if source and self.source_schema is not None:
            out.append((self.source_alias, self.source_alias + "."))
        return tuple(out)

    def compile(self, text: str, target: bool = True, source: bool = True, condition: bool = False):
        """``text`` compiled over the target's (and the source's) columns (``condition``:
        it must be boolean); typed errors for what cannot be evaluated or names no column."""
        return _compiled(text, self._columns(target, source), self._aliases(target, source), condition)

    def evaluate(self, text: str, rows: pa.Table, target: bool = True, source: bool = True,
                 condition: bool = False):
        """``text`` evaluated on every row of the pair table ``rows``."""
        return self.compile(text, target, source, condition).evaluate(rows)


@lru_cache(maxsize=256)
def _compiled(text: str, columns: tuple, aliases: tuple, condition: bool):
    # A clause's expressions are evaluated once per rewritten file: compiled once.
    compile = compile_predicate if condition else compile_expression
    return compile(text, dict(columns), aliases=dict(aliases))
