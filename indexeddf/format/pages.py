"""Reading a few rows of a data file by the Parquet pages that hold them, not its row groups.

A change with the change data feed on and deletion vectors must write every column of each
matched row's pre-image, and Parquet readers (pyarrow's among them) decode a row group at a
time: 5,000 random rows of a 20M-row table touch nearly every row group. Data files written with
Parquet's page index and small pages (``indexeddf.parquet.pageSize``) say where each page of a
column starts and its first row; :func:`rows_at` then reads, column by column, only the pages
that hold the rows: their bytes gathered into one buffer with a footer of ours that lists them
as row groups, decoded by pyarrow. A column chunk without an offset index or with a dictionary
page is read whole, and a file with nested columns by row groups.

The footer is Parquet's Thrift compact encoding: :func:`decode` and :func:`encode` round-trip
any struct (fields by id, unknown ones kept), so only the fields named here are touched.
"""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa

from ..spec.arrays import distinct
from .footers import decode as decode_metadata
from .footers import read_varint, read_zigzag, varint

SPARSE_ROWS = 2048
"""Rows are read by pages when there is at most one in this many of a file's rows: at pages of
1,024 rows (64 KB of 64-character strings) they then touch at most about 40% of the pages. Denser,
they touch most pages, and pyarrow's own read of the row groups costs less (measured: 5,000 rows
of 2M, 156 a 62,500-row file, by pages 0.329 CPU-s against 0.242 by row groups)."""

# Thrift compact protocol type ids.
_BOOL_TRUE, _BOOL_FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY, _LIST, _SET, _MAP, _STRUCT = range(1, 13)


# -- Thrift compact protocol: decode to {field id: (type, value)}, encode back ----------------
# (the varints are footers.py's, which reads the same encoding field by field)
def _value(buf: bytes, at: int, t: int):
    if t in (_BOOL_TRUE, _BOOL_FALSE):  # a bool field carries its value in its type
        return t == _BOOL_TRUE, at
    if t == _BYTE:
        return buf[at], at + 1
    if t in (_I16, _I32, _I64):
        return read_zigzag(buf, at)
    if t == _DOUBLE:
        return struct.unpack_from("<d", buf, at)[0], at + 8
    if t == _BINARY:
        n, at = read_varint(buf, at)
        return bytes(buf[at:at + n]), at + n
    if t in (_LIST, _SET):
        head = buf[at]
        at += 1
        n, et = head >> 4, head & 0x0F
        if n == 15:
            n, at = read_varint(buf, at)
        items = []
        for _ in range(n):
            if et in (_BOOL_TRUE, _BOOL_FALSE):  # list elements: one byte each
                items.append(buf[at] == _BOOL_TRUE)
                at += 1
            else:
                v, at = _value(buf, at, et)
                items.append(v)
        return (et, items), at
    if t == _MAP:
        n, at = read_varint(buf, at)
        if n == 0:
            return (0, 0, []), at
        kv = buf[at]
        at += 1
        pairs = []
        for _ in range(n):
            k, at = _value(buf, at, kv >> 4)
            v, at = _value(buf, at, kv & 0x0F)
            pairs.append((k, v))
        return (kv >> 4, kv & 0x0F, pairs), at
    if t == _STRUCT:
        return decode(buf, at)
    raise ValueError(f"unknown Thrift compact type {t}")


def decode(buf: bytes, at: int = 0) -> tuple[dict, int]:
    """One Thrift compact struct at ``at``: ``{field id: (type, value)}`` and where it ends."""
    fields, last = {}, 0
    while True:
        head = buf[at]
        at += 1
        if head == 0:
            return fields, at
        delta, t = head >> 4, head & 0x0F
        if delta:
            fid = last + delta
        else:
            fid, at = read_zigzag(buf, at)
        value, at = _value(buf, at, t)
        fields[fid] = (t, value)
        last = fid


