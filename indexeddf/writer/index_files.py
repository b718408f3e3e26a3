"""Index files: per index bucket, the key hash and row pointer of every indexed row.

An index file is Parquet with columns ``hash`` (uint32, :func:`key_hash` of the
index columns), ``file_id`` (int64, the data file) and ``row`` (int32, the row's
ordinal in that file), sorted by ``hash``. Key values are not repeated: a lookup
reads the pointed-to rows anyway and verifies their keys there. Sorted hashes and
row ordinals are delta-encoded, file ids dictionary-encoded: about 6.5 bytes an entry
for data files in key order (131 MiB for the 20M-row benchmark table), whose row
ordinals do not follow the hashes; 4-5 for files in key-hash order.
"""

from __future__ import annotations

import io
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..format.datafiles import read_named_file
from ..format.storage import TableStorage
from ..spec.actions import PRIMARY_INDEX, IndexFile
from ..spec.arrays import distinct
from ..spec.bucketing import bucket_ids_and_key_hash

INDEX_DIR = "_indexes"
JOBS_DIR = f"{INDEX_DIR}/_jobs"
"""Where the fences of Spark jobs that write index and data files live (``spark/job_fence.py``)."""
PRIMARY = PRIMARY_INDEX
ENTRY_SCHEMA = pa.schema([("hash", pa.uint32()), ("file_id", pa.int64()), ("row", pa.int32())])
WRITE_THREADS = 2
"""Index files written at once by one write (one per touched index bucket)."""
ENTRY_ROW_GROUP = 1 << 14
"""Entries per row group of an index file. Entries are sorted by hash, so each row group
covers a hash range (its min/max statistics): a lookup of a few keys reads the row groups
that can hold them, not the bucket's whole index (about 100 KB a row group)."""


@dataclass(frozen=True)
class DataPiece:
    """The rows of one data file, in file order, as just written or read back."""

    file_id: int
    rows: pa.Table
    ordinals: np.ndarray | None = None
    """Each row's ordinal in the file, when ``rows`` are not all of the file's rows (a
    file read without the rows its deletion vector deletes); None: 0, 1, 2, ..."""

    def row_ordinals(self) -> np.ndarray:
        """The ordinal in the data file of each of ``rows`` (int32, as index entries hold)."""
        if self.ordinals is None:
            return np.arange(self.rows.num_rows, dtype=np.int32)
        return self.ordinals.astype(np.int32)


def index_file_path(name: str, bucket: int) -> str:
    """A new, unique relative path for an index file of ``name``'s ``bucket``."""
    return f"{INDEX_DIR}/{name}/bucket={bucket:05d}/part-{uuid.uuid4().hex}.parquet"


def build_index_files(
    storage: TableStorage,
    name: str,
    columns: list[str],
    num_buckets: int,
    pieces: list[DataPiece],
    written: list[str],
) -> list[IndexFile]:
    """Write the index entries of ``pieces``: one file per touched index bucket.

    Paths go into ``written`` before the files are created, so a failed operation can
    delete them.
    """
    entries = entry_arrays(columns, num_buckets, pieces)
    if entries is None:
        return []
    return write_sorted_entries(storage, name, *entries, written)


def write_sorted_entries(storage: TableStorage, name: str, hashes: np.ndarray, file_ids: np.ndarray,
                         rows: np.ndarray, buckets: np.ndarray, written: list[str]) -> list[IndexFile]:
    """Entries in any order sorted as every index file is (:func:`entry_order`) and written
    one file per index bucket into ``name`` (:func:`write_entries`): what a build, an
    optimize and a Spark task do with a chunk of entries."""
    order, key = _entry_sort(buckets, hashes, file_ids, rows)
    # The sorted key holds each entry's bucket and hash: read in order from it, not gathered
    # through ``order`` (a random read of a chunk's 4M entries each); file id and row are.
    # Its low 32 bits are the hash (a cast to uint32 keeps them), the high ones the bucket.
    return write_entries(storage, name, key.astype(np.uint32), file_ids[order],
                         rows[order].astype(np.int32, copy=False), (key >> np.uint64(32)).astype(np.int32), written)


