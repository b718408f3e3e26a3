"""Typed errors of indexeddf.

Every error a user can cause derives from :class:`IndexedDFError`. Each message says
what happened and what to do about it; nothing already committed is lost when one of
these is raised.
"""

from __future__ import annotations


class IndexedDFError(Exception):
    """Base class of every error raised by indexeddf."""


class TableNotFoundError(IndexedDFError):
    """The path holds no table (no ``_delta_log/``), or one of the first layout (then
    the message says to run ``indexeddf upgrade``)."""


class NotIndexedError(TableNotFoundError):
    """The path holds a Delta table that indexeddf has not indexed yet (``IndexedTable.convert``)."""


class TableExistsError(IndexedDFError):
    """``create`` was asked for a path that already holds a table."""


class SchemaMismatchError(IndexedDFError):
    """Written data does not match the table schema; ``columns`` names the differences."""

    def __init__(self, message: str, columns: list[str] | None = None):
        super().__init__(message)
        self.columns = list(columns or [])


class UnsupportedTypeError(SchemaMismatchError):
    """A column has a type the format cannot store or bucket by."""


class NestedIndexColumnError(UnsupportedTypeError):
    """An index (bucketing) column is a struct, array or map column: index columns are
    top-level columns of a primitive type; ``columns`` names the nested ones."""


class SchemaEvolutionError(SchemaMismatchError):
    """A schema change that indexeddf refuses (``schema_mode``, ``mergeSchema``,
    ``add_columns``, ``ALTER TABLE ADD COLUMNS``); raised before anything is written.
    ``columns`` names the columns involved. The subclasses say which rule refused it."""


class TypeChangeError(SchemaEvolutionError):
    """A column's type would change in a way old data files cannot be read as: only
    ``byte`` -> ``short`` -> ``integer`` widen (the same Parquet type, so every Delta
    reader reads old files as the wider type)."""


class ColumnCaseConflictError(SchemaEvolutionError):
    """A new column's name differs from an existing one only by case: Spark resolves
    names case-insensitively and could not tell the two apart."""


class IndexColumnChangeError(SchemaEvolutionError):
    """A schema change would drop, rename or retype a column the table is bucketed or
    indexed by."""


class InvalidOptionError(IndexedDFError, ValueError):
    """An option or argument has an unknown name or a value out of range."""


class AmbiguousColumnError(SchemaMismatchError, InvalidOptionError):
    """An unqualified column name in a SQL expression matches columns of more than one
    table (a merge's target and source): qualify it with the table's alias."""


class ReplaceWhereMismatchError(InvalidOptionError):
    """A selective overwrite (``replaceWhere`` in Spark, ``predicate=`` of
    ``IndexedTable.overwrite``) was given rows its predicate does not select: every row
    written must make the predicate true (NULL is not true), as Delta checks
    (``DELTA_REPLACE_WHERE_MISMATCH``). ``predicate`` is the predicate, ``rows`` how many
    rows failed it. Nothing was committed."""

    def __init__(self, message: str, predicate: str = "", rows: int = 0):
        super().__init__(message)
        self.predicate = predicate
        self.rows = rows


class ConstraintViolationError(IndexedDFError):
    """Rows break a CHECK constraint of the table (``delta.constraints.<name>``): a write gave a
    row for which the constraint is false or NULL (Delta's ``DELTA_VIOLATE_CONSTRAINT_WITH_VALUES``,
    ``values`` the row's values of the columns it reads), or ``add_constraint`` found ``rows``
    rows of the table that break the new one (``DELTA_NEW_CHECK_CONSTRAINT_VIOLATION``).
    ``constraint`` names it, ``expression`` is its SQL. Nothing was committed."""

    def __init__(self, message: str, constraint: str = "", expression: str = "", values: dict | None = None,
                 rows: int = 0):
        super().__init__(message)
        self.constraint = constraint
        self.expression = expression
        self.values = values or {}
        self.rows = rows


class ConstraintExistsError(IndexedDFError):
    """``add_constraint`` / ``ADD CONSTRAINT`` named a CHECK constraint the table already has
    (Delta's ``DELTA_CONSTRAINT_ALREADY_EXISTS``): drop it first."""


class ConstraintNotFoundError(IndexedDFError):
    """``drop_constraint`` / ``DROP CONSTRAINT`` named a CHECK constraint the table does not have
    (Delta's ``DELTA_CONSTRAINT_DOES_NOT_EXIST``); ``IF EXISTS`` / ``raise_if_not_exists=False``
    makes that a no-op."""


class IndexNotFoundError(IndexedDFError):
    """No index of that name exists on the table."""


class IndexExistsError(IndexedDFError):
    """An index of that name already exists (and is not DELETED)."""


class InvalidIndexStateError(IndexedDFError):
    """The index is in a state that does not allow the operation (e.g. refresh a DELETED index)."""


class VersionNotFoundError(IndexedDFError):
    """Time travel asked for a version or timestamp the log does not hold."""


