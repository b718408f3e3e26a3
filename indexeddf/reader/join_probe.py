"""The per-bucket kernel of indexed joins: probe rows of bucket i against the table's bucket i.

Runs inside Spark tasks (``mapInArrow``), Spark-free. The table side of a task is a
small picklable :class:`TableSide`: which index files form each bucket's trie, which
data files must be scanned (those the index does not cover, or all of the bucket's
files when no index is used), and the paths of the data files the tries point into.

For one bucket, the distinct probe keys' hashes probe the bucket's trie (vectorised,
reusing ``reader.lookup.bucket_trie`` / ``fetch_rows``), the uncovered files are
scanned, and :func:`pair_rows` pairs every probe row with every table row of equal
key: by key hash first, then by comparing the values, so a hash collision never
pairs wrong rows. Null keys never match (as in a Spark join); NaN matches NaN.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..spec.actions import AddFile, IndexFile
from ..spec.arrays import distinct
from ..spec.bucketing import bucket_ids, key_hash
from ..spec.column_mapping import plain
from .lookup import ReadContext, bucket_trie, equal_null_safe, fetch_rows, scan_files

OUT_BATCH_ROWS = 65536
PROBE_CHUNK_ROWS = 1_000_000
"""A task joins its probe rows in chunks of about this many rows."""


@dataclass(frozen=True)
class TableSide:
    """What a task needs of the table to join one of its buckets (small, picklable)."""

    read: ReadContext
    hash_columns: tuple[str, ...]
    """Table columns buckets are hashed on, in hash order (an index's columns)."""
    num_buckets: int
    index_files: dict = field(default_factory=dict)
    """bucket -> index files of that bucket's trie (empty when no index is used)."""
    scan_files: dict = field(default_factory=dict)
    """bucket -> data files to scan whole (key -1: files that may hold rows of any
    bucket, such as files other Delta writers added or a table not bucketed like the
    index; each task keeps only its bucket's rows of them)."""
    """Scanned rows must be filtered to the bucket (files not bucketed by ``hash_columns``)."""


@dataclass(frozen=True)
class JoinSpec:
    """The shape of a join, shared by every task."""

    how: str  # inner | left | semi
    key_pairs: tuple[tuple[str, str], ...]
    """(table column, probe key column in the task's input) per join key."""
    table_out: tuple[str, ...]
    """Table columns emitted (in order) after the probe columns."""
    probe_out: tuple[str, ...]
    """Probe columns of the task's input emitted first (in order)."""
    out_schema: pa.Schema
    """Arrow schema Spark expects of the emitted batches."""


def table_rows(side: TableSide, bucket: int, probe_keys: pa.Table, read_cols: list[str],
               scanned: dict | None = None) -> pa.Table:
    """Candidate table rows of ``bucket`` for ``probe_keys`` (columns named as the table's).

    Rows reached through the trie share a key hash with a probe key; scanned rows are
    every row of the bucket's uncovered files. Callers pair and verify with :func:`pair_rows`.
    """
    parts = []
    files = side.index_files.get(bucket, ())
    if files and probe_keys.num_rows:
        hashes = distinct(key_hash([probe_keys.column(c) for c in side.hash_columns]))
        trie = bucket_trie(side.read, tuple(files), hashes)
        _, fids, rows = trie.probe(hashes, side.read.live_covered_ids)
        for fid in distinct(fids):
            parts.append(fetch_rows(side.read, side.read.paths[int(fid)], distinct(rows[fids == fid]), read_cols))
    if scanned is not None and bucket in scanned:
        rows = scanned[bucket]
    else:
        own = tuple(side.scan_files.get(bucket, ()))
        anywhere = tuple(side.scan_files.get(-1, ()))
        rows = scan_files(side.read, own, read_cols) if own else None
        if anywhere:
            more = scan_files(side.read, anywhere, read_cols)
            ids = bucket_ids([more.column(c) for c in side.hash_columns], side.num_buckets)
            more = more.filter(pa.array(ids == bucket))
            rows = more if rows is None else pa.concat_tables([rows, more])
        if scanned is not None:
            scanned[bucket] = rows
    if rows is not None and rows.num_rows:
        parts.append(rows)
    target = plain(pa.schema([side.read.schema.field(c) for c in read_cols]))
    parts = [p.select(read_cols).cast(target) for p in parts]
    # One chunk: fetched rows are many slices, and hashing works chunk by chunk.
    return pa.concat_tables(parts).combine_chunks() if parts else target.empty_table()


def pair_rows(probe: list, table: list) -> tuple[np.ndarray, np.ndarray]:
    """(probe row, table row) ordinals of every pair with equal keys (same-typed key
    columns; the probe's keys are non-null)."""
    if len(probe[0]) == 0 or len(table[0]) == 0:
        empty = np.empty(0, np.int64)
        return empty, empty
    ht = key_hash(table)
    order = np.argsort(ht, kind="stable")
    sorted_ht = ht[order]
    hp = key_hash(probe)
    lo = np.searchsorted(sorted_ht, hp, side="left")
    hi = np.searchsorted(sorted_ht, hp, side="right")
    counts = hi - lo
    total = int(counts.sum())
    p_of = np.repeat(np.arange(len(hp)), counts)
    at = np.repeat(lo, counts) + (np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts))
    t_of = order[at]
    match = np.ones(total, dtype=bool)
    for p, t in zip(probe, table):
        match &= equal_null_safe(p.take(pa.array(p_of)), t.take(pa.array(t_of)))
    return p_of[match], t_of[match]


