"""A bucket's files rewritten into one, a row group at a time: what ``optimize`` does to a
bucket, with memory bounded by a row group of each file, not by the bucket.

Every file of a bucket is in key order (``indexeddf.sorted``, PROTOCOL.md §4.3.1) when its
index columns sort in Spark, so the bucket's new file is a merge of sorted runs: the rows
of every file up to the smallest of the runs' last buffered keys are sorted together and
written, and the run that bounded them reads its next row group. A bucket whose files are
not all sorted, and files without a bucket (the table's or a rebucket's batches), are read
whole and split by bucket as every write splits them (their batches are about
``OPTIMIZE_BATCH_BYTES``).

The index entries of the rows written go to an :class:`EntryChunks` a piece at a time;
it writes them out as index files every chunk of entries, and :func:`merge_index_bucket`
makes them one file an index bucket at the end (a Spark rewrite task always writes its
entries out; this process merges an index's entries from memory while they stay under a
chunk). The Spark job (``spark/optimize_tasks.py``) and this process
(``maintenance.rewrite_here``) run the same functions, so they write the same files.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..format.datafiles import iter_live_row_groups, read_live_rows
from ..format.storage import TableStorage
from ..spec import config
from ..spec.actions import AddFile, IndexFile, Metadata
from ..spec.partitions import partition_dir
from .files import codec_of, new_data_file, page_size_of, spark_orderable, write_bucketed_pieces
from .index_compaction import merge_bucket
from .index_files import DataPiece, entry_arrays, read_entries, write_sorted_entries
from .streamed import StreamedFile

ENTRY_CHUNK = 1 << 22
"""Entries sorted and written out at once, per index: 4M entries, about 80 MB (twice that
while sorting), as an index build's write task holds."""
OnRows = Callable[[DataPiece], None]
"""Takes the rows just written to a new file (its id, the rows, their ordinals)."""


def layout_of(meta: Metadata, num_buckets: int) -> tuple:
    """What :func:`rewrite_unit` writes a unit as, for a table of metadata ``meta`` optimized
    into ``num_buckets`` buckets (the table's count, or optimize's new one): its index
    columns, the bucket count, row group bytes, partition columns, codec and page size."""
    return (list(meta.indexColumns), num_buckets, config.get(meta.configuration, "indexeddf.targetRowGroupBytes"),
            tuple(meta.partitionColumns), codec_of(meta.configuration), page_size_of(meta.configuration))


def mergeable(adds: list[AddFile], index_columns: list[str], schema: pa.Schema) -> bool:
    """Whether ``adds`` (one group's files) merge as sorted runs: all of one bucket and in
    key order."""
    return (bool(adds) and all(a.bucket is not None and a.sorted for a in adds)
            and len({a.bucket for a in adds}) == 1 and spark_orderable(schema, index_columns))


def rewrite_unit(storage: TableStorage, adds: list[AddFile], bucketed: bool, schema: pa.Schema, version: int,
                 layout: tuple, on_rows: OnRows, written: list[str]) -> list[AddFile]:
    """One unit of optimize rewritten: a bucket's group of files (``bucketed``; merged when
    :func:`mergeable`), or a batch of files to bucket (files without a bucket, or any file
    when the bucket count changes). Returns the new files' adds (``dataChange`` false), each
    new file's rows handed to ``on_rows``.
    ``layout``: :func:`layout_of`. New paths go into ``written``."""
    index_columns, num_buckets, rg_bytes, partition_columns, codec, page_size = layout
    if bucketed and mergeable(adds, index_columns, schema):
        new = merge_sorted_files(storage, adds, schema, version, layout, on_rows, written)
        return [] if new is None else [new.model_copy(update={"dataChange": False})]
    rows = pa.concat_tables([read_live_rows(storage, a, schema, version=version) for a in adds])
    out = []
    for add, file_rows in write_bucketed_pieces(storage, rows, index_columns, num_buckets, rg_bytes, written,
                                                partition_columns, schema, codec, page_size):
        add = add.model_copy(update={"dataChange": False})
        on_rows(DataPiece(add.fileId, file_rows))
        out.append(add)
    return out


