"""The floor of a read of the change data feed: the least work any reader of the same versions
does in this process, with pyarrow and the standard library, no table format code.

- :func:`commits_floor`: the range's commit files read and their ``cdc`` lines (found by how
  they start) parsed by ``json.loads``: what finding a version's change data files costs at
  least (parsing every line costs ten times more: a MERGE's commit is mostly ``add`` and
  ``remove`` lines and its index actions), giving the files' paths.
- :func:`files_floor`: those change data files read into one table by one ``pyarrow.dataset``
  scan (threads, no per-file Python), their paths known in advance.
- :func:`key_floor`: of the files that hold a key's changes (known in advance), only the row
  groups of the key's bucket (the footer names each group's buckets) whose statistics admit the
  key decoded and the key's rows kept: what a read of one key pays with a perfect index over
  the feed (no commit read, no other file opened).

benchmarks/feed.py and benchmarks/feed_keys.py time them beside ``IndexedTable.changes`` and
delta-rs's ``load_cdf``.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from indexeddf.spec.change_data import ROW_GROUP_BUCKETS


def commits_floor(table: Path, first: int, last: int) -> list[str]:
    """The commits of versions ``first..last`` read, their ``cdc`` lines parsed; the change data
    files they name."""
    paths = []
    for v in range(first, last + 1):
        with open(table / "_delta_log" / f"{v:020d}.json", "rb") as f:
            for line in f.read().split(b"\n"):
                if line.startswith(b'{"cdc":'):
                    paths.append(str(table / unquote(json.loads(line)["cdc"]["path"])))
    return paths


def files_floor(paths: list[str]) -> pa.Table:
    """The change data files ``paths`` read into one table by one dataset scan."""
    return ds.dataset(paths, format="parquet").to_table()


def key_floor(paths: list[str], column: str, key: int, bucket: int) -> pa.Table:
    """The rows of ``key`` (of ``bucket``) in the files ``paths``: only the row groups of its
    bucket whose min/max admit it."""
    parts = []
    for p in paths:
        pf = pq.ParquetFile(p)
        at = pf.schema_arrow.get_field_index(column)
        ranges = json.loads((pf.metadata.metadata or {}).get(ROW_GROUP_BUCKETS.encode(), b"null"))
        groups = [g for g in range(pf.metadata.num_row_groups)
                  if (not ranges or not ranges[g] or ranges[g][0] <= bucket <= ranges[g][1])
                  and _admits(pf.metadata.row_group(g).column(at).statistics, key)]
        if groups:
            rows = pf.read_row_groups(groups, use_threads=False)
            parts.append(rows.filter(pc.equal(rows[column], key)))
    return pa.concat_tables(parts)


def _admits(stats, key: int) -> bool:
    return stats is None or not stats.has_min_max or stats.min <= key <= stats.max
