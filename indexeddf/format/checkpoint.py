"""Checkpoints: the whole replayed state at one version, in Delta's checkpoint format.

``_delta_log/<v>.checkpoint.parquet`` is Delta's classic single-file checkpoint: one row
per action (``protocol``, ``metaData``, every ``txn``, every live ``add``, every
``remove`` tombstone), one struct column per action type, so every Delta engine starts
from it. Delta checkpoints hold no ``commitInfo``, and indexeddf's index actions ride in
``commitInfo``: their state at ``v`` (and the commit timestamp of ``v``) goes beside it,
in ``_indexes/_state/<v>.json``. A checkpoint another engine wrote has no such file;
the index state is then replayed from the commits (:func:`index_state`).
``_delta_log/_last_checkpoint`` names the newest checkpoint.
"""

from __future__ import annotations

import io
import json
import warnings
from typing import TYPE_CHECKING
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import CorruptLogError
from ..spec.actions import Action, ActionParseError, AddFile, CommitInfo, IndexEntry, Metadata, RemoveFile
from ..spec.delta import (
    DECODERS,
    TAG_BUCKET,
    TAG_FILE_ID,
    TAG_SORTED,
    checkpoint_add,
    checkpoint_remove,
    decode_line,
    encode_path,
    metadata_object,
    path_file_id,
    protocol_object,
    stats_string,
)
from ..spec.features import V2_CHECKPOINT
from .log import LAST_CHECKPOINT, SIDECAR_DIR, check_action_paths, checkpoint_path, read_commit, uuid_checkpoint_path
from .replay_rules import merge_index

if TYPE_CHECKING:
    from .snapshot import Snapshot
    from .storage import TableStorage

INDEX_STATE_DIR = "_indexes/_state"
"""Where the index state at each checkpoint version is kept (JSON)."""

_MAP = pa.map_(pa.string(), pa.string())
_DV = pa.struct([  # Delta's DeletionVectorDescriptor struct, as Delta's checkpoints hold it
    ("storageType", pa.string()), ("pathOrInlineDv", pa.string()), ("offset", pa.int32()),
    ("sizeInBytes", pa.int32()), ("cardinality", pa.int64()),
])
_SCHEMA = pa.schema([
    ("txn", pa.struct([("appId", pa.string()), ("version", pa.int64()), ("lastUpdated", pa.int64())])),
    ("add", pa.struct([
        ("path", pa.string()), ("partitionValues", _MAP), ("size", pa.int64()), ("modificationTime", pa.int64()),
        ("dataChange", pa.bool_()), ("stats", pa.string()), ("tags", _MAP), ("deletionVector", _DV),
    ])),
    ("remove", pa.struct([
        ("path", pa.string()), ("deletionTimestamp", pa.int64()), ("dataChange", pa.bool_()),
        ("extendedFileMetadata", pa.bool_()), ("partitionValues", _MAP), ("size", pa.int64()), ("tags", _MAP),
        ("deletionVector", _DV),
    ])),
    ("metaData", pa.struct([
        ("id", pa.string()), ("name", pa.string()), ("description", pa.string()),
        ("format", pa.struct([("provider", pa.string()), ("options", _MAP)])),
        ("schemaString", pa.string()), ("partitionColumns", pa.list_(pa.string())),
        ("configuration", _MAP), ("createdTime", pa.int64()),
    ])),
    ("protocol", pa.struct([
        ("minReaderVersion", pa.int32()), ("minWriterVersion", pa.int32()),
        ("readerFeatures", pa.list_(pa.string())), ("writerFeatures", pa.list_(pa.string())),
    ])),
])
_MAP_FIELDS = ("partitionValues", "tags", "configuration", "options")
_DOMAIN = pa.field("domainMetadata", pa.struct([("domain", pa.string()), ("configuration", pa.string()),
                                                 ("removed", pa.bool_())]))
"""Delta's domainMetadata column, in checkpoints of tables that have domains."""
_V2_SCHEMA = _SCHEMA.append(pa.field("checkpointMetadata", pa.struct([("version", pa.int64()), ("tags", _MAP)])))
"""A table with the ``v2Checkpoint`` feature gets v2 spec checkpoints: the classic file name
and content, plus the one ``checkpointMetadata`` row the spec requires (no sidecars)."""


def index_state_path(version: int) -> str:
    """Relative path of the index state kept with the checkpoint of ``version``."""
    return f"{INDEX_STATE_DIR}/{version:020d}.json"


