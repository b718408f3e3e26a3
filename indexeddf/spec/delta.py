"""The Delta wire format: indexeddf's log actions as Delta Lake writes and reads them.

The library works on its own action models (``spec/actions.py``); this module is the only
place that knows how they look in ``_delta_log/`` (docs/PROTOCOL.md, section 3):

- ``add`` / ``remove`` are Delta's, with the file's bucket and file id in ``tags``
  (``indexeddf.bucket``, ``indexeddf.fileId``) and ``stats`` as Delta's JSON string.
  Files other Delta writers added carry no tags: no bucket (they belong to every bucket)
  and a file id derived from their path (:func:`path_file_id`).
- ``metaData`` is Delta's (Spark's JSON ``schemaString``, ``partitionColumns``); the
  index columns and bucket count ride in ``configuration`` (``indexeddf.indexColumns``,
  ``indexeddf.numBuckets``).
- Index changes (``index`` actions) ride inside the commit's ``commitInfo``, under the
  key ``indexeddf``: the Delta protocol lets implementations store any JSON there, every
  Delta reader and writer ignores it, and so a data change and its index change still
  commit atomically without a table feature that would lock other writers out.
- ``protocol``, ``txn`` and ``commitInfo`` are Delta's own.

Nothing here does I/O.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any
from urllib.parse import quote, unquote

from pydantic import ValidationError

from .actions import (
    MAX_MILLIS,
    Action,
    ActionParseError,
    AddFile,
    CdcFile,
    CommitInfo,
    DomainMetadata,
    FileStats,
    IndexEntry,
    Metadata,
    Protocol,
    RemoveFile,
    Txn,
)
from .deletion_vectors import DeletionVectorDescriptor
from .schema import Field
from .type_widening import TYPE_CHANGES, check_type_changes
from .types import NestedTypeError, check_type_value, type_text, type_value

TAG_BUCKET = "indexeddf.bucket"
"""``add.tags`` key: the file's bucket (decimal)."""
TAG_FILE_ID = "indexeddf.fileId"
"""``add.tags`` key: the file's id (decimal int64), which index entries name."""
TAG_SORTED = "indexeddf.sorted"
"""``add.tags`` key: ``"true"`` when the file's rows are ordered by the index columns
(ascending, nulls first, Spark's ordering; PROTOCOL.md §4.3.1)."""
CONF_INDEX_COLUMNS = "indexeddf.indexColumns"
"""``metaData.configuration`` key: the table's index (bucketing) columns, a JSON array."""
CONF_NUM_BUCKETS = "indexeddf.numBuckets"
"""``metaData.configuration`` key: the table's bucket count (decimal)."""
TXN_APP_ID_CONF = "spark.databricks.delta.write.txnAppId"
"""Delta's Spark session conf that, with :data:`TXN_VERSION_CONF`, makes a SQL change
idempotent: its commit carries ``txn(appId, version)`` and is skipped when the table has
one of that app id at that version or later."""
TXN_VERSION_CONF = "spark.databricks.delta.write.txnVersion"
"""Delta's Spark session conf of the version of :data:`TXN_APP_ID_CONF`'s ``txn``."""
COMMIT_INFO_KEY = "indexeddf"
"""``commitInfo`` key whose value ``{"indexes": [...]}`` holds the commit's index actions."""

_FORMAT = {"provider": "parquet", "options": {}}
_PATH_SAFE = "/=-_.~"  # kept as is in a path; everything else is percent-encoded (Delta paths are URIs)


# -- encoding -------------------------------------------------------------------------------


def encode_commit(actions: list[Action]) -> str:
    """A Delta commit file's text for ``actions`` (one JSON object per line).

    ``index`` actions move into the ``commitInfo`` line, which comes first (Delta asks
    for commitInfo first when in-commit timestamps are on; it costs nothing otherwise).
    """
    indexes = [a for a in actions if isinstance(a, IndexEntry)]
    infos = [a for a in actions if isinstance(a, CommitInfo)]
    if indexes and not infos:
        raise ValueError("index actions need the commit's commitInfo to ride in")
    lines = []
    for a in infos[:1]:
        lines.append(_line("commitInfo", _commit_info(a, indexes)))
    for a in actions:
        if not isinstance(a, (IndexEntry, CommitInfo)):
            lines.append(encode_action(a))
    return "".join(line + "\n" for line in lines)


