"""Deletion vectors added to a table by a hand-written commit, as another Delta writer
(Delta Spark's DELETE with ``delta.enableDeletionVectors``) would add them.

:func:`mark_deleted` commits, per data file, a ``remove`` of the logical file as it is
(path and its current deletion vector) and an ``add`` of the same file with a deletion
vector holding the old deleted rows and the new ones; the protocol is upgraded to reader
3 / writer 7 with ``deletionVectors`` first when the table lacks the feature.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from indexeddf.format.deletion_vectors import inline_descriptor, read_deletion_vector, write_deletion_vectors
from indexeddf.format.log import list_log
from indexeddf.format.snapshot import load_snapshot
from indexeddf.format.storage import TableStorage
from indexeddf.spec.delta import encode_action, protocol_object
from indexeddf.spec.features import with_table_features


def mark_deleted(path: str, deleted: dict[str, "np.ndarray | list[int]"], *, inline: bool = False,
                 removes_last: bool = False, prefix: str = "", upgrade: bool = True) -> int:
    """Commit deletion vectors deleting ``deleted[file path]`` (row ordinals) from those
    live files (on top of what their current DVs delete); returns the new version.
    ``inline``: DVs in the log; ``removes_last``: the adds before the removes in the
    commit (replay must not depend on the order); ``prefix``: a random-prefix folder;
    ``upgrade=False``: leave the protocol as it is (a table that breaks Delta's rule)."""
    storage = TableStorage(path)
    snap = load_snapshot(storage, unindexed_ok=True)
    files, rows = [], []
    for p in deleted:
        a = snap.files[p]
        old = read_deletion_vector(storage, a.deletionVector) if a.deletionVector is not None else np.empty(0, np.uint64)
        new = np.union1d(old, np.asarray(deleted[p], dtype=np.uint64))
        if len(new) > len(old):  # an unchanged DV would remove and add one logical file in one commit
            files.append(a)
            rows.append(new)
    dvs = [inline_descriptor(r) for r in rows] if inline else write_deletion_vectors(storage, rows, prefix=prefix)
    now = max(int(time.time() * 1000), snap.timestamp + 1)
    lines = [json.dumps({"commitInfo": {"timestamp": now, "operation": "DELETE", "readVersion": snap.version}})]
    protocol = with_table_features(snap.protocol, {"deletionVectors"})
    if upgrade and protocol != snap.protocol:
        lines.append(json.dumps({"protocol": protocol_object(protocol)}))
    removes = [encode_action(a.removal(now)) for a in files]
    adds = [encode_action(a.model_copy(update={"deletionVector": dv})) for a, dv in zip(files, dvs)]
    lines += (adds + removes) if removes_last else (removes + adds)
    version = max(list_log(storage)[0]) + 1
    (Path(path) / "_delta_log" / f"{version:020d}.json").write_text("".join(line + "\n" for line in lines))
    return version


def file_rows(path: str, file_path: str) -> int:
    """The rows of one data file of the table (its Parquet row count)."""
    import pyarrow.parquet as pq

    return pq.ParquetFile(str(Path(path) / file_path)).metadata.num_rows