def merge_sorted_files(storage: TableStorage, adds: list[AddFile], schema: pa.Schema, version: int, layout: tuple,
                       on_rows: OnRows, written: list[str]) -> AddFile | None:
    """The live rows of ``adds`` (sorted files of one bucket and partition) as one new
    sorted file of that bucket, written a row group at a time (:func:`merged_runs`); None
    when no row is live. Memory: a row group of each file and of the new one."""
    index_columns, _, rg_bytes, partition_columns, codec, page_size = layout
    first = adds[0]
    stored = pa.schema([f for f in schema if f.name not in partition_columns])
    values = first.partitionValues
    file = new_data_file(first.bucket, partition_dir(list(values), values) if partition_columns else None)
    written.append(file[0])
    expected = sum(a.stats.numRecords if a.stats is not None else 0 for a in adds)
    out = StreamedFile(storage, file, first.bucket, stored, rg_bytes, index_columns, expected, True, codec, page_size)
    runs = [(rows for _, rows in iter_live_row_groups(storage, a, schema, version=version)) for a in adds]
    start = 0
    try:
        for rows in merged_runs(runs, index_columns):
            out.append(rows.select(stored.names))
            on_rows(DataPiece(file[1], rows, np.arange(start, start + rows.num_rows, dtype=np.int64)))
            start += rows.num_rows
        new = out.close()
    except BaseException:
        out.abort()
        raise
    if new is not None and partition_columns:
        new = new.model_copy(update={"partitionValues": dict(values)})
    return new


def merged_runs(runs: list[Iterable[pa.Table]], columns: list[str]) -> Iterator[pa.Table]:
    """The rows of ``runs`` (each a sequence of tables, sorted by ``columns`` as
    ``split_by_bucket`` sorts them) in one sorted order, a piece at a time; equal keys in
    run order within a piece.

    Each round takes the run whose last buffered key is the smallest (the first of equals):
    every buffered row that sorts before or with that key can be written now, since no row
    still unread sorts before it. The buffers sorted together (a stable sort, runs in
    order) put those rows first, up to that run's last row; what each run gives is a
    prefix of its buffer, and the bounding run's buffer is used up, so it reads on. Runs whose
    first buffered key sorts after the bound sit the round out."""
    its = [iter(r) for r in runs]
    bufs = [_next_rows(it) for it in its]
    sort_keys = [(c, "ascending", "at_start") for c in columns]
    while True:
        active = [i for i, b in enumerate(bufs) if b is not None]
        if not active:
            return
        if len(active) == 1:  # one run left: it is sorted already
            i = active[0]
            yield bufs[i]
            yield from (t for t in its[i] if t.num_rows)
            return
        lasts = pa.concat_tables([bufs[i].select(columns).slice(bufs[i].num_rows - 1, 1) for i in active])
        bound = int(pc.sort_indices(lasts, sort_keys=sort_keys)[0].as_py())
        # Only runs whose first buffered key sorts before or with the bound give rows this
        # round (keys that grow from write to write put each file's rows after the last's:
        # one run a round, the others not sorted again each time).
        firsts = pa.concat_tables([bufs[i].select(columns).slice(0, 1) for i in active] + [lasts.slice(bound, 1)])
        at = pc.sort_indices(firsts, sort_keys=sort_keys).to_numpy()
        giving = sorted(at[:int(np.flatnonzero(at == len(active))[0])].tolist())  # equals sort first: stable
        active = [active[j] for j in giving]
        bound = giving.index(bound)
        tables = [bufs[i] for i in active]
        ends = np.cumsum([t.num_rows for t in tables])
        together = pa.concat_tables(tables)
        order = pc.sort_indices(together.select(columns), sort_keys=sort_keys).to_numpy()
        upto = int(np.flatnonzero(order == ends[bound] - 1)[0])
        taken = order[:upto + 1]
        yield together.take(pa.array(taken))
        counts = np.bincount(np.searchsorted(ends, taken, side="right"), minlength=len(tables))
        for j, i in enumerate(active):
            rest = tables[j].slice(int(counts[j]))
            bufs[i] = rest if rest.num_rows else _next_rows(its[i])


