"""The floor of a deletion-vector upsert's pre-images: what reading every column of 5,000 random
matched rows costs on its own, by the layout of the files.

    python benchmarks/preimage_floor.py [--rows 20000000] [--files 32] [--layouts default,64kb,16kb]
                                        [--work DIR] [--out JSON | -]

Files shaped as the check table's buckets (benchmarks/changes.py's rows: ``k`` bigint, ``v``
bigint, ``s`` 64 random characters; ``--rows / --files`` rows a file, row groups of about 1 MB,
zstd, ``k`` delta-encoded, as the writer writes them), in layouts: ``default`` (pages of about
1 MB, no page index) and a page size with the page index (``indexeddf.parquet.pageSize``: ``64kb``
gives ``s`` pages of 1,024 rows, ``v`` of 8,192, ``k`` one a row group). For 5,000 random row ordinals (about 156 a file at
32 files), the CPU seconds of this process (best of three) for:

- a full read of every file (pyarrow), and of the key column alone (what a feed-off upsert
  reads to find its rows);
- the pre-images as the engine read them before pages: the row groups holding the rows, every
  column (pyarrow);
- the pre-images by pages (``indexeddf.format.pages.rows_at``): only the pages holding them;
- DuckDB 1.5 (one thread) reading the rows by ``file_row_number IN (...)``.

Every read's rows are checked against pyarrow's take of the whole file (first file). Writes
what it printed into a results JSON (``--out -``: none).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from changes import _rows

from indexeddf.format import pages
from indexeddf.spec.config import parse_byte_size
from indexeddf.writer.files import page_options

ROOT = Path(__file__).resolve().parent.parent
PRINTED: list[str] = []


def say(line: str = "") -> None:
    """Print a line and keep it for the results JSON."""
    print(line, flush=True)
    PRINTED.append(line)


def cpu() -> float:
    """CPU seconds of this process, every thread."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def best(fn, reps: int = 3) -> tuple[float, float]:
    """The least CPU seconds of ``reps`` calls, with that call's wall seconds."""
    out = None
    for _ in range(reps):
        c0, t0 = cpu(), time.perf_counter()
        fn()
        c, w = cpu() - c0, time.perf_counter() - t0
        out = (c, w) if out is None or c < out[0] else out
    return out


def write(path: str, rows: pa.Table, page_size: int) -> None:
    """One bucket's file as the writer writes it (row groups of about 1 MB)."""
    per_group = max(1, (1024 * 1024) // max(1, rows.nbytes // rows.num_rows))
    pq.write_table(rows, path, row_group_size=per_group, compression="zstd", use_dictionary=[],
                   column_encoding={"k": "DELTA_BINARY_PACKED"}, **page_options(page_size))


def by_row_groups(path: str, wanted: np.ndarray) -> pa.Table:
    """The rows at ``wanted``: the row groups holding them read whole."""
    pf = pq.ParquetFile(path)
    starts = np.cumsum([0] + [pf.metadata.row_group(i).num_rows for i in range(pf.metadata.num_row_groups)])
    groups = sorted(set((np.searchsorted(starts, wanted, "right") - 1).tolist()))
    rows = pf.read_row_groups(groups, use_threads=False)
    local = np.concatenate([wanted[(wanted >= starts[g]) & (wanted < starts[g + 1])] - starts[g] + at
                            for g, at in zip(groups, np.cumsum([0] + [starts[g + 1] - starts[g] for g in groups]))])
    return rows.take(pa.array(local))


def by_pages(path: str, wanted: np.ndarray) -> pa.Table:
    """The rows at ``wanted``: only the pages holding them (the engine's read)."""
    with pafs.LocalFileSystem().open_input_file(path) as source:
        return pages.rows_at(source, ["k", "v", "s"], wanted,
                             lambda d, m: pq.ParquetFile(pa.BufferReader(d), metadata=m))


def by_duckdb(con, path: str, wanted: np.ndarray) -> pa.Table:
    """The rows at ``wanted``: DuckDB's read filtered on ``file_row_number``."""
    listed = ",".join(map(str, wanted.tolist()))
    return con.execute(f"SELECT k, v, s FROM read_parquet('{path}', file_row_number=true) "
                       f"WHERE file_row_number IN ({listed}) ORDER BY file_row_number").to_arrow_table()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=20_000_000)
    p.add_argument("--files", type=int, default=32)
    p.add_argument("--layouts", default="default,64kb,16kb")
    p.add_argument("--work", default="/tmp/preimage-floor", help="folder for the files (kept: a rerun reuses them)")
    p.add_argument("--out", default=None)
    args = p.parse_args()
    import duckdb

    started = datetime.now(timezone.utc)
    per = args.rows // args.files
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(1)
    keys = rng.choice(per * args.files, 5000, replace=False)
    wanted = [np.sort(keys[keys // per == f] - f * per) for f in range(args.files)]
    con = duckdb.connect()
    con.execute("SET threads=1")
    say(f"{args.files} files of {per:,} rows ({per * args.files:,} rows), 5,000 random rows; CPU seconds, "
        "best of 3 (wall in parentheses; the machine shared)")
    for layout in args.layouts.split(","):
        paths = []
        for f in range(args.files):
            path = str(work / f"{layout}-{f}.parquet")
            if not os.path.exists(path):
                write(path, _rows(f * per, per, f), 0 if layout == "default" else parse_byte_size(layout))
            paths.append(path)
        meta = pq.ParquetFile(paths[0]).metadata
        want = pq.read_table(paths[0]).take(pa.array(wanted[0]))
        assert by_row_groups(paths[0], wanted[0]).equals(want)
        assert by_pages(paths[0], wanted[0]).equals(want)
        assert by_duckdb(con, paths[0], wanted[0]).cast(want.schema).equals(want)
        size = sum(os.path.getsize(x) for x in paths)
        say()
        say(f"{layout}: {size / 1e6:.1f} MB, {meta.num_row_groups} row groups a file")
        for name, fn in (
            ("full read, every column", lambda: [pq.read_table(x) for x in paths]),
            ("full read, key column (a feed-off upsert's read)", lambda: [pq.read_table(x, columns=["k"]) for x in paths]),
            ("pre-images: the row groups holding them", lambda: [by_row_groups(x, w) for x, w in zip(paths, wanted)]),
            ("pre-images: the pages holding them (format/pages.py)", lambda: [by_pages(x, w) for x, w in zip(paths, wanted)]),
            ("pre-images: DuckDB, file_row_number IN (...), 1 thread",
             lambda: [by_duckdb(con, x, w) for x, w in zip(paths, wanted)]),
        ):
            c, w = best(fn)
            say(f"  {name:<58} {c:7.3f} s  ({w:.3f} s)")
    if args.out != "-":
        rows = f"{args.rows // 1_000_000}m" if args.rows % 1_000_000 == 0 else f"{args.rows // 1000}k"
        out = Path(args.out) if args.out else ROOT / "benchmarks" / "results" / f"{started:%Y-%m-%d-%H%M}-preimage-floor-{rows}.json"
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=ROOT).stdout.strip()
        record = {"run": out.stem, "kind": "benchmarks/preimage_floor.py", "date": f"{started:%Y-%m-%d}",
                  "command": "python benchmarks/preimage_floor.py " + " ".join(sys.argv[1:]), "commit": commit or None,
                  "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
                  "source": "written by the command on this machine: the lines it printed", "printed": PRINTED}
        out.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