def _file_row(a: AddFile | RemoveFile) -> dict:
    tags = {}
    if a.bucket is not None:
        tags[TAG_BUCKET] = str(a.bucket)
    tags[TAG_FILE_ID] = str(a.fileId)
    dv = None if a.deletionVector is None else a.deletionVector.model_dump()
    if isinstance(a, AddFile):
        if a.sorted:
            tags[TAG_SORTED] = "true"
        return {"path": encode_path(a.path), "partitionValues": list(a.partitionValues.items()), "size": a.size,
                "modificationTime": a.modificationTime, "dataChange": a.dataChange,
                "stats": stats_string(a.stats), "tags": list(tags.items()), "deletionVector": dv}
    return {"path": encode_path(a.path), "deletionTimestamp": a.deletionTimestamp, "dataChange": a.dataChange,
            "extendedFileMetadata": True, "partitionValues": list(a.partitionValues.items()), "size": a.size,
            "tags": list(tags.items()),
            "deletionVector": dv}


def _rows(snapshot: "Snapshot") -> list[dict]:
    meta = metadata_object(snapshot.metadata)
    meta["format"] = {"provider": "parquet", "options": []}
    meta["configuration"] = list(meta["configuration"].items())
    proto = protocol_object(snapshot.protocol)
    proto.setdefault("readerFeatures", None)
    proto.setdefault("writerFeatures", None)
    rows = [{"protocol": proto}, {"metaData": meta}]
    rows += [{"txn": t.model_dump()} for t in snapshot.txns.values()]
    rows += [{"remove": _file_row(r)} for r in snapshot.tombstones.values()]
    rows += [{"add": _file_row(a)} for a in snapshot.live_files()]
    rows += [{"domainMetadata": d.model_dump()} for d in snapshot.domains.values()]
    return rows


def write_checkpoint(storage: "TableStorage", snapshot: "Snapshot") -> None:
    """Write the checkpoint of ``snapshot`` (and its index state), then point
    ``_last_checkpoint`` at it."""
    rows = _rows(snapshot)
    v2 = V2_CHECKPOINT in (snapshot.protocol.writerFeatures or ())
    if v2:
        rows.append({"checkpointMetadata": {"version": snapshot.version, "tags": []}})
    schema = _V2_SCHEMA if v2 else _SCHEMA
    table = pa.Table.from_pylist(rows, schema=schema.append(_DOMAIN) if snapshot.domains else schema)
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="snappy")
    state = {
        "version": snapshot.version,
        "timestamp": snapshot.timestamp,
        "indexes": [e.model_dump(mode="json") for e in snapshot.indexes.values()],
    }
    # The index state first: a checkpoint that exists always has it beside it.
    storage.put_if_absent(index_state_path(snapshot.version), json.dumps(state, separators=(",", ":")).encode())
    # Whoever committed the version writes its checkpoint; a lost race means it exists.
    storage.put_if_absent(checkpoint_path(snapshot.version), buf.getvalue())
    hint = json.dumps({"version": snapshot.version, "size": len(rows), "sizeInBytes": len(buf.getvalue())})
    storage.replace_atomically(LAST_CHECKPOINT, hint.encode())


def _dicts(value):
    """pyarrow gives maps as lists of (key, value) pairs: turn the known ones into dicts."""
    if isinstance(value, dict):
        return {k: (dict(v) if k in _MAP_FIELDS and isinstance(v, list) else _dicts(v)) for k, v in value.items()}
    return value


class _NotPlain(Exception):
    """The add column is not in the shape :func:`_decode_adds` reads."""


_ADD_FIELDS = ("path", "size", "modificationTime", "dataChange", "stats", "tags")
_TYPED = ("path", "size", "modificationTime", "dataChange", "stats")
_TYPES = ["string", "int64", "int64", "bool", "string"]


