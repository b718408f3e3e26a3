"""Delta protocol versions and table features: which ones indexeddf writes, reads and refuses.

A table indexeddf creates uses Delta's lowest versions that can hold it: reader 1 /
writer 2 (Delta's defaults; delta-rs and Spark create the same), or reader 3 / writer 7
with the single feature ``timestampNtz`` when a column is a timestamp without time
zone (Delta requires the feature for that type). indexeddf declares no feature of its
own: everything it adds lives where Delta lets any writer put it (tags,
configuration, commitInfo), so every Delta writer can keep appending.

``deletionVectors`` (reader 3 / writer 7) is read: every reader drops the rows a file's
deletion vector deletes. It is written as far as indexeddf's writers preserve it: a
``remove`` carries the deletion vector of the file it removes, and setting
``delta.enableDeletionVectors = true`` adds the feature to the protocol
(:func:`with_table_features`).

``columnMapping`` (reader 2 / writer 5, or the feature) is read and written: files,
``stats`` and ``partitionValues`` use each column's physical name, files carry field ids,
new columns get a physical name and an id (``spec/column_mapping.py``).

``checkConstraints`` (writer 3) is written: every write checks the table's
``delta.constraints.*`` (``spec/constraints.py``; Spark's writes with Catalyst).

``changeDataFeed`` (writer 4, or the writer feature) is written: while
``delta.enableChangeDataFeed`` is true every MERGE, UPDATE and DELETE writes its changed rows
into ``_change_data/`` files named by ``cdc`` actions of the same commit; setting the property
upgrades the protocol as Delta does (:func:`upgraded`).

Anything a feature would change about reading
or writing (generated or identity columns, ...)
that indexeddf does not implement is refused with :class:`UnsupportedFeatureError`
naming the feature: never a wrong answer, never a commit that breaks a rule another
engine relies on.
"""

from __future__ import annotations

from ..errors import UnsupportedFeatureError, UnsupportedProtocolError
from .actions import Metadata, Protocol
from .column_mapping import FEATURE as COLUMN_MAPPING
from .column_mapping import is_mapped
from .types import leaf_types

READ_FEATURES = frozenset({"timestampNtz", "vacuumProtocolCheck", "appendOnly", "invariants", "deletionVectors",
                           "columnMapping", "typeWidening", "typeWidening-preview", "v2Checkpoint"})
"""Reader features indexeddf reads correctly (``deletionVectors``: every reader drops the
rows a file's deletion vector deletes, ``format/datafiles.py``; ``columnMapping``: files
are read by physical name or field id, ``spec/column_mapping.py``; ``typeWidening``: files
written before a widening are cast to the table's type, ``spec/type_widening.py``;
``v2Checkpoint``: UUID-named checkpoints and sidecar files, ``format/checkpoint.py``)."""
V2_CHECKPOINT = "v2Checkpoint"
"""Delta's feature for v2 spec checkpoints (UUID-named, with sidecar files)."""
WRITE_FEATURES = frozenset({
    "appendOnly",            # honoured: no data-changing remove while delta.appendOnly is true
    "invariants",            # only without invariants (columns with delta.invariants are refused)
    "checkConstraints",      # every write checks the delta.constraints.* of the table (spec/constraints.py)
    "changeDataFeed",        # every MERGE / UPDATE / DELETE writes its cdc files while delta.enableChangeDataFeed is true
    "generatedColumns",      # only without generated columns (refused in the schema)
    "timestampNtz",
    "vacuumProtocolCheck",   # vacuum checks the protocol as every write does
    "deletionVectors",       # removes carry the file's DV; rewrites drop its rows; vacuum keeps live DVs
    "columnMapping",         # files, stats and partitionValues by physical name, field ids; new columns get both
    "typeWidening",          # files are written in the table's (widened) type; delta.typeChanges is kept
    "typeWidening-preview",
    "v2Checkpoint",          # checkpoints written with the checkpointMetadata row of the v2 spec
    "domainMetadata",        # other engines' domains are kept in checkpoints; indexeddf writes none
    "collations",            # __COLLATIONS kept in the schema; stats are binary (valid); no index on a collated column
})
"""Writer features indexeddf can write under (each with the condition next to it)."""

