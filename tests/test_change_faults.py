"""A change Spark planned, killed or failing part way: it leaves its commit or none, and
what it wrote and never committed is removed by ``abort`` or, when the process died, by
``vacuum``; what it committed is never removed.

The Spark side runs in real processes: an executor SIGKILLed in the middle of a MERGE and a
DELETE on the standalone cluster (Spark reruns the lost tasks; the lost attempts' files
become orphans), and a driver SIGKILLed while its tasks write (the table stays at its
version for indexeddf, delta-rs and DuckDB, and a later MERGE works).
"""

from __future__ import annotations

import os
import sys
import urllib.parse

import numpy as np
import pyarrow as pa
import pytest

sys.path.insert(0, os.path.dirname(__file__))

from indexeddf import IndexedTable  # noqa: E402


def _vector_table(path: str, rows: int = 1000) -> IndexedTable:
    data = pa.table({"k": pa.array(range(rows), pa.int64()), "v": pa.array(range(rows), pa.int64())})
    return IndexedTable.create(path, data, index_columns=["k"], num_buckets=2,
                               properties={"delta.enableDeletionVectors": "true"})


def test_an_abort_after_the_commit_keeps_the_committed_deletion_vectors(tmp_path):
    """Spark aborts a write whose commit raised, even when the log entry had landed (the
    metrics file could not be written, or an object store's put timed out after landing):
    the abort must not delete a committed DELETE's deletion vector files, which no data
    file path names."""
    pytest.importorskip("pyspark")
    from indexeddf.spark.apply import FILE, OP, ROW, ApplyWriter

    path = str(tmp_path / "t")
    t = _vector_table(path)
    add = t.snapshot.live_files()[0]
    uri = "file://" + urllib.parse.quote(os.path.join(path, add.path))
    ordinals = np.arange(0, 20, 2)  # a 1000-row table of two buckets: each file holds more
    batch = pa.record_batch({OP: pa.array(["delete"] * len(ordinals)), FILE: pa.array([uri] * len(ordinals)),
                             ROW: pa.array(ordinals, pa.int64())})
    spec = {"operation": "DELETE", "readVersion": t.version, "parameters": "{}",
            "resultFile": str(tmp_path / "missing-folder" / "result.json")}  # the metrics cannot be written
    writer = ApplyWriter(path, {}, spec)
    message = writer.write(iter([batch]))
    assert message.written and all("deletion_vector_" in p for p in message.written)
    with pytest.raises(OSError):
        writer.commit([message])
    writer.abort([message])  # what Spark does when commit raises
    after = IndexedTable.for_path(path)
    assert after.version == t.version + 1
    assert all(os.path.exists(os.path.join(path, p)) for p in message.written)
    assert after.to_arrow().num_rows == 1000 - len(ordinals)
    assert after.history()[0].operation == "DELETE"
