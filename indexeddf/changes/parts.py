"""A MERGE source that is not held whole in memory: staged files, read one part at a time.

A Spark DataFrame source (``IndexedTable.merge(spark_df, ...)``) is written by Spark's
tasks as Parquet under the table's staging folder (``spark/merge_source.py``) instead of
being collected to this process. When the merge predicate fixes every bucketing column of
the table by equality with source columns, the tasks stage the rows by the table's bucket
(Spark's hash of the keys cast to the table's types, exactly the table's bucketing): a
target row can only match source rows of its own bucket, so the engine runs the change
one bucket's part at a time, in one commit, and holds one part of the source at a time.
Otherwise the source is one part, read whole (as an Arrow source is).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Callable

import pyarrow as pa

from ..format.snapshot import Snapshot
from .clauses import NOT_MATCHED_BY_SOURCE
from .model import Change


@dataclass
class SourcePart:
    """Source rows of some buckets (``buckets`` None: rows of any), read when needed."""

    buckets: frozenset[int] | None
    num_rows: int
    read: Callable[[], pa.Table]


BUCKETS_A_PART = 4
"""Consecutive one-bucket parts the engine runs together (:func:`grouped`): a part of one
bucket meets one bucket's files, which a change then rewrites one at a time; four buckets'
parts let it rewrite two files at once, and hold four buckets' share of the source."""


def grouped(parts: list[SourcePart], size: int = BUCKETS_A_PART) -> list[SourcePart]:
    """``parts`` with consecutive parts of some buckets merged ``size`` at a time (their
    rows read together); a part of every bucket stays as it is."""
    out: list[SourcePart] = []
    run: list[SourcePart] = []

    def flush() -> None:
        if len(run) == 1:
            out.append(run[0])
        elif run:
            reads = [p.read for p in run]
            out.append(SourcePart(frozenset().union(*(p.buckets for p in run)), sum(p.num_rows for p in run),
                                  lambda reads=reads: pa.concat_tables([r() for r in reads])))
        run.clear()

    for p in parts:
        if p.buckets is None:
            flush()
            out.append(p)
            continue
        run.append(p)
        if len(run) == size:
            flush()
    flush()
    return out


@dataclass
class PartedSource:
    """A staged source: its schema and its parts (disjoint, together every source row)."""

    schema: pa.Schema
    parts: list[SourcePart]

    @property
    def num_rows(self) -> int:
        return sum(p.num_rows for p in self.parts)


def staged_parts(schema: pa.Schema, files: Iterable[tuple[int, str, int]],
                 read: Callable[[list[str]], pa.Table]) -> PartedSource:
    """Staged files, each ``(bucket, path, rows)`` (bucket -1: rows of any bucket), as a
    source of one part per bucket, in bucket order; ``read(paths)`` reads a part's files."""
    by_bucket: dict[int, list[tuple[str, int]]] = {}
    for b, path, rows in files:
        by_bucket.setdefault(b, []).append((path, rows))
    return PartedSource(schema, [
        SourcePart(None if b < 0 else frozenset([b]), sum(n for _, n in staged),
                   functools.partial(read, [path for path, _ in staged]))
        for b, staged in sorted(by_bucket.items())])


class LazySource:
    """A source staged when the merge runs (a Spark DataFrame's, ``spark/merge_source.py``):
    ``schema`` is known before; :meth:`stage` writes the rows for one change on one
    snapshot; :meth:`drop` deletes what was staged, whatever happened."""

    schema: pa.Schema

    def stage(self, snapshot: Snapshot, change: Change, bucket_keys: list[str] | None) -> PartedSource:
        """The staged rows, by bucket when ``bucket_keys`` (the source columns equal to the
        table's bucketing columns, in their order) is given."""
        raise NotImplementedError

    def drop(self) -> None:
        """Delete the staged rows."""
        raise NotImplementedError

    def run_merge(self, snapshot: Snapshot, predicate: str, clauses: list, source_alias: str, target_alias: str,
                  txn: tuple[str, int] | None, schema_mode: str | None) -> dict | None:
        """Run the whole MERGE elsewhere than in this engine (a Spark DataFrame's: as a Spark
        SQL statement, ``spark/statements.py``) and return its metrics, or None (the
        default) to have the engine stage this source and run it."""
        return None


def bucket_keys(snapshot: Snapshot, change: Change) -> list[str] | None:
    """The source columns equal (by the merge predicate) to each bucketing column of the
    table, when running the change one bucket at a time is exact: every live file belongs
    to one bucket (a file of another Delta writer holds rows of every bucket) and no
    ``not_matched_by_source`` clause needs the whole source. Else None."""
    if any(c.when == NOT_MATCHED_BY_SOURCE for c in change.clauses):
        return None
    by_target = dict(change.keys)
    columns = snapshot.metadata.indexColumns
    if not columns or any(c not in by_target for c in columns):
        return None
    if any(a.bucket is None for a in snapshot.live_files()):
        return None
    return [by_target[c] for c in columns]
