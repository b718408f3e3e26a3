"""Benchmark data: generated here, kept under benchmarks/data/ between runs.

``events(rows)`` is an indexed table of ``rows`` rows of about 80 bytes each, bucketed
by ``user_id`` (about 4 rows per user id) into 32 buckets: written as one create and
appends of 2M rows, then compacted by ``optimize(mode="full")`` into one file per
bucket, the state a lookup-serving table is kept in. It is generated once per size and
layout and reused by later runs (delete benchmarks/data/ to regenerate).
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from indexeddf import IndexedTable

DATA = Path(__file__).parent / "data"
NUM_BUCKETS = 32
CHUNK = 2_000_000
LAYOUT = ("layout 6: a Delta table (_delta_log); appends of 2M rows, then optimize(full); dictionaries for "
          "strings only; bucket-suffixed file names; rows sorted by user_id (indexeddf.sorted)\n")
"""First line of the _READY marker; a table generated under another layout is rebuilt."""


def chunk(start: int, n: int, total: int, seed: int) -> pa.Table:
    """Rows ``start .. start+n`` of a table of ``total`` rows (deterministic)."""
    rng = np.random.default_rng(seed + start)
    pages = np.array([f"https://example.com/products/item-{i:06d}/details" for i in range(5_000)])
    countries = np.array(["DE", "FR", "US", "JP", "BR", "IN", "NL", "SE"])
    return pa.table(
        {
            "user_id": pa.array(rng.integers(0, max(1, total // 4), n), pa.int64()),
            "session_id": pa.array(np.arange(start, start + n), pa.int64()),
            "ts": pa.array((1_700_000_000_000_000 + rng.integers(0, 10**13, n)).astype("datetime64[us]")).cast(pa.timestamp("us", tz="UTC")),
            "amount": pa.array(np.round(rng.random(n) * 500, 2)),
            "country": pa.array(countries[rng.integers(0, len(countries), n)]),
            "url": pa.array(pages[rng.integers(0, len(pages), n)]),
        }
    )


def events(rows: int, seed: int = 7) -> str:
    """Path of the generated events table with ``rows`` rows (built when missing)."""
    path = DATA / f"events-{rows}"
    done = path / "_READY"
    if done.exists() and done.read_text().startswith(LAYOUT):
        return str(path)
    shutil.rmtree(path, ignore_errors=True)
    t0 = time.perf_counter()
    print(f"... generating {rows:,} rows in {path}", file=sys.stderr, flush=True)
    first = min(rows, CHUNK)
    table = IndexedTable.create(str(path), chunk(0, first, rows, seed), index_columns=["user_id"], num_buckets=NUM_BUCKETS)
    for start in range(first, rows, CHUNK):
        table.append(chunk(start, min(CHUNK, rows - start), rows, seed))
        print(f"    {start + CHUNK:,} rows", file=sys.stderr, flush=True)
    table.optimize(mode="full", progress=None)
    done.write_text(LAYOUT + f"generated in {time.perf_counter() - t0:.1f} s\n")
    return str(path)


def events_empty() -> str:
    """Path of an indexed table with the events schema and no rows (the fixed cost of a
    query through indexeddf, whatever the data)."""
    path = DATA / "events-empty"
    if not (path / "_delta_log").exists():
        IndexedTable.create(str(path), chunk(0, 0, 1, seed=1), index_columns=["user_id"], num_buckets=NUM_BUCKETS)
    return str(path)


def some_keys(path: str, n: int, seed: int = 1) -> list[int]:
    """``n`` user ids present in the table."""
    t = IndexedTable.for_path(path)
    total = t.snapshot.num_records()
    rng = np.random.default_rng(seed)
    return [int(k) for k in rng.integers(0, max(1, total // 4), n)]