def encode_action(a: Action) -> str:
    """One Delta log line for a non-index action."""
    if isinstance(a, AddFile):
        return _line("add", _add(a))
    if isinstance(a, RemoveFile):
        return _line("remove", _remove(a))
    if isinstance(a, CdcFile):
        body = {"path": encode_path(a.path), "partitionValues": dict(a.partitionValues), "size": a.size,
                "dataChange": False}
        if a.tags:
            body["tags"] = dict(a.tags)
        return _line("cdc", body)
    if isinstance(a, Metadata):
        return _line("metaData", metadata_object(a))
    if isinstance(a, Protocol):
        return _line("protocol", protocol_object(a))
    if isinstance(a, Txn):
        return _line("txn", a.model_dump())
    if isinstance(a, CommitInfo):
        return _line("commitInfo", _commit_info(a, []))
    if isinstance(a, DomainMetadata):
        return _line("domainMetadata", a.model_dump())
    raise TypeError(f"no Delta form for {type(a).__name__}")


def _line(key: str, body: dict) -> str:
    return json.dumps({key: body}, separators=(",", ":"), ensure_ascii=False)


def encode_path(path: str) -> str:
    """A relative path as a Delta ``add.path`` (an RFC 2396 URI reference)."""
    return quote(path, safe=_PATH_SAFE)


def _add(a: AddFile) -> dict:
    return _with_deletion_vector({
        "path": encode_path(a.path),
        "partitionValues": dict(a.partitionValues),
        "size": a.size,
        "modificationTime": a.modificationTime,
        "dataChange": a.dataChange,
        "stats": stats_string(a.stats),
        "tags": _tags(a.bucket, a.fileId, a.path, a.sorted),
    }, a.deletionVector)


def _remove(r: RemoveFile) -> dict:
    return _with_deletion_vector({
        "path": encode_path(r.path),
        "deletionTimestamp": r.deletionTimestamp,
        "dataChange": r.dataChange,
        "extendedFileMetadata": True,
        "partitionValues": dict(r.partitionValues),
        "size": r.size,
        "tags": _tags(r.bucket, r.fileId, r.path),
    }, r.deletionVector)


def _with_deletion_vector(body: dict, dv: DeletionVectorDescriptor | None) -> dict:
    """A file action's body with its ``deletionVector`` (left out when the file has none)."""
    if dv is not None:
        body["deletionVector"] = dv.wire()
    return body


def _tags(bucket: int | None, file_id: int, path: str, ordered: bool = False) -> dict[str, str] | None:
    tags = {}
    if bucket is not None:
        tags[TAG_BUCKET] = str(bucket)
    if file_id != path_file_id(path):
        tags[TAG_FILE_ID] = str(file_id)
    if ordered:
        tags[TAG_SORTED] = "true"
    return tags or None


class LazyStats:
    """A file's Delta ``stats`` string, parsed into :class:`FileStats` on first use.

    Opening a table decodes one add per live file from its checkpoint, and parsing
    every ``stats`` string there was most of the cost; reads need them only for
    row counts. Attribute access and equality behave as the parsed ``FileStats``."""

    __slots__ = ("text", "_parsed")

    def __init__(self, text: str):
        self.text = text
        self._parsed = None

    def parsed(self) -> FileStats:
        if self._parsed is None:
            try:
                self._parsed = parse_stats(self.text)
            except ActionParseError as e:
                from ..errors import CorruptLogError

                raise CorruptLogError(f"a checkpoint's add holds damaged stats ({e}); delete the checkpoint "
                                      "to replay from the JSON commits") from None
        return self._parsed

    def __getattr__(self, name: str):
        if name.startswith("_"):  # pickle and copy probe dunders before the slots are set
            raise AttributeError(name)
        return getattr(self.parsed(), name)

    def __reduce__(self):
        return (LazyStats, (self.text,))

    def __eq__(self, other) -> bool:
        return self.parsed() == (other.parsed() if isinstance(other, LazyStats) else other)

    def __hash__(self) -> int:
        return hash(self.text)


