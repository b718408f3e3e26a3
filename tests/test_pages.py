"""Reading a few rows of a data file by its pages (``indexeddf.format.pages``), checked against
pyarrow's own read of the whole file: the same rows, every kind of file (small pages with a page
index, no page index, dictionaries, NULLs, nested columns, many row groups); and the footer
codec round-trips the footers pyarrow writes."""

from __future__ import annotations

import io
import struct

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from indexeddf.format import pages
from indexeddf.writer.files import page_options


def _table(n: int, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    s = [None if i % 13 == 0 else f"row-{i}-{rng.integers(1 << 30)}" for i in range(n)]
    return pa.table({"k": np.arange(n, dtype=np.int64), "v": rng.integers(0, 1 << 40, n),
                     "s": pa.array(s), "d": pa.array([f"tag{i % 5}" for i in range(n)]),
                     "f": rng.random(n)})


KINDS = {
    # Pages of about 512 bytes, ended after batches of 16 rows: 16 to 64 rows a page by column.
    "pages": dict(use_dictionary=False, write_batch_size=16, **page_options(512)),
    "pages-dictionary": dict(use_dictionary=["d"], write_batch_size=16, **page_options(512)),  # d read whole
    "no-page-index": dict(use_dictionary=False),
    "default": {},
}


def _write(path, table: pa.Table, **kw) -> None:
    pq.write_table(table, path, row_group_size=1000, compression="zstd", **kw)


def _read(path, wanted) -> tuple[pa.Table, int]:
    """The rows at ``wanted`` by pages, and the bytes handed to pyarrow."""
    seen = []

    def open_with(data, meta):
        seen.append(data.size)
        return pq.ParquetFile(pa.BufferReader(data), metadata=meta)

    with pafs.LocalFileSystem().open_input_file(str(path)) as source:
        rows = pages.rows_at(source, ["k", "v", "s", "d", "f"], np.asarray(wanted, np.int64), open_with)
    return rows, sum(seen)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_rows_by_pages_are_pyarrows_rows(tmp_path, kind):
    table = _table(5000)
    path = tmp_path / "f.parquet"
    _write(path, table, **KINDS[kind])
    rng = np.random.default_rng(1)
    for wanted in ([0], [4999], [999, 1000], list(range(60, 70)), sorted(rng.choice(5000, 40, replace=False)),
                   list(range(5000))):
        got, _ = _read(path, wanted)
        assert got.equals(pq.read_table(path).take(pa.array(wanted))), wanted


def test_only_the_pages_holding_the_rows_are_read(tmp_path):
    """Pages cut by rows with a page index: a few rows far apart cost a few pages' bytes; without
    a page index the same rows cost their row groups."""
    table = _table(20_000)
    cut, whole = tmp_path / "cut.parquet", tmp_path / "whole.parquet"
    _write(cut, table, **KINDS["pages"])
    _write(whole, table, use_dictionary=False)
    wanted = [5, 4_100, 9_050, 17_999]
    (a, cut_bytes), (b, whole_bytes) = _read(cut, wanted), _read(whole, wanted)
    assert a.equals(b) and a.equals(table.take(pa.array(wanted)))
    assert whole_bytes > whole.stat().st_size / 10  # four row groups of twenty
    assert cut_bytes * 5 < whole_bytes     # four pages a column, not four row groups of 1,000 rows


def test_a_nested_column_reads_row_groups(tmp_path):
    table = _table(3000).append_column("l", pa.array([[i] * (i % 3) for i in range(3000)]))
    path = tmp_path / "n.parquet"
    _write(path, table, **KINDS["pages"])
    wanted = [1, 1500, 2999]
    with pafs.LocalFileSystem().open_input_file(str(path)) as source:
        got = pages.rows_at(source, ["k", "l"], np.asarray(wanted), lambda d, m: pq.ParquetFile(
            pa.BufferReader(d), metadata=m))
    assert got.equals(pq.read_table(path, columns=["k", "l"]).take(pa.array(wanted)))


def test_an_ordinal_past_the_end_fails(tmp_path):
    path = tmp_path / "f.parquet"
    _write(path, _table(100), **KINDS["pages"])
    with pytest.raises(IndexError, match="100 rows"):
        _read(path, [3, 100])


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_footers_round_trip(kind):
    table = _table(3000)
    buf = io.BytesIO()
    pq.write_table(table, buf, row_group_size=1000, bloom_filter_options={"k": {"ndv": 3000, "fpp": 0.01}},
                   **KINDS[kind])
    data = buf.getvalue()
    n = struct.unpack("<i", data[-8:-4])[0]
    raw = data[-8 - n:-8]
    assert pages.encode(pages.decode(raw)[0]) == raw
