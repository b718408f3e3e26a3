"""Delta's change data feed: the names its files and readers use (PROTOCOL.md of Delta,
"Add CDC File" and "Change Data Files"), one place for both languages (the JVM connector's
reads of the feed get them through :mod:`indexeddf.spec.shared`). Nothing here does I/O:
``writer/change_data.py`` writes a commit's change data, ``reader/changes.py`` reads the
feed in Python, the connector's ``ChangeFeed`` in Spark."""

from __future__ import annotations

import pyarrow as pa

ENABLE_PROPERTY = "delta.enableChangeDataFeed"
"""The table property that turns the feed on (Delta's name)."""
READ_OPTION = "readChangeFeed"
"""The Spark read option that asks for the feed instead of the table's rows (Delta's name)."""
READ_OPTION_ALIAS = "readChangeData"
"""Delta's older name of :data:`READ_OPTION`, still accepted."""

CHANGE_DATA_DIR = "_change_data"
"""The folder (under the table root) of change data files, as Delta lays them out; a
partitioned table's files go into ``_change_data/<partition folders>/``."""
CHANGE_TYPE = "_change_type"
"""The column of a change data file (and of the feed) that says what happened to a row."""
COMMIT_VERSION = "_commit_version"
"""The feed's column of the version that made a change (int64)."""
COMMIT_TIMESTAMP = "_commit_timestamp"
"""The feed's column of the time of that version's commit (a timestamp)."""

INSERT = "insert"
"""A row the commit added."""
DELETE = "delete"
"""A row the commit removed."""
UPDATE_PREIMAGE = "update_preimage"
"""An updated row as it was before the commit."""
UPDATE_POSTIMAGE = "update_postimage"
"""An updated row as the commit left it."""
CHANGE_TYPES = (INSERT, DELETE, UPDATE_PREIMAGE, UPDATE_POSTIMAGE)
"""Every value of :data:`CHANGE_TYPE`."""


def labelled(rows: pa.Table, change_type: str) -> pa.Table:
    """``rows`` with the :data:`CHANGE_TYPE` column set to ``change_type``."""
    return rows.append_column(CHANGE_TYPE, pa.array([change_type] * rows.num_rows, pa.string()))


ROW_GROUP_BUCKETS = "indexeddf.rowGroupBuckets"
"""Key of a change data file's Parquet footer metadata (indexeddf's files): a JSON list with,
for each row group, its first and last bucket (``[first, last]``; the group holds rows of
those buckets and of none outside them) or null (rows of no bucket). A read of some keys
decodes only the row groups whose range holds one of their buckets; other engines ignore the
key, and their files lack it."""
