"""Listing the files under a folder of a table (vacuum, cancel): relative path, size and
modification time. Readers never list; only maintenance does."""

from __future__ import annotations

import datetime as dt
import os

from ..format.storage import TableStorage


def list_tree(storage: TableStorage, rel_dir: str) -> list[tuple[str, int, float | None]]:
    """Every file below ``rel_dir``: (path relative to the root, bytes, mtime in ms or
    None when the filesystem does not say). Empty when the folder is missing."""
    base = storage.full(rel_dir)
    out = []
    if storage.is_local:
        for folder, _, names in os.walk(base):
            for n in names:
                full = os.path.join(folder, n)
                try:
                    st = os.stat(full)
                except FileNotFoundError:
                    continue
                rel = os.path.relpath(full, storage.root).replace(os.sep, "/")
                out.append((rel, st.st_size, st.st_mtime * 1000))
        return sorted(out)
    try:
        found = storage.fs.find(base, detail=True)
    except FileNotFoundError:
        return []
    root = storage.fs._strip_protocol(storage.root).rstrip("/")
    for full, info in found.items():
        if info.get("type") == "directory":
            continue
        path = storage.fs._strip_protocol(full)
        rel = path[len(root) + 1:] if path.startswith(root + "/") else path
        out.append((rel, int(info.get("size") or 0), _mtime_ms(info)))
    return sorted(out)


def list_files(storage: TableStorage, rel_dir: str) -> list[tuple[str, int, float | None]]:
    """The files directly in ``rel_dir`` ("" is the table root), as :func:`list_tree`
    gives them, without walking the folders below."""
    if storage.is_local:
        base = storage.full(rel_dir) if rel_dir else storage.root
        try:
            entries = [e for e in os.scandir(base) if e.is_file()]
        except FileNotFoundError:
            return []
        prefix = f"{rel_dir}/" if rel_dir else ""
        return sorted((prefix + e.name, e.stat().st_size, e.stat().st_mtime * 1000) for e in entries)
    try:
        found = storage.fs.ls(storage.full(rel_dir) if rel_dir else storage.root, detail=True)
    except FileNotFoundError:
        return []
    root = storage.fs._strip_protocol(storage.root).rstrip("/")
    out = []
    for info in found:
        if info.get("type") == "directory":
            continue
        path = storage.fs._strip_protocol(info["name"])
        rel = path[len(root) + 1:] if path.startswith(root + "/") else path
        out.append((rel, int(info.get("size") or 0), _mtime_ms(info)))
    return sorted(out)


def _mtime_ms(info: dict) -> float | None:
    for key in ("mtime", "LastModified", "last_modified", "updated", "created", "modified"):
        v = info.get(key)
        if v is None:
            continue
        if isinstance(v, dt.datetime):
            return (v if v.tzinfo else v.replace(tzinfo=dt.timezone.utc)).timestamp() * 1000
        try:
            return float(v) * 1000
        except (TypeError, ValueError):
            try:
                return dt.datetime.fromisoformat(str(v).replace("Z", "+00:00")).timestamp() * 1000
            except ValueError:
                continue
    return None


def remove_empty_dirs(storage: TableStorage, rel_dir: str) -> None:
    """Remove empty folders below and including ``rel_dir`` (local disks only; object
    stores have no folders)."""
    if not storage.is_local:
        return
    base = storage.full(rel_dir)
    for folder, _, _ in sorted(os.walk(base), key=lambda w: -len(w[0])):
        try:
            os.rmdir(folder)
        except OSError:
            pass