def _decode_adds(column: pa.ChunkedArray, source: str) -> list[AddFile]:
    """The add actions of a checkpoint, read column by column: a table's checkpoint holds
    one add per live file, and turning each row into a dict first cost most of an open.

    Only plain Arrow accessors here: compute kernels and ``to_numpy`` import pandas
    (a few hundred ms of a fresh process that only opens a table)."""
    adds = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    if not isinstance(adds, pa.StructArray) or any(adds.type.get_field_index(f) < 0 for f in _ADD_FIELDS):
        raise _NotPlain()
    partitions = _partition_values(adds)
    dvs = _deletion_vectors(adds)
    tags = adds.field("tags")
    if not isinstance(tags, pa.MapArray) or tags.offset != 0 or [str(adds.type.field(f).type) for f in _TYPED] != _TYPES:
        raise _NotPlain()
    # flatten() gives the children with the struct's own nulls applied: rows of other
    # actions come out as a null path (delta-rs writes "" under a null struct).
    flat = adds.flatten()
    columns = [flat[adds.type.get_field_index(f)].to_pylist() for f in _TYPED]
    offsets, keys, items = tags.offsets.to_pylist(), tags.keys.to_pylist(), tags.items.to_pylist()
    out = []
    for row, (path, size, mtime, change, stats) in enumerate(zip(*columns), start=1):
        if path is None:
            continue  # a row of another action
        ours = {k: v for k, v in zip(keys[offsets[row - 1]:offsets[row]], items[offsets[row - 1]:offsets[row]])
                if k in (TAG_BUCKET, TAG_FILE_ID, TAG_SORTED)}
        try:
            a = checkpoint_add(path, size, mtime, change, stats, ours, dvs[row - 1], partitions[row - 1])
        except (ActionParseError, TypeError, ValueError, KeyError) as e:
            raise CorruptLogError(f"{source} add row {row}: {e}", source, row) from None
        check_action_paths(a, f"{source} add row {row}")
        out.append(a)
    return out


_REMOVE_FIELDS = ("path", "deletionTimestamp", "dataChange", "size", "tags")
_REMOVE_TYPES = ["string", "int64", "bool", "int64"]


def _plain_removes(column: pa.ChunkedArray) -> pa.StructArray:
    """A checkpoint's ``remove`` column as one struct array, when its shape is the one the fast
    decoders know (else ``_NotPlain``: the rows are decoded one by one)."""
    removes = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    if not isinstance(removes, pa.StructArray) or any(removes.type.get_field_index(f) < 0 for f in _REMOVE_FIELDS):
        raise _NotPlain()
    tags = removes.field("tags")
    if not isinstance(tags, pa.MapArray) or tags.offset != 0 \
            or [str(removes.type.field(f).type) for f in _REMOVE_FIELDS[:4]] != _REMOVE_TYPES:
        raise _NotPlain()
    return removes


def _decode_removes(removes: pa.StructArray, source: str) -> list[RemoveFile]:
    """The remove actions (tombstones) of a checkpoint, column by column as
    :func:`_decode_adds` reads the adds: a table's checkpoint holds one per file it ever
    removed."""
    tags = removes.field("tags")
    partitions = _partition_values(removes)
    dvs = _deletion_vectors(removes)
    flat = removes.flatten()
    columns = [flat[removes.type.get_field_index(f)].to_pylist() for f in _REMOVE_FIELDS[:4]]
    offsets, keys, items = tags.offsets.to_pylist(), tags.keys.to_pylist(), tags.items.to_pylist()
    out = []
    for row, (path, timestamp, change, size) in enumerate(zip(*columns), start=1):
        if path is None:
            continue  # a row of another action
        ours = {k: v for k, v in zip(keys[offsets[row - 1]:offsets[row]], items[offsets[row - 1]:offsets[row]])
                if k in (TAG_BUCKET, TAG_FILE_ID)}
        try:
            r = checkpoint_remove(path, timestamp, change, size, ours, dvs[row - 1], partitions[row - 1])
        except (ActionParseError, TypeError, ValueError, KeyError) as e:
            raise CorruptLogError(f"{source} remove row {row}: {e}", source, row) from None
        check_action_paths(r, f"{source} remove row {row}")
        out.append(r)
    return out