def stats_string(s: FileStats | LazyStats | None) -> str | None:
    """Delta's ``stats`` string of a file's statistics."""
    if s is None:
        return None
    if isinstance(s, LazyStats):
        return s.text
    body: dict[str, Any] = {}
    if s.numRecords is not None:
        body["numRecords"] = s.numRecords
    body.update(minValues=s.minValues, maxValues=s.maxValues, nullCount=s.nullCount)
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False)


def metadata_object(m: Metadata) -> dict:
    """The body of Delta's ``metaData`` action for ``m``."""
    conf = dict(m.configuration)
    conf[CONF_INDEX_COLUMNS] = json.dumps(list(m.indexColumns))
    conf[CONF_NUM_BUCKETS] = str(m.numBuckets)
    return {
        "id": m.id,
        "name": m.name,
        "description": m.description,
        "format": _FORMAT,
        "schemaString": schema_string(m.schema_),
        "partitionColumns": list(m.partitionColumns),
        "configuration": conf,
        "createdTime": m.createdTime,
    }


def protocol_object(p: Protocol) -> dict:
    """The body of Delta's ``protocol`` action (feature lists only at versions 3 / 7)."""
    body: dict[str, Any] = {"minReaderVersion": p.minReaderVersion, "minWriterVersion": p.minWriterVersion}
    if p.minReaderVersion >= 3:
        body["readerFeatures"] = list(p.readerFeatures or ())
    if p.minWriterVersion >= 7:
        body["writerFeatures"] = list(p.writerFeatures or ())
    return body


def _commit_info(c: CommitInfo, indexes: list[IndexEntry]) -> dict:
    body = c.model_dump(exclude={"extra"})
    body.update(c.extra)
    if indexes:
        body[COMMIT_INFO_KEY] = {"indexes": [e.model_dump(mode="json") for e in indexes]}
    return body


def schema_string(fields) -> str:
    """Spark's JSON schema (Delta's ``schemaString``) of the table's fields."""
    return json.dumps(
        {
            "type": "struct",
            "fields": [{"name": f.name, "type": type_value(f.type), "nullable": f.nullable,
                        "metadata": dict(f.metadata)}
                       for f in fields],
        },
        separators=(",", ":"),
        ensure_ascii=False,
    )


# -- decoding -------------------------------------------------------------------------------


def path_file_id(path: str) -> int:
    """The file id of a file without an ``indexeddf.fileId`` tag: the first 63 bits of
    the SHA-256 of its relative path, so every reader derives the same id."""
    return int.from_bytes(hashlib.sha256(path.encode("utf-8")).digest()[:8], "big") & (2**63 - 1)


def decode_line(line: str) -> list[Action]:
    """The actions of one Delta log line (a commitInfo line may carry index actions).

    Actions indexeddf does not use (``checkpointMetadata``, ``sidecar``) decode
    to nothing (``domainMetadata`` is kept for checkpoints); those it cannot honour are refused by the protocol
    check before. Unknown fields are ignored, as Delta asks of readers. Raises :class:`ActionParseError` with the reason.
    """
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        raise ActionParseError(f"not valid JSON ({e.msg} at column {e.colno})") from None
    except RecursionError:
        raise ActionParseError("JSON nested too deeply") from None
    if not isinstance(obj, dict) or not obj:
        raise ActionParseError("a line must be a JSON object holding one action")
    out: list[Action] = []
    for key, body in obj.items():
        decoder = DECODERS.get(key)
        if decoder is None:
            if key in _IGNORED:
                continue
            raise ActionParseError(f"unknown action {key!r}")
        if not isinstance(body, dict):
            raise ActionParseError(f"{key!r} must be a JSON object")
        try:
            out.extend(decoder(body))
        except ValidationError as e:
            first = e.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise ActionParseError(f"invalid {key!r} action: {where}: {first['msg']}") from None
        except (TypeError, ValueError, KeyError, AttributeError) as e:
            if isinstance(e, ActionParseError):
                raise
            raise ActionParseError(f"invalid {key!r} action: {type(e).__name__}: {e}") from None
    return out


_IGNORED = {"checkpointMetadata", "sidecar"}


