"""Replay rules that both the commit replay (:mod:`.snapshot`) and the checkpoint reader
(:mod:`.checkpoint`) apply, in a module of their own so that neither imports the other."""

from __future__ import annotations

from ..spec.actions import IndexEntry


def merge_index(before: IndexEntry | None, change: IndexEntry) -> IndexEntry:
    """The index after ``change``: its fields, and the reconciled file set."""
    if before is None and not change.removedFiles:
        return change
    removed = set(change.removedFiles)
    kept = [f for f in (before.files if before else ()) if f.path not in removed]
    added = {f.path for f in change.files}
    files = tuple(f for f in kept if f.path not in added) + change.files
    return change.model_copy(update={"files": files, "removedFiles": ()})
