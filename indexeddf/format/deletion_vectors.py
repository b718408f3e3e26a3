"""Reading and writing Delta deletion vectors (DVs) in a table's storage.

The bytes are Delta's (``spec/deletion_vectors.py`` has the codec and the framing): a
DV is read inline from its descriptor, from ``[<prefix>/]deletion_vector_<uuid>.bin``
under the table root (``u``) or from an absolute path (``p``); each read checks the file
version byte, the size the file gives against the descriptor's, the CRC-32 and the
cardinality, and raises :class:`CorruptDeletionVectorError` naming the file otherwise.

Writing follows Delta's writers: the DVs of one operation go into one new file, each at
its offset. A small DV may instead be inlined in the log (the protocol allows it):
:func:`write_deletion_vectors` inlines those whose serialized size is at most
``inline_max_bytes`` (0, the default, writes them all to the file, as Delta Spark does;
:data:`INLINE_MAX_BYTES` is the threshold to pass to inline the small ones).

A data file's logical rows are its rows minus the DV's ordinals: :func:`keep_mask`.
"""

from __future__ import annotations

import uuid
from typing import Iterable, Sequence
from urllib.parse import unquote, urlsplit

import fsspec
import numpy as np

from ..errors import CorruptDeletionVectorError, MissingFileError
from ..spec import deletion_vectors as dvspec
from ..spec.deletion_vectors import DeletionVectorDecodeError, DeletionVectorDescriptor
from .storage import TableStorage

INLINE_MAX_BYTES = 128
"""The inline threshold to pass to :func:`write_deletion_vectors`: a DV of at most this
many serialized bytes (about 45 scattered rows, or any number of rows in a few ranges) is
stored in the log. Its Z85 text (5/4 of the bytes, so 160 characters) is about as long as
the ``u`` descriptor that would name a file, so the log does not grow for it, and the
read and the write of a DV file are saved. Larger DVs go to files: every replay and
checkpoint carries an inline DV."""

_WHAT_TO_DO = ("the deletion vector was damaged or replaced outside Delta; restore the file from a backup, "
               "or read (or RESTORE the table to) a version before the one that added it")


_ONE_READ_BYTES = 1 << 16
"""A DV whose frame ends within this many bytes of its file's start is read with the
file's version byte in one read."""


def _source(storage: TableStorage, d: DeletionVectorDescriptor) -> tuple[fsspec.AbstractFileSystem, str]:
    """The filesystem and path of an on-disk DV's file."""
    if d.storageType == "u":
        return storage.fs, storage.full(d.relative_path)
    # 'p' holds a URI, as add.path does: percent-decode it; a file: URI is a local path.
    parts = urlsplit(d.pathOrInlineDv)
    if parts.scheme in ("", "file"):
        return fsspec.filesystem("file"), unquote(parts.path)
    fs, path = fsspec.core.url_to_fs(unquote(d.pathOrInlineDv), **storage.storage_options)
    return fs, path


def _read_range(fs: fsspec.AbstractFileSystem, path: str, start: int, length: int) -> bytes:
    """``length`` bytes of a file from ``start`` (fewer at its end); a missing file is
    :class:`MissingFileError` naming it."""
    try:
        return fs.cat_file(path, start=start, end=start + length)
    except FileNotFoundError:
        raise MissingFileError(
            f"{path}: the deletion vector file the log names is missing. It was deleted outside Delta, or by "
            "a vacuum of versions older than the retention: read a newer version, or restore the file."
        ) from None


def _where(storage: TableStorage, d: DeletionVectorDescriptor) -> tuple[str, str | None]:
    """How an error names a DV, and its file (None for an inline one)."""
    if d.is_inline:
        return f"{storage.url}: an inline deletion vector in the log", None
    try:
        path = _source(storage, d)[1]
    except DeletionVectorDecodeError as e:  # a 'u' path whose uuid is not Z85
        raise _corrupt(f"{storage.url}: the deletion vector {d.unique_id!r}", e, None) from None
    return f"{path} (deletion vector at offset {d.file_offset})", path


