"""Executing index lookups: touched buckets -> trie probes -> rows, verified.

A lookup plan (:mod:`.plan`, made by :mod:`indexeddf.optimizer.planner`) at one snapshot reads two kinds of files:

- data files the index covers (their file id is in one of the index's files): found
  through the tries of the touched index buckets only;
- live data files the index does not cover (appended while ``autoRefresh`` was off,
  or while the index was being built): probed through per-file tries built from
  their key columns, for the primary index only in the touched data buckets.

Every candidate row's key is compared with the probed key, so a hash collision never
returns a wrong row, and entries of files that are not live are dropped by file id.
Index files (and per-file tries) point at every row of a file, deleted or not: a
candidate whose ordinal is in its file's deletion vector is dropped before any row is
read (deletion vectors are cached like footers, by their unique id).
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..format.datafiles import (
    conform,
    file_columns,
    open_footer,
    open_parquet,
    read_file,
    read_live_rows,
    read_named_file,
)
from ..format.footers import CompactFooter
from ..format.snapshot import Snapshot
from ..format.storage import TableStorage, frozen_options, thawed_options
from ..spec.actions import AddFile, IndexFile
from ..spec.arrays import distinct
from ..spec.bucketing import INDEX_BLOCK_SHARE, key_hash
from ..spec.column_mapping import file_schema, physical_name, plain
from ..spec.schema import check_columns, dictionary_columns
from .cache import cache, deletion_vector_rows
from .plan import LookupPlan, LookupTask
from .trie import BucketTrie, Segment, in_sorted


# -- execution -------------------------------------------------------------------------
@dataclass(frozen=True)
class ReadContext:
    """What executing lookup tasks needs of a snapshot: small and picklable, so a Spark
    task gets it with its partition instead of replaying the log."""

    url: str
    storage_options: str  # frozen_options(...): hashable even when options nest
    table_id: str
    schema: pa.Schema
    index_columns: tuple[str, ...]
    paths: dict  # file id -> relative path of the data files tasks may read
    live_covered_ids: np.ndarray
    version: int | None = None  # the snapshot's, named by errors
    deletion_vectors: dict = field(default_factory=dict)
    """Relative path -> ``DeletionVectorDescriptor`` of the files (of ``paths``) that have one."""
    partitions: dict = field(default_factory=dict)
    """Relative path -> ``partitionValues`` of the files (of ``paths``) in a partitioned table."""

    @classmethod
    def of(cls, snapshot: Snapshot, plan: LookupPlan, tasks: list[LookupTask] | None = None) -> "ReadContext":
        """The context of ``plan`` (restricted to the files ``tasks`` can reach)."""
        wanted = None
        if tasks is not None:
            wanted = {i for t in tasks for f in t.index_files for i in f.fileIds}
            wanted |= {a.fileId for t in tasks for a in t.scan_files}
        files = [a for a in snapshot.files.values() if wanted is None or a.fileId in wanted]
        live = plan.live_covered_ids if wanted is None else plan.live_covered_ids[np.isin(plan.live_covered_ids, list(wanted))]
        return cls(
            snapshot.storage.url, frozen_options(snapshot.storage.storage_options), snapshot.metadata.id,
            file_schema(snapshot.metadata.schema_, snapshot.metadata.configuration), tuple(plan.index.columns), {a.fileId: a.path for a in files},
            live, snapshot.version, deletion_vectors_of(files), partitions_of(files),
        )

    @property
    def storage(self) -> TableStorage:
        return _storage(self.url, self.storage_options)


def deletion_vectors_of(files) -> dict:
    """Path -> deletion vector descriptor of those ``files`` (AddFiles) that have one."""
    return {a.path: a.deletionVector for a in files if a.deletionVector is not None}


def partitions_of(files) -> dict:
    """Path -> ``partitionValues`` of those ``files`` (AddFiles) in a partitioned table."""
    return {a.path: a.partitionValues for a in files if a.partitionValues}


@lru_cache(maxsize=64)
def _storage(url: str, options: str) -> TableStorage:
    return TableStorage(url, thawed_options(options))


FILE_ID = "__file_id"
ROW_ORDINAL = "__row_ordinal"
"""With ``locate``, a lookup's rows carry where they are: the data file's id and the
row's ordinal in it (what a change rewrites or marks in a deletion vector)."""


