"""Delta deletion vectors: the descriptor, the bitmap codec, Z85, and the DV file framing.

Everything here follows the "Deletion Vectors" and "Deletion Vector Format" sections of
Delta's PROTOCOL.md (docs/PROTOCOL.md, "Deletion vectors", says what indexeddf does with
them). Nothing here does I/O; ``format/deletion_vectors.py`` reads and writes the files.

- A deletion vector (DV) is a set of row indexes (0-based ordinals of rows in one
  Parquet data file) that are no longer in the table.
- Serialized, it is a ``RoaringBitmapArray``: the magic number 1681511377 (4 bytes,
  little endian), then a 64-bit roaring bitmap in the RoaringFormatSpec's "portable"
  form (an 8-byte bucket count, then per bucket, ascending, the 4-byte high half of the
  row indexes and the 32-bit portable roaring bitmap of their low halves). Every key's
  most significant bit is 0 (Java reads keys signed), so row indexes stay below 2**63.
- A DV file starts with a version byte (1); each DV in it is framed as a 4-byte
  big-endian size, the serialized DV (magic included), and a 4-byte big-endian CRC-32
  of those serialized bytes. A descriptor's ``offset`` points at the size field.
- A descriptor (``add.deletionVector``, ``remove.deletionVector``) says where the DV is:
  inline in the log (``i``, Z85 text), in ``deletion_vector_<uuid>.bin`` under the table
  root (``u``, the uuid Z85-encoded after an optional random prefix folder), or at an
  absolute path (``p``).
"""

from __future__ import annotations

import functools
import struct
import uuid as uuidlib
import zlib
from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, model_validator
from pydantic import Field as PField
from pyroaring import BitMap64

from .arrays import distinct

MAGIC_NUMBER = 1681511377
"""First 4 bytes (little endian) of a serialized DV in the portable format."""
NATIVE_MAGIC_NUMBER = 1681511376
"""Delta Spark's older "native" layout; not in the protocol, refused by name when read."""
FILE_FORMAT_VERSION = 1
"""The version byte that starts a DV file."""
FIRST_OFFSET = 1
"""Offset of the first DV in a file (right after the version byte); also what an absent
``offset`` of an on-disk DV means."""
FILE_NAME_PREFIX = "deletion_vector_"
"""What a DV file's name starts with (then the uuid, then ``.bin``)."""
ENCODED_UUID_LENGTH = 20
"""A uuid's 16 bytes are 20 Z85 characters; a ``u`` path's random prefix is what comes before."""
MAX_ROW_INDEX = 2**63 - 1
"""The largest row index a DV can hold (keys keep their top bit 0)."""
_FRAME_OVERHEAD = 8  # the size field and the checksum around each DV in a file

_Int32 = Annotated[int, PField(ge=0, le=2**31 - 1)]  # Delta's Int fields (Java ints)
_Int64 = Annotated[int, PField(ge=0, le=2**63 - 1)]


class DeletionVectorDecodeError(ValueError):
    """Bytes or text that are not a valid DV; the format layer turns it into
    :class:`indexeddf.errors.CorruptDeletionVectorError` naming where they came from."""


# -- Z85 ------------------------------------------------------------------------------------

Z85_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
"""ZeroMQ's Z85 alphabet (rfc.zeromq.org/spec/32), which Delta uses for its base85."""
_ENCODE = np.frombuffer(Z85_ALPHABET.encode("ascii"), dtype=np.uint8)
_DECODE = np.full(256, 255, dtype=np.uint8)
_DECODE[_ENCODE] = np.arange(85, dtype=np.uint8)
_POWERS = np.array([85**4, 85**3, 85**2, 85, 1], dtype=np.uint64)