def read_serialized(storage: TableStorage, d: DeletionVectorDescriptor) -> bytes:
    """The serialized DV a descriptor names, its file's version byte, size field and
    CRC-32 checked (inline: the Z85 text decoded)."""
    try:
        if d.is_inline:
            return d.inline_data
        fs, path = _source(storage, d)
        # One read from the file's start when the frame is near it (the version byte comes
        # with it), else two: a change's DVs share a file, and each read opens it.
        end = d.file_offset + dvspec.frame_length(d.sizeInBytes)
        if end <= _ONE_READ_BYTES:
            head = _read_range(fs, path, 0, end)
            dvspec.check_file_version(head[:1])
            frame = head[d.file_offset:]
        else:
            dvspec.check_file_version(_read_range(fs, path, 0, 1))
            frame = _read_range(fs, path, d.file_offset, end - d.file_offset)
        return dvspec.unframe(frame, d.sizeInBytes)
    except DeletionVectorDecodeError as e:
        where, path = _where(storage, d)  # named only when something is wrong: it decodes the uuid
        raise _corrupt(where, e, path) from None


def read_deletion_vector(storage: TableStorage, d: DeletionVectorDescriptor) -> np.ndarray:
    """The sorted row indexes (uint64) a descriptor's DV deletes from its data file,
    checked against the descriptor's cardinality."""
    data = read_serialized(storage, d)
    try:
        rows = dvspec.deserialize(data)
    except DeletionVectorDecodeError as e:
        where, path = _where(storage, d)
        raise _corrupt(where, e, path) from None
    if len(rows) != d.cardinality:
        where, path = _where(storage, d)
        raise _corrupt(where, f"it holds {len(rows)} row indexes, the log's cardinality says {d.cardinality}", path)
    return rows


def _corrupt(where: str, cause: object, path: str | None) -> CorruptDeletionVectorError:
    return CorruptDeletionVectorError(f"{where}: {cause}; {_WHAT_TO_DO}", path)


def inline_descriptor(rows) -> DeletionVectorDescriptor:
    """An inline (``i``) descriptor holding the DV of ``rows`` in the log itself; meant
    for small DVs (see :data:`INLINE_MAX_BYTES`)."""
    bitmap = dvspec.to_bitmap(rows)
    return DeletionVectorDescriptor.inline(dvspec.serialize(bitmap), len(bitmap))


def write_deletion_vectors(storage: TableStorage, deleted: Sequence[Iterable[int] | np.ndarray], *,
                           prefix: str = "", inline_max_bytes: int = 0) -> list[DeletionVectorDescriptor]:
    """Write the DVs of ``deleted`` (one set of row indexes per data file) and return
    their descriptors, in the same order.

    DVs whose serialized size is at most ``inline_max_bytes`` are inlined; the others go,
    each at its own offset, into one new file ``[<prefix>/]deletion_vector_<uuid>.bin``
    under the table root (none is written when nothing goes to a file). ``prefix`` is
    Delta's optional random prefix: a folder name of letters and digits."""
    if prefix and not prefix.isalnum():
        raise ValueError(f"a deletion vector prefix is a folder name of letters and digits, got {prefix!r}")
    bitmaps = [dvspec.to_bitmap(rows) for rows in deleted]
    serialized = [dvspec.serialize(b) for b in bitmaps]
    out: list[DeletionVectorDescriptor | None] = [
        DeletionVectorDescriptor.inline(data, len(b)) if len(data) <= inline_max_bytes else None
        for data, b in zip(serialized, bitmaps)
    ]
    to_file = [i for i, d in enumerate(out) if d is None]
    if to_file:
        file_id = uuid.uuid4()
        content, offsets = dvspec.file_bytes([serialized[i] for i in to_file])
        rel = f"{prefix}/{dvspec.file_name(file_id)}" if prefix else dvspec.file_name(file_id)
        storage.write_bytes(rel, content)  # a fresh uuid: no other writer can name this file
        for i, offset in zip(to_file, offsets):
            out[i] = DeletionVectorDescriptor.in_file(file_id, offset, len(serialized[i]), len(bitmaps[i]), prefix)
    return out  # type: ignore[return-value]


def keep_mask(num_rows: int, deleted: np.ndarray) -> np.ndarray:
    """A boolean mask over a data file's ``num_rows`` rows: True for the rows its DV
    (``deleted``, row ordinals) leaves in the table. A DV naming a row past the file's
    end is :class:`CorruptDeletionVectorError` (it was written for another file)."""
    deleted = np.asarray(deleted, dtype=np.uint64)
    if deleted.size and int(deleted.max()) >= num_rows:
        raise CorruptDeletionVectorError(
            f"a deletion vector deletes row {int(deleted.max())} of a data file of {num_rows} rows; "
            f"it does not belong to that file: {_WHAT_TO_DO}")
    mask = np.ones(num_rows, dtype=bool)
    mask[deleted.astype(np.intp)] = False
    return mask