def _decode_cdc(b: dict) -> list[Action]:
    tags = b.get("tags") or None
    if tags is not None and (not isinstance(tags, dict) or not all(isinstance(v, str) for v in tags.values())):
        raise ActionParseError("tags must map strings to strings")
    return [CdcFile(path=_file_path(b), partitionValues=_partition_values(b), size=b.get("size") or 0,
                    dataChange=bool(b.get("dataChange", False)), tags=tags)]


def _decode_add(b: dict) -> list[Action]:
    path, tags = _file_path(b), b.get("tags") or {}
    return [AddFile(
        path=path,
        size=b["size"],
        modificationTime=b["modificationTime"],
        dataChange=b.get("dataChange", True),
        bucket=_int_tag(tags, TAG_BUCKET),
        fileId=_file_id(tags, path),
        stats=parse_stats(b.get("stats")),
        sorted=tags.get(TAG_SORTED) == "true",
        deletionVector=decode_deletion_vector(b.get("deletionVector")),
        partitionValues=_partition_values(b),
    )]


def _partition_values(b: dict) -> dict[str, str | None]:
    values = b.get("partitionValues") or {}
    if not isinstance(values, dict) or not all(v is None or isinstance(v, str) for v in values.values()):
        raise ActionParseError("partitionValues must map column names to strings or null")
    return values


def checkpoint_add(path: str, size: int, mtime: int, change: bool | None, stats: str | None, tags: dict,
                   deletion_vector: dict | None = None, partition_values: dict | None = None) -> AddFile:
    """An add from a checkpoint row whose column types the caller checked (string path,
    int64 size and time, boolean dataChange): built without the model's validation,
    which cost a third of opening a table; the ranges are checked here instead (the
    ``deletionVector`` struct, rare, is validated)."""
    if size is None or mtime is None or size < 0 or not 0 <= mtime <= MAX_MILLIS:
        raise ActionParseError(f"add {path!r}: size and modificationTime must be counts, got {size!r}, {mtime!r}")
    path = unquote(path)
    return AddFile.model_construct(
        path=path, size=size, modificationTime=mtime, dataChange=True if change is None else change,
        bucket=_int_tag(tags, TAG_BUCKET), fileId=_file_id(tags, path),
        stats=None if stats is None else LazyStats(stats), sorted=tags.get(TAG_SORTED) == "true",
        deletionVector=decode_deletion_vector(deletion_vector), partitionValues=partition_values or {},
    )


def checkpoint_remove(path: str, timestamp: int | None, change: bool | None, size: int | None, tags: dict,
                      deletion_vector: dict | None = None, partition_values: dict | None = None) -> RemoveFile:
    """A remove (tombstone) from a checkpoint row whose column types the caller checked,
    built without the model's validation as :func:`checkpoint_add` is (a table keeps a
    tombstone per file ever removed, and decoding them was a third of opening one)."""
    timestamp, size = timestamp or 0, size or 0
    if size < 0 or not 0 <= timestamp <= MAX_MILLIS:
        raise ActionParseError(f"remove {path!r}: size and deletionTimestamp must be counts, got {size!r}, {timestamp!r}")
    path = unquote(path)
    return RemoveFile.model_construct(
        path=path, deletionTimestamp=timestamp, dataChange=True if change is None else change,
        bucket=_int_tag(tags, TAG_BUCKET), fileId=_file_id(tags, path), size=size,
        deletionVector=decode_deletion_vector(deletion_vector), partitionValues=partition_values or {},
    )


def _decode_remove(b: dict) -> list[Action]:
    path, tags = _file_path(b), b.get("tags") or {}
    return [RemoveFile(
        path=path,
        deletionTimestamp=b.get("deletionTimestamp") or 0,
        dataChange=b.get("dataChange", True),
        bucket=_int_tag(tags, TAG_BUCKET),
        fileId=_file_id(tags, path),
        size=b.get("size") or 0,
        deletionVector=decode_deletion_vector(b.get("deletionVector")),
        partitionValues=_partition_values(b),
    )]


_DV_FIELDS = tuple(DeletionVectorDescriptor.model_fields)