def join_chunk(side: TableSide, spec: JoinSpec, probe: pa.Table, scanned: dict) -> list[pa.Table]:
    """Joined output of probe rows (any buckets) as tables of ``spec.out_schema``."""
    table_cols = [c for c, _ in spec.key_pairs]
    read_cols = list(dict.fromkeys(table_cols + list(side.hash_columns) + list(spec.table_out)))
    types = {c: side.read.schema.field(c).type for c in read_cols}
    keys = pa.Table.from_arrays([probe.column(p).cast(types[t]) for t, p in spec.key_pairs], names=table_cols)
    valid = np.ones(probe.num_rows, dtype=bool)
    for c in table_cols:
        valid &= ~np.asarray(pc.is_null(keys.column(c)).to_numpy(zero_copy_only=False), dtype=bool)
    buckets = np.full(probe.num_rows, -1, dtype=np.int64)
    if valid.any():
        buckets[valid] = bucket_ids([keys.column(c).filter(pa.array(valid)) for c in side.hash_columns], side.num_buckets)
    out, matched_any = [], np.zeros(probe.num_rows, dtype=bool)
    for b in distinct(buckets[buckets >= 0]):
        sel = np.flatnonzero(buckets == b)
        bkeys = keys.take(pa.array(sel))
        rows = table_rows(side, int(b), bkeys, read_cols, scanned)
        p_of, t_of = pair_rows([bkeys.column(c) for c in table_cols], [rows.column(c) for c in table_cols])
        if spec.how == "semi":
            matched_any[sel[distinct(p_of)]] = True
            continue
        matched_any[sel[p_of]] = True
        if len(p_of):
            out.append(_assemble(spec, probe.take(pa.array(sel[p_of])), rows.take(pa.array(t_of))))
    if spec.how == "semi":
        if matched_any.any():
            out.append(_assemble(spec, probe.filter(pa.array(matched_any)), None))
    elif spec.how == "left" and not matched_any.all():
        out.append(_assemble(spec, probe.filter(pa.array(~matched_any)), None))
    return out


def _assemble(spec: JoinSpec, probe: pa.Table, table: pa.Table | None) -> pa.Table:
    arrays = [probe.column(c) for c in spec.probe_out]
    n = probe.num_rows
    if spec.how != "semi":
        for c in spec.table_out:
            arrays.append(table.column(c) if table is not None else pa.nulls(n))
    out = []
    for a, f in zip(arrays, spec.out_schema):
        out.append(a if a.type == f.type else a.cast(f.type))
    return pa.Table.from_arrays(out, schema=spec.out_schema)


def _batches(tables: list[pa.Table], schema: pa.Schema):
    for t in tables:
        for b in t.to_batches(max_chunksize=OUT_BATCH_ROWS):
            if b.num_rows:
                yield b


def join_partition(side: TableSide, spec: JoinSpec, batches):
    """``mapInArrow`` body of the shuffle strategy: the probe partition's rows joined.

    The partition normally holds one bucket (the probe was repartitioned by Spark's
    hash into the table's bucket count), but rows are grouped by their own bucket, so
    any partitioning gives the same answer.
    """
    scanned: dict = {}
    pending, size = [], 0
    for batch in batches:
        pending.append(batch)
        size += batch.num_rows
        if size >= PROBE_CHUNK_ROWS:
            yield from _batches(join_chunk(side, spec, pa.Table.from_batches(pending), scanned), spec.out_schema)
            pending, size = [], 0
    if size:
        yield from _batches(join_chunk(side, spec, pa.Table.from_batches(pending), scanned), spec.out_schema)


def join_buckets(side: TableSide, spec: JoinSpec, other: "OtherSide", batches):
    """``mapInArrow`` body of ``join_table``: each input row is a bucket id; the other
    table's files of that bucket are the probe rows."""
    scanned: dict = {}
    for batch in batches:
        for b in batch.column(0).to_pylist():
            probe = other.read_bucket(int(b))
            if probe.num_rows:
                yield from _batches(join_chunk(side, spec, probe, scanned), spec.out_schema)


@dataclass(frozen=True)
class OtherSide:
    """The probe table of ``join_table``: its live files by bucket, read whole."""

    read: ReadContext
    files: dict  # bucket -> tuple[AddFile, ...]
    columns: tuple[str, ...]
    """Its columns, renamed in order to ``names`` (``_p0``, ``_p1``, ...)."""
    names: tuple[str, ...]
    arrow_types: tuple

    def read_bucket(self, bucket: int) -> pa.Table:
        files = tuple(self.files.get(bucket, ()))
        rows = scan_files(self.read, files, list(self.columns))
        arrays = [rows.column(c) for c in self.columns]
        arrays = [a if a.type == t else a.cast(t) for a, t in zip(arrays, self.arrow_types)]
        return pa.Table.from_arrays(arrays, names=list(self.names))


__all__ = ["TableSide", "JoinSpec", "OtherSide", "table_rows", "pair_rows", "join_chunk",
           "join_partition", "join_buckets", "AddFile", "IndexFile"]
