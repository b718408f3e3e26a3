"""Parquet footers kept small: the serialized bytes, and a footer of some row groups on demand.

pyarrow's decoded ``FileMetaData`` holds about 1 KB for each column chunk of every row
group (offsets, encodings, statistics), 7 to 10 times the footer's bytes in the file. A
lookup process opens every data and index file of the buckets it touches, and a file's
footer lists all its row groups, so decoded footers grow with the table (about 160 MB at
200M rows of the lookup benchmark). A lookup reads one or a few row groups of a file:
:class:`CompactFooter` keeps the footer's serialized bytes and where each row group's
entry lies in them, and decodes, for a read, a footer that lists only the row groups it
reads (their column chunks keep their offsets in the file, so the file is read as before).
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass

import numpy as np
import pyarrow.parquet as pq

MAGIC = b"PAR1"
_TAIL = 64 << 10
"""Bytes read from a file's end at once: the footer of a file of a few hundred row groups
fits, so opening it is one read."""


@dataclass(frozen=True)
class CompactFooter:
    """A Parquet file's footer as its serialized (Thrift compact) bytes, with the offsets
    in them of each row group's entry; :meth:`metadata` decodes a footer of some of them."""

    raw: bytes
    groups: np.ndarray
    """Per row group, then the end of the last: the offsets in :attr:`raw` of their entries."""
    list_at: int
    """Offset in :attr:`raw` of the ``row_groups`` list header."""
    num_rows_at: tuple[int, int]
    """The offsets of the file's ``num_rows`` value (a varint), which a subset footer restates."""
    rows: np.ndarray
    """The rows of each row group."""

    @property
    def nbytes(self) -> int:
        """What this footer holds in memory."""
        return len(self.raw) + self.groups.nbytes + self.rows.nbytes + 100

    @property
    def num_row_groups(self) -> int:
        """How many row groups the file has."""
        return len(self.groups) - 1

    def metadata(self, groups) -> pq.FileMetaData:
        """The decoded footer of the file restricted to ``groups`` (row group numbers, in the
        order they will be read: the footer's group ``i`` is ``groups[i]``)."""
        raw, at = self.raw, self.groups
        rows = int(sum(int(self.rows[g]) for g in groups))
        parts = [raw[:self.num_rows_at[0]], varint(_zigzag(rows)), raw[self.num_rows_at[1]:self.list_at],
                 _list_header(len(groups))]
        parts += [raw[at[g]:at[g + 1]] for g in groups]
        parts.append(raw[at[-1]:])
        return decode(b"".join(parts))


def read_footer(source) -> CompactFooter:
    """The compact footer of the Parquet file open as ``source`` (a pyarrow
    ``RandomAccessFile``)."""
    size = source.size()
    tail = source.read_at(min(size, _TAIL), max(0, size - _TAIL))
    if tail[-4:] != MAGIC:
        raise ValueError("not a Parquet file (no PAR1 at its end)")
    n = struct.unpack("<I", tail[-8:-4])[0]
    raw = tail[-8 - n:-8] if n + 8 <= len(tail) else source.read_at(n, size - 8 - n)
    return compact(bytes(raw))


def compact(raw: bytes) -> CompactFooter:
    """The :class:`CompactFooter` of a serialized ``FileMetaData``: its top-level fields are
    walked to find the ``row_groups`` list (field 4), and in it where each row group's entry
    starts (:func:`_group_starts`)."""
    meta = decode(raw)
    pos, fid = 0, 0
    list_at, groups, num_rows_at = -1, None, None
    while True:
        byte = raw[pos]
        pos += 1
        ftype = byte & 0x0F
        if ftype == 0:
            break
        delta = byte >> 4
        if delta:
            fid += delta
        else:
            fid, pos = read_zigzag(raw, pos)
        if fid == 3 and ftype == 6:  # num_rows
            start = pos
            _, pos = read_varint(raw, pos)
            num_rows_at = (start, pos)
        elif fid == 4 and ftype == 9:  # row_groups: list<RowGroup>
            list_at = pos
            size, _, pos = _list_start(raw, pos)
            groups = np.array(_group_starts(raw, pos, size, meta), np.int64)
            group_list = (pos, size)
            pos = int(groups[-1])
        else:
            pos = _skip(raw, pos, ftype)
    if groups is None or num_rows_at is None or len(groups) != meta.num_row_groups + 1:
        raise ValueError("a Parquet footer without num_rows or row_groups")
    rows = np.array([meta.row_group(g).num_rows for g in range(meta.num_row_groups)], np.int64)
    footer = CompactFooter(raw, groups, list_at, num_rows_at, rows)
    if not _same_groups(footer.metadata(range(footer.num_row_groups)), meta):
        # The search matched bytes inside a value (a statistic that happens to hold them):
        # the walk, which reads every field, is exact.
        footer = CompactFooter(raw, np.array(_walked_starts(raw, *group_list), np.int64), list_at, num_rows_at, rows)
    return footer


def _same_groups(spliced: pq.FileMetaData, meta: pq.FileMetaData) -> bool:
    """Whether a footer put together from the found row-group entries lists the file's row
    groups: each one's rows and every column chunk's offset as pyarrow decoded them."""
    if spliced.num_row_groups != meta.num_row_groups:
        return False
    for g in range(meta.num_row_groups):
        a, b = spliced.row_group(g), meta.row_group(g)
        if a.num_rows != b.num_rows or a.num_columns != b.num_columns or any(
                a.column(c).file_offset != b.column(c).file_offset
                or a.column(c).data_page_offset != b.column(c).data_page_offset for c in range(b.num_columns)):
            return False
    return True