def decode_deletion_vector(body) -> DeletionVectorDescriptor | None:
    """A file action's ``deletionVector`` (None when absent or null). Fields the protocol
    does not define (Delta Spark's ``maxRowIndex``) are ignored, as Delta asks of readers.
    A checkpoint's struct of nulls (no ``storageType``) is no deletion vector."""
    if body is None or (isinstance(body, dict) and body.get("storageType") is None):
        return None
    if not isinstance(body, dict):
        raise ActionParseError("deletionVector must be a JSON object")
    return DeletionVectorDescriptor.model_validate({k: body[k] for k in _DV_FIELDS if body.get(k) is not None})


def _file_path(b: dict) -> str:
    path = b["path"]
    if not isinstance(path, str):
        raise ActionParseError("path must be a string")
    return unquote(path)


def _int_tag(tags: dict, key: str) -> int | None:
    if not isinstance(tags, dict):
        raise ActionParseError("tags must be a JSON object")
    value = tags.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.lstrip("-").isdigit():
        raise ActionParseError(f"tag {key} must be a decimal string, got {value!r}")
    return int(value)


def _file_id(tags: dict, path: str) -> int:
    tagged = _int_tag(tags, TAG_FILE_ID)
    return path_file_id(path) if tagged is None else tagged


def _json_string(text, field: str):
    """The value of a field that Delta stores as a JSON document inside a string."""
    if not isinstance(text, str):
        raise ActionParseError(f"{field} must be a JSON string")
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        raise ActionParseError(f"{field} is not valid JSON") from None


def parse_stats(text) -> FileStats | None:
    """A file's statistics from Delta's ``stats`` string (None when absent)."""
    if text is None:
        return None
    body = _json_string(text, "stats")
    if not isinstance(body, dict):
        raise ActionParseError("stats must be a JSON object")
    known = {k: body[k] for k in ("numRecords", "minValues", "maxValues", "nullCount") if body.get(k) is not None}
    # Checked by hand, not by the model: a table opens by decoding one of these per live
    # file, and the model's validation doubled that cost.
    n = known.get("numRecords")
    if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 0):
        raise ActionParseError(f"stats.numRecords must be a count, got {n!r}")
    for k in ("minValues", "maxValues", "nullCount"):
        if not isinstance(known.setdefault(k, {}), dict):
            raise ActionParseError(f"stats.{k} must be a JSON object")
    # A struct column's statistics are objects, one value per leaf (other writers write
    # them): kept as read, so a checkpoint passes them on; nothing here prunes by them
    # (index and partition columns are top-level primitives).
    if not all(_counts(v) for v in known["nullCount"].values()):
        raise ActionParseError("stats.nullCount values must be counts")
    return FileStats.model_construct(**known)


def _counts(v) -> bool:
    """A null count: a non-negative integer, or an object of them (a struct's, per field)."""
    if isinstance(v, dict):
        return all(_counts(x) for x in v.values())
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _decode_metadata(b: dict) -> list[Action]:
    conf = b.get("configuration") or {}
    if not isinstance(conf, dict) or not all(isinstance(v, str) for v in conf.values()):
        raise ActionParseError("configuration must map strings to strings")
    parts = b.get("partitionColumns") or []
    if not isinstance(parts, list) or not all(isinstance(c, str) for c in parts):
        raise ActionParseError("partitionColumns must be a list of column names")
    fmt = (b.get("format") or {}).get("provider", "parquet")
    if fmt != "parquet":
        raise ActionParseError(f"data files in format {fmt!r}; Delta tables hold Parquet")
    fields = parse_schema_string(b["schemaString"])
    if CONF_INDEX_COLUMNS not in conf or CONF_NUM_BUCKETS not in conf:
        # A Delta table nobody indexed (yet): no index columns. Readers refuse it with
        # NotIndexedError; IndexedTable.convert reads it this way to index it.
        return [Metadata(id=b["id"], name=b.get("name"), description=b.get("description"), schema=fields,
                         indexColumns=(), numBuckets=1, configuration=dict(conf),
                         createdTime=b.get("createdTime") or 0, partitionColumns=tuple(parts))]
    try:
        columns = json.loads(conf[CONF_INDEX_COLUMNS])
        buckets = int(conf[CONF_NUM_BUCKETS])
    except (json.JSONDecodeError, ValueError):
        raise ActionParseError(f"{CONF_INDEX_COLUMNS} / {CONF_NUM_BUCKETS} are not a JSON array / a number") from None
    if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns):
        raise ActionParseError(f"{CONF_INDEX_COLUMNS} must be a JSON array of column names")
    rest = {k: v for k, v in conf.items() if k not in (CONF_INDEX_COLUMNS, CONF_NUM_BUCKETS)}
    return [Metadata(
        id=b["id"],
        name=b.get("name"),
        description=b.get("description"),
        schema=fields,
        indexColumns=tuple(columns),
        numBuckets=buckets,
        configuration=rest,
        createdTime=b.get("createdTime") or 0,
        partitionColumns=tuple(parts),
    )]


