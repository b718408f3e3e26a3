"""The constants the JVM connector shares with the Python reader and planner, as one JSON
document.

The connector (``connector/src/main/java``) hashes keys into buckets, caps lookups, applies
the staleness limits and refuses protocols exactly as the Python code does; the values it
needs are defined here once, in Python, and :mod:`indexeddf.spark.connector` writes
:func:`shared_json` into the jar as :data:`RESOURCE` when it builds it (the jar is rebuilt
whenever the document changes). The connector's ``io.indexeddf.log.Spec`` reads it when its
class loads and fails loudly without it, so the two languages cannot drift apart.
"""

from __future__ import annotations

import json
from typing import get_args

from . import bucketing, change_data, config, constraints, deletion_vectors, delta, features, states
from .actions import IndexEntry

RESOURCE = "io/indexeddf/log/spec.json"
"""Where in the connector's jar (and class path) the document is."""

_PRIMARY_KIND = get_args(IndexEntry.model_fields["kind"].annotation)[0]
"""The ``kind`` of a primary index (the first of the kinds ``IndexEntry`` allows)."""

_CONNECTOR_PROPERTIES = ("indexeddf.hybridScan.maxAppendedRatio", "indexeddf.hybridScan.maxDeletedRatio")
"""Table properties the connector reads, whose defaults it takes from the document."""


def shared_constants() -> dict:
    """The shared constants by the name the connector reads them under."""
    return {
        "bucketSeed": bucketing.SEED,
        "keyHashSeed": bucketing.KEY_HASH_SEED,
        "indexBlockShare": bucketing.INDEX_BLOCK_SHARE,
        "maxIndexKeys": config.MAX_INDEX_KEYS,
        "propertyDefaults": {name: config.PROPERTIES[name].default for name in _CONNECTOR_PROPERTIES},
        "readableStates": sorted(states.READABLE_STATES),
        "readerFeatures": sorted(features.READ_FEATURES),
        "primaryKind": _PRIMARY_KIND,
        "confIndexColumns": delta.CONF_INDEX_COLUMNS,
        "confNumBuckets": delta.CONF_NUM_BUCKETS,
        "tagBucket": delta.TAG_BUCKET,
        "tagFileId": delta.TAG_FILE_ID,
        "tagSorted": delta.TAG_SORTED,
        "confTxnAppId": delta.TXN_APP_ID_CONF,
        "confTxnVersion": delta.TXN_VERSION_CONF,
        "dvMagicNumber": deletion_vectors.MAGIC_NUMBER,
        "dvNativeMagicNumber": deletion_vectors.NATIVE_MAGIC_NUMBER,
        "constraintPrefix": constraints.PREFIX,
        "constraintViolation": constraints.VIOLATION,
        "newConstraintViolation": constraints.NEW_VIOLATION,
        "checkedConstraintsOption": constraints.CHECKED_OPTION,
        "changeFeedProperty": change_data.ENABLE_PROPERTY,
        "changeTypeColumn": change_data.CHANGE_TYPE,
        "commitVersionColumn": change_data.COMMIT_VERSION,
        "commitTimestampColumn": change_data.COMMIT_TIMESTAMP,
        "changeFeedOption": change_data.READ_OPTION,
        "changeFeedOptionAlias": change_data.READ_OPTION_ALIAS,
    }


def shared_json() -> bytes:
    """:func:`shared_constants` as the UTF-8 JSON the jar holds (keys sorted: the same
    constants always give the same bytes, so the jar's content hash only changes with them)."""
    return (json.dumps(shared_constants(), indent=1, sort_keys=True) + "\n").encode()