class SourceChangedError(IndexedDFError):
    """A table read as a stream (``spark.readStream.format("indexeddf")``) had rows removed or
    changed (DELETE, UPDATE, MERGE, an overwrite, deletion vectors given) at a version the
    stream reached, and the stream was not told to skip such commits: Delta's
    ``DELTA_SOURCE_TABLE_IGNORE_CHANGES`` / ``DELTA_SOURCE_IGNORE_DELETE``. Set
    ``skipChangeCommits`` (or ``ignoreDeletes`` for commits that only delete), or start the
    query again with a new checkpoint location."""


class SourceSchemaChangedError(IndexedDFError):
    """The schema of a table read as a stream changed after the stream started (Delta's
    ``DELTA_SCHEMA_CHANGED``): restart the query, which then reads on with the new schema."""


class ConcurrentModificationError(IndexedDFError):
    """A commit lost a race against another writer and could not be rebased.

    The subclass says which kind of conflict it was. The losing transaction's files
    have been deleted; re-read the table and retry the operation.
    """


class ConcurrentAppendError(ConcurrentModificationError):
    """Another writer added files to data this transaction read (overwrite/delete)."""


class ConcurrentDeleteReadError(ConcurrentModificationError):
    """Another writer removed files this transaction read."""


class ConcurrentDeleteDeleteError(ConcurrentModificationError):
    """Another writer removed files this transaction also removes."""


class MetadataChangedError(ConcurrentModificationError):
    """Another writer changed the table metadata since this transaction read it."""


class ConcurrentSchemaChangeError(ConcurrentModificationError):
    """This transaction changes the table's schema (a new ``metaData``), and another
    writer committed data since this transaction read the table: that data was checked
    against the old schema, so the schema change does not rebase over it (Delta's rule:
    a metadata change conflicts with concurrent transactions). Nothing was written;
    re-read the table and retry."""


class ProtocolChangedError(ConcurrentModificationError):
    """Another writer changed the protocol version since this transaction read it."""


class ConcurrentIndexError(ConcurrentModificationError):
    """Another writer changed an index that this transaction also changes."""


class CommitRetriesExceededError(ConcurrentModificationError):
    """The commit kept losing races until the retry budget ran out."""


class CorruptLogError(IndexedDFError):
    """A log or checkpoint file cannot be parsed; the message names the file and line."""

    def __init__(self, message: str, path: str | None = None, line: int | None = None):
        super().__init__(message)
        self.path = path
        self.line = line


class UnsupportedProtocolError(IndexedDFError):
    """The table needs a newer reader or writer than this version of indexeddf."""


class UnsupportedFeatureError(UnsupportedProtocolError):
    """The table uses a Delta feature indexeddf does not implement (``feature`` names it;
    several, comma-separated, when the table asks for several)."""

    def __init__(self, feature: str, message: str | None = None):
        self.feature = feature
        super().__init__(
            message
            or f"the table uses the Delta feature(s) {feature}, which indexeddf does not implement; "
            "read it with a Delta engine that does (delta-rs, Spark with delta-spark), or rewrite "
            "the table without the feature"
        )


class ConstraintNotEvaluableError(UnsupportedFeatureError):
    """A CHECK constraint uses SQL that indexeddf's Python expressions do not evaluate
    (``indexeddf.spec.expressions``), so a write without Spark cannot check it: write through
    Spark (``df.write.format("indexeddf")``, ``INSERT``, ``MERGE``), which evaluates every
    constraint with Catalyst."""

    def __init__(self, message: str):
        super().__init__("checkConstraints", message)


class CorruptDeletionVectorError(CorruptLogError):
    """A deletion vector the log names fails its checks (size, CRC-32, format, or a
    cardinality that differs from the descriptor's); ``path`` names its file, or the log
    for an inline one. Reading stops rather than return rows that may be deleted."""


class UnsafePathError(CorruptLogError):
    """A log action names a path outside the table root (absolute, or with ``..``)."""


class MissingFileError(IndexedDFError):
    """A data or index file that the log names is not in storage (deleted outside
    indexeddf, or by a vacuum of versions older than its retention)."""


class UnsupportedStorageError(IndexedDFError):
    """The storage cannot be used as asked: the filesystem cannot provide the atomic
    put-if-absent that commits need, or Spark's JVM connector has no Hadoop file system for
    the table's scheme (read it through the Python data source, ``indexeddf_python``)."""


class MissingChangeDataError(IndexedDFError):
    """The change data feed was asked for versions whose changes were not recorded
    (``delta.enableChangeDataFeed`` was not true there), by ``IndexedTable.changes``, Spark's
    ``readChangeFeed`` or ``table_changes``: Delta's ``DELTA_MISSING_CHANGE_DATA``. Start the
    range at or after the version that turned the feed on (``DESCRIBE HISTORY`` shows it).
    ``version`` is the first such version (None when the error came from the JVM connector)."""

    def __init__(self, message: str, version: int | None = None):
        super().__init__(message)
        self.version = version
