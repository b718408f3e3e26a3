"""The changes a MERGE (:class:`TableMerger`, :func:`merge_change`), an UPDATE
(:func:`update_rows`) and a DELETE (:func:`delete_matching`) make, for the engine
(:mod:`.engine`) to run; re-exported by :mod:`indexeddf.changes`."""


from __future__ import annotations

import pyarrow as pa

# Every change parses Spark SQL: sqlglot loads its Spark dialect (about 0.1-0.2 s) on
# first use; loading it with the engine keeps that out of a pipeline's first change.
import sqlglot.dialects.spark  # noqa: F401, E402

from ..errors import InvalidOptionError
from ..format.snapshot import Snapshot
from ..spec.column_mapping import evolve
from ..spec.expressions import equality_keys, merge_columns
from ..spec.predicate import parse_predicate
from ..spec.schema import arrow_schema
from ..writer.data import to_arrow_table
from ..writer.operations import evolved_fields
from .clauses import DELETE, INSERT, MATCHED, NOT_MATCHED, NOT_MATCHED_BY_SOURCE, UPDATE, Clause
from .model import Change
from .parts import LazySource, bucket_keys

# The engine (and the readers and writers it calls) loads with the statements for the same
# reason: a pipeline's process imports this once, and its first change does not pay for
# the imports (about 15 ms).
from . import engine as _engine  # noqa: F401, E402  isort: skip


class TableMerger:
    """A MERGE being described: add WHEN clauses, then :meth:`execute`.

    Made by ``IndexedTable.merge(source, predicate, source_alias=..., target_alias=...)``;
    the clause methods return the merger itself, so they chain as in delta-rs::

        t.merge(src, "t.k = s.k", source_alias="s", target_alias="t") \\
            .when_matched_update_all().when_not_matched_insert_all().execute()
    """

    def __init__(self, table, source, predicate: str, source_alias: str = "source", target_alias: str = "target",
                 txn: tuple[str, int] | None = None, schema_mode: str | None = None):
        if not isinstance(predicate, str) or not predicate.strip():
            raise InvalidOptionError("merge needs a predicate: SQL text such as \"target.k = source.k\"")
        if not source_alias or not target_alias or source_alias == target_alias:
            raise InvalidOptionError(f"source_alias and target_alias must be two different names, got "
                                     f"{source_alias!r} and {target_alias!r}")
        self._table = table
        # A lazy source (a Spark DataFrame's) is staged by Spark's tasks when the merge runs.
        self._source = source if isinstance(source, LazySource) else to_arrow_table(source)
        self._predicate = predicate
        self._source_alias, self._target_alias = source_alias, target_alias
        self._txn = txn
        if schema_mode not in (None, "merge"):
            raise InvalidOptionError(f"a merge takes schema_mode='merge' or none, got {schema_mode!r}")
        self._schema_mode = schema_mode
        self._clauses: list[Clause] = []

    def _add(self, clause: Clause) -> "TableMerger":
        self._clauses.append(clause)
        return self

    def when_matched_update(self, updates: dict[str, str], predicate: str | None = None) -> "TableMerger":
        """WHEN MATCHED [AND predicate] THEN UPDATE SET column = expression, ..."""
        return self._add(Clause(MATCHED, UPDATE, predicate, dict(updates)))

    def when_matched_update_all(self, predicate: str | None = None) -> "TableMerger":
        """WHEN MATCHED [AND predicate] THEN UPDATE SET *: every column from the source's."""
        return self._add(Clause(MATCHED, UPDATE, predicate, all_columns=True))

    def when_matched_delete(self, predicate: str | None = None) -> "TableMerger":
        """WHEN MATCHED [AND predicate] THEN DELETE."""
        return self._add(Clause(MATCHED, DELETE, predicate))

    def when_not_matched_insert(self, updates: dict[str, str], predicate: str | None = None) -> "TableMerger":
        """WHEN NOT MATCHED [AND predicate] THEN INSERT (columns) VALUES (expressions over
        the source); columns not named are NULL."""
        return self._add(Clause(NOT_MATCHED, INSERT, predicate, dict(updates)))

    def when_not_matched_insert_all(self, predicate: str | None = None) -> "TableMerger":
        """WHEN NOT MATCHED [AND predicate] THEN INSERT *."""
        return self._add(Clause(NOT_MATCHED, INSERT, predicate, all_columns=True))

    def when_not_matched_by_source_update(self, updates: dict[str, str], predicate: str | None = None) -> "TableMerger":
        """WHEN NOT MATCHED BY SOURCE [AND predicate] THEN UPDATE SET ... (target columns only)."""
        return self._add(Clause(NOT_MATCHED_BY_SOURCE, UPDATE, predicate, dict(updates)))

    def when_not_matched_by_source_delete(self, predicate: str | None = None) -> "TableMerger":
        """WHEN NOT MATCHED BY SOURCE [AND predicate] THEN DELETE."""
        return self._add(Clause(NOT_MATCHED_BY_SOURCE, DELETE, predicate))

    def execute(self) -> dict:
        """Run the merge in one commit; returns its metrics (delta-rs's names, plus
        ``version``: the version committed, None when nothing changed).

        A Spark DataFrame source on a session with the JVM connector runs as Spark SQL's
        ``MERGE INTO`` (Catalyst evaluates every expression, executors write; without
        ``txn``, on a table Spark reaches without ``storage_options``); otherwise the
        engine runs it with the DataFrame staged by its tasks (docs/changes.md)."""
        if not self._clauses:
            raise InvalidOptionError("a merge needs at least one when_* clause")
        if not isinstance(self._source, LazySource):
            return self._table._run_change(lambda snapshot: self._change(snapshot), self._txn)
        metrics = self._table._run_elsewhere(lambda snapshot: self._source.run_merge(
            snapshot, self._predicate, self._clauses, self._source_alias, self._target_alias, self._txn,
            self._schema_mode))
        if metrics is not None:  # Spark ran it as a MERGE INTO statement
            return metrics
        try:
            return self._table._run_change(self._staged_change, self._txn)
        finally:
            self._source.drop()

    def _staged_change(self, snapshot: Snapshot) -> Change:
        """The change with its lazy source staged for it: by bucket when the predicate
        fixes the table's bucketing columns (:mod:`.parts`)."""
        change = self._change(snapshot)  # the lazy source's schema is all this needs
        change.source = self._source.stage(snapshot, change, bucket_keys(snapshot, change))
        return change

    def _change(self, snapshot: Snapshot) -> Change:
        return merge_change(self._source, self._predicate, self._clauses, self._source_alias,
                            self._target_alias, self._schema_mode)(snapshot)