def run_task(ctx: ReadContext, task: LookupTask, columns: list[str] | None, locate: bool = False) -> pa.Table:
    """The verified rows of one task, with ``columns`` (all when None), and with
    ``locate`` the :data:`FILE_ID` and :data:`ROW_ORDINAL` of each."""
    schema = ctx.schema
    out_cols = list(columns) if columns is not None else schema.names
    check_columns(schema.names, out_cols)
    read_cols = out_cols + [c for c in ctx.index_columns if c not in out_cols]
    hashes = key_hash([task.keys.column(c) for c in ctx.index_columns])
    if task.bucket is not None:
        trie, live = bucket_trie(ctx, task.index_files, hashes), ctx.live_covered_ids
    else:  # hybrid scan: files the index does not cover, probed through per-file tries
        trie, live = BucketTrie(tuple(file_segment(ctx, a) for a in task.scan_files)), None
    return probe_trie(ctx, trie, live, task.keys, read_cols, hashes).select(
        out_cols + ([FILE_ID, ROW_ORDINAL] if locate else []))


LOOKUP_THREADS = 2
"""Tasks (index buckets) of one lookup run at once: each is a few small reads (index row
groups, data row groups) whose decoding releases the GIL, so two overlap on two cores."""


def run_plan(snapshot: Snapshot, plan: LookupPlan, columns: list[str] | None, locate: bool = False) -> pa.Table:
    """Every task of ``plan``, concatenated in task order (``locate``: as in :func:`run_task`)."""
    ctx = ReadContext.of(snapshot, plan)
    if len(plan.tasks) > 1:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(min(LOOKUP_THREADS, len(plan.tasks))) as pool:
            parts = list(pool.map(lambda t: run_task(ctx, t, columns, locate), plan.tasks))
    else:
        parts = [run_task(ctx, t, columns, locate) for t in plan.tasks]
    if not parts:
        empty = plain(ctx.schema).empty_table().select(list(columns) if columns is not None else ctx.schema.names)
        return with_locators(empty, np.empty(0, np.int64), np.empty(0, np.int64)) if locate else empty
    return without_empty_batches(pa.concat_tables(parts))


def with_locators(rows: pa.Table, file_ids: np.ndarray, ordinals: np.ndarray) -> pa.Table:
    """``rows`` with the :data:`FILE_ID` and :data:`ROW_ORDINAL` columns appended."""
    return rows.append_column(FILE_ID, pa.array(file_ids, pa.int64())).append_column(
        ROW_ORDINAL, pa.array(ordinals, pa.int64()))


def without_empty_batches(table: pa.Table) -> pa.Table:
    """``table`` without its zero-row record batches (no copy).

    Tasks that find nothing leave empty chunks, and PySpark 4.3.0's
    ``spark.createDataFrame(arrow_table)`` drops every row after the first empty batch,
    so a lookup handed to Spark would lose rows.
    """
    batches = [b for b in table.to_batches() if b.num_rows]
    if len(batches) == len(table.to_batches()):
        return table
    return pa.Table.from_batches(batches, schema=table.schema)


PARTIAL_SHARE = INDEX_BLOCK_SHARE
"""A lookup reads only the row groups (blocks) of an index file whose hash range holds a
probed hash while they are at most this share of the file's row groups; past it (a join,
an IN list of many keys), the whole file, cached whole. A point lookup of a few keys thus
costs a few blocks a bucket however large the bucket, and a process that keeps looking up
new keys holds the blocks it read, not every bucket's whole index."""