# The features a legacy writer version implies (Delta PROTOCOL.md, "Table Features").
_LEGACY_WRITER = {
    2: {"appendOnly", "invariants"},
    3: {"checkConstraints"},
    4: {"changeDataFeed", "generatedColumns"},
    5: {"columnMapping"},
    6: {"identityColumns"},
}


def protocol_for(fields, configuration: dict[str, str] | None = None) -> Protocol:
    """The protocol of a new table with these fields and properties (see the module
    docstring)."""
    if any("timestamp_ntz" in leaf_types(f.type) for f in fields):
        base = Protocol(minReaderVersion=3, minWriterVersion=7,
                        readerFeatures=("timestampNtz",), writerFeatures=("timestampNtz",))
    else:
        base = Protocol(minReaderVersion=1, minWriterVersion=2)
    return upgraded(base, configuration or {})


ENGINES = {
    "variantType": "Spark 4 with delta-spark 4",
    "variantType-preview": "Spark 4 with delta-spark 4",
    "variantShredding-preview": "Spark 4 with delta-spark 4",
    "catalogManaged": "Spark with delta-spark and the table's catalog",
    "rowTracking": "Spark with delta-spark",
    "identityColumns": "Spark with delta-spark",
    "icebergCompatV1": "Spark with delta-spark",
    "icebergCompatV2": "Spark with delta-spark",
    "clustering": "Spark with delta-spark",
    "inCommitTimestamp": "Spark with delta-spark, or delta-rs",
    "generatedColumns": "Spark with delta-spark, or delta-rs",
}
"""Engines that implement each Delta feature indexeddf refuses (named in the refusal);
any other feature: a Delta engine that knows it (delta-spark is Delta's reference)."""


def refusal(features, verb: str) -> UnsupportedFeatureError:
    """The typed refusal of ``features`` (all of them), naming an engine for each."""
    names = sorted(features)
    engines = "; ".join(f"{f}: {ENGINES.get(f, 'Spark with delta-spark, or another Delta engine that knows it')}"
                        for f in names)
    return UnsupportedFeatureError(
        ", ".join(names),
        f"the table uses the Delta feature(s) {', '.join(names)}, which indexeddf does not implement, so it does not "
        f"{verb} it; engines that do: {engines}. Or rewrite the table without the feature.")


def check_readable(p: Protocol, where: str) -> None:
    """Refuse a protocol whose reading needs something indexeddf does not do."""
    if p.minReaderVersion <= 1:
        return
    if p.minReaderVersion == 2:
        return  # reader 2 is column mapping (spec/column_mapping.py)
    if p.minReaderVersion == 3:
        unknown = sorted(set(p.readerFeatures or ()) - READ_FEATURES)
        if unknown:
            raise refusal(unknown, "read")  # all of them, so none surprises later
        return
    raise UnsupportedProtocolError(
        f"{where} needs Delta reader version {p.minReaderVersion}; indexeddf reads versions 1 to 3 "
        "(with the features it implements). Read it with a newer Delta engine."
    )


DELETION_VECTORS = "deletionVectors"
"""Delta's table feature for deletion vectors (reader 3 / writer 7)."""
ENABLE_DELETION_VECTORS = "delta.enableDeletionVectors"
"""The table property that asks for deletion vectors (Delta's name); ``true`` needs the
``deletionVectors`` feature in the protocol."""


def with_table_features(p: Protocol, features: set[str]) -> Protocol:
    """``p`` upgraded to reader 3 / writer 7 with ``features`` added to both feature lists,
    as Delta upgrades a table when a property needs a reader-writer feature: the features
    the legacy versions implied are listed explicitly (so nothing the table had is lost),
    and ``p`` itself when it already has them all. Column mapping alone on a legacy
    protocol gives the legacy reader 2 / writer 5 instead."""
    readers = set(p.readerFeatures or ()) if p.minReaderVersion >= 3 else set()
    writers = writer_features(p)
    if features <= readers and features <= writers:
        return p
    if features <= {COLUMN_MAPPING} and p.minReaderVersion < 3 and p.minWriterVersion < 7:
        # Reader 2 / writer 5, as delta-rs and Spark create a column-mapped table: more
        # readers read it than the feature lists (delta-rs's Arrow reader among them).
        return Protocol(minReaderVersion=max(2, p.minReaderVersion), minWriterVersion=max(5, p.minWriterVersion))
    return Protocol(minReaderVersion=3, minWriterVersion=7,
                    readerFeatures=tuple(sorted(readers | features)),
                    writerFeatures=tuple(sorted(writers | features)))