def merge_change(source, predicate: str, clauses: list[Clause], source_alias: str = "source",
                 target_alias: str = "target", schema_mode: str | None = None):
    """The change of ``MERGE INTO target USING source ON predicate WHEN ...`` (the clauses in
    their order; ``source`` an Arrow table), as :func:`update_rows` gives UPDATE's.

    ``schema_mode="merge"`` (delta-rs's name; Delta's ``MERGE WITH SCHEMA EVOLUTION``):
    when a clause is ``UPDATE SET *`` or ``INSERT *``, the source's columns the table lacks
    are added at its end, and its structs' new fields at theirs, in the same commit (Delta's rule: the ``*`` forms evolve the
    schema), with the refusals of every schema change (``spec/schema_evolution.py``)."""
    if not clauses:
        raise InvalidOptionError("a merge needs at least one WHEN clause")

    def change(snapshot: Snapshot) -> Change:
        new_fields = _merged_fields(snapshot, source.schema, clauses) if schema_mode == "merge" else None
        if new_fields is not None:  # a column-mapped table's new columns get their names and ids now
            new_fields = evolve(snapshot.metadata, new_fields).schema_
        schema = arrow_schema(new_fields or snapshot.metadata.schema_)
        columns, aliases = merge_columns(schema, source.schema, target_alias, source_alias)
        on = equality_keys(predicate, columns, aliases=aliases, target_prefix=aliases[target_alias],
                           source_prefix=aliases[source_alias])
        params = {"predicate": predicate, "matchedPredicates": _described(clauses, MATCHED),
                  "notMatchedPredicates": _described(clauses, NOT_MATCHED),
                  "notMatchedBySourcePredicates": _described(clauses, NOT_MATCHED_BY_SOURCE)}
        if new_fields is not None:
            params["mergeSchema"] = True
        return Change("MERGE", params, list(clauses), source, target_alias, source_alias, on.keys, on.residual_text,
                      new_fields=new_fields)
    return change


def _merged_fields(snapshot: Snapshot, source: pa.Schema, clauses: list[Clause]):
    """The table's fields with the source's new columns added, or None when no ``*`` clause
    asks for them or the source has none."""
    if not any(c.all_columns for c in clauses):
        return None
    fields = snapshot.metadata.schema_
    names = {f.name for f in fields}
    theirs = {f.name: f for f in source}
    # The schema check of a merging write: the table's own columns (a nested one as the
    # source has it, so its structs gain the source's new fields), then the source's new
    # ones; a name that differs from a column only by case is refused there.
    table = [theirs[f.name] if f.name in theirs and pa.types.is_nested(f.type) and pa.types.is_nested(
        theirs[f.name].type) else f for f in arrow_schema(fields)]
    data = pa.schema(table + [f for f in source if f.name not in names])
    merged = evolved_fields(snapshot, data, "merge")
    return None if merged == tuple(fields) else merged


def _described(clauses: list[Clause], when: str) -> list[dict]:
    """Delta's commitInfo description of the clauses of one kind."""
    return [{"actionType": c.action, **({"predicate": c.predicate} if c.predicate else {})}
            for c in clauses if c.when == when]


def fixed_keys(predicate: str | None, snapshot: Snapshot) -> dict | None:
    """The literal values a predicate fixes per column (the planner's key constraints),
    or None when it fixes none or the key parser does not take it."""
    if predicate is None:
        return None
    try:
        parsed = parse_predicate(predicate, arrow_schema(snapshot.metadata.schema_))
    except InvalidOptionError:
        return None
    return {c: k.values for c, k in parsed.keys.items()} or None


def update_rows(updates: dict[str, str], predicate: str | None = None):
    """The change of ``UPDATE t SET column = expression, ... [WHERE predicate]``."""
    if not updates:
        raise InvalidOptionError("update needs updates={column: SQL expression}")

    def change(snapshot: Snapshot) -> Change:
        clause = Clause(MATCHED, UPDATE, predicate, dict(updates))
        return Change("UPDATE", {"predicate": predicate or "true"}, [clause], fixed=fixed_keys(predicate, snapshot))
    return change


def delete_matching(predicate: str | None = None):
    """The change of ``DELETE FROM t [WHERE predicate]``."""
    def change(snapshot: Snapshot) -> Change:
        clause = Clause(MATCHED, DELETE, predicate)
        return Change("DELETE", {"predicate": predicate or "true"}, [clause], fixed=fixed_keys(predicate, snapshot))
    return change
