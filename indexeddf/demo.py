"""A tour of indexeddf on a local folder: ``python -m indexeddf.demo [FOLDER]``.

Creates a table, appends to it (once idempotently, twice), shows the history, travels
back in time by version and by timestamp, and overwrites, printing as it goes.
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

import pyarrow as pa

from . import IndexedTable


def events(start: int, n: int) -> pa.Table:
    """``n`` example events with user ids starting at ``start``."""
    ids = range(start, start + n)
    return pa.table(
        {
            "user_id": pa.array([i % 1000 for i in ids], pa.int64()),
            "event": pa.array([("click", "view", "buy")[i % 3] for i in ids]),
            "amount": pa.array([round(i * 0.25, 2) for i in ids], pa.float64()),
        }
    )


def step(text: str) -> None:
    print(f"\n== {text}", flush=True)


def main(folder: str) -> None:
    root = Path(folder).resolve()
    path = root / "events"
    if path.exists():
        shutil.rmtree(path)
    step(f"create a table at {path}, bucketed by user_id into 8 buckets")
    t = IndexedTable.create(str(path), events(0, 10_000), index_columns=["user_id"], num_buckets=8)
    print(f"version {t.version}: {t.snapshot.num_records()} rows in {len(t.snapshot.files)} files")
    print(f"schema: {t.schema.to_string(show_schema_metadata=False).replace(chr(10), ', ')}")

    step("append twice (each append is one commit)")
    for start in (10_000, 12_000):
        time.sleep(0.01)
        v = t.append(events(start, 2_000))
        print(f"version {v}: {t.snapshot.num_records()} rows")
    middle = t.history(limit=1)[0].timestamp

    step("append idempotently with txn=('pipeline-a', 1), then retry the same batch")
    first = t.append(events(14_000, 500), txn=("pipeline-a", 1))
    retry = t.append(events(14_000, 500), txn=("pipeline-a", 1))
    print(f"first attempt committed version {first}; the retry committed nothing (still {retry})")

    step("history, newest first")
    for h in t.history():
        rows = h.metrics.get("numOutputRows", "")
        print(f"  v{h.version}  {h.timestamp:%H:%M:%S.%f}  {h.operation:<12} {h.parameters}  rows={rows}")

    step("time travel")
    for v in range(t.version + 1):
        print(f"  version {v}: {t.to_arrow(version=v).num_rows} rows")
    at = IndexedTable.for_path(str(path), timestamp=middle)
    print(f"  as of {middle.isoformat()}: version {at.version}, {at.to_arrow().num_rows} rows")
    amounts = t.to_arrow(columns=["user_id", "amount"]).filter(pa.compute.equal(pa.compute.field("user_id"), 42))
    print(f"  user 42 has {amounts.num_rows} events now, total amount {pa.compute.sum(amounts['amount']).as_py()}")

    step("overwrite with 100 rows; the old versions stay readable")
    v = t.overwrite(events(0, 100))
    print(f"version {v}: {t.to_arrow().num_rows} rows; version 0 still has {t.to_arrow(version=0).num_rows}")
    print(f"\nThe table is in {path}; its log is in {path / '_indexeddf_log'}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "./demo-lake")
