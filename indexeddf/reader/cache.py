"""The per-process cache of index segments, decoded row groups and deletion vectors.

Index and data files are immutable (every write makes new files with new names), so
entries are keyed by table id and file path (plus row group and columns for data)
and never go stale. The cache is bounded in bytes (``indexeddf.cache.maxBytes``,
default 1 GiB, or the ``INDEXEDDF_CACHE_MAX_BYTES`` environment variable) and evicts
the least recently used entry first. Spark's Python workers are reused between tasks
(``spark.python.worker.reuse``, on by default), so tries stay warm across queries.
"""

from __future__ import annotations

import os
import threading
import warnings
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Hashable

DEFAULT_MAX_BYTES = 1 << 30


@dataclass
class CacheStats:
    """Counters a test or benchmark can read (and reset)."""

    hits: int = 0
    misses: int = 0
    evictions: int = 0
    bytes: int = 0
    entries: int = 0


class LRUCache:
    """A thread-safe least-recently-used cache bounded by the bytes of its values."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self._items: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._lock = threading.Lock()
        self.stats = CacheStats()

    def get_or_load(self, key: Hashable, load: Callable[[], Any], size: Callable[[Any], int]) -> Any:
        """The cached value of ``key``, loading (and caching) it on a miss."""
        with self._lock:
            hit = self._items.get(key)
            if hit is not None:
                self._items.move_to_end(key)
                self.stats.hits += 1
                return hit[0]
            self.stats.misses += 1
        value = load()  # outside the lock: loads do I/O
        self.put(key, value, size(value))
        return value

    def _evict(self) -> None:
        while self.stats.bytes > self.max_bytes and self._items:
            _, (_, nbytes) = self._items.popitem(last=False)
            self.stats.bytes -= nbytes
            self.stats.evictions += 1

    def resize(self, max_bytes: int) -> None:
        """Change the bound (evicting as needed)."""
        with self._lock:
            self.max_bytes = max_bytes
            self._evict()
            self.stats.entries = len(self._items)

    def get(self, key: Hashable) -> Any:
        """The cached value of ``key`` (counted as a hit), or None (counted as a miss)."""
        with self._lock:
            hit = self._items.get(key)
            if hit is None:
                self.stats.misses += 1
                return None
            self._items.move_to_end(key)
            self.stats.hits += 1
            return hit[0]

    def put(self, key: Hashable, value: Any, nbytes: int) -> None:
        """Cache ``value`` (``nbytes`` large) under ``key``, evicting as needed."""
        with self._lock:
            if key not in self._items and nbytes <= self.max_bytes:
                self._items[key] = (value, nbytes)
                self.stats.bytes += nbytes
                self._evict()
            self.stats.entries = len(self._items)

    def keys(self) -> list[Hashable]:
        """The keys cached now, least recently used first (for tests and benchmarks)."""
        with self._lock:
            return list(self._items)

    def discard(self, keys) -> int:
        """Drop these entries where cached (e.g. decoded rows a benchmark must not keep);
        returns how many were dropped."""
        n = 0
        with self._lock:
            for k in keys:
                item = self._items.pop(k, None)
                if item is not None:
                    self.stats.bytes -= item[1]
                    n += 1
            self.stats.entries = len(self._items)
        return n

    def clear(self) -> None:
        """Drop every entry and reset the counters."""
        with self._lock:
            self._items.clear()
            self.stats = CacheStats()


def _env_max_bytes() -> int:
    raw = os.environ.get("INDEXEDDF_CACHE_MAX_BYTES", "")
    try:
        return int(raw) if raw else DEFAULT_MAX_BYTES
    except ValueError:
        warnings.warn(f"INDEXEDDF_CACHE_MAX_BYTES={raw!r} is not an integer; using {DEFAULT_MAX_BYTES}")
        return DEFAULT_MAX_BYTES


_CACHE = LRUCache(_env_max_bytes())


def cache() -> LRUCache:
    """This process's cache."""
    return _CACHE


def configure(max_bytes: int | None = None) -> None:
    """Set this process's cache bound (``indexeddf.cache.maxBytes``)."""
    if max_bytes is not None:
        _CACHE.resize(int(max_bytes))


def cache_stats() -> CacheStats:
    """A copy of this process's cache counters."""
    s = _CACHE.stats
    return CacheStats(s.hits, s.misses, s.evictions, s.bytes, s.entries)


def deletion_vector_rows(storage, table_id: str, dv):
    """The sorted row ordinals the deletion vector ``dv`` (a descriptor) deletes, read once
    a process: a DV is immutable under its unique id, and a table changed by many merges
    has hundreds, which every scan and lookup of it applies."""
    from ..format.deletion_vectors import read_deletion_vector

    return _CACHE.get_or_load(("dv", table_id, dv.unique_id), lambda: read_deletion_vector(storage, dv),
                              lambda rows: rows.nbytes)
