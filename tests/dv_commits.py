"""Hand-written deletion-vector commits for the connector's tests (a plain module beside the tests, not a test file).

Marks rows of a table's data files deleted the way a Delta writer with deletion vectors does:
one commit with, per file, a ``remove`` of the file with its old DV (if any) and an ``add`` of
the same file with the new DV (the union of the old and the new deleted rows), the protocol
upgraded to reader 3 / writer 7 with the ``deletionVectors`` feature first. The DV bytes come from
``indexeddf.format.deletion_vectors``; the live files are replayed from the JSON commits here, by
(path, DV unique id), so this works while indexeddf's own readers may still refuse DV tables.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from indexeddf.format.deletion_vectors import inline_descriptor, read_deletion_vector, write_deletion_vectors
from indexeddf.format.storage import TableStorage
from indexeddf.spec.deletion_vectors import DeletionVectorDescriptor


def _commits(path) -> list[tuple[int, list[dict]]]:
    log = Path(path) / "_delta_log"
    return [(int(f.name[:20]), [json.loads(line) for line in f.read_text().splitlines() if line.strip()])
            for f in sorted(log.glob("*.json"))]


def _dv(body: dict) -> DeletionVectorDescriptor | None:
    d = body.get("deletionVector")
    return None if d is None else DeletionVectorDescriptor.model_validate({k: v for k, v in d.items() if v is not None})


def _key(body: dict) -> tuple[str, str | None]:
    d = _dv(body)
    return body["path"], None if d is None else d.unique_id


def live_adds(path) -> dict[str, dict]:
    """The ``add`` actions of the live files of the newest version, by data file path."""
    live: dict[tuple[str, str | None], dict] = {}
    for _, actions in _commits(path):
        for a in actions:
            if "add" in a:
                live[_key(a["add"])] = a["add"]
            elif "remove" in a:
                live.pop(_key(a["remove"]), None)
    return {p: body for (p, _), body in live.items()}


def _protocol(path) -> dict:
    out = {}
    for _, actions in _commits(path):
        for a in actions:
            out = a.get("protocol", out)
    return out


def ordinals_where(path, column: str, values) -> dict[str, np.ndarray]:
    """Per live data file, the ordinals of its rows whose ``column`` is one of ``values`` (files
    with none left out)."""
    out = {}
    for file in live_adds(path):
        col = pq.read_table(Path(path) / file, columns=[column])[column]
        hit = np.flatnonzero(pc.is_in(col, value_set=pa.array(list(values), col.type)).to_numpy(zero_copy_only=False))
        if hit.size:
            out[file] = hit
    return out


def file_rows(path, file: str) -> int:
    """The rows a data file holds (deleted ones too)."""
    return pq.ParquetFile(Path(path) / file).metadata.num_rows


def delete_rows(path, deleted: dict[str, np.ndarray | list[int]], *, inline: bool = False, prefix: str = "",
                add_first: bool = False) -> int:
    """Commits DVs deleting ``deleted`` (data file path -> row ordinals) on top of the files'
    DVs; inline DVs in the log with ``inline``, else one DV file (under ``prefix/``); each file's
    ``add`` before its ``remove`` with ``add_first`` (a commit's actions have no order). Returns
    the new version."""
    storage = TableStorage(str(path))
    adds = live_adds(path)
    files = list(deleted)
    sets = []
    for f in files:
        old = _dv(adds[f])
        rows = np.asarray(deleted[f], dtype=np.uint64)
        if old is not None:
            rows = np.union1d(rows, read_deletion_vector(storage, old))
        sets.append(rows)
    descriptors = [inline_descriptor(s) for s in sets] if inline else write_deletion_vectors(storage, sets, prefix=prefix)
    version = _commits(path)[-1][0] + 1
    now = int(time.time() * 1000)
    lines: list[dict] = [{"commitInfo": {"timestamp": now, "operation": "DELETE",
                                         "operationParameters": {"predicate": "deletion vectors (test)"}}}]
    proto = _protocol(path)
    if "deletionVectors" not in proto.get("readerFeatures", []):
        writer = proto.get("writerFeatures") or (["appendOnly", "invariants"] if proto.get("minWriterVersion", 1) >= 2 else [])
        lines.append({"protocol": {"minReaderVersion": 3, "minWriterVersion": 7,
                                   "readerFeatures": sorted(set(proto.get("readerFeatures", [])) | {"deletionVectors"}),
                                   "writerFeatures": sorted(set(writer) | {"deletionVectors"})}})
    for f, d in zip(files, descriptors):
        add = adds[f]
        remove = {"path": f, "deletionTimestamp": now, "dataChange": True, "extendedFileMetadata": True,
                  "partitionValues": {}, "size": add["size"], "tags": add.get("tags")}
        if add.get("deletionVector") is not None:
            remove["deletionVector"] = add["deletionVector"]
        pair = [{"remove": remove},
                {"add": {**add, "modificationTime": now, "dataChange": True, "deletionVector": d.wire()}}]
        lines += pair[::-1] if add_first else pair
    with open(Path(path) / "_delta_log" / f"{version:020d}.json", "x") as out:  # put-if-absent
        out.write("".join(json.dumps(x) + "\n" for x in lines))
    return version


def delete_keys(path, column: str, values, **kw) -> int:
    """Deletes with DVs every live row whose ``column`` is one of ``values``."""
    return delete_rows(path, ordinals_where(path, column, values), **kw)


def write_checkpoint(path) -> int:
    """Writes a classic Parquet checkpoint of the newest version (Delta's checkpoint schema, as
    ``indexeddf.format.checkpoint`` writes it: DVs in ``add.deletionVector``) from the JSON
    commits, and points ``_last_checkpoint`` at it. Returns the version."""
    from indexeddf.format import checkpoint as ckpt

    version = _commits(path)[-1][0]
    meta = {}
    for _, actions in _commits(path):
        for a in actions:
            meta = a.get("metaData", meta)
    proto = {"readerFeatures": None, "writerFeatures": None, **_protocol(path)}
    meta = {**meta, "format": {"provider": "parquet", "options": []},
            "configuration": list(meta.get("configuration", {}).items())}
    rows = [{"protocol": proto}, {"metaData": meta}]
    for add in live_adds(path).values():
        rows.append({"add": {**add, "partitionValues": [], "tags": list((add.get("tags") or {}).items())}})
    buf = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pylist(rows, schema=ckpt._SCHEMA), buf)
    log = Path(path) / "_delta_log"
    (log / f"{version:020d}.checkpoint.parquet").write_bytes(buf.getvalue().to_pybytes())
    (log / "_last_checkpoint").write_text(json.dumps({"version": version, "size": len(rows)}))
    return version