def entry_order(buckets: np.ndarray, hashes: np.ndarray, file_ids: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The positions of entries sorted by index bucket, key hash (unsigned), file id and row:
    the order of index files, one and the same whoever builds them (entries are unique by
    file id and row, so the order is total).

    Bucket, hash and position packed into one uint64 sort as plain values (numpy's SIMD
    sort), where a lexsort of four keys sorts four times: 4M entries in about a quarter of
    the time. Equal (bucket, hash) pairs, a few in a million, are then put in file id and
    row order, only those entries re-sorted."""
    return _entry_sort(buckets, hashes, file_ids, rows)[0]


def _entry_sort(buckets: np.ndarray, hashes: np.ndarray, file_ids: np.ndarray,
                rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`entry_order` and the sorted keys (bucket << 32 | hash, uint64) in that order."""
    n = len(buckets)
    pos_bits = max(1, (n - 1).bit_length())
    bucket_bits = int(buckets.max(initial=0)).bit_length()
    key = (buckets.astype(np.uint64) << np.uint64(32)) | hashes.astype(np.uint32).astype(np.uint64)
    if bucket_bits + 32 + pos_bits <= 64:
        packed = np.sort((key << np.uint64(pos_bits)) | np.arange(n, dtype=np.uint64))
        order = (packed & np.uint64((1 << pos_bits) - 1)).astype(np.int64)
        sorted_key = packed >> np.uint64(pos_bits)
    else:  # too many buckets and entries to pack: an argsort of the key
        order = np.argsort(key)
        sorted_key = key[order]
    same = sorted_key[1:] == sorted_key[:-1]
    if same.any():
        tied = np.zeros(n, dtype=bool)
        tied[1:] |= same
        tied[:-1] |= same
        at = np.flatnonzero(tied)  # runs of equal keys, in key order: re-sorted in place
        sub = order[at]
        order[at] = sub[np.lexsort((rows[sub], file_ids[sub], key[sub]))]
    return order, sorted_key


def write_entries(storage: TableStorage, name: str, hashes: np.ndarray, file_ids: np.ndarray, rows: np.ndarray,
                  buckets: np.ndarray, written: list[str]) -> list[IndexFile]:
    """Write index entries sorted by bucket, then hash: one file per bucket."""
    starts = np.flatnonzero(np.r_[True, buckets[1:] != buckets[:-1]])
    ends = np.r_[starts[1:], len(buckets)]
    paths = [index_file_path(name, int(buckets[s])) for s in starts]
    written.extend(paths)  # before any file exists, so a failed write can delete them all

    def write_one(i: int) -> IndexFile:
        s, e = starts[i], ends[i]
        return write_index_file(storage, paths[i], int(buckets[s]), hashes[s:e], file_ids[s:e], rows[s:e])

    if len(starts) == 1:
        return [write_one(0)]
    # A change of a few keys writes an index file per touched bucket: small files, whose
    # encoding and creation overlap on two threads.
    with ThreadPoolExecutor(WRITE_THREADS) as pool:
        return list(pool.map(write_one, range(len(starts))))


def write_index_file(storage: TableStorage, rel: str, bucket: int, hashes: np.ndarray, file_ids: np.ndarray,
                     rows: np.ndarray) -> IndexFile:
    """Write one index file of ``bucket`` at ``rel`` from its entries, sorted by hash (the
    caller put ``rel`` in its written paths): the one place index files are encoded."""
    table = pa.table([pa.array(hashes, pa.uint32()), pa.array(file_ids, pa.int64()), pa.array(rows, pa.int32())],
                     schema=ENTRY_SCHEMA)
    buf = io.BytesIO()
    pq.write_table(
        # Uncompressed: the DELTA-encoded hashes (random) and rows (in hash order) leave zstd
        # nothing to find (a 626K-entry file: 2.87 MB against 2.85 MB), while it took about 40%
        # of the write's CPU and every read would decompress it.
        table, buf, compression="none", row_group_size=ENTRY_ROW_GROUP,
        use_dictionary=["file_id"],
        # Statistics of the hash only: its ranges are what a lookup reads blocks by, and
        # those of file_id and row would only grow the footer (PROTOCOL.md §4.5.1): 84 KB
        # against 113 KB for a bucket of 6.25M entries (382 row groups).
        write_statistics=["hash"],
        column_encoding={"hash": "DELTA_BINARY_PACKED", "row": "DELTA_BINARY_PACKED"},
    )
    data = buf.getvalue()
    storage.write_bytes(rel, data)
    ids = distinct_ids(file_ids)
    return IndexFile(path=rel, size=len(data), bucket=bucket, numEntries=len(hashes), fileIds=ids)


def distinct_ids(file_ids: np.ndarray) -> tuple[int, ...]:
    """The distinct ``file_ids``, ascending. An index file of a compacted or rewritten
    bucket names one data file: checked in one pass, where ``np.unique`` sorts (50 ms for a
    625,000-entry file, paid by every file a copy-on-write change rewrites)."""
    if len(file_ids) == 0:
        return ()
    if bool((file_ids == file_ids[0]).all()):
        return (int(file_ids[0]),)
    return tuple(int(i) for i in distinct(file_ids))


def read_entries(storage: TableStorage, f: IndexFile, version: int | None = None,
                 columns: list[str] | None = None) -> pa.Table:
    """The entries of the index file ``f`` (a missing one: ``MissingFileError``), with
    ``columns`` of :data:`ENTRY_SCHEMA` only when given."""
    return pq.ParquetFile(io.BytesIO(read_named_file(storage, f.path, version))).read(columns=columns)


def carried_entries(storage: TableStorage, name: str, files: tuple[IndexFile, ...], old_id: int, new_id: int,
                    dropped: np.ndarray, written: list[str], version: int | None = None) -> list[IndexFile] | None:
    """The index entries of a data file copied without the rows at ``dropped`` (sorted
    ordinals: the rows a change removed and those its deletion vector had), re-pointed at
    the copy ``new_id``: each kept row's entry keeps its hash and bucket, its ordinal
    shifts down by the dropped rows before it. No key is hashed again and nothing is
    re-sorted when one index file held the file's entries of a bucket. None when no index
    file of ``files`` names ``old_id`` (the caller hashes the keys instead)."""
    holding = [f for f in files if old_id in f.fileIds]
    if not holding:
        return None
    hashes, rows, buckets = [], [], []
    dropped = np.asarray(dropped, dtype=np.int64)
    for f in holding:
        # An index file of this data file alone (a bucket written or copied whole): its file
        # ids need no decoding.
        alone = tuple(f.fileIds) == (old_id,)
        t = read_entries(storage, f, version, None if not alone else ["hash", "row"])
        row, hashes_of = t.column("row").to_numpy().astype(np.int64), t.column("hash").to_numpy()
        if not alone:  # entries of other files too: keep this file's
            mine = t.column("file_id").to_numpy() == old_id
            row, hashes_of = row[mine], hashes_of[mine]
        # A kept row's ordinal in the copy: its ordinal less the dropped rows before it, a
        # running count over the file's ordinals (a byte and 8 bytes a row of the file:
        # bounded by it, and about twice as fast as a binary search per entry).
        size = int(max(row.max(initial=-1), dropped.max(initial=-1))) + 1
        gone = np.zeros(size, dtype=bool)
        gone[dropped] = True
        keep = ~gone[row]
        kept = row[keep]
        hashes.append(hashes_of[keep])
        rows.append((kept - np.cumsum(gone)[kept]).astype(np.int32))
        buckets.append(np.full(int(keep.sum()), f.bucket, dtype=np.int64))
    hashes, rows, buckets = np.concatenate(hashes), np.concatenate(rows), np.concatenate(buckets)
    if len(holding) > 1:
        order = np.lexsort((rows, hashes, buckets))
        hashes, rows, buckets = hashes[order], rows[order], buckets[order]
    if not len(rows):
        return []
    return write_entries(storage, name, hashes, np.full(len(rows), new_id, dtype=np.int64), rows, buckets, written)


def entry_arrays(columns: list[str], num_buckets: int, pieces: list[DataPiece]):
    """The index entries of ``pieces`` as arrays: key hashes, file ids, row ordinals and
    index buckets (in piece order; None when the pieces hold no row)."""
    parts = [p for p in pieces if p.rows.num_rows]
    if not parts:
        return None
    keys = [pa.chunked_array([c for p in parts for c in p.rows.column(col).chunks], type=parts[0].rows.schema.field(col).type) for col in columns]
    buckets, hashes = bucket_ids_and_key_hash(keys, num_buckets)
    file_ids = np.concatenate([np.full(p.rows.num_rows, p.file_id, dtype=np.int64) for p in parts])
    rows = np.concatenate([p.row_ordinals() for p in parts])
    return hashes, file_ids, rows, buckets

