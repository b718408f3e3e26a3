"""Indexing a Delta table that another engine wrote, in place (``IndexedTable.convert``), and
making a Delta table of Parquet files in place (Delta's ``CONVERT TO DELTA``).

Nothing of the data is rewritten. One commit adds indexeddf's settings to the table's
``metaData.configuration`` (index columns, bucket count, any properties given) and the
primary index over every live file. The files keep no bucket (they carry no
``indexeddf.bucket`` tag): readers treat each as holding rows of every bucket until
``optimize(mode="full")`` rewrites them into buckets. Other Delta writers may keep
appending; their files are unindexed appends, found by hybrid scans and indexed by
``refresh``.
"""

from __future__ import annotations

import json

from ..errors import TableExistsError
from ..format.snapshot import Snapshot
from ..format.storage import TableStorage
from ..format.transaction import CommitResult, Transaction
from ..spec import config
from ..spec.actions import IndexEntry
from ..spec.bucket_count import default_num_buckets
from ..spec.features import check_writable, upgraded
from . import lifecycle
from .index_files import INDEX_DIR, PRIMARY
from .index_ops import validate_columns
from .lifecycle import Progress
from .operations import check_num_buckets


def convert_plan(snapshot: Snapshot, index_columns: list[str], num_buckets: int | None,
                 properties: dict[str, str] | None = None) -> tuple[IndexEntry, dict[str, str]]:
    """The checks of :func:`convert_table` and what it commits, before any data is read: the
    primary index's entry (its bucket count chosen) and the table's new configuration. SQL
    ``CONVERT TO INDEXEDDF`` plans with it, builds on executors, then commits with
    :func:`convert_table` (``indexeddf/spark/index_statements.py``)."""
    if snapshot.metadata.indexColumns:
        raise TableExistsError(
            f"{snapshot.storage.url} is already an indexeddf table (indexed by {list(snapshot.metadata.indexColumns)}); "
            "open it with IndexedTable.for_path"
        )
    if num_buckets is not None:
        check_num_buckets(num_buckets)
    columns = list(index_columns)
    validate_columns(snapshot, columns)
    check_writable(snapshot.protocol, snapshot.metadata, snapshot.storage.url)
    conf = {**snapshot.metadata.configuration, **config.validate(properties or {})}
    if num_buckets is None:
        num_buckets = default_num_buckets(sum(a.size for a in snapshot.live_files()), conf)
    entry = IndexEntry(name=PRIMARY, columns=tuple(columns), kind="primary", state="ACTIVE",
                       numBuckets=num_buckets, coveredVersion=snapshot.version)
    return entry, conf


def convert_table(snapshot: Snapshot, index_columns: list[str], num_buckets: int | None,
                  properties: dict[str, str] | None = None, progress: Progress = None,
                  build: lifecycle.Build | None = None) -> CommitResult:
    """Index the Delta table read as ``snapshot`` (loaded with ``unindexed_ok``) by
    ``index_columns`` into ``num_buckets`` buckets: one commit, the data untouched.
    ``num_buckets`` None: chosen from the live files' bytes (``spec/bucket_count.py``).
    ``build``: what writes the primary index's files (``lifecycle.build_files``, in this
    process, when None; ``indexeddf.spark.maintenance.spark_build`` runs it as a Spark job)."""
    build = build or lifecycle.build_files
    entry, conf = convert_plan(snapshot, index_columns, num_buckets, properties)
    columns, num_buckets = list(entry.columns), entry.numBuckets
    metadata = snapshot.metadata.model_copy(
        update={"indexColumns": tuple(columns), "numBuckets": num_buckets, "configuration": conf})
    tx = Transaction(snapshot, "CONVERT", {"indexColumns": columns, "numBuckets": num_buckets}, read_buckets=())
    try:
        files = build(snapshot, entry, snapshot.live_files(), tx.written_paths, f"{INDEX_DIR}/{PRIMARY}", progress)
    except BaseException:
        tx.abort()
        raise
    entry = entry.model_copy(update={"files": tuple(files)})
    protocol = upgraded(snapshot.protocol, conf)  # a property given may need a feature (the feed, DVs)
    upgrade = [protocol] if protocol != snapshot.protocol else []
    return tx.commit([*upgrade, metadata, entry], {"numIndexFiles": len(files), "numIndexedRows": sum(f.numEntries for f in files)})


SPARK_TYPES = {"int": "integer", "integer": "integer", "bigint": "long", "long": "long", "smallint": "short",
               "short": "short", "tinyint": "byte", "byte": "byte", "string": "string", "boolean": "boolean",
               "double": "double", "float": "float", "date": "date", "timestamp": "timestamp",
               "timestamp_ntz": "timestamp_ntz", "binary": "binary"}
"""Spark SQL type names of ``PARTITIONED BY (c type)`` as the log's type names."""