def bucket_trie(ctx: ReadContext | Snapshot, index_files: tuple[IndexFile, ...],
                probes: np.ndarray | None = None) -> BucketTrie:
    """The trie of one index bucket, its segments taken from the cache where present.

    With ``probes`` (the key hashes a lookup will probe, any order), an index file that is
    not cached whole is read only in the row groups that can hold them: index files are
    sorted by hash in row groups of :data:`~indexeddf.writer.index_files.ENTRY_ROW_GROUP`
    entries, so a lookup of a few keys costs a few row groups a bucket, however large the
    bucket (the trie it probes then holds those row groups' entries only, which is all a
    probe of these hashes can reach)."""
    storage = ctx.storage
    table_id = ctx.table_id if isinstance(ctx, ReadContext) else ctx.metadata.id

    version = ctx.version if isinstance(ctx, ReadContext) else ctx.version

    def load(f: IndexFile):
        # ParquetFile, not read_table: read_table goes through pyarrow.dataset, whose
        # import (pandas included) would cost a fresh process ~300 ms.
        def read() -> Segment:
            data = read_named_file(storage, f.path, version)
            return Segment.from_entries(f.path, pq.ParquetFile(io.BytesIO(data)).read())
        return read

    trie_key = ("bucket-trie", table_id, tuple(f.path for f in index_files))
    known = cache().get(trie_key)
    if known is not None:
        return known
    sorted_probes = None if probes is None or not isinstance(ctx, ReadContext) else distinct(probes)
    segments: list[Segment] = []
    small: list[Segment] = []  # whole segments of small index files
    partial = False
    for f in index_files:
        key = ("segment", table_id, f.path)
        whole = cache().get(key) if sorted_probes is not None else None
        if whole is None:
            parts = _segment_parts(ctx, f, sorted_probes) if sorted_probes is not None else None
            if parts is not None:
                segments += parts
                partial = True
                continue
            whole = cache().get_or_load(key, load(f), lambda s: s.nbytes)
        (small if len(whole.hashes) <= SMALL_SEGMENT else segments).append(whole)
    trie = BucketTrie(tuple(segments) + _merged_small(table_id, small))
    if not partial:
        # Whole files only: the next lookup of this bucket finds the trie in one step
        # (counted at its segments' size, though it shares them with their own entries).
        cache().put(trie_key, trie, trie.nbytes)
    return trie


SMALL_SEGMENT = 1 << 14
"""Index files of at most this many entries (one index row group: what a small append or
change writes to a bucket) are probed as one merged segment, cached under the set of
their paths: a bucket after ten small merges is then two searches (its large file and
the merged small ones), not eleven."""


def _merged_small(table_id: str, small: list[Segment]) -> tuple[Segment, ...]:
    if len(small) < 2:
        return tuple(small)
    paths = tuple(sorted(s.path for s in small))
    merged = cache().get_or_load(("merged-segments", table_id, paths),
                                 lambda: Segment.merged(paths[0], tuple(small)), lambda s: s.nbytes)
    return (merged,)


def _segment_parts(ctx: ReadContext, f: IndexFile, probes: np.ndarray) -> list[Segment] | None:
    """The segments of the row groups of ``f`` whose hash range holds one of ``probes``
    (sorted), each cached on its own; None when the whole file is the better read."""
    footer = index_footer(ctx, f.path)
    n = len(footer.lows)
    if n < 2:
        return None
    groups = np.flatnonzero(np.searchsorted(probes, footer.highs, "right")
                            > np.searchsorted(probes, footer.lows, "left"))
    if len(groups) > PARTIAL_SHARE * n:
        return None
    c = cache()
    keys = {int(g): ("segment-group", ctx.table_id, f.path, int(g)) for g in groups}
    found = {g: c.get(k) for g, k in keys.items()}
    missing = [g for g, seg in found.items() if seg is None]
    if missing:
        # One read for the missing groups, on this thread: a few groups of ~100 KB decode
        # in about half the time without the hand-off to pyarrow's pool.
        table = read_index_groups(ctx, f.path, footer, missing)
        at = 0
        for g in missing:
            rows = int(footer.compact.rows[g])
            seg = Segment.from_entries(f.path, table.slice(at, rows))
            at += rows
            found[g] = seg
            c.put(keys[g], seg, seg.nbytes)
    return [found[int(g)] for g in groups]


