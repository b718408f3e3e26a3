"""Table properties (``metaData.configuration``): names, defaults and validation.

Every property a table understands is listed here with its default and meaning; an
unknown ``indexeddf.*`` or ``delta.*`` name is refused, so a typo never passes silently.
Delta's own properties that indexeddf does not act on are kept as they are, for the Delta
engines that do (:data:`DELTA_PROPERTIES`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from ..errors import InvalidOptionError


@dataclass(frozen=True)
class Property:
    """One table property: its default (as stored, a string), parser and description."""

    name: str
    default: str
    parse: Callable[[str], object]
    doc: str


def _positive_int(s: str) -> int:
    v = int(s)
    if v <= 0:
        raise ValueError("must be a positive integer")
    return v


def _page_size(s: str) -> int:
    return 0 if s.strip() == "0" else parse_byte_size(s)


def _ratio(s: str) -> float:
    v = float(s)
    if not 0 <= v <= 1:
        raise ValueError("must be a number between 0 and 1")
    return v


def _non_negative(s: str) -> float:
    v = float(s)
    if not v >= 0 or v == float("inf"):
        raise ValueError("must be a finite number >= 0")
    return v


_UNITS = {"": 0, "b": 0, "k": 1, "kb": 1, "m": 2, "mb": 2, "g": 3, "gb": 3, "t": 4, "tb": 4, "p": 5, "pb": 5}
_SIZE = re.compile(r"^\s*(\d+)\s*([a-z]*)\s*$")


def parse_byte_size(text: str) -> int:
    """A size as Delta's ``delta.targetFileSize`` takes it (Spark's ``byteStringAsBytes``): a
    number of bytes, or with a binary unit ``b``, ``k``/``kb``, ``m``/``mb``, ``g``/``gb``,
    ``t``/``tb``, ``p``/``pb`` (case-insensitive); it must be positive."""
    m = _SIZE.match(str(text).lower())
    if m is None or m.group(2) not in _UNITS:
        raise ValueError("must be a size in bytes, optionally with a unit (b, kb, mb, gb, tb, pb)")
    value = int(m.group(1)) << (10 * _UNITS[m.group(2)])
    if value <= 0:
        raise ValueError("must be a positive size")
    return value


DEFAULT_BUCKET_TARGET_BYTES = 256 << 20
"""Default of ``indexeddf.buckets.targetFileSize`` (why: ``spec/bucket_count.py``)."""

MAX_INDEX_KEYS = 1_000_000
"""The most keys one index lookup takes: a filter whose fixed values combine to more
keys is answered by a scan, and ``lookup()`` refuses more (use a join)."""

ISOLATION_LEVELS = ("WriteSerializable", "Serializable")


def _isolation(s: str) -> str:
    if s not in ISOLATION_LEVELS:
        raise ValueError(f"must be one of {', '.join(ISOLATION_LEVELS)}")
    return s


CODECS = {"zstd": "zstd", "snappy": "snappy", "gzip": "gzip", "none": "none", "uncompressed": "none"}
"""The Parquet codecs a data file may be written with, by Spark's names for them
(``spark.sql.parquet.compression.codec``), and pyarrow's name of each: every Delta reader
(Spark, delta-rs, DuckDB, Trino) decodes them."""


def _codec(s: str) -> str:
    codec = CODECS.get(s.strip().lower())
    if codec is None:
        raise ValueError(f"must be one of {', '.join(CODECS)}")
    return codec


def _bool(s: str) -> bool:
    if s.lower() not in ("true", "false"):
        raise ValueError("must be 'true' or 'false'")
    return s.lower() == "true"


PROPERTIES: dict[str, Property] = {
    p.name: p
    for p in [
        Property(
            "indexeddf.checkpointInterval", "10", _positive_int,
            "Write a Parquet checkpoint of the log every N commits.",
        ),
        Property(
            "indexeddf.targetRowGroupBytes", str(1024 * 1024), _positive_int,
            "Target size in bytes of one Parquet row group of a row-batch file (about 1 MB; "
            "a lookup decodes a whole row group per matching key and file).",
        ),
        Property(
            "indexeddf.parquet.compressionCodec", "zstd", _codec,
            "The codec new data files are compressed with: zstd, snappy, gzip or none (uncompressed), Spark's "
            "names. zstd (the default) makes smaller files; snappy (Spark's and Delta's default) costs less "
            "CPU to write and read, which a copy-on-write change pays for every file it rewrites: measured on "
            "64-character random strings, 1.5x the bytes for 40% less time to encode a file and 33% less to "
            "decode it. Files already written keep their codec.",
        ),
        Property(
            "indexeddf.parquet.pageSize", "0", _page_size,
            "Bytes of one Parquet data page of new data files, with Parquet's page index written (0, the "
            "default: the writer's pages of about 1 MB, no page index; takes a unit: 64kb). A change with "
            "deletion vectors and the change data feed on then reads each matched row's pre-image from the "
            "pages holding it, not its row groups. A column of long values gets many small pages, one of "
            "small values (a sorted key) few large ones; smaller pages cost a full read of the long "
            "columns more.",
        ),
        Property(
            "indexeddf.buckets.targetFileSize", str(DEFAULT_BUCKET_TARGET_BYTES), parse_byte_size,
            "Bytes of data a bucket should hold when a table is created without a bucket count: the "
            "count is the data's size over this, rounded up to a power of two, from 16 to 1024 (bytes "
            "as measured at create: Arrow in memory, Spark's plan estimate, or the Parquet files that "
            "convert indexes). Takes a unit as delta.targetFileSize does (128mb, 1gb).",
        ),
        Property(
            "indexeddf.commit.maxRetries", "100", _positive_int,
            "How many times a commit that lost a race is rebased and retried before it fails.",
        ),
        Property(
            "delta.isolationLevel", "WriteSerializable", _isolation,
            "WriteSerializable (Delta's default): a delete, overwrite or optimize commits although "
            "another writer blind-appended meanwhile (the append counts as after it). Serializable: "
            "such a commit fails with ConcurrentAppendError when the append touched what it read.",
        ),
        Property(
            "indexeddf.index.autoRefresh", "true", _bool,
            "Whether appends maintain the table's indexes in the same commit.",
        ),
        Property(
            "indexeddf.hybridScan.maxAppendedRatio", "0.3", _ratio,
            "An index whose uncovered live bytes exceed this share of all live bytes is not used.",
        ),
        Property(
            "indexeddf.hybridScan.maxDeletedRatio", "0.2", _ratio,
            "An index whose covered bytes were removed beyond this share is not used.",
        ),
        Property(
            "delta.enableDeletionVectors", "false", _bool,
            "Delta's switch for deletion vectors: true adds the deletionVectors table feature to the "
            "protocol (reader 3 / writer 7; readers without it, delta-rs 1.6.6 among them, can no longer "
            "read the table). Every indexeddf reader applies deletion vectors either way.",
        ),
        Property(
            "delta.appendOnly", "false", _bool,
            "Delta's switch for an append-only table: true refuses every commit that removes data "
            "(deletes, updates, merges that change rows, overwrites, restores).",
        ),
        Property(
            "indexeddf.vacuum.minRetentionHours", "168", _non_negative,
            "vacuum refuses a shorter retention (hours) unless enforce_retention=False.",
        ),
    ]
}


DELTA_PROPERTIES: frozenset[str] = frozenset({
    "delta.appendOnly", "delta.autoOptimize.autoCompact", "delta.autoOptimize.optimizeWrite",
    "delta.checkpoint.writeStatsAsJson", "delta.checkpoint.writeStatsAsStruct", "delta.checkpointInterval",
    "delta.checkpointPolicy", "delta.columnMapping.maxColumnId", "delta.columnMapping.mode",
    "delta.compatibility.symlinkFormatManifest.enabled", "delta.dataSkippingNumIndexedCols",
    "delta.dataSkippingStatsColumns", "delta.deletedFileRetentionDuration", "delta.enableChangeDataFeed",
    "delta.enableDeletionVectors", "delta.enableExpiredLogCleanup", "delta.enableIcebergCompatV1",
    "delta.enableIcebergCompatV2", "delta.enableInCommitTimestamps", "delta.enableRowTracking",
    "delta.enableTypeWidening", "delta.inCommitTimestampEnablementTimestamp",
    "delta.inCommitTimestampEnablementVersion", "delta.isolationLevel", "delta.logRetentionDuration",
    "delta.randomizeFilePrefixes", "delta.randomPrefixLength", "delta.setTransactionRetentionDuration",
    "delta.targetFileSize", "delta.tuneFileSizesForRewrites", "delta.universalFormat.enabledFormats",
})
"""Delta's table properties (its ``DeltaConfigs``) that a table may carry: ``delta.*`` names
outside this set are refused. indexeddf acts on those :data:`PROPERTIES` lists and on
``delta.appendOnly``, ``delta.columnMapping.*`` and ``delta.enableChangeDataFeed`` (every change
writes its change data); the others are kept for the Delta engines that read them."""

PROTOCOL_PROPERTIES = {"delta.minReaderVersion": 3, "delta.minWriterVersion": 7}
"""Delta's protocol properties and the highest version indexeddf reads / writes. ``ALTER TABLE
SET TBLPROPERTIES`` takes them (``validate(..., protocol=True)``) when the protocol the change
gives the table already has those versions, as with Delta's advice for column mapping
(``'delta.columnMapping.mode' = 'name', 'delta.minReaderVersion' = '2', 'delta.minWriterVersion'
= '5'``); they are never stored in the configuration (Delta keeps them out too)."""
_PROTOCOL_PROPERTIES = tuple(PROTOCOL_PROPERTIES)


def known_names() -> list[str]:
    """Every property name :func:`validate` accepts (other names than ``indexeddf.*`` and
    ``delta.*`` are free-form and accepted too)."""
    return sorted(set(PROPERTIES) | DELTA_PROPERTIES)


def validate(configuration: dict[str, str], protocol: bool = False) -> dict[str, str]:
    """Check names and values; returns the configuration with values as strings.

    ``protocol`` (``set_properties``): Delta's ``delta.minReaderVersion`` /
    ``delta.minWriterVersion`` are taken (a version indexeddf handles) and returned with the
    rest; the caller checks them against the protocol it commits (:data:`PROTOCOL_PROPERTIES`).

    Unknown ``indexeddf.*`` and ``delta.*`` names raise ``InvalidOptionError`` listing the
    known ones; so do Delta's protocol properties (``delta.minReaderVersion``,
    ``delta.minWriterVersion``, ``delta.feature.*``), which Delta turns into a protocol
    change and indexeddf derives from the properties that need a feature, and check
    constraints (``delta.constraints.*``), which only ``add_constraint`` / ``ADD CONSTRAINT``
    set (they check the table's rows first), as in Delta.
    """
    out = {}
    for key, value in configuration.items():
        value = str(value).lower() if isinstance(value, bool) else str(value)
        prop = PROPERTIES.get(key)
        if prop is None:
            if protocol and key in PROTOCOL_PROPERTIES:
                top = PROTOCOL_PROPERTIES[key]
                if not value.strip().isdigit() or not 1 <= int(value) <= top:
                    raise InvalidOptionError(f"table property {key}={value!r} must be a version from 1 to {top} "
                                             "(the highest indexeddf handles)")
                out[key] = value.strip()
                continue
            if key in _PROTOCOL_PROPERTIES or key.startswith("delta.feature."):
                raise InvalidOptionError(
                    f"table property {key!r} sets the table's protocol, which indexeddf derives from the "
                    "properties that need a table feature (delta.enableDeletionVectors, "
                    "delta.columnMapping.mode); set those instead")
            if key.startswith("delta.constraints."):
                raise InvalidOptionError(
                    f"[DELTA_ADD_CONSTRAINTS] table property {key!r} is a CHECK constraint: please use ALTER TABLE "
                    "ADD CONSTRAINT (or IndexedTable.add_constraint), which checks the table's rows first, to add "
                    "CHECK constraints")
            if key.startswith("indexeddf.") or (key.startswith("delta.") and key not in DELTA_PROPERTIES):
                known = ", ".join(known_names())
                raise InvalidOptionError(f"unknown table property {key!r}; known: {known}")
        else:
            try:
                prop.parse(value)
            except ValueError as e:
                raise InvalidOptionError(f"table property {key}={value!r}: {e}") from None
        out[key] = value
    return out


def get(configuration: dict[str, str], name: str, lenient: bool = False):
    """The parsed value of a property, falling back to its default.

    An invalid stored value raises ``InvalidOptionError``, or with ``lenient`` (the
    commit path, so that ``set_properties`` can still repair it) gives the default.
    """
    prop = PROPERTIES[name]
    value = configuration.get(name, prop.default)
    try:
        return prop.parse(value)
    except ValueError as e:
        if lenient:
            return prop.parse(prop.default)
        raise InvalidOptionError(f"table property {name}={value!r} is invalid ({e}); fix it with set_properties") from None


CHECKED_OPTION = "_checkedConstraints"
"""Private write option of the Python data source: the constraints (a JSON object, name -> SQL)
that Spark's plan already checked with Catalyst, which the tasks then do not check again."""
