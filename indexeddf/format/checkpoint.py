"""Parquet checkpoints: the whole replayed state at one version, in one file.

A checkpoint has one row per action of the snapshot (protocol, metaData, the commit's
commitInfo, every live add, every tombstone, every txn and index) with columns
``kind``, ``path``, ``bucket``, ``fileId`` (so tools can list files without parsing
JSON) and ``line``, the action's canonical JSON line. ``_last_checkpoint`` names the
newest checkpoint; readers also find checkpoints by listing, so a stale or missing
hint only costs time.
"""

from __future__ import annotations

import io
import json
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import CorruptLogError
from ..spec.actions import KEYS, Action, ActionParseError, AddFile, CommitInfo, RemoveFile, parse_line, to_line
from .log import LAST_CHECKPOINT, check_action_paths, checkpoint_path

if TYPE_CHECKING:
    from .snapshot import Snapshot
    from .storage import TableStorage

_SCHEMA = pa.schema(
    [("kind", pa.string()), ("path", pa.string()), ("bucket", pa.int32()), ("fileId", pa.int64()), ("line", pa.string())]
)


def snapshot_actions(snapshot: "Snapshot") -> list[Action]:
    """The actions that replay to ``snapshot`` (its checkpoint content)."""
    actions: list[Action] = [snapshot.protocol, snapshot.metadata]
    actions.append(CommitInfo(timestamp=snapshot.timestamp, operation="CHECKPOINT", readVersion=snapshot.version))
    actions.extend(snapshot.txns.values())
    actions.extend(snapshot.indexes.values())
    actions.extend(snapshot.tombstones.values())
    actions.extend(snapshot.live_files())
    return actions


def write_checkpoint(storage: "TableStorage", snapshot: "Snapshot") -> None:
    """Write the checkpoint of ``snapshot`` and point ``_last_checkpoint`` at it."""
    actions = snapshot_actions(snapshot)
    files = [a if isinstance(a, (AddFile, RemoveFile)) else None for a in actions]
    table = pa.table(
        {
            "kind": [KEYS[type(a)] for a in actions],
            "path": [f.path if f else None for f in files],
            "bucket": [f.bucket if f else None for f in files],
            "fileId": [f.fileId if f else None for f in files],
            "line": [to_line(a) for a in actions],
        },
        schema=_SCHEMA,
    )
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd")
    # Whoever committed the version writes its checkpoint; a lost race means it exists.
    storage.put_if_absent(checkpoint_path(snapshot.version), buf.getvalue())
    hint = json.dumps({"version": snapshot.version, "size": len(actions)}).encode()
    storage.replace_atomically(LAST_CHECKPOINT, hint)


def read_checkpoint(storage: "TableStorage", version: int) -> list[Action]:
    """The actions stored in the checkpoint of ``version``."""
    rel = checkpoint_path(version)
    source = storage.full(rel)
    try:
        # ParquetFile, not read_table: read_table imports pyarrow.dataset (and pandas), ~250 ms
        # of a fresh process that only wants to open the table.
        lines = pq.ParquetFile(io.BytesIO(storage.read_bytes(rel))).read(columns=["line"]).column("line").to_pylist()
    except (pa.ArrowInvalid, OSError, KeyError) as e:
        raise CorruptLogError(f"{source}: not a readable checkpoint ({e}); delete it to replay from JSON", source) from None
    actions = []
    for row, line in enumerate(lines, start=1):
        try:
            action = parse_line(line)
        except (ActionParseError, TypeError) as e:
            raise CorruptLogError(f"{source} row {row}: {e}", source, row) from None
        check_action_paths(action, f"{source} row {row}")
        actions.append(action)
    return actions