def _put(out: bytearray, t: int, v) -> None:
    if t == _BYTE:
        out.append(v & 0xFF)
    elif t in (_I16, _I32, _I64):
        out += varint((v << 1) ^ (v >> 63))
    elif t == _DOUBLE:
        out += struct.pack("<d", v)
    elif t == _BINARY:
        out += varint(len(v))
        out += v
    elif t in (_LIST, _SET):
        et, items = v
        if len(items) < 15:
            out.append(len(items) << 4 | et)
        else:
            out.append(0xF0 | et)
            out += varint(len(items))
        for item in items:
            if et in (_BOOL_TRUE, _BOOL_FALSE):
                out.append(_BOOL_TRUE if item else _BOOL_FALSE)
            else:
                _put(out, et, item)
    elif t == _MAP:
        kt, vt, pairs = v
        out += varint(len(pairs))
        if pairs:
            out.append(kt << 4 | vt)
            for k, val in pairs:
                _put(out, kt, k)
                _put(out, vt, val)
    elif t == _STRUCT:
        out += encode(v)
    else:
        raise ValueError(f"unknown Thrift compact type {t}")


def encode(fields: dict) -> bytes:
    """A struct :func:`decode` gave (perhaps changed) in Thrift compact encoding."""
    out, last = bytearray(), 0
    for fid in sorted(fields):
        t, v = fields[fid]
        if t in (_BOOL_TRUE, _BOOL_FALSE):
            t = _BOOL_TRUE if v else _BOOL_FALSE
        if 0 < fid - last <= 15:
            out.append((fid - last) << 4 | t)
        else:
            out.append(t)
            out += varint((fid << 1) ^ (fid >> 15))
        if t not in (_BOOL_TRUE, _BOOL_FALSE):
            _put(out, t, v)
        last = fid
    out.append(0)
    return bytes(out)


# -- the footer and the page index ------------------------------------------------------------
# Field ids of parquet.thrift: FileMetaData.schema 2 / num_rows 3 / row_groups 4, SchemaElement
# repetition_type 3 / num_children 5, RowGroup.columns 1 / total_byte_size 2 / num_rows 3 /
# file_offset 5 / total_compressed_size 6, ColumnChunk.file_offset 2 / meta_data 3 /
# offset_index_offset 4 / offset_index_length 5, ColumnMetaData.num_values 5 /
# total_uncompressed_size 6 / total_compressed_size 7 / data_page_offset 9 / dictionary_page_offset
# 11 (12 on: statistics, encoding stats, bloom filter, size statistics: dropped).
_KEEP_META = (1, 2, 3, 4, 5, 6, 7, 8, 9)


def file_footer(source) -> dict:
    """The decoded footer of a Parquet file open as ``source`` (a pyarrow ``RandomAccessFile``)."""
    size = source.size()
    tail = source.read_at(8, size - 8)
    if tail[4:] != b"PAR1":
        raise ValueError("not a Parquet file (or an encrypted one)")
    n = struct.unpack("<i", tail[:4])[0]
    return decode(source.read_at(n, size - 8 - n))[0]


def _page_starts(source, chunk: dict) -> list[tuple[int, int, int]] | None:
    """The (offset, compressed size with header, first row) of each page of a column chunk, from
    its offset index; None without one."""
    if 4 not in chunk or 5 not in chunk:
        return None
    return _locations(source.read_at(chunk[5][1], chunk[4][1]))


def _locations(buf: bytes) -> list[tuple[int, int, int]]:
    """An ``OffsetIndex``'s page locations: a tight loop over what a writer puts there (three
    integer fields a location), the generic :func:`decode` for anything else (it costs ten
    times more, and a change reads the index of each column chunk it touches)."""
    if buf[0] != 0x19 or buf[1] & 0x0F != _STRUCT:  # field 1, a list of structs
        index = decode(buf)[0]
        return [(loc[1][1], loc[2][1], loc[3][1]) for loc in index[1][1][1]]
    out, at, n = [], 2, buf[1] >> 4
    if n == 15:  # 15 or more: the count follows
        n, at = read_varint(buf, 2)
    for _ in range(n):
        if buf[at] != 0x16:
            break
        values = []
        at += 1
        for expect in (0x15, 0x16, 0x00):
            v, at = read_zigzag(buf, at)
            values.append(v)
            if buf[at] != expect:
                break
            at += 1
        else:
            out.append(tuple(values))
            continue
        break
    if len(out) != n:
        index = decode(buf)[0]
        return [(loc[1][1], loc[2][1], loc[3][1]) for loc in index[1][1][1]]
    return out