def _next_rows(it: Iterator[pa.Table]) -> pa.Table | None:
    """The next non-empty table of ``it``, None at its end."""
    for t in it:
        if t.num_rows:
            return t
    return None


class EntryChunks:
    """The index entries of the rows an optimize writes, per index, until written: a chunk
    of ``chunk`` entries an index sorted by index bucket, hash, file id and row
    (``entry_order``, as every build sorts them) and written as one index file per index
    bucket into the index's folder. Memory: a chunk of entries an index, not the rows
    written. ``indexes``: per index, its columns, its bucket count and its name."""

    def __init__(self, storage: TableStorage, indexes: list[tuple], written: list[str], chunk: int):
        self.storage, self.indexes, self.written, self.chunk = storage, indexes, written, chunk
        self.parts: list[list[tuple]] = [[] for _ in indexes]
        self._lock = threading.Lock()  # units rewritten on threads share one

    def add(self, piece: DataPiece) -> None:
        """The entries of a new data file's rows (``piece``) in every index."""
        for i, (columns, buckets, _) in enumerate(self.indexes):
            found = entry_arrays(columns, buckets, [DataPiece(piece.file_id, piece.rows.select(columns),
                                                              piece.ordinals)])
            if found is not None:
                with self._lock:
                    self.parts[i].append(found)

    def take(self, i: int, at_least: int = 0):
        """Index ``i``'s entries held (hashes, file ids, rows, index buckets), None when there
        are none or fewer than ``at_least`` (then they stay held); for :meth:`flush`, and for
        a caller that merges them without writing them out."""
        with self._lock:
            parts = self.parts[i]
            if not parts or sum(len(p[0]) for p in parts) < at_least:
                return None
            self.parts[i] = []
        return tuple(np.concatenate([p[j] for p in parts]) for j in range(4))

    def flush(self, full_only: bool, index: int | None = None) -> list[tuple[int, list[IndexFile]]]:
        """Write the entries of each index (or of the one at ``index``; with ``full_only``,
        only of an index holding a whole chunk): per index written, its position and its new
        files."""
        out = []
        for i, (_, _, name) in enumerate(self.indexes):
            if index is not None and i != index:
                continue
            entries = self.take(i, self.chunk if full_only else 0)
            if entries is not None:
                out.append((i, write_sorted_entries(self.storage, name, *entries, self.written)))
        return out


def merge_index_bucket(storage: TableStorage, name: str, bucket: int, old: list[IndexFile], keep: np.ndarray,
                       new: list[IndexFile], written: list[str]) -> IndexFile | None:
    """Index ``name``'s one file of ``bucket`` after an optimize: the one new file there as it
    is when no rewritten file ``old`` keeps an entry (no read, no write), else the entries of
    ``new`` and those ``old`` keeps (file ids in ``keep``) merged into one (``merge_bucket``)
    and ``new`` deleted; None when no entry is left. Memory: one index bucket's entries."""
    if not old and len(new) <= 1:
        return new[0] if new else None
    added = None
    if new:  # the new files hold only entries of new data files: all are kept
        parts = [read_entries(storage, f) for f in new]
        added = tuple(np.concatenate([t.column(c).to_numpy() for t in parts]) for c in ("hash", "file_id", "row"))
    f = merge_bucket(storage, old, keep, added, name, bucket, written)
    for n in new:  # merged away: no version will name them
        storage.delete(n.path)
    return f
