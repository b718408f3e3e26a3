"""Scenarios of the index layer without Spark: lookup latency, index build speed, memory."""

from __future__ import annotations

import io
import itertools
import os
import subprocess
import sys
import time
from pathlib import Path

import datasets
import pyarrow.compute as pc
import pyarrow.parquet as pq
from harness import Scenario

from indexeddf import IndexedTable
from indexeddf.reader.cache import cache, configure
from indexeddf.reader.lookup import bucket_trie
from indexeddf.writer.index_files import DataPiece, build_index_files

CACHED_BYTES = 4 << 30
"""Cache bound of the lookup scenarios' process: the 20M-row table decodes to ~1.9 GB."""


def _lookup(work: Path, args, n_keys: int, target: str) -> Scenario:
    path = datasets.events(args.rows)
    t = IndexedTable.for_path(path)
    configure(CACHED_BYTES)
    # Warm the process: every bucket's trie is loaded (2,000 keys touch all 32 buckets).
    t.lookup(datasets.some_keys(path, 2_000, seed=99))
    calls = args.warmup + args.rounds
    fresh = iter(datasets.some_keys(path, n_keys * calls, seed=5))
    seen = [datasets.some_keys(path, n_keys, seed=200 + i) for i in range(3)]
    for keys in seen:
        t.lookup(keys)  # these keys' row groups are now cached
    seen_cycle = itertools.cycle(seen)

    loaded: dict = {"before": None}

    def forget_loaded():
        # Untimed: drop what the previous call of the new-keys candidate loaded, so no
        # later call finds its row groups cached.
        if loaded["before"] is not None:
            cache().discard([k for k in cache().keys() if k not in loaded["before"]])
        loaded["before"] = set(cache().keys())

    def lookup_uncached():
        return t.lookup([next(fresh) for _ in range(n_keys)])

    scan_keys = itertools.cycle(seen)
    return Scenario(
        name=f"lookup_python_{n_keys}",
        description=f"IndexedTable.lookup of {n_keys} key(s) in a warm process, {args.rows:,} rows",
        baseline=("to_arrow(filter=user_id IN keys): pyarrow dataset scan of the same files",
                  lambda: t.to_arrow(filter=pc.field("user_id").isin(next(scan_keys)))),
        candidates=[
            ("lookup, new keys (tries cached, rows read from the files)", lookup_uncached),
            ("lookup, keys looked up before (rows cached too)", lambda: t.lookup(next(seen_cycle))),
        ],
        target=target,
        untimed={"lookup, new keys (tries cached, rows read from the files)": forget_loaded},
        notes=[f"Warm process: tries of all buckets cached; cache bound {CACHED_BYTES >> 30} GiB "
               "(indexeddf.cache.maxBytes / INDEXEDDF_CACHE_MAX_BYTES), so the decoded row groups of "
               "keys looked up before stay in memory. New keys read their row groups from the files."],
    )


def lookup_one(work, args):
    return _lookup(work, args, 1, "median under 5 ms")


def lookup_thousand(work, args):
    return _lookup(work, args, 1_000, "median under 50 ms")


def lookup_fresh_process(work: Path, args) -> Scenario:
    path = datasets.events(args.rows)
    key = datasets.some_keys(path, 1)[0]
    code = f"from indexeddf import IndexedTable; IndexedTable.for_path({path!r}).lookup([{key}])"
    env = dict(os.environ)
    return Scenario(
        name="lookup_fresh_process",
        description="one lookup in a new Python process (start, import, open the table, read one bucket)",
        baseline=("python -c 'import indexeddf' (start-up alone)",
                  lambda: subprocess.run([sys.executable, "-c", "import indexeddf"], check=True, env=env)),
        candidates=[("python -c '... lookup([key])'", lambda: subprocess.run([sys.executable, "-c", code], check=True, env=env))],
        target="under 300 ms",
    )


def index_build(work: Path, args) -> Scenario:
    path = datasets.events(args.rows)
    t = IndexedTable.for_path(path)
    storage = t.snapshot.storage
    files = t.snapshot.live_files()[: datasets.NUM_BUCKETS]  # one append's worth of files
    pieces = [DataPiece(a.fileId, pq.read_table(storage.full(a.path), columns=["user_id"])) for a in files]
    full = [pq.read_table(storage.full(a.path)) for a in files]
    rows = sum(p.rows.num_rows for p in pieces)

    def build():
        written: list[str] = []
        build_index_files(storage, "bench_tmp", ["user_id"], datasets.NUM_BUCKETS, pieces, written)
        for rel in written:
            storage.delete(rel)

    def write_data():
        for i, table in enumerate(full):
            pq.write_table(table, io.BytesIO(), compression="zstd")

    notes = [f"{rows:,} rows per round; rows/s of the index build = {rows:,} / its median time."]
    notes += _memory_notes(t)
    return Scenario(
        name="primary_index_build",
        description=f"build the primary index entries of {rows:,} rows (hash, sort, write one file per bucket)",
        baseline=("writing the same rows' data files (Parquet, zstd, in memory)", write_data),
        candidates=[("build_index_files", build)],
        target="at least 1M rows/s per core",
        notes=notes,
    )


def _memory_notes(t: IndexedTable) -> list[str]:
    snap = t.snapshot
    primary = snap.indexes["primary"]
    cache().clear()
    t0 = time.perf_counter()
    tries = [bucket_trie(snap, tuple(f for f in primary.files if f.bucket == b)) for b in range(primary.numBuckets)]
    load = time.perf_counter() - t0
    trie_bytes = sum(tr.nbytes for tr in tries)
    entries = sum(tr.num_entries for tr in tries)
    index_bytes = sum(f.size for f in primary.files)
    data_bytes = snap.size_bytes()
    return [
        f"Tries of all {primary.numBuckets} buckets: {trie_bytes:,} bytes for {entries:,} rows = "
        f"{trie_bytes / max(1, entries):.1f} bytes per row (goal: at most 16); loaded in {load:.2f} s.",
        f"Index files {index_bytes:,} bytes against data files {data_bytes:,} bytes = "
        f"{100 * index_bytes / max(1, data_bytes):.1f} % (goal: at most 10 %).",
    ]


SCENARIOS = {
    "lookup_python_1": lookup_one,
    "lookup_python_1000": lookup_thousand,
    "lookup_fresh_process": lookup_fresh_process,
    "primary_index_build": index_build,
}
