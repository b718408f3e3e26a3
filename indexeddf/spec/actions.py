"""Log actions: one JSON object per line of a commit file, ``{"<kind>": {...}}``.

The models are immutable and serialize canonically (every field, in declaration order,
compact separators), so ``parse_line(to_line(a)) == a`` and ``to_line(parse_line(s)) == s``
for every line indexeddf writes. ``docs/PROTOCOL.md`` is the normative description.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic import Field as PField

from .deletion_vectors import DeletionVectorDescriptor
from .schema import Field
from .states import INDEX_STATES

READER_VERSION = 1
"""The ``minReaderVersion`` of a table indexeddf creates (Delta's lowest; 3 with the
``timestampNtz`` feature when a column needs it). What it reads: ``spec/features.py``."""
WRITER_VERSION = 2
"""The ``minWriterVersion`` of a table indexeddf creates (Delta's default, 2; 7 with
``timestampNtz``). What it writes to: ``spec/features.py``."""


MAX_MILLIS = 253_402_300_799_999
"""9999-12-31T23:59:59.999Z: the latest instant a timestamp in the log may name."""
Millis = Annotated[int, PField(ge=0, le=MAX_MILLIS)]
"""Milliseconds since the epoch, within what a date-time can show."""
Count = Annotated[int, PField(ge=0, le=2**63 - 1)]
"""A size, count, version or bucket: never negative, within int64."""
Int64 = Annotated[int, PField(ge=-(2**63), le=2**63 - 1)]
"""What Parquet and Spark can hold as a long (file ids)."""


class _Action(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class Protocol(_Action):
    """The reader and writer versions a client needs to read or write this table."""

    minReaderVersion: Count = READER_VERSION
    minWriterVersion: Count = WRITER_VERSION
    readerFeatures: tuple[str, ...] | None = None
    """Delta table features a reader must support (reader version 3 only)."""
    writerFeatures: tuple[str, ...] | None = None
    """Delta table features a writer must support (writer version 7 only)."""


class Metadata(_Action):
    """Table identity, schema, bucketing and configuration. The latest one wins on replay."""

    id: str
    name: str | None = None
    description: str | None = None
    schema_: tuple[Field, ...] = PField(alias="schema")
    indexColumns: tuple[str, ...]
    numBuckets: Annotated[int, PField(ge=1, le=2**31 - 1)]
    configuration: dict[str, str] = {}
    createdTime: Millis
    partitionColumns: tuple[str, ...] = ()
    """Delta's ``partitionColumns``: each file holds rows of one value of these columns,
    named by its ``partitionValues`` (``spec/partitions.py``); empty when unpartitioned."""


class FileStats(_Action):
    """Per-file statistics. Values are JSON renderings (see PROTOCOL.md, "Statistics")."""

    numRecords: Count | None = None
    """Rows in the file; None when the writer (not indexeddf) left it out."""
    minValues: dict[str, Any] = {}
    maxValues: dict[str, Any] = {}
    nullCount: dict[str, Count] = {}


_BUCKET_SUFFIX = re.compile(r"_(\d+)\.parquet$")


def named_with_bucket(path: str, bucket: int) -> bool:
    """Whether a data file's name ends in ``_<bucket>.parquet`` (PROTOCOL.md 2.2), where
    Spark's bucketed file scans read a file's bucket from; earlier writers left it out."""
    m = _BUCKET_SUFFIX.search(path)
    return m is not None and int(m.group(1)) == bucket


class AddFile(_Action):
    """A row-batch file that becomes part of the table."""

    path: str
    size: Count
    modificationTime: Millis
    dataChange: bool = True
    bucket: Count | None
    """The file's bucket; None for a file another Delta writer added (it may hold rows
    of every bucket until ``optimize(mode="full")`` rewrites it)."""
    fileId: Int64
    stats: FileStats | None = None
    sorted: bool = False
    """The rows are ordered by the table's index columns, ascending, nulls first, as Spark
    orders them (the ``indexeddf.sorted`` tag, PROTOCOL.md §4.3.1): a bucketed Spark scan
    of single-file buckets can then skip sorting for a merge join."""
    deletionVector: DeletionVectorDescriptor | None = None
    """The rows of the file that are no longer in the table (Delta's ``deletionVector``);
    None when every row of the file is live."""
    partitionValues: dict[str, str | None] = {}
    """The file's value of each partition column, serialized as Delta does (None: NULL);
    empty in an unpartitioned table."""

    def removal(self, timestamp: int, data_change: bool = True) -> "RemoveFile":
        """The ``remove`` of this logical file at ``timestamp`` (ms): same path, id, bucket
        and size, and its deletion vector, which Delta requires a remove to carry (the
        (path, deletion vector) pair is what replay reconciles)."""
        return RemoveFile(path=self.path, deletionTimestamp=timestamp, dataChange=data_change, bucket=self.bucket,
                          fileId=self.fileId, size=self.size, deletionVector=self.deletionVector,
                          partitionValues=self.partitionValues)


class RemoveFile(_Action):
    """A row-batch file that leaves the table (kept on disk until vacuum)."""

    path: str
    deletionTimestamp: Millis
    dataChange: bool = True
    bucket: Count | None
    fileId: Int64
    size: Count
    deletionVector: DeletionVectorDescriptor | None = None
    """The deletion vector of the logical file removed (the one its add carried)."""
    partitionValues: dict[str, str | None] = {}
    """The removed file's partition values (as its add named them)."""


class CdcFile(_Action):
    """Delta's ``cdc`` action ("Add CDC File"): a file of the commit's change data, under
    ``_change_data/``, holding the rows the commit changed with the extra column
    ``_change_type`` (``insert``, ``delete``, ``update_preimage``, ``update_postimage``).
    It is not part of any snapshot's state (replay and checkpoints leave it out); a reader of
    the change data feed reads a commit's cdc files instead of its add and remove actions."""

    path: str
    partitionValues: dict[str, str | None] = {}
    """The partition values of the file's rows (as an add names them); empty when unpartitioned."""
    size: Count
    dataChange: bool = False
    """Always false: a cdc file changes no data of the table."""
    tags: dict[str, str] | None = None


class IndexFile(_Action):
    """One file of an index: the entries of one index bucket for some data files."""

    path: str
    size: Count
    bucket: Count
    numEntries: Count
    fileIds: tuple[Int64, ...] = ()
    """The data files (by file id) whose rows this index file holds entries for."""


PRIMARY_INDEX = "primary"
"""Name of the index on the table's own index columns, built with the data."""

class IndexEntry(_Action):
    """A change to one index. Replay keeps the latest fields per ``name`` and reconciles
    the index's file set: ``(files before - removedFiles) + files``."""

    name: str
    columns: tuple[str, ...]
    kind: Literal["primary", "secondary"]
    state: Literal[INDEX_STATES]  # type: ignore[valid-type]
    numBuckets: Annotated[int, PField(ge=1, le=2**31 - 1)]
    coveredVersion: Annotated[int, PField(ge=-1, le=2**63 - 1)]
    """The table version whose live files this index covers (after this commit)."""
    files: tuple[IndexFile, ...] = ()
    """Index files added by this action."""
    removedFiles: tuple[str, ...] = ()
    """Paths of index files this action removes from the index."""
    properties: dict[str, str] = {}


class Txn(_Action):
    """The last committed version of an idempotent writer (``appId``)."""

    appId: str
    version: Int64
    lastUpdated: Millis


class CommitInfo(_Action):
    """Provenance of a commit: what ran, on which version, when (ms since the epoch, UTC)."""

    timestamp: Millis
    operation: str
    operationParameters: dict[str, Any] = {}
    readVersion: Count | None = None
    isolationLevel: str = "Serializable"
    isBlindAppend: bool = False
    engineInfo: str = ""
    operationMetrics: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    """Fields other writers put in their commitInfo (kept for ``history``)."""


class DomainMetadata(_Action):
    """Delta's ``domainMetadata``: a named domain's configuration (a string another engine
    reads, e.g. clustering columns or collation versions). indexeddf writes none; replay
    keeps the latest per domain (dropped when ``removed``) so checkpoints keep them."""

    domain: str
    configuration: str
    removed: bool = False


Action = Union[Protocol, Metadata, AddFile, RemoveFile, CdcFile, IndexEntry, Txn, CommitInfo, DomainMetadata]

KEYS: dict[type, str] = {
    Protocol: "protocol",
    Metadata: "metaData",
    AddFile: "add",
    RemoveFile: "remove",
    CdcFile: "cdc",
    IndexEntry: "index",
    Txn: "txn",
    CommitInfo: "commitInfo",
    DomainMetadata: "domainMetadata",
}
"""The JSON key of each action class."""
CLASSES: dict[str, type] = {v: k for k, v in KEYS.items()}


class ActionParseError(ValueError):
    """A line is not a valid action; callers turn it into ``CorruptLogError``."""


def to_line(action: Action) -> str:
    """The canonical one-line JSON form of an action (no trailing newline)."""
    body = action.model_dump_json(by_alias=True)
    return '{"' + KEYS[type(action)] + '":' + body + "}"


def parse_line(line: str) -> Action:
    """Parse one log line into its action; raises ``ActionParseError`` with the reason."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        raise ActionParseError(f"not valid JSON ({e.msg} at column {e.colno})") from None
    if not isinstance(obj, dict) or len(obj) != 1:
        raise ActionParseError("a line must be a JSON object with exactly one action key")
    (key, body), = obj.items()
    cls = CLASSES.get(key)
    if cls is None:
        raise ActionParseError(f"unknown action {key!r}")
    try:
        return cls.model_validate(body)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ActionParseError(f"invalid {key!r} action: {where}: {first['msg']}") from None


def to_lines(actions: list[Action]) -> str:
    """A commit file's text: one action per line, newline-terminated."""
    return "".join(to_line(a) + "\n" for a in actions)