def _chunk_range(chunk: dict) -> tuple[int, int]:
    """Where a column chunk's bytes start (its dictionary page, if any) and how many there are."""
    meta = chunk[3][1]
    start = meta[11][1] if 11 in meta and 0 < meta[11][1] < meta[9][1] else meta[9][1]
    return start, meta[7][1]


def _wanted_pages(source, group: dict, flat: bool, wanted: np.ndarray):
    """The pages of ``group`` holding a row of ``wanted`` (ordinals within it, sorted): their row
    spans ``[(first, rows)]`` and, per column, their byte ranges; None when the group must be read
    whole: a nested column, a column without an offset index or with a dictionary page, or pages
    cut at other rows in another column."""
    chunks = group[1][1][1]
    if not flat or any(11 in c[3][1] for c in chunks):
        return None
    pages = [_page_starts(source, c) for c in chunks]
    if any(p is None for p in pages):
        return None
    firsts = [p[2] for p in pages[0]]
    if any([p[2] for p in col] != firsts for col in pages[1:]):
        return None
    ends = firsts[1:] + [group[3][1]]
    hit = distinct(np.searchsorted(np.asarray(firsts), wanted, "right") - 1)
    spans = [(firsts[i], ends[i] - firsts[i]) for i in hit]
    return spans, [[(col[i][0], col[i][1]) for i in hit] for col in pages]


def _flat(footer: dict) -> bool:
    """Whether every column of the file is a top-level, non-repeated one (one value a row, so a
    column chunk's value count is its rows)."""
    elements = footer[2][1][1]
    return all(e.get(3, (0, 0))[1] != 2 and 5 not in e for e in elements[1:])  # 2: REPEATED; 5: a group


def rows_at(source, columns: list[str], wanted: np.ndarray, open_with) -> pa.Table | None:
    """The rows at ``wanted`` (sorted distinct ordinals) of the Parquet file open as ``source``,
    with ``columns`` (the file's names), in order; None when ``wanted`` is empty. Each column is
    read on its own, by the pages holding the rows (:func:`_read`): a column's pages end where its
    bytes reach the writer's page size, so a column of small values keeps few large pages (a
    key column stays as cheap to scan) while one of long strings gets many small ones. A file
    with nested columns is read by row groups, every column at once."""
    footer = file_footer(source)
    if not _flat(footer):
        return _read(source, footer, False, columns, wanted, open_with)
    names = [e[4][1].decode() for e in footer[2][1][1][1:]]
    arrays = []
    for name in columns:
        one = _read(source, _one_column(footer, names.index(name)), True, [name], wanted, open_with)
        if one is None:
            return None
        arrays.append(one.column(0))
    return pa.Table.from_arrays(arrays, names=list(columns))


def _one_column(footer: dict, i: int) -> dict:
    """``footer`` as the footer of a file of its ``i``-th column alone (no Arrow schema in its
    metadata: the column's Parquet type says its Arrow type)."""
    out = {k: v for k, v in footer.items() if k != 5}
    elements = footer[2][1][1]
    root = dict(elements[0])
    root[5] = (_I32, 1)
    out[2] = (_LIST, (_STRUCT, [root, elements[i + 1]]))
    out[4] = (_LIST, (_STRUCT, [{**g, 1: (_LIST, (_STRUCT, [g[1][1][1][i]]))} for g in footer[4][1][1]]))
    if 7 in footer:  # column orders: one a column
        out[7] = (_LIST, (footer[7][1][0], [footer[7][1][1][i]]))
    return out


