"""A writer process for concurrency tests: appends batches of uniquely keyed rows.

Usage: python append_loop.py TABLE WORKER_ID COUNT ROWS_PER_APPEND [STORAGE_OPTIONS_JSON]
Each row's key is worker * 1_000_000 + append * 1_000 + row, so every row is unique
and a reader can tell which append it came from. Prints the version of each commit.
"""

import json
import sys

import pyarrow as pa

from indexeddf import IndexedTable


def main() -> None:
    path, worker, count, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    options = json.loads(sys.argv[5]) if len(sys.argv) > 5 else None
    table = IndexedTable.for_path(path, storage_options=options)
    for i in range(count):
        base = worker * 1_000_000 + i * 1_000
        keys = pa.array(range(base, base + per), pa.int64())
        batch = pa.table({"k": keys, "worker": pa.array([worker] * per, pa.int32())})
        print(table.append(batch), flush=True)


if __name__ == "__main__":
    main()
