"""A bucket's sorted files merged into one a row group at a time (``writer/bucket_merge.py``,
what ``optimize`` does to a bucket with and without Spark).

The merge of random sorted runs (several key columns, NULLs, ties across runs and across
row groups) must give the rows of a stable sort of all of them by the same keys, as
DuckDB orders them; optimize of a bucket whose files hold more row groups than one must
write one file in key order, with full row groups, whose rows DuckDB reads as before, and
whose index entries point at each key's rows; its peak memory is that of a few row groups,
not of the bucket (pyarrow's allocator, measured in this process)."""

from __future__ import annotations

import subprocess
import sys

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st
from oracles import duckdb_delta

from indexeddf import IndexedTable
from indexeddf.writer.bucket_merge import merged_runs

SORT = [("a", "ascending", "at_start"), ("b", "ascending", "at_start")]


def _run(draw_rows: list[tuple], pieces: list[int]) -> list[pa.Table]:
    """Rows sorted by (a, b) as ``split_by_bucket`` sorts them, cut into pieces of the given sizes."""
    t = pa.table({"a": pa.array([r[0] for r in draw_rows], pa.int64()),
                  "b": pa.array([r[1] for r in draw_rows], pa.string()),
                  "tag": pa.array([r[2] for r in draw_rows], pa.string())})
    t = t.take(pc.sort_indices(t.select(["a", "b"]), sort_keys=SORT))
    out, at = [], 0
    for n in pieces:
        out.append(t.slice(at, n))
        at += n
    out.append(t.slice(at))
    return out


keys = st.tuples(st.one_of(st.none(), st.integers(-3, 3)), st.one_of(st.none(), st.sampled_from(["", "x", "y"])))


@st.composite
def runs(draw):
    out = []
    for r in range(draw(st.integers(1, 5))):
        rows = [(a, b, f"{r}:{i}") for i, (a, b) in enumerate(draw(st.lists(keys, max_size=30)))]
        cuts = draw(st.lists(st.integers(0, 8), max_size=5))
        out.append(_run(rows, cuts))
    return out


@settings(max_examples=300, deadline=None)
@given(runs())
def test_merged_runs_give_a_stable_sort_of_all_rows(rs):
    pieces = list(merged_runs(rs, ["a", "b"]))
    assert all(p.num_rows for p in pieces)
    merged = pa.concat_tables(pieces) if pieces else None
    everything = pa.concat_tables([t for r in rs for t in r])
    if merged is None:
        assert everything.num_rows == 0
        return
    # DuckDB's order of the same keys, NULLs first: the merge is in key order ...
    keys_in_order = duckdb.sql("SELECT a, b FROM everything ORDER BY a NULLS FIRST, b NULLS FIRST").fetchall()
    assert list(zip(merged.column("a").to_pylist(), merged.column("b").to_pylist())) == keys_in_order
    # ... with every row once, and within a run the rows keep their order.
    assert sorted(merged.column("tag").to_pylist()) == sorted(everything.column("tag").to_pylist())
    for r, run in enumerate(rs):
        tags = [t for t in merged.column("tag").to_pylist() if t.startswith(f"{r}:")]
        assert tags == [t for piece in run for t in piece.column("tag").to_pylist()]


def _duck(path: str) -> list:
    return duckdb_delta().execute(f"SELECT k, v, s FROM delta_scan('{path}') ORDER BY v").fetchall()


def test_optimize_merges_a_bucket_in_key_order_with_full_row_groups(tmp_path):
    rng = np.random.default_rng(7)
    props = {"indexeddf.targetRowGroupBytes": "65536"}  # many row groups a file
    t = None
    for i in range(4):
        k = rng.integers(0, 200_000, 40_000)
        batch = pa.table({"k": k, "v": np.arange(40_000) + i * 40_000, "s": pa.array([f"s{x:07d}" for x in k])})
        if t is None:
            t = IndexedTable.create(str(tmp_path / "t"), batch, index_columns=["k"], num_buckets=2,
                                    properties=props)
        else:
            t.append(batch)
    t.delete("k < 1000")
    before = _duck(t.path)
    assert t.optimize("full") is not None
    snap = IndexedTable.for_path(t.path).snapshot
    files = snap.live_files()
    assert len(files) == 2 and all(a.sorted and a.deletionVector is None for a in files)
    for a in files:
        pf = pq.ParquetFile(snap.storage.full(a.path))
        groups = [pf.metadata.row_group(g).num_rows for g in range(pf.metadata.num_row_groups)]
        assert len(groups) > 2 and len(set(groups[:-1])) == 1 and groups[-1] <= groups[0]
        ks = pf.read(columns=["k"]).column("k").to_numpy()
        assert (np.diff(ks) >= 0).all()
    assert _duck(t.path) == before
    for key in rng.choice([r[0] for r in before], 20).tolist() + [5, 999, 200_007]:
        got = sorted(r["v"] for r in t.lookup([key]).to_pylist())
        assert got == sorted(r[1] for r in before if r[0] == key)


OPTIMIZE_ONE_BUCKET = """
import resource, sys
from indexeddf import IndexedTable
t = IndexedTable.for_path(sys.argv[1])
t.snapshot.live_files()
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t.optimize("full")
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base)
"""


def _optimize_rss_kib(tmp_path, rows: int) -> int:
    """Peak RSS growth (KiB) of a fresh process optimizing one bucket of four files of
    ``rows`` rows in all (a bigint key, a 60-character string)."""
    props = {"indexeddf.targetRowGroupBytes": str(1 << 20)}
    path = str(tmp_path / f"t{rows}")
    for i in range(4):
        k = np.arange(i, rows, 4)
        batch = pa.table({"k": k, "s": pa.array([f"{x:060d}" for x in k])})
        if i == 0:
            t = IndexedTable.create(path, batch, index_columns=["k"], num_buckets=1, properties=props)
        else:
            t.append(batch)
    out = subprocess.run([sys.executable, "-c", OPTIMIZE_ONE_BUCKET, path], capture_output=True, text=True,
                         check=True)
    assert len(IndexedTable.for_path(path).snapshot.live_files()) == 1
    return int(out.stdout.strip().splitlines()[-1])


def test_optimize_memory_does_not_grow_with_the_bucket(tmp_path):
    """A bucket four times larger (50 MB more of rows in Arrow) costs the optimizing process
    little more peak memory: it holds row groups, not the bucket; what grows is the index
    entries it holds until a chunk of 4M is written out (about 16 bytes a row: 12 MB here).
    Reading the bucket whole, the process needed 140 MB more."""
    small, large = _optimize_rss_kib(tmp_path, 250_000), _optimize_rss_kib(tmp_path, 1_000_000)
    grown_rows_kib = 750_000 * 68 // 1024
    assert large - small < grown_rows_kib / 2, (small, large)


def test_runs_of_growing_keys_are_merged_one_run_a_round():
    """Files of keys that grow from write to write (ids, times): each round writes one run's
    buffer; the runs past it are not sorted again."""
    rs = [[pa.table({"a": pa.array(range(r * 100 + g * 10, r * 100 + g * 10 + 10), pa.int64())}) for g in range(10)]
          for r in range(4)]
    pieces = list(merged_runs(rs, ["a"]))
    assert pa.concat_tables(pieces).column("a").to_pylist() == list(range(400))
    assert [p.num_rows for p in pieces[:30]] == [10] * 30  # then the last run, as it is
