"""Table storage on fsspec, with the one primitive commits need: put-if-absent.

Contract of :meth:`TableStorage.put_if_absent` (the only mutual exclusion of the
format): the file appears whole or not at all, and of two writers of the same path
exactly one succeeds.

- Local disks: the bytes go to a temporary file in the same folder, are flushed to
  disk, then hard-linked to the final name. ``link`` fails when the name exists, and
  a reader never sees a half-written file (the temporary name is not a log name).
- ``memory://`` (tests): a process-wide lock around exists-then-write.
- Other fsspec filesystems: an exclusive create, which object stores implement with
  a conditional put (S3 ``If-None-Match: *``, GCS ``ifGenerationMatch=0``, Azure
  ``If-None-Match``). On S3 the put goes straight to the endpoint (``pipe_file`` with
  ``mode="create"``: no existence check that a stale view could answer); elsewhere an
  exclusive-create open (``mode="xb"``).

Before the first write to an object store, :meth:`TableStorage.check_conditional_put`
proves that the endpoint honours the condition (a probe object, created twice; the
second must be refused) and raises :class:`UnsupportedStorageError` otherwise: an
endpoint that silently ignored it would let two writers win one version.

Object stores are opened without fsspec's listings cache (``use_listings_cache=False``,
unless the storage options say otherwise): a writer that lost a race must see the
winner's commit, and a cached listing of the log folder hid it.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from typing import Any, Callable

import fsspec
import pyarrow as pa
import pyarrow.fs as pafs
from fsspec.implementations.local import LocalFileSystem
from fsspec.implementations.memory import MemoryFileSystem

from ..errors import UnsupportedStorageError

_MEMORY_LOCK = threading.Lock()
_CHECKED_LOCK = threading.Lock()
_CHECKED: set[tuple[str, str]] = set()
"""(filesystem instance token, bucket) pairs whose conditional put this process proved."""
PROBE_PREFIX = ".indexeddf-probe-"
"""Name of the short-lived object the conditional-put check writes at the table root."""


class TableStorage:
    """A table root on some fsspec filesystem; paths below are relative to the root."""

    def __init__(self, url: str, storage_options: dict[str, Any] | None = None):
        self.url = str(url)
        self.storage_options = dict(storage_options or {})
        fs, root = fsspec.core.url_to_fs(self.url, **_open_options(self.url, self.storage_options))
        self.fs: fsspec.AbstractFileSystem = fs
        self.root: str = root.rstrip("/") if root != "/" else root
        self.is_local = isinstance(fs, LocalFileSystem)
        self.is_object_store = not self.is_local and not isinstance(fs, MemoryFileSystem)

    # -- paths -------------------------------------------------------------------
    def full(self, rel: str) -> str:
        """The filesystem path of a path relative to the table root."""
        return f"{self.root}/{rel}" if rel else self.root

    def arrow_filesystem(self) -> pafs.FileSystem:
        """A pyarrow filesystem for the same storage (native for local disks)."""
        if self.is_local:
            return pafs.LocalFileSystem()
        return pafs.PyFileSystem(pafs.FSSpecHandler(self.fs))

    # -- reads -------------------------------------------------------------------
    def read_bytes(self, rel: str) -> bytes:
        """The whole content of a file; ``FileNotFoundError`` when absent."""
        if self.is_local:
            with open(self.full(rel), "rb") as f:
                return f.read()
        return self.fs.cat_file(self.full(rel))

    def exists(self, rel: str) -> bool:
        """Whether the file or folder exists."""
        return self.fs.exists(self.full(rel))

    def modified_ms(self, rel: str) -> int | None:
        """A file's modification time in ms since the epoch (None when the store does
        not say)."""
        if self.is_local:
            return int(os.stat(self.full(rel)).st_mtime * 1000)
        info = self.fs.info(self.full(rel))
        value = info.get("mtime") or info.get("LastModified") or info.get("last_modified")
        if value is None:
            return None
        if hasattr(value, "timestamp"):
            return int(value.timestamp() * 1000)
        return int(float(value) * 1000)

    def list_names(self, rel_dir: str) -> list[str]:
        """The names (not paths) of the entries of a folder; empty when it is missing."""
        if self.is_local:
            try:
                return os.listdir(self.full(rel_dir))
            except FileNotFoundError:
                return []
        try:
            entries = self.fs.ls(self.full(rel_dir), detail=False)
        except FileNotFoundError:
            return []
        return [e.rstrip("/").rsplit("/", 1)[-1] for e in entries]

    # -- writes ------------------------------------------------------------------
    def write_bytes(self, rel: str, data: bytes) -> None:
        """Create or replace a file (data files, whose names are unique, and hints)."""
        path = self.full(rel)
        self.check_conditional_put()
        if self.is_local:
            with _open_local(path) as f:
                f.write(data)
            return
        parent = path.rsplit("/", 1)[0]
        self.fs.makedirs(parent, exist_ok=True)
        self.fs.pipe_file(path, data)

    def open_output(self, rel: str):
        """A new file opened for writing in pieces (a data file streamed a row group at a
        time; object stores upload it in parts); its name is unique, as data files' are."""
        path = self.full(rel)
        self.check_conditional_put()
        if self.is_local:
            return _open_local(path, native=True)
        self.fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
        return self.fs.open(path, "wb")

    def replace_atomically(self, rel: str, data: bytes) -> None:
        """Replace a small file so readers see the old or the new content, never a mix."""
        if not self.is_local:
            self.write_bytes(rel, data)  # object-store puts are atomic per object
            return
        path = self.full(rel)
        tmp = f"{path}.{uuid.uuid4().hex}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)

    def put_if_absent(self, rel: str, data: bytes) -> bool:
        """Create the file with ``data`` unless it exists; True when this call created it."""
        path = self.full(rel)
        if self.is_local:
            return _local_put_if_absent(path, data)
        if isinstance(self.fs, MemoryFileSystem):
            with _MEMORY_LOCK:
                if self.fs.exists(path):
                    return False
                self.write_bytes(rel, data)
                return True
        self.check_conditional_put()
        return self._create_exclusively(path, data)

    def _create_exclusively(self, path: str, data: bytes) -> bool:
        """One conditional put of an object store; False when the object exists."""
        try:
            self.fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
            _exclusive_writer(self.fs)(path, data)
            return True
        except FileExistsError:
            return False
        except (NotImplementedError, ValueError, TypeError) as e:
            raise UnsupportedStorageError(
                f"{type(self.fs).__name__} cannot create {path} exclusively ({e}); commits "
                "need an atomic put-if-absent. Use a local path or an object store whose "
                "fsspec driver supports conditional puts (mode='xb')."
            ) from e

    def check_conditional_put(self) -> None:
        """Prove, once per process and bucket, that this object store refuses to create
        an object that exists (the conditional put commits rely on); raise
        ``UnsupportedStorageError`` before anything of the table is written otherwise."""
        if not self.is_object_store:
            return
        key = (str(getattr(self.fs, "_fs_token", id(self.fs))), self.root.split("/", 1)[0])
        with _CHECKED_LOCK:
            if key in _CHECKED:
                return
        probe = self.full(f"{PROBE_PREFIX}{uuid.uuid4().hex}")
        try:
            if not self._create_exclusively(probe, b"1"):
                raise UnsupportedStorageError(f"{self.url}: a new probe object {probe} already existed")
            if self._create_exclusively(probe, b"2"):
                raise UnsupportedStorageError(
                    f"{self.url}: the endpoint overwrote an existing object although the write was "
                    "conditional (If-None-Match: *). Commits need that condition honoured, or two "
                    "writers could both win a version. Use an endpoint with conditional writes "
                    "(AWS S3 has them since 2024; MinIO, Ceph RGW and moto have them too)."
                )
        finally:
            try:
                self.fs.rm_file(probe)
            except FileNotFoundError:
                pass
        with _CHECKED_LOCK:
            _CHECKED.add(key)

    def delete(self, rel: str) -> None:
        """Delete a file; a missing file is not an error."""
        try:
            if self.is_local:
                os.remove(self.full(rel))
            else:
                self.fs.rm_file(self.full(rel))
        except FileNotFoundError:
            pass