@dataclass(frozen=True)
class IndexFooter:
    """An index file's footer, kept compact, and each row group's range of hashes."""

    compact: CompactFooter
    lows: np.ndarray  # per row group: the smallest and largest hash
    highs: np.ndarray

    @property
    def nbytes(self) -> int:
        """What this footer holds in memory."""
        return self.compact.nbytes + self.lows.nbytes + self.highs.nbytes


def index_footer(ctx: ReadContext, path: str) -> IndexFooter:
    """The footer of the index file ``path`` (cached: footers are small and reused)."""

    def load() -> IndexFooter:
        compact = open_footer(ctx.storage, path, ctx.version)
        # Decoded whole once, for the hash ranges, then dropped: the cache keeps the bytes.
        meta = compact.metadata(range(compact.num_row_groups))
        lows, highs = [], []
        for i in range(meta.num_row_groups):
            stats = meta.row_group(i).column(0).statistics  # "hash", the first column
            if stats is None or not stats.has_min_max:  # no bounds: the group may hold any hash
                lows.append(0)
                highs.append(0xFFFFFFFF)
            else:
                lows.append(int(stats.min))
                highs.append(int(stats.max))
        return IndexFooter(compact, np.array(lows, np.int64), np.array(highs, np.int64))

    return cache().get_or_load(("indexfooter", ctx.table_id, path), load, lambda f: f.nbytes)


def read_index_groups(ctx: ReadContext, path: str, footer: IndexFooter, groups: list[int]) -> pa.Table:
    """The entries of row groups ``groups`` of the index file ``path``, in that order."""
    return open_parquet(ctx.storage, path, ctx.version, metadata=footer.compact.metadata(groups)).read_row_groups(
        list(range(len(groups))), use_threads=False)


def file_segment(ctx: ReadContext, a: AddFile) -> Segment:
    """An in-memory segment over one data file the index does not cover: the key hash
    of the index columns of each row, built on first use from those columns alone and
    cached like an index file's segment, so repeated hybrid lookups read only the rows
    they return."""
    columns = list(ctx.index_columns)

    def load() -> Segment:
        keys = read_file(ctx.storage, a.path, ctx.schema, columns, ctx.version, a.partitionValues)
        return Segment.of_rows(a.path, a.fileId, key_hash([keys.column(c) for c in columns]))

    key = ("filesegment", ctx.table_id, a.path, ctx.index_columns)
    return cache().get_or_load(key, load, lambda seg: seg.nbytes)


