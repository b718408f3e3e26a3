"""Delta's change data feed: the names a reader of it and a writer of it share.

A table with ``delta.enableChangeDataFeed = true`` records what each commit changed: a commit
that updates or deletes rows writes change data files under ``_change_data/`` (the ``cdc``
action), whose rows carry the column ``_change_type``; a reader of the feed adds
``_commit_version`` and ``_commit_timestamp`` to every row. The JVM connector reads the feed
(``spark.read.option("readChangeFeed", "true")``, ``table_changes``) with these names, which
:mod:`indexeddf.spec.shared` hands it.
"""

from __future__ import annotations

ENABLE_PROPERTY = "delta.enableChangeDataFeed"
"""The table property that turns the feed on (Delta's name)."""

CHANGE_DATA_DIR = "_change_data"
"""The folder under the table root that holds the change data files."""

CHANGE_TYPE_COLUMN = "_change_type"
"""The column of a change row that says what happened to it: one of :data:`CHANGE_TYPES`."""

COMMIT_VERSION_COLUMN = "_commit_version"
"""The column of a change row holding the version of the commit that made the change (long)."""

COMMIT_TIMESTAMP_COLUMN = "_commit_timestamp"
"""The column of a change row holding when that commit was made (timestamp)."""

CHANGE_TYPES = ("insert", "delete", "update_preimage", "update_postimage")
"""The values of :data:`CHANGE_TYPE_COLUMN` (Delta's)."""

READ_OPTION = "readChangeFeed"
"""The Spark read option that asks for the feed instead of the table's rows (Delta's name)."""

READ_OPTION_ALIAS = "readChangeData"
"""Delta's older name of :data:`READ_OPTION`, still accepted."""