def frozen_options(options: dict[str, Any]) -> str:
    """Storage options as a hashable, picklable key (canonical JSON; they may nest,
    e.g. s3fs's ``client_kwargs``). :func:`thawed_options` inverts it."""
    return json.dumps(options, sort_keys=True, default=str)


def thawed_options(key: str) -> dict[str, Any]:
    """The storage options a :func:`frozen_options` key stands for."""
    return json.loads(key)


def _open_options(url: str, options: dict[str, Any]) -> dict[str, Any]:
    """Storage options for opening ``url``: object stores list without a cache."""
    scheme = url.split("://", 1)[0].lower() if "://" in url else "file"
    if scheme in ("file", "local", "memory"):
        return options
    return {"use_listings_cache": False, **options}


def _exclusive_writer(fs: fsspec.AbstractFileSystem) -> Callable[[str, bytes], None]:
    """How ``fs`` creates an object only if it is absent (raises FileExistsError)."""
    if type(fs).__name__ == "S3FileSystem":
        # One PutObject with If-None-Match: *, straight to the endpoint.
        return lambda path, data: fs.pipe_file(path, data, mode="create")

    def via_open(path: str, data: bytes) -> None:
        with fs.open(path, "xb") as f:
            f.write(data)

    return via_open


def _local_put_if_absent(path: str, data: bytes) -> bool:
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    # A dot-name is never a log name, so readers ignore a temporary file left by a crash.
    tmp = os.path.join(folder, f".{os.path.basename(path)}.{uuid.uuid4().hex}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)
            return True
        except FileExistsError:
            return False
    finally:
        os.remove(tmp)


def _open_local(path: str, native: bool = False):
    """A local file opened for writing, its folder created when missing: tried first, as
    the folder (a bucket's, the table's) almost always exists and a change writes dozens
    of files, each of which would otherwise pay a failing mkdir. ``native``: as Arrow's own
    buffered stream, for a Parquet writer streaming into the file, which would otherwise call
    back into Python (and take the GIL) for every page, what two threads copying files at
    once wait on."""
    opener = pa.OSFile if native else open
    try:
        raw = opener(path, "wb")
    except FileNotFoundError:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        raw = opener(path, "wb")
    return pa.BufferedOutputStream(raw, buffer_size=_LOCAL_BUFFER_BYTES) if native else raw


_LOCAL_BUFFER_BYTES = 1 << 20
"""A streamed local file's write buffer: a Parquet writer writes pages and their small headers
one by one."""