def deletion_vectors_enabled(configuration: dict[str, str]) -> bool:
    """Whether ``delta.enableDeletionVectors`` is true: changes then mark rows deleted in
    deletion vectors instead of rewriting their files."""
    return configuration.get(ENABLE_DELETION_VECTORS, "false").lower() == "true"


def required_features(configuration: dict[str, str]) -> set[str]:
    """The reader-writer features a table's properties ask for (Delta adds
    ``deletionVectors`` to the protocol when ``delta.enableDeletionVectors`` is true, and
    ``columnMapping`` when ``delta.columnMapping.mode`` is ``name`` or ``id``)."""
    out = {DELETION_VECTORS} if deletion_vectors_enabled(configuration) else set()
    return out | ({COLUMN_MAPPING} if is_mapped(configuration) else set())


CHANGE_DATA_FEED = "changeDataFeed"
"""Delta's writer feature for the change data feed (implied by legacy writer version 4)."""
ENABLE_CHANGE_DATA_FEED = "delta.enableChangeDataFeed"
"""The table property that turns the change data feed on (Delta's name): every MERGE, UPDATE
and DELETE then writes its changed rows as ``cdc`` files."""


def change_data_feed_enabled(configuration: dict[str, str]) -> bool:
    """Whether ``delta.enableChangeDataFeed`` is true."""
    return configuration.get(ENABLE_CHANGE_DATA_FEED, "false").lower() == "true"


def upgraded(p: Protocol, configuration: dict[str, str]) -> Protocol:
    """``p`` with what the table's properties need, as Delta upgrades it when a property is set:
    the reader-writer features of :func:`required_features` (:func:`with_table_features`), and
    for ``delta.enableChangeDataFeed = true`` the writer-only ``changeDataFeed``: legacy writer
    version 4 on a table below writer 7 (Delta's and delta-rs's (1, 4)), the writer feature at 7.
    ``p`` itself when it has them all."""
    p = with_table_features(p, required_features(configuration))
    if not change_data_feed_enabled(configuration) or CHANGE_DATA_FEED in writer_features(p):
        return p
    if p.minWriterVersion < 7:
        return p.model_copy(update={"minWriterVersion": max(4, p.minWriterVersion)})
    return p.model_copy(update={"writerFeatures": tuple(sorted({*(p.writerFeatures or ()), CHANGE_DATA_FEED}))})


def writer_features(p: Protocol) -> set[str]:
    """The writer features a protocol asks for (explicit at 7, implied below)."""
    if p.minWriterVersion >= 7:
        return set(p.writerFeatures or ())
    out: set[str] = set()
    for version, features in _LEGACY_WRITER.items():
        if p.minWriterVersion >= version:
            out |= features
    return out


def check_writable(p: Protocol, m: Metadata, where: str) -> None:
    """Refuse writing where a feature's rules would be broken by an indexeddf commit."""
    if p.minWriterVersion > 7:
        raise UnsupportedProtocolError(
            f"{where} needs Delta writer version {p.minWriterVersion}; indexeddf writes up to 7. "
            "Write to it with a newer Delta engine."
        )
    refused = []
    for feature in sorted(writer_features(p)):
        if feature == "identityColumns":
            continue  # identity columns are refused where the schema is read
        if feature not in WRITE_FEATURES:
            refused.append(feature)
    if refused:
        raise refusal(refused, "write to")


COLLATIONS = "__COLLATIONS"
"""The column metadata key of Delta's collations (a column's name -> its collation)."""


def collation(field) -> str | None:
    """The collation of a string column (a ``Field``), None for Delta's default, UTF-8 binary
    comparison (``spark.UTF8_BINARY``, or none named)."""
    named = field.metadata.get(COLLATIONS)
    value = named.get(field.name) if isinstance(named, dict) else None
    if value is None or str(value).split(".")[:2] == ["spark", "UTF8_BINARY"]:
        return None
    return str(value)


def append_only(m: Metadata) -> bool:
    """Whether ``delta.appendOnly`` forbids removing data (deletes, overwrites)."""
    return m.configuration.get("delta.appendOnly", "false").lower() == "true"
