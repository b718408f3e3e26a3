"""Rewriting index files: per index bucket, merge some files into one, dropping the
entries of data files that are gone and adding the entries of new data files.

Used by table ``optimize`` (the index files follow the compacted data files) and by
``optimize_index`` (compact an index's own files). Completeness (PROTOCOL.md
§4.5.2) holds because a data file's entries are either all kept or all dropped (by
file id), and new data files get every entry in the same commit.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from ..format.storage import TableStorage
from ..spec.actions import IndexEntry, IndexFile
from ..spec.arrays import distinct
from .index_files import entry_order, index_file_path, read_entries, write_index_file


def write_entries_file(storage: TableStorage, dir_name: str, bucket: int, hashes, file_ids, rows, written: list[str]) -> IndexFile:
    """Write one index file of ``bucket`` (entries sorted by hash, file id, row)."""
    order = entry_order(np.zeros(len(hashes), dtype=np.int32), hashes, file_ids, rows)  # one bucket
    rel = index_file_path(dir_name, bucket)
    written.append(rel)
    return write_index_file(storage, rel, bucket, hashes[order], file_ids[order], rows[order])


def compact_index(
    storage: TableStorage,
    entry: IndexEntry,
    rewrite: set[str],
    keep_ids: set[int],
    added=None,
    dir_name: str | None = None,
    written: list[str] | None = None,
) -> tuple[list[IndexFile], list[str]]:
    """Merge the files of ``entry`` named in ``rewrite`` per index bucket, with the
    ``added`` entries (hashes, file ids, rows, index buckets) of that bucket, into one file per bucket.

    Entries whose file id is not in ``keep_ids`` are dropped from the merged files,
    unless a file that is not rewritten also names that id: an index never holds only
    part of a data file's entries (completeness, PROTOCOL.md §4.5.2; a newer state of an
    index may serve lookups at older versions, where that data file is live).
    Returns the new files and the paths of the replaced ones.
    """
    written = [] if written is None else written
    dir_name = dir_name or entry.name
    by_bucket = rewritten_by_bucket(entry, rewrite)
    new_by_bucket = {}
    if added is not None:
        hashes, file_ids, rows, buckets = added
        for b in distinct(buckets):
            m = buckets == b
            new_by_bucket[int(b)] = (hashes[m], file_ids[m], rows[m])
    keep = kept_ids(entry, rewrite, keep_ids)
    files, removed = [], []
    for b in sorted(set(by_bucket) | set(new_by_bucket)):
        removed += [f.path for f in by_bucket.get(b, ())]
        merged = merge_bucket(storage, by_bucket.get(b, ()), keep, new_by_bucket.get(b), dir_name, b, written)
        if merged is not None:
            files.append(merged)
    return files, removed


def rewritten_by_bucket(entry: IndexEntry, rewrite: set[str]) -> dict[int, list[IndexFile]]:
    """The files of ``entry`` named in ``rewrite``, per index bucket (in the entry's order)."""
    by_bucket: dict[int, list[IndexFile]] = defaultdict(list)
    for f in entry.files:
        if f.path in rewrite:
            by_bucket[f.bucket].append(f)
    return by_bucket


def kept_ids(entry: IndexEntry, rewrite: set[str], keep_ids: set[int]) -> np.ndarray:
    """The data file ids whose entries a rewrite of ``rewrite`` keeps: ``keep_ids``, and every
    id a file that is not rewritten names (completeness: all of a data file's entries or none)."""
    keep_ids = set(keep_ids) | {i for f in entry.files if f.path not in rewrite for i in f.fileIds}
    return np.fromiter(keep_ids, np.int64, len(keep_ids))


def merge_bucket(storage: TableStorage, old: list[IndexFile], keep: np.ndarray, added, dir_name: str, bucket: int,
                 written: list[str]) -> IndexFile | None:
    """One index file of ``bucket``: the entries of the ``old`` files whose file id is in
    ``keep``, and the ``added`` (hashes, file ids, rows) of that bucket (or None); None
    when no entry is left. Memory: one index bucket's entries."""
    parts_h, parts_f, parts_r = [], [], []
    for f in old:
        t = read_entries(storage, f)
        fid = t.column("file_id").to_numpy()
        m = np.isin(fid, keep)
        parts_h.append(t.column("hash").to_numpy()[m])
        parts_f.append(fid[m])
        parts_r.append(t.column("row").to_numpy()[m])
    if added is not None:
        parts_h.append(added[0])
        parts_f.append(added[1])
        parts_r.append(added[2])
    hashes = np.concatenate(parts_h).astype(np.uint32) if parts_h else np.empty(0, np.uint32)
    if not len(hashes):
        return None
    file_ids = np.concatenate(parts_f).astype(np.int64)
    rows = np.concatenate(parts_r).astype(np.int32)
    return write_entries_file(storage, dir_name, bucket, hashes, file_ids, rows, written)


def small_file_groups(entry: IndexEntry, mode: str, small_bytes: int, live_ids: frozenset[int]) -> set[str]:
    """Index files ``optimize_index`` rewrites.

    ``quick``: in each index bucket with two or more files under ``small_bytes``,
    those files. ``full``: every file of a bucket with two or more files, or with a
    file that names a data file that is no longer live.
    """
    by_bucket: dict[int, list[IndexFile]] = defaultdict(list)
    for f in entry.files:
        by_bucket[f.bucket].append(f)
    out: set[str] = set()
    for files in by_bucket.values():
        if mode == "full":
            if len(files) >= 2 or any(not live_ids.issuperset(f.fileIds) for f in files):
                out |= {f.path for f in files}
        else:
            small = [f for f in files if f.size < small_bytes]
            if len(small) >= 2:
                out |= {f.path for f in small}
    return out


__all__ = ["compact_index", "kept_ids", "merge_bucket", "rewritten_by_bucket", "small_file_groups",
           "write_entries_file"]