class DeferredRemoves:
    """A checkpoint's remove actions (tombstones), decoded when first needed. A table keeps
    one per file it removed within the retention: a pipeline that rewrites a few dozen files
    every few minutes keeps tens of thousands, about 20 µs each to decode, while reading a
    version (a scan, a feed, a stream's batch) never looks at them. The file ids and sizes
    that commits and plans need are read from the columns (:meth:`by_path`)."""

    def __init__(self, removes: pa.StructArray, source: str):
        self.removes, self.source = removes, source
        self._decoded: list[RemoveFile] | None = None
        self._by_path: dict[str, tuple[int, int]] | None = None

    def decode(self) -> list[RemoveFile]:
        """The remove actions, decoded once (a damaged row raises ``CorruptLogError`` here)."""
        if self._decoded is None:
            self._decoded = _decode_removes(self.removes, self.source)
        return self._decoded

    def by_path(self) -> dict[str, tuple[int, int]]:
        """Each tombstone's path, file id and size, as :meth:`decode` would give them, read
        from the columns once (a fraction of the decoding's cost): every snapshot replayed
        from this checkpoint asks for them at its first commit or index plan."""
        if self._by_path is None:
            self._by_path = self._read_by_path()
        return self._by_path

    def _read_by_path(self) -> dict[str, tuple[int, int]]:
        if self._decoded is not None:
            return {r.path: (r.fileId, r.size) for r in self._decoded}
        paths = self.removes.field("path").to_pylist()
        sizes = pc.fill_null(self.removes.field("size"), 0).to_pylist()
        tags = self.removes.field("tags")
        # The indexeddf.fileId tag of each row that has one; rows without take their path's id.
        parents = np.repeat(np.arange(len(tags)), np.diff(tags.offsets.to_numpy(zero_copy_only=False)))
        tagged = pc.equal(tags.keys, TAG_FILE_ID).to_numpy(zero_copy_only=False)
        try:
            ids = pc.cast(tags.items.filter(pa.array(tagged)), pa.int64()).to_pylist()
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            return {r.path: (r.fileId, r.size) for r in self.decode()}  # a malformed tag: the decode says where
        by_row = dict(zip(parents[tagged].tolist(), ids))
        out = {}
        for row, (path, size) in enumerate(zip(paths, sizes)):
            if path is not None:
                path = unquote(path) if "%" in path else path
                file_id = by_row.get(row)
                out[path] = (path_file_id(path) if file_id is None else file_id, size)
        return out


def _partition_values(adds: pa.StructArray) -> list:
    """Each add row's ``partitionValues`` as a dict (all empty in an unpartitioned table)."""
    i = adds.type.get_field_index("partitionValues")
    if i < 0 or not len(adds):
        return [None] * len(adds)
    values = adds.flatten()[i]
    if not isinstance(values, pa.MapArray):
        raise _NotPlain()
    if len(values.keys) == 0:
        return [None] * len(adds)
    return [dict(v) if v is not None else None for v in values.to_pylist()]


def _deletion_vectors(adds: pa.StructArray) -> list:
    """Each add row's ``deletionVector`` struct as a dict (None where it has none); only
    the column of a checkpoint that holds any is turned into Python objects."""
    i = adds.type.get_field_index("deletionVector")
    if i < 0 or adds.field(i).null_count == len(adds):
        return [None] * len(adds)
    values = adds.flatten()[i]  # the struct's own offset and nulls applied
    if not isinstance(values, pa.StructArray):
        raise _NotPlain()
    return values.to_pylist()


def read_checkpoint(storage: "TableStorage", version: int) -> list[Action | DeferredRemoves]:
    """The actions stored in the checkpoint of ``version``, with the index state and
    commit timestamp of that version; its removes come as :class:`DeferredRemoves` where
    the columns have the usual shape.

    Delta's v2 checkpoints are read too (``v2Checkpoint``): a UUID-named one
    (``<v>.checkpoint.<uuid>.json`` or ``.parquet``) when the classic file is absent, and
    the ``sidecar`` files either kind may name (``_delta_log/_sidecars/``, holding its add
    and remove actions); ``checkpointMetadata`` carries nothing a reader needs."""
    rel = checkpoint_path(version)
    try:
        data = storage.read_bytes(rel)
    except FileNotFoundError:
        rel = uuid_checkpoint_path(storage, version)
        if rel is None:
            raise
        data = storage.read_bytes(rel)
    if rel.endswith(".json"):
        actions, sidecars = _json_checkpoint(data.decode("utf-8"), storage.full(rel))
    else:
        actions, sidecars = _parquet_actions(data, storage.full(rel))
    for name in sidecars:
        side = f"{SIDECAR_DIR}/{name}"
        actions += _parquet_actions(storage.read_bytes(side), storage.full(side))[0]
    # Another engine's checkpoint of a table not indexed yet: no index existed then, so
    # the state is known (empty) even when a log clean-up removed the commits before it.
    indexed = any(isinstance(a, Metadata) and a.indexColumns for a in actions)
    return actions + index_state(storage, version, indexed)


def _json_checkpoint(text: str, source: str) -> tuple[list[Action], list[str]]:
    """The actions of a JSON (v2 spec) checkpoint and the names of its sidecar files."""
    actions: list[Action] = []
    sidecars: list[str] = []
    for number, line in enumerate(text.split("\n"), start=1):
        if line.strip().startswith('{"sidecar"'):
            sidecars.append(_sidecar_name(json.loads(line)["sidecar"], source))
        elif line.strip():
            try:
                decoded = decode_line(line)
            except ActionParseError as e:
                raise CorruptLogError(f"{source} line {number}: {e}", source, number) from None
            for a in decoded:
                check_action_paths(a, f"{source} line {number}")
                actions.append(a)
    return actions, sidecars


