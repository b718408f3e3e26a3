"""In-memory index of one bucket, rebuilt from its index files and probed in batches.

A :class:`Segment` holds one index file's entries as sorted numpy arrays: the 64-bit
key hashes, and per entry a position into the segment's small table of file ids plus
the row ordinal (10 to 12 bytes an entry). A :class:`BucketTrie` is an immutable tuple of
segments: the version after an append is the previous trie plus the new file's
segment, sharing every older segment (nothing is copied), which is how many versions
of one bucket fit in memory at once.

Probing is vectorised: ``searchsorted`` finds each probe hash's range in every
segment at once, and the ranges are expanded without a Python loop over keys. Hash
matches are candidates only; callers verify the keys on the rows they read.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ..errors import CorruptLogError


@dataclass(frozen=True)
class Segment:
    """The entries of one index file, sorted by hash."""

    path: str
    hashes: np.ndarray  # uint32, sorted
    file_pos: np.ndarray  # uint16 (or uint32 past 65,535 files), index into file_ids
    rows: np.ndarray  # uint32, row ordinal in the data file
    file_ids: np.ndarray  # int64, the data files this segment points into

    @classmethod
    def from_entries(cls, path: str, entries: pa.Table) -> "Segment":
        """Build from an index file's table (columns hash, file_id, row; sorted by hash)."""
        if entries.schema.field("hash").type != pa.uint32():
            raise CorruptLogError(f"index file {path}: column 'hash' is {entries.schema.field('hash').type}, expected uint32; run refresh(mode='full')", path)
        hashes = entries.column("hash").to_numpy()
        ids = entries.column("file_id").to_numpy()
        if len(ids) and ids.min() == ids.max():  # one data file (a compacted bucket): no sort needed
            file_ids, file_pos = ids[:1], np.zeros(len(ids), np.uint16)
        else:
            file_ids, file_pos = np.unique(ids, return_inverse=True)
        rows = entries.column("row").to_numpy().astype(np.uint32)
        if len(hashes) > 1 and not np.all(hashes[1:] >= hashes[:-1]):
            order = np.argsort(hashes, kind="stable")  # tolerate unsorted files
            hashes, file_pos, rows = hashes[order], file_pos[order], rows[order]
        pos_type = np.uint16 if len(file_ids) <= 0xFFFF else np.uint32
        return cls(path, hashes, file_pos.astype(pos_type), rows, file_ids.astype(np.int64))

    @classmethod
    def of_rows(cls, path: str, file_id: int, hashes: np.ndarray) -> "Segment":
        """The segment of one data file from the key hash of each of its rows, in file
        order (for files no index covers yet)."""
        order = np.argsort(hashes, kind="stable")
        rows = order.astype(np.uint32)
        return cls(path, hashes[order], np.zeros(len(order), np.uint16), rows, np.array([file_id], np.int64))

    @classmethod
    def merged(cls, path: str, segments: "tuple[Segment, ...]") -> "Segment":
        """One segment holding the entries of ``segments`` (sorted by hash): probing it
        costs one search where probing each would cost one per segment."""
        ids = np.concatenate([s.file_ids[s.file_pos] for s in segments])
        file_ids, file_pos = np.unique(ids, return_inverse=True)
        hashes = np.concatenate([s.hashes for s in segments])
        rows = np.concatenate([s.rows for s in segments])
        order = np.argsort(hashes, kind="stable")
        pos_type = np.uint16 if len(file_ids) <= 0xFFFF else np.uint32
        return cls(path, hashes[order], file_pos[order].astype(pos_type), rows[order], file_ids.astype(np.int64))

    @property
    def nbytes(self) -> int:
        """Memory held by the arrays."""
        return self.hashes.nbytes + self.file_pos.nbytes + self.rows.nbytes + self.file_ids.nbytes

    def probe(self, probes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Entries whose hash equals a probe: (probe ordinal, file id, row) arrays."""
        lo = np.searchsorted(self.hashes, probes, side="left")
        hi = np.searchsorted(self.hashes, probes, side="right")
        counts = hi - lo
        if int(counts.sum()) == 0:
            empty = np.empty(0, np.int64)
            return empty, empty, empty
        probe_of = np.repeat(np.arange(len(probes)), counts)
        at = expand_ranges(lo, hi)
        return probe_of, self.file_ids[self.file_pos[at]], self.rows[at].astype(np.int64)


@dataclass(frozen=True)
class BucketTrie:
    """All segments of one index bucket at one index snapshot (immutable)."""

    segments: tuple[Segment, ...] = ()

    def with_segments(self, more: tuple[Segment, ...]) -> "BucketTrie":
        """A newer trie: this one plus ``more`` (shares every existing segment)."""
        return BucketTrie(self.segments + tuple(more))

    @property
    def nbytes(self) -> int:
        """Memory held by the segments' arrays."""
        return sum(s.nbytes for s in self.segments)

    @property
    def num_entries(self) -> int:
        """Entries across all segments."""
        return sum(len(s.hashes) for s in self.segments)

    def probe(self, probes: np.ndarray, live_file_ids: np.ndarray | None = None):
        """Candidate rows for the probe hashes: (probe ordinal, file id, row) arrays.

        ``live_file_ids`` (sorted int64) keeps only entries of those data files, which
        is how entries of removed files, or of files not live at the version read, are
        excluded without rebuilding anything.
        """
        parts = [s.probe(probes) for s in self.segments]
        if not parts:
            empty = np.empty(0, np.int64)
            return empty, empty, empty
        probe_of = np.concatenate([p[0] for p in parts])
        file_ids = np.concatenate([p[1] for p in parts])
        rows = np.concatenate([p[2] for p in parts])
        if live_file_ids is not None and len(file_ids):
            keep = in_sorted(file_ids, live_file_ids)
            probe_of, file_ids, rows = probe_of[keep], file_ids[keep], rows[keep]
        return probe_of, file_ids, rows


def expand_ranges(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Every position of the ranges ``[lo[i], hi[i])``, range after range: each match's
    position is its range's start plus its offset inside the range."""
    counts = hi - lo
    return np.repeat(lo, counts) + (np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts))


def in_sorted(values: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    """A mask over ``values``: True where the value is in ``sorted_set`` (ascending).
    A binary search per value: ``np.isin`` sorts both sides on every call, which costs
    more than the search for the few probe matches of a lookup."""
    if len(sorted_set) == 0:
        return np.zeros(len(values), dtype=bool)
    at = np.minimum(np.searchsorted(sorted_set, values), len(sorted_set) - 1)
    return sorted_set[at] == values
