"""Spark-free reads of a snapshot's row batches into Arrow."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from ..format.datafiles import INT96_UNIT, missing_file
from ..format.snapshot import Snapshot
from ..spec.schema import arrow_schema, check_columns


def read_snapshot(snapshot: Snapshot, columns: Sequence[str] | None = None, filter: pc.Expression | None = None) -> pa.Table:
    """The rows of ``snapshot`` (files in write order), optionally projected and filtered."""
    import pyarrow.dataset as ds  # imported on use: it pulls in pandas, slow to import

    schema = arrow_schema(snapshot.metadata.schema_)
    check_columns(schema.names, columns)
    files = snapshot.live_files()
    if not files:
        empty = schema.empty_table()
        return empty.select(list(columns)) if columns is not None else empty
    storage = snapshot.storage
    # The dataset casts each file's columns to ``schema`` and reads absent ones as NULL,
    # as format/datafiles.py does for the other readers; INT96 in Delta's microseconds.
    parquet = ds.ParquetFileFormat(read_options=ds.ParquetReadOptions(coerce_int96_timestamp_unit=INT96_UNIT))
    try:
        dataset = ds.dataset([storage.full(a.path) for a in files], schema=schema, format=parquet,
                             filesystem=storage.arrow_filesystem())
        return dataset.to_table(columns=list(columns) if columns is not None else None, filter=filter)
    except FileNotFoundError:
        raise _first_missing(snapshot, files) from None


def _first_missing(snapshot: Snapshot, files):
    """The typed error for the first of ``files`` that storage lacks."""
    storage = snapshot.storage
    gone = next((a.path for a in files if not storage.exists(a.path)), files[0].path)
    return missing_file(storage, gone, snapshot.version)