def _sidecar_name(body, source: str) -> str:
    """The file name a ``sidecar`` action names (Delta keeps sidecars in ``_sidecars/``)."""
    path = body.get("path") if isinstance(body, dict) else None
    name = unquote(str(path)).rsplit("/", 1)[-1] if path else ""
    if not name or name in (".", ".."):
        raise CorruptLogError(f"{source}: a sidecar action without a file name ({body!r})", source)
    return name


def _parquet_actions(data: bytes, source: str) -> tuple[list[Action], list[str]]:
    """The actions of a Parquet checkpoint or sidecar file, and the sidecar files it names."""
    try:
        # ParquetFile, not read_table: read_table imports pyarrow.dataset (and pandas), ~250 ms
        # of a fresh process that only wants to open the table.
        pf = pq.ParquetFile(io.BytesIO(data))
        names = [n for n in ("protocol", "metaData", "txn", "remove", "add", "domainMetadata", "sidecar")
                 if n in pf.schema_arrow.names]
        table = pf.read(columns=names)
    except (pa.ArrowInvalid, OSError, KeyError) as e:
        raise CorruptLogError(f"{source}: not a readable checkpoint ({e}); delete it to replay from JSON", source) from None
    sidecars = []
    if "sidecar" in names:
        sidecars = [_sidecar_name(b, source) for b in table.column("sidecar").to_pylist() if b is not None]
        names.remove("sidecar")
    actions: list[Action] = []
    for name in names:
        if name in ("add", "remove"):
            try:
                if name == "add":
                    actions += _decode_adds(table.column(name), source)
                else:
                    actions.append(DeferredRemoves(_plain_removes(table.column(name)), source))
                continue
            except _NotPlain:
                pass  # a column shape the fast path does not know: decode row by row
        for row, body in enumerate(table.column(name).to_pylist(), start=1):
            if body is None:
                continue
            try:
                decoded = DECODERS[name](_dicts(body))
            except (ActionParseError, TypeError, ValueError, KeyError) as e:
                raise CorruptLogError(f"{source} row {row}: {e}", source, row) from None
            for a in decoded:
                check_action_paths(a, f"{source} row {row}")
                actions.append(a)
    return actions, sidecars


def index_state(storage: "TableStorage", version: int, indexed: bool = True) -> list[Action]:
    """The ``index`` actions that replay to the index state at ``version``, and the
    ``commitInfo`` timestamp of that version: from ``_indexes/_state`` when indexeddf
    wrote the checkpoint, else replayed from the commits since the newest index state
    before it. Commits a log clean-up removed leave the indexes unknown: they are
    dropped with a warning (answers stay right, by scans) until ``create_index``; not
    when the table was not ``indexed`` at ``version`` (it had no index then)."""
    try:
        state = json.loads(storage.read_bytes(index_state_path(version)))
        indexes = [IndexEntry.model_validate(e) for e in state["indexes"]]
        return [CommitInfo(timestamp=state["timestamp"], operation="CHECKPOINT", readVersion=version), *indexes]
    except FileNotFoundError:
        pass
    except (ValueError, KeyError, TypeError) as e:
        raise CorruptLogError(f"{storage.full(index_state_path(version))}: {e}", storage.full(index_state_path(version))) from None

    earlier = [int(n[:20]) for n in storage.list_names(INDEX_STATE_DIR) if n[:20].isdigit() and int(n[:20]) < version]
    start, indexes, timestamp = 0, {}, 0
    if earlier:
        base = index_state(storage, max(earlier))
        indexes = {e.name: e for e in base if isinstance(e, IndexEntry)}
        start = max(earlier) + 1
    try:
        for v in range(start, version + 1):
            for a in read_commit(storage, v):
                if isinstance(a, IndexEntry):
                    indexes[a.name] = merge_index(indexes.get(a.name), a)
                elif isinstance(a, CommitInfo):
                    timestamp = a.timestamp
    except FileNotFoundError:
        if not indexed:
            return [CommitInfo(timestamp=timestamp, operation="CHECKPOINT", readVersion=version)]
        warnings.warn(
            f"{storage.url}: the commits before the checkpoint of version {version} are gone, so the "
            "index state there is unknown; indexes are not used at this version (recreate them)",
            stacklevel=2,
        )
        return [CommitInfo(timestamp=timestamp, operation="CHECKPOINT", readVersion=version)]
    return [CommitInfo(timestamp=timestamp, operation="CHECKPOINT", readVersion=version), *indexes.values()]