def parse_schema_string(text) -> tuple[Field, ...]:
    """The table's fields from Spark's JSON schema (nested types kept as their JSON text,
    ``spec/types.py``)."""
    schema = _json_string(text, "schemaString")
    if not isinstance(schema, dict) or schema.get("type") != "struct" or not isinstance(schema.get("fields"), list):
        raise ActionParseError("schemaString must be a struct type with a list of fields")
    fields = []
    for f in schema["fields"]:
        if not isinstance(f, dict) or not isinstance(f.get("name"), str):
            raise ActionParseError("a schema field must be a JSON object with a name")
        t = f.get("type")
        try:
            check_type_value(t, f["name"])
        except NestedTypeError as e:
            raise ActionParseError(f"schemaString: {e}") from None
        meta = f.get("metadata") or {}
        for key in meta:
            if key.startswith("delta.generationExpression") or key.startswith("delta.identity") \
                    or key == "delta.invariants":
                from ..errors import UnsupportedFeatureError

                raise UnsupportedFeatureError(f"{key} on column {f.get('name')!r}")
        if TYPE_CHANGES in meta:
            check_type_changes(f.get("name"), meta[TYPE_CHANGES])
        fields.append(Field(name=f["name"], type=type_text(t), nullable=f.get("nullable", True),
                            metadata=meta if isinstance(meta, dict) else {}))
    return tuple(fields)


def _decode_protocol(b: dict) -> list[Action]:
    return [Protocol(
        minReaderVersion=b["minReaderVersion"],
        minWriterVersion=b["minWriterVersion"],
        readerFeatures=tuple(b["readerFeatures"]) if b.get("readerFeatures") is not None else None,
        writerFeatures=tuple(b["writerFeatures"]) if b.get("writerFeatures") is not None else None,
    )]


def _decode_domain_metadata(b: dict) -> list[Action]:
    return [DomainMetadata(domain=b["domain"], configuration=b.get("configuration") or "",
                           removed=bool(b.get("removed", False)))]


def _decode_txn(b: dict) -> list[Action]:
    return [Txn(appId=b["appId"], version=b["version"], lastUpdated=b.get("lastUpdated") or 0)]


_INFO_FIELDS = set(CommitInfo.model_fields) - {"extra"}


def _decode_commit_info(b: dict) -> list[Action]:
    known = {k: v for k, v in b.items() if k in _INFO_FIELDS and v is not None}
    if "inCommitTimestamp" in b and "timestamp" not in known:
        known["timestamp"] = b["inCommitTimestamp"]
    known.setdefault("timestamp", 0)
    known.setdefault("operation", "UNKNOWN")
    if not isinstance(known.get("operationParameters", {}), dict):
        known.pop("operationParameters")
    if not isinstance(known.get("operationMetrics", {}), dict):
        known.pop("operationMetrics")
    extra = {k: v for k, v in b.items() if k not in _INFO_FIELDS and k != COMMIT_INFO_KEY}
    out: list[Action] = [CommitInfo.model_validate({**known, "extra": extra})]
    ours = b.get(COMMIT_INFO_KEY)
    if ours is not None:
        if not isinstance(ours, dict) or not isinstance(ours.get("indexes", []), list):
            raise ActionParseError(f"commitInfo.{COMMIT_INFO_KEY} must be an object with a list 'indexes'")
        out.extend(IndexEntry.model_validate(e) for e in ours.get("indexes", []))
    return out


DECODERS = {
    "add": _decode_add,
    "remove": _decode_remove,
    "cdc": _decode_cdc,
    "metaData": _decode_metadata,
    "protocol": _decode_protocol,
    "txn": _decode_txn,
    "commitInfo": _decode_commit_info,
    "domainMetadata": _decode_domain_metadata,
}