def probe_trie(ctx: ReadContext, trie: BucketTrie, live: np.ndarray | None, keys: pa.Table, read_cols: list[str],
               hashes: np.ndarray, cached: bool = True) -> pa.Table:
    """The verified rows of ``keys`` (their key ``hashes``) reached through ``trie``: probe
    it, read each candidate row once, and keep the rows whose key equals the key that
    probed them."""
    probe_of, file_ids, rows = trie.probe(hashes, live)
    if ctx.deletion_vectors and len(rows):
        kept = _not_deleted(ctx, file_ids, rows)
        probe_of, file_ids, rows = probe_of[kept], file_ids[kept], rows[kept]
    if len(rows) == 0:
        return with_locators(plain(ctx.schema).empty_table().select(read_cols), np.empty(0, np.int64), np.empty(0, np.int64))
    # Candidate rows, each once, ordered by file then row; `which` maps a probe match
    # to its candidate.
    order = np.lexsort((rows, file_ids))
    f_sorted, r_sorted = file_ids[order], rows[order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = (f_sorted[1:] != f_sorted[:-1]) | (r_sorted[1:] != r_sorted[:-1])
    cand_files, cand_rows = f_sorted[first], r_sorted[first]
    which = np.empty(len(order), np.int64)
    which[order] = np.cumsum(first) - 1
    starts = np.flatnonzero(np.concatenate(([True], cand_files[1:] != cand_files[:-1])))
    ends = np.append(starts[1:], len(cand_files))
    candidates = with_locators(pa.concat_tables([
        fetch_rows(ctx, ctx.paths[int(cand_files[s])], cand_rows[s:e], read_cols, cached) for s, e in zip(starts, ends)
    ]), cand_files, cand_rows)
    # Hash matches are candidates only: compare the key values (null-safe, NaN = NaN).
    match = np.ones(len(which), dtype=bool)
    at, probe_at = pa.array(which), pa.array(probe_of)
    for c in ctx.index_columns:
        match &= equal_null_safe(candidates.column(c).take(at), keys.column(c).take(probe_at))
    keep = distinct(which[match])
    return candidates if len(keep) == candidates.num_rows else candidates.take(pa.array(keep))


def _not_deleted(ctx: ReadContext, file_ids: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """A mask over probe matches (file id, row ordinal): False where the file's deletion
    vector deletes the row."""
    kept = np.ones(len(rows), dtype=bool)
    for fid in distinct(file_ids):
        deleted = deleted_rows(ctx, ctx.paths[int(fid)])
        if deleted is not None:
            at = file_ids == fid
            kept[at] = ~in_sorted(rows[at], deleted)
    return kept


def deleted_rows(ctx: ReadContext, path: str) -> np.ndarray | None:
    """The row ordinals a data file's deletion vector deletes (sorted), from the cache
    where present; None when the file has none."""
    dv = ctx.deletion_vectors.get(path)
    if dv is None:
        return None
    return deletion_vector_rows(ctx.storage, ctx.table_id, dv)


def fetch_rows(ctx: ReadContext, path: str, rows: np.ndarray, columns: list[str], cached: bool = True) -> pa.Table:
    """Rows (sorted distinct ordinals) of one data file, reading only the row groups
    that hold them; rows its deletion vector deletes are left out. ``cached``: the row
    groups read are kept in the lookup cache (a change's one-shot read keeps none)."""
    deleted = deleted_rows(ctx, path)
    if deleted is not None:
        rows = rows[~in_sorted(rows, deleted)]
    if len(rows) == 0:
        return plain(pa.schema([ctx.schema.field(c) for c in columns])).empty_table()
    footer = _footer(ctx, path)
    groups = np.searchsorted(footer.bounds, rows, side="right") - 1  # sorted, as rows are
    cuts = (np.flatnonzero(groups[1:] != groups[:-1]) + 1).tolist()
    starts, ends = [0, *cuts], [*cuts, len(rows)]
    wanted = [int(groups[i]) for i in starts]
    tables = _row_groups(ctx, path, footer, wanted, columns, cached)
    parts = []
    for g, s, e in zip(wanted, starts, ends):
        parts.extend(_pick(tables[g], rows[s:e] - footer.bounds[g]))
    return _decoded(pa.concat_tables(parts), ctx.schema)


def _decoded(rows: pa.Table, schema: pa.Schema) -> pa.Table:
    """``rows`` with dictionary-encoded columns cast back to the table's types (only
    the fetched rows are decoded)."""
    if not any(pa.types.is_dictionary(t) for t in rows.schema.types):
        return rows
    arrays = [col.cast(schema.field(name).type) if pa.types.is_dictionary(col.type) else col
              for name, col in zip(rows.column_names, rows.columns)]
    return pa.Table.from_arrays(arrays, names=rows.column_names)


def _pick(table: pa.Table, rows: np.ndarray) -> list[pa.Table]:
    """``rows`` (sorted, distinct) of ``table``: slices for runs of consecutive rows.

    Files are clustered by key hash, so a key's rows are usually one run; a slice
    costs about a microsecond where a take costs tens.
    """
    first, n = int(rows[0]), len(rows)
    if int(rows[-1]) - first == n - 1:  # one run (rows are sorted and distinct)
        return [table.slice(first, n)]
    breaks = (np.flatnonzero(np.diff(rows) != 1) + 1).tolist()
    if len(breaks) > 8:
        return [table.take(pa.array(rows))]
    bounds = [0, *breaks, n]
    return [table.slice(int(rows[s]), e - s) for s, e in zip(bounds[:-1], bounds[1:])]


@dataclass(frozen=True)
class _Footer:
    compact: CompactFooter
    bounds: np.ndarray  # first row ordinal of each row group, then the row count


def _footer(ctx: ReadContext, path: str) -> _Footer:
    """A data file's footer, kept compact: a read decodes a footer of the row groups it reads."""

    def load() -> _Footer:
        compact = open_footer(ctx.storage, path, ctx.version)
        return _Footer(compact, np.concatenate(([0], np.cumsum(compact.rows))))

    return cache().get_or_load(("footer", ctx.table_id, path), load, lambda f: f.compact.nbytes + f.bounds.nbytes)


def _row_groups(ctx: ReadContext, path: str, footer: _Footer, groups: list[int], columns: list[str],
                use_cache: bool = True) -> dict:
    """Decoded row groups of one file by number, from the cache where present.

    The missing ones are read in one call: a read per row group costs about twice as
    much per row (a join touches most row groups of a file), and pyarrow decodes the
    groups of one call in parallel. Each group is cached on its own (a slice), unless
    ``use_cache`` is False.
    """
    cached, out, missing = cache(), {}, []
    # The columns' table types are part of the key: a schema change may widen a column, and
    # an older version of the same file is then read as another type.
    types = tuple(str(ctx.schema.field(c).type) for c in columns)
    key = ("rowgroup", ctx.table_id, path, None, tuple(columns), types)
    for g in groups:
        hit = cached.get(key[:3] + (g,) + key[4:]) if use_cache else None
        if hit is None:
            missing.append(g)
        else:
            out[g] = hit
    if missing:
        storage = ctx.storage
        # The cached footer spares a second read and parse of the file's metadata: decoded
        # for the missing groups only, which are its groups 0, 1, ...
        encoded = [physical_name(ctx.schema.field(c)) for c in dictionary_columns(ctx.schema, columns)]
        pf = open_parquet(storage, path, ctx.version, footer.compact.metadata(missing), encoded)
        # Typed as the table's columns here, so the cache holds the table's types whoever
        # wrote the file (string columns stay dictionary-encoded until rows are picked).
        table = conform(pf.read_row_groups(list(range(len(missing))), columns=file_columns(pf, columns, ctx.schema)), ctx.schema, columns,
                        keep_dictionary=True, partition=ctx.partitions.get(path))
        start = 0
        for g in missing:
            n = int(footer.bounds[g + 1] - footer.bounds[g])
            out[g] = table.slice(start, n)
            start += n
            if use_cache:
                cached.put(key[:3] + (g,) + key[4:], out[g], out[g].nbytes)
    return out


def scan_files(ctx: ReadContext, files: tuple[AddFile, ...], read_cols: list[str]) -> pa.Table:
    """Every live row of ``files`` with ``read_cols``, typed as the table's columns."""
    parts = [read_live_rows(ctx.storage, a, ctx.schema, read_cols, ctx.version) for a in files]
    return pa.concat_tables(parts) if parts else plain(pa.schema([ctx.schema.field(c) for c in read_cols])).empty_table()


def equal_null_safe(a: pa.ChunkedArray, b: pa.ChunkedArray) -> np.ndarray:
    """Element-wise ``a <=> b`` as Spark compares keys: nulls equal nulls, NaN equals NaN."""
    if len(a) == 0:
        return np.zeros(0, dtype=bool)
    eq = pc.fill_null(pc.equal(a, b), False)
    out = pc.or_(eq, pc.and_(pc.is_null(a), pc.is_null(b)))
    if pa.types.is_floating(a.type):
        out = pc.or_kleene(out, pc.and_kleene(pc.is_nan(a), pc.is_nan(b)))
    return np.asarray(pc.fill_null(out, False).to_numpy(zero_copy_only=False), dtype=bool)