def _read(source, footer: dict, flat: bool, columns: list[str], wanted: np.ndarray, open_with) -> pa.Table | None:
    """The rows at ``wanted`` of the file ``footer`` describes (all its columns, or one: see
    :func:`_one_column`): the bytes of the pages holding them gathered into one buffer (a page
    is self-contained: its header says its size, encoding and values) with a footer whose row
    groups are those pages, one per run of row groups read by pages and one per row group read
    whole; pyarrow decodes it (``open_with(buffer, metadata)`` opens a ``pq.ParquetFile``).
    Memory: the wanted pages' bytes and rows, at most the file's."""
    groups = footer[4][1][1]
    data = bytearray(b"PAR1")
    out_groups, spans, start = [], [], 0
    pending = None  # the row group of pages being gathered: (template, spans, per column byte lists)
    for group in groups:
        rows = group[3][1]
        lo, hi = np.searchsorted(wanted, [start, start + rows])
        if hi > lo:
            found = _wanted_pages(source, group, flat, wanted[lo:hi] - start)
            if found is None:  # read whole: its own row group, dictionary pages and all
                if pending is not None:
                    out_groups.append(_gathered(*pending))
                    pending = None
                ranges = [[_chunk_range(c)] for c in group[1][1][1]]
                out_groups.append((group, rows, ranges, True))
                spans.append((start, rows))
            else:
                if pending is None:
                    pending = (group, [], [[] for _ in found[1]])  # its first row group as the template
                pending[1].extend((start + f, n) for f, n in found[0])
                for col, ranges in zip(pending[2], found[1]):
                    col.extend(ranges)
                spans.extend((start + f, n) for f, n in found[0])
        start += rows
    if len(wanted) and wanted[-1] >= start:
        raise IndexError(f"the file has {start} rows; a change named row {int(wanted[-1])}")
    if pending is not None:
        out_groups.append(_gathered(*pending))
    if not out_groups:
        return None
    for g, raw in enumerate(out_groups):  # the column chunks' bytes, then where they are
        out_groups[g] = _placed(raw, source, data)
    meta = dict(footer)
    meta[4] = (_LIST, (_STRUCT, out_groups))
    meta[3] = (_I64, sum(g[3][1] for g in out_groups))
    table = open_with(pa.py_buffer(bytes(data)), decode_metadata(encode(meta))).read(columns=columns,
                                                                                      use_threads=False)
    firsts = np.array([f for f, _ in spans], np.int64)
    offsets = np.cumsum([0] + [n for _, n in spans[:-1]])
    at = np.searchsorted(firsts, wanted, "right") - 1
    return table.take(pa.array(offsets[at] + wanted - firsts[at]))


def _gathered(group: dict, spans: list, ranges: list) -> tuple:
    """A row group of pages to be: a template (``group``), its rows, each column's byte ranges
    and False (not a row group read whole)."""
    return group, sum(n for _, n in spans), ranges, False


def _placed(gathered: tuple, source, data: bytearray) -> dict:
    """The row group ``gathered`` describes, its columns' bytes appended to ``data`` (adjacent
    ranges read at once)."""
    group, rows, ranges, whole = gathered
    columns = []
    for chunk, col in zip(group[1][1][1], ranges):
        offset = len(data)
        for at, n in _coalesced(col):
            data += source.read_at(n, at)
        size = len(data) - offset
        meta = {k: v for k, v in chunk[3][1].items() if k in _KEEP_META}
        if not whole:
            meta[5] = (_I64, rows)  # pages are read of flat columns only: one value a row
        meta[6] = (_I64, size)  # a reader sizes its buffers by the pages' own headers
        meta[7] = (_I64, size)
        meta[9] = (_I64, offset)
        if whole and _chunk_range(chunk)[0] != chunk[3][1][9][1]:  # its dictionary page first
            meta[9] = (_I64, offset + chunk[3][1][9][1] - chunk[3][1][11][1])
            meta[11] = (_I64, offset)
        out = {k: v for k, v in chunk.items() if k not in (4, 5, 6, 7)}  # no page index: it names all pages
        out[2] = (_I64, offset)
        out[3] = (_STRUCT, meta)
        columns.append(out)
    size = sum(c[3][1][7][1] for c in columns)
    return {1: (_LIST, (_STRUCT, columns)), 2: (_I64, size), 3: (_I64, rows), 5: (_I64, columns[0][3][1][9][1]),
            6: (_I64, size)}


def _coalesced(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out = []
    for at, n in ranges:
        if out and out[-1][0] + out[-1][1] == at:
            out[-1] = (out[-1][0], out[-1][1] + n)
        else:
            out.append((at, n))
    return out
