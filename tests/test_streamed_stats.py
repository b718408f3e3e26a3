"""A file written in pieces (``writer/streamed.py``, what copy on write writes) takes some
statistics from its Parquet footer: they must be the min, max and NULL count DuckDB finds
in the file, with strings too long for the footer, NULL-only pieces and non-ASCII text."""

from __future__ import annotations

import datetime

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from indexeddf.format.storage import TableStorage
from indexeddf.writer.files import FOOTER_STAT_BYTES, MAX_STRING_STAT, stat_value
from indexeddf.writer.streamed import StreamedFile


def _piece(rng, n: int, long: str | None = None, nulls: bool = False) -> pa.Table:
    words = [("é" if i % 7 == 0 else "z") + str(int(rng.integers(1000))) for i in range(n)]
    if long is not None:
        words[n // 2] = long
    # A nested column first (its leaves come before the others' in the footer) and a name
    # with a dot (as a nested leaf's path reads).
    nested = pa.array([{"a": i, "b": [str(i)]} for i in range(n)])
    t = pa.table({"n": nested, "i8": pa.array(rng.integers(-100, 100, n), pa.int8()),
                  "k": pa.array(rng.integers(-10**12, 10**12, n)),
                  "d": pa.array(rng.integers(0, 20000, n), pa.int32()).cast(pa.date32()),
                  "s": pa.array(words), "n.a": pa.array(words, pa.large_string())})
    if nulls:
        t = t.set_column(2, "k", pa.nulls(n, pa.int64())).set_column(4, "s", pa.nulls(n, pa.string()))
    return t


CASES = {
    "plain": [{}, {}],
    "a long string, not the min or max": [{}, {"long": "z" * (FOOTER_STAT_BYTES + 10)}, {}],
    "a long string, the max": [{}, {"long": "ü" * FOOTER_STAT_BYTES}, {}],
    "a NULL-only piece": [{"nulls": True}, {}],
    "NULLs only": [{"nulls": True}],
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_streamed_stats_are_duckdbs(tmp_path, case):
    rng = np.random.default_rng(7)
    pieces = [_piece(rng, 40, **kw) for kw in CASES[case]]
    out = StreamedFile(TableStorage(str(tmp_path)), ("f.parquet", 1), 0, pieces[0].schema, 1 << 20, ["k"], 100, False)
    for p in pieces:
        out.write(p)
    stats = out.close().stats
    con = duckdb.connect()
    assert stats.numRecords == con.sql(f"SELECT count(*) FROM '{tmp_path / 'f.parquet'}'").fetchone()[0]
    for c in pieces[0].column_names[1:]:
        lo, hi, nulls = con.sql(f'SELECT min("{c}"), max("{c}"), count(*) - count("{c}") '
                                f"FROM '{tmp_path / 'f.parquet'}'").fetchone()
        assert stats.nullCount[c] == nulls, c
        kept = lo is not None and not any(isinstance(v, str) and len(v) > MAX_STRING_STAT for v in (lo, hi))
        assert stats.minValues.get(c) == (stat_value(lo) if kept else None), c
        assert stats.maxValues.get(c) == (stat_value(hi) if kept else None), c
    assert isinstance(datetime.date.fromisoformat(stats.minValues["d"]), datetime.date)