def convert_parquet(storage: TableStorage, partitions: list[tuple[str, str]], collect_stats: bool = True) -> None:
    """Delta's ``CONVERT TO DELTA parquet.`/path```: version 0 of a Delta table over the Parquet
    files under ``storage``'s root, in place (no file is rewritten; names starting with ``_`` or
    ``.`` are skipped, as Spark skips them). ``partitions``: the partition columns and their Spark
    types (``PARTITIONED BY``), which the folders name (``c=value``); a folder layout that names
    other columns is ``InvalidOptionError``, as in Delta. ``collect_stats``: per-file statistics
    (``NO STATISTICS``: the row count only). One commit, operation ``CONVERT`` with Delta's
    parameters; nothing when there is a Delta table already (Delta's convert does nothing then).
    The table has no index columns until ``convert_table`` indexes it."""
    import secrets
    import time
    import uuid
    from urllib.parse import unquote

    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..errors import InvalidOptionError, NotIndexedError, TableNotFoundError
    from ..format.snapshot import load_snapshot
    from ..format.transaction import commit_create
    from ..spec.actions import AddFile, FileStats, Metadata
    from ..spec.features import protocol_for
    from ..spec.schema import Field, fields_from_arrow
    from .files import file_stats

    try:
        load_snapshot(storage, unindexed_ok=True)
        return
    except TableNotFoundError:
        pass
    names = [c for c, _ in partitions]
    types = {}
    for c, t in partitions:
        kind = SPARK_TYPES.get(t.strip().lower())
        if kind is None and not t.strip().lower().startswith("decimal("):
            raise InvalidOptionError(f"CONVERT TO DELTA ... PARTITIONED BY ({c} {t}): type {t} is not supported for "
                                     f"a partition column; use one of {sorted(SPARK_TYPES)} or decimal(p, s)")
        types[c] = kind or t.strip().lower().replace(" ", "")
    root = storage.root.rstrip("/")
    found = sorted(p for p in storage.fs.find(root) if p.endswith(".parquet"))
    rels = [p[len(root):].lstrip("/") for p in found]
    rels = [r for r in rels if not any(part.startswith(("_", ".")) for part in r.split("/"))]
    if not rels:
        raise TableNotFoundError(f"CONVERT TO DELTA: there are no Parquet files under {storage.url}")
    adds, schema = [], None
    for rel in rels:
        dirs = [d.split("=", 1) for d in rel.split("/")[:-1]]
        if [d[0] for d in dirs] != names or any(len(d) != 2 for d in dirs):
            raise InvalidOptionError(
                f"CONVERT TO DELTA: expecting {len(names)} partition column(s) {names} (PARTITIONED BY), but the "
                f"file {rel} is in the folders {rel.split('/')[:-1]}; name the partition columns, in folder order")
        values = {k: (None if v == "__HIVE_DEFAULT_PARTITION__" else unquote(v)) for k, v in dirs}
        with storage.fs.open(storage.full(rel), "rb") as f:
            pf = pq.ParquetFile(f)
            file_schema = pf.schema_arrow
            rows = pf.read() if collect_stats else None
            num_rows = pf.metadata.num_rows
        if schema is None:
            schema = file_schema
        elif not file_schema.equals(schema):
            raise InvalidOptionError(f"CONVERT TO DELTA: {rel} has the schema {file_schema}, other files {schema}: "
                                     "convert files of one schema")
        stats = file_stats(rows) if rows is not None else FileStats(numRecords=num_rows)
        adds.append(AddFile(path=rel, size=storage.fs.size(storage.full(rel)),
                            modificationTime=storage.modified_ms(rel) or int(time.time() * 1000), bucket=None,
                            fileId=secrets.randbits(63), stats=stats, partitionValues=values))
    fields = fields_from_arrow(pa.schema([f.with_nullable(True) for f in schema]))
    clash = [c for c in names if c in [f.name for f in fields]]
    if clash:
        raise InvalidOptionError(f"CONVERT TO DELTA: the partition columns {clash} are also columns of the files")
    fields = (*fields, *(Field(name=c, type=types[c], nullable=True) for c in names))
    metadata = Metadata(id=str(uuid.uuid4()), schema=fields, indexColumns=(), numBuckets=1,
                        createdTime=int(time.time() * 1000), partitionColumns=tuple(names))
    params = {"numFiles": len(adds), "partitionedBy": json.dumps(names), "collectStats": collect_stats,
              "sourceFormat": "parquet"}
    try:
        commit_create(storage, [protocol_for(fields, {}), metadata, *adds], params, [],
                      {"numConvertedFiles": len(adds)}, operation="CONVERT")
    except NotIndexedError:
        pass  # committed: a Delta table without index columns, which indexeddf's snapshot refuses to hold