def z85_encode(data: bytes) -> str:
    """Z85 text of ``data``. Input whose length is not a multiple of 4 is padded with
    zero bytes first, as Delta's ``Base85Codec.encodeBytes`` does (the reader cuts the
    padding off with the descriptor's ``sizeInBytes``)."""
    padded = bytes(data) + b"\0" * (-len(data) % 4)
    words = np.frombuffer(padded, dtype=">u4").astype(np.uint64)
    digits = (words[:, None] // _POWERS) % 85
    return _ENCODE[digits.astype(np.intp)].tobytes().decode("ascii")


def z85_decode(text: str, size: int | None = None) -> bytes:
    """The bytes of Z85 ``text`` (a multiple of 5 characters), cut to ``size`` bytes when
    given (the padding :func:`z85_encode` added). Raises :class:`DeletionVectorDecodeError`."""
    try:
        raw = text.encode("ascii")
    except UnicodeEncodeError:
        raise DeletionVectorDecodeError("Z85 text holds a non-ASCII character") from None
    if len(raw) % 5:
        raise DeletionVectorDecodeError(f"Z85 text must be a multiple of 5 characters, got {len(raw)}")
    values = _DECODE[np.frombuffer(raw, dtype=np.uint8)]
    if (values == 255).any():
        raise DeletionVectorDecodeError("Z85 text holds a character outside the Z85 alphabet")
    words = values.reshape(-1, 5).astype(np.uint64) @ _POWERS
    if (words > 0xFFFFFFFF).any():
        raise DeletionVectorDecodeError("Z85 text holds a group worth more than 32 bits")
    out = words.astype(">u4").tobytes()
    if size is not None:
        if not 0 <= size <= len(out):
            raise DeletionVectorDecodeError(f"Z85 text holds {len(out)} bytes, fewer than the {size} expected")
        out = out[:size]
    return out


def encode_uuid(value: uuidlib.UUID) -> str:
    """The 20-character Z85 form of a uuid (its 16 bytes, most significant first)."""
    return z85_encode(value.bytes)


@functools.lru_cache(maxsize=4096)
def decode_uuid(text: str) -> uuidlib.UUID:
    """The uuid of a 20-character Z85 string (cached: a scan names each DV file's uuid
    once a file, and hundreds of files share a few DV files)."""
    if len(text) != ENCODED_UUID_LENGTH:
        raise DeletionVectorDecodeError(f"an encoded uuid has {ENCODED_UUID_LENGTH} characters, got {len(text)}")
    return uuidlib.UUID(bytes=z85_decode(text))


# -- the bitmap codec -----------------------------------------------------------------------


def _as_row_indexes(rows) -> np.ndarray:
    """``rows`` (a numpy array or any iterable of ints) as a flat uint64 array, refused
    with ``TypeError`` / ``ValueError`` unless every value is an int in [0, 2**64)."""
    arr = np.asarray(rows)
    if arr.size == 0:
        return np.empty(0, dtype=np.uint64)
    if arr.dtype.kind not in "iu":  # floats, or Python ints past uint64 / mixed (object)
        raise TypeError(f"row indexes must be integers that fit in 64 bits, got {arr.dtype}")
    if arr.dtype.kind == "i" and arr.min() < 0:
        raise ValueError("row indexes must not be negative")
    return arr.astype(np.uint64, copy=False).ravel()


def unique_sorted(rows: np.ndarray) -> np.ndarray:
    """``np.unique(rows)``, in one pass when ``rows`` already increase strictly: a change's row
    ordinals arrive in file order from a join that reads the file in order, and ``np.unique``
    sorts (about 40 ms for a file's 60,000 changed rows)."""
    if len(rows) < 2 or bool((rows[1:] > rows[:-1]).all()):
        return rows
    return distinct(rows)


def to_bitmap(rows) -> BitMap64:
    """The row indexes ``rows`` (a numpy integer array, a ``pyroaring.BitMap64`` or any
    iterable of ints; duplicates collapse, order does not matter) as a new bitmap,
    checked to fit a DV, with run containers where they are smaller."""
    bitmap = rows.copy() if isinstance(rows, BitMap64) else BitMap64(_as_row_indexes(rows))
    if bitmap and bitmap.max() > MAX_ROW_INDEX:
        raise ValueError(f"a row index above {MAX_ROW_INDEX} cannot be stored (Delta keys are signed)")
    bitmap.run_optimize()  # run containers for dense ranges: what a DELETE of a range produces
    return bitmap


def serialize(rows) -> bytes:
    """The serialized DV (RoaringBitmapArray, portable format, magic number first) of the
    row indexes ``rows`` (anything :func:`to_bitmap` takes)."""
    bitmap = to_bitmap(rows)
    # pyroaring's BitMap64.serialize is the portable 64-bit format (CRoaring's
    # roaring64_bitmap_portable_serialize): bucket count, then key + 32-bit bitmap each.
    return struct.pack("<I", MAGIC_NUMBER) + bitmap.serialize()


def deserialize(data: bytes) -> np.ndarray:
    """The sorted row indexes (uint64) of a serialized DV. Raises
    :class:`DeletionVectorDecodeError` when the bytes are not a portable RoaringBitmapArray."""
    if len(data) < 12:
        raise DeletionVectorDecodeError(f"a serialized DV has at least 12 bytes, got {len(data)}")
    (magic,) = struct.unpack_from("<I", data)
    if magic == NATIVE_MAGIC_NUMBER:
        raise DeletionVectorDecodeError(
            "the DV is in Delta Spark's native RoaringBitmapArray layout, which the protocol does not "
            f"define; only the portable layout (magic number {MAGIC_NUMBER}) is read")
    if magic != MAGIC_NUMBER:
        raise DeletionVectorDecodeError(f"unknown magic number {magic} (a DV starts with {MAGIC_NUMBER})")
    (buckets,) = struct.unpack_from("<Q", data, 4)
    # Bucket keys are 4 bytes each and read before any bitmap: check them first, so a
    # damaged count or a key with its top bit set is named as such.
    if buckets and buckets * 12 > len(data) - 12:
        raise DeletionVectorDecodeError(f"the DV claims {buckets} buckets, more than its {len(data)} bytes hold")
    try:
        bitmap = BitMap64.deserialize(bytes(data[4:]))
    except ValueError as e:
        raise DeletionVectorDecodeError(f"not a portable 64-bit roaring bitmap ({e})") from None
    rows = np.frombuffer(bitmap.to_array(), dtype=np.uint64)
    if rows.size and int(rows[-1]) > MAX_ROW_INDEX:
        raise DeletionVectorDecodeError("a bucket key has its most significant bit set (Delta keys are signed)")
    return rows


# -- the file framing -----------------------------------------------------------------------


def checksum(serialized: bytes) -> int:
    """CRC-32 (ISO HDLC, Java's ``java.util.zip.CRC32``) of a serialized DV."""
    return zlib.crc32(serialized) & 0xFFFFFFFF


def file_bytes(serialized: list[bytes]) -> tuple[bytes, list[int]]:
    """A DV file holding the serialized DVs in order, and the offset of each (where its
    size field starts): the version byte, then per DV its big-endian size, the bytes and
    the big-endian CRC-32 of the bytes."""
    parts, offsets, at = [bytes([FILE_FORMAT_VERSION])], [], FIRST_OFFSET
    for data in serialized:
        offsets.append(at)
        parts += [struct.pack(">I", len(data)), data, struct.pack(">I", checksum(data))]
        at += len(data) + _FRAME_OVERHEAD
    return b"".join(parts), offsets


def frame_length(size_in_bytes: int) -> int:
    """Bytes one framed DV of ``size_in_bytes`` takes in a file (size field and CRC included)."""
    return size_in_bytes + _FRAME_OVERHEAD


def unframe(frame: bytes, size_in_bytes: int) -> bytes:
    """The serialized DV of one framed DV (the :func:`frame_length` bytes at its offset),
    after checking the size field against the descriptor's and the CRC-32."""
    if len(frame) < frame_length(size_in_bytes):
        raise DeletionVectorDecodeError(
            f"the file ends {frame_length(size_in_bytes) - len(frame)} bytes before the DV does (truncated)")
    (stored_size,) = struct.unpack_from(">I", frame)
    if stored_size != size_in_bytes:
        raise DeletionVectorDecodeError(
            f"the file says the DV has {stored_size} bytes, the log says {size_in_bytes}")
    data = bytes(frame[4:4 + size_in_bytes])
    (stored_crc,) = struct.unpack_from(">I", frame, 4 + size_in_bytes)
    if stored_crc != checksum(data):
        raise DeletionVectorDecodeError(
            f"CRC-32 mismatch: the file holds {stored_crc:#010x}, the DV's bytes give {checksum(data):#010x}")
    return data


def check_file_version(first_byte: bytes) -> None:
    """Refuse a DV file whose version byte is not :data:`FILE_FORMAT_VERSION`."""
    if first_byte != bytes([FILE_FORMAT_VERSION]):
        got = first_byte[0] if first_byte else "nothing (empty file)"
        raise DeletionVectorDecodeError(f"the file's format version is {got}, not {FILE_FORMAT_VERSION}")


# -- the descriptor -------------------------------------------------------------------------


def file_name(value: uuidlib.UUID) -> str:
    """The name of the DV file of a uuid: ``deletion_vector_<uuid>.bin``."""
    return f"{FILE_NAME_PREFIX}{value}.bin"


class DeletionVectorDescriptor(BaseModel):
    """Where a DV is and what it holds: Delta's ``DeletionVectorDescriptor`` struct, with
    its wire names (``add.deletionVector`` / ``remove.deletionVector``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    storageType: Literal["u", "i", "p"]
    """``u``: a file under the table root named by a uuid; ``i``: inline; ``p``: an absolute path."""
    pathOrInlineDv: str
    """``u``: an optional random prefix, then the Z85 uuid (20 characters); ``i``: the
    Z85 of the serialized DV; ``p``: the file's absolute path (a URI, as ``add.path``)."""
    offset: _Int32 | None = None
    """Where the DV's size field starts in its file; None for inline (1 when absent on disk)."""
    sizeInBytes: _Int32
    """Bytes of the serialized DV (before Z85 when inline)."""
    cardinality: _Int64
    """Rows the DV removes from its data file."""

    @model_validator(mode="after")
    def _consistent(self) -> "DeletionVectorDescriptor":
        if self.storageType == "i" and self.offset is not None:
            raise ValueError("an inline deletion vector has no offset")
        if self.storageType == "u" and len(self.pathOrInlineDv) < ENCODED_UUID_LENGTH:
            raise ValueError(f"a 'u' pathOrInlineDv ends in a {ENCODED_UUID_LENGTH}-character Z85 uuid")
        return self

    # -- constructors --------------------------------------------------------------
    @classmethod
    def in_file(cls, file_id: uuidlib.UUID, offset: int, size_in_bytes: int, cardinality: int,
                prefix: str = "") -> "DeletionVectorDescriptor":
        """A ``u`` descriptor: the DV at ``offset`` of ``[prefix/]deletion_vector_<file_id>.bin``."""
        return cls(storageType="u", pathOrInlineDv=prefix + encode_uuid(file_id), offset=offset,
                   sizeInBytes=size_in_bytes, cardinality=cardinality)

    @classmethod
    def inline(cls, serialized: bytes, cardinality: int) -> "DeletionVectorDescriptor":
        """An ``i`` descriptor carrying the serialized DV in the log (Z85)."""
        return cls(storageType="i", pathOrInlineDv=z85_encode(serialized),
                   sizeInBytes=len(serialized), cardinality=cardinality)

    # -- derived fields ------------------------------------------------------------
    @property
    def unique_id(self) -> str:
        """Delta's ``uniqueId``: ``<storageType><pathOrInlineDv>``, then ``@<offset>`` when
        an offset is present. Two descriptors name the same DV exactly when these match."""
        base = f"{self.storageType}{self.pathOrInlineDv}"
        return base if self.offset is None else f"{base}@{self.offset}"

    @property
    def is_inline(self) -> bool:
        """Whether the DV is in the log itself."""
        return self.storageType == "i"

    @property
    def file_offset(self) -> int:
        """Where the DV starts in its file (an absent offset means the first DV)."""
        if self.is_inline:
            raise ValueError("an inline deletion vector is in no file")
        return FIRST_OFFSET if self.offset is None else self.offset

    @property
    def random_prefix(self) -> str:
        """The random prefix of a ``u`` path (a folder under the table root; often empty)."""
        self._require("u")
        return self.pathOrInlineDv[:-ENCODED_UUID_LENGTH]

    @property
    def file_uuid(self) -> uuidlib.UUID:
        """The uuid in a ``u`` DV's file name."""
        self._require("u")
        return decode_uuid(self.pathOrInlineDv[-ENCODED_UUID_LENGTH:])

    @property
    def relative_path(self) -> str:
        """A ``u`` DV's file relative to the table root: ``[<prefix>/]deletion_vector_<uuid>.bin``."""
        name = file_name(self.file_uuid)
        return f"{self.random_prefix}/{name}" if self.random_prefix else name

    def absolute_path(self, table_root: str) -> str:
        """The DV file's absolute path: ``<table_root>/<relative_path>`` for ``u``, the
        stored URI for ``p``. Inline DVs have none (ValueError)."""
        if self.storageType == "u":
            return f"{table_root.rstrip('/')}/{self.relative_path}"
        if self.storageType == "p":
            return self.pathOrInlineDv
        raise ValueError("an inline deletion vector has no path")

    @property
    def inline_data(self) -> bytes:
        """The serialized DV of an inline descriptor (Z85 padding cut off)."""
        self._require("i")
        return z85_decode(self.pathOrInlineDv, self.sizeInBytes)

    def wire(self) -> dict:
        """The descriptor as Delta's JSON object (``offset`` omitted when None)."""
        return self.model_dump(exclude_none=True)

    def _require(self, storage_type: str) -> None:
        if self.storageType != storage_type:
            raise ValueError(f"only a {storage_type!r} deletion vector has this field, not {self.storageType!r}")