def decode(footer: bytes) -> pq.FileMetaData:
    """pyarrow's decoded ``FileMetaData`` of a serialized footer."""
    return pq.read_metadata(io.BytesIO(MAGIC + footer + struct.pack("<I", len(footer)) + MAGIC))


def _group_starts(raw: bytes, first: int, n: int, meta: pq.FileMetaData) -> list[int]:
    """Where each of the ``n`` RowGroup entries from ``first`` starts, then where the last ends.

    Walking every field of every column chunk in Python costs about 25 ms for a footer of
    500 row groups, 13 times pyarrow's decoding. So each group's start is searched for
    instead, by what the bytes there must be: the STOP of the group before, the header of
    the ``columns`` list, and the first column chunk's ``file_offset`` (field 2), whose
    value the decoded footer gives. A writer that puts a ``file_path`` first, or any start
    not found, falls back to the walk; only the last group is always walked, to its end."""
    if n == 0:
        return [first]
    lead = b"\x00\x19" + _list_header(meta.num_columns)
    starts = [first]
    for g in range(1, n):
        sign = lead + b"\x26" + varint(_zigzag(meta.row_group(g).column(0).file_offset))
        at = raw.find(sign, starts[-1])
        if at < 0:
            return _walked_starts(raw, first, n)
        starts.append(at + 1)
    try:
        _, end = _row_group(raw, starts[-1])
    except (ValueError, IndexError):  # a start found inside a value: see compact()
        return _walked_starts(raw, first, n)
    return starts + [end]


def _walked_starts(raw: bytes, pos: int, n: int) -> list[int]:
    """:func:`_group_starts` by walking every field of every group."""
    starts = [pos]
    for _ in range(n):
        _, pos = _row_group(raw, pos)
        starts.append(pos)
    return starts


def _row_group(raw: bytes, pos: int) -> tuple[int, int]:
    """The ``num_rows`` (field 3) of the RowGroup struct at ``pos``, and the position after it."""
    fid, rows = 0, -1
    while True:
        byte = raw[pos]
        pos += 1
        ftype = byte & 0x0F
        if ftype == 0:
            if rows < 0:
                raise ValueError("a Parquet row group without num_rows")
            return rows, pos
        if byte >> 4:
            fid += byte >> 4
        else:
            fid, pos = read_zigzag(raw, pos)
        if fid == 3 and ftype == 6:
            rows, pos = read_zigzag(raw, pos)
        else:
            pos = _skip(raw, pos, ftype)


# -- Thrift compact protocol --------------------------------------------------------------
def read_varint(raw: bytes, pos: int) -> tuple[int, int]:
    """An unsigned varint at ``pos``, and the position after it."""
    out = shift = 0
    while True:
        b = raw[pos]
        pos += 1
        out |= (b & 0x7F) << shift
        if b < 0x80:
            return out, pos
        shift += 7


def read_zigzag(raw: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint (Thrift compact's i16, i32, i64) at ``pos``, and the position after it."""
    n, pos = read_varint(raw, pos)
    return (n >> 1) ^ -(n & 1), pos


def varint(n: int) -> bytes:
    """``n`` (unsigned) as a varint."""
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _zigzag(n: int) -> int:
    return (n << 1) ^ (n >> 63)


def _list_header(size: int, etype: int = 12) -> bytes:
    return bytes([(size << 4) | etype]) if size < 15 else bytes([0xF0 | etype]) + varint(size)


def _list_start(raw: bytes, pos: int) -> tuple[int, int, int]:
    byte = raw[pos]
    pos += 1
    size = byte >> 4
    if size == 15:
        size, pos = read_varint(raw, pos)
    return size, byte & 0x0F, pos


_FIXED = {1: 0, 2: 0, 3: 1, 7: 8}
"""Compact types of a fixed size in a struct field: booleans (in the type), byte, double."""


def _skip(raw: bytes, pos: int, ftype: int) -> int:
    """The position after a value of compact type ``ftype`` at ``pos``."""
    if ftype in (4, 5, 6):  # i16, i32, i64: varints
        while raw[pos] & 0x80:
            pos += 1
        return pos + 1
    if ftype == 8:  # binary: length, bytes
        n, pos = read_varint(raw, pos)
        return pos + n
    if ftype == 12:  # struct: fields until STOP
        while True:
            byte = raw[pos]
            pos += 1
            if byte == 0:
                return pos
            if not byte >> 4:  # a long-form field id follows
                while raw[pos] & 0x80:
                    pos += 1
                pos += 1
            pos = _skip(raw, pos, byte & 0x0F)
    if ftype in (9, 10):  # list, set
        size, etype, pos = _list_start(raw, pos)
        if etype in (1, 2):  # booleans in a list take a byte each
            return pos + size
        for _ in range(size):
            pos = _skip(raw, pos, etype)
        return pos
    if ftype == 11:  # map
        size, pos = read_varint(raw, pos)
        if size == 0:
            return pos
        kv = raw[pos]
        pos += 1
        for _ in range(size):
            pos = _skip(raw, pos, kv >> 4)
            pos = _skip(raw, pos, kv & 0x0F)
        return pos
    if ftype in _FIXED:
        return pos + _FIXED[ftype]
    raise ValueError(f"a Parquet footer with an unknown Thrift type {ftype}")
