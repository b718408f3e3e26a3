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

Anything a feature would change about reading (column mapping, ...)
or writing (check constraints, generated or identity columns, change data feed, ...)
that indexeddf does not implement is refused with :class:`UnsupportedFeatureError`
naming the feature: never a wrong answer, never a commit that breaks a rule another
engine relies on.
"""

from __future__ import annotations

from ..errors import UnsupportedFeatureError, UnsupportedProtocolError
from .actions import Metadata, Protocol
from .types import leaf_types

READ_FEATURES = frozenset({"timestampNtz", "vacuumProtocolCheck", "appendOnly", "invariants", "deletionVectors"})
"""Reader features indexeddf reads correctly (``deletionVectors``: every reader drops the
rows a file's deletion vector deletes, ``format/datafiles.py``)."""
WRITE_FEATURES = frozenset({
    "appendOnly",            # honoured: no data-changing remove while delta.appendOnly is true
    "invariants",            # only without invariants (columns with delta.invariants are refused)
    "checkConstraints",      # only without constraints (delta.constraints.* refused)
    "changeDataFeed",        # only while delta.enableChangeDataFeed is not true
    "generatedColumns",      # only without generated columns (refused in the schema)
    "timestampNtz",
    "vacuumProtocolCheck",   # vacuum checks the protocol as every write does
    "deletionVectors",       # removes carry the file's DV; rewrites drop its rows; vacuum keeps live DVs
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
    return with_table_features(base, required_features(configuration or {}))


def check_readable(p: Protocol, where: str) -> None:
    """Refuse a protocol whose reading needs something indexeddf does not do."""
    if p.minReaderVersion <= 1:
        return
    if p.minReaderVersion == 2:
        raise UnsupportedFeatureError("columnMapping")
    if p.minReaderVersion == 3:
        unknown = sorted(set(p.readerFeatures or ()) - READ_FEATURES)
        if unknown:
            raise UnsupportedFeatureError(", ".join(unknown))  # all of them, so none surprises later
        return
    raise UnsupportedProtocolError(
        f"{where} needs Delta reader version {p.minReaderVersion}; indexeddf reads versions 1 and 3 "
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
    and ``p`` itself when it already has them all."""
    readers = set(p.readerFeatures or ()) if p.minReaderVersion >= 3 else set()
    writers = writer_features(p)
    if features <= readers and features <= writers:
        return p
    return Protocol(minReaderVersion=3, minWriterVersion=7,
                    readerFeatures=tuple(sorted(readers | features)),
                    writerFeatures=tuple(sorted(writers | features)))


def deletion_vectors_enabled(configuration: dict[str, str]) -> bool:
    """Whether ``delta.enableDeletionVectors`` is true: changes then mark rows deleted in
    deletion vectors instead of rewriting their files."""
    return configuration.get(ENABLE_DELETION_VECTORS, "false").lower() == "true"


def required_features(configuration: dict[str, str]) -> set[str]:
    """The reader-writer features a table's properties ask for (Delta adds
    ``deletionVectors`` to the protocol when ``delta.enableDeletionVectors`` is true)."""
    return {DELETION_VECTORS} if deletion_vectors_enabled(configuration) else set()


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
    conf = m.configuration
    refused = []
    for feature in sorted(writer_features(p)):
        if feature == "columnMapping" and conf.get("delta.columnMapping.mode", "none") == "none":
            continue
        if feature == "identityColumns":
            continue  # identity columns are refused where the schema is read
        if feature not in WRITE_FEATURES:
            refused.append(feature)
    if refused:
        raise UnsupportedFeatureError(", ".join(refused))
    if any(k.startswith("delta.constraints.") for k in conf):
        raise UnsupportedFeatureError("checkConstraints")
    if conf.get("delta.enableChangeDataFeed", "false").lower() == "true":
        raise UnsupportedFeatureError(
            "changeDataFeed",
            f"{where} has delta.enableChangeDataFeed = true; indexeddf does not write change data "
            "files, so it refuses to write to it (set the property to false to let it).",
        )


def append_only(m: Metadata) -> bool:
    """Whether ``delta.appendOnly`` forbids removing data (deletes, overwrites)."""
    return m.configuration.get("delta.appendOnly", "false").lower() == "true"
